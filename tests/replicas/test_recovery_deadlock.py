"""A read cancelled on the replica because it deadlocked with the replica's replay is run again on the primary.

On a hot standby the startup process replays the primary's locks. A read that holds a table the replay next
needs, while it waits for a table the replay already holds, is a deadlock: after ``deadlock_timeout`` the
standby cancels the read with SQLSTATE 40P01 ("canceling statement due to conflict with recovery"). That is the
replica's doing, not the query's, like the other recovery conflicts (40001): the read must be answered from the
primary, not fail the request (a search under a mixed load answered 500 this way in the many-hosts test).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
from django.db import connection, transaction

from search import replicas
from tests.support.replica import Replica, primary_url, replica_db

pytestmark = replica_db


@pytest.fixture
def two_tables(replica: Replica) -> Iterator[tuple[str, str]]:
    """Two committed tables, on the replica too."""
    first, second = (f"kbtest_{name}_{uuid.uuid4().hex[:8]}" for name in ("held", "replayed"))
    with connection.cursor() as cursor:
        for table in (first, second):
            cursor.execute(f"CREATE TABLE {table} (id integer)")
    replica.wait_caught_up()
    try:
        yield first, second
    finally:
        with connection.cursor() as cursor:
            for table in (first, second):
                cursor.execute(f"DROP TABLE IF EXISTS {table}")


def _replayed_lock(replica: Replica, table: str) -> bool:
    """Whether the replica's replay holds ``table`` (its lock, by the table's oid on the primary)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::regclass::oid", [table])
        oid = cursor.fetchone()[0]
    with replica.connect() as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE relation = %s AND mode = 'AccessExclusiveLock' AND granted",
            [oid],
        ).fetchone()
    return bool(row and row[0])


def _flush_wal() -> None:
    """Send the primary's WAL on now: a lock in an open transaction is logged, but flushed (and streamed) only
    with a later commit; this commits an empty transaction that has a transaction id."""
    with psycopg.connect(primary_url(), autocommit=True) as conn:
        conn.execute("SELECT txid_current()")


def _wait(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_a_read_deadlocked_with_the_replay_is_run_again_on_the_primary(
    replica: Replica, two_tables: tuple[str, str]
) -> None:
    held, replayed = two_tables
    attempts: list[tuple[str, str]] = []  # (alias, outcome)
    holding = threading.Event()
    result: list[object] = []

    def read() -> int:
        alias = replicas.read_alias()
        try:
            with transaction.atomic(using=alias), replicas.read_connection().cursor() as cursor:
                cursor.execute(f"SELECT count(*) FROM {held}")  # holds it until the transaction ends
                holding.set()
                cursor.execute(f"SELECT count(*) FROM {replayed}")
                count = int(cursor.fetchone()[0])
        except Exception as exc:
            attempts.append((alias, getattr(exc.__cause__, "sqlstate", None) or type(exc).__name__))
            raise
        attempts.append((alias, "ok"))
        return count

    def reader() -> None:
        try:
            result.append(replicas.replica_read(None, read))
        except BaseException as exc:
            result.append(exc)
        finally:
            connection.close()

    # given: the primary takes the second table (the replica replays the lock: its startup process holds it)
    with psycopg.connect(primary_url()) as primary:
        primary.execute(f"LOCK TABLE {replayed} IN ACCESS EXCLUSIVE MODE")
        _flush_wal()
        _wait(lambda: _replayed_lock(replica, replayed), "the replica to replay the first lock")
        # and a read on the replica that holds the first table and waits for the second
        thread = threading.Thread(target=reader)
        thread.start()
        assert holding.wait(10)
        time.sleep(0.2)
        # when: the primary takes the first table too: the replay waits for the read, the read for the replay
        primary.execute(f"LOCK TABLE {held} IN ACCESS EXCLUSIVE MODE")
        _flush_wal()
        # (the retry on the primary waits for these locks: let go once the replica has cancelled the read)
        _wait(lambda: len(attempts) >= 1, "the replica to cancel the read")
        primary.rollback()
    thread.join(30)

    # then: the replica cancelled it as a deadlock, and it was answered by the primary
    assert attempts == [("replica_1", "40P01"), ("default", "ok")], attempts
    assert result == [0], result
