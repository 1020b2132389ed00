"""Permissions come from the engine: an anonymous caller never sees a draft or restricted item."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from tests.graphql_api.conftest import gql

SEARCH = """query($corpus: Corpus) { search(input: {query: "harbour", limit: 50, corpus: $corpus, threshold: 0}) {
  totalCount hits { itemId item { id title } } } }"""
NOTE_PATHS = """query($search: String) { notePaths(filter: {search: $search}) }"""
ITEMS = """{ items(first: 100) { totalCount edges { node { id } } } }"""
ITEM = """query($id: ID, $slug: String, $corpus: Corpus) {
  item(id: $id, slug: $slug, corpus: $corpus) { id title } }"""


def _search_ids(client: Client, corpus: str = "LIVE") -> set[int]:
    status, body = gql(client, SEARCH, {"corpus": corpus})
    assert status == 200, body
    return {int(h["itemId"]) for h in body["data"]["search"]["hits"]}


def _paths(client: Client, search: str | None) -> set[str]:
    status, body = gql(client, NOTE_PATHS, {"search": search})
    assert status == 200, body
    return set(body["data"]["notePaths"])


def _items_ids(client: Client) -> set[int]:
    status, body = gql(client, ITEMS)
    assert status == 200, body
    return {int(e["node"]["id"]) for e in body["data"]["items"]["edges"]}


def _item(client: Client, **variables: Any) -> Any:
    status, body = gql(client, ITEM, variables)
    assert status == 200, body
    return body["data"]["item"]


@pytest.mark.django_db
def test_anonymous_search_sees_only_public_live_items(
    client: Client, permission_corpus: dict[str, Any]
) -> None:
    # given the corpus with draft, staff, signed-in and group items all matching "harbour"
    public = permission_corpus["public"]
    # when an anonymous caller searches (even asking for the drafts corpus)
    live = _search_ids(client, "LIVE")
    latest = _search_ids(client, "LATEST")
    # then only the public published item comes back
    assert live == {public.pk}
    assert latest == {public.pk}


@pytest.mark.django_db
def test_anonymous_note_paths_never_list_restricted_items(
    client: Client, permission_corpus: dict[str, Any]
) -> None:
    # given the permission corpus
    public_path = permission_corpus["public"].get_absolute_url()
    # when an anonymous caller lists paths with and without a search
    searched = _paths(client, "harbour")
    listed = _paths(client, None)
    # then only the public item's path appears
    assert searched == {public_path}
    assert listed == {public_path}


@pytest.mark.django_db
def test_anonymous_items_and_item_hide_drafts_and_restricted(
    client: Client, permission_corpus: dict[str, Any]
) -> None:
    # given the permission corpus
    public = permission_corpus["public"]
    # when an anonymous caller browses and looks items up by id and slug
    listed = _items_ids(client)
    # then only the public item is listed, and every other lookup answers null
    assert listed == {public.pk}
    assert _item(client, id=str(public.pk))["id"] == str(public.pk)
    for key in ("draft", "staff", "signed_in", "group"):
        hidden = permission_corpus[key]
        assert _item(client, id=str(hidden.pk)) is None, key
        assert _item(client, slug=hidden.slug) is None, key
        assert _item(client, id=str(hidden.pk), corpus="LATEST") is None, key


@pytest.mark.django_db
def test_signed_in_user_reads_signed_in_and_own_group_items(
    user_client: Client, permission_corpus: dict[str, Any]
) -> None:
    # given a signed-in user who is not yet in the pilots group
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(username="reader")
    expected = {permission_corpus["public"].pk, permission_corpus["signed_in"].pk}
    # when they search, then signed-in items appear but staff, group and drafts do not
    assert _search_ids(user_client) == expected
    assert _items_ids(user_client) == expected
    # when they join the group (a fresh request picks the membership up)
    user.groups.add(Group.objects.get(name="pilots"))
    # then the group item appears too
    assert _search_ids(user_client) == expected | {permission_corpus["group"].pk}


@pytest.mark.django_db
def test_staff_reads_drafts_only_in_latest_corpus(
    staff_client: Client, permission_corpus: dict[str, Any]
) -> None:
    # given a staff session
    draft = permission_corpus["draft"]
    everyone_live = {permission_corpus[k].pk for k in ("public", "staff", "signed_in", "group")}
    # when staff search the live and the latest corpus
    live = _search_ids(staff_client, "LIVE")
    latest = _search_ids(staff_client, "LATEST")
    # then the draft appears only in latest, and item(corpus: LATEST) reads it
    assert live == everyone_live
    assert latest == everyone_live | {draft.pk}
    assert _item(staff_client, id=str(draft.pk)) is None
    assert _item(staff_client, id=str(draft.pk), corpus="LATEST")["title"] == "Harbour draft plan"


@pytest.mark.django_db
def test_superseded_by_is_null_when_the_newer_item_is_restricted(client: Client) -> None:
    # given a public item superseded by a staff-only item
    from search.services import content
    from tests.factories import build, make_item

    old = make_item(title="Ferry timetable 2023", body="Ferry timetable for the old season.")
    new = make_item(title="Ferry timetable 2024", body="Ferry timetable, staff copy.", visibility="staff")
    content.item_mark_superseded(item=old, by=new)
    build()
    # when an anonymous caller reads the old item's supersededBy
    status, body = gql(
        client, """query($id: ID) { item(id: $id) { superseded supersededBy { id } } }""", {"id": str(old.pk)}
    )
    # then it knows the item is superseded but cannot reach the restricted successor
    assert status == 200, body
    assert body["data"]["item"] == {"superseded": True, "supersededBy": None}
