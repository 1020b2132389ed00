"""Rerank: blend the fused lane score with the signals the reference system used.

final = fused × (1 + Σ signal weights) × (1 + WIN_RATE_WEIGHT × win rate)

- title: share of query terms written in the title (as written or as a prefix);
- keywords / summary / author: a query term among the item's ai_keywords, in its summary, in its author;
- recency: linear boost for items updated in the last 30 days (1 today → 0 at 30 days);
- win rate: the share of won bids among an item's decided citations, for items with at least 2.
Weights were set on the SciFact train split and the demo corpus (docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from search.text import analysis
from search.text.query_parser import ParsedQuery

TITLE_WEIGHT = 0.10
KEYWORD_WEIGHT = 0.04
SUMMARY_WEIGHT = 0.02
AUTHOR_WEIGHT = 0.02
RECENCY_WEIGHT = 0.03
RECENCY_DAYS = 30
WIN_RATE_WEIGHT = 0.03
MIN_DECIDED_CITATIONS = 2


@dataclass(frozen=True)
class ItemSignals:
    title: str
    summary: str
    author_name: str
    ai_keywords: tuple[str, ...]
    updated_at: datetime
    language: str
    won: int = 0
    decided: int = 0


# Item texts (titles, summaries, keywords) come back in search after search: their word sets are cached.
@lru_cache(maxsize=50_000)
def _words(text: str, language: str) -> tuple[frozenset[str], frozenset[str]]:
    lang = language if language in analysis.STEM_LANGUAGES else "simple"
    folded = frozenset(t.folded for t in analysis.tokens(text))
    return folded, frozenset(analysis.stem(f, lang) for f in folded)


@dataclass(frozen=True)
class _TitleWords:
    words: frozenset[str]
    # "\0word\0word…": a word starts with a form exactly when "\0" + form occurs in it (words hold no NUL)
    joined: str

    def has_prefix(self, forms: tuple[str, ...]) -> bool:
        return any("\0" + form in self.joined for form in forms)


@lru_cache(maxsize=50_000)
def _title_words(title: str) -> _TitleWords:
    words = [analysis.title_form(t.folded) for t in analysis.tokens(title)]
    return _TitleWords(frozenset(words), "".join("\0" + word for word in words))


def _holds_a_term(parsed: ParsedQuery, text: str, language: str) -> bool:
    """``text`` holds at least one query term (as written, or its stem)."""
    if not text:
        return False
    folded, stems = _words(text, language)
    surfaces, query_stems = parsed.forms
    return not folded.isdisjoint(surfaces) or not stems.isdisjoint(query_stems)


def win_rate(won: int, decided: int) -> float:
    """Won among decided citations, 0–1 (0 below MIN_DECIDED_CITATIONS). Clamped: counts that disagree (more wins
    than decisions) must not push the factor past ``max_factor``, the bound fusion prunes with."""
    return min(1.0, max(0.0, won / decided)) if decided >= MIN_DECIDED_CITATIONS else 0.0


def max_factor() -> float:
    """The largest factor ``rerank_factor`` can return (every signal at its top); it is never below 1."""
    boost = TITLE_WEIGHT + KEYWORD_WEIGHT + SUMMARY_WEIGHT + AUTHOR_WEIGHT + RECENCY_WEIGHT
    return (1 + boost) * (1 + WIN_RATE_WEIGHT)


def rerank_factor(parsed: ParsedQuery, signals: ItemSignals, now: datetime) -> float:
    boost = 0.0
    n = len(parsed.terms)
    if n:
        title = _title_words(signals.title)
        title_hits = sum(
            1 for t in parsed.terms
            if t.title_forms and (
                not title.words.isdisjoint(t.title_forms) or (t.prefix and title.has_prefix(t.title_forms))
            )
        )
        boost += TITLE_WEIGHT * title_hits / n
        boost += KEYWORD_WEIGHT * _holds_a_term(parsed, " ".join(signals.ai_keywords), signals.language)
        boost += SUMMARY_WEIGHT * _holds_a_term(parsed, signals.summary, signals.language)
        boost += AUTHOR_WEIGHT * _holds_a_term(parsed, signals.author_name, "simple")
    age_days = (now - signals.updated_at).total_seconds() / 86400
    if 0 <= age_days < RECENCY_DAYS:
        boost += RECENCY_WEIGHT * (1 - age_days / RECENCY_DAYS)
    return (1 + boost) * (1 + WIN_RATE_WEIGHT * win_rate(signals.won, signals.decided))
