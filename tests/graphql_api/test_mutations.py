"""Preset and recent-search mutations call the presets/browse services; failures are typed errors."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.graphql_api.conftest import gql

CREATE = """mutation($name: String!, $params: GenericScalar!) {
  presetCreate(input: {name: $name, params: $params}) {
    preset { id name params isSystem } errors { code field message } } }"""
RENAME = """mutation($id: ID!, $name: String!) {
  presetRename(id: $id, name: $name) { preset { id name } errors { code field message } } }"""
DELETE = (
    """mutation($id: ID!) { presetDelete(id: $id) { preset { id isDeleted } errors { code message } } }"""
)
RESTORE = (
    """mutation($id: ID!) { presetRestore(id: $id) { preset { id isDeleted } errors { code message } } }"""
)


def _names(client: Client) -> list[str]:
    _, body = gql(client, "{ presets { name isSystem } }")
    return [p["name"] for p in body["data"]["presets"] if not p["isSystem"]]


@pytest.mark.django_db
def test_preset_lifecycle(user_client: Client) -> None:
    # when a signed-in user saves, renames, deletes and restores a preset
    _, created = gql(
        user_client, CREATE, {"name": "My guides", "params": {"content_type": ["guide"], "q": "x"}}
    )
    preset = created["data"]["presetCreate"]["preset"]
    assert created["data"]["presetCreate"]["errors"] == []
    # then the stored params are normalised by the presets service (q dropped)
    assert preset["params"] == {"content_type": ["guide"]} and preset["isSystem"] is False
    _, renamed = gql(user_client, RENAME, {"id": preset["id"], "name": "Guides"})
    assert renamed["data"]["presetRename"]["preset"]["name"] == "Guides"
    assert _names(user_client) == ["Guides"]
    _, deleted = gql(user_client, DELETE, {"id": preset["id"]})
    assert deleted["data"]["presetDelete"]["preset"]["isDeleted"] is True
    assert _names(user_client) == []
    _, restored = gql(user_client, RESTORE, {"id": preset["id"]})
    assert restored["data"]["presetRestore"]["preset"]["isDeleted"] is False
    assert _names(user_client) == ["Guides"]


@pytest.mark.django_db
def test_preset_errors_are_typed(user_client: Client) -> None:
    # given an existing preset and the system presets
    gql(user_client, CREATE, {"name": "Mine", "params": {"domain": ["Safety"]}})
    _, presets = gql(user_client, "{ presets { id isSystem } }")
    system_id = next(p["id"] for p in presets["data"]["presets"] if p["isSystem"])
    # when the user breaks each rule
    _, taken = gql(user_client, CREATE, {"name": "mine", "params": {"domain": ["Other"]}})
    _, bad_params = gql(user_client, CREATE, {"name": "Odd", "params": {"colour": ["red"]}})
    _, too_long = gql(user_client, CREATE, {"name": "x" * 41, "params": {"domain": ["Safety"]}})
    _, system = gql(user_client, RENAME, {"id": system_id, "name": "Renamed"})
    _, missing = gql(user_client, DELETE, {"id": "999999"})
    # then each answers its own code, with the field at fault, and no exception
    assert taken["data"]["presetCreate"]["errors"][0]["code"] == "PRESET_NAME_TAKEN"
    assert taken["data"]["presetCreate"]["preset"] is None
    assert bad_params["data"]["presetCreate"]["errors"][0]["code"] == "PRESET_PARAMS_INVALID"
    assert bad_params["data"]["presetCreate"]["errors"][0]["field"] == "params.colour"
    assert too_long["data"]["presetCreate"]["errors"][0]["code"] == "PRESET_NAME_INVALID"
    assert system["data"]["presetRename"]["errors"][0]["code"] == "PRESET_IMMUTABLE"
    assert missing["data"]["presetDelete"]["errors"][0]["code"] == "PRESET_NOT_FOUND"
    assert _names(user_client) == ["Mine"]


@pytest.mark.django_db
def test_anonymous_cannot_save_presets_or_recent_searches(client: Client) -> None:
    # when an anonymous caller tries to write
    _, preset = gql(client, CREATE, {"name": "Mine", "params": {"domain": ["Safety"]}})
    _, recent = gql(
        client, 'mutation { recentSearchAdd(query: "x") { recentSearches errors { code message } } }'
    )
    # then both are refused with SIGN_IN_REQUIRED and a message that says what to do
    for payload in (preset["data"]["presetCreate"], recent["data"]["recentSearchAdd"]):
        assert payload["errors"][0]["code"] == "SIGN_IN_REQUIRED"
        assert "sign in" in payload["errors"][0]["message"].lower()


@pytest.mark.django_db
def test_recent_searches_add_and_clear(user_client: Client) -> None:
    # when a user records three searches, one of them twice
    for text in ("tides", "ferries", "tides"):
        _, body = gql(
            user_client,
            "mutation($q: String!) { recentSearchAdd(query: $q) { recentSearches errors { code } } }",
            {"q": text},
        )
        assert body["data"]["recentSearchAdd"]["errors"] == []
    # then the list is newest first without duplicates
    _, listed = gql(user_client, "{ recentSearches }")
    assert listed["data"]["recentSearches"] == ["tides", "ferries"]
    # when the user clears them
    _, cleared = gql(
        user_client, "mutation { recentSearchesClear { deletedCount recentSearches errors { code } } }"
    )
    # then nothing remains
    assert cleared["data"]["recentSearchesClear"] == {"deletedCount": 2, "recentSearches": [], "errors": []}


@pytest.mark.django_db
def test_recent_search_add_refuses_blank_query(user_client: Client) -> None:
    _, body = gql(user_client, 'mutation { recentSearchAdd(query: "   ") { errors { code field } } }')
    assert body["data"]["recentSearchAdd"]["errors"] == [{"code": "INVALID_QUERY", "field": "query"}]


@pytest.mark.django_db
def test_recent_searches_are_private(user_client: Client, staff_client: Client) -> None:
    gql(user_client, 'mutation { recentSearchAdd(query: "secret plans") { errors { code } } }')
    _, other = gql(staff_client, "{ recentSearches }")
    assert other["data"]["recentSearches"] == []
