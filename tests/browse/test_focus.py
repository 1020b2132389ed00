"""POST /profile/focus: the one-click choice of primary focus."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accounts.models import UserProfile

pytestmark = pytest.mark.django_db


def test_choosing_a_focus_saves_it_and_returns(user_client: Client, user: Any) -> None:
    response = user_client.post("/profile/focus", {"focus": "bid_writing", "next": "/browse"})
    assert response.status_code == 302 and response["Location"] == "/browse"
    assert UserProfile.objects.get(user=user).primary_focus == "bid_writing"


def test_an_unknown_focus_is_refused(user_client: Client) -> None:
    assert user_client.post("/profile/focus", {"focus": "astronaut"}).status_code == 400


def test_next_cannot_leave_the_site(user_client: Client) -> None:
    response = user_client.post("/profile/focus", {"focus": "marketing", "next": "https://evil.example/"})
    assert response["Location"] == "/browse"


def test_anonymous_visitors_are_sent_to_sign_in(client: Client) -> None:
    response = client.post("/profile/focus", {"focus": "marketing"})
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
