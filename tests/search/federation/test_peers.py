"""Who sees which peer, and what a federated search refuses to send."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from search.errors import InvalidQuery
from search.federation import peers
from search.federation.federated import federated_search
from search.principal import ANONYMOUS, Principal
from search.types import RetrievalQuery, SearchFilters

pytestmark = pytest.mark.django_db
KEY = "kb_1a2b3c4d_" + "k" * 43


@pytest.fixture
def links() -> dict[str, int]:
    bids = Group.objects.create(name="bids")
    Group.objects.create(name="legal")
    peers.peer_add(name="open", base_url="https://open.example.org", api_key=KEY, public=True)
    peers.peer_add(name="members", base_url="https://members.example.org", api_key=KEY)
    peers.peer_add(name="bids-only", base_url="https://bids.example.org", api_key=KEY, groups=["bids"])
    peers.peer_add(name="legal-only", base_url="https://legal.example.org", api_key=KEY, groups=["legal"])
    off = peers.peer_add(name="off", base_url="https://off.example.org", api_key=KEY, public=True)
    off.enabled = False
    off.save()
    return {"bids": bids.pk}


def visible(principal: Principal) -> list[str]:
    return sorted(p.name for p in peers.peers_visible(principal))


def test_each_kind_of_caller_sees_the_peers_it_may(links: dict[str, int]) -> None:
    assert visible(ANONYMOUS) == ["open"]
    assert visible(Principal(kind="user", user_id=1)) == ["members", "open"]
    assert visible(Principal(kind="user", user_id=1, group_ids=frozenset({links["bids"]}))) == [
        "bids-only", "members", "open"]
    assert visible(Principal(kind="staff", user_id=2, all_content=True)) == [
        "bids-only", "legal-only", "members", "open"]
    # a key (a peer's or an agent's) never reaches further than this knowledge base, whatever its scope
    assert visible(Principal(kind="api_key", api_key_id=7, all_content=True)) == []


def test_only_signed_in_users_pay_for_the_peer_groups(links: dict[str, int], django_assert_num_queries) -> None:
    # every search across knowledge bases reads the peers first: anonymous and staff callers need no groups
    with django_assert_num_queries(1):
        assert visible(ANONYMOUS) == ["open"]
    with django_assert_num_queries(1):
        assert len(visible(Principal(kind="staff", user_id=2, all_content=True))) == 4
    with django_assert_num_queries(2):
        assert visible(Principal(kind="user", user_id=1)) == ["members", "open"]


def test_filters_that_only_mean_something_here_are_refused_not_dropped(links: dict[str, int]) -> None:
    staff = Principal(kind="staff", user_id=2, all_content=True)
    for filters in (SearchFilters(content_item_id=5), SearchFilters(unread_only=True)):
        with pytest.raises(InvalidQuery, match="this knowledge base only"):
            federated_search(RetrievalQuery(text="pricing", principal=staff, filters=filters), sources="all")
