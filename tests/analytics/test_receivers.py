"""The query log records each surface and tool separately, through the real adapters."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from analytics.models import QueryLog
from mcp_api.schemas import FindArgs, ReadArgs
from mcp_api.tools import find_tool, read_tool
from search.engine import retrieve
from search.principal import ANONYMOUS, Principal
from search.types import RetrievalQuery
from tests.graphql_api.conftest import gql

pytestmark = pytest.mark.django_db

SEARCH_QUERY = "query($q: String!) { search(input: {query: $q}) { totalCount hits { itemId } } }"


def only_row() -> QueryLog:
    rows = list(QueryLog.objects.all())
    assert len(rows) == 1, [str(r) for r in rows]
    return rows[0]


def test_post_api_search_is_logged_as_browse(client: Client, corpus: dict[str, Any], logged: Any) -> None:
    # when
    with logged():
        response = client.post(
            "/api/search", json.dumps({"query": "pricing"}), content_type="application/json"
        )
    # then
    assert response.status_code == 200
    row = only_row()
    assert (row.surface, row.tool, row.principal_kind) == ("browse", "", "anonymous")
    assert row.result_count == response.json()["count"] >= 1
    assert corpus["pricing"].pk in row.result_item_ids
    assert row.total_ms > 0 and row.lexical_ms is not None and row.vector_ms is not None
    assert set(row.timings_ms) >= {"total_ms", "lexical_ms", "vector_ms"}


def test_browse_page_search_is_logged_as_browse(
    user_client: Client, corpus: dict[str, Any], logged: Any
) -> None:
    # when
    with logged():
        response = user_client.get("/browse", {"q": "discount", "domain": "pricing"})
    # then
    assert response.status_code == 200
    row = only_row()
    assert (row.surface, row.principal_kind, row.query_text) == ("browse", "user", "discount")
    assert row.filters == {"domain": ["pricing"]}


def test_graphql_search_is_logged_as_graphql(client: Client, corpus: dict[str, Any], logged: Any) -> None:
    # when
    with logged():
        status, body = gql(client, SEARCH_QUERY, {"q": "social value"})
    # then
    assert status == 200, body
    row = only_row()
    assert (row.surface, row.tool) == ("graphql", "")
    assert row.result_count == body["data"]["search"]["totalCount"]


def test_cli_search_is_logged_as_cli_with_its_text(corpus: dict[str, Any], logged: Any) -> None:
    # when
    with logged():
        call_command("kb_search", "tender pricing", "--json", stdout=StringIO())
    # then
    row = only_row()
    assert (row.surface, row.tool, row.principal_kind) == ("cli", "", "staff")
    assert row.query_text == "tender pricing"
    assert row.corpus == "latest"


def test_mcp_find_is_logged_with_its_tool_and_a_read_marks_the_follow_up(
    corpus: dict[str, Any], logged: Any
) -> None:
    # given an agent with an API key (its key, not an address, identifies it)
    agent = Principal(kind="api_key", api_key_id=7, all_content=True)
    with logged():
        found = find_tool(FindArgs(query="discount approval"), agent)
    row = only_row()
    assert (row.surface, row.tool, row.principal_kind) == ("mcp", "find", "api_key")
    assert row.query_text == "discount approval" and row.clicked_item_id is None
    # when the agent reads a returned item
    item_id = found.structured.results[0].item_id  # type: ignore[attr-defined]
    read_tool(ReadArgs(item_id=item_id), agent)
    # then the search is credited with the follow-up read
    row.refresh_from_db()
    assert row.clicked_item_id == item_id and row.clicked_at is not None


def test_each_surface_gets_its_own_rows(client: Client, corpus: dict[str, Any], logged: Any) -> None:
    # when the same query arrives through four surfaces
    with logged():
        client.post("/api/search", json.dumps({"query": "price"}), content_type="application/json")
        gql(client, SEARCH_QUERY, {"q": "price"})
        call_command("kb_search", "price", "--json", stdout=StringIO())
        find_tool(FindArgs(query="price"), ANONYMOUS)
    # then
    counted = sorted(QueryLog.objects.values_list("surface", "tool"))
    assert counted == [("browse", ""), ("cli", ""), ("graphql", ""), ("mcp", "find")]
    assert QueryLog.objects.values("query_hash").distinct().count() == 1


def test_internal_searches_outside_a_request_are_not_logged(corpus: dict[str, Any], logged: Any) -> None:
    # when (evaluation runs and other internal callers leave surface at its default)
    with logged():
        retrieve(query=RetrievalQuery(text="pricing"))
    # then
    assert not QueryLog.objects.exists()


def test_a_failing_log_never_breaks_the_search(
    client: Client, corpus: dict[str, Any], logged: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given the log cannot build its row
    def broken(**_: Any) -> None:
        raise RuntimeError("log is down")

    monkeypatch.setattr("analytics.receivers.querylog_entry", broken)
    # when
    with logged():
        response = client.post(
            "/api/search", json.dumps({"query": "pricing"}), content_type="application/json"
        )
    # then
    assert response.status_code == 200 and response.json()["count"] >= 1
    assert not QueryLog.objects.exists()
