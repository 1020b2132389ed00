"""Who sees which peer, and what a federated search refuses to send."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import Group
from django.core.cache import cache

from search.errors import InvalidQuery
from search.federation import peers
from search.federation.federated import federated_search
from search.models import FederationPeer
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


def test_the_peers_are_read_once_then_from_memory_until_one_changes(links: dict[str, int],
                                                                     django_assert_num_queries) -> None:
    with django_assert_num_queries(2):  # the peers and their groups, once
        assert visible(ANONYMOUS) == ["open"]
    with django_assert_num_queries(0):  # every later search, whoever asks
        assert visible(ANONYMOUS) == ["open"]
        assert len(visible(Principal(kind="staff", user_id=2, all_content=True))) == 4
        assert visible(Principal(kind="user", user_id=1)) == ["members", "open"]


def test_every_kind_of_change_applies_to_the_next_search(links: dict[str, int]) -> None:
    member = Principal(kind="user", user_id=1, group_ids=frozenset({links["bids"]}))
    assert visible(member) == ["bids-only", "members", "open"]
    peers.peer_add(name="new", base_url="https://new.example.org", api_key=KEY, public=True)
    assert visible(ANONYMOUS) == ["new", "open"]
    bids_only = FederationPeer.objects.get(name="bids-only")
    bids_only.groups.set(Group.objects.filter(name="legal"))  # m2m: no save of the peer itself
    assert visible(member) == ["members", "new", "open"]
    bids_only.groups.add(links["bids"])
    assert visible(member) == ["bids-only", "members", "new", "open"]
    Group.objects.filter(name="legal").delete()  # the only group of legal-only: it is disabled, not opened
    legal_only = FederationPeer.objects.get(name="legal-only")
    assert not legal_only.enabled and "'legal', was deleted" in legal_only.check_detail
    assert "legal-only" not in visible(Principal(kind="staff", user_id=2, all_content=True))
    assert "legal-only" not in visible(Principal(kind="user", user_id=1))
    open_peer = FederationPeer.objects.get(name="open")
    open_peer.enabled = False
    open_peer.save()
    assert visible(ANONYMOUS) == ["new"]
    peers.peer_remove(name="new")
    assert visible(ANONYMOUS) == []


def test_another_process_reads_the_peers_again_after_a_change_commits(links: dict[str, int],
                                                                       django_capture_on_commit_callbacks) -> None:
    assert visible(ANONYMOUS) == ["open"]
    with django_capture_on_commit_callbacks(execute=True):
        peers.peer_add(name="new", base_url="https://new.example.org", api_key=KEY, public=True)
        # another process searching now, before the commit, reads the old rows under the token just set
        token = cache.get(peers.PEERS_VERSION_KEY)
        peers._snapshot = (token, time.monotonic(), tuple(p for p in peers.peers_enabled() if p.name != "new"))
        assert visible(ANONYMOUS) == ["open"]
    # the commit sets a newer token: that copy is read again
    assert cache.get(peers.PEERS_VERSION_KEY) != token
    assert visible(ANONYMOUS) == ["new", "open"]


def test_with_the_cache_down_the_peers_are_read_on_every_search_and_no_copy_outlives_it(
        links: dict[str, int], monkeypatch, django_assert_num_queries) -> None:
    assert visible(ANONYMOUS) == ["open"]  # a copy, tagged with the token of before
    with monkeypatch.context() as down:
        down.setattr(cache, "get", lambda *args, **kwargs: None)
        down.setattr(cache, "add", lambda *args, **kwargs: False)
        for _ in range(2):
            with django_assert_num_queries(2):
                assert visible(ANONYMOUS) == ["open"]
    # the cache is back with the token of before: a change made meanwhile may not have set a new one, so the copy
    # from before the outage is not trusted
    with django_assert_num_queries(2):
        assert visible(ANONYMOUS) == ["open"]


def test_a_change_that_cannot_be_announced_is_logged_and_no_copy_serves_longer_than_the_bound(
        links: dict[str, int], monkeypatch, caplog) -> None:
    assert visible(ANONYMOUS) == ["open"]
    token = cache.get(peers.PEERS_VERSION_KEY)
    with monkeypatch.context() as failing:
        failing.setattr(cache, "set_many", lambda data, *args, **kwargs: list(data))  # nothing set
        peers.peer_add(name="new", base_url="https://new.example.org", api_key=KEY, public=True)
    assert "could not be announced" in caplog.text
    assert cache.get(peers.PEERS_VERSION_KEY) == token
    assert visible(ANONYMOUS) == ["new", "open"]  # this process dropped its own copy
    # another process still holds the old rows under the old token: served at most PEERS_SNAPSHOT_MAX_S
    stale = tuple(p for p in peers.peers_enabled() if p.name != "new")
    peers._snapshot = (token, time.monotonic(), stale)
    assert visible(ANONYMOUS) == ["open"]
    peers._snapshot = (token, time.monotonic() - peers.PEERS_SNAPSHOT_MAX_S - 1, stale)
    assert visible(ANONYMOUS) == ["new", "open"]


def test_filters_that_only_mean_something_here_are_refused_not_dropped(links: dict[str, int]) -> None:
    staff = Principal(kind="staff", user_id=2, all_content=True)
    for filters in (SearchFilters(content_item_id=5), SearchFilters(unread_only=True)):
        with pytest.raises(InvalidQuery, match="this knowledge base only"):
            federated_search(RetrievalQuery(text="pricing", principal=staff, filters=filters), sources="all")
