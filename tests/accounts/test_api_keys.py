"""accounts.api_keys: issue, authenticate, revoke."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from accounts.api_keys import (
    ApiKeyInvalid,
    api_key_authenticate,
    api_key_create,
    api_key_hash,
    api_key_issue,
    api_key_revoke,
)
from accounts.models import ApiKey

pytestmark = pytest.mark.django_db


def test_create_returns_the_raw_key_once_and_stores_only_prefix_and_hash() -> None:
    # when
    issued = api_key_create(name="  Claude Desktop  ")
    # then
    key = ApiKey.objects.get(pk=issued.api_key.pk)
    assert key.name == "Claude Desktop"
    assert issued.raw_key.startswith(key.prefix + "_") and len(key.prefix) == 11
    assert key.key_hash == api_key_hash(issued.raw_key) and len(key.key_hash) == 64
    stored = [str(v) for v in ApiKey.objects.filter(pk=key.pk).values().first().values()]
    assert all(issued.raw_key not in value for value in stored)
    assert api_key_create(name="other").raw_key != issued.raw_key


def test_authenticate_gives_an_api_key_principal_and_records_last_use() -> None:
    # given
    issued = api_key_create(name="agent")
    # when
    principal = api_key_authenticate(raw=issued.raw_key)
    # then
    assert principal.kind == "api_key" and principal.all_content is True
    assert principal.api_key_id == issued.api_key.pk and principal.can_read_drafts
    issued.api_key.refresh_from_db()
    assert issued.api_key.last_used_at is not None


def test_last_use_is_written_at_most_once_a_minute(django_assert_num_queries: object) -> None:
    issued = api_key_create(name="agent")
    api_key_authenticate(raw=issued.raw_key)
    with django_assert_num_queries(1):  # type: ignore[operator]
        api_key_authenticate(raw=issued.raw_key)


def test_group_scoped_key_carries_its_groups() -> None:
    # given
    team = Group.objects.create(name="bid-team")
    issued = api_key_create(name="team bot", all_content=False, groups=[team])
    # when
    principal = api_key_authenticate(raw=issued.raw_key)
    # then
    assert principal.all_content is False and principal.group_ids == frozenset({team.pk})


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda raw: raw[:-1] + ("A" if raw[-1] != "A" else "B"), "not recognised"),
        (lambda raw: "kb_00000000_" + raw.split("_", 2)[2], "not recognised"),
        (lambda raw: "not-a-key", "malformed"),
        (lambda raw: "", "malformed"),
    ],
)
def test_wrong_keys_are_refused_without_saying_more(mangle: object, message: str) -> None:
    issued = api_key_create(name="agent")
    with pytest.raises(ApiKeyInvalid, match=message):
        api_key_authenticate(raw=mangle(issued.raw_key))  # type: ignore[operator]


def test_expired_and_revoked_keys_say_so() -> None:
    # given
    expired = api_key_create(name="old", expires_at=timezone.now() - timedelta(minutes=1))
    revoked = api_key_create(name="gone")
    # when
    assert api_key_revoke(api_key=revoked.api_key) is True
    first_revocation = revoked.api_key.revoked_at
    assert api_key_revoke(api_key=revoked.api_key) is False
    # then
    assert revoked.api_key.revoked_at == first_revocation
    with pytest.raises(ApiKeyInvalid, match="expired"):
        api_key_authenticate(raw=expired.raw_key)
    with pytest.raises(ApiKeyInvalid, match="revoked"):
        api_key_authenticate(raw=revoked.raw_key)


def test_key_not_yet_expired_works() -> None:
    issued = api_key_create(name="new", expires_at=timezone.now() + timedelta(days=30))
    assert api_key_authenticate(raw=issued.raw_key).api_key_id == issued.api_key.pk


def test_issue_refuses_a_saved_key_and_create_needs_a_name() -> None:
    issued = api_key_create(name="agent")
    with pytest.raises(ValueError, match="unsaved"):
        api_key_issue(api_key=issued.api_key)
    with pytest.raises(ValueError, match="name is required"):
        api_key_create(name="  ")
