"""Follows through GraphQL with the official ``gql`` client (httpx transport) against a live server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from gql import Client, GraphQLRequest
from gql.transport.exceptions import TransportQueryError
from gql.transport.httpx import HTTPXTransport

from follows import services
from follows.models import Follow
from search.models import ContentItem
from tests.follows.conftest import publish

pytestmark = pytest.mark.django_db(transaction=True)

FOLLOWS = """query { follows { id label query filters paused pausedReason newCount
  items { kind revisionNumber foundAt seen item { id title url } } } }"""
CREATE = """mutation($input: FollowCreateInput!) { followCreate(input: $input) {
  errors { code message field } follow { id label query filters newCount paused } } }"""
MARK_SEEN = """mutation($id: ID!) { followMarkSeen(id: $id) { errors { code } follow { id newCount } } }"""
DELETE = """mutation($id: ID!) { followDelete(id: $id) { errors { code message } deletedId } }"""


def _session_cookie(user: Any) -> str:
    from django.test import Client as DjangoClient

    client = DjangoClient()
    client.force_login(user)
    return client.cookies["sessionid"].value


class Api:
    """A gql client for one caller: its session cookie, and the CSRF token every mutation sends."""

    def __init__(self, base_url: str, session: str | None) -> None:
        cookies = {"sessionid": session} if session else {}
        token = httpx.get(base_url + "/browse", cookies=cookies).cookies["csrftoken"]
        transport = HTTPXTransport(
            url=base_url + "/graphql", headers={"X-CSRFToken": token}, cookies={**cookies, "csrftoken": token}
        )
        self.client = Client(transport=transport, fetch_schema_from_transport=False)

    def __call__(self, document: str, **variables: Any) -> dict[str, Any]:
        return self.client.execute(GraphQLRequest(document, variable_values=variables))


@pytest.fixture
def api(live_server: Any) -> Iterator[Any]:
    def make(user: Any | None) -> Api:
        return Api(live_server.url, _session_cookie(user) if user is not None else None)

    yield make


def test_follow_then_see_what_is_new_through_graphql(api: Any, reader: Any, pricing: dict[str, Any]) -> None:
    ada = api(reader)

    # when: follow a search
    created = ada(CREATE, input={"query": "pricing policy", "filters": {"domain": "pricing"}, "label": "Pricing"})
    payload = created["followCreate"]
    assert payload["errors"] == []
    follow = payload["follow"]
    assert follow["label"] == "Pricing" and follow["filters"] == {"domain": ["pricing"]}
    assert follow["newCount"] == 0 and follow["paused"] is False  # the baseline

    # when: an editor publishes a matching item and the job runs
    fresh = publish("Pricing policy for frameworks", "The pricing policy for frameworks.", primary_domain="pricing")
    services.follows_run_all()

    # then: it is listed as new
    [listed] = ada(FOLLOWS)["follows"]
    assert listed["id"] == follow["id"] and listed["newCount"] == 1
    [entry] = listed["items"]
    assert entry["kind"] == "NEW" and entry["seen"] is False
    assert entry["revisionNumber"] == fresh.live_revision.number
    assert entry["item"] == {
        "id": str(fresh.pk), "title": "Pricing policy for frameworks", "url": fresh.get_absolute_url()
    }

    # when: marked seen
    seen = ada(MARK_SEEN, id=follow["id"])["followMarkSeen"]
    assert seen["errors"] == [] and seen["follow"]["newCount"] == 0

    # when: the item becomes private, it disappears at once (read-time access rule)
    ContentItem.objects.filter(pk=fresh.pk).update(visibility="staff")
    assert ada(FOLLOWS)["follows"][0]["items"] == []

    # when: unfollowed
    deleted = ada(DELETE, id=follow["id"])["followDelete"]
    assert deleted == {"errors": [], "deletedId": follow["id"]}
    assert ada(FOLLOWS)["follows"] == []


def test_graphql_refusals_are_typed(api: Any, reader: Any, other_reader: Any, pricing: dict[str, Any]) -> None:
    anonymous = api(None)
    refused = anonymous(CREATE, input={"query": "pricing"})["followCreate"]
    assert refused["errors"][0]["code"] == "SIGN_IN_REQUIRED" and refused["follow"] is None
    assert anonymous(FOLLOWS)["follows"] == []

    ada = api(reader)
    bad = ada(CREATE, input={"query": "pricing", "filters": {"freshness": 4000}})["followCreate"]["errors"][0]
    assert bad["code"] == "FOLLOW_INVALID" and bad["field"] == "filters.freshness"
    assert "between 1 and 3650" in bad["message"]

    theirs = services.follow_create(owner=other_reader, query="pricing policy")
    missing = ada(DELETE, id=str(theirs.pk))["followDelete"]["errors"][0]
    assert missing["code"] == "FOLLOW_NOT_FOUND"
    assert Follow.objects.filter(pk=theirs.pk).exists()


def test_a_paused_follow_says_why(api: Any, reader: Any, pricing: dict[str, Any]) -> None:
    follow = services.follow_create(owner=reader, query="pricing policy")
    Follow.objects.filter(pk=follow.pk).update(filters={"colour": ["red"]})
    services.follows_run_all()

    [listed] = api(reader)(FOLLOWS)["follows"]

    assert listed["paused"] is True and "no longer works" in listed["pausedReason"]


def test_a_mutation_without_the_csrf_token_is_refused(live_server: Any, reader: Any, db: Any) -> None:
    transport = HTTPXTransport(url=live_server.url + "/graphql", cookies={"sessionid": _session_cookie(reader)})
    client = Client(transport=transport, fetch_schema_from_transport=False)
    with pytest.raises(TransportQueryError) as refused:
        client.execute(GraphQLRequest(CREATE, variable_values={"input": {"query": "pricing"}}))
    assert refused.value.errors and refused.value.errors[0]["extensions"]["code"] == "CSRF_FAILED"
    assert not Follow.objects.exists()


def test_search_accepts_changed_since(api: Any, reader: Any, pricing: dict[str, Any]) -> None:
    from django.utils import timezone

    cutoff = timezone.now()
    fresh = publish("Pricing policy for frameworks", "The pricing policy for frameworks.")
    query = """query($since: DateTime) { search(input: {query: "pricing policy", filter: {changedSince: $since}}) {
      hits { itemId } } }"""

    hits = api(reader)(query, since=cutoff.isoformat())["search"]["hits"]

    assert [h["itemId"] for h in hits] == [str(fresh.pk)]


DIGEST = "query { followDigest { available enabled } }"
DIGEST_SET = """mutation($on: Boolean!) { followDigestSet(enabled: $on) {
  errors { code message field } digest { available enabled } } }"""


def test_the_digest_choice_through_graphql(api: Any, reader: Any, settings: Any) -> None:
    from follows.models import FollowPreference

    ada = api(reader)
    # given a server that sends no digests: the choice is offered as unavailable, and turning it on is refused
    settings.FOLLOWS_DIGEST = False
    assert ada(DIGEST)["followDigest"] == {"available": False, "enabled": False}
    refused = ada(DIGEST_SET, on=True)["followDigestSet"]
    assert refused["digest"] is None and refused["errors"][0]["code"] == "FOLLOW_INVALID"
    assert refused["errors"][0]["field"] == "enabled" and "FOLLOWS_DIGEST is off" in refused["errors"][0]["message"]
    assert not FollowPreference.objects.filter(user=reader).exists()
    # when the server sends them: on, read back, then off
    settings.FOLLOWS_DIGEST = True
    turned_on = ada(DIGEST_SET, on=True)["followDigestSet"]
    assert turned_on == {"errors": [], "digest": {"available": True, "enabled": True}}
    assert ada(DIGEST)["followDigest"] == {"available": True, "enabled": True}
    assert FollowPreference.objects.get(user=reader).email_digest is True
    assert ada(DIGEST_SET, on=False)["followDigestSet"]["digest"] == {"available": True, "enabled": False}
    assert FollowPreference.objects.get(user=reader).email_digest is False
    # anonymous callers read "not asked for" and cannot choose
    anonymous = api(None)
    assert anonymous(DIGEST)["followDigest"] == {"available": True, "enabled": False}
    assert anonymous(DIGEST_SET, on=True)["followDigestSet"]["errors"][0]["code"] == "SIGN_IN_REQUIRED"
