"""Replica health: a probe thread per process asks each replica how far behind it is."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connections

from search.signals import replica_checked

logger = logging.getLogger(__name__)

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
def replica_aliases() -> tuple[str, ...]:
    """The replica aliases of ``DATABASES`` (``replica_1``, …), from ``DATABASE_REPLICA_URLS``."""
    return tuple(getattr(settings, "DATABASE_REPLICAS", ()))


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__



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
        state = ReplicaHealth(alias, False, None, time.monotonic(), first_line(exc))
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


def health_reset() -> None:
    """Stop the probe thread and forget every replica's state in this process."""
    global _prober
    prober, _prober = _prober, None
    _prober_stop.set()
    if prober is not None and prober.is_alive():
        prober.join(timeout=10)
    with _health_lock:
        _health.clear()
