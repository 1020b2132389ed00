"""Shared data for the follows tests: readers, an editor's publishing, and a small pricing corpus."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from search.models import ContentItem
from search.services import content
from tests.factories import build, make_item


@pytest.fixture(autouse=True)
def _every_match(settings: Any) -> None:
    """These tests are about what a run records, not about confidence: a run keeps every match (the floor is
    pinned by test_a_follow_of_a_search_nothing_matches_records_nothing)."""
    settings.FOLLOW_THRESHOLD = 0.0


@pytest.fixture
def reader(db: Any) -> Any:
    return get_user_model().objects.create_user("ada", "ada@example.com", "pw-ada-12345")


@pytest.fixture
def other_reader(db: Any) -> Any:
    return get_user_model().objects.create_user("bob", "bob@example.com", "pw-bob-12345")


@pytest.fixture
def finance_group(db: Any) -> Group:
    return Group.objects.get_or_create(name="finance")[0]


@pytest.fixture
def pricing(db: Any) -> dict[str, ContentItem]:
    """Two public pricing items, indexed."""
    items = {
        "policy": make_item(title="Pricing policy 2025", body="How we set the pricing policy for tenders.",
                            primary_domain="pricing", content_type="policy"),
        "guide": make_item(title="Pricing guide for bids", body="A pricing policy guide with day rates.",
                           primary_domain="pricing", content_type="guide"),
    }
    build()
    return items


def publish(title: str, body: str, **fields: Any) -> ContentItem:
    """An editor publishes a new item, then the index is built (as the debounced build task does)."""
    item = make_item(title=title, body=body, **fields)
    build()
    return item


def republish(item: ContentItem, *, title: str, body: str) -> ContentItem:
    """An editor publishes a new revision of ``item``."""
    item.refresh_from_db()
    content.item_save_revision(item=item, title=title, body=body, publish=True)
    build()
    item.refresh_from_db()
    return item


def session_client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client
