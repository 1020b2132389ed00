"""``federatedSearch``: over this knowledge base alone it equals ``search``; with peers it merges and reports."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest
from django.test import Client

from search.federation import peers
from tests.factories import build, make_item
from tests.graphql_api.conftest import gql
from tests.support import fake_peer

pytestmark = pytest.mark.django_db

FEDERATED = """query($input: FederatedSearchInput!) { federatedSearch(input: $input) {
  totalCount sources { name status ms count detail }
  hits { source sources url title highlightedTitle highlightedContent passage confidence lanes untrusted
         item { id slug } } } }"""
SEARCH = """query($q: String!) { search(input: {query: $q, threshold: 0}) {
  totalCount hits { itemId highlightedTitle highlightedContent confidence lanes } } }"""


@pytest.fixture
def river() -> None:
    for n in range(1, 6):
        make_item(title=f"River crossing {n}", body=f"The river crossing number {n} needs a ferry and a bridge.")
    make_item(title="Mountain pass", body="Snow chains for the mountain pass.")
    build()


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    with fake_peer.serving() as running:
        yield running


def test_over_this_knowledge_base_alone_it_equals_search(client: Client, river: None) -> None:
    _, plain = gql(client, SEARCH, {"q": "river ferry"})
    _, federated = gql(client, FEDERATED, {"input": {"query": "river ferry", "sources": ["local"], "threshold": 0}})
    expected = plain["data"]["search"]
    got = federated["data"]["federatedSearch"]
    assert got["totalCount"] == expected["totalCount"]
    assert [(h["item"]["id"], h["highlightedTitle"], h["highlightedContent"], h["confidence"], h["lanes"])
            for h in got["hits"]] == [
        (h["itemId"], h["highlightedTitle"], h["highlightedContent"], h["confidence"], h["lanes"])
        for h in expected["hits"]
    ]
    assert [s["name"] for s in got["sources"]] == ["local"] and not any(h["untrusted"] for h in got["hits"])


def test_a_peer_is_merged_escaped_and_reported_and_a_dead_one_does_not_fail_it(
    client: Client, river: None, server: ThreadingHTTPServer
) -> None:
    base = f"http://127.0.0.1:{server.server_address[1]}"
    peers.peer_add(name="friendly", base_url=f"{base}/ok", api_key="kb_00000001_" + "k" * 43, public=True)
    peers.peer_add(name="slow", base_url=f"{base}/slow", api_key="kb_00000002_" + "k" * 43, public=True,
                   timeout_ms=300)
    status, body = gql(client, FEDERATED, {"input": {"query": "river", "sources": ["all"], "threshold": 0}})
    assert status == 200 and "errors" not in body, body
    result = body["data"]["federatedSearch"]
    assert {s["name"]: s["status"] for s in result["sources"]} == {"local": "OK", "friendly": "OK",
                                                                   "slow": "TIMEOUT"}
    peer_hit = next(h for h in result["hits"] if h["source"] == "friendly")
    assert peer_hit["untrusted"] is True and peer_hit["item"] is None
    assert peer_hit["highlightedTitle"].startswith("&lt;script&gt;")
    assert "<mark>Pricing</mark>" in peer_hit["highlightedTitle"]


def test_an_unknown_source_is_a_clear_error(client: Client, river: None) -> None:
    _, body = gql(client, FEDERATED, {"input": {"query": "river", "sources": ["local", "nowhere"]}})
    assert "Unknown source 'nowhere'" in body["errors"][0]["message"]


def test_it_spends_one_search_unit_of_the_budget_shared_with_search(client: Client, river: None) -> None:
    for _ in range(30):
        assert gql(client, FEDERATED, {"input": {"query": "river"}})[0] == 200
    status, body = gql(client, FEDERATED, {"input": {"query": "river"}})
    assert status == 429 and body["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
