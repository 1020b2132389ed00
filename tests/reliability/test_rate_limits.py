"""Rate limits on every surface: 429 with Retry-After; a rotating X-Forwarded-For does not reset a budget;
GraphQL aliases each spend a unit and batches are refused outright (so neither multiplies the budget)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from django.test import Client

from accounts.limits import RATES
from tests.mcp_api.client import asgi_server
from tests.reliability.checks import fuzz_corpus
from tests.reliability.figures import record

MCP_FIND = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "find", "arguments": {"query": "tender pricing"}},
}
_addresses = (f"198.51.100.{i % 250 + 1}" for i in itertools.count())


def budget(group: str) -> int:
    return int(RATES[group].split("/")[0])


def spoofed() -> dict[str, str]:
    """A new client address in every header a proxy might set (none of them is trusted)."""
    address = next(_addresses)
    return {"HTTP_X_FORWARDED_FOR": address, "HTTP_X_REAL_IP": address, "HTTP_FORWARDED": f"for={address}"}


def until_limited(call: Callable[[], Any], limit: int) -> tuple[int, Any]:
    """Call until a 429 (at most ``limit`` + 5 times); returns (requests answered before it, the 429)."""
    for n in range(limit + 5):
        response = call()
        if response.status_code == 429:
            return n, response
        assert response.status_code == 200, (response.status_code, response.content[:300])
    raise AssertionError(f"no 429 after {limit + 5} requests")


def assert_retry_after(response: Any) -> int:
    value = int(response["Retry-After"])
    assert 1 <= value <= 60
    return value


@pytest.mark.django_db
def test_every_surface_answers_429_with_retry_after_whatever_x_forwarded_for_says() -> None:
    # given
    fuzz_corpus()
    figures: dict[str, Any] = {}
    surfaces: dict[str, tuple[str, Callable[[Client], Any]]] = {
        "GET /api/search/preview": (
            "preview",
            lambda c: c.get("/api/search/preview", {"q": "pric"}, **spoofed()),
        ),
        "POST /api/search": (
            "search",
            lambda c: c.post(
                "/api/search",
                data=json.dumps({"query": "pricing"}),
                content_type="application/json",
                **spoofed(),
            ),
        ),
        "GET /search?q=": ("search", lambda c: c.get("/search", {"q": "pricing"}, **spoofed())),
        "GET /browse?q=": ("search", lambda c: c.get("/browse", {"q": "pricing"}, **spoofed())),
        "POST /graphql search": (
            "search",
            lambda c: c.post(
                "/graphql",
                data=json.dumps({"query": '{ search(input: {query: "pricing"}) { totalCount } }'}),
                content_type="application/json",
                **spoofed(),
            ),
        ),
        "POST /mcp": (
            "mcp",
            lambda c: c.post(
                "/mcp",
                data=json.dumps(MCP_FIND),
                content_type="application/json",
                headers={"Accept": "application/json, text/event-stream"},
                **spoofed(),
            ),
        ),
    }
    for name, (group, call) in surfaces.items():
        from django.core.cache import cache

        cache.clear()  # a fresh budget for each surface
        client = Client()
        # when: every request claims to come from another address
        answered, limited = until_limited(lambda call=call, client=client: call(client), budget(group))
        # then: the budget of the real address (REMOTE_ADDR) was spent all the same
        assert answered == budget(group), f"{name}: limited after {answered}, budget {budget(group)}"
        retry_after = assert_retry_after(limited)
        text = limited.content.decode()
        assert "try again" in text.lower() or "retry" in text.lower(), text[:300]
        figures[name] = {
            "budget": RATES[group],
            "answered_before_429": answered,
            "retry_after_s": retry_after,
            "x_forwarded_for_rotations": answered + 1,
        }
    record("rate_limits.surfaces", {"surfaces": figures, "bypasses_found": 0})


def _aliased_search(count: int) -> str:
    fields = " ".join(f'a{i}: search(input: {{query: "pricing {i}"}}) {{ totalCount }}' for i in range(count))
    return json.dumps({"query": "{ " + fields + " }"})


@pytest.mark.django_db
def test_graphql_aliases_each_spend_a_unit_and_batches_are_refused() -> None:
    # given
    fuzz_corpus()
    client = Client()
    # when: 20 aliased searches (one operation) spend 20 of the 30 units
    first = client.post("/graphql", data=_aliased_search(20), content_type="application/json")
    remaining = [
        client.post("/api/search", data=json.dumps({"query": "pricing"}), content_type="application/json")
        for _ in range(11)
    ]
    second = client.post("/graphql", data=_aliased_search(1), content_type="application/json")
    batch = client.post(
        "/graphql",
        data=json.dumps([{"query": '{ search(input: {query: "a"}) { totalCount } }'}] * 5),
        content_type="application/json",
    )
    # then
    assert first.status_code == 200 and len(first.json()["data"]) == 20
    assert second.status_code == 429 and second.json()["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
    assert_retry_after(second)
    # the other 10 units of the 30, shared with POST /api/search
    assert [r.status_code for r in remaining] == [200] * 10 + [429]
    assert (
        batch.status_code == 400 and batch.json()["errors"][0]["extensions"]["code"] == "BATCH_NOT_SUPPORTED"
    )
    record(
        "rate_limits.graphql",
        {
            "aliases_per_operation": 20,
            "units_spent_by_one_operation": 20,
            "post_api_search_left_after_it": 10,
            "then_graphql": 429,
            "batch_of_5": "400 BATCH_NOT_SUPPORTED",
        },
    )


@pytest.fixture
def served(django_db_setup: Any, django_db_blocker: Any) -> Iterator[str]:
    from django.db import connection

    with django_db_blocker.unblock():
        name = connection.settings_dict["NAME"]
    with asgi_server(db_name=name) as base_url:
        yield base_url


@pytest.mark.django_db(transaction=True)
def test_over_real_http_a_rotating_x_forwarded_for_does_not_bypass_the_limit(served: str) -> None:
    # given: a client that is not a trusted proxy (uvicorn trusts only 127.0.0.1 by default)
    fuzz_corpus()
    client = httpx.Client(
        base_url=served, transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=10
    )
    statuses = []
    # when: previews, each claiming a new client address, until one is refused; the limit's window is a
    # fixed minute, so one that starts a new window mid-run lets through at most one more budget
    for i in range(2 * budget("preview") + 3):
        response = client.get(
            "/api/search/preview",
            params={"q": "pric"},
            headers={"X-Forwarded-For": f"203.0.113.{i + 1}", "X-Real-IP": f"203.0.113.{i + 1}"},
        )
        statuses.append(response.status_code)
        if response.status_code == 429:
            break
    client.close()
    # then: refused within the budget (or two budgets when a window ended mid-run), never a bypass
    assert statuses[-1] == 429, f"{len(statuses)} previews from rotating addresses, none refused"
    assert set(statuses[:-1]) == {200}
    assert budget("preview") <= len(statuses) - 1 <= 2 * budget("preview")
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    record(
        "rate_limits.real_http",
        {
            "server": "uvicorn config.asgi:application",
            "peer": "127.0.0.2",
            "x_forwarded_for_rotations": len(statuses),
            "answered_before_429": statuses.index(429),
        },
    )
