"""Passages and match spans: which words of a text matched the query, as character offsets.

Adapters render spans their own way (``<mark>`` in HTML, offsets in MCP); nothing here is HTML.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from search.text import analysis
from search.text.query_parser import ParsedQuery
from search.types import Span

PASSAGE_CHARS = 480


@lru_cache(maxsize=100_000)
def _word_forms(word: str, lang: str) -> tuple[frozenset[str], frozenset[str]] | None:
    """A word as written → its folded forms (Arabic clitic stripped too) and their stems; None for a stop
    word. Query-independent, so a page's words are analysed once per process, not once per search."""
    folded = analysis.fold(word)
    if not folded or folded in analysis.all_stop_words():
        return None
    variants = (folded, *analysis.arabic_clitic_variants(folded))
    return frozenset(variants), frozenset(analysis.stem(variant, lang) for variant in variants)


@lru_cache(maxsize=256)  # one matcher per query and language: the hits of a page share its memo
def _body_matcher(parsed: ParsedQuery, language: str, extra_forms: tuple[Any, ...] = ()):  # type: ignore[no-untyped-def]
    surfaces = frozenset({s for t in parsed.terms for s in t.surfaces} | {e.form for e in extra_forms})
    stems = frozenset({s for t in parsed.terms for s in t.stems} | {s for e in extra_forms for s in e.stems})
    lang = language if language in analysis.STEM_LANGUAGES else "simple"
    seen: dict[str, bool] = {}  # texts repeat their words: decide each word as written once

    def matches(word: str) -> bool:
        """Whether ``word`` (as written, one ``analysis.WORD_RE`` match) is a query word in some form:
        one of its folded forms is a query surface, or one of their stems a query stem."""
        known = seen.get(word)
        if known is None:
            forms = _word_forms(word, lang)
            known = forms is not None and not (forms[0].isdisjoint(surfaces) and forms[1].isdisjoint(stems))
            seen[word] = known
        return known

    return matches


def body_spans(text: str, parsed: ParsedQuery, language: str, extra_forms: Sequence[Any] = ()) -> list[Span]:
    """Offsets of the words of ``text`` that match the query (the tokens of ``analysis.tokens``)."""
    if not parsed.searchable or not text:
        return []
    matches = _body_matcher(parsed, language, tuple(extra_forms))
    return [Span(m.start(), m.end()) for m in analysis.WORD_RE.finditer(text) if matches(m.group(0))]


@lru_cache(maxsize=256)
def _title_forms(parsed: ParsedQuery) -> tuple[frozenset[str], tuple[str, ...]]:
    """Every term's title forms, and the forms of prefix terms (a title word may start with those)."""
    exact = frozenset(f for t in parsed.terms for f in t.title_forms)
    prefixes = tuple(sorted({f for t in parsed.terms if t.prefix for f in t.title_forms}))
    return exact, prefixes


def title_spans(title: str, parsed: ParsedQuery) -> list[Span]:
    """Title words as written (article stripped) or starting with a query word; never by stem."""
    if not parsed.searchable:
        return []
    exact, prefixes = _title_forms(parsed)
    spans = []
    for token in analysis.tokens(title):
        if token.folded in analysis.TITLE_ARTICLES:
            continue
        form = analysis.title_form(token.folded)
        if form in exact or (prefixes and form.startswith(prefixes)):
            spans.append(Span(token.start, token.end))
    return spans


def make_passage(
    text: str, parsed: ParsedQuery, language: str, *, max_chars: int = PASSAGE_CHARS, extra_forms: Sequence[Any] = ()
) -> tuple[str, list[Span]]:
    """The chunk text, or a window of it around the densest run of matches, with spans relative to it.

    ``extra_forms`` are the engine's expansions (synonyms, typo corrections), highlighted too.
    """
    spans = body_spans(text, parsed, language, extra_forms)
    if len(text) <= max_chars:
        return text, spans
    start = 0
    if spans:
        best, best_count = spans[0].start, 0
        for span in spans:
            count = sum(1 for other in spans if span.start <= other.start < span.start + max_chars)
            if count > best_count:
                best, best_count = span.start, count
        start = max(0, best - max_chars // 4)
        # Begin at a word boundary.
        if start > 0:
            space = text.rfind(" ", 0, start)
            start = space + 1 if space != -1 and start - space < 40 else start
    end = min(len(text), start + max_chars)
    if end < len(text):
        space = text.rfind(" ", start, end)
        end = space if space > start + max_chars // 2 else end
    window = text[start:end]
    prefix = "…" if start > 0 else ""
    suffix = "…" if end < len(text) else ""
    shift = len(prefix) - start
    inside = [Span(s.start + shift, s.end + shift) for s in spans if s.start >= start and s.end <= end]
    return prefix + window + suffix, inside
