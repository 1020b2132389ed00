"""Liveness and readiness, for load balancers and orchestrators (``/healthz``, ``/readyz``; docs/deploy.md).

- **Liveness** (``/healthz``): the process answers HTTP. Nothing else is touched (no database, no cache),
  so a database outage never gets healthy processes restarted.
- **Readiness** (``/readyz``): this process can serve searches now. Four checks run side by side, each
  bounded by ``READINESS_TIMEOUT_S``:

  - ``database``: ``SELECT 1`` on the default database, through the process's own connections (its pool);
  - ``cache``: ``PING`` to the cache's Valkey/Redis;
  - ``broker``: a connection to the Celery broker and a ``PING`` on it (saves enqueue index builds);
  - ``model``: the embedding model the vector lane embeds queries with is loaded in this process (a local
    model), or its API answers (OpenAI; checked at most every ``REMOTE_RECHECK_S``). A local model still
    loading is ``warming``: not ready, and never waited for (the load starts in the background).

  ``READINESS_REQUIRED`` names the checks a "ready" answer needs; the others are reported only.

- **Replicas** (``replicas``, when ``DATABASE_REPLICA_URLS`` names any): each with ``ok``, its lag and, when
  not ok, why (``unreachable``, ``lagging``, ``unprobed``; the error itself for operators). Never a reason
  to be unready: reads fall back to the primary.

A check that hangs is not waited for beyond the timeout, and is not started again while it still runs (the
next probe waits for that run instead, and says so), so probes cannot pile threads up behind a dead server.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import redis
from django.conf import settings
from django.db import connections

logger = logging.getLogger(__name__)

Reason = Literal["", "unreachable", "timeout", "warming", "refused", "error"]
# An API model's answer (or failure) is reused this long: probes must not cost an API call each.
REMOTE_RECHECK_S = 30.0
DETAIL_MAX_CHARS = 300


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome. ``reason`` is a short word any caller may see; ``detail`` is for operators."""

    name: str
    ok: bool
    reason: Reason = ""
    detail: str = ""
    ms: float = 0.0
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReplicaState:
    """One read replica as this process last probed it. Never part of readiness: reads fall back to the
    primary while a replica is down or behind, but an operator must see it named."""

    alias: str
    ok: bool
    lag_s: float | None
    reason: Literal["", "unprobed", "unreachable", "lagging"] = ""
    detail: str = ""


@dataclass(frozen=True)
class Readiness:
    checks: tuple[CheckResult, ...]
    required: tuple[str, ...]
    replicas: tuple[ReplicaState, ...] = ()

    @property
    def failing(self) -> list[str]:
        return [c.name for c in self.checks if not c.ok and c.name in self.required]

    @property
    def ready(self) -> bool:
        return not self.failing

    def as_json(self, *, with_detail: bool) -> dict[str, Any]:
        checks: dict[str, dict[str, Any]] = {}
        for check in self.checks:
            entry: dict[str, Any] = {"ok": check.ok, "ms": round(check.ms, 1), **check.extra}
            if not check.ok:
                entry["reason"] = check.reason
                if with_detail and check.detail:
                    entry["detail"] = check.detail
            if check.name not in self.required:
                entry["required"] = False
            checks[check.name] = entry
        body: dict[str, Any] = {"status": "ready" if self.ready else "unavailable", "checks": checks}
        if not self.ready:
            body["failing"] = self.failing
        if self.replicas:
            body["replicas"] = {r.alias: _replica_json(r, with_detail=with_detail) for r in self.replicas}
        return body


def _replica_json(replica: ReplicaState, *, with_detail: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"ok": replica.ok, "lag_s": None if replica.lag_s is None else round(replica.lag_s, 3)}
    if not replica.ok:
        entry["reason"] = replica.reason
        if with_detail and replica.detail:
            entry["detail"] = replica.detail
    return entry


def _detail(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:DETAIL_MAX_CHARS] if text else type(exc).__name__


# --- the checks (each runs on a thread of the pool below) ---


def check_database() -> CheckResult:
    """``SELECT 1`` on the default database: a session from the web process's pool (handed back at the end of
    the check, as a request's is), or a new connection where there is no pool (``DB_POOL_MAX_SIZE=0``)."""
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure means "cannot serve"
        return CheckResult("database", False, "unreachable", _detail(exc))
    return CheckResult("database", True)


@lru_cache(maxsize=4)
def _redis_client(url: str, timeout_s: float) -> redis.Redis:
    return redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)


def _cache_url() -> str:
    location = settings.CACHES["default"]["LOCATION"]
    first = location[0] if isinstance(location, list | tuple) else str(location).split(",")[0]
    return str(first).strip()


def check_cache() -> CheckResult:
    """``PING`` to the cache server (the first, write, server of ``CACHES["default"]``)."""
    try:
        _redis_client(_cache_url(), settings.READINESS_TIMEOUT_S).ping()
    except Exception as exc:  # noqa: BLE001
        return CheckResult("cache", False, "unreachable", _detail(exc))
    return CheckResult("cache", True)


def check_broker() -> CheckResult:
    """A new connection to the Celery broker (``CELERY_BROKER_URL``), and a ``PING`` on it."""
    from config.celery import app

    timeout = settings.READINESS_TIMEOUT_S
    conn = app.connection_for_write(connect_timeout=timeout)
    try:
        conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, interval_max=0, timeout=timeout)
        client = getattr(conn.default_channel, "client", None)
        if client is not None:
            client.ping()
    except Exception as exc:  # noqa: BLE001
        return CheckResult("broker", False, "unreachable", _detail(exc))
    finally:
        conn.release()
    return CheckResult("broker", True)


_remote_lock = threading.Lock()
_remote_answers: dict[str, tuple[float, CheckResult]] = {}
_warming: set[str] = set()


def _warm_in_background(provider: Any) -> None:
    from search.embeddings.providers import provider_warm

    with _remote_lock:
        if provider.name in _warming:
            return
        _warming.add(provider.name)

    def run() -> None:
        try:
            provider_warm(provider)
        except Exception as exc:  # noqa: BLE001 - the next probe reports it
            logger.warning("readiness: could not load the embedding model %s: %s", provider.name, exc)
        finally:
            with _remote_lock:
                _warming.discard(provider.name)

    threading.Thread(target=run, name="readyz-model-warm", daemon=True).start()


def check_model() -> CheckResult:
    """The query-embedding model of the vector lane: loaded (local), or its API reachable (OpenAI)."""
    from django.db import DatabaseError

    from search.embeddings.providers import get_provider, provider_loaded, provider_ping
    from search.embeddings.spaces import lane_provider

    try:
        try:
            provider = lane_provider()
        except DatabaseError:  # the database check reports that; the configured model is the best guess
            provider = get_provider()
    except Exception as exc:  # noqa: BLE001 - e.g. a space of a model this version cannot embed with
        return CheckResult("model", False, "error", _detail(exc))
    extra = {"model": provider.name}
    if getattr(provider, "ping", None) is not None:  # an API: reachable (answer reused for REMOTE_RECHECK_S)
        with _remote_lock:
            cached = _remote_answers.get(provider.name)
        if cached is not None and time.monotonic() - cached[0] < REMOTE_RECHECK_S:
            return cached[1]
        status, why = provider_ping(provider, timeout_s=settings.READINESS_TIMEOUT_S)
        result = (
            CheckResult("model", True, extra=extra)
            if status == "ok"
            else CheckResult("model", False, status, why, extra=extra)
        )
        with _remote_lock:
            _remote_answers[provider.name] = (time.monotonic(), result)
        return result
    if not provider_loaded(provider):
        _warm_in_background(provider)
        return CheckResult("model", False, "warming", f"{provider.name} is loading in this process", extra=extra)
    return CheckResult("model", True, extra=extra)


CHECKS: dict[str, Callable[[], CheckResult]] = {
    "database": check_database,
    "cache": check_cache,
    "broker": check_broker,
    "model": check_model,
}

# Checks run here, one thread each; a hung check keeps its thread and is not submitted again meanwhile.
_pool = ThreadPoolExecutor(max_workers=2 * len(CHECKS), thread_name_prefix="readyz")
_in_flight: dict[str, tuple[float, Future[CheckResult]]] = {}
_in_flight_lock = threading.Lock()


def _timed(name: str, check: Callable[[], CheckResult]) -> CheckResult:
    started = time.perf_counter()
    try:
        result = check()
    except Exception as exc:  # noqa: BLE001 - a check must report, never raise
        result = CheckResult(name, False, "error", _detail(exc))
    finally:
        # A readiness thread keeps no connection between probes: a pooled one goes back to the pool, so
        # probes hold no sessions of their own (nor keep a test database from being dropped).
        connections.close_all()
    return CheckResult(
        result.name, result.ok, result.reason, result.detail, (time.perf_counter() - started) * 1000, result.extra
    )


def replica_states() -> tuple[ReplicaState, ...]:
    """Each replica ``DATABASE_REPLICA_URLS`` names, as this process's probe thread last found it (started here
    if no read has started it yet: the first probe is waited for briefly)."""
    from search import replicas

    aliases = replicas.replica_aliases()
    if not aliases:
        return ()
    replicas.healthy_replicas(aliases)
    health = replicas.replica_health()
    states = []
    for alias in aliases:
        state = health.get(alias)
        if state is None:
            states.append(ReplicaState(alias, False, None, "unprobed", "no probe has answered yet"))
        elif state.healthy:
            states.append(ReplicaState(alias, True, state.lag_s))
        else:
            reason: Literal["unreachable", "lagging"] = "lagging" if state.lag_s is not None else "unreachable"
            states.append(ReplicaState(alias, False, state.lag_s, reason, state.error[:DETAIL_MAX_CHARS]))
    return tuple(states)


def readiness() -> Readiness:
    """Run every check side by side; those without an answer within ``READINESS_TIMEOUT_S`` fail (timeout).

    A check still running from an earlier probe (a concurrent probe, or one that hangs) is waited for, not
    started again: probes never pile threads up behind a dead server.
    """
    timeout = settings.READINESS_TIMEOUT_S
    started = time.monotonic()
    futures: dict[str, tuple[float, Future[CheckResult]]] = {}
    with _in_flight_lock:
        for name, check in CHECKS.items():
            previous = _in_flight.get(name)
            if previous is None or previous[1].done():
                previous = _in_flight[name] = (started, _pool.submit(_timed, name, check))
            futures[name] = previous
    futures_wait([future for _, future in futures.values()], timeout=timeout)
    results = []
    for name, (began, future) in futures.items():
        if future.done():
            results.append(future.result())
            continue
        waited = time.monotonic() - began
        detail = f"no answer within {timeout:g} s" + (
            f" (running for {waited:.1f} s, since an earlier probe)" if began < started else ""
        )
        results.append(CheckResult(name, False, "timeout", detail, waited * 1000))
    return Readiness(checks=tuple(results), required=tuple(settings.READINESS_REQUIRED), replicas=replica_states())
