"""The search receiver: every ``retrieve`` feeds the metrics and the query log; reads per database and replica
probes feed /metrics too. Cheap, and never raises.

Surface and tool come from the ``RetrievalQuery`` (each adapter names itself); a query left at the default
``"internal"`` inside an HTTP request takes the request's surface (``analytics.context``). Searches with no
surface at all (evaluation runs, internal callers) reach the metrics but not the log.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.dispatch import receiver

from analytics import metrics
from analytics.context import request_info
from analytics.models import QueryLog
from analytics.services import querylog_entry
from search.signals import database_read, replica_checked, search_performed
from search.types import RetrievalQuery, RetrievalResult

logger = logging.getLogger(__name__)

INTERNAL_SURFACE = "internal"
# Re-runs made by the admin's "explain" button: neither logged nor measured.
EXPLAIN_SURFACE = "explain"


def resolve_surface(query: RetrievalQuery) -> tuple[str, str]:
    """(surface, tool) of a search: the adapter's, else the current request's."""
    surface, tool = query.surface or INTERNAL_SURFACE, query.tool or ""
    info = request_info()
    if surface == INTERNAL_SURFACE and info is not None:
        surface = info.surface
    if not tool and info is not None and info.surface == surface:
        tool = info.tool
    return surface, tool


@receiver(search_performed, dispatch_uid="analytics.search_performed")
def search_performed_received(
    sender: Any, *, query: RetrievalQuery, result: RetrievalResult, corpus: str, **kwargs: Any
) -> None:
    try:
        surface, tool = resolve_surface(query)
    except Exception:  # noqa: BLE001
        logger.exception("analytics: could not resolve the search's surface")
        return
    if surface == EXPLAIN_SURFACE:
        return
    try:
        metrics.observe_search(surface=surface, tool=tool, result=result)
    except Exception:  # noqa: BLE001 - metrics must never break a search
        logger.exception("analytics: could not record search metrics")
    if surface == INTERNAL_SURFACE or not getattr(settings, "QUERY_LOG_ENABLED", True):
        return
    try:
        # Built now (the request context is needed), saved when the caller's transaction commits: at once
        # in autocommit (every surface), and a failed insert can never break a transaction in progress.
        entry = querylog_entry(query=query, result=result, corpus=corpus, surface=surface, tool=tool)
        transaction.on_commit(partial(_save, entry))
    except Exception:  # noqa: BLE001 - the search already answered; losing one log row is acceptable
        _failed()


def _failed() -> None:
    metrics.QUERY_LOG_FAILURES.inc()
    logger.exception("analytics: could not record the search in the query log")


def _save(entry: QueryLog) -> None:
    try:
        entry.save(force_insert=True)
    except Exception:  # noqa: BLE001
        _failed()


@receiver(database_read, dispatch_uid="analytics.database_read")
def database_read_received(sender: Any, *, alias: str, **kwargs: Any) -> None:
    try:
        metrics.observe_read(database=alias)
    except Exception:  # noqa: BLE001 - metrics must never break a read
        logger.exception("analytics: could not count a read")


@receiver(replica_checked, dispatch_uid="analytics.replica_checked")
def replica_checked_received(sender: Any, *, alias: str, healthy: bool, lag_s: float | None, **kwargs: Any) -> None:
    try:
        metrics.observe_replica(database=alias, healthy=healthy, lag_s=lag_s)
    except Exception:  # noqa: BLE001
        logger.exception("analytics: could not record a replica's state")
