from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model


@pytest.fixture
def make_user(db: Any) -> Any:
    counter = iter(range(1, 10_000))

    def make(username: str | None = None, password: str = "pw-presets-123") -> Any:
        return get_user_model().objects.create_user(
            username=username or f"user{next(counter)}", password=password
        )

    return make


@pytest.fixture
def user(make_user: Any) -> Any:
    return make_user("alice")
