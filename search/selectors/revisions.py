"""Reading what a search found: an item's text, a passage with its neighbouring chunks, its table of
contents, and its persisted quality score.

Access goes through ``search.selectors.items.item_get`` (the engine's access rule), and a passage is only
readable when its chunk belongs to the revision the caller reads (live for visitors, latest for staff
and API keys), so a draft passage never reaches someone who cannot see drafts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from search import replicas
from search.errors import NotFound
from search.models import Chunk, ContentItem, Revision
from search.principal import Principal
from search.selectors.items import item_get, item_revision
from search.types import Corpus

MAX_NEIGHBOURS = 5


@dataclass(frozen=True)
class TocEntry:
    """A section of the item: its heading path (``A > B``) and where it starts in the body."""

    path: str
    level: int
    char_start: int


@dataclass(frozen=True)
class ReadView:
    """An item's text (``scope="item"``) or a passage of it (``scope="passage"``).

    ``text`` is ``revision.body[char_start:char_end]``; for a passage it runs from the first neighbour's
    start to the last neighbour's end, so overlapping chunks are not repeated.
    """

    item: ContentItem
    revision: Revision
    scope: str
    text: str
    char_start: int
    char_end: int
    chunk_ids: tuple[int, ...]
    matched_chunk_id: int | None
    toc: tuple[TocEntry, ...]


@dataclass(frozen=True)
class QualityView:
    item: ContentItem
    title: str
    quality_score: float
    quality_breakdown: dict[str, Any]
    review_status: str


def revision_toc(revision: Revision) -> tuple[TocEntry, ...]:
    """Sections in reading order, from the chunker's heading paths (the same paths search hits show)."""
    entries: list[TocEntry] = []
    seen: set[str] = set()
    for path, char_start in (
        Chunk.objects.filter(revision=revision).order_by("ordinal").values_list("toc_path", "char_start")
    ):
        if path and path not in seen:
            seen.add(path)
            entries.append(TocEntry(path=path, level=path.count(" > ") + 1, char_start=char_start))
    return tuple(entries)


def _readable_revision(item: ContentItem, principal: Principal, corpus: Corpus) -> Revision:
    revision = item_revision(item, principal, corpus)
    if revision is None:
        raise NotFound("No readable item with that id. Check the id, or use an API key with access.")
    return revision


@replicas.replica_reads
def item_read(*, principal: Principal, item_id: int, corpus: Corpus = "live") -> ReadView:
    """The whole text of the revision this principal reads. NotFound when unreadable."""
    item = item_get(principal=principal, item_id=item_id, corpus=corpus)
    revision = _readable_revision(item, principal, corpus)
    body = revision.body
    return ReadView(item, revision, "item", body, 0, len(body), (), None, revision_toc(revision))


@replicas.replica_reads
def passage_read(
    *, principal: Principal, chunk_id: int, neighbours: int = 1, corpus: Corpus = "live"
) -> ReadView:
    """A matched chunk with up to ``neighbours`` chunks before and after it, from the same revision."""
    if not 0 <= neighbours <= MAX_NEIGHBOURS:
        raise ValueError(f"neighbours must be between 0 and {MAX_NEIGHBOURS}")
    chunk = Chunk.objects.filter(pk=chunk_id).only("pk", "item_id", "revision_id", "ordinal").first()
    if chunk is None:
        raise NotFound(
            "No passage with that match_id: the item may have changed since the search. Search again, or "
            "read by item_id.",
            field="match_id",
        )
    item = item_get(principal=principal, item_id=chunk.item_id, corpus=corpus)
    revision = _readable_revision(item, principal, corpus)
    if chunk.revision_id != revision.pk:
        raise NotFound(
            "That match_id belongs to a version of the item you cannot read (or an older one). Search again, "
            "or read by item_id.",
            field="match_id",
        )
    window = list(
        Chunk.objects.filter(
            revision=revision,
            ordinal__gte=chunk.ordinal - neighbours,
            ordinal__lte=chunk.ordinal + neighbours,
        )
        .order_by("ordinal")
        .values_list("pk", "char_start", "char_end")
    )
    start = min(row[1] for row in window)
    end = max(row[2] for row in window)
    return ReadView(
        item,
        revision,
        "passage",
        revision.body[start:end],
        start,
        end,
        tuple(row[0] for row in window),
        chunk.pk,
        revision_toc(revision),
    )


@replicas.replica_reads
def item_quality(*, principal: Principal, item_id: int, corpus: Corpus = "live") -> QualityView:
    """The persisted quality score and review status of a readable item (nothing is computed here)."""
    item = item_get(principal=principal, item_id=item_id, corpus=corpus)
    revision = _readable_revision(item, principal, corpus)
    return QualityView(
        item=item,
        title=revision.title,
        quality_score=item.quality_score,
        quality_breakdown=dict(item.quality_breakdown or {}),
        review_status=item.governance_review_status,
    )


__all__ = ["ReadView", "QualityView", "TocEntry", "item_read", "passage_read", "item_quality"]
