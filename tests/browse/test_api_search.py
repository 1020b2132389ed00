"""POST /api/search: validation (400 naming the field), response shape, filters, paging, CSRF, rate limit."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from accounts.limits import rate_limit_hit
from search.types import MAX_QUERY_CHARS
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db


def post(client: Client, body: Any, **extra: Any) -> Any:
    return client.post("/api/search", json.dumps(body), content_type="application/json", **extra)


@pytest.fixture
def corpus() -> None:
    make_item(title="Pricing policy 2025", body="How we price bids: day rates and fixed fees.",
              primary_domain="pricing", content_type="policy")
    make_item(title="Discount approval", body="Discounts on the price need approval.", primary_domain="pricing")
    make_item(title="Social value guide", body="Social value commitments.", primary_domain="social_value")
    build()


def test_a_search_answers_results_count_facets_and_paging(client: Client, corpus: None) -> None:
    # when
    response = post(client, {"query": "  pricing  "})
    # then
    assert response.status_code == 200
    data = response.json()
    assert set(data) == {"results", "count", "facets", "partial_match", "degraded", "next_cursor", "suggestion",
                         "threshold", "nearest"}
    assert data["threshold"] == 0.35 and data["nearest"] == []
    assert all(0.35 <= r["confidence"] <= 1.0 for r in data["results"])
    assert data["count"] >= 1
    first = data["results"][0]
    assert first["title"] == "Pricing policy 2025"
    assert first["title_html"] == "<mark>Pricing</mark> policy 2025"
    assert "<mark>" in first["passage_html"]
    assert first["lanes"] and first["url"] == f"/items/{first['slug']}"
    assert data["facets"]["domain"]["pricing"] >= 1


def test_cursor_paging_walks_the_results(client: Client, corpus: None) -> None:
    # given
    first = post(client, {"query": "price", "limit": 1, "threshold": 0}).json()
    assert first["next_cursor"]
    # when
    second = post(client, {"query": "price", "limit": 1, "threshold": 0, "cursor": first["next_cursor"]}).json()
    # then
    assert second["results"][0]["id"] != first["results"][0]["id"]
    assert second["count"] == first["count"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "query"),
        ({"query": ""}, "query"),
        ({"query": "   \u200b "}, "query"),
        ({"query": "x" * (MAX_QUERY_CHARS + 1)}, "query"),
        ({"query": 42}, "query"),
        ({"query": "a", "threshold": 1.5}, "threshold"),
        ({"query": "a", "threshold": -0.1}, "threshold"),
        ({"query": "a", "limit": "many"}, "limit"),
        ({"query": "pricing", "cursor": "not-a-cursor"}, "cursor"),
        ({"query": "a", "sort": "title"}, "sort"),
        ({"query": "a", "filters": {"domian": "x"}}, "filters.domian"),
        ({"query": "a", "filters": {"date_from": "yesterday"}}, "filters.date_from"),
        ({"query": "a", "filters": "pricing"}, "filters"),
    ],
)
def test_a_bad_field_answers_400_naming_it(client: Client, corpus: None, body: dict[str, Any], field: str) -> None:
    # when
    response = post(client, body)
    # then
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["field"] == field
    assert error["message"]


def test_the_longest_query_is_accepted(client: Client, corpus: None) -> None:
    assert post(client, {"query": "pricing " + "x" * (MAX_QUERY_CHARS - 8)}).status_code == 200


def test_limit_is_clamped_not_refused(client: Client, corpus: None) -> None:
    assert post(client, {"query": "price", "limit": 500}).status_code == 200
    data = post(client, {"query": "price", "limit": 0, "threshold": 0}).json()
    assert len(data["results"]) == 1


def test_the_body_must_be_a_json_object(client: Client) -> None:
    assert client.post("/api/search", "{nope", content_type="application/json").status_code == 400
    assert post(client, ["pricing"]).status_code == 400
    assert client.post("/api/search", {"query": "x"}).status_code == 415
    assert client.get("/api/search").status_code == 405


def test_filters_apply_inside_the_search_not_after_a_cap(client: Client) -> None:
    # given: 30 strong matches, and two weak ones in the domain we filter on
    for i in range(30):
        make_item(title=f"Tender tender guide {i}", body="tender tender tender", primary_domain="bid_writing")
    make_item(title="Legal note A", body="One tender mention.", primary_domain="legal")
    make_item(title="Legal note B", body="Another tender mention.", primary_domain="legal")
    build()
    # when
    data = post(client, {"query": "tender", "limit": 20, "threshold": 0, "filters": {"domain": ["legal"]}}).json()
    # then
    assert sorted(r["title"] for r in data["results"]) == ["Legal note A", "Legal note B"]
    assert data["count"] == 2


def test_anonymous_callers_read_public_items_and_users_read_more(client: Client, user_client: Client) -> None:
    # given
    make_item(title="Rate card public", body="Rates.")
    make_item(title="Rate card members", body="Rates.", visibility="signed_in")
    build()
    # when
    anonymous = [r["title"] for r in post(client, {"query": "rate card"}).json()["results"]]
    member = [r["title"] for r in post(user_client, {"query": "rate card"}).json()["results"]]
    # then
    assert anonymous == ["Rate card public"]
    assert sorted(member) == ["Rate card members", "Rate card public"]


def test_anonymous_api_clients_need_no_csrf_token(corpus: None) -> None:
    client = Client(enforce_csrf_checks=True)
    assert post(client, {"query": "pricing"}).status_code == 200


def test_signed_in_callers_must_send_the_csrf_header(user: Any, corpus: None) -> None:
    # given: a session, as the site's own page has
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/browse")
    token = client.cookies["csrftoken"].value
    # when
    refused = post(client, {"query": "pricing"})
    accepted = post(client, {"query": "pricing"}, HTTP_X_CSRFTOKEN=token)
    # then
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf_failed"
    assert accepted.status_code == 200


def test_the_thirty_first_search_in_a_minute_is_refused(client: Client, corpus: None) -> None:
    # given
    rate_limit_hit(group="search", key="ip:127.0.0.1", cost=30)
    # when
    response = post(client, {"query": "pricing"})
    # then
    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1


def test_validation_errors_do_not_spend_the_budget(client: Client, corpus: None) -> None:
    # given
    rate_limit_hit(group="search", key="ip:127.0.0.1", cost=29)
    for _ in range(3):
        assert post(client, {"query": ""}).status_code == 400
    # then: the 30th real search still runs
    assert post(client, {"query": "pricing"}).status_code == 200


def test_search_query_count_is_bounded(client: Client, corpus: None, django_assert_max_num_queries: Any) -> None:
    # The engine's own queries (~14 today) plus one for the principal; the adapter adds no per-hit queries.
    with django_assert_max_num_queries(20):
        assert post(client, {"query": "pricing"}).status_code == 200


def test_a_made_up_word_gets_an_empty_answer_with_count_and_facets_zero_and_the_nearest_items(
    client: Client, corpus: None
) -> None:
    # when
    data = post(client, {"query": "zanzibarquokka"}).json()
    # then nothing is an answer: no results, no count, no facet counts over noise, no partial match
    assert data["results"] == [] and data["count"] == 0 and data["next_cursor"] is None
    assert all(not counts for counts in data["facets"].values())
    assert data["partial_match"] is False
    assert 1 <= len(data["nearest"]) <= 3
    assert all(set(n) == {"id", "title", "url", "confidence"} and n["confidence"] < 0.35 for n in data["nearest"])


def test_threshold_zero_gives_every_candidate_and_counts_and_facets_follow_the_threshold(
    client: Client, corpus: None
) -> None:
    # given the full ranking, and the same search at the default threshold
    everything = post(client, {"query": "pricing", "threshold": 0}).json()
    kept = post(client, {"query": "pricing"}).json()
    # then the kept hits are exactly those at or above 0.35, in the same order, and the counts say so
    above = [r["id"] for r in everything["results"] if r["confidence"] >= 0.35]
    assert [r["id"] for r in kept["results"]] == above
    assert kept["count"] == len(above) < everything["count"]
    assert sum(kept["facets"]["domain"].values()) == kept["count"]
    assert sum(everything["facets"]["domain"].values()) == everything["count"]


def test_a_word_the_knowledge_base_nearly_knows_gets_no_close_match_and_the_suggestion(
    client: Client, corpus: None
) -> None:
    data = post(client, {"query": "discuont"}).json()
    assert data["suggestion"] == "discount"
    if not data["results"]:
        assert data["count"] == 0 and data["nearest"]
