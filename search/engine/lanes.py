"""Run a lane beside the caller: a few long-lived threads, each holding its own database connection.

``retrieve()`` runs the vector lane here while the lexical lane runs in the caller's thread, so a hybrid
search costs about the slower lane rather than the sum (PostgreSQL does the work; psycopg releases the
GIL while it waits). A thread per search would pay for a new PostgreSQL backend each time, and a cold
backend runs the first HNSW search about twice as slow: the threads here keep their connections, closed
like a request's (``CONN_MAX_AGE``, health checks) before each task.

A task runs in a copy of the submitter's context (``contextvars``), so it reads from the database the caller
reads from (``search.replicas``: a replica, or the primary), on the lane thread's own connection to it.

When every lane thread is busy (a loaded server) ``submit`` returns None and the caller runs the lane
itself: under load the cores are busy anyway, and a queue would only add waiting. A lane thread sees
committed rows only, so callers inside a transaction (tests, an atomic block) never submit.
"""

from __future__ import annotations

import atexit
import contextvars
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from typing import Any, TypeVar

from django.db import close_old_connections, connections

logger = logging.getLogger(__name__)
T = TypeVar("T")

_STOP = object()


class LanePool:
    def __init__(self, size: int) -> None:
        self.size = size
        self._tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0

    def submit(self, fn: Callable[[], T]) -> Future[T] | None:
        """``fn`` started in an idle lane thread, or None when there is none (run it yourself). It runs in a copy
        of the caller's context."""
        with self._lock:
            if self._idle == 0 and len(self._threads) >= self.size:
                return None
            if self._idle == 0:
                thread = threading.Thread(target=self._work, name=f"kb-lane-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                self._idle += 1
                thread.start()
            self._idle -= 1
        future: Future[T] = Future()
        self._tasks.put((partial(contextvars.copy_context().run, fn), future))
        return future

    def _work(self) -> None:
        try:
            while True:
                task = self._tasks.get()
                if task is _STOP:
                    return
                fn, future = task
                outcome: tuple[bool, Any] = (False, None)
                if future.set_running_or_notify_cancel():
                    try:
                        close_old_connections()
                        outcome = (True, fn())
                    except BaseException as exc:  # handed to the waiting caller
                        outcome = (False, exc)
                # Idle again before the caller wakes up, so its next search can use this thread.
                with self._lock:
                    self._idle += 1
                ok, value = outcome
                if future.running():
                    if ok:
                        future.set_result(value)
                    else:
                        future.set_exception(value)
        finally:
            connections.close_all()

    def close(self) -> None:
        """Stop the threads and close their connections (tests call this before dropping their database)."""
        with self._lock:
            threads, self._threads, self._idle = self._threads, [], 0
        for _ in threads:
            self._tasks.put(_STOP)
        for thread in threads:
            thread.join(timeout=30)


_pool: LanePool | None = None
_pool_lock = threading.Lock()


def lane_pool() -> LanePool:
    global _pool
    with _pool_lock:
        if _pool is None:
            from django.conf import settings

            _pool = LanePool(int(settings.SEARCH["LANE_THREADS"]))
        return _pool


def lane_pool_close() -> None:
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.close()


atexit.register(lane_pool_close)
