"""Agents: ``find(changed_since=…)`` and ``follow_news`` through the official MCP client over streamable HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from mcp.types import CallToolResult

from accounts.api_keys import api_key_create
from accounts.models import ApiKey
from follows import services
from follows.models import FollowItem
from tests.follows.conftest import publish
from tests.mcp_api.client import asgi_server, mcp_call

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def base_url(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    """The product's ASGI app under uvicorn on the test database (what ``manage.py up`` serves)."""
    from django.db import connection

    with django_db_blocker.unblock():
        name = connection.settings_dict["NAME"]
    with asgi_server(db_name=name) as url:
        yield url


def _text(result: CallToolResult) -> str:
    return result.content[0].text if result.content else ""  # type: ignore[union-attr]


def _key(user: Any = None, **kwargs: Any) -> str:
    issued = api_key_create(name="agent", **kwargs)
    if user is not None:
        ApiKey.objects.filter(pk=issued.api_key.pk).update(user=user)
    return issued.raw_key


def test_find_accepts_changed_since_and_refuses_a_bad_one(base_url: str, pricing: dict[str, Any]) -> None:
    # given an item published after a cutoff
    cutoff = timezone.now()
    fresh = publish("Pricing policy for frameworks", "The pricing policy for frameworks.")

    # when / then
    since = mcp_call(base_url, "find", {"query": "pricing policy", "changed_since": cutoff.isoformat(),
                                        "threshold": 0})
    assert not since.isError
    assert [h["item_id"] for h in since.structuredContent["results"]] == [fresh.pk]  # type: ignore[index]
    assert "changed_since=" in _text(since)
    every = mcp_call(base_url, "find", {"query": "pricing policy", "threshold": 0,
                                         "changed_since": (cutoff - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")})
    assert len(every.structuredContent["results"]) == 3  # type: ignore[index]

    bad = mcp_call(base_url, "find", {"query": "pricing", "changed_since": "last tuesday"})
    assert bad.isError and "changed_since must be an ISO 8601 time with a time zone" in _text(bad)
    naive = mcp_call(base_url, "find", {"query": "pricing", "changed_since": "2025-01-31T09:00:00"})
    assert naive.isError and "changed_since has no time zone" in _text(naive)


def test_follow_news_lists_the_keys_users_follows_and_what_is_new(
    base_url: str, reader: Any, finance_group: Any, pricing: dict[str, Any]
) -> None:
    # given a reader (in the finance group) following a search, and two new items: one public, one finance-only
    reader.groups.add(finance_group)
    follow = services.follow_create(owner=reader, query="pricing policy", label="Pricing")
    public = publish("Pricing policy for frameworks", "The pricing policy for frameworks.")
    secret = publish("Pricing policy margins", "The pricing policy margins.", visibility="groups", groups=["finance"])
    services.follows_run_all()
    assert FollowItem.objects.filter(follow=follow).count() == 2
    key = _key(reader)

    # when: the list
    listed = mcp_call(base_url, "follow_news", {}, api_key=key)

    # then
    assert not listed.isError, _text(listed)
    [summary] = listed.structuredContent["follows"]  # type: ignore[index]
    assert summary["id"] == follow.pk and summary["label"] == "Pricing" and summary["new_count"] == 2
    assert f"follow_id {follow.pk} · Pricing · 2 new" in _text(listed)

    # when: one follow's news
    news = mcp_call(base_url, "follow_news", {"follow_id": follow.pk}, api_key=key)
    items = news.structuredContent["items"]  # type: ignore[index]
    assert {i["item_id"] for i in items} == {public.pk, secret.pk} and {i["kind"] for i in items} == {"new"}
    assert "[new] Pricing policy for frameworks" in _text(news)

    # when: a key scoped to groups it does not hold (same user) asks, it never learns the finance item
    scoped = _key(reader, all_content=False)
    narrow = mcp_call(base_url, "follow_news", {"follow_id": follow.pk}, api_key=scoped)
    assert [i["item_id"] for i in narrow.structuredContent["items"]] == [public.pk]  # type: ignore[index]

    # when: someone else's follow id
    other = mcp_call(base_url, "follow_news", {"follow_id": follow.pk + 999}, api_key=key)
    assert other.isError and "follows no search with id" in _text(other)


def test_follow_news_needs_a_key_with_a_user(base_url: str, reader: Any) -> None:
    anonymous = mcp_call(base_url, "follow_news", {})
    assert anonymous.isError and "needs an API key that belongs to a user" in _text(anonymous)

    no_user = mcp_call(base_url, "follow_news", {}, api_key=_key())
    assert no_user.isError and "this API key belongs to no user" in _text(no_user)
    assert "Admin → API keys" in _text(no_user)

    bad_arg = mcp_call(base_url, "follow_news", {"follow": 1}, api_key=_key(reader))
    assert bad_arg.isError and "unknown argument" in _text(bad_arg)
