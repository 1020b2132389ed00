"""Item reads other than ranked retrieval: one item, its revision for a principal, and the browse-mode listing.

Every read goes through ``ItemScope`` / ``ContentItem.objects.searchable(principal, corpus)``, the same access
rule ``retrieve`` uses, so no surface can show an item the engine would not.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from search import replicas
from search.engine.cursors import cursor_decode, cursor_encode
from search.engine.scope import corpus_for
from search.errors import InvalidQuery, NotFound
from search.models import ContentItem
from search.principal import Principal
from search.types import MAX_LIMIT, Corpus, SearchFilters

BrowseSort = Literal["newest", "title", "quality_score"]


def _storable(text: str) -> bool:
    return "\x00" not in text and not any("\ud800" <= ch <= "\udfff" for ch in text)


@replicas.replica_reads
def item_get(
    *, principal: Principal, item_id: int | None = None, slug: str | None = None, external_id: str | None = None,
    corpus: Corpus = "live",
) -> ContentItem:
    """One readable item, or NotFound (the same answer whether it does not exist or may not be read)."""
    qs = ContentItem.objects.searchable(principal, corpus_for(principal, corpus)).select_related(
        "live_revision", "latest_revision", "superseded_by", "verified_by"
    )
    try:
        if item_id is not None:
            return qs.get(pk=item_id)
        # PostgreSQL text holds no NUL and no lone surrogate: no stored slug or id has one either
        if slug is not None and _storable(slug):
            return qs.get(slug=slug)
        if external_id is not None and _storable(external_id):
            return qs.get(external_id=external_id)
    except (ContentItem.DoesNotExist, ValueError, OverflowError):
        pass
    raise NotFound("No readable item with that id. Check the id, or sign in / use an API key with access.")


def item_revision(item: ContentItem, principal: Principal, corpus: Corpus = "live") -> Any:
    """The revision this principal reads: latest for drafts-corpus readers, live otherwise."""
    if corpus_for(principal, corpus) == "latest":
        return item.latest_revision or item.live_revision
    return item.live_revision


@dataclass(frozen=True)
class ItemPage:
    items: list[ContentItem]
    total: int
    next_cursor: str | None


SORTS: dict[str, list[str]] = {
    "newest": ["-updated_at", "-id"],
    "title": ["latest_revision__title", "id"],
    "quality_score": ["-quality_score", "-id"],
}


INVALID_LISTING_CURSOR = "cursor is not valid for this listing; start again without it."


@replicas.replica_reads
def items_list(
    *, principal: Principal, filters: SearchFilters | None = None, sort: BrowseSort = "newest",
    cursor: str | None = None, limit: int = 20, corpus: Corpus = "live",
) -> ItemPage:
    """Browse mode (no query): readable items with the engine's filters, sorted, cursor-paged."""
    if sort not in SORTS:
        raise InvalidQuery(f"sort must be one of {', '.join(SORTS)}.", field="sort")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidQuery(f"limit must be between 1 and {MAX_LIMIT}.", field="limit")
    offset = cursor_decode(cursor, fingerprint=sort, message=INVALID_LISTING_CURSOR)
    qs = (
        ContentItem.objects.searchable(principal, corpus_for(principal, corpus))
        .apply_filters(filters or SearchFilters(), user_id=principal.user_id)
        .select_related("live_revision", "latest_revision", "verified_by")
        .order_by(*SORTS[sort])
    )
    total = qs.count()
    items = list(qs[offset : offset + limit])
    next_offset = offset + limit
    next_cursor = cursor_encode(offset=next_offset, fingerprint=sort) if next_offset < total else None
    return ItemPage(items, total, next_cursor)



def revision_numbers(
    *, principal: Principal, item_ids: Iterable[int], corpus: Corpus = "live"
) -> dict[int, int]:
    """item id -> number of the revision ``principal`` reads, for the readable items among ``item_ids``.

    The engine's access rule (``ContentItem.objects.searchable``): an item the principal may not read, an
    archived one, or one outside the corpus is left out, so the keys are also "what may be shown".
    One query.
    """
    ids = {int(i) for i in item_ids}
    if not ids:
        return {}
    scope = corpus_for(principal, corpus)
    column = "live_revision__number" if scope == "live" else "latest_revision__number"
    rows = ContentItem.objects.searchable(principal, scope).filter(pk__in=ids).values_list("pk", column)
    return {pk: number for pk, number in rows if number is not None}
