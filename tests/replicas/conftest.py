"""A real streaming replica of the test database for the tests in this folder.

``replica_server`` (session): one hot standby of the test PostgreSQL (``tests.support.replica.start_replica``),
copied once the test database exists and registered as the Django alias ``replica_1`` (a mirror of
``default`` for the test runner: never created, never flushed); stopped and deleted at the end of the session.

``replica`` (per test; the test is marked ``@replica_db``: transactional, since rows must be committed to
stream, and allowed to use ``replica_1``): the standby running, replaying and caught up, the one replica
``search.replicas`` knows, probed once (healthy). The probe thread then waits ``REPLICA_PROBE_S`` = 1 h
unless a test shortens it, so each test decides when replicas are probed (``replicas.replicas_probe()``).

``second_replica_server`` (session) and ``two_replicas`` (per test, marked ``@two_replicas_db``): a second hot
standby, alias ``replica_2``, copied only when a test asks for it; both running, caught up and probed, the two
replicas ``search.replicas`` knows.

``routed`` (per test): ``(monotonic time, database)`` of every read-only call while the test runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.replica import (
    Replica,
    add_replica_alias,
    primary_url,
    remove_replica_alias,
    replicas_configured,
    start_replica,
)


@pytest.fixture(scope="session")
def replica_server(django_db_setup: None, django_db_blocker: Any) -> Iterator[Replica]:
    with django_db_blocker.unblock():
        server = start_replica(primary_url())
    add_replica_alias(server)
    try:
        yield server
    finally:
        remove_replica_alias()
        server.destroy()


@pytest.fixture
def replica(replica_server: Replica, settings: Any) -> Iterator[Replica]:
    from search import replicas

    settings.REPLICA_PROBE_S = 3600.0
    settings.REPLICA_MAX_LAG_S = 5.0
    settings.READ_YOUR_WRITES_S = 10.0
    replica_server.start()
    replica_server.resume_replay()
    replica_server.wait_caught_up()
    with replicas_configured("replica_1"):
        replicas.replicas_probe()
        yield replica_server
    if replica_server.running():
        replica_server.resume_replay()


@pytest.fixture(scope="session")
def second_replica_server(replica_server: Replica, django_db_blocker: Any) -> Iterator[Replica]:
    with django_db_blocker.unblock():
        server = start_replica(primary_url())
    add_replica_alias(server, "replica_2")
    try:
        yield server
    finally:
        remove_replica_alias("replica_2")
        server.destroy()


@pytest.fixture
def two_replicas(
    replica_server: Replica, second_replica_server: Replica, settings: Any
) -> Iterator[tuple[Replica, Replica]]:
    from search import replicas

    settings.REPLICA_PROBE_S = 3600.0
    settings.REPLICA_MAX_LAG_S = 5.0
    settings.READ_YOUR_WRITES_S = 10.0
    servers = (replica_server, second_replica_server)
    for server in servers:
        server.start()
        server.resume_replay()
        server.wait_caught_up()
    with replicas_configured("replica_1", "replica_2"):
        replicas.replicas_probe()
        yield servers
    for server in servers:
        if server.running():
            server.resume_replay()


@pytest.fixture
def routed() -> Iterator[list[tuple[float, str]]]:
    from search.signals import database_read

    seen: list[tuple[float, str]] = []
    lock = threading.Lock()

    def record(sender: Any, *, alias: str, **kwargs: Any) -> None:
        with lock:
            seen.append((time.monotonic(), alias))

    database_read.connect(record, weak=False, dispatch_uid="tests.replicas.routed")
    yield seen
    database_read.disconnect(dispatch_uid="tests.replicas.routed")
