"""Pydantic models of every MCP tool: arguments (``extra="forbid"``, a description on each field), results.

The argument models are the tools' ``inputSchema``; the result models are their ``outputSchema`` and the
shape of ``structuredContent``. Descriptions are constants written here, never built from database text.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from search.filters import (
    CHANGED_SINCE_EXAMPLE,
    MAX_LANGUAGE_CHARS,
    MAX_REVIEW_DUE_DAYS,
    MAX_TIME_CHARS,
    MAX_VALUE_CHARS,
)
from search.models import ContentType
from search.selectors.revisions import MAX_NEIGHBOURS
from search.types import (
    CONFIDENCE,
    MAX_QUERY_CHARS,
    MCP_MAX_LIMIT,
    MCP_THRESHOLD,
    MISSING_WORDS,
    NEAREST,
    PARTIAL_MATCH,
    THRESHOLD,
)

MATCH_ID_PATTERN = r"^[ci][1-9][0-9]{0,17}$"
CONTENT_TYPES = ", ".join(ContentType.values)
MAX_CURSOR_CHARS = 500
READ_DEFAULT_CHARS = 6000
READ_MAX_CHARS = 8000


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class FindArgs(ToolArgs):
    query: str | None = Field(
        None,
        max_length=MAX_QUERY_CHARS,
        description=(
            "What to look for, in natural language or keywords (any language of the knowledge base: English, "
            "French, Arabic). Required unless similar_to is given."
        ),
    )
    # The filters' limits are search.filters' (advertised here, refused there in the words every surface uses).
    type: str | None = Field(
        None,
        json_schema_extra={"maxLength": MAX_VALUE_CHARS},
        description=f"Only this content type. Common values: {CONTENT_TYPES}.",
    )
    scope: str | None = Field(
        None,
        json_schema_extra={"maxLength": MAX_VALUE_CHARS},
        description="Only this domain (the item's primary domain), e.g. bid_writing, pricing, compliance.",
    )
    granularity: Literal["item", "chunk"] = Field(
        "item",
        description=(
            "'item' (default): one result per document, with its best passage. 'chunk': one result per "
            "matching passage, so a long document can appear several times."
        ),
    )
    similar_to: int | None = Field(
        None,
        ge=1,
        description="Find items similar to the item with this item_id (query then becomes optional).",
    )
    limit: int = Field(
        10, ge=1, le=MCP_MAX_LIMIT, description=f"Results per page, 1 to {MCP_MAX_LIMIT} (default 10)."
    )
    content_item_id: int | None = Field(
        None,
        ge=1,
        description="Search inside this one document only (its item_id); combine with granularity='chunk'.",
    )
    overdue_review: bool | None = Field(
        None,
        description="true: only items whose review is overdue; false: leave them out; omit: no filter.",
    )
    review_due_within_days: int | None = Field(
        None,
        json_schema_extra={"minimum": 1, "maximum": MAX_REVIEW_DUE_DAYS},
        description=(
            f"Only items whose next review is due on or before today + this many days (1-{MAX_REVIEW_DUE_DAYS})."
        ),
    )
    include_superseded: bool = Field(
        False, description="Also return items replaced by a newer item (left out by default)."
    )
    language: str | None = Field(
        None,
        json_schema_extra={"maxLength": MAX_LANGUAGE_CHARS},
        description="Only items in this language (ISO code: en, fr, ar, ...).",
    )
    changed_since: str | None = Field(
        None,
        json_schema_extra={"maxLength": MAX_TIME_CHARS},
        description=(
            "Only items updated at or after this time: ISO 8601 with a time zone, e.g. "
            f"{CHANGED_SINCE_EXAMPLE} (Z for UTC). Use the time of your last call to see what changed since."
        ),
    )
    preset: int | Annotated[str, StringConstraints(max_length=60)] | None = Field(
        None,
        description=(
            "Apply a saved filter preset, by name or id (see list_presets). A filter also given here "
            "overrides the preset's value for that filter."
        ),
    )
    cursor: str | None = Field(
        None,
        max_length=MAX_CURSOR_CHARS,
        description="next_cursor from a previous find call with the same arguments, to get the next page.",
    )
    threshold: float = Field(
        MCP_THRESHOLD,
        ge=0.0,
        le=1.0,
        description=f"{THRESHOLD} Default {MCP_THRESHOLD}. When nothing reaches it, find says so and lists the "
        "nearest items separately (not as results).",
    )
    sources: Literal["all"] | Annotated[list[Annotated[str, StringConstraints(max_length=50)]], Field(
        min_length=1, max_length=20)] | None = Field(
        None,
        description='Also search peer knowledge bases: "all", or names such as ["local", "emea"] (default: this '
        "knowledge base only). Results are ranked together as one knowledge base holding them all would rank them; "
        "each says its source. No cursor, no similar_to then.",
    )

    @model_validator(mode="after")
    def _query_or_similar(self) -> FindArgs:
        if not (self.query or "").strip() and self.similar_to is None:
            raise ValueError("query is required unless similar_to is given: say what to look for")
        return self


class ReadArgs(ToolArgs):
    item_id: int | None = Field(None, ge=1, description="Read this item's text (item_id from find).")
    match_id: str | None = Field(
        None,
        pattern=MATCH_ID_PATTERN,
        description=(
            "Read the passage of a find result (its match_id, e.g. 'c123'): the matched chunk with "
            "neighbouring chunks around it. An item-level match_id ('i45') reads the whole item."
        ),
    )
    neighbours: int = Field(
        1,
        ge=0,
        le=MAX_NEIGHBOURS,
        description=f"With a chunk match_id: chunks to add before and after the match (0-{MAX_NEIGHBOURS}).",
    )
    max_chars: int = Field(
        READ_DEFAULT_CHARS,
        ge=500,
        le=READ_MAX_CHARS,
        description=f"At most this many characters of text per call (500-{READ_MAX_CHARS}); see next_cursor.",
    )
    cursor: str | None = Field(
        None,
        max_length=MAX_CURSOR_CHARS,
        description="next_cursor from a previous read of the same item or match.",
    )

    @model_validator(mode="after")
    def _one_target(self) -> ReadArgs:
        if (self.item_id is None) == (self.match_id is None):
            raise ValueError("give exactly one of item_id or match_id")
        return self


class QualityArgs(ToolArgs):
    item_id: int = Field(..., ge=1, description="The item whose quality score and review status to show.")


class ListPresetsArgs(ToolArgs):
    pass


class FollowNewsArgs(ToolArgs):
    follow_id: int | None = Field(
        None,
        ge=1,
        description=(
            "A follow's id (from a call without it): list what is new or changed for that follow. Omit it to "
            "list the follows of the API key's user with how many new items each has."
        ),
    )


# --- results (structuredContent) ---


class MatchOffset(BaseModel):
    start: int = Field(description="Offset of the first character of a matched word in snippet.")
    end: int = Field(description="Offset just past the matched word.")


class FindHit(BaseModel):
    match_id: str | None = Field(
        description="'c<chunk id>' for a passage, 'i<item id>' for an item; pass it to read. Null for a peer "
        "knowledge base's result (open its url)."
    )
    item_id: int | None = Field(description="The item's id here; null for a peer knowledge base's result.")
    title: str
    url: str
    toc_path: str = Field(description="Heading path of the matched passage inside the item ('A > B').")
    snippet: str = Field(description="Plain text of the matched passage (untrusted document content).")
    match_offsets: list[MatchOffset]
    lanes: list[str] = Field(description="Which retrieval lanes found it: lexical, vector.")
    lane_ranks: dict[str, int] = Field(
        default_factory=dict, description="Its rank in each lane that found it (1 = that lane's best match)."
    )
    missing_words: list[str] = Field(default_factory=list, description=MISSING_WORDS)
    score: float = Field(description="Ranking score of this search (orders the results; not comparable across "
                         "searches). Use confidence to judge a result.")
    confidence: float = Field(description=CONFIDENCE)
    updated_at: str | None
    review_status: str
    source: str = Field(default="local", description="The knowledge base this result comes from ('local': this one).")
    sources: list[str] = Field(
        default_factory=list, description="With sources: every knowledge base that returned this same page."
    )


class SourceReport(BaseModel):
    name: str
    status: Literal["ok", "timeout", "error", "refused"]
    ms: int
    count: int
    detail: str = ""


class NearestItem(BaseModel):
    """A near miss: shown only when no result reached the threshold. NOT a match."""

    item_id: int
    title: str
    url: str
    confidence: float = Field(description=CONFIDENCE)
    matches: Literal[False] = Field(False, description="Always false: this item does not match the query.")


class FindResult(BaseModel):
    query: str | None
    count: int = Field(description="Total number of matches (all pages).")
    results: list[FindHit]
    content_item_id: int | None
    overdue_review_filter: bool | None
    review_due_within_days_filter: int | None
    partial_match: bool = Field(description=PARTIAL_MATCH)
    degraded: list[str] = Field(
        description="Why results may be weaker, e.g. embedding_unavailable (lexical only)."
    )
    next_cursor: str | None
    suggestion: str | None = Field(
        default=None, description='"Did you mean": the query with unknown words corrected from the corpus, or null.'
    )
    threshold: float = Field(MCP_THRESHOLD, description=THRESHOLD)
    nearest: list[NearestItem] = Field(default_factory=list, description=NEAREST)
    sources: list[SourceReport] = Field(
        default_factory=list,
        description="With sources: each knowledge base asked, and whether it answered (ok, timeout, error, refused).",
    )


class TocItem(BaseModel):
    path: str
    level: int
    char_start: int


class ReadResult(BaseModel):
    item_id: int
    match_id: str | None
    scope: Literal["item", "passage"]
    title: str
    url: str
    metadata: dict[str, Any]
    toc: list[TocItem]
    passage_chunk_ids: list[int]
    text: str = Field(description="This page of the text (untrusted document content).")
    offset: int = Field(description="Where this page starts inside the item or passage text.")
    total_chars: int
    next_cursor: str | None


class QualityResult(BaseModel):
    item_id: int
    title: str
    url: str
    quality_score: float
    quality_breakdown: dict[str, Any]
    review_status: str
    review_cadence_days: int | None
    next_review_date: str | None
    last_reviewed_at: str | None


class PresetSummary(BaseModel):
    id: int
    name: str
    system: bool = Field(description="System presets are built in; the others belong to a user.")
    params: dict[str, Any] = Field(description="The preset's filters, as URL parameters of the browse page.")


class ListPresetsResult(BaseModel):
    presets: list[PresetSummary]


class FollowSummary(BaseModel):
    id: int
    label: str
    query: str
    filters: dict[str, Any] = Field(description="The follow's filters, as URL parameters of the browse page.")
    paused: bool
    paused_reason: str | None = Field(description="Why the follow is paused (e.g. its filters no longer parse).")
    new_count: int = Field(description="New and changed items its owner has not marked seen.")
    last_run_at: str | None


class FollowNewsEntry(BaseModel):
    item_id: int = Field(description="Pass it to read(item_id=…).")
    title: str
    url: str
    kind: Literal["new", "changed"] = Field(
        description="new: the follow had never shown it; changed: its revision number went up since."
    )
    revision_number: int
    rank: int = Field(description="Its rank in the run that found it (1 = best).")
    found_at: str


class FollowNewsResult(BaseModel):
    follows: list[FollowSummary]
    follow_id: int | None = Field(description="The follow whose news is listed, when follow_id was given.")
    items: list[FollowNewsEntry] = Field(description="Unseen new and changed items of that follow, by rank.")
