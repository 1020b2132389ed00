"""'Nothing here' is an answer on every surface: the page, GraphQL and kb_search (JSON and MCP have their own
tests in tests/browse/test_api_search.py and tests/mcp_api/test_server.py). The thresholds are confidences of
the toy calibration every test searches with (config/settings/test.py)."""

from __future__ import annotations

import json
import re
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from tests.factories import build, make_item
from tests.graphql_api.conftest import gql

pytestmark = pytest.mark.django_db

MADE_UP = "zanzibarquokka"


@pytest.fixture
def corpus() -> None:
    make_item(title="Pricing policy 2025", body="How we price bids and discounts.", primary_domain="pricing",
              content_type="policy")
    make_item(title="Pricing checklist", body="Check every price before the bid goes out.", primary_domain="pricing",
              content_type="guide")
    make_item(title="Bid kick-off guide", body="Running the kick-off meeting.", primary_domain="bid_writing",
              content_type="guide")
    make_item(title="Solar panel maintenance", body="Clean the panels twice a year.", primary_domain="operations",
              content_type="guide")
    build()


def test_the_page_says_no_close_match_names_the_nearest_and_links_to_them(client: Client, corpus: None) -> None:
    # when a visitor searches for a word no item holds
    html = client.get(f"/browse?q={MADE_UP}").content.decode()
    # then the page says so, with no result cards and no count of noise
    assert 'id="no-close-match"' in html
    assert f"No close match for “{MADE_UP}”" in html
    assert 'id="result-cards"' not in html
    assert "Nearest, but not matches" in html
    link = re.search(r'<a href="([^"]+)" id="show-nearest">', html)
    assert link is not None and "nearest=1" in link.group(1)
    # and following the link shows the candidates, each with how sure the engine is
    shown = client.get(link.group(1).replace("&amp;", "&")).content.decode()
    assert 'id="nearest-shown"' in shown and 'id="result-cards"' in shown
    assert "% match" in shown and "badge--unsure" in shown


def test_a_real_search_on_the_page_is_not_a_no_close_match(client: Client, corpus: None) -> None:
    html = client.get("/browse?q=pricing").content.decode()
    assert 'id="no-close-match"' not in html
    assert 'id="result-cards"' in html and "% match" in html


def test_graphql_returns_no_hits_total_zero_facets_empty_and_the_nearest(client: Client, corpus: None) -> None:
    # when
    status, body = gql(
        client,
        f"""{{ search(input: {{query: "{MADE_UP}"}}) {{ totalCount partialMatch nextCursor suggestion
        facets {{ name values {{ value count }} }} hits {{ itemId confidence }}
        nearest {{ itemId title url confidence }} }} }}""",
    )
    # then
    assert status == 200, body
    result = body["data"]["search"]
    assert result["hits"] == [] and result["totalCount"] == 0 and result["nextCursor"] is None
    assert result["partialMatch"] is False
    assert all(not facet["values"] for facet in result["facets"])
    assert 1 <= len(result["nearest"]) <= 3
    assert all(n["confidence"] < 0.35 and n["url"].startswith("/items/") for n in result["nearest"])


def test_graphql_threshold_decides_what_is_kept_and_counted(client: Client, corpus: None) -> None:
    # given the full ranking and the default floor
    query = """query($t: Float) { search(input: {query: "pricing", threshold: $t}) { totalCount
        facets { name values { value count } } hits { itemId confidence } nearest { itemId } } }"""
    _, everything = gql(client, query, {"t": 0.0})
    _, kept = gql(client, query, {"t": None})
    every, floor = everything["data"]["search"], kept["data"]["search"]
    # then the kept hits are those at or above 0.35, in the same order, and totalCount and facets count them
    above = [h["itemId"] for h in every["hits"] if h["confidence"] >= 0.35]
    assert [h["itemId"] for h in floor["hits"]] == above and floor["totalCount"] == len(above) >= 1
    assert every["totalCount"] == len(every["hits"]) > floor["totalCount"]
    domains = {f["name"]: f["values"] for f in floor["facets"]}["domain"]
    assert sum(v["count"] for v in domains) == floor["totalCount"]
    assert floor["nearest"] == [] and every["nearest"] == []


def test_graphql_refuses_a_threshold_outside_0_to_1(client: Client, corpus: None) -> None:
    _, body = gql(client, '{ search(input: {query: "pricing", threshold: 2}) { totalCount } }')
    assert body["errors"] and "threshold" in body["errors"][0]["message"]


def _cli(*args: str) -> str:
    out = StringIO()
    call_command("kb_search", *args, stdout=out)
    return out.getvalue()


def test_kb_search_says_nothing_matches_and_lists_the_nearest_as_not_matches(corpus: None) -> None:
    # when
    table = _cli(MADE_UP)
    data: dict[str, Any] = json.loads(_cli(MADE_UP, "--json"))
    # then
    assert f"No item in the knowledge base matches '{MADE_UP}' (confidence floor 0.25)" in table
    assert "nearest, not a match:" in table
    assert data["count"] == 0 and data["results"] == []
    assert 1 <= len(data["nearest"]) <= 3 and all(n["confidence"] < 0.25 for n in data["nearest"])


def test_kb_search_threshold_zero_lists_every_candidate_with_its_confidence(corpus: None) -> None:
    data = json.loads(_cli(MADE_UP, "--json", "--threshold", "0"))
    assert data["count"] >= 1 and data["nearest"] == []
    assert all(0.0 <= r["confidence"] < 0.25 for r in data["results"])
    kept = json.loads(_cli("pricing", "--json"))
    assert kept["results"] and all(r["confidence"] >= 0.25 for r in kept["results"])


def test_kb_search_refuses_a_threshold_outside_0_to_1(corpus: None) -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--threshold must be between 0 and 1"):
        _cli("pricing", "--threshold", "1.5")
