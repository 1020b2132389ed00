"""Asking a peer: its connections are kept between searches, and nothing it sets is sent back."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

from search.federation import client
from tests.support.fake_peer import serving

KEY = "kb_1a2b3c4d_" + "k" * 43


@pytest.fixture
def keep_alive_peer() -> Iterator[ThreadingHTTPServer]:
    client.clients_close()
    with serving(keep_alive=True) as server:
        yield server
    client.clients_close()


def _call(server: ThreadingHTTPServer, path: str = "/ok") -> client.PeerCall:
    host, port = server.server_address[:2]
    return client.PeerCall(name="friendly", base_url=f"http://{host}:{port}{path}", api_key=KEY)


def test_searches_reuse_the_connection_to_a_peer(keep_alive_peer: ThreadingHTTPServer) -> None:
    for _ in range(3):
        outcome = client.peer_search(_call(keep_alive_peer), {"query": "pricing"})
        assert outcome.status == "ok", outcome.detail
    assert len(keep_alive_peer.seen_ports) == 3
    assert len(set(keep_alive_peer.seen_ports)) == 1  # one TCP connection for all three


def test_a_cookie_the_peer_sets_is_never_sent_back(keep_alive_peer: ThreadingHTTPServer) -> None:
    for _ in range(2):
        assert client.peer_search(_call(keep_alive_peer), {"query": "pricing"}).status == "ok"
    assert keep_alive_peer.seen_cookies == [None, None]


def test_a_refused_or_oversized_answer_does_not_spoil_the_next_search(keep_alive_peer: ThreadingHTTPServer) -> None:
    assert client.peer_search(_call(keep_alive_peer, "/big"), {"query": "x"}).status == "error"
    assert client.peer_search(_call(keep_alive_peer, "/refuse"), {"query": "x"}).status == "refused"
    # the same address's client asks again on a clean connection
    outcome = client.peer_search(_call(keep_alive_peer, "/ok"), {"query": "pricing"})
    assert outcome.status == "ok", outcome.detail
    assert outcome.answer is not None and outcome.answer.hits[0].title.endswith("Pricing elsewhere")


def test_the_clients_kept_are_bounded_the_least_recently_used_going(keep_alive_peer: ThreadingHTTPServer,
                                                                     monkeypatch) -> None:
    monkeypatch.setattr(client, "MAX_CLIENTS", 2)
    for path in ("/ok", "/ok/a", "/ok", "/ok/b"):
        assert client.peer_search(_call(keep_alive_peer, path), {"query": "pricing"}).status == "ok"
    host, port = keep_alive_peer.server_address[:2]
    assert sorted(client._clients) == [f"http://{host}:{port}/ok", f"http://{host}:{port}/ok/b"]


def test_a_kept_connection_the_peer_closed_is_asked_again_once(keep_alive_peer: ThreadingHTTPServer) -> None:
    outcome = client.peer_search(_call(keep_alive_peer, "/dropfirst"), {"query": "pricing"})
    assert outcome.status == "ok", outcome.detail
    assert len(keep_alive_peer.seen_ports) == 2  # the dropped request and the one asked again
