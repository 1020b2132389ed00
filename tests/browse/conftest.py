"""Fixtures of the browse tests: users and signed-in clients."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client


@pytest.fixture
def user(db: Any) -> Any:
    return get_user_model().objects.create_user(username="reader", password="pw-reader-123", first_name="Rita")


@pytest.fixture
def staff(db: Any) -> Any:
    return get_user_model().objects.create_user(username="editor", password="pw-editor-123", is_staff=True)


@pytest.fixture
def user_client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client
