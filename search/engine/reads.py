"""Which database a read runs on: the primary (``default``) or a streaming replica (``DATABASE_REPLICA_URLS``).

The one place this is decided. A read-only path runs under ``replica_read(principal, fn)`` (or the
``replica_reads`` decorator): it picks an alias once, holds it in a context variable for the call, and every
statement the path issues goes there — the engine's raw SQL through ``read_connection()``, the ORM through the
database router (``config.db_router``), lane threads because ``lanes.LanePool`` runs each task in a copy of
the caller's context. Writes never look at it: the router sends them, like migrations, index builds and
view refreshes (plain ``django.db.connection``), to the primary.

The pick (``_choose``), in order:

1. no replicas configured → ``default``, and nothing else happens (no lookup, no query; the read is counted);
2. the caller is inside a transaction on the primary → ``default`` (its own uncommitted rows are there);
3. the principal changed content less than ``READ_YOUR_WRITES_S`` ago → ``default`` (read-your-writes; marks
   live in the shared cache, keyed by user id and API key id, so every web process sees them);
4. a healthy replica, at random → that replica; none → ``default``.

A replica is healthy when the last probe (every ``REPLICA_PROBE_S``, on a background thread per process,
with a connection of its own) reached it and found it at most ``REPLICA_MAX_LAG_S`` behind. A read that
fails on a replica (the server went away, refused the connection, or cancelled the statement for a recovery
conflict) marks it unhealthy until the next probe and is run again on another healthy replica, or on the
primary when no other is healthy (each database at most once, so a read runs at most replicas + 1 times);
only the outermost ``replica_read`` retries, so a nested read simply raises to it. A process's first read waits up to
``FIRST_PROBE_WAIT_S`` for the first probe; a replica no probe has found healthy is never used.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from django.conf import settings
from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, Error, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from search.principal import Principal
from search.signals import database_read, replica_checked

logger = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")

# Seconds a standby is behind its primary: 0 while it has replayed all it received; else the age of the
# last transaction it replayed (so a paused replay with WAL waiting behind it counts as lagging from there).
# "All it received" is <=, not =: a restarted standby reports its receive position from the start of the WAL
# segment it resumed streaming in, behind what it had already replayed, until the primary writes again (on a
# quiet primary that can be minutes, and the age of its last replayed transaction meanwhile only grows).
# Not streaming yet (no receive position) falls through to that age.
LAG_SQL = """
SELECT CASE
    WHEN NOT pg_is_in_recovery() THEN 0.0
    WHEN pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn() THEN 0.0
    ELSE COALESCE(extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8, 'Infinity')
END
"""
# SQLSTATEs that say "this replica cannot answer now", so the read is run again on the primary: connection
# exceptions (08), admin/crash shutdown and "cannot connect now" (57P01-57P03), a statement cancelled by a
# recovery conflict (40001 on a standby), and a write the replica refused (25006: a bug, but the primary
# can still answer). A statement timeout (57014) is the query's own doing and is not retried.
_REPLICA_STATES = ("08", "57P01", "57P02", "57P03", "40001", "25006")

_alias: ContextVar[str | None] = ContextVar("kb_read_alias", default=None)


def replica_aliases() -> tuple[str, ...]:
    """The replica aliases of ``DATABASES`` (``replica_1``, …), from ``DATABASE_REPLICA_URLS``."""
    return tuple(getattr(settings, "DATABASE_REPLICAS", ()))


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
    scope = _request.get()
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
            reason = _first_line(exc)
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


# --- read-your-writes ---


@dataclass
class RequestScope:
    """What one HTTP request did: its principals (the session user's key comes lazily from ``user_keys``) and
    whether it changed content (``note_write``)."""

    user_keys: Callable[[], Sequence[str]]
    principals: set[Principal] = field(default_factory=set)
    wrote: bool = False
    _decided: dict[tuple[str, ...], bool] = field(default_factory=dict)

    def keys(self) -> list[str]:
        keys = list(self.user_keys())
        for principal in self.principals:
            keys += [k for k in principal_keys(principal) if k not in keys]
        return keys


_request: ContextVar[RequestScope | None] = ContextVar("kb_request_reads", default=None)
# This process's own marks (key → monotonic expiry): its next read honours a write at once, and still does
# while the shared cache is unreachable (config.cache turns that into misses).
_local_marks: dict[str, float] = {}
_marks_lock = threading.Lock()


def user_key(user_id: int) -> str:
    return f"user:{user_id}"


def principal_keys(principal: Principal) -> list[str]:
    """The read-your-writes keys of a principal: its user id and its API key id, when it has them."""
    keys = []
    if principal.user_id:
        keys.append(user_key(principal.user_id))
    if principal.api_key_id:
        keys.append(f"key:{principal.api_key_id}")
    return keys


def _window_s() -> float:
    return float(getattr(settings, "READ_YOUR_WRITES_S", 10.0))


def _cache_key(key: str) -> str:
    return f"ryw:{key}"


@contextlib.contextmanager
def request_scope(user_keys: Callable[[], Sequence[str]]) -> Iterator[RequestScope]:
    """One HTTP request (``config.middleware.ReadYourWritesMiddleware``): reads inside it without a principal
    of their own answer for the request's caller, and content written inside it marks that caller."""
    scope = RequestScope(user_keys)
    token = _request.set(scope)
    try:
        yield scope
    finally:
        _request.reset(token)


def note_write() -> None:
    """Content was written in the current request (a no-op outside one): its caller is marked when it ends."""
    scope = _request.get()
    if scope is not None:
        scope.wrote = True


def mark_written(*, keys: Sequence[str]) -> None:
    """Reads by these principals (``principal_keys``) go to the primary for the next ``READ_YOUR_WRITES_S``."""
    window = _window_s()
    if not keys or window <= 0 or not replica_aliases():
        return
    expiry = time.monotonic() + window
    with _marks_lock:
        for key in keys:
            _local_marks[key] = expiry
    try:
        cache.set_many({_cache_key(k): 1 for k in keys}, timeout=max(1, int(window + 0.999)))
    except Exception:  # noqa: BLE001 - a dead cache: this process's marks still hold
        logger.warning("read-your-writes: could not record the write in the shared cache")
    scope = _request.get()
    if scope is not None:
        scope._decided.clear()


def wrote_recently(principal: Principal | None) -> bool:
    """Whether reads for ``principal`` (None: the current request's caller) must see the primary."""
    if _window_s() <= 0:
        return False
    scope = _request.get()
    keys = principal_keys(principal) if principal is not None else (scope.keys() if scope is not None else [])
    if not keys:
        return False
    decided_key = tuple(keys)
    if scope is not None and decided_key in scope._decided:
        return scope._decided[decided_key]
    now = time.monotonic()
    with _marks_lock:
        local = any(_local_marks.get(k, 0.0) > now for k in keys)
    recent = local
    if not local:
        try:
            recent = bool(cache.get_many([_cache_key(k) for k in keys]))
        except Exception:  # noqa: BLE001 - no shared cache: only this process's marks are known
            recent = False
    if scope is not None:
        scope._decided[decided_key] = recent
    return recent


# --- replica health ---


@dataclass(frozen=True)
class ReplicaHealth:
    alias: str
    healthy: bool
    lag_s: float | None
    checked_at: float  # time.monotonic()
    error: str = ""


_health: dict[str, ReplicaHealth] = {}
_health_lock = threading.Lock()
_prober: threading.Thread | None = None
_prober_pid = 0
_prober_stop = threading.Event()
_probe_connections: dict[str, Any] = {}
_probe_lock = threading.Lock()
FIRST_PROBE_WAIT_S = 0.5  # one probe at a time: the probe thread's, or a caller's (tests)


def _max_lag_s() -> float:
    return float(getattr(settings, "REPLICA_MAX_LAG_S", 5.0))


def _probe_interval_s() -> float:
    return float(getattr(settings, "REPLICA_PROBE_S", 2.0))


def replica_health() -> dict[str, ReplicaHealth]:
    """The last known state of each replica in this process (for /metrics, tests and the bench)."""
    with _health_lock:
        return dict(_health)


def healthy_replicas(replicas: Sequence[str] | None = None) -> list[str]:
    """The replicas reads may go to now (starting the probe thread on first use in a process)."""
    replicas = replica_aliases() if replicas is None else replicas
    _ensure_prober()
    with _health_lock:
        return [alias for alias in replicas if (h := _health.get(alias)) is not None and h.healthy]


def _record(state: ReplicaHealth) -> None:
    with _health_lock:
        previous = _health.get(state.alias)
        _health[state.alias] = state
    if previous is not None and previous.healthy != state.healthy:
        if state.healthy:
            logger.info("replica %s is back (lag %.2f s)", state.alias, state.lag_s or 0.0)
        else:
            logger.warning("replica %s skipped: %s", state.alias, state.error)
    replica_checked.send(sender=ReplicaHealth, alias=state.alias, healthy=state.healthy, lag_s=state.lag_s)


def replica_mark_down(alias: str, reason: str) -> None:
    """Stop sending reads to ``alias`` until a probe finds it answering again."""
    with _health_lock:
        lag = _health[alias].lag_s if alias in _health else None
    _record(ReplicaHealth(alias, False, lag, time.monotonic(), reason))


def _probe_params(alias: str) -> dict[str, Any]:
    params = dict(connections[alias].get_connection_params())
    for key in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(key, None)
    params.setdefault("connect_timeout", 2)
    params["options"] = f"{params.get('options', '')} -c statement_timeout=2000".strip()
    return params


def replica_probe(alias: str) -> ReplicaHealth:
    """Ask ``alias`` how far behind it is (``LAG_SQL``) on the prober's own connection, and record the answer."""
    with _probe_lock:
        return _probe(alias)


def _probe(alias: str) -> ReplicaHealth:
    import psycopg

    conn = _probe_connections.get(alias)
    try:
        if conn is None or conn.closed:
            conn = _probe_connections[alias] = psycopg.connect(**_probe_params(alias), autocommit=True)
        row = conn.execute(LAG_SQL).fetchone()
        lag = float(row[0]) if row is not None else None
    except Exception as exc:  # noqa: BLE001 - any failure means "not usable now"
        _probe_connections.pop(alias, None)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
        state = ReplicaHealth(alias, False, None, time.monotonic(), _first_line(exc))
    else:
        limit = _max_lag_s()
        healthy = lag is not None and lag <= limit
        state = ReplicaHealth(
            alias, healthy, lag, time.monotonic(), "" if healthy else f"{lag:.1f} s behind (limit {limit:g} s)"
        )
    _record(state)
    return state


def replicas_probe() -> dict[str, ReplicaHealth]:
    """Probe every replica now (the probe thread does this every ``REPLICA_PROBE_S``)."""
    return {alias: replica_probe(alias) for alias in replica_aliases()}


def _probe_loop(stop: threading.Event, first: threading.Event) -> None:
    try:
        while not stop.is_set():
            try:
                replicas_probe()
            except Exception:  # noqa: BLE001 - the prober must outlive any one failure
                logger.exception("replica probe failed")
            first.set()
            stop.wait(_probe_interval_s())
    finally:
        with _probe_lock:
            for conn in list(_probe_connections.values()):
                with contextlib.suppress(Exception):
                    conn.close()
            _probe_connections.clear()


def _ensure_prober() -> None:
    global _prober, _prober_pid, _prober_stop
    if _prober is not None and _prober_pid == os.getpid() and _prober.is_alive():
        return
    with _health_lock:
        if _prober is not None and _prober_pid == os.getpid() and _prober.is_alive():
            return
        if _prober_pid not in (0, os.getpid()):  # a forked child (Celery prefork): its parent's state is not its own
            _health.clear()
            _probe_connections.clear()
        _prober_stop = threading.Event()
        first = threading.Event()
        _prober = threading.Thread(
            target=_probe_loop, args=(_prober_stop, first), name="kb-replica-probe", daemon=True
        )
        _prober_pid = os.getpid()
        _prober.start()
    # The first read of a process waits a moment for the first probe (a few ms on a network that answers), so a
    # fresh process does not start on the primary; past FIRST_PROBE_WAIT_S it reads from the primary meanwhile.
    first.wait(FIRST_PROBE_WAIT_S)


def replicas_reset() -> None:
    """Stop the probe thread and forget every replica's state and every read-your-writes mark of this process
    (tests, between configurations)."""
    global _prober
    prober, _prober = _prober, None
    _prober_stop.set()
    if prober is not None and prober.is_alive():
        prober.join(timeout=10)
    with _health_lock:
        _health.clear()
    with _marks_lock:
        _local_marks.clear()
