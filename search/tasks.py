"""Celery tasks: adapters that take ids, load, and call a service (STYLE.md rule 11)."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.core.cache import cache
from django.utils import timezone

logger = logging.getLogger(__name__)

# Content changes arrive in bursts (an import, a bulk admin action): wait for a quiet moment.
INDEX_DEBOUNCE_S = 5


@shared_task(name="search.index_build", acks_late=True, ignore_result=True)
def index_build_task() -> str:
    """Debounced build: reschedules itself while changes keep coming; one build at a time (Redis lock)."""
    from search.models import IndexState
    from search.services import indexing

    state = IndexState.objects.filter(pk=1).first()
    if state is None or not state.dirty:
        return "clean"
    if state.dirty_since and timezone.now() - state.dirty_since < timedelta(seconds=INDEX_DEBOUNCE_S):
        index_build_task.apply_async(countdown=INDEX_DEBOUNCE_S)
        return "debounced"
    try:
        lock = cache.lock("lock:index_build", timeout=3600, blocking_timeout=0)
        acquired = lock.acquire()
    except Exception:  # noqa: BLE001 - without Redis, build without the lock
        lock, acquired = None, True
    if not acquired:
        return "busy"
    try:
        indexing.index_rebuild()
    finally:
        if lock is not None:
            try:
                lock.release()
            except Exception:  # noqa: BLE001
                pass
    return "built"


def index_build_enqueue() -> None:
    """Ask a worker for a build after the current transaction commits. Never blocks on a dead broker."""
    from django.db import transaction

    def _send() -> None:
        try:
            index_build_task.apply_async(countdown=INDEX_DEBOUNCE_S, retry=False)
        except Exception as exc:  # noqa: BLE001
            logger.warning("could not enqueue the index build (%s); it will run on the next build", exc)

    transaction.on_commit(_send)
