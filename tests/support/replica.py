"""Streaming replicas of the test PostgreSQL, for tests that read from a real hot standby.

A small API over ``config.standby`` (which ``manage.py bench --replica`` uses too):

``start_replica(primary_url, *, database=None, settings=None) -> Replica``
    Copy the running server behind ``primary_url`` with ``pg_basebackup -R`` (``standby.signal``, streaming
    ``primary_conninfo``) into a temporary folder, give it its own port and Unix socket, start it, and return
    once it accepts read-only connections and has replayed everything the primary had written.
    ``database`` is the database ``Replica.url`` names (default: the one in ``primary_url``);
    ``settings`` adds ``postgresql.conf`` settings (the default keeps ``shared_buffers`` small).

``Replica`` (``config.standby.Standby``):
    ``.url`` (``postgresql://…`` of ``database`` on the replica), ``.port``, ``.url_for(name)``,
    ``.stop(mode="fast" | "immediate")``, ``.start()``, ``.running()``, ``.pid()``,
    ``.pause_replay()``, ``.resume_replay()``, ``.lag_s()`` (seconds behind, ``search.engine.replicas.LAG_SQL``;
    None when it does not answer), ``.wait_caught_up(timeout=30)``, ``.destroy()`` (stop and delete).
    Every replica is also stopped and deleted when the test process exits (no orphan servers).

``primary_url(alias="default") -> str``
    The URL of the database a Django connection uses (inside a test session: the test database on the test
    server), to hand to ``start_replica``.

``add_replica_alias(replica, alias="replica_1")`` / ``remove_replica_alias(alias)``
    Make ``alias`` a Django database pointing at the replica's copy of the test database. Added to
    ``django.db.connections`` after pytest-django created its test databases (so it is never created) with
    ``TEST.MIRROR = "default"`` (so a transactional test never flushes it). A test that uses it declares it:
    ``@replica_db`` (``django_db(transaction=True, databases=["default", "replica_1"])``).

``replicas_configured(*aliases)`` (context manager)
    Make ``aliases`` the replicas ``search.replicas`` reads from, for the block (fresh health state), and
    close every connection to them on exit.

``stop_under_load(replica, search, *, threads) -> Outage``
    ``threads`` threads call ``search(number)`` (which returns ``(ok, what)``) without pause, each failure or
    exception counted; after 2 s the replica stops (fast shutdown: its sessions are cut mid-read), stays down
    3 s and starts again; 5 s later the load stops. ``Outage``: ``ok``, ``errors``, ``stopped_at`` (once it is
    down), ``starting_at`` (``start`` called: it may answer before ``start`` returns) and ``started_at``,
    monotonic times to compare with where reads went; it was down from ``stopped_at`` to ``starting_at``.

``server_reads(url, table) -> int``
    Sequential plus index scans of ``table`` counted by the server at ``url`` (``pg_stat_user_tables``), after
    closing this process's connections (a backend reports its counts when it exits; an idle one may wait 10 s)
    and once the figure holds still: how a test sees, on the server itself, where reads went.

The fixtures in ``tests/replicas/conftest.py`` use these: a session-wide ``replica_server`` and a per-test
``replica`` (transactional tests: rows must be committed to stream).
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from urllib.parse import quote

import psycopg
import pytest

from config.standby import Standby, standby_create

Replica = Standby

TEST_REPLICA_SETTINGS = {"shared_buffers": "'256MB'", "effective_cache_size": "'1GB'"}


def primary_url(alias: str = "default") -> str:
    from django.db import connections

    connection = connections[alias]
    connection.ensure_connection()  # an embedded backend fills HOST/PORT/USER on first connection
    s = connection.settings_dict
    user = quote(str(s.get("USER") or "postgres"), safe="")
    password = f":{quote(str(s['PASSWORD']), safe='')}" if s.get("PASSWORD") else ""
    host, port = str(s.get("HOST") or ""), str(s.get("PORT") or "5432")
    name = quote(str(s["NAME"]), safe="")
    if host.startswith("/"):
        return f"postgresql://{user}{password}@localhost:{port}/{name}?host={quote(host, safe='')}"
    return f"postgresql://{user}{password}@{host or 'localhost'}:{port}/{name}"


def start_replica(
    primary_url: str, *, database: str | None = None, settings: dict[str, str] | None = None
) -> Replica:
    from urllib.parse import unquote, urlparse

    name = database or unquote(urlparse(primary_url).path.lstrip("/"))
    replica = standby_create(primary_url, database=name, settings={**TEST_REPLICA_SETTINGS, **(settings or {})})
    replica.wait_caught_up(timeout=60)
    return replica


def database_entry(replica: Replica, *, like: str = "default") -> dict[str, object]:
    """A ``DATABASES`` entry for the replica's copy of the database ``like`` uses (same user and options)."""
    from django.db import connections

    entry = copy.deepcopy(connections.settings[like])
    entry.update(
        {"HOST": str(replica.socket_dir), "PORT": str(replica.port), "NAME": connections[like].settings_dict["NAME"]}
    )
    return entry


# The marker of a test that reads from the replica alias: transactional (rows must be committed to stream),
# and allowed to use ``replica_1`` (Django refuses connections to an alias a test does not declare; a mirror,
# the alias is never flushed).
replica_db = pytest.mark.django_db(transaction=True, databases=["default", "replica_1"])
# Tests that read from two replicas (``replica_1`` and ``replica_2``).
two_replicas_db = pytest.mark.django_db(transaction=True, databases=["default", "replica_1", "replica_2"])


def add_replica_alias(replica: Replica, alias: str = "replica_1") -> str:
    """Register ``alias`` with ``django.db.connections`` (after pytest-django created its test databases, so it is
    never created; ``TEST.MIRROR`` of ``default``, so it is never flushed)."""
    from django.db import connections

    entry = database_entry(replica)
    entry["TEST"] = {**entry.get("TEST", {}), "MIRROR": "default"}
    connections.settings[alias] = entry
    return alias


def remove_replica_alias(alias: str = "replica_1") -> None:
    from django.db import connections

    with contextlib.suppress(Exception):
        connections[alias].close()
    with contextlib.suppress(AttributeError, KeyError):
        del connections[alias]
    connections.settings.pop(alias, None)


@contextlib.contextmanager
def replicas_configured(*aliases: str) -> Iterator[tuple[str, ...]]:
    """Make ``aliases`` the replicas ``search.replicas`` reads from (``settings.DATABASE_REPLICAS``), with
    fresh health state and read-your-writes marks; on exit every connection to them (this thread's, the lane
    threads', the prober's) is closed and the setting restored."""
    from django.conf import settings
    from django.db import connections

    from search import replicas
    from search.engine.lanes import lane_pool_close

    previous = getattr(settings, "DATABASE_REPLICAS", ())
    settings.DATABASE_REPLICAS = tuple(aliases)
    replicas.replicas_reset()
    try:
        yield tuple(aliases)
    finally:
        lane_pool_close()  # lane threads close their connections (to the replicas too) as they stop
        replicas.replicas_reset()
        for alias in aliases:
            with contextlib.suppress(Exception):
                connections[alias].close()
        settings.DATABASE_REPLICAS = previous


def server_reads(url: str, table: str, *, settle_s: float = 0.3, timeout: float = 15.0) -> int:
    # A backend reports its counts when it exits, or within a second of a transaction (up to 10 s when it
    # then sits idle): this process's connections are closed first (this thread's and the lane threads'), so
    # their counts are in, then the figure is read until it holds still.
    from django.db import connections

    from search.engine.lanes import lane_pool_close

    lane_pool_close()
    connections.close_all()

    def read() -> int:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute(
                "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relname = %s",
                [table],
            ).fetchone()
        return int(row[0]) if row else 0  # type: ignore[call-overload]

    deadline = time.monotonic() + timeout
    last = read()
    while True:
        time.sleep(settle_s)
        now = read()
        if now == last or time.monotonic() > deadline:
            return now
        last = now


@dataclass
class Outage:
    ok: int = 0
    errors: list[str] = field(default_factory=list)
    stopped_at: float = 0.0  # ``stop`` returned: the server is down
    starting_at: float = 0.0  # ``start`` was called: it may answer from here on
    started_at: float = 0.0  # ``start`` returned: it answers


def stop_under_load(replica: Replica, search: Callable[[int], tuple[bool, str]], *, threads: int) -> Outage:
    from django.db import connections

    outage = Outage()
    stop = threading.Event()
    lock = threading.Lock()

    def searcher(number: int) -> None:
        try:
            while not stop.is_set():
                try:
                    ok, what = search(number)
                except Exception as exc:  # noqa: BLE001 - every failure is counted
                    ok, what = False, repr(exc)[:300]
                with lock:
                    if ok:
                        outage.ok += 1
                    else:
                        outage.errors.append(what)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=searcher, args=(n,), daemon=True) for n in range(threads)]
    for worker in workers:
        worker.start()
    try:
        time.sleep(2.0)
        replica.stop(mode="fast")
        outage.stopped_at = time.monotonic()  # once it is down: a loaded machine can take a while to stop it
        time.sleep(3.0)
        outage.starting_at = time.monotonic()
        replica.start()
        outage.started_at = time.monotonic()
        time.sleep(5.0)
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=60)
    return outage
