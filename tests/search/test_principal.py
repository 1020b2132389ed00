"""Whose presets, follows and recent searches a call reads: ``owner_id_of`` (one rule for every app)."""

from __future__ import annotations

from types import SimpleNamespace

from search.principal import ANONYMOUS, Principal, owner_id_of


def test_the_owner_behind_every_kind_of_caller() -> None:
    assert owner_id_of(None) is None
    assert owner_id_of(True) is None  # a boolean is not a user id
    assert owner_id_of(7) == 7
    assert owner_id_of(SimpleNamespace(is_authenticated=True, pk="12")) == 12
    assert owner_id_of(SimpleNamespace(is_authenticated=False, pk=None)) is None
    assert owner_id_of(Principal(kind="user", user_id=5)) == 5
    assert owner_id_of(ANONYMOUS) is None
    assert owner_id_of(Principal(kind="api_key", api_key_id=3)) is None  # a bare API key owns nothing
