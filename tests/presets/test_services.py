"""Preset services against the real database: names, immutability, undo, ordering, import, resolve."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from presets import services
from presets.errors import (
    PresetImmutable,
    PresetLimitReached,
    PresetNameInvalid,
    PresetNameTaken,
    PresetNotFound,
    PresetParamsInvalid,
    PresetSignInRequired,
)
from presets.models import Preset
from search.errors import NotFound, PermissionDenied, SearchError
from search.principal import Principal
from search.types import SearchFilters

pytestmark = pytest.mark.django_db

SYSTEM_NAMES = ["Overdue for review", "Case studies", "Q&A library", "Updated this quarter", "Policies"]


def _create(owner: Any, name: str = "Pricing guides", **params: Any) -> Preset:
    return services.preset_create(owner=owner, name=name, params=params or {"domain": ["pricing"]})


# --- system presets -----------------------------------------------------------------------------------


def test_migration_creates_five_system_presets_with_valid_params() -> None:
    # when
    presets = services.preset_list(owner=None)

    # then
    assert [p.name for p in presets] == SYSTEM_NAMES
    assert all(p.is_system and p.owner_id is None for p in presets)
    for preset in presets:
        assert services.normalize_preset_params(preset.params) == preset.params  # already canonical
    assert services.preset_filters(presets[0]) == SearchFilters(overdue_review=True)


@pytest.mark.parametrize("action", ["rename", "delete", "restore"])
def test_system_presets_are_immutable(user: Any, action: str) -> None:
    # given
    system = Preset.objects.get(system_key="policies")

    # when
    with pytest.raises(PresetImmutable) as caught:
        if action == "rename":
            services.preset_rename(owner=user, preset_id=system.pk, name="Mine now")
        elif action == "delete":
            services.preset_delete(owner=user, preset_id=system.pk)
        else:
            services.preset_restore(owner=user, preset_id=system.pk)

    # then
    assert "system preset" in caught.value.message
    assert isinstance(caught.value, PermissionDenied)
    system.refresh_from_db()
    assert (system.name, system.deleted_at) == ("Policies", None)


# --- names --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"), [("a", "a"), ("x" * 40, "x" * 40), ("  tidy   name \u200b ", "tidy name")]
)
def test_name_bounds_accepted(user: Any, raw: str, expected: str) -> None:
    # when
    preset = _create(user, name=raw)

    # then
    assert preset.name == expected


@pytest.mark.parametrize("raw", ["", "   ", "x" * 41, "\u200b\u200b"])
def test_name_bounds_refused(user: Any, raw: str) -> None:
    # when
    with pytest.raises(PresetNameInvalid) as caught:
        _create(user, name=raw)

    # then
    assert caught.value.field == "name"
    assert "40" in caught.value.message


def test_name_of_41_characters_is_refused_on_rename_too(user: Any) -> None:
    # given
    preset = _create(user)

    # when / then
    with pytest.raises(PresetNameInvalid):
        services.preset_rename(owner=user, preset_id=preset.pk, name="y" * 41)
    assert services.preset_rename(owner=user, preset_id=preset.pk, name="y" * 40).name == "y" * 40


def test_names_are_unique_per_owner_ignoring_case(make_user: Any) -> None:
    # given
    alice, bob = make_user("alice"), make_user("bob")
    _create(alice, name="Pricing")

    # when / then
    with pytest.raises(PresetNameTaken) as caught:
        _create(alice, name="PRICING", content_type=["qa"])
    assert caught.value.field == "name"
    assert _create(bob, name="pricing").owner_id == bob.pk  # other owners are free to use it


def test_a_system_preset_name_cannot_be_reused(user: Any) -> None:
    # when / then
    with pytest.raises(PresetNameTaken, match="system preset"):
        _create(user, name="policies")


def test_a_deleted_name_can_be_reused(user: Any) -> None:
    # given
    first = _create(user, name="Pricing")
    services.preset_delete(owner=user, preset_id=first.pk)

    # when
    second = _create(user, name="Pricing", content_type=["qa"])

    # then
    assert second.pk != first.pk


# --- params -------------------------------------------------------------------------------------------


def test_create_stores_normalised_params(user: Any) -> None:
    # when
    preset = services.preset_create(
        owner=user,
        name="Mine",
        params={"q": "tender", "sort": "title", "content_type": ["qa", "policy"], "include_qa": "1"},
    )

    # then
    preset.refresh_from_db()
    assert preset.sorted_params() == {"content_type": ["policy", "qa"]}


def test_create_without_filters_is_refused(user: Any) -> None:
    # when / then
    with pytest.raises(PresetParamsInvalid, match="at least one filter"):
        services.preset_create(owner=user, name="Empty", params={"q": "only a query", "include_qa": "1"})


# --- anonymous ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("anonymous", [None, AnonymousUser(), Principal()])
def test_anonymous_reads_system_presets_and_cannot_write(user: Any, anonymous: Any) -> None:
    # given
    mine = _create(user)

    # when
    names = [p.name for p in services.preset_list(owner=anonymous)]

    # then
    assert names == SYSTEM_NAMES
    with pytest.raises(PresetSignInRequired, match="Sign in"):
        services.preset_create(owner=anonymous, name="x", params={"domain": ["a"]})
    with pytest.raises(PresetSignInRequired):
        services.preset_delete(owner=anonymous, preset_id=mine.pk)


def test_another_users_preset_is_not_found(make_user: Any) -> None:
    # given
    alice, bob = make_user("alice"), make_user("bob")
    hers = _create(alice)

    # when / then
    with pytest.raises(PresetNotFound):
        services.preset_rename(owner=bob, preset_id=hers.pk, name="Stolen")
    with pytest.raises(NotFound):
        services.preset_delete(owner=bob, preset_id=hers.pk)
    with pytest.raises(PresetNotFound):
        services.preset_apply(owner=bob, preset_id=hers.pk)


# --- list order ---------------------------------------------------------------------------------------


def test_list_puts_system_first_then_own_by_created_at(make_user: Any) -> None:
    # given
    alice, bob = make_user("alice"), make_user("bob")
    later = _create(alice, name="Later")
    earlier = _create(alice, name="Earlier", content_type=["qa"])
    Preset.objects.filter(pk=earlier.pk).update(created_at=timezone.now() - timedelta(days=1))
    _create(bob, name="Bob's")

    # when
    names = [p.name for p in services.preset_list(owner=alice)]

    # then
    assert names == [*SYSTEM_NAMES, "Earlier", later.name]


# --- delete and undo ----------------------------------------------------------------------------------


def test_delete_then_undo_restores_the_same_preset(user: Any) -> None:
    # given
    preset = _create(user, name="Pricing", domain=["pricing"], include_qa="0")

    # when
    deleted = services.preset_delete(owner=user, preset_id=preset.pk)
    hidden = [p.pk for p in services.preset_list(owner=user)]
    restored = services.preset_restore(owner=user, preset_id=preset.pk)

    # then
    assert deleted.deleted_at is not None
    assert preset.pk not in hidden
    assert restored.pk == preset.pk and restored.deleted_at is None
    assert restored.sorted_params() == {"domain": ["pricing"], "include_qa": "0"}
    assert [p.pk for p in services.preset_list(owner=user)][-1] == preset.pk


def test_delete_twice_and_restore_twice_are_no_ops(user: Any) -> None:
    # given
    preset = _create(user)

    # when
    services.preset_delete(owner=user, preset_id=preset.pk)
    again = services.preset_delete(owner=user, preset_id=preset.pk)
    services.preset_restore(owner=user, preset_id=preset.pk)
    alive = services.preset_restore(owner=user, preset_id=preset.pk)

    # then
    assert again.deleted_at is not None
    assert alive.deleted_at is None


def test_undo_is_refused_when_the_name_was_taken_meanwhile(user: Any) -> None:
    # given
    old = _create(user, name="Pricing")
    services.preset_delete(owner=user, preset_id=old.pk)
    _create(user, name="pricing", content_type=["qa"])

    # when / then
    with pytest.raises(PresetNameTaken, match="Rename that one first"):
        services.preset_restore(owner=user, preset_id=old.pk)


def test_renaming_a_deleted_preset_says_to_undo_first(user: Any) -> None:
    # given
    preset = _create(user)
    services.preset_delete(owner=user, preset_id=preset.pk)

    # when / then
    with pytest.raises(PresetNotFound, match="Undo the delete"):
        services.preset_rename(owner=user, preset_id=preset.pk, name="New")


def test_purge_removes_old_tombstones_only(user: Any) -> None:
    # given
    old, recent, alive = (
        _create(user, "Old"),
        _create(user, "Recent", domain=["b"]),
        _create(user, "Alive", domain=["c"]),
    )
    services.preset_delete(owner=user, preset_id=old.pk)
    services.preset_delete(owner=user, preset_id=recent.pk)
    Preset.objects.filter(pk=old.pk).update(deleted_at=timezone.now() - timedelta(days=31))

    # when
    removed = services.preset_purge_deleted(older_than_days=30)

    # then
    assert removed == 1
    assert set(Preset.objects.filter(owner=user).values_list("pk", flat=True)) == {recent.pk, alive.pk}


# --- two tabs -----------------------------------------------------------------------------------------


def test_two_tabs_renaming_the_same_preset_last_write_wins(user: Any) -> None:
    # given: both tabs loaded the preset under its first name
    preset = _create(user, name="Pricing")

    # when
    first = services.preset_rename(owner=user, preset_id=preset.pk, name="Tab one")
    second = services.preset_rename(owner=user, preset_id=preset.pk, name="Tab two")

    # then
    assert (first.name, second.name) == ("Tab one", "Tab two")
    preset.refresh_from_db()
    assert preset.name == "Tab two"


def test_renaming_to_the_same_name_or_its_case_is_allowed(user: Any) -> None:
    # given
    preset = _create(user, name="Pricing")

    # when
    same = services.preset_rename(owner=user, preset_id=preset.pk, name="Pricing")
    cased = services.preset_rename(owner=user, preset_id=preset.pk, name="PRICING")

    # then
    assert same.name == "Pricing" and cased.name == "PRICING"


# --- limits -------------------------------------------------------------------------------------------


def test_per_user_limit(user: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # given
    monkeypatch.setattr(services, "MAX_PRESETS_PER_USER", 2)
    _create(user, "One", domain=["a"])
    _create(user, "Two", domain=["b"])

    # when / then
    with pytest.raises(PresetLimitReached, match="delete one first"):
        _create(user, "Three", domain=["c"])


# --- apply and resolve --------------------------------------------------------------------------------


def test_apply_returns_url_params_keeping_query_and_from_bid(user: Any) -> None:
    # given
    preset = _create(user, name="QA", content_type=["qa"], include_qa="1")

    # when
    params = services.preset_apply(
        owner=user, preset_id=preset.pk, current={"q": "bid", "from_bid": "BID-3", "domain": "pricing"}
    )

    # then
    assert params == {"content_type": ["qa"], "from_bid": ["BID-3"], "q": ["bid"]}


def test_resolve_by_id_or_name(user: Any) -> None:
    # given
    mine = _create(user, name="My Pricing")
    system = Preset.objects.get(system_key="qa-library")

    # when / then
    assert services.preset_resolve(user, mine.pk) == mine
    assert services.preset_resolve(user, str(mine.pk)) == mine
    assert services.preset_resolve(user, "  my   pricing ") == mine
    assert services.preset_resolve(None, "q&a LIBRARY") == system
    assert services.preset_resolve(Principal(kind="api_key", api_key_id=1), system.pk) == system


def test_resolve_unknown_lists_what_is_available(user: Any) -> None:
    # given
    mine = _create(user, name="Mine")

    # when
    with pytest.raises(PresetNotFound) as caught:
        services.preset_resolve(None, "Mine")  # anonymous cannot see a user's preset

    # then
    available = caught.value.message.split("Available presets:")[1]
    assert "Policies" in available and "Mine" not in available
    assert caught.value.field == "preset"
    assert isinstance(caught.value, SearchError)
    with pytest.raises(PresetNotFound):
        services.preset_resolve(None, mine.pk)


# --- import -------------------------------------------------------------------------------------------


def test_import_merges_without_duplicates(user: Any) -> None:
    # given: the account already has one preset; the browser kept four
    _create(user, name="Pricing", domain=["pricing"])
    local = [
        {"name": "pricing copy", "params": {"domain": ["pricing"], "sort": "title"}},  # same filters
        {"name": "Only policies", "params": {"content_type": ["policy"]}},  # same as a system preset
        {"name": "Pricing", "params": {"domain": ["pricing"], "include_qa": "0"}},  # name taken
        {"name": "Security", "params": {"domain": ["security"]}, "id": "local-1"},
        {"name": "Security again", "params": {"domain": ["Security"]}},  # duplicate within the batch
        {"name": "", "params": {"domain": ["x"]}},
        {"name": "Bad", "params": {"colour": "red"}},
    ]

    # when
    result = services.preset_import(owner=user, presets=local)
    again = services.preset_import(owner=user, presets=local)

    # then
    assert [p.name for p in result.created] == ["Pricing (2)", "Security"]
    reasons = {s.name: s.reason for s in result.skipped}
    assert "already in your presets" in reasons["pricing copy"]
    assert "'Policies'" in reasons["Only policies"]
    assert "Security again" in reasons
    assert "colour" in reasons["Bad"]
    assert len(result.skipped) == 5
    assert again.created == ()
    assert [p.name for p in services.preset_list(owner=user)][5:] == ["Pricing", "Pricing (2)", "Security"]


def test_import_requires_sign_in() -> None:
    # when / then
    with pytest.raises(PresetSignInRequired):
        services.preset_import(owner=AnonymousUser(), presets=[{"name": "x", "params": {"domain": ["a"]}}])


def test_import_suffix_keeps_names_within_40_characters(user: Any) -> None:
    # given
    long_name = "n" * 40
    _create(user, name=long_name, domain=["a"])

    # when
    result = services.preset_import(owner=user, presets=[{"name": long_name, "params": {"domain": ["b"]}}])

    # then
    assert result.created[0].name == "n" * 36 + " (2)"
