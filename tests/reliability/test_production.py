"""Production settings: ``check --deploy`` is clean, web connections cap statements, bodies are bounded."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from asgiref.testing import ApplicationCommunicator

from config.middleware import BoundedRequestBody
from tests.mcp_api.client import ROOT, asgi_server
from tests.reliability.figures import record


def production_env(**extra: str) -> dict[str, str]:
    """What a production deployment sets (DATABASE_URL and REDIS_URL: the test session's servers)."""
    unset = ("DEBUG", "DJANGO_SETTINGS_MODULE", "KB_PROCESS_ROLE", "DJANGO_ALLOW_ASYNC_UNSAFE")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(
        {
            "SECRET_KEY": secrets.token_urlsafe(64),
            "ALLOWED_HOSTS": "kb.example.com",
            "CSRF_TRUSTED_ORIGINS": "https://kb.example.com",
            **extra,
        }
    )
    return env


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_is_clean_with_production_settings() -> None:
    # when
    clean = manage(
        "check",
        "--deploy",
        "--settings=config.settings.production",
        "--fail-level",
        "WARNING",
        env=production_env(),
    )
    debug = manage(
        "check",
        "--deploy",
        "--settings=config.settings.production",
        "--fail-level",
        "WARNING",
        env=production_env(DEBUG="true"),
    )
    short_key = manage(
        "check", "--settings=config.settings.production", env=production_env(SECRET_KEY="short")
    )
    # then: clean; and the check does catch a bad deployment (DEBUG on, a weak key)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "no issues" in clean.stdout
    assert debug.returncode != 0 and "DEBUG" in debug.stderr + debug.stdout
    assert short_key.returncode != 0 and "SECRET_KEY" in short_key.stderr
    record(
        "production.check_deploy",
        {
            "command": "manage.py check --deploy --settings=config.settings.production --fail-level WARNING",
            "issues": 0,
            "negative_controls": ["DEBUG=true fails", "a short SECRET_KEY fails"],
        },
    )


SHOW_TIMEOUT = (
    "import django; django.setup(); from django.db import connection; c = connection.cursor(); "
    "c.execute('SHOW statement_timeout'); print(c.fetchone()[0])"
)
SLOW_QUERY = """
import django
django.setup()
from django.db import OperationalError, connection
cursor = connection.cursor()
try:
    cursor.execute("SELECT pg_sleep(3)")
    print("finished")
except OperationalError as exc:
    print(type(exc.__cause__).__name__)
"""


def python(code: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != "KB_PROCESS_ROLE"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_web_processes_cap_statements_and_workers_do_not() -> None:
    # when: a web process (what config.asgi / config.wsgi set up) and a worker or command process
    web = python("import config.asgi; " + SHOW_TIMEOUT.replace("import django; django.setup(); ", ""))
    wsgi = python("import config.wsgi; " + SHOW_TIMEOUT.replace("import django; django.setup(); ", ""))
    worker = python(SHOW_TIMEOUT)
    cancelled = python(SLOW_QUERY, KB_PROCESS_ROLE="web", STATEMENT_TIMEOUT_MS="300")
    # then
    assert web == wsgi == "15s"
    assert worker == "0"
    assert cancelled == "QueryCanceled"
    record(
        "production.statement_timeout",
        {"web_asgi": web, "web_wsgi": wsgi, "worker_or_command": worker, "runaway_query_at_300ms": cancelled},
    )


async def _echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A tiny ASGI app that reads the whole body, as Django does, then answers 200."""
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(size).encode()})


async def _send_body(chunks: list[bytes], headers: list[tuple[bytes, bytes]]) -> int:
    app = BoundedRequestBody(_echo, max_bytes=1000)
    scope = {"type": "http", "method": "POST", "path": "/api/search", "headers": headers}
    communicator = ApplicationCommunicator(app, scope)
    for i, chunk in enumerate(chunks):
        await communicator.send_input(
            {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        )
    start = await communicator.receive_output(timeout=5)
    await communicator.wait(timeout=5)
    return int(start["status"])


def test_request_bodies_are_bounded_with_or_without_content_length() -> None:
    from asgiref.sync import async_to_sync

    # when / then
    assert async_to_sync(_send_body)([b"x" * 900], [(b"content-length", b"900")]) == 200
    assert async_to_sync(_send_body)([b"x" * 10], [(b"content-length", b"5000")]) == 413
    assert async_to_sync(_send_body)([b"x" * 400] * 3, []) == 413  # chunked: 1200 bytes, no length given
    assert async_to_sync(_send_body)([b"x" * 400] * 2, []) == 200


@pytest.fixture
def small_body_server(
    monkeypatch: pytest.MonkeyPatch, django_db_setup: Any, django_db_blocker: Any
) -> Iterator[str]:
    from django.db import connection

    monkeypatch.setenv("MAX_REQUEST_BODY_BYTES", str(256 * 1024))
    with django_db_blocker.unblock():
        name = connection.settings_dict["NAME"]
    with asgi_server(db_name=name) as base_url:
        yield base_url


@pytest.mark.django_db(transaction=True)
def test_the_served_app_refuses_oversized_bodies(small_body_server: str) -> None:
    # given: 300 KiB, over the 256 KiB limit, sent with a length and chunked (no length)
    big = b'{"query": "' + b"x" * (300 * 1024) + b'"}'

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(big), 16 * 1024):
            yield big[start : start + 16 * 1024]

    # when
    declared = httpx.post(
        small_body_server + "/api/search",
        content=big,
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    chunked = httpx.post(
        small_body_server + "/api/search",
        content=chunks(),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    small = httpx.post(small_body_server + "/api/search", json={"query": "pricing"}, timeout=30)
    # then
    assert declared.status_code == 413 and chunked.status_code == 413
    assert "larger than" in chunked.json()["error"]["message"]
    assert small.status_code == 200
    record(
        "production.request_bodies",
        {
            "limit_bytes": 256 * 1024,
            "declared_300k": declared.status_code,
            "chunked_300k": chunked.status_code,
            "small": small.status_code,
            "default_limit_bytes": 10 * 1024 * 1024,
        },
    )
