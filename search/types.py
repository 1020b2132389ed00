"""The engine's value types: one typed query in, one typed result out (frozen dataclasses)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Literal

from search.errors import InvalidQuery
from search.principal import ANONYMOUS, Principal

Corpus = Literal["live", "latest"]
Granularity = Literal["item", "chunk"]
Mode = Literal["hybrid", "lexical", "vector"]
Lane = Literal["lexical", "vector"]

# Shared limits: every surface validates against these same numbers.
MAX_QUERY_CHARS = 2000
MAX_LIMIT = 100
MCP_MAX_LIMIT = 30
PREVIEW_MAX_LIMIT = 20
DEFAULT_LIMIT = 20
SITE_THRESHOLD = 0.35
CLI_THRESHOLD = 0.25


MAX_REVIEW_DUE_DAYS = 365
MAX_FRESHNESS_DAYS = 3650


@dataclass(frozen=True)
class SearchFilters:
    domain: tuple[str, ...] = ()
    subtopic: tuple[str, ...] = ()
    content_type: tuple[str, ...] = ()
    platform: tuple[str, ...] = ()
    author: tuple[str, ...] = ()
    layer: tuple[str, ...] = ()
    source: tuple[str, ...] = ()
    language: str | None = None
    include_qa: bool = True
    date_from: date | None = None
    date_to: date | None = None
    freshness_days: int | None = None
    overdue_review: bool | None = None
    review_due_within_days: int | None = None
    content_item_id: int | None = None
    include_superseded: bool = False
    unread_only: bool = False

    def __post_init__(self) -> None:
        """Day counts every surface sends are refused here, once, in the same words (a count past the
        calendar's range would otherwise fail deep in a date computation)."""
        for name, low, high in (("review_due_within_days", 1, MAX_REVIEW_DUE_DAYS),
                                ("freshness_days", 1, MAX_FRESHNESS_DAYS)):
            value = getattr(self, name)
            if value is not None and not low <= value <= high:
                raise InvalidQuery(f"{name} must be between {low} and {high} (got {value}).", field=name)


@dataclass(frozen=True)
class RetrievalQuery:
    text: str = ""
    principal: Principal = ANONYMOUS
    corpus: Corpus = "live"
    filters: SearchFilters = field(default_factory=SearchFilters)
    granularity: Granularity = "item"
    mode: Mode = "hybrid"
    limit: int = DEFAULT_LIMIT
    cursor: str | None = None
    threshold: float = SITE_THRESHOLD
    similar_to: int | None = None
    with_facets: bool = False
    # Who asked, for the query log and per-surface metrics (never used for ranking or access).
    surface: str = "internal"
    tool: str | None = None


@dataclass(frozen=True)
class Span:
    """Character offsets [start, end) of a matched word inside the text it belongs to."""

    start: int
    end: int


@dataclass(frozen=True)
class Hit:
    item_id: int
    external_id: str
    slug: str
    title: str
    url: str
    content_type: str
    primary_domain: str
    language: str
    updated_at: datetime
    review_status: str
    score: float
    lanes: tuple[Lane, ...]
    lane_ranks: dict[str, int]
    chunk_id: int | None
    toc_path: str
    passage: str
    passage_spans: tuple[Span, ...]
    title_spans: tuple[Span, ...]
    summary: str = ""
    ai_keywords: tuple[str, ...] = ()
    closed: bool = False
    superseded: bool = False
    similarity: float | None = None
    # The query words this hit does not hold (title, body, keywords; an item over all its passages), as
    # typed; empty for a complete match and for a search without words.
    missing_words: tuple[str, ...] = ()

    @property
    def lanes_text(self) -> str:
        """``lexical #1 + vector #3``: the lanes that found the hit and its rank in each, as every surface says it."""
        return lanes_text(self.lanes, self.lane_ranks)


# What ``partial_match`` means, said the same way by every surface (JSON, GraphQL, MCP, CLI, the site).
PARTIAL_MATCH = (
    "True when no result holds every query word: the results are the best partial matches, and each hit's "
    "missing_words lists the words it lacks. False when some result holds them all, or nothing matched."
)
MISSING_WORDS = "The query words this hit does not hold (as typed); empty for a complete match."


@dataclass(frozen=True)
class RetrievalResult:
    hits: tuple[Hit, ...] = ()
    total: int = 0
    partial_match: bool = False
    degraded: tuple[str, ...] = ()
    next_cursor: str | None = None
    facets: dict[str, dict[str, int]] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)
    suggestion: str | None = None

    @property
    def count(self) -> int:
        return self.total


def lanes_text(lanes: Sequence[str], ranks: dict[str, int]) -> str:
    """``lexical #1 + vector #3`` (``-`` when no lane found it, e.g. an item listed without a query)."""
    return " + ".join(f"{lane} #{ranks[lane]}" if lane in ranks else lane for lane in lanes) or "-"
