"""Which database a read runs on, and a read run again when a replica fails under it (see the package)."""

from __future__ import annotations

import contextlib
import functools
import logging
import random
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import ParamSpec, TypeVar

from django.db import DEFAULT_DB_ALIAS, Error, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from search.principal import Principal
from search.replicas import freshness, health
from search.replicas.freshness import wrote_recently
from search.replicas.health import first_line, healthy_replicas, replica_aliases, replica_mark_down
from search.signals import database_read

logger = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")

# SQLSTATEs that say "this replica cannot answer now", so the read is run again on the primary: connection
# exceptions (08), admin/crash shutdown and "cannot connect now" (57P01-57P03), a statement cancelled by a
# recovery conflict (40001 on a standby; 40P01 when the read deadlocked with the replay: it held a table the
# replay needed while waiting for one the replay held, e.g. during an index build's DDL), and a write the
# replica refused (25006: a bug, but the primary can still answer). A statement timeout (57014) is the query's
# own doing and is not retried.
_REPLICA_STATES = ("08", "57P01", "57P02", "57P03", "40001", "40P01", "25006")

_alias: ContextVar[str | None] = ContextVar("kb_read_alias", default=None)


def read_alias() -> str:
    """The alias the current read runs on (``default`` outside ``replica_read``)."""
    return _alias.get() or DEFAULT_DB_ALIAS


def read_alias_set() -> str | None:
    """The alias chosen by an enclosing ``replica_read``, or None outside one (the router's question)."""
    return _alias.get()


def read_connection() -> BaseDatabaseWrapper:
    """The connection the current read's raw SQL goes to (this thread's, for ``read_alias()``)."""
    return connections[read_alias()]


# --- the pick ---


def _choose(principal: Principal | None) -> str:
    replicas = replica_aliases()
    if not replicas or connections[DEFAULT_DB_ALIAS].in_atomic_block:
        return DEFAULT_DB_ALIAS
    if wrote_recently(principal):
        return DEFAULT_DB_ALIAS
    healthy = healthy_replicas(replicas)
    return random.choice(healthy) if healthy else DEFAULT_DB_ALIAS


def replica_failure(exc: BaseException) -> bool:
    """Whether ``exc`` says the server could not answer (see ``_REPLICA_STATES``) rather than the query failed."""
    if not isinstance(exc, Error):
        return False
    state = getattr(exc.__cause__, "sqlstate", None)
    if state is None:  # no answer from a server at all: refused, reset, closed under us
        return True
    return str(state).startswith(_REPLICA_STATES)


def replica_read(principal: Principal | None, fn: Callable[[], T]) -> T:
    """``fn()`` with its reads on the alias ``_choose`` picks for ``principal`` (None: the current request's
    caller, when ``request_scope`` knows one). Inside another ``replica_read`` it runs on that one's alias.
    A replica failing under it (``replica_failure``) is marked unhealthy and ``fn`` runs again on another
    healthy replica, or on the primary when none is left: each database at most once."""
    scope = freshness.current_scope()
    if scope is not None and principal is not None:
        scope.principals.add(principal)  # a write later in the request marks it too
    if _alias.get() is not None:
        return fn()
    alias = _choose(principal)
    failed: set[str] = set()
    while True:
        database_read.send(sender=None, alias=alias)
        token = _alias.set(alias)
        try:
            return fn()
        except Error as exc:
            if alias == DEFAULT_DB_ALIAS or not replica_failure(exc):
                raise
            reason = first_line(exc)
            replica_mark_down(alias, reason)
            with contextlib.suppress(Exception):
                connections[alias].close()
            failed.add(alias)
            left = [other for other in healthy_replicas() if other not in failed]
            retry = random.choice(left) if left else DEFAULT_DB_ALIAS
            logger.warning("read on %s failed (%s); running it again on %s", alias, reason, retry)
            alias = retry
        finally:
            _alias.reset(token)


def replica_reads(fn: Callable[P, T]) -> Callable[P, T]:
    """Decorator: the function is a read-only path (``replica_read`` with its ``principal`` keyword argument)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        principal = kwargs.get("principal")
        return replica_read(principal if isinstance(principal, Principal) else None, lambda: fn(*args, **kwargs))

    return wrapper


@contextlib.contextmanager
def reading_on(alias: str) -> Iterator[None]:
    """Run the block's reads on ``alias``, whatever its health (tests and the bench compare databases)."""
    token = _alias.set(alias)
    try:
        yield
    finally:
        _alias.reset(token)


def replicas_reset() -> None:
    """Stop the probe thread and forget every replica's state and every read-your-writes mark of this process
    (tests, between configurations)."""
    health.health_reset()
    freshness.marks_reset()
