"""``/metrics`` is exposed (Prometheus text) and protected; ``POST /api/analytics/click`` credits a search."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, override_settings
from django_ratelimit.core import get_usage

from analytics import metrics
from analytics.models import QueryLog
from analytics.views import CLICK_RATE

pytestmark = pytest.mark.django_db

OUTSIDER = "203.0.113.5"


def post_search(client: Client, query: str, threshold: float | None = None, **extra: Any) -> Any:
    body: dict[str, Any] = {"query": query} if threshold is None else {"query": query, "threshold": threshold}
    return client.post("/api/search", json.dumps(body), content_type="application/json", **extra)


def test_metrics_are_exposed_to_loopback_in_prometheus_format(client: Client, corpus: Any) -> None:
    # given a search was made
    post_search(client, "pricing")
    # when (the test client calls from 127.0.0.1)
    response = client.get("/metrics")
    # then
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    text = response.content.decode()
    assert "# TYPE kb_search_duration_seconds histogram" in text
    assert 'kb_searches_total{surface="browse",tool=""}' in text
    assert 'kb_search_lane_duration_seconds_bucket{lane="lexical",le="0.1",surface="browse"}' in text
    assert 'kb_http_request_duration_seconds_count{operation="api_search",surface="browse",tool=""}' in text
    assert "no-cache" in response.get("Cache-Control", "") or "max-age=0" in response.get("Cache-Control", "")


def test_metrics_are_refused_to_other_addresses(client: Client) -> None:
    response = client.get("/metrics", REMOTE_ADDR=OUTSIDER)
    assert response.status_code == 403
    assert "METRICS_ALLOWED_IPS" in response.content.decode()
    assert b"kb_searches" not in response.content


@override_settings(METRICS_TOKEN="s3cret-token")
def test_metrics_token_opens_them_from_anywhere_and_a_wrong_token_is_refused(client: Client) -> None:
    # when
    missing = client.get("/metrics", REMOTE_ADDR=OUTSIDER)
    good = client.get("/metrics", REMOTE_ADDR=OUTSIDER, HTTP_AUTHORIZATION="Bearer s3cret-token")
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer nope")  # even from loopback
    # then
    assert missing.status_code == 401 and missing["WWW-Authenticate"].startswith("Bearer")
    assert good.status_code == 200 and b"kb_http_requests_total" in good.content
    assert wrong.status_code == 401


@override_settings(METRICS_ALLOWED_IPS=["10.0.0.0/8", "2001:db8::/32"])
def test_allowed_networks_match_ipv4_ipv6_and_mapped_addresses(client: Client) -> None:
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::ffff:10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="2001:db8::7").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403


@override_settings(METRICS_ALLOWED_IPS=["none"], METRICS_TOKEN="t")
def test_token_only_mode(client: Client) -> None:
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").status_code == 200


def test_a_bad_allow_list_entry_says_how_to_fix_it() -> None:
    with (
        override_settings(METRICS_ALLOWED_IPS=["localhost"]),
        pytest.raises(ImproperlyConfigured, match="CIDR"),
    ):
        metrics.allowed_networks()


def test_zero_result_and_degraded_searches_are_counted(client: Client, corpus: Any, monkeypatch: Any) -> None:
    # given
    from search.embeddings import providers

    def sample(name: str, **labels: str) -> float:
        return metrics.REGISTRY.get_sample_value(name, labels) or 0.0

    zero_before = sample("kb_search_zero_results_total", surface="browse", tool="")
    degraded_before = sample("kb_search_degraded_total", surface="browse", reason="embedding_unavailable")

    def broken(texts: list[str]) -> list[list[float]]:
        raise ConnectionError("provider down")

    # when
    post_search(client, "xylophone quasar")
    monkeypatch.setattr(providers.get_provider(), "embed", broken)
    post_search(client, "pricing guide for tenders", threshold=0.0)  # degraded, not empty
    # then
    assert sample("kb_search_zero_results_total", surface="browse", tool="") == zero_before + 1
    assert (
        sample("kb_search_degraded_total", surface="browse", reason="embedding_unavailable")
        == degraded_before + 1
    )


def test_click_credits_the_visitors_search(client: Client, corpus: Any, logged: Any) -> None:
    # given
    with logged():
        results = post_search(client, "discount").json()["results"]
    item_id = results[0]["id"]
    # when
    response = client.post(
        "/api/analytics/click",
        json.dumps({"query": " discount ", "item_id": item_id}),
        content_type="application/json",
    )
    # then
    assert response.status_code == 200 and response.json() == {"recorded": True}
    assert QueryLog.objects.get().clicked_item_id == item_id


def test_click_validates_its_body(client: Client) -> None:
    bad = client.post("/api/analytics/click", json.dumps({"query": "x"}), content_type="application/json")
    form = client.post("/api/analytics/click", {"query": "x", "item_id": 1})
    unmatched = client.post(
        "/api/analytics/click", json.dumps({"query": "x", "item_id": 1}), content_type="application/json"
    )
    assert bad.status_code == 400 and "item_id" in bad.json()["error"]["message"]
    assert form.status_code == 415
    assert unmatched.status_code == 200 and unmatched.json() == {"recorded": False}


def test_the_hundred_and_twenty_first_click_in_a_minute_says_when_to_retry(client: Client) -> None:
    # given: this caller's 120 clicks of the minute spent
    for _ in range(120):
        get_usage(None, group="kb:click", key=lambda _g, _r: "ip:127.0.0.1", rate=CLICK_RATE, increment=True)
    # when
    response = client.post(
        "/api/analytics/click", json.dumps({"query": "x", "item_id": 1}), content_type="application/json"
    )
    # then
    assert response.status_code == 429 and response.json()["error"]["code"] == "rate_limited"
    assert int(response["Retry-After"]) >= 1 and response.json()["error"]["retry_after"] == int(response["Retry-After"])


def test_signed_in_clicks_need_the_csrf_header(user: Any, corpus: Any, logged: Any) -> None:
    # given a signed-in browser (CSRF checks on)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/browse")  # sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    with logged():
        client.get("/browse", {"q": "discount"})
    item_id = QueryLog.objects.get().result_item_ids[0]
    body = json.dumps({"query": "discount", "item_id": item_id})
    # when
    refused = client.post("/api/analytics/click", body, content_type="application/json")
    accepted = client.post(
        "/api/analytics/click", body, content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    # then
    assert refused.status_code == 403
    assert accepted.status_code == 200 and accepted.json() == {"recorded": True}


def test_click_refuses_deeply_nested_json(client: Client) -> None:
    body = "[" * 100_000 + "]" * 100_000
    response = client.post("/api/analytics/click", body, content_type="application/json")
    assert response.status_code == 400
