"""GraphQL object and input types. Field resolvers read engine values or go through a loader."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import graphene
from graphene.types.generic import GenericScalar

from follows.selectors import FeedEntry, FollowView
from graphql_api.dataloaders import ContentItemByIdLoader, RevisionByIdLoader
from presets.models import Preset as PresetModel
from search.filters import (
    CHANGED_SINCE_EXAMPLE,
    MAX_FRESHNESS_DAYS,
    MAX_LANGUAGE_CHARS,
    MAX_REVIEW_DUE_DAYS,
    MAX_VALUE_CHARS,
    MAX_VALUES,
)
from search.models import ContentItem
from search.models import Revision as RevisionModel
from search.selectors.items import ItemPage
from search.text.highlight import highlight_html
from search.types import (
    CONFIDENCE,
    MISSING_WORDS,
    NEAREST,
    PARTIAL_MATCH,
    SITE_THRESHOLD,
    THRESHOLD,
    Hit,
    RetrievalResult,
)


def _reads(path: str) -> Callable[[Any, Any], Any]:
    """A field resolver that returns ``root.<path>`` as it is, e.g. ``resolve_score = _reads("hit.score")``."""
    get = attrgetter(path)

    def resolve(root: Any, info: Any) -> Any:
        return get(root)

    return resolve


# --- enums ---------------------------------------------------------------------------------------------


class CorpusEnum(graphene.Enum):
    """LIVE: published revisions (everyone). LATEST: newest drafts too (staff only; others get LIVE)."""

    LIVE = "live"
    LATEST = "latest"

    class Meta:
        name = "Corpus"


class SearchGranularity(graphene.Enum):
    """ITEM: one hit per item (its best passage). CHUNK: one hit per matching passage."""

    ITEM = "item"
    CHUNK = "chunk"


class SearchMode(graphene.Enum):
    HYBRID = "hybrid"
    LEXICAL = "lexical"
    VECTOR = "vector"


class ItemSortField(graphene.Enum):
    NEWEST = "newest"
    TITLE = "title"
    QUALITY_SCORE = "quality_score"


class ReviewStatusEnum(graphene.Enum):
    OK = "ok"
    DUE_SOON = "due_soon"
    REVIEW_OVERDUE = "review_overdue"

    class Meta:
        name = "ReviewStatus"


def enum_value(value: Any) -> Any:
    """Graphene passes an explicit enum argument as the member and a default as its value."""
    return getattr(value, "value", value)


# --- inputs --------------------------------------------------------------------------------------------


class SearchFilterInput(graphene.InputObjectType):
    class Meta:
        description = (
            "The engine's filters (``search.filters.SearchFilters``, the same limits on every surface). Lists "
            f"match any value, case-insensitively: at most {MAX_VALUES} values per list, each at most "
            f"{MAX_VALUE_CHARS} characters; blank and repeated values are dropped."
        )

    domain = graphene.List(graphene.NonNull(graphene.String), description="Primary domains.")
    subtopic = graphene.List(graphene.NonNull(graphene.String))
    content_type = graphene.List(graphene.NonNull(graphene.String), description="guide, policy, qa, …")
    platform = graphene.List(graphene.NonNull(graphene.String))
    author = graphene.List(graphene.NonNull(graphene.String))
    layer = graphene.List(graphene.NonNull(graphene.String))
    source = graphene.List(graphene.NonNull(graphene.String))
    language = graphene.String(description=f"ISO code: en, fr, ar, … (at most {MAX_LANGUAGE_CHARS} characters).")
    include_qa = graphene.Boolean(description="Default true.")
    date_from = graphene.Date(description="Updated on or after this day.")
    date_to = graphene.Date(description="Updated on or before this day (not before dateFrom).")
    freshness_days = graphene.Int(description=f"Updated within this many days (1–{MAX_FRESHNESS_DAYS}).")
    overdue_review = graphene.Boolean(description="true: only overdue for review; false: none overdue.")
    review_due_within_days = graphene.Int(
        description=f"Next review due within this many days (1–{MAX_REVIEW_DUE_DAYS})."
    )
    include_superseded = graphene.Boolean(description="Default false: superseded items are hidden.")
    unread_only = graphene.Boolean(description="Signed-in users: only items not opened yet.")
    changed_since = graphene.DateTime(
        description=(
            f"Only items updated at or after this time (ISO 8601 with a time zone, e.g. {CHANGED_SINCE_EXAMPLE})."
        )
    )


class SearchInput(graphene.InputObjectType):
    query = graphene.String(required=True, description="What to look for (at most 2000 characters).")
    limit = graphene.Int(default_value=20, description="Hits per page, 1–100.")
    cursor = graphene.String(description="`nextCursor` of the previous page of the same search.")
    threshold = graphene.Float(description=f"{THRESHOLD} Default {SITE_THRESHOLD}.")
    filter = graphene.Field(SearchFilterInput)
    granularity = SearchGranularity(default_value="item")
    mode = SearchMode(default_value="hybrid")
    corpus = CorpusEnum(default_value="live")
    include_closed = graphene.Boolean(
        default_value=False,
        description=(
            "Also return 'closed material' placeholders, as the site does: items the caller cannot read whose "
            "policy allows it and whose title holds every query word. They follow the page's hits on the first "
            "page only (not on a cursor page), with closed: true, item: null and the title alone; totalCount "
            "does not count them. Off by default; agents (MCP) never receive them."
        ),
    )


class NotePathsFilterInput(SearchFilterInput):
    """``search`` set: paths of the items the search finds, best first.

    Unset: every matching item, newest first.
    """

    search = graphene.String(description="Search text; leave out to list by filters only.")
    first = graphene.Int(default_value=100, description="At most this many paths, 1–100.")
    corpus = CorpusEnum(default_value="live")


# --- output types --------------------------------------------------------------------------------------


class Revision(graphene.ObjectType):
    """One saved version of an item (Markdown body)."""

    number = graphene.Int(required=True)
    title = graphene.String(required=True)
    summary = graphene.String(required=True)
    body = graphene.String(required=True, description="Markdown.")
    created_at = graphene.DateTime(required=True)


def _revision_id(item: ContentItem) -> int | None:
    if getattr(item, "kb_corpus", "live") == "latest":
        return item.latest_revision_id or item.live_revision_id
    return item.live_revision_id


class Item(graphene.ObjectType):
    """A knowledge-base item as the caller may read it (live revision, or latest for staff on LATEST)."""

    id = graphene.ID(required=True)
    external_id = graphene.String(required=True)
    slug = graphene.String(required=True)
    url = graphene.String(required=True, description="Path of the item's page, e.g. /items/<slug>.")
    title = graphene.String(required=True)
    summary = graphene.String(required=True)
    content_type = graphene.String(required=True)
    primary_domain = graphene.String(required=True)
    subtopic = graphene.String(required=True)
    platform = graphene.String(required=True)
    layer = graphene.String(required=True)
    source = graphene.String(required=True)
    language = graphene.String(required=True)
    author_name = graphene.String(required=True)
    ai_keywords = graphene.List(graphene.NonNull(graphene.String), required=True)
    updated_at = graphene.DateTime(required=True)
    published_at = graphene.DateTime()
    review_status = graphene.Field(ReviewStatusEnum, required=True)
    next_review_date = graphene.Date()
    quality_score = graphene.Float(required=True)
    superseded = graphene.Boolean(required=True)
    superseded_by = graphene.Field(lambda: Item, description="The newer item, when readable.")
    revision = graphene.Field(Revision, description="The revision the caller reads.")

    @staticmethod
    def resolve_id(root: ContentItem, info: Any) -> str:
        return str(root.pk)

    @staticmethod
    def resolve_url(root: ContentItem, info: Any) -> str:
        return root.get_absolute_url()

    @staticmethod
    def resolve_revision(root: ContentItem, info: Any) -> RevisionModel | None:
        return RevisionByIdLoader(info.context).load(_revision_id(root))

    @staticmethod
    def resolve_title(root: ContentItem, info: Any) -> str:
        revision = RevisionByIdLoader(info.context).load(_revision_id(root))
        return revision.title if revision else ""

    @staticmethod
    def resolve_summary(root: ContentItem, info: Any) -> str:
        revision = RevisionByIdLoader(info.context).load(_revision_id(root))
        return revision.summary if revision else ""

    @staticmethod
    def resolve_ai_keywords(root: ContentItem, info: Any) -> list[str]:
        return list(root.ai_keywords or [])

    resolve_review_status = staticmethod(_reads("governance_review_status"))

    @staticmethod
    def resolve_superseded(root: ContentItem, info: Any) -> bool:
        return root.superseded_by_id is not None

    @staticmethod
    def resolve_superseded_by(root: ContentItem, info: Any) -> ContentItem | None:
        return ContentItemByIdLoader(info.context, getattr(root, "kb_corpus", "live")).load(
            root.superseded_by_id
        )


class LaneRank(graphene.ObjectType):
    lane = graphene.String(required=True, description="lexical or vector.")
    rank = graphene.Int(required=True, description="1-based rank of the hit in that lane.")


@dataclass(frozen=True)
class HitNode:
    """A hit and the corpus it was found in (which revision its item fields read)."""

    hit: Hit
    corpus: str


class SearchHit(graphene.ObjectType):
    item = graphene.Field(Item, description="Null for a closed-material placeholder (title only).")
    item_id = graphene.ID(required=True)
    highlighted_title = graphene.String(
        required=True, description="HTML: the title escaped, matched words wrapped in <mark> (no other tags)."
    )
    highlighted_content = graphene.String(
        required=True,
        description="HTML: the passage escaped, matched words wrapped in <mark> (no other tags).",
    )
    passage = graphene.String(required=True, description="The plain passage text.")
    toc_path = graphene.String(required=True, description="Headings leading to the passage.")
    chunk_id = graphene.ID(description="The passage's chunk (CHUNK granularity or the item's best passage).")
    lanes = graphene.List(graphene.NonNull(graphene.String), required=True)
    lane_ranks = graphene.List(graphene.NonNull(LaneRank), required=True)
    missing_words = graphene.List(graphene.NonNull(graphene.String), required=True, description=MISSING_WORDS)
    score = graphene.Float(required=True, description="Ranking score within this search (orders the hits).")
    confidence = graphene.Float(required=True, description=CONFIDENCE)
    similarity = graphene.Float(description="Cosine similarity from the vector lane, when it found the hit.")
    closed = graphene.Boolean(
        required=True, description="A 'closed material' placeholder: the caller may see the title only."
    )

    @staticmethod
    def resolve_item(root: HitNode, info: Any) -> ContentItem | None:
        if root.hit.closed:
            return None
        return ContentItemByIdLoader(info.context, root.corpus).load(root.hit.item_id)  # type: ignore[arg-type]

    @staticmethod
    def resolve_item_id(root: HitNode, info: Any) -> str:
        return str(root.hit.item_id)

    @staticmethod
    def resolve_highlighted_title(root: HitNode, info: Any) -> str:
        return highlight_html(root.hit.title, root.hit.title_spans)

    @staticmethod
    def resolve_highlighted_content(root: HitNode, info: Any) -> str:
        return "" if root.hit.closed else highlight_html(root.hit.passage, root.hit.passage_spans)

    @staticmethod
    def resolve_passage(root: HitNode, info: Any) -> str:
        return "" if root.hit.closed else root.hit.passage

    @staticmethod
    def resolve_toc_path(root: HitNode, info: Any) -> str:
        return "" if root.hit.closed else root.hit.toc_path

    @staticmethod
    def resolve_chunk_id(root: HitNode, info: Any) -> str | None:
        return None if root.hit.closed or root.hit.chunk_id is None else str(root.hit.chunk_id)

    resolve_lanes = staticmethod(_reads("hit.lanes"))

    @staticmethod
    def resolve_lane_ranks(root: HitNode, info: Any) -> list[LaneRank]:
        return [LaneRank(lane=lane, rank=rank) for lane, rank in sorted(root.hit.lane_ranks.items())]

    resolve_missing_words = staticmethod(_reads("hit.missing_words"))
    resolve_score = staticmethod(_reads("hit.score"))
    resolve_confidence = staticmethod(_reads("hit.confidence"))
    resolve_similarity = staticmethod(_reads("hit.similarity"))
    resolve_closed = staticmethod(_reads("hit.closed"))


class FacetValue(graphene.ObjectType):
    value = graphene.String(required=True)
    count = graphene.Int(required=True)


class Facet(graphene.ObjectType):
    """Counts over every hit of the search (not just this page), most frequent first."""

    name = graphene.String(required=True, description="domain, content_type, layer or language.")
    values = graphene.List(graphene.NonNull(FacetValue), required=True)


@dataclass(frozen=True)
class ResultNode:
    result: RetrievalResult
    corpus: str
    closed: tuple[Hit, ...] = ()  # closed-material placeholders (includeClosed), after the hits


class NearestItem(graphene.ObjectType):
    """A near miss, listed only when no hit reached the threshold: NOT a match."""

    item_id = graphene.ID(required=True)
    title = graphene.String(required=True)
    url = graphene.String(required=True)
    confidence = graphene.Float(required=True, description=CONFIDENCE)


class SearchResult(graphene.ObjectType):
    total_count = graphene.Int(required=True, description="Hits that reached the threshold (all pages).")
    partial_match = graphene.Boolean(required=True, description=PARTIAL_MATCH)
    degraded = graphene.List(
        graphene.NonNull(graphene.String),
        required=True,
        description="Why the answer is lexical-only, e.g. embedding_unavailable. Empty when healthy.",
    )
    next_cursor = graphene.String(description="Pass as `cursor` for the next page; null on the last page.")
    facets = graphene.List(graphene.NonNull(Facet), required=True)
    suggestion = graphene.String()
    hits = graphene.List(graphene.NonNull(SearchHit), required=True)
    nearest = graphene.List(graphene.NonNull(NearestItem), required=True, description=NEAREST)

    resolve_total_count = staticmethod(_reads("result.total"))
    resolve_partial_match = staticmethod(_reads("result.partial_match"))
    resolve_degraded = staticmethod(_reads("result.degraded"))
    resolve_next_cursor = staticmethod(_reads("result.next_cursor"))
    resolve_suggestion = staticmethod(_reads("result.suggestion"))

    @staticmethod
    def resolve_nearest(root: ResultNode, info: Any) -> list[NearestItem]:
        return [
            NearestItem(item_id=str(h.item_id), title=h.title, url=h.url, confidence=h.confidence)
            for h in root.result.nearest
        ]

    @staticmethod
    def resolve_facets(root: ResultNode, info: Any) -> list[Facet]:
        return [
            Facet(name=name, values=[FacetValue(value=v, count=c) for v, c in counts.items()])
            for name, counts in root.result.facets.items()
        ]

    @staticmethod
    def resolve_hits(root: ResultNode, info: Any) -> list[HitNode]:
        hits = root.result.hits
        ContentItemByIdLoader(info.context, root.corpus).expect(  # type: ignore[arg-type]
            h.item_id for h in hits if not h.closed
        )
        return [HitNode(hit, root.corpus) for hit in (*hits, *root.closed)]


class PageInfo(graphene.ObjectType):
    has_next_page = graphene.Boolean(required=True)
    end_cursor = graphene.String(description="Pass as `after` for the next page.")


class ItemEdge(graphene.ObjectType):
    node = graphene.Field(Item, required=True)


class ItemConnection(graphene.ObjectType):
    total_count = graphene.Int(required=True)
    page_info = graphene.Field(PageInfo, required=True)
    edges = graphene.List(graphene.NonNull(ItemEdge), required=True)

    resolve_total_count = staticmethod(_reads("total"))

    @staticmethod
    def resolve_page_info(root: ItemPage, info: Any) -> PageInfo:
        return PageInfo(has_next_page=root.next_cursor is not None, end_cursor=root.next_cursor)

    @staticmethod
    def resolve_edges(root: ItemPage, info: Any) -> list[ItemEdge]:
        return [ItemEdge(node=item) for item in root.items]


class Preset(graphene.ObjectType):
    """Saved filters: a system preset (shared, immutable) or one of the caller's own."""

    id = graphene.ID(required=True)
    name = graphene.String(required=True)
    params = GenericScalar(
        required=True, description="Filters as URL parameters; lists repeat their key in a URL."
    )
    is_system = graphene.Boolean(required=True)
    is_deleted = graphene.Boolean(required=True, description="Deleted and restorable with presetRestore.")
    created_at = graphene.DateTime(required=True)
    updated_at = graphene.DateTime(required=True)

    @staticmethod
    def resolve_id(root: PresetModel, info: Any) -> str:
        return str(root.pk)

    @staticmethod
    def resolve_params(root: PresetModel, info: Any) -> dict[str, Any]:
        return root.sorted_params()


class FollowItemKind(graphene.Enum):
    """NEW: the follow had never shown the item. CHANGED: its revision number went up since it was shown."""

    NEW = "new"
    CHANGED = "changed"


class FollowEntryItem(graphene.ObjectType):
    """The item of a feed entry, as its owner may read it now (entries they may no longer read are left out)."""

    id = graphene.ID(required=True)
    title = graphene.String(required=True)
    url = graphene.String(required=True)


class FollowEntry(graphene.ObjectType):
    kind = graphene.Field(FollowItemKind, required=True)
    revision_number = graphene.Int(required=True, description="The revision that made it new or changed.")
    rank = graphene.Int(required=True, description="Its rank in the run that found it (1 = best).")
    found_at = graphene.DateTime(required=True)
    seen = graphene.Boolean(required=True)
    item = graphene.Field(FollowEntryItem, required=True)

    @staticmethod
    def resolve_seen(root: FeedEntry, info: Any) -> bool:
        return root.seen_at is not None

    @staticmethod
    def resolve_item(root: FeedEntry, info: Any) -> FollowEntryItem:
        return FollowEntryItem(id=str(root.item_id), title=root.title, url=root.url)


class Follow(graphene.ObjectType):
    """A search you follow: its runs record the items that are new or changed since they were shown."""

    id = graphene.ID(required=True)
    label = graphene.String(required=True)
    query = graphene.String(required=True)
    filters = GenericScalar(required=True, description="Filters as URL parameters (lists of strings).")
    paused = graphene.Boolean(required=True)
    paused_reason = graphene.String(description="Why it is paused (e.g. its filters no longer parse); null if not.")
    new_count = graphene.Int(required=True, description="Unseen new and changed items.")
    created_at = graphene.DateTime(required=True)
    last_run_at = graphene.DateTime(description="Null until the first run (the baseline).")
    items = graphene.List(
        graphene.NonNull(FollowEntry), required=True, description="Unseen entries by rank, then the latest seen."
    )

    @staticmethod
    def resolve_id(root: FollowView, info: Any) -> str:
        return str(root.follow.pk)

    resolve_label = staticmethod(_reads("follow.label"))
    resolve_query = staticmethod(_reads("follow.query"))

    @staticmethod
    def resolve_filters(root: FollowView, info: Any) -> dict[str, Any]:
        return dict(sorted((root.follow.filters or {}).items()))

    @staticmethod
    def resolve_paused_reason(root: FollowView, info: Any) -> str | None:
        return root.follow.paused_reason or None

    resolve_created_at = staticmethod(_reads("follow.created_at"))
    resolve_last_run_at = staticmethod(_reads("follow.last_run_at"))

    @staticmethod
    def resolve_items(root: FollowView, info: Any) -> list[FeedEntry]:
        return [*root.unseen, *root.earlier]


class FollowDigest(graphene.ObjectType):
    """The e-mail digest of your follows: one e-mail after a run that found something new."""

    available = graphene.Boolean(required=True, description="Whether this server sends digests (FOLLOWS_DIGEST).")
    enabled = graphene.Boolean(required=True, description="Whether you asked for them (false for anonymous callers).")


# --- federatedSearch (docs/federation.md) ---


class FederatedSearchInput(graphene.InputObjectType):
    query = graphene.String(required=True, description="What to look for (at most 2000 characters).")
    sources = graphene.List(
        graphene.NonNull(graphene.String),
        description='Knowledge bases to search: "local" (this one) and peer names; ["all"] for every peer you '
        "may see. Default: local only.",
    )
    limit = graphene.Int(default_value=20, description="Hits, 1–100 (no cursor: ask for more instead).")
    threshold = graphene.Float(description=f"{THRESHOLD} Default {SITE_THRESHOLD}. Applies to every source.")
    filter = graphene.Field(SearchFilterInput)


class SourceStatusEnum(graphene.Enum):
    OK = "ok"
    TIMEOUT = "timeout"
    ERROR = "error"
    REFUSED = "refused"


class SourceReport(graphene.ObjectType):
    name = graphene.String(required=True, description='"local" or the peer\'s name.')
    status = graphene.Field(SourceStatusEnum, required=True)
    ms = graphene.Int(required=True, description="How long it took (a timeout: the peer's timeout).")
    count = graphene.Int(required=True, description="How many hits it found.")
    detail = graphene.String(required=True, description="Why it failed, or what it is; empty when ok.")


class FederatedHit(graphene.ObjectType):
    source = graphene.String(required=True, description="Where this copy comes from (the most confident).")
    sources = graphene.List(
        graphene.NonNull(graphene.String), required=True, description="Every knowledge base that returned it."
    )
    item = graphene.Field(Item, description="The item here, for a local hit; null for a peer's.")
    url = graphene.String(required=True, description="Absolute URL of the page.")
    title = graphene.String(required=True, description="Plain text (a peer's: untrusted).")
    highlighted_title = graphene.String(
        required=True, description="HTML built here: the title escaped, matched words in <mark> (no other tags)."
    )
    highlighted_content = graphene.String(
        required=True, description="HTML built here: the passage escaped, matched words in <mark>."
    )
    passage = graphene.String(required=True, description="The plain passage text.")
    confidence = graphene.Float(required=True, description=CONFIDENCE)
    lanes = graphene.List(graphene.NonNull(graphene.String), required=True)
    language = graphene.String(required=True)
    updated_at = graphene.DateTime()
    untrusted = graphene.Boolean(required=True, description="Text from a peer knowledge base: show it as text.")

    @staticmethod
    def resolve_item(root: Any, info: Any) -> ContentItem | None:
        if root.local is None:
            return None
        return ContentItemByIdLoader(info.context, "live").load(root.local.item_id)  # type: ignore[arg-type]

    @staticmethod
    def resolve_highlighted_title(root: Any, info: Any) -> str:
        return highlight_html(root.title, root.title_spans)

    @staticmethod
    def resolve_highlighted_content(root: Any, info: Any) -> str:
        return highlight_html(root.snippet, root.snippet_spans)

    @staticmethod
    def resolve_passage(root: Any, info: Any) -> str:
        return str(root.snippet)

    @staticmethod
    def resolve_untrusted(root: Any, info: Any) -> bool:
        return root.local is None


class FederatedSearchResult(graphene.ObjectType):
    total_count = graphene.Int(required=True, description="Merged hits that reached the threshold.")
    sources = graphene.List(graphene.NonNull(SourceReport), required=True)
    hits = graphene.List(graphene.NonNull(FederatedHit), required=True)

    @staticmethod
    def resolve_total_count(root: Any, info: Any) -> int:
        return int(root.total)
