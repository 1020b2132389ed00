"""search.replicas without a replica server: the pick, read-your-writes, failure classes, the router."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import DEFAULT_DB_ALIAS, OperationalError, ProgrammingError, connection
from django.http import HttpResponse
from django.test import RequestFactory

from config.db_router import ReplicaRouter
from config.middleware import ReadYourWritesMiddleware
from search import replicas
from search.principal import ANONYMOUS, Principal
from search.replicas import freshness, health
from search.signals import database_read

EDITOR = Principal(kind="staff", user_id=7, all_content=True)
AGENT = Principal(kind="api_key", api_key_id=3, all_content=True)


@pytest.fixture
def one_replica(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A replica alias that reads are allowed to pick (healthy, no probe thread: nothing connects to it)."""
    settings.DATABASE_REPLICAS = ("replica_1",)
    settings.READ_YOUR_WRITES_S = 10.0
    replicas.replicas_reset()
    monkeypatch.setattr(health, "_ensure_prober", lambda: None)
    health._record(replicas.ReplicaHealth("replica_1", True, 0.0, time.monotonic()))
    yield "replica_1"
    replicas.replicas_reset()


def _picked(principal: Principal | None) -> str:
    return replicas.replica_read(principal, replicas.read_alias)


def test_without_replicas_a_read_runs_on_the_primary_and_looks_nothing_up(monkeypatch: pytest.MonkeyPatch) -> None:
    # given: no DATABASE_REPLICA_URLS, and a cache that must not be asked
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the cache was asked")

    monkeypatch.setattr(freshness.cache, "get_many", refuse)
    seen: list[str] = []
    database_read.connect(lambda sender, alias, **kw: seen.append(alias), weak=False, dispatch_uid="t.reads")
    try:
        # when / then: the primary, counted once, and a write marks nothing
        assert replicas.replica_aliases() == ()
        assert _picked(EDITOR) == DEFAULT_DB_ALIAS
        replicas.mark_written(keys=replicas.principal_keys(EDITOR))
        assert freshness._local_marks == {}
        assert replicas.read_connection().alias == DEFAULT_DB_ALIAS
    finally:
        database_read.disconnect(dispatch_uid="t.reads")
    assert seen == [DEFAULT_DB_ALIAS]


def test_reads_go_to_a_healthy_replica_and_nested_reads_keep_their_alias(one_replica: str) -> None:
    def nested() -> tuple[str, str]:
        return replicas.read_alias(), replicas.replica_read(EDITOR, replicas.read_alias)

    assert _picked(ANONYMOUS) == one_replica
    assert replicas.replica_read(None, nested) == (one_replica, one_replica)
    assert replicas.read_alias() == DEFAULT_DB_ALIAS  # outside a read


@pytest.mark.django_db
def test_a_caller_inside_a_transaction_reads_from_the_primary(one_replica: str) -> None:
    # pytest-django's test transaction is open on the primary: its rows are only there
    assert connection.in_atomic_block
    assert _picked(ANONYMOUS) == DEFAULT_DB_ALIAS


def test_an_unhealthy_or_unprobed_replica_is_never_picked(one_replica: str) -> None:
    replicas.replica_mark_down(one_replica, "gone")
    assert _picked(ANONYMOUS) == DEFAULT_DB_ALIAS
    replicas.replicas_reset()  # forgets every state: not probed yet
    assert _picked(ANONYMOUS) == DEFAULT_DB_ALIAS


def test_a_principal_who_wrote_reads_from_the_primary_for_the_window(one_replica: str, settings: Any) -> None:
    # when: the editor writes
    replicas.mark_written(keys=replicas.principal_keys(EDITOR))
    # then: the editor reads from the primary, here and in any other process (the shared cache) ...
    assert _picked(EDITOR) == DEFAULT_DB_ALIAS
    freshness._local_marks.clear()
    assert _picked(EDITOR) == DEFAULT_DB_ALIAS
    # ... while others, anonymous visitors and other keys, stay on the replica
    assert _picked(ANONYMOUS) == one_replica
    assert _picked(AGENT) == one_replica
    assert _picked(Principal(kind="user", user_id=8)) == one_replica
    # and with the window off, nobody is sent to the primary
    settings.READ_YOUR_WRITES_S = 0.0
    assert _picked(EDITOR) == one_replica


def test_this_process_honours_its_own_marks_when_the_cache_is_down(
    one_replica: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("valkey is down")

    monkeypatch.setattr(freshness.cache, "set_many", down)
    monkeypatch.setattr(freshness.cache, "get_many", down)
    replicas.mark_written(keys=replicas.principal_keys(AGENT))
    assert _picked(AGENT) == DEFAULT_DB_ALIAS
    assert _picked(EDITOR) == one_replica


def test_a_request_that_wrote_marks_its_signed_in_caller(one_replica: str) -> None:
    # given: a request by user 7 whose view changes content (a content service says so with note_write)
    def view(request: Any) -> HttpResponse:
        replicas.note_write()
        return HttpResponse("saved")

    request = RequestFactory().post("/admin/")
    request.user = type("User", (), {"is_authenticated": True, "pk": 7})()
    # when
    ReadYourWritesMiddleware(view)(request)
    # then: user 7 reads from the primary; a request that wrote nothing marks nobody
    assert _picked(EDITOR) == DEFAULT_DB_ALIAS
    other = RequestFactory().post("/graphql")
    other.user = type("User", (), {"is_authenticated": True, "pk": 8})()
    ReadYourWritesMiddleware(lambda request: HttpResponse("read"))(other)
    assert _picked(Principal(kind="user", user_id=8)) == one_replica


def test_reads_without_a_principal_answer_for_the_requests_caller(one_replica: str) -> None:
    replicas.mark_written(keys=["user:7"])
    with replicas.request_scope(lambda: ["user:7"]):
        assert _picked(None) == DEFAULT_DB_ALIAS
    with replicas.request_scope(lambda: []):
        assert _picked(None) == one_replica


def _error(sqlstate: str | None, cls: type[Exception] = OperationalError) -> Exception:
    exc = cls("boom")
    cause = psycopg.OperationalError("boom")
    if sqlstate is not None:
        cause.sqlstate = sqlstate  # type: ignore[misc]
    exc.__cause__ = cause
    return exc


@pytest.mark.parametrize(
    ("sqlstate", "retried"),
    [(None, True), ("08006", True), ("57P01", True), ("57P03", True), ("40001", True), ("40P01", True),
     ("25006", True),
     ("57014", False), ("42703", False), ("23505", False)],
)
def test_which_failures_send_a_read_back_to_the_primary(sqlstate: str | None, retried: bool) -> None:
    assert replicas.replica_failure(_error(sqlstate)) is retried
    assert replicas.replica_failure(ValueError("not a database error")) is False


def test_a_replica_failure_is_retried_once_on_the_primary_and_other_errors_are_not(one_replica: str) -> None:
    attempts: list[str] = []

    def flaky() -> str:
        attempts.append(replicas.read_alias())
        if replicas.read_alias() == one_replica:
            raise _error("57P01")
        return "answered"

    assert replicas.replica_read(ANONYMOUS, flaky) == "answered"
    assert attempts == [one_replica, DEFAULT_DB_ALIAS]
    assert replicas.healthy_replicas() == []
    # a query's own error (a bad column) reaches the caller, and the replica stays in use
    health._record(replicas.ReplicaHealth(one_replica, True, 0.0, time.monotonic()))
    attempts.clear()

    def broken() -> None:
        attempts.append(replicas.read_alias())
        raise _error("42703", ProgrammingError)

    with pytest.raises(ProgrammingError):
        replicas.replica_read(ANONYMOUS, broken)
    assert attempts == [one_replica] and replicas.healthy_replicas() == [one_replica]


def test_the_router_reads_where_the_read_runs_and_writes_to_the_primary(one_replica: str) -> None:
    router = ReplicaRouter()
    loaded_from_replica = type("Obj", (), {"_state": type("S", (), {"db": one_replica})()})()
    assert router.db_for_read(object) is None  # outside a read: Django's own choice (the primary)
    assert router.db_for_read(object, instance=loaded_from_replica) == DEFAULT_DB_ALIAS
    with replicas.reading_on(one_replica):
        assert router.db_for_read(object) == one_replica
        assert router.db_for_write(object) == DEFAULT_DB_ALIAS
    assert router.allow_migrate(one_replica, "search") is False
    assert router.allow_migrate(DEFAULT_DB_ALIAS, "search") is None
    on_primary = type("Obj", (), {"_state": type("S", (), {"db": DEFAULT_DB_ALIAS})()})()
    assert router.allow_relation(loaded_from_replica, on_primary) is True
