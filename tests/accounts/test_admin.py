from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from accounts.api_keys import api_key_authenticate, api_key_create, api_key_hash
from accounts.models import ApiKey

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client() -> Client:
    user = User.objects.create_superuser("boss", "boss@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def test_adding_a_key_shows_it_once_and_stores_only_its_hash(admin_client: Client) -> None:
    # given
    team = Group.objects.create(name="bid-team")
    # when
    response = admin_client.post(
        "/admin/accounts/apikey/add/",
        {
            "name": "Claude Desktop",
            "groups": [team.pk],
            "expires_at_0": "2099-01-01",
            "expires_at_1": "00:00:00",
        },
    )
    # then: the page answering the form shows the whole key, and is not cached
    assert response.status_code == 200
    html = response.content.decode()
    raw = re.search(r'value="(kb_[0-9a-f]{8}_[A-Za-z0-9_-]+)"', html).group(1)  # type: ignore[union-attr]
    assert "shown only this once" in html
    assert "no-store" in response["Cache-Control"]
    key = ApiKey.objects.get(name="Claude Desktop")
    assert key.key_hash == api_key_hash(raw) and raw.startswith(key.prefix)
    assert key.all_content is False and list(key.groups.all()) == [team]
    assert api_key_authenticate(raw=raw).group_ids == frozenset({team.pk})
    # and it is never shown again
    page = admin_client.get(f"/admin/accounts/apikey/{key.pk}/change/").content.decode()
    assert raw not in page and key.prefix in page
    assert raw not in admin_client.get("/admin/accounts/apikey/").content.decode()


def test_revoke_action(admin_client: Client) -> None:
    # given
    issued = api_key_create(name="agent")
    # when
    response = admin_client.post(
        "/admin/accounts/apikey/", {"action": "revoke", "_selected_action": [issued.api_key.pk]}, follow=True
    )
    # then
    assert "Revoked 1 key(s)." in response.content.decode()
    issued.api_key.refresh_from_db()
    assert issued.api_key.revoked_at is not None
    assert "revoked" in admin_client.get("/admin/accounts/apikey/").content.decode()
