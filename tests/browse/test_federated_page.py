"""The browse page across knowledge bases: the "All knowledge bases" toggle, a source badge on each card, every
source's status above them, a peer's text escaped, and the page local-only unless the visitor asks."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from search.federation import peers
from tests.factories import build, make_item
from tests.support import fake_peer

pytestmark = pytest.mark.django_db


@pytest.fixture
def peer_server() -> Iterator[ThreadingHTTPServer]:
    with fake_peer.serving() as server:
        yield server


@pytest.fixture
def corpus() -> None:
    make_item(title="Pricing policy 2025", body="How we price bids: day rates and fixed fees.")
    build()


def _base(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_without_a_visible_peer_there_is_no_toggle_and_sources_all_searches_here_only(
    client: Client, corpus: None, peer_server: ThreadingHTTPServer
) -> None:
    Group.objects.create(name="bids")
    peers.peer_add(name="emea", base_url=f"{_base(peer_server)}/ok", api_key="kb_00000000_" + "k" * 43,
                   groups=["bids"])
    page = client.get("/browse", {"q": "pricing"}).content.decode()
    assert 'id="kb-all-kbs"' not in page
    # asking anyway (an old link) is this knowledge base's search, and no peer is called
    anyway = client.get("/browse", {"q": "pricing", "sources": "all"}).content.decode()
    assert "policy 2025" in anyway and 'id="sources"' not in anyway
    assert peer_server.seen_keys == []  # type: ignore[attr-defined]


def test_the_toggle_searches_every_peer_and_badges_each_card(
    client: Client, corpus: None, peer_server: ThreadingHTTPServer
) -> None:
    base = _base(peer_server)
    peers.peer_add(name="emea", base_url=f"{base}/ok", api_key="kb_00000001_" + "k" * 43, public=True)
    peers.peer_add(name="apac", base_url=f"{base}/slow", api_key="kb_00000002_" + "k" * 43, public=True,
                   timeout_ms=300)
    # the default stays local: the toggle is offered, off, and no peer is asked
    local = client.get("/browse", {"q": "pricing"}).content.decode()
    assert 'id="kb-all-kbs"' in local and 'id="kb-all-kbs" checked' not in local
    assert 'id="sources"' not in local and peer_server.seen_keys == []  # type: ignore[attr-defined]
    # when the visitor turns it on
    response = client.get("/browse", {"q": "pricing", "sources": "all"})
    page = response.content.decode()
    assert response.status_code == 200
    assert 'id="kb-all-kbs" checked' in page and "in all knowledge bases" in page
    # then every source says how it went, the slow one named as not answering
    assert 'data-source="local" data-status="ok"' in page and 'data-source="emea" data-status="ok"' in page
    assert 'data-source="apac" data-status="timeout"' in page
    assert "“apac” did not answer" in page
    # and each card carries its source: ours to our item, the peer's escaped, no item id, leaving for its URL
    assert 'data-sources="local"' in page and 'data-sources="emea"' in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page
    assert 'href="https://evil.example/p" rel="noopener noreferrer nofollow"' in page
    assert "policy 2025" in page
    # a results-region reload keeps the choice in its links (the clear-filters link keeps it too)
    partial = client.get("/browse", {"q": "pricing", "sources": "all", "domain": "x"},
                         HTTP_X_KB_PARTIAL="results").content.decode()
    assert "sources=all" in partial


def test_a_search_across_knowledge_bases_is_not_offered_for_following(
    user_client: Client, corpus: None, peer_server: ThreadingHTTPServer
) -> None:
    peers.peer_add(name="emea", base_url=f"{_base(peer_server)}/ok", api_key="kb_00000001_" + "k" * 43)
    here = user_client.get("/browse", {"q": "pricing"}).content.decode()
    everywhere = user_client.get("/browse", {"q": "pricing", "sources": "all"}).content.decode()
    assert 'id="follow-search"' in here and 'id="follow-search"' not in everywhere


def test_nothing_anywhere_says_so_and_the_no_javascript_page_has_the_toggle(
    client: Client, corpus: None, peer_server: ThreadingHTTPServer
) -> None:
    peers.peer_add(name="down", base_url="http://127.0.0.1:9", api_key="kb_00000001_" + "k" * 43, public=True,
                   timeout_ms=300)
    page = client.get("/browse", {"q": "zanzibarquokka", "sources": "all"}).content.decode()
    assert 'id="no-close-match"' in page and "the knowledge bases searched" in page
    assert 'data-source="down" data-status="error"' in page
    search_page: Any = client.get("/search", {"q": "pricing", "sources": "all"}).content.decode()
    assert 'name="sources" value="all" checked' in search_page and 'data-sources="local"' in search_page
