"""Fixtures of the analytics tests: a small corpus, users, and a way to run the query log's writes.

The receiver saves each log row when the caller's transaction commits; inside a test's transaction that
never happens by itself, so tests wrap the searches in ``logged()`` (pytest-django runs the callbacks).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.factories import build, make_item


@pytest.fixture
def logged(django_capture_on_commit_callbacks: Any) -> Callable[[], AbstractContextManager[Any]]:
    """``with logged(): <searches>``: the query-log rows are written when the block ends."""

    def _logged() -> AbstractContextManager[Any]:
        return django_capture_on_commit_callbacks(execute=True)

    return _logged


@pytest.fixture
def corpus(db: Any) -> dict[str, Any]:
    items = {
        "pricing": make_item(
            title="Tender pricing guide",
            body="How we price bids: day rates and fixed fees.",
            primary_domain="pricing",
            content_type="guide",
        ),
        "discount": make_item(
            title="Discount approval",
            body="Discounts on the price need approval.",
            primary_domain="pricing",
            content_type="policy",
        ),
        "social": make_item(
            title="Social value guide",
            body="Social value commitments in tenders.",
            primary_domain="social_value",
            content_type="guide",
        ),
    }
    build()
    return items


@pytest.fixture
def user(db: Any) -> Any:
    return get_user_model().objects.create_user(username="reader", password="pw-reader-123")


@pytest.fixture
def user_client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def admin_user(db: Any) -> Any:
    return get_user_model().objects.create_superuser("boss", "boss@example.com", "pw-boss-123")


@pytest.fixture
def admin_client(admin_user: Any) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client
