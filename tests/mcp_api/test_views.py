"""The /mcp guard: credentials (401, no silent fallback), Origin (403), body size (413), rate limits (429)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.test import Client
from django.utils import timezone

from accounts import limits
from accounts.api_keys import api_key_create, api_key_revoke
from tests.mcp_api.client import mcp_call, mcp_url

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def http_statuses(exc: BaseException) -> list[int]:
    """HTTP status codes of every ``httpx.HTTPStatusError`` inside a (nested) exception group."""
    if isinstance(exc, httpx.HTTPStatusError):
        return [exc.response.status_code]
    found: list[int] = []
    for inner in getattr(exc, "exceptions", ()):
        found += http_statuses(inner)
    if exc.__cause__ is not None:
        found += http_statuses(exc.__cause__)
    return found


def raw_post(base_url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(
        mcp_url(base_url), json=INITIALIZE, headers={**MCP_HEADERS, **(headers or {})}, timeout=10
    )


# --- over real HTTP, with the official client ---


@pytest.mark.django_db(transaction=True)
def test_revoked_key_gets_401_from_the_official_client(mcp_base_url: str) -> None:
    # given
    issued = api_key_create(name="revoked agent")
    api_key_revoke(api_key=issued.api_key)
    # when
    with pytest.raises(BaseException) as caught:
        mcp_call(mcp_base_url, "find", {"query": "pricing"}, api_key=issued.raw_key)
    # then
    assert 401 in http_statuses(caught.value)
    response = raw_post(mcp_base_url, {"Authorization": f"Bearer {issued.raw_key}"})
    assert response.status_code == 401
    assert "revoked" in response.json()["error"]["message"]
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.django_db(transaction=True)
def test_wrong_and_expired_keys_get_401_never_anonymous_results(mcp_base_url: str) -> None:
    # given
    expired = api_key_create(name="old", expires_at=timezone.now() - timedelta(days=1)).raw_key
    valid = api_key_create(name="ok").raw_key
    wrong = valid[:-4] + ("AAAA" if not valid.endswith("AAAA") else "BBBB")
    # when
    responses = {
        "wrong": raw_post(mcp_base_url, {"Authorization": f"Bearer {wrong}"}),
        "expired": raw_post(mcp_base_url, {"Authorization": f"Bearer {expired}"}),
        "malformed": raw_post(mcp_base_url, {"Authorization": "Bearer nonsense"}),
        "basic": raw_post(mcp_base_url, {"Authorization": "Basic dXNlcjpwYXNz"}),
        "valid": raw_post(mcp_base_url, {"Authorization": f"Bearer {valid}"}),
        "anonymous": raw_post(mcp_base_url),
    }
    # then
    assert {name: r.status_code for name, r in responses.items()} == {
        "wrong": 401,
        "expired": 401,
        "malformed": 401,
        "basic": 401,
        "valid": 200,
        "anonymous": 200,
    }
    assert "not recognised" in responses["wrong"].json()["error"]["message"]
    assert "expired" in responses["expired"].json()["error"]["message"]
    assert "Bearer" in responses["basic"].json()["error"]["message"]


@pytest.mark.django_db(transaction=True)
def test_foreign_origin_gets_403_and_localhost_is_allowed(mcp_base_url: str) -> None:
    # when
    with pytest.raises(BaseException) as caught:
        mcp_call(mcp_base_url, "find", {"query": "pricing"}, headers={"Origin": "https://evil.example"})
    allowed = mcp_call(
        mcp_base_url, "find", {"query": "pricing"}, headers={"Origin": "http://localhost:6274"}
    )
    # then
    assert 403 in http_statuses(caught.value)
    assert allowed.isError is False
    assert raw_post(mcp_base_url, {"Origin": "null"}).status_code == 403


# --- in process ---


def post(client: Client, body: Any = INITIALIZE, **headers: str) -> Any:
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(
        "/mcp",
        data=data,
        content_type="application/json",
        headers={"Accept": MCP_HEADERS["Accept"], **headers},
    )


@pytest.mark.django_db
def test_a_lone_surrogate_escape_gets_a_400_that_says_so_not_a_500() -> None:
    # given valid JSON whose id is no Unicode text (found by the fuzz suite: the server crashed replying)
    body = '{"jsonrpc": "2.0", "method": "tools/call", "id": "\\ud800"}'
    # when
    response = post(Client(), body)
    # then
    assert response.status_code == 400
    assert "lone surrogate" in response.json()["error"]["message"]


@pytest.mark.django_db
def test_oversized_body_gets_413(settings: Any) -> None:
    # given
    settings.MCP_MAX_BODY_BYTES = 2048
    client = Client()
    # when
    response = post(client, {**INITIALIZE, "padding": "x" * 4096})
    # then
    assert response.status_code == 413
    assert "2048 bytes" in response.json()["error"]["message"]
    assert post(client).status_code == 200


@pytest.mark.django_db
def test_rate_limit_answers_429_with_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    # given: a budget of two requests a minute
    monkeypatch.setitem(limits.RATES, "mcp", "2/m")
    client = Client()
    # when
    statuses = [post(client).status_code for _ in range(3)]
    limited = post(client)
    # then
    assert statuses == [200, 200, 429]
    assert int(limited["Retry-After"]) >= 1
    assert "Too many requests" in limited.json()["error"]["message"]


@pytest.mark.django_db
def test_each_key_has_its_own_budget_and_failed_keys_spend_the_ip_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given
    monkeypatch.setitem(limits.RATES, "mcp", "2/m")
    client = Client()
    key_a = api_key_create(name="a").raw_key
    key_b = api_key_create(name="b").raw_key
    # when
    a = [post(client, Authorization=f"Bearer {key_a}").status_code for _ in range(3)]
    b = post(client, Authorization=f"Bearer {key_b}").status_code
    guesses = [post(client, Authorization="Bearer kb_00000000_" + "x" * 43).status_code for _ in range(3)]
    # then
    assert a == [200, 200, 429]
    assert b == 200
    assert guesses == [401, 401, 429]


@pytest.mark.django_db
def test_only_post_is_served_by_the_stateless_server() -> None:
    client = Client()
    for response in (client.get("/mcp", headers={"Accept": "text/event-stream"}), client.delete("/mcp")):
        assert response.status_code == 405 and response["Allow"] == "POST"
