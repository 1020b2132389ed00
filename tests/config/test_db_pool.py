"""Pooled PostgreSQL sessions in web processes (config.postgres_db, DB_POOL_MAX_SIZE)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.db import OperationalError
from django.db.utils import ConnectionHandler

from config.env import parse_database_url
from config.postgres_db.base import POOL_FIRST_WAIT_S, DatabaseWrapper

ROOT = Path(__file__).resolve().parents[2]


def _wrapper(url: str, alias: str, *, max_size: int, timeout: float) -> DatabaseWrapper:
    settings = {**parse_database_url(url), "ENGINE": "config.postgres_db", "CONN_MAX_AGE": 0}
    settings["OPTIONS"] = {"pool": {"min_size": 0, "max_size": max_size, "timeout": timeout}}
    # alias "default": django.contrib.postgres looks its connection up by alias when one opens; the pool is
    # the test's own (only a wrapper whose settings ask for one has a pool) and is closed at its end
    filled = ConnectionHandler({alias: settings}).settings[alias]
    return DatabaseWrapper(filled, alias=alias)


def _pid(wrapper: DatabaseWrapper) -> int:
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def test_web_processes_pool_their_sessions_and_others_do_not() -> None:
    code = (
        "import django; django.setup(); from django.db import connection as c; "
        "print(bool(c.settings_dict['OPTIONS'].get('pool')), c.settings_dict['CONN_MAX_AGE'])"
    )

    def run(**env: str) -> str:
        base = {k: v for k, v in os.environ.items() if k not in ("KB_PROCESS_ROLE", "DB_POOL_MAX_SIZE")}
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip().splitlines()[-1]

    assert run(KB_PROCESS_ROLE="web") == "True 0"
    assert run(KB_PROCESS_ROLE="web", DB_POOL_MAX_SIZE="0") == "False 60"
    assert run() == "False 60"  # workers and commands keep their own connections


@pytest.fixture(autouse=True)
def _own_connections(django_db_blocker: Any) -> Any:
    """These tests open their own pools, outside pytest-django's test database connection."""
    with django_db_blocker.unblock():
        yield


def test_a_pooled_session_is_reused_and_a_request_that_finds_none_free_uses_its_own() -> None:
    # given: a pool of one session
    url = os.environ["DATABASE_URL"]
    first = _wrapper(url, "default", max_size=1, timeout=20)
    second = _wrapper(url, "default", max_size=1, timeout=20)
    try:
        pooled_pid = _pid(first)
        first.close()
        # when: the next request comes after the first handed its session back
        # then: it gets the same session (the same backend)
        assert _pid(second) == pooled_pid
        second.close()
        # when: a request holds the only session and another comes
        assert _pid(first) == pooled_pid
        started = time.monotonic()
        own_pid = _pid(second)
        waited = time.monotonic() - started
        # then: after the first wait it works on a connection of its own, closed (not pooled) at its end
        assert own_pid != pooled_pid and waited >= POOL_FIRST_WAIT_S
        own = second.connection
        second.close()
        assert own.closed and first.pool.get_stats()["pool_size"] == 1
        with second.cursor() as cursor:  # its settings are the pool's (time zone)
            cursor.execute("SHOW TIME ZONE")
            assert cursor.fetchone()[0] == "UTC"
    finally:
        second.close()
        first.close()
        second.close_pool()


def test_a_pool_whose_server_is_down_fails_fast_instead_of_waiting_its_timeout() -> None:
    # given: a pool pointed at a port nothing listens on, with a long timeout
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    wrapper = _wrapper(f"postgres://kb@127.0.0.1:{port}/kb", "default", max_size=2, timeout=60)
    # when
    started = time.monotonic()
    with pytest.raises(OperationalError):
        wrapper.ensure_connection()
    # then: it failed after the first wait and a refused connection, nowhere near the pool's 60 s
    assert time.monotonic() - started < 30
    wrapper.close_pool()


