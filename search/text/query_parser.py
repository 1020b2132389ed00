"""Query text → terms, in one place. An empty or unsearchable query never reaches the database."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from search import filters
from search.errors import InvalidQuery
from search.text import analysis
from search.types import MAX_QUERY_CHARS

MAX_TERMS = 32
# Longer "words" (pasted hashes, floods of one letter) are not searched: PostgreSQL refuses tsquery
# lexemes past 2046 bytes and levenshtein() past 255 characters, and no document word is that long.
MAX_TERM_CHARS = 255
# Words shorter than this do not match titles as a prefix (``a`` would match every title).
MIN_PREFIX_CHARS = 3


@dataclass(frozen=True)
class QueryTerm:
    """One query word and every form it may match in the same query."""

    written: str
    folded: str
    stems: tuple[str, ...]
    surfaces: tuple[str, ...]
    title_forms: tuple[str, ...]
    prefix: bool


@dataclass(frozen=True)
class ParsedQuery:
    text: str
    terms: tuple[QueryTerm, ...]

    @property
    def searchable(self) -> bool:
        return bool(self.terms)

    def all_stems(self) -> list[str]:
        return sorted({s for t in self.terms for s in t.stems})

    def all_surfaces(self) -> list[str]:
        return sorted({s for t in self.terms for s in t.surfaces})

    @cached_property
    def forms(self) -> tuple[frozenset[str], frozenset[str]]:
        """Every surface form and every stem of the query's terms, once per query: a text's words meet one of
        them exactly when the text holds some query term (the rerank asks that of each candidate)."""
        return (
            frozenset(s for t in self.terms for s in t.surfaces),
            frozenset(s for t in self.terms for s in t.stems),
        )


def normalize_query_text(raw: str) -> str:
    """Strip invisible characters and NULs, collapse whitespace."""
    cleaned = analysis.strip_invisible(raw.replace("\x00", " "))
    cleaned = "".join(ch if ch.isprintable() or ch.isspace() else " " for ch in cleaned)
    return " ".join(cleaned.split())


def validate_query_text(raw: str, *, field: str = "query", max_chars: int = MAX_QUERY_CHARS) -> str:
    text = normalize_query_text(raw)
    if len(text) > max_chars:
        raise InvalidQuery(f"{field} is {len(text)} characters long; shorten it to {max_chars} or fewer.", field=field)
    return text


def check_filter_text(value: str, *, field: str = "filters") -> str:
    """``value`` unchanged, or ``InvalidQuery`` when PostgreSQL cannot take it (a NUL, a lone surrogate)."""
    return filters.check_text(value, name=field)


def parse(raw: str) -> ParsedQuery:
    text = normalize_query_text(raw)
    stops = analysis.all_stop_words()
    terms: list[QueryTerm] = []
    seen: set[str] = set()
    for token in analysis.tokens(text):
        if token.folded in stops or token.folded in seen or len(token.folded) > MAX_TERM_CHARS:
            continue
        seen.add(token.folded)
        variants = [token.folded, *analysis.arabic_clitic_variants(token.folded)]
        stems = {analysis.stem(v, lang) for v in variants for lang in analysis.STEM_LANGUAGES} | set(variants)
        titles = {analysis.title_form(v) for v in variants if v not in analysis.TITLE_ARTICLES}
        terms.append(
            QueryTerm(
                written=token.text,
                folded=token.folded,
                stems=tuple(sorted(stems)),
                surfaces=tuple(variants),
                title_forms=tuple(sorted(titles)),
                prefix=len(token.folded) >= MIN_PREFIX_CHARS,
            )
        )
        if len(terms) >= MAX_TERMS:
            break
    return ParsedQuery(text=text, terms=tuple(terms))
