"""``/healthz`` and ``/readyz`` (config/health.py): what a load balancer sees, check by check, failure by failure.

In-process, for each check's failure mode: cache, broker, model (warming, an API refusing or gone), a hung
check, the database's check on a bad address. Real web processes (PostgreSQL stopped, URLs pointing at
nothing) in tests/deploy/test_readiness.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections
from django.test import Client

from config import health
from search.embeddings import providers, spaces
from tests.deploy.processes import free_port, wait_until
from tests.search.fake_openai import FakeOpenAI, serving

CHECKS = {"database", "cache", "broker", "model"}


@pytest.fixture(autouse=True)
def _fresh_health_state() -> Iterator[None]:
    """Each test starts with no hung check, no cached API answer and the lane's model read afresh."""
    health._in_flight.clear()
    health._remote_answers.clear()
    spaces._lane_providers.clear()
    yield
    health._in_flight.clear()
    health._remote_answers.clear()
    spaces._lane_providers.clear()


def _dead_url(scheme: str = "redis") -> str:
    return f"{scheme}://127.0.0.1:{free_port()}/0"


# --- /healthz ---------------------------------------------------------------------------------------------


def test_healthz_answers_a_probe_without_touching_anything(client: Client, settings: Any) -> None:
    """No ``django_db`` mark: pytest-django fails any database access in this test."""
    # given production-like settings: one allowed host, every plain-HTTP request redirected to HTTPS
    settings.ALLOWED_HOSTS = ["kb.example.com"]
    settings.SECURE_SSL_REDIRECT = True
    from analytics import metrics

    before = sum(s.value for m in metrics.REQUESTS.collect() for s in m.samples if s.name.endswith("_total"))
    # when a load balancer probes the instance's address over plain HTTP
    probe = client.get("/healthz", HTTP_HOST="10.0.0.7")
    head = client.head("/healthz", HTTP_HOST="10.0.0.7")
    post = client.post("/healthz", HTTP_HOST="10.0.0.7")
    page = client.get("/browse", HTTP_HOST="kb.example.com")
    # then it is alive (no redirect, no host refused, no session, nothing counted), and the site still redirects
    assert probe.status_code == 200 and probe.json() == {"status": "ok"}
    assert probe["Cache-Control"] == "no-store" and "Set-Cookie" not in probe
    assert head.status_code == 200 and head.content == b""
    assert post.status_code == 405 and post["Allow"] == "GET, HEAD"
    assert page.status_code == 301 and page["Location"].startswith("https://kb.example.com/")
    after = sum(s.value for m in metrics.REQUESTS.collect() for s in m.samples if s.name.endswith("_total"))
    assert after == before + 1  # the /browse redirect only


# --- /readyz in-process -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_readyz_reports_every_check_ready(client: Client) -> None:
    response = client.get("/readyz", HTTP_HOST="10.0.0.7")

    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "ready" and set(body["checks"]) == CHECKS
    assert all(check["ok"] for check in body["checks"].values())
    assert body["checks"]["model"]["model"] == "hash-384"
    assert "replicas" not in body  # none configured: nothing said of them


@pytest.mark.django_db
def test_readyz_fails_on_a_dead_cache_and_says_why(client: Client, settings: Any) -> None:
    # given the cache pointed at a port nothing listens on
    settings.CACHES = {**settings.CACHES, "default": {**settings.CACHES["default"], "LOCATION": _dead_url()}}

    # when an operator (an address /metrics admits) and an outsider probe
    operator = client.get("/readyz")
    outsider = client.get("/readyz", REMOTE_ADDR="203.0.113.9")

    # then both see which check failed and the short reason; only the operator sees the error itself
    assert operator.status_code == outsider.status_code == 503
    assert operator["Retry-After"] == "5"
    for body in (operator.json(), outsider.json()):
        assert body["status"] == "unavailable" and body["failing"] == ["cache"]
        assert body["checks"]["cache"]["reason"] == "unreachable"
        assert all(body["checks"][name]["ok"] for name in CHECKS - {"cache"})
    assert "ConnectionError" in operator.json()["checks"]["cache"]["detail"]
    assert "detail" not in outsider.json()["checks"]["cache"]


@pytest.mark.django_db
def test_readyz_fails_on_a_dead_broker(client: Client) -> None:
    from config.celery import app

    original = app.conf.broker_url
    app.conf.broker_url = _dead_url()
    try:
        response = client.get("/readyz")
    finally:
        app.conf.broker_url = original
    assert response.status_code == 503
    body = response.json()
    assert body["failing"] == ["broker"] and body["checks"]["broker"]["reason"] == "unreachable"
    assert "Connection refused" in body["checks"]["broker"]["detail"]


@pytest.mark.django_db
def test_the_database_check_fails_on_an_address_nothing_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    # given the database's settings pointed at a closed port (a fresh thread opens a fresh connection)
    monkeypatch.setitem(connections.settings["default"], "HOST", "127.0.0.1")
    monkeypatch.setitem(connections.settings["default"], "PORT", str(free_port()))
    results: list[health.CheckResult] = []

    # when the check runs on a thread of its own, as on the readiness pool
    thread = threading.Thread(target=lambda: results.append(health.check_database()))
    thread.start()
    thread.join(timeout=30)

    # then
    assert results and not results[0].ok and results[0].reason == "unreachable"
    assert "OperationalError" in results[0].detail


@pytest.mark.django_db
def test_a_check_not_required_is_reported_but_does_not_fail_readiness(client: Client, settings: Any) -> None:
    settings.READINESS_REQUIRED = ["database", "model"]
    settings.CACHES = {**settings.CACHES, "default": {**settings.CACHES["default"], "LOCATION": _dead_url()}}

    body = client.get("/readyz").json()

    assert body["status"] == "ready"
    assert body["checks"]["cache"] == {**body["checks"]["cache"], "ok": False, "required": False}


@pytest.mark.django_db
def test_a_hung_check_times_out_and_is_not_started_again_while_it_hangs(
    client: Client, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a cache check that hangs (a server that accepts and never answers)
    settings.READINESS_TIMEOUT_S = 0.3
    release = threading.Event()
    calls: list[int] = []

    def hung() -> health.CheckResult:
        calls.append(1)
        release.wait(10)
        return health.CheckResult("cache", True)

    monkeypatch.setitem(health.CHECKS, "cache", hung)
    try:
        # when it is probed twice
        started = time.monotonic()
        first = client.get("/readyz").json()
        second = client.get("/readyz").json()
        elapsed = time.monotonic() - started
    finally:
        release.set()
    # then each answer came within the budget, said timeout, and the check ran once, not twice
    assert elapsed < 2 * 0.3 + 1.0, elapsed
    assert first["failing"] == second["failing"] == ["cache"]
    assert first["checks"]["cache"]["reason"] == "timeout"
    assert second["checks"]["cache"]["reason"] == "timeout" and len(calls) == 1
    assert "since an earlier probe" in second["checks"]["cache"]["detail"]
    # and once it answers, the next probe uses a fresh run
    wait_until(lambda: health._in_flight["cache"][1].done(), timeout=5, what="the hung check to end")
    assert client.get("/readyz").json()["checks"]["cache"]["ok"]


@pytest.mark.django_db(transaction=True)
def test_probes_at_the_same_moment_share_a_check_and_both_pass(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a cache check that takes a moment, and two load balancers probing at once
    settings.READINESS_TIMEOUT_S = 2.0
    calls: list[int] = []

    def slow_but_fine() -> health.CheckResult:
        calls.append(1)
        time.sleep(0.3)
        return health.CheckResult("cache", True)

    monkeypatch.setitem(health.CHECKS, "cache", slow_but_fine)
    answers: list[health.Readiness] = []
    probes = [threading.Thread(target=lambda: answers.append(health.readiness())) for _ in range(2)]
    for probe in probes:
        probe.start()
    for probe in probes:
        probe.join(timeout=10)

    # then both are ready (the second waited for the run the first started, or ran its own)
    assert len(answers) == 2 and all(answer.ready for answer in answers), answers
    assert 1 <= len(calls) <= 2


class _SlowModel:
    """A local model whose weights take a moment to load."""

    name, dimensions = "slow-model", 8

    def __init__(self) -> None:
        self.loaded = False
        self.loads = 0

    def load(self) -> None:
        self.loads += 1
        time.sleep(0.5)
        self.loaded = True

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[1.0] * 8 for _ in texts]


@pytest.mark.django_db
def test_a_cold_local_model_is_warming_never_waited_for(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    # given the lane's model not loaded in this process yet
    model = _SlowModel()
    monkeypatch.setattr(spaces, "lane_provider", lambda **_: model)

    # when probed while it loads
    started = time.monotonic()
    cold = client.get("/readyz").json()
    answered_in = time.monotonic() - started
    again = client.get("/readyz").json()

    # then: not ready, "warming", answered at once; the load runs once in the background, and then ready
    assert cold["failing"] == ["model"] and cold["checks"]["model"]["reason"] == "warming"
    assert answered_in < 0.4, answered_in
    assert again["checks"]["model"]["reason"] in ("warming", "") and model.loads == 1
    wait_until(lambda: model.loaded, timeout=5, what="the background load")
    warm = client.get("/readyz").json()
    assert warm["status"] == "ready" and warm["checks"]["model"]["model"] == "slow-model"
    assert model.loads == 1


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with serving() as server:
        yield server


@pytest.mark.django_db
def test_an_api_model_must_answer_and_accept_the_key(
    client: Client, settings: Any, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAI
) -> None:
    # given the lane embedding with OpenAI (here: the local fake)
    settings.OPENAI_API_KEY, settings.OPENAI_BASE_URL = "sk-test", fake_openai.url
    provider = providers.OpenAIEmbedder(model="text-embedding-3-large", dimensions=16)
    monkeypatch.setattr(spaces, "lane_provider", lambda **_: provider)

    # when it answers, refuses the key, or is gone
    reachable = client.get("/readyz").json()
    health._remote_answers.clear()
    fake_openai.fail_status = 401
    refused = client.get("/readyz").json()
    health._remote_answers.clear()
    fake_openai.stop()
    gone = client.get("/readyz").json()
    cached = client.get("/readyz").json()

    # then
    assert reachable["status"] == "ready", reachable
    assert reachable["checks"]["model"]["model"] == "text-embedding-3-large@16"
    assert refused["failing"] == ["model"] and refused["checks"]["model"]["reason"] == "refused"
    assert "OPENAI_API_KEY" in refused["checks"]["model"]["detail"]
    assert gone["failing"] == ["model"] and gone["checks"]["model"]["reason"] == "unreachable"
    assert cached["checks"]["model"]["reason"] == "unreachable"  # reused, not asked again
    assert [p for p in fake_openai.paths() if "/models/" in p] == ["/v1/models/text-embedding-3-large"] * 2


def test_readiness_settings_refuse_unknown_checks() -> None:
    import os
    import subprocess
    import sys

    from tests.deploy.processes import ROOT

    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={**os.environ, "READINESS_REQUIRED": "database,disk"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "READINESS_REQUIRED names unknown checks disk" in done.stderr
