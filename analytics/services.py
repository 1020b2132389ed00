"""Writes of the analytics app: record a search, mark a click or an MCP follow-up read, purge old rows,
turn a zero-result query into a synonym or a content-gap note.

Privacy rules live here, in one place:

- ``query_text`` is stored for signed-in users, staff, API keys and the CLI; for signed-out callers only
  when ``QUERY_LOG_ANONYMOUS_TEXT`` is on. ``query_hash`` (keyed with the secret key) is always stored, so
  hidden queries still group and count.
- ``principal_key`` is a keyed hash: of the user or API key id, or for signed-out callers of their IP
  address *and the day* (so a visitor cannot be followed from one day to the next).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging
from datetime import date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import Q
from django.utils import timezone

from analytics.context import request_info
from analytics.models import ContentGap, QueryLog
from search.errors import InvalidQuery
from search.models import Synonym, normalize_terms
from search.principal import Principal
from search.text.query_parser import normalize_query_text
from search.types import RetrievalQuery, RetrievalResult, SearchFilters

logger = logging.getLogger(__name__)

# A click or an MCP read counts for the newest matching search of the same caller within this window.
FOLLOWUP_WINDOW = timedelta(minutes=30)
# Item ids kept per row (the returned page); enough to match a click, small enough to stay cheap.
RESULT_IDS_KEPT = 100
PURGE_BATCH = 10_000


def _hash_key() -> bytes:
    return hashlib.sha256(b"kb-analytics:" + settings.SECRET_KEY.encode()).digest()


def _keyed(value: str) -> str:
    return hmac.new(_hash_key(), value.encode(), hashlib.sha256).hexdigest()


def query_normal_form(text: str) -> str:
    """The form two searches must share to count as the same query: cleaned, spaces collapsed, case-folded."""
    return normalize_query_text(text or "").casefold()


def query_hash(text: str) -> str:
    """Keyed hash of the query's normal form ("" for an empty query, e.g. a similar_to search)."""
    normal = query_normal_form(text)
    return _keyed("q:" + normal) if normal else ""


def principal_key(
    principal: Principal, *, remote_addr: str | None = None, now: datetime | None = None
) -> str:
    """A pseudonymous, stable key for the caller ("" for a signed-out caller with no known address).

    ``remote_addr`` defaults to the current request's (``analytics.context``).
    """
    if principal.api_key_id:
        ident = f"key:{principal.api_key_id}"
    elif principal.user_id:
        ident = f"user:{principal.user_id}"
    elif principal.kind == "anonymous":
        if remote_addr is None:
            info = request_info()
            remote_addr = info.remote_addr if info is not None else ""
        if not remote_addr:
            return ""
        day = (now or timezone.now()).date().isoformat()
        ident = f"anon:{remote_addr}:{day}"
    else:
        ident = f"{principal.kind}:"  # e.g. the CLI operator
    return _keyed("p:" + ident)[:32]


def text_allowed(principal: Principal) -> bool:
    """May the raw query text of this caller be stored?"""
    return principal.kind != "anonymous" or bool(getattr(settings, "QUERY_LOG_ANONYMOUS_TEXT", False))


def _json_value(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, date | datetime):
        return value.isoformat()
    return value


def filters_to_json(filters: SearchFilters) -> dict[str, Any]:
    """The filters that differ from the defaults, JSON-ready."""
    default = SearchFilters()
    return {
        f.name: _json_value(getattr(filters, f.name))
        for f in dataclasses.fields(SearchFilters)
        if getattr(filters, f.name) != getattr(default, f.name)
    }


def filters_from_json(data: dict[str, Any]) -> SearchFilters:
    """Inverse of ``filters_to_json`` (unknown keys, e.g. from an older version, are ignored)."""
    values: dict[str, Any] = {}
    names = {f.name for f in dataclasses.fields(SearchFilters)}
    for name, value in (data or {}).items():
        if name not in names:
            continue
        if isinstance(value, list):
            value = tuple(value)
        elif name in ("date_from", "date_to") and isinstance(value, str):
            value = date.fromisoformat(value)
        values[name] = value
    while True:
        try:
            return SearchFilters(**values)
        except InvalidQuery as exc:  # a value logged before the engine bounded it: read without it
            if exc.field not in values:
                raise
            del values[exc.field]


def querylog_entry(
    *,
    query: RetrievalQuery,
    result: RetrievalResult,
    corpus: str,
    surface: str,
    tool: str = "",
    remote_addr: str | None = None,
) -> QueryLog:
    """The (unsaved) ``QueryLog`` row of a finished search, privacy rules applied."""
    timings = {k: round(float(v), 3) for k, v in result.timings_ms.items() if isinstance(v, int | float)}
    principal = query.principal
    return QueryLog(
        surface=surface[:16],
        tool=(tool or "")[:32],
        principal_kind=principal.kind,
        principal_key=principal_key(principal, remote_addr=remote_addr),
        query_text=query.text if text_allowed(principal) else "",
        query_hash=query_hash(query.text),
        corpus=corpus,
        mode=query.mode,
        granularity=query.granularity,
        threshold=query.threshold,
        similar_to=query.similar_to,
        paged=bool(query.cursor),
        filters=filters_to_json(query.filters),
        result_count=result.total,
        result_item_ids=[hit.item_id for hit in result.hits[:RESULT_IDS_KEPT]],
        partial_match=result.partial_match,
        degraded=list(result.degraded),
        suggestion=(result.suggestion or "")[:500],
        total_ms=timings.get("total_ms", 0.0),
        lexical_ms=timings.get("lexical_ms"),
        vector_ms=timings.get("vector_ms"),
        timings_ms=timings,
    )


def _mark_first_match(rows: Any, item_id: int) -> int | None:
    """Set the click on the newest row whose page held ``item_id`` (first click wins); its id, or None."""
    now = timezone.now()
    for row_id, item_ids in rows.values_list("id", "result_item_ids")[:20]:
        if item_id in (item_ids or ()):
            updated = QueryLog.objects.filter(pk=row_id, clicked_item_id__isnull=True).update(
                clicked_item_id=item_id, clicked_at=now
            )
            return row_id if updated else None
    return None


def querylog_mark_click(
    *, principal: Principal, query_text: str, item_id: int, remote_addr: str | None = None
) -> int | None:
    """Browse: the caller opened ``item_id`` from the results of ``query_text``.

    Matches the newest browse search of the same caller and query (within ``FOLLOWUP_WINDOW``) whose page
    showed that item. Returns the log row's id, or None when nothing matched (or it was already clicked).
    """
    key = principal_key(principal, remote_addr=remote_addr)
    digest = query_hash(query_text)
    if not key or not digest:
        return None
    rows = QueryLog.objects.filter(
        principal_key=key,
        query_hash=digest,
        surface="browse",
        created_at__gte=timezone.now() - FOLLOWUP_WINDOW,
    ).order_by("-created_at", "-id")
    return _mark_first_match(rows, item_id)


def querylog_mark_followup(
    principal: Principal, item_id: int, *, remote_addr: str | None = None
) -> int | None:
    """MCP: the caller read ``item_id``; credit the newest MCP search of the same caller that returned it.

    Cheap (two indexed statements) and never raises: the read must not fail because of analytics.
    """
    try:
        key = principal_key(principal, remote_addr=remote_addr)
        if not key:
            return None
        rows = QueryLog.objects.filter(
            principal_key=key, surface="mcp", created_at__gte=timezone.now() - FOLLOWUP_WINDOW
        ).order_by("-created_at", "-id")
        return _mark_first_match(rows, int(item_id))
    except Exception:  # noqa: BLE001
        logger.exception("query log: could not record an MCP follow-up read")
        return None


def querylog_purge(*, now: datetime | None = None, batch_size: int = PURGE_BATCH) -> int:
    """Delete rows older than ``QUERY_LOG_RETENTION_DAYS``, in batches (short locks). Returns the count."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.QUERY_LOG_RETENTION_DAYS)
    deleted = 0
    while True:
        ids = list(
            QueryLog.objects.filter(created_at__lt=cutoff)
            .order_by()
            .values_list("id", flat=True)[:batch_size]
        )
        if not ids:
            return deleted
        count, _ = QueryLog.objects.filter(id__in=ids).delete()
        deleted += count


def _readable_text(digest: str) -> str:
    """The stored text of a query hash (any row that kept it), or "" when every row hid it."""
    row = QueryLog.objects.filter(query_hash=digest).exclude(query_text="").order_by("-created_at").first()
    return row.query_text if row is not None else ""


def synonym_create_from_query(
    *, query_hash: str, means: str, language: str = "", one_way: bool = True
) -> Synonym:
    """A zero-result query becomes a synonym: the query's words → ``means`` (comma-separated alternatives).

    One-way by default (the query expands to the alternatives; a search for the alternatives is unchanged).
    Raises ``ValidationError`` with the fix when the query text was not stored or nothing new is given.
    """
    text = _readable_text(query_hash)
    if not text:
        raise ValidationError(
            "This query's text was not stored (a signed-out visitor's search); add the synonym by hand in "
            "Synonyms, or turn on QUERY_LOG_ANONYMOUS_TEXT."
        )
    terms = normalize_terms([text, *means.split(",")])
    if len(terms) < 2:
        raise ValidationError("Say what the query means: type one or more words, separated by commas.")
    synonym = Synonym(language=language, terms=terms, one_way=one_way)
    synonym.full_clean()
    synonym.save()
    return synonym


def content_gap_create(*, query_hash: str, note: str = "", user: Any = None) -> tuple[ContentGap, bool]:
    """A zero-result query becomes a content-gap note (idempotent: an open note for the query is reused)."""
    text = _readable_text(query_hash)
    if not text:
        raise ValidationError(
            "This query's text was not stored (a signed-out visitor's search), so there is nothing to note. "
            "Turn on QUERY_LOG_ANONYMOUS_TEXT to keep signed-out visitors' queries."
        )
    searches = QueryLog.objects.filter(query_hash=query_hash, result_count=0).count()
    existing = ContentGap.objects.filter(
        Q(query_hash=query_hash), ~Q(status__in=[ContentGap.Status.RESOLVED, ContentGap.Status.DISMISSED])
    ).first()
    if existing is not None:
        existing.searches = searches
        if note:
            existing.note = (existing.note + "\n" + note).strip()
        existing.save(update_fields=["searches", "note"])
        return existing, False
    gap = ContentGap.objects.create(
        query_text=text,
        query_hash=query_hash,
        searches=searches,
        note=note,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
    return gap, True
