"""Reads other than ranked retrieval: item lookups, browse-mode listing and the live preview.

Every read goes through ``ContentItem.objects.searchable(principal, corpus)``, the same access rule
``retrieve`` uses, so no surface can show an item the engine would not.
"""

from __future__ import annotations

import base64
import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from django.conf import settings
from django.db import OperationalError, connection, transaction

from search.errors import InvalidCursor, InvalidQuery, NotFound
from search.models import ContentItem
from search.principal import Principal
from search.query_parser import normalize_query_text
from search.analysis import folded_text
from search.types import MAX_LIMIT, PREVIEW_MAX_LIMIT, Corpus, SearchFilters

logger = logging.getLogger(__name__)

BrowseSort = Literal["newest", "title", "quality_score"]


def corpus_for(principal: Principal, corpus: Corpus = "live") -> str:
    return corpus if principal.can_read_drafts else "live"


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
        if slug is not None:
            return qs.get(slug=slug)
        if external_id is not None:
            return qs.get(external_id=external_id)
    except (ContentItem.DoesNotExist, ValueError):
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


def _offset_cursor(cursor: str | None, sort: str) -> int:
    if not cursor:
        return 0
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if data["s"] != sort or int(data["o"]) < 0:
            raise ValueError
        return int(data["o"])
    except (ValueError, KeyError, TypeError, UnicodeError):
        raise InvalidCursor("cursor is not valid for this listing; start again without it.", field="cursor") from None


def items_list(
    *, principal: Principal, filters: SearchFilters | None = None, sort: BrowseSort = "newest",
    cursor: str | None = None, limit: int = 20, corpus: Corpus = "live",
) -> ItemPage:
    """Browse mode (no query): readable items with the engine's filters, sorted, cursor-paged."""
    if sort not in SORTS:
        raise InvalidQuery(f"sort must be one of {', '.join(SORTS)}.", field="sort")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidQuery(f"limit must be between 1 and {MAX_LIMIT}.", field="limit")
    offset = _offset_cursor(cursor, sort)
    qs = (
        ContentItem.objects.searchable(principal, corpus_for(principal, corpus))
        .apply_filters(filters or SearchFilters(), user_id=principal.user_id)
        .select_related("live_revision", "latest_revision", "verified_by")
        .order_by(*SORTS[sort])
    )
    total = qs.count()
    items = list(qs[offset : offset + limit])
    next_offset = offset + limit
    next_cursor = None
    if next_offset < total:
        raw = json.dumps({"o": next_offset, "s": sort}, separators=(",", ":")).encode()
        next_cursor = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    return ItemPage(items, total, next_cursor)


@dataclass(frozen=True)
class PreviewHit:
    id: int
    title: str
    content_type: str
    primary_domain: str
    url: str
    title_match: bool


def _like_pattern(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _within_budget(
    sql: str, params: list[Any], budget_ms: int, *, setting: tuple[str, str] | None = None
) -> list[tuple[Any, ...]] | None:
    """The rows of ``sql``, or None when it ran past ``budget_ms`` (cancelled by PostgreSQL, nothing left
    behind). ``setting`` (a PostgreSQL parameter name and value) applies to this statement only."""
    outer = connection.in_atomic_block  # SET LOCAL would outlive our savepoint: restore it then
    with connection.cursor() as cursor:
        try:
            with transaction.atomic():
                cursor.execute(
                    "SELECT current_setting('statement_timeout'), set_config('statement_timeout', %s, true)",
                    [str(budget_ms)],
                )
                (previous_timeout, _) = cursor.fetchone()
                previous_setting = None
                if setting:
                    name, value = setting
                    cursor.execute("SELECT current_setting(%s), set_config(%s, %s, true)", [name, name, value])
                    previous_setting = (name, cursor.fetchone()[0])
                cursor.execute(sql, params)
                rows = cursor.fetchall()
                if outer:
                    cursor.execute("SELECT set_config('statement_timeout', %s, true)", [previous_timeout])
                    if previous_setting:
                        cursor.execute("SELECT set_config(%s, %s, true)", list(previous_setting))
                return rows
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != "57014":  # not our budget running out
                raise
            return None


def preview_search(*, principal: Principal, text: str, limit: int = 8) -> list[PreviewHit]:
    """Search-as-you-type: case- and accent-insensitive substring match, title matches first.

    ``\\``, ``%`` and ``_`` are escaped, so ``50%`` matches the literal text. Two bounded index
    lookups (trigram indexes on the folded title and the folded chunk text), never a scan-and-sort.
    Each step has a time budget (``PREVIEW_STEP_BUDGET_MS``): a fragment made of common trigrams
    ("men are mor") can make a trigram index hand back most of the corpus to re-check, and a preview
    that arrives after the next keystroke is worth nothing. A title step past its budget is retried
    walking titles newest first (fast exactly when the fragment is common); a content step past it is
    skipped, leaving the title matches. The full search (Enter) is exhaustive.
    """
    cleaned = normalize_query_text(text)
    if not cleaned:
        raise InvalidQuery("q is required: type at least one character.", field="q")
    limit = max(1, min(limit, PREVIEW_MAX_LIMIT))
    corpus = corpus_for(principal)
    pattern = _like_pattern(folded_text(cleaned))
    items_sql, items_params = (
        ContentItem.objects.searchable(principal, corpus).filter(superseded_by__isnull=True).order_by()
        .values("id").query.sql_with_params()
    )
    revision_col = "live_revision_id" if corpus == "live" else "latest_revision_id"
    chunk_col = "in_live" if corpus == "live" else "in_latest"
    budget_ms = int(settings.SEARCH["PREVIEW_STEP_BUDGET_MS"])
    title_sql = f"""
        SELECT i.id FROM search_contentitem i JOIN search_revision r ON r.id = i.{revision_col}
        WHERE r.title_folded LIKE %s ESCAPE '\\' AND i.id IN ({items_sql})
        ORDER BY i.updated_at DESC, i.id LIMIT %s
    """
    title_params = [pattern, *items_params, limit]
    # A rare fragment: the trigram index finds its few titles at once. A common one ("there is"): the
    # index hands back thousands to sort, while walking titles newest first finds 8 within a few rows.
    rows = _within_budget(title_sql, title_params, budget_ms)
    if rows is None:
        rows = _within_budget(title_sql, title_params, budget_ms, setting=("enable_bitmapscan", "off")) or []
    title_ids = [r[0] for r in rows]
    content_ids: list[int] = []
    if len(title_ids) < limit:
        content_sql = f"""
            SELECT c.item_id FROM search_chunk c
            WHERE c.{chunk_col} AND c.folded_text LIKE %s ESCAPE '\\' AND c.item_id IN ({items_sql})
              AND NOT (c.item_id = ANY(%s))
            LIMIT %s
        """
        rows = _within_budget(content_sql, [pattern, *items_params, title_ids, (limit - len(title_ids)) * 4], budget_ms)
        if rows is None:
            logger.info("preview: content matches for %r skipped after %s ms", cleaned[:60], budget_ms)
        for (item_id,) in rows or []:
            if item_id not in content_ids:
                content_ids.append(item_id)
    ids = title_ids + content_ids[: limit - len(title_ids)]
    items = {
        i.pk: i for i in ContentItem.objects.filter(pk__in=ids).select_related("live_revision", "latest_revision")
    }
    hits = []
    for item_id in ids:
        item = items[item_id]
        revision = item.live_revision if corpus == "live" else (item.latest_revision or item.live_revision)
        hits.append(PreviewHit(item.pk, revision.title if revision else "", item.content_type, item.primary_domain,
                               item.get_absolute_url(), item_id in title_ids))
    return hits


def item_updated_at(item: ContentItem) -> datetime:
    return item.updated_at
