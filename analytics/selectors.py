"""Reads of the query log: the admin's reports and the browse dropdown's popular topics.

Every report groups searches by ``query_hash`` (the keyed hash of the normalized text), so searches whose
text was not stored (signed-out visitors) still count; their text shows as "(hidden #…)" unless another
caller's row kept the same query's text.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.postgres.aggregates import ArrayAgg
from django.core.cache import cache
from django.db import connection
from django.db.models import Avg, Count, Exists, Max, OuterRef, Q, QuerySet
from django.utils import timezone

from analytics.models import ContentGap, QueryLog
from search.models import Synonym

POPULAR_TOPICS_TTL_S = 600
POPULAR_TOPICS_DAYS = 30
POPULAR_TOPIC_MAX_CHARS = 80
# Surfaces people and agents search from (not the CLI, not internal re-runs).
AUDIENCE_SURFACES = ("browse", "graphql", "mcp")
# Agent retry loops: a search within this many seconds of the caller's previous one continues the loop.
RETRY_WINDOW_S = 60
RETRY_MIN_SEARCHES = 3


def _since(days: int, now: datetime | None = None) -> datetime:
    return (now or timezone.now()) - timedelta(days=days)


def _grouped(rows: QuerySet[QueryLog]) -> QuerySet[Any]:
    return (
        rows.exclude(query_hash="")
        .values("query_hash")
        .annotate(
            text=Max("query_text"),
            searches=Count("id"),
            callers=Count("principal_key", distinct=True),
            zero=Count("id", filter=Q(result_count=0)),
            clicks=Count("id", filter=Q(clicked_item_id__isnull=False)),
            avg_ms=Avg("total_ms"),
            last_at=Max("created_at"),
            surfaces=ArrayAgg("surface", distinct=True, default=[]),
        )
    )


def top_queries(*, days: int = 30, limit: int = 50) -> list[dict[str, Any]]:
    """The most frequent queries (first pages only) with their zero-result and click counts."""
    rows = QueryLog.objects.filter(created_at__gte=_since(days), paged=False)
    return list(_grouped(rows).order_by("-searches", "-last_at")[:limit])


def zero_result_queries(*, days: int = 30, limit: int = 50) -> list[dict[str, Any]]:
    """Queries that found nothing, most frequent first, with any synonym or gap note already made."""
    rows = QueryLog.objects.filter(created_at__gte=_since(days), paged=False, result_count=0)
    open_gaps = ContentGap.objects.filter(query_hash=OuterRef("query_hash")).exclude(
        status=ContentGap.Status.DISMISSED
    )
    grouped = list(
        _grouped(rows)
        .annotate(has_gap=Exists(open_gaps), suggestion=Max("suggestion"))
        .order_by("-searches", "-last_at")[:limit]
    )
    by_term: dict[str, Synonym] = {}
    if grouped:
        for synonym in Synonym.objects.all():  # a small table: one query instead of one per row
            for term in synonym.terms:
                by_term.setdefault(term, synonym)
    for row in grouped:
        row["synonym"] = by_term.get(" ".join((row["text"] or "").casefold().split()))
    return grouped


def no_click_queries(*, days: int = 30, limit: int = 50) -> list[dict[str, Any]]:
    """Queries with results that nobody opened: no browse click, no MCP ``read`` of a returned item."""
    rows = QueryLog.objects.filter(
        created_at__gte=_since(days), paged=False, result_count__gt=0, surface__in=("browse", "mcp")
    )
    return list(_grouped(rows).filter(clicks=0).order_by("-searches", "-last_at")[:limit])


@dataclass(frozen=True)
class RetryLoop:
    principal_key: str
    principal_kind: str
    surfaces: list[str]
    searches: int
    started_at: datetime
    ended_at: datetime
    queries: list[str]
    result_counts: list[int]

    @property
    def seconds(self) -> float:
        return (self.ended_at - self.started_at).total_seconds()

    @property
    def pairs(self) -> list[tuple[str, int]]:
        """(query, result count) per search, in order."""
        return list(zip(self.queries, self.result_counts, strict=False))


def retry_loops(
    *, days: int = 7, window_s: int = RETRY_WINDOW_S, min_searches: int = RETRY_MIN_SEARCHES, limit: int = 50
) -> list[RetryLoop]:
    """Chains of searches by one caller, each within ``window_s`` of the previous (later pages excluded).

    An agent that keeps rephrasing (or repeating) a query it cannot satisfy shows up here.
    """
    table = QueryLog._meta.db_table
    sql = f"""
        WITH ordered AS (
            SELECT id, principal_key, principal_kind, surface, query_text, query_hash, result_count,
                   created_at,
                   CASE WHEN created_at - lag(created_at) OVER w <= make_interval(secs => %s)
                        THEN 0 ELSE 1 END
                       AS starts
            FROM {table}
            WHERE created_at >= %s AND principal_key <> '' AND NOT paged
            WINDOW w AS (PARTITION BY principal_key ORDER BY created_at, id)
        ), chained AS (
            SELECT *, sum(starts) OVER (PARTITION BY principal_key ORDER BY created_at, id) AS chain
            FROM ordered
        )
        SELECT principal_key, min(principal_kind), array_agg(DISTINCT surface), count(*),
               min(created_at), max(created_at),
               array_agg(CASE WHEN query_text <> '' THEN query_text
                              ELSE '(hidden #' || left(query_hash, 8) || ')' END ORDER BY created_at, id),
               array_agg(result_count ORDER BY created_at, id)
        FROM chained
        GROUP BY principal_key, chain
        HAVING count(*) >= %s
        ORDER BY max(created_at) DESC
        LIMIT %s
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [window_s, _since(days), min_searches, limit])
        return [RetryLoop(*row) for row in cursor.fetchall()]


def slowest_queries(*, days: int = 7, limit: int = 50) -> list[QueryLog]:
    """The slowest searches (engine time) with their per-lane timings."""
    return list(QueryLog.objects.filter(created_at__gte=_since(days)).order_by("-total_ms", "-id")[:limit])


def surface_summary(*, days: int = 30) -> list[dict[str, Any]]:
    """Searches, zero results, clicks and mean engine time per surface and tool."""
    return list(
        QueryLog.objects.filter(created_at__gte=_since(days))
        .values("surface", "tool")
        .annotate(
            searches=Count("id"),
            zero=Count("id", filter=Q(result_count=0)),
            clicks=Count("id", filter=Q(clicked_item_id__isnull=False)),
            avg_ms=Avg("total_ms"),
            avg_lexical_ms=Avg("lexical_ms"),
            avg_vector_ms=Avg("vector_ms"),
        )
        .order_by("-searches")
    )


def popular_topics(limit: int = 8) -> list[str]:
    """Real top queries for the browse dropdown (cached 10 min): query strings only, most callers first.

    Only first-page searches of the live corpus that found something, from the site, GraphQL or MCP, asked
    by at least ``POPULAR_TOPICS_MIN_CALLERS`` different callers (so one person's query is never shown to
    everyone), at most 80 characters. Signed-out visitors' text counts only when
    ``QUERY_LOG_ANONYMOUS_TEXT`` is on.
    """
    key = f"analytics:popular_topics:v1:{limit}"
    cached = cache.get(key)
    if cached is not None:
        return list(cached)
    min_callers = int(getattr(settings, "POPULAR_TOPICS_MIN_CALLERS", 3))
    rows = (
        QueryLog.objects.filter(
            created_at__gte=_since(POPULAR_TOPICS_DAYS),
            result_count__gt=0,
            paged=False,
            corpus="live",
            surface__in=AUDIENCE_SURFACES,
            similar_to__isnull=True,
        )
        .exclude(query_text="")
        .exclude(principal_key="")
    )
    if not getattr(settings, "QUERY_LOG_ANONYMOUS_TEXT", False):
        rows = rows.exclude(principal_kind="anonymous")
    grouped = (
        rows.values("query_hash")
        .annotate(text=Max("query_text"), callers=Count("principal_key", distinct=True), searches=Count("id"))
        .filter(callers__gte=min_callers)
        .order_by("-callers", "-searches", "text")[: limit * 3]
    )
    topics: list[str] = []
    for row in grouped:
        text = " ".join(row["text"].split())
        if (
            text
            and len(text) <= POPULAR_TOPIC_MAX_CHARS
            and text.casefold() not in {t.casefold() for t in topics}
        ):
            topics.append(text)
        if len(topics) >= limit:
            break
    cache.set(key, topics, POPULAR_TOPICS_TTL_S)
    return topics
