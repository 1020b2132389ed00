"""Federation over HTTP: the endpoint a peer's key calls, the commands that set it up, and a search across
knowledge bases against a real peer (this product, served by ``live_server``) and hostile ones (local servers
answering HTML, errors, garbage, too much, too slowly)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.test import Client, override_settings

from accounts.api_keys import api_key_create
from search.federation import peers
from search.models import FederationPeer
from tests.factories import build, make_item
from tests.support import fake_peer

pytestmark = pytest.mark.django_db


def fed_post(client: Client, body: Any, key: str | None) -> Any:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key else {}
    return client.post("/api/federation/search", json.dumps(body), content_type="application/json", **headers)


@pytest.fixture
def corpus() -> None:
    make_item(title="Pricing policy 2025", body="How we price bids: day rates and fixed fees.")
    make_item(title="Pricing for the board", body="Board pricing notes.", visibility="staff")
    make_item(title="Pricing draft", body="Draft pricing.", publish=False)
    build()


def test_the_endpoint_needs_a_key_and_answers_plain_text_with_offsets(client: Client, corpus: None) -> None:
    # given a key that reads public items only
    raw = api_key_create(name="peer emea", all_content=False).raw_key
    # when / then: no key, a bad key
    assert fed_post(client, {"query": "pricing"}, None).status_code == 401
    refused = fed_post(client, {"query": "pricing"}, "kb_00000000_" + "x" * 43)
    assert refused.status_code == 401 and refused["WWW-Authenticate"].startswith("Bearer")
    # when: the key asks
    response = fed_post(client, {"query": "pricing", "threshold": 0}, raw)
    # then: public published items only, absolute URLs, offsets inside the text, no HTML
    assert response.status_code == 200
    data = response.json()
    assert data["instance"] == "local" and data["protocol"] == 1 and data["version"]
    titles = [h["title"] for h in data["hits"]]
    assert "Pricing policy 2025" in titles
    assert "Pricing for the board" not in titles and "Pricing draft" not in titles
    first = data["hits"][0]
    assert first["url"].startswith("http://127.0.0.1:8000/items/")
    assert all(0 <= a < b <= len(first["title"]) for a, b in first["title_spans"])
    assert "<mark>" not in json.dumps(data) and len(first["content_hash"]) == 64
    # and how its engine fused its lanes, with each hit's raw lane scores among them (the asker's merge)
    fusion = data["fusion"]
    lanes = {lane["name"]: lane for lane in fusion["lanes"]}
    assert fusion["method"] in ("zscore", "rrf", "lexical", "vector") and fusion["candidates"] >= len(data["hits"])
    assert "lexical" in lanes and fusion["depth"] >= len(lanes["lexical"]["scores"])
    for hit in data["hits"]:
        assert hit["lane_scores"] and hit["rerank"] >= 1.0
        assert all(score in lanes[name]["scores"] for name, score in hit["lane_scores"].items())


def test_an_answer_whose_fusion_evidence_cannot_be_sent_is_sent_without_it(client: Client, corpus: None,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # given fusion evidence this instance cannot put into the protocol (here: an unknown method)
    from search.federation import answer
    from search.federation.protocol import PeerFusion

    monkeypatch.setattr(answer, "peer_fusion", lambda evidence: PeerFusion.model_validate({"method": "magic"}))
    raw = api_key_create(name="peer emea", all_content=False).raw_key
    # then the peer still gets its hits, to merge by confidence
    response = fed_post(client, {"query": "pricing", "threshold": 0}, raw)
    assert response.status_code == 200
    data = response.json()
    assert data["hits"] and data["fusion"] is None and all(h["lane_scores"] == {} for h in data["hits"])


def test_an_all_content_key_sees_staff_items_but_never_drafts(client: Client, corpus: None) -> None:
    raw = api_key_create(name="peer hq", all_content=True).raw_key
    titles = [h["title"] for h in fed_post(client, {"query": "pricing", "threshold": 0}, raw).json()["hits"]]
    assert "Pricing for the board" in titles and "Pricing draft" not in titles


def test_the_endpoint_never_federates_further_and_names_bad_fields(client: Client, corpus: None) -> None:
    raw = api_key_create(name="peer", all_content=False).raw_key
    looped = fed_post(client, {"query": "pricing", "sources": "all"}, raw)
    assert looped.status_code == 400 and looped.json()["error"]["field"] == "sources"
    assert fed_post(client, {"query": "pricing", "cursor": "abc"}, raw).json()["error"]["field"] == "cursor"
    assert fed_post(client, {"query": ""}, raw).json()["error"]["field"] == "query"
    assert fed_post(client, {"query": "x", "threshold": 2}, raw).json()["error"]["field"] == "threshold"


def test_info_says_who_answers(client: Client) -> None:
    raw = api_key_create(name="peer").raw_key
    assert client.get("/api/federation/info").status_code == 401
    info = client.get("/api/federation/info", HTTP_AUTHORIZATION=f"Bearer {raw}").json()
    assert info["instance"] == "local" and info["protocol"] == 1 and info["embedding_model"]


# --- setting it up from the command line ---------------------------------------------------------------


def test_api_key_create_prints_a_working_key_once_and_list_never_shows_it() -> None:
    Group.objects.create(name="bids")
    out, err = io.StringIO(), io.StringIO()
    call_command("api_key", "create", "emea federation", "--groups", "bids", stdout=out, stderr=err)
    raw = out.getvalue().strip()
    assert raw.startswith("kb_") and "shown once" in err.getvalue()
    listing = io.StringIO()
    call_command("api_key", "list", stdout=listing)
    assert raw[:11] in listing.getvalue() and raw not in listing.getvalue() and "bids" in listing.getvalue()
    with pytest.raises(CommandError, match="No group named nope"):
        call_command("api_key", "create", "x", "--groups", "nope", stdout=io.StringIO(), stderr=io.StringIO())


def test_federation_peer_add_list_remove_and_clear_errors(monkeypatch) -> None:
    raw = "kb_1a2b3c4d_" + "k" * 43
    out = io.StringIO()
    monkeypatch.setattr("sys.stdin", io.StringIO(raw + "\n"))
    call_command("federation_peer", "add", "emea", "https://kb.emea.example.org/", "--api-key", "-",
                 "--timeout-ms", "500", "--public", stdout=out)
    peer = FederationPeer.objects.get(name="emea")
    assert peer.base_url == "https://kb.emea.example.org" and peer.timeout_ms == 500 and peer.public
    assert raw not in peer.api_key_encrypted and peer.api_key_prefix == "kb_1a2b3c4d"
    listing = io.StringIO()
    call_command("federation_peer", "list", stdout=listing)
    assert "emea" in listing.getvalue() and raw not in listing.getvalue()
    for args, message in [
        (["add", "emea", "https://x.example", "--api-key", raw], "--replace"),
        (["add", "local", "https://x.example", "--api-key", raw], "reserved"),
        (["add", "Bad Name", "https://x.example", "--api-key", raw], "not valid"),
        (["add", "apac", "ftp://x.example", "--api-key", raw], "http"),
        (["add", "apac", "https://x.example", "--api-key", "secret"], "malformed"),
        (["add", "apac", "https://x.example", "--api-key", raw, "--timeout-ms", "0"], "timeout"),
        (["add", "apac", "https://x.example", "--api-key", raw, "--groups", "nope"], "No group"),
        (["remove", "nobody"], "No peer named"),
    ]:
        with pytest.raises(CommandError, match=message):
            call_command("federation_peer", *args, stdout=io.StringIO())
    assert list(FederationPeer.objects.values_list("name", flat=True)) == ["emea"]  # nothing half-written
    call_command("federation_peer", "remove", "emea", stdout=io.StringIO())
    assert not FederationPeer.objects.exists()


# --- a search across knowledge bases --------------------------------------------------------------------

@pytest.fixture
def hostile_server() -> Iterator[ThreadingHTTPServer]:
    with fake_peer.serving() as server:
        yield server


def test_bad_peers_are_reported_in_sources_and_never_break_the_search(client: Client, corpus: None,
                                                                       hostile_server: ThreadingHTTPServer) -> None:
    # given one well-behaved (but HTML-laden) peer and seven bad ones, all public, each with its own key
    base = f"http://127.0.0.1:{hostile_server.server_address[1]}"
    kinds = ["ok", "html", "fail", "refuse", "garbage", "big", "chunked", "spans", "badproto", "redirect", "slow"]
    for n, kind in enumerate(kinds):
        peers.peer_add(name=kind, base_url=f"{base}/{kind}", api_key=f"kb_000000{n:02d}_" + "k" * 43,
                       timeout_ms=1000, public=True)
    # when an anonymous visitor searches everything
    started = time.monotonic()
    response = client.post("/api/search", json.dumps({"query": "pricing", "sources": "all", "threshold": 0}),
                           content_type="application/json")
    elapsed = time.monotonic() - started
    # then the search answers, with every source's fate
    assert response.status_code == 200
    data = response.json()
    status = {s["name"]: s["status"] for s in data["sources"]}
    assert status == {"local": "ok", "ok": "ok", "html": "error", "fail": "error", "refuse": "refused",
                      "garbage": "error", "big": "error", "chunked": "error", "spans": "error",
                      "badproto": "error", "redirect": "error", "slow": "timeout"}
    assert elapsed < 2.5  # the slow peer costs its 1 s timeout, not its 3 s
    details = {s["name"]: s.get("detail", "") for s in data["sources"]}
    assert "not JSON" in details["html"] and "larger than" in details["big"] and "title" in details["spans"]
    assert details["garbage"] == "the answer is not valid JSON"
    assert "larger than" in details["chunked"] and "protocol 2" in details["badproto"]
    assert details["redirect"] == "HTTP 302"  # never followed: the key stays with the peer it was issued by
    assert set(hostile_server.seen_encodings) == {"identity"}  # type: ignore[attr-defined]
    # and the friendly peer's hit is merged by confidence, its text escaped, marked untrusted
    first = data["results"][0]
    assert first["source"] == "ok" and first["untrusted"] is True
    assert first["title_html"].startswith("&lt;script&gt;") and "<mark>Pricing</mark>" in first["title_html"]
    assert "&lt;b&gt;" in first["passage_html"]
    assert any(r["source"] == "local" and r["title"] == "Pricing policy 2025" for r in data["results"])
    # each peer got its own key, and only its own
    seen = hostile_server.seen_keys  # type: ignore[attr-defined]
    assert sorted(seen) == sorted(f"Bearer kb_000000{n:02d}_" + "k" * 43 for n in range(len(kinds)))


def test_the_default_stays_local_and_a_peer_a_visitor_may_not_see_is_unknown(
    client: Client, corpus: None, hostile_server: ThreadingHTTPServer
) -> None:
    Group.objects.create(name="bids")
    base = f"http://127.0.0.1:{hostile_server.server_address[1]}"
    peers.peer_add(name="ok", base_url=f"{base}/ok", api_key="kb_00000000_" + "k" * 43, groups=["bids"])
    local_only = client.post("/api/search", json.dumps({"query": "pricing"}), content_type="application/json")
    assert "sources" not in local_only.json() and hostile_server.seen_keys == []  # type: ignore[attr-defined]
    hidden = client.post("/api/search", json.dumps({"query": "pricing", "sources": ["local", "ok"]}),
                         content_type="application/json")
    assert hidden.status_code == 400 and "Unknown source 'ok'" in hidden.json()["error"]["message"]
    everything = client.post("/api/search", json.dumps({"query": "pricing", "sources": "all"}),
                             content_type="application/json").json()
    assert [s["name"] for s in everything["sources"]] == ["local"]  # anonymous: the group's peer is not asked


@pytest.mark.django_db(transaction=True)
def test_a_real_peer_merges_and_the_same_page_appears_once_with_both_sources(live_server: Any) -> None:
    # given this product served over HTTP as a peer (same database: the same pages under the same SITE_URL)
    make_item(title="Pricing policy 2025", body="How we price bids: day rates and fixed fees.")
    make_item(title="Pricing for the board", body="Board pricing notes.", visibility="staff")
    build()
    raw = api_key_create(name="from hq", all_content=False).raw_key
    peers.peer_add(name="emea", base_url=live_server.url, api_key=raw, timeout_ms=5000, public=True)
    client = Client()
    # when
    with override_settings(SITE_URL="https://kb.example.org"):
        data = client.post("/api/search", json.dumps({"query": "pricing", "sources": ["local", "emea"],
                                                      "threshold": 0}), content_type="application/json").json()
    # then both answered; the page both hold appears once, listing both sources; the staff item stays out
    assert {s["name"]: s["status"] for s in data["sources"]} == {"local": "ok", "emea": "ok"}
    policy = [r for r in data["results"] if r["title"] == "Pricing policy 2025"]
    assert len(policy) == 1 and policy[0]["sources"] == ["local", "emea"]
    assert all(r["title"] != "Pricing for the board" for r in data["results"])
    # and `check` says who answers
    out = io.StringIO()
    call_command("federation_peer", "check", "emea", stdout=out)
    assert "emea: ok" in out.getvalue() and "protocol 1" in out.getvalue()


def test_kb_search_sources_lists_every_source_and_the_merged_results(
    corpus: None, hostile_server: ThreadingHTTPServer
) -> None:
    base = f"http://127.0.0.1:{hostile_server.server_address[1]}"
    peers.peer_add(name="friendly", base_url=f"{base}/ok", api_key="kb_00000001_" + "k" * 43)
    peers.peer_add(name="down", base_url="http://127.0.0.1:9", api_key="kb_00000002_" + "k" * 43, timeout_ms=300)
    out = io.StringIO()
    call_command("kb_search", "pricing", "--sources", "all", "--threshold", "0", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert {s["name"]: s["status"] for s in data["sources"]} == {"local": "ok", "friendly": "ok", "down": "error"}
    assert data["results"][0]["source"] == "friendly"
    assert "Pricing for the board" in [r["title"] for r in data["results"]]  # the operator reads staff items here
    text = io.StringIO()
    call_command("kb_search", "pricing", "--sources", "local,friendly", stdout=text)
    assert "across local (ok" in text.getvalue() and "[friendly]" in text.getvalue()
    with pytest.raises(CommandError, match="Unknown source 'nowhere'"):
        call_command("kb_search", "pricing", "--sources", "nowhere", stdout=io.StringIO())


def test_a_peer_is_held_to_the_threshold_and_cannot_take_over_a_local_page(
    client: Client, corpus: None, hostile_server: ThreadingHTTPServer
) -> None:
    base = f"http://127.0.0.1:{hostile_server.server_address[1]}"
    peers.peer_add(name="ok", base_url=f"{base}/ok", api_key="kb_00000001_" + "k" * 43, public=True)
    # a floor above the peer's claimed 0.99: its hit is dropped, whatever it says it was asked
    strict = client.post("/api/search", json.dumps({"query": "pricing", "sources": "all", "threshold": 0.995}),
                         content_type="application/json").json()
    assert all(r["source"] == "local" for r in strict["results"])
    assert {s["name"]: s["status"] for s in strict["sources"]}["ok"] == "ok"


def test_endpoint_budget_is_per_key_and_filters_that_mean_nothing_to_a_key_are_refused(
    client: Client, corpus: None
) -> None:
    raw = api_key_create(name="peer").raw_key
    refused = fed_post(client, {"query": "pricing", "filters": {"unread_only": True}}, raw)
    assert refused.status_code == 400 and refused.json()["error"]["field"] == "filters.unread_only"
    since = fed_post(client, {"query": "pricing", "threshold": 0, "changed_since": "2999-01-01T00:00:00Z"}, raw)
    assert since.status_code == 200 and since.json()["hits"] == []
    bad_since = fed_post(client, {"query": "pricing", "changed_since": "yesterday"}, raw)
    assert bad_since.status_code == 400 and bad_since.json()["error"]["field"] == "changed_since"
    # 30 anonymous searches from this address do not eat the key's budget
    for _ in range(31):
        client.post("/api/search", json.dumps({"query": "pricing"}), content_type="application/json")
    assert fed_post(client, {"query": "pricing"}, raw).status_code == 200
    # the key's own budget is the operator's setting
    with override_settings(FEDERATION_RATE_PER_MINUTE=2):
        other = api_key_create(name="small peer").raw_key
        assert [fed_post(client, {"query": "pricing"}, other).status_code for _ in range(3)] == [200, 200, 429]


def test_admin_needs_the_key_on_create_keeps_it_on_edit_and_asks_again_when_the_host_changes(
    admin_client: Client,
) -> None:
    raw = "kb_1a2b3c4d_" + "k" * 43
    form = {"name": "emea", "base_url": "https://kb.emea.example.org", "timeout_ms": 800, "enabled": "on"}
    missing = admin_client.post("/admin/search/federationpeer/add/", form)
    assert missing.status_code == 200 and "needs the key" in missing.content.decode()
    created = admin_client.post("/admin/search/federationpeer/add/", {**form, "api_key": raw})
    assert created.status_code == 302
    peer = FederationPeer.objects.get(name="emea")
    stored = peer.api_key_encrypted
    assert raw not in stored and raw not in admin_client.get(f"/admin/search/federationpeer/{peer.pk}/change/"
                                                             ).content.decode()
    kept = admin_client.post(f"/admin/search/federationpeer/{peer.pk}/change/", {**form, "timeout_ms": 500})
    assert kept.status_code == 302
    peer.refresh_from_db()
    assert peer.api_key_encrypted == stored and peer.timeout_ms == 500
    moved = admin_client.post(f"/admin/search/federationpeer/{peer.pk}/change/",
                              {**form, "base_url": "https://elsewhere.example.net"})
    assert moved.status_code == 200 and "give its key again" in moved.content.decode()
    peer.refresh_from_db()
    assert peer.base_url == "https://kb.emea.example.org"


def test_plain_http_is_refused_except_on_this_machine() -> None:
    raw = "kb_1a2b3c4d_" + "k" * 43
    with pytest.raises(peers.PeerInvalid, match="plain http"):
        peers.peer_add(name="emea", base_url="http://kb.emea.example.org", api_key=raw)
    with pytest.raises(peers.PeerInvalid, match="invalid port"):
        peers.peer_add(name="emea", base_url="https://kb.emea.example.org:99999", api_key=raw)
    assert peers.peer_add(name="here", base_url="http://127.0.0.1:8001", api_key=raw).base_url == "http://127.0.0.1:8001"
    with override_settings(FEDERATION_ALLOW_HTTP=True):
        assert peers.peer_add(name="lan", base_url="http://kb.lan", api_key=raw).base_url == "http://kb.lan"
