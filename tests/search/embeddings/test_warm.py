"""The query-embedding model loads before a search's embedding budget starts: in kb_search and web processes.

The budget (EMBEDDING_BUDGET_S) is for a slow provider; loading our own model's weights must not spend it,
or the first search of every fresh process comes back lexical-only ("embedding_unavailable").
"""

from __future__ import annotations

import json
import time
from io import StringIO

import httpx
import pytest
from django.core.management import call_command
from django.test import override_settings

from search.embeddings import providers, spaces
from search.engine import retrieve
from search.principal import Principal
from search.types import RetrievalQuery
from tests.factories import build, make_item
from tests.mcp_api.client import asgi_server

STAFF = Principal(kind="staff", all_content=True)


class SlowToLoad(providers.HashEmbedder):
    """The test embedder, with weights that take longer to load than the search budget allows."""

    def __init__(self, load_s: float) -> None:
        super().__init__(384)
        self.load_s = load_s
        self.loaded = False

    def load(self) -> None:
        if not self.loaded:
            time.sleep(self.load_s)
            self.loaded = True

    def embed_query(self, text: str) -> list[float]:
        self.load()
        return self.embed([text])[0]


@pytest.fixture
def slow_model(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def install() -> SlowToLoad:
        provider = SlowToLoad(load_s=0.6)
        monkeypatch.setattr(spaces, "space_provider", lambda model, dims: provider)
        return provider

    return install


@pytest.mark.django_db
@override_settings(EMBEDDING_BUDGET_S=0.3)
def test_a_cold_model_spends_the_budget_and_kb_search_loads_it_first(slow_model) -> None:
    make_item(title="Harbour cranes", body="Crane operators follow harbour safety signals.")
    build()
    # given a model that loads in 0.6 s and a 0.3 s budget: a search that loads it inside degrades
    slow_model()
    cold = retrieve(query=RetrievalQuery(text="harbour cranes", principal=STAFF, threshold=0.0))
    assert "embedding_unavailable" in cold.degraded
    # when kb_search runs in a "fresh process" (a new, unloaded model)
    provider = slow_model()
    out = StringIO()
    call_command("kb_search", "harbour cranes", "--json", "--threshold", "0", stdout=out)
    # then it loaded the model before the clock started: both lanes answered
    data = json.loads(out.getvalue().strip().splitlines()[-1])
    assert provider.loaded and data["degraded"] == []
    assert "vector" in data["results"][0]["lanes"]


@pytest.mark.django_db
@override_settings(EMBEDDING_BUDGET_S=0.3)
def test_a_hung_provider_still_degrades_within_the_budget(slow_model, monkeypatch) -> None:
    make_item(title="Harbour cranes", body="Crane operators follow harbour safety signals.")
    build()
    provider = slow_model()
    provider.load()
    monkeypatch.setattr(provider, "embed_query", lambda text: time.sleep(5))
    started = time.perf_counter()
    result = retrieve(query=RetrievalQuery(text="harbour cranes", principal=STAFF, threshold=0.0))
    assert "embedding_unavailable" in result.degraded and result.hits
    assert time.perf_counter() - started < 3


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_first_search_a_web_process_serves_is_hybrid(settings) -> None:
    # given a knowledge base embedded with the English MiniLM, whose cold load (torch and weights) takes
    # seconds, longer than the default 1.5 s budget
    settings.EMBEDDING_PROVIDER = "local"
    providers._provider.cache_clear()
    spaces._known_spaces.clear()
    try:
        make_item(title="Harbour cranes", body="Crane operators follow harbour safety signals.")
        build()
        from django.db import connection

        with asgi_server(db_name=connection.settings_dict["NAME"], extra_env={"EMBEDDING_PROVIDER": "local"}) as url:
            # when the first request of the fresh web process is a search
            response = httpx.post(url + "/api/search", json={"query": "harbour cranes"}, timeout=30)
        # then both lanes answered: the process loaded the model before it took the request
        data = response.json()
        assert response.status_code == 200, data
        assert data["degraded"] == []
        assert "vector" in data["results"][0]["lanes"]
    finally:
        providers._provider.cache_clear()
        spaces._known_spaces.clear()
