"""Requests are timed per surface; MCP handshakes, tool listings and tool calls (per tool) apart."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from prometheus_client import REGISTRY

from analytics.middleware import classify
from analytics.models import QueryLog

pytestmark = pytest.mark.django_db

MCP_HEADERS = {"HTTP_ACCEPT": "application/json, text/event-stream"}


def rpc(method: str, params: dict[str, Any] | None = None, id: int | None = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id is not None:
        body["id"] = id
    if params is not None:
        body["params"] = params
    return body


INITIALIZE = rpc(
    "initialize",
    {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
)


def post_mcp(client: Client, body: Any) -> Any:
    return client.post("/mcp", json.dumps(body), content_type="application/json", **MCP_HEADERS)


def count(surface: str, operation: str, tool: str = "") -> float:
    value = REGISTRY.get_sample_value(
        "kb_http_request_duration_seconds_count", {"surface": surface, "operation": operation, "tool": tool}
    )
    return value or 0.0


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/api/search", ("browse", "api_search")),
        ("/api/search/preview", ("browse", "api_preview")),
        ("/graphql", ("graphql", "graphql")),
        ("/mcp", ("mcp", "")),
        ("/browse", ("browse", "browse")),
        ("/search", ("browse", "search_page")),
        ("/items/some-slug", ("browse", "item")),
        ("/", ("browse", "home")),
        ("/admin/analytics/", ("admin", "admin")),
        ("/searchy", ("other", "other")),
        ("/static/browse/browse.js", None),
        ("/metrics", None),
    ],
)
def test_paths_are_labelled_by_surface(path: str, expected: tuple[str, str] | None) -> None:
    assert classify(path) == expected


def test_mcp_handshake_listing_and_each_tool_are_timed_apart(
    client: Client, corpus: Any, logged: Any
) -> None:
    # given
    before = {
        "initialize": count("mcp", "initialize"),
        "initialized": count("mcp", "notifications/initialized"),
        "list": count("mcp", "tools/list"),
        "find": count("mcp", "tools/call", "find"),
        "read": count("mcp", "tools/call", "read"),
        "unknown": count("mcp", "tools/call", "other"),
        "garbage": count("mcp", "invalid"),
    }
    # when an agent shakes hands, lists the tools, searches and reads
    assert post_mcp(client, INITIALIZE).status_code == 200
    post_mcp(client, rpc("notifications/initialized", id=None))
    listed = post_mcp(client, rpc("tools/list", {}, id=2))
    with logged():
        found = post_mcp(
            client, rpc("tools/call", {"name": "find", "arguments": {"query": "discount"}}, id=3)
        )
    post_mcp(client, rpc("tools/call", {"name": "no_such_tool_" + "x" * 40, "arguments": {}}, id=4))
    client.post("/mcp", b"{not json", content_type="application/json", **MCP_HEADERS)
    # then every kind of request has its own series
    assert listed.status_code == 200 and b"find" in listed.content
    assert found.status_code == 200 and b"Discount approval" in found.content
    assert count("mcp", "initialize") == before["initialize"] + 1
    assert count("mcp", "notifications/initialized") == before["initialized"] + 1
    assert count("mcp", "tools/list") == before["list"] + 1
    assert count("mcp", "tools/call", "find") == before["find"] + 1
    assert count("mcp", "tools/call", "read") == before["read"]
    assert count("mcp", "tools/call", "other") == before["unknown"] + 1  # label values stay bounded
    assert count("mcp", "invalid") == before["garbage"] + 1
    # and the search itself was logged as MCP find, with a key for the signed-out agent (from its address)
    row = QueryLog.objects.get()
    assert (row.surface, row.tool, row.principal_kind) == ("mcp", "find", "anonymous")
    assert row.principal_key and row.query_text == ""


def test_engine_time_per_mcp_tool_is_measured(client: Client, corpus: Any) -> None:
    # given
    def searches() -> float:
        return (
            REGISTRY.get_sample_value("kb_search_duration_seconds_count", {"surface": "mcp", "tool": "find"})
            or 0
        )

    before = searches()
    # when
    post_mcp(client, rpc("tools/call", {"name": "find", "arguments": {"query": "pricing"}}, id=1))
    # then
    assert searches() == before + 1


def test_status_classes_are_counted(client: Client) -> None:
    def refused() -> float:
        labels = {"surface": "browse", "operation": "api_search", "tool": "", "status": "4xx"}
        return REGISTRY.get_sample_value("kb_http_requests_total", labels) or 0

    before = refused()
    client.post("/api/search", "[]", content_type="application/json")
    assert refused() == before + 1
