"""The engine's value types: one typed query in, one typed result out (frozen dataclasses)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from search.errors import InvalidQuery
from search.filters import SearchFilters as SearchFilters  # declared with its limits there; re-exported
from search.principal import ANONYMOUS, Principal

Corpus = Literal["live", "latest"]
Granularity = Literal["item", "chunk"]
Mode = Literal["hybrid", "lexical", "vector"]
Lane = Literal["lexical", "vector"]
LANES: tuple[Lane, ...] = ("lexical", "vector")

# Shared limits: every surface validates against these same numbers.
MAX_QUERY_CHARS = 2000
MAX_LIMIT = 100
MCP_MAX_LIMIT = 30
PREVIEW_MAX_LIMIT = 20
DEFAULT_LIMIT = 20
# Confidence floors (``Hit.confidence``, a calibrated probability of relevance): below them a hit is not an
# answer. The site, JSON and GraphQL share SITE_THRESHOLD; agents (MCP) and the CLI see a little further.
SITE_THRESHOLD = 0.35
MCP_THRESHOLD = 0.3
CLI_THRESHOLD = 0.25


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
    # The confidence floor (``Hit.confidence``): hits below it are not answers. Not applied to ``similar_to``
    # (neighbours of an item, not answers to a question). 0: the full ranking.
    threshold: float = SITE_THRESHOLD
    similar_to: int | None = None
    with_facets: bool = False
    # Who asked, for the query log and per-surface metrics (never used for ranking or access).
    surface: str = "internal"
    tool: str | None = None

    def __post_init__(self) -> None:
        """A query the engine cannot run is refused when built, so every surface refuses it the same way."""
        if not 1 <= self.limit <= MAX_LIMIT:
            raise InvalidQuery(f"limit must be between 1 and {MAX_LIMIT} (got {self.limit}).", field="limit")
        if not 0.0 <= self.threshold <= 1.0:
            raise InvalidQuery(f"threshold must be between 0 and 1 (got {self.threshold}).", field="threshold")
        if self.granularity not in ("item", "chunk"):
            raise InvalidQuery("granularity must be 'item' or 'chunk'.", field="granularity")
        if self.mode not in ("hybrid", "lexical", "vector"):
            raise InvalidQuery("mode must be 'hybrid', 'lexical' or 'vector'.", field="mode")
        if self.corpus not in ("live", "latest"):
            raise InvalidQuery("corpus must be 'live' or 'latest'.", field="corpus")


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
    # The calibrated probability that this hit is relevant to the query (search.engine.confidence), in [0, 1].
    confidence: float = 1.0
    # Each lane's raw score of this hit as fusion saw it (lexical: BM25; vector and english: cosine) and the
    # rerank factor it was given: with ``RetrievalResult.fusion``, what another instance needs to fuse this hit
    # among its own (search.federation).
    lane_scores: dict[str, float] = field(default_factory=dict)
    rerank: float = 1.0

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
# What ``confidence`` and ``threshold`` mean, said the same way by every surface.
CONFIDENCE = (
    "Calibrated probability (0-1) that this hit is relevant to the query, fitted on judged questions per "
    "embedding model and language; the same number means the same in English, French and Arabic."
)
THRESHOLD = (
    "Confidence floor (0-1): hits below it are not answers and are left out, together with their counts and "
    "facets. 0 returns every candidate."
)
NEAREST = (
    "Only when nothing reaches the threshold: the closest items, which do NOT match the query well enough "
    "to be answers (each with its confidence)."
)


@dataclass(frozen=True)
class LaneEvidence:
    """One lane as fusion saw it: its fusion weight, every candidate's raw score it returned (best first) and
    what a candidate it did not return counts as (None: its lowest; lexical: 0 when it returned every chunk
    holding a query word)."""

    name: str
    weight: float
    scores: tuple[float, ...]
    absent: float | None = None


@dataclass(frozen=True)
class FusionEvidence:
    """How a search ordered its candidates, from what (``search.engine.fusion.federated_scores``): ``method``
    ``zscore`` or ``rrf`` (the lanes fused), ``lexical`` or ``vector`` (one lane's order); ``model`` the vector
    lane's embedding model, ``english`` the English lane's; ``candidates`` how many ids fusion scored."""

    method: str
    lanes: tuple[LaneEvidence, ...] = ()
    model: str = ""
    english: str = ""
    candidates: int = 0
    # The lexical lane's depth and how many hits (chunks) it returned: every match when fewer than its depth.
    depth: int = 0
    lexical_hits: int = 0
    # For each of the vector lane's scores, whether the lexical lane returned that candidate too.
    vector_lexical: tuple[bool, ...] = ()
    # What was fused: items or chunks; and the lane scores of the candidate fusion scored lowest (the low end
    # of its [0, 1] scale, before rerank factors).
    granularity: str = "item"
    worst: tuple[tuple[str, float], ...] = ()


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
    # When no hit reaches the threshold: the few nearest candidates, which are not answers (``NEAREST``).
    nearest: tuple[Hit, ...] = ()
    # What fusion saw (None: nothing was fused, e.g. a query without words): lets a federated search order the
    # hits of several knowledge bases as one instance holding them all would.
    fusion: FusionEvidence | None = None

    @property
    def count(self) -> int:
        return self.total


def lanes_text(lanes: Sequence[str], ranks: dict[str, int]) -> str:
    """``lexical #1 + vector #3`` (``-`` when no lane found it, e.g. an item listed without a query)."""
    return " + ".join(f"{lane} #{ranks[lane]}" if lane in ranks else lane for lane in lanes) or "-"
