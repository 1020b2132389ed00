"""follows.services and follows.selectors: follow, the baseline, new and changed, the bounds, pauses, access."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from follows import selectors, services
from follows.errors import FollowInvalid, FollowLimitReached, FollowNotFound, FollowSignInRequired
from follows.models import Follow, FollowItem
from search.models import ContentItem
from tests.follows.conftest import publish, republish

pytestmark = pytest.mark.django_db


def _entries(follow: Follow) -> list[tuple[str, int, int]]:
    """(kind, item id, revision number) of the follow's unseen entries, by rank."""
    return list(
        FollowItem.objects.filter(follow=follow, seen_at__isnull=True)
        .order_by("rank")
        .values_list("kind", "item_id", "revision_number")
    )


def test_following_stores_canonical_filters_and_takes_the_baseline(reader: Any, pricing: dict[str, Any]) -> None:
    # when
    follow = services.follow_create(
        owner=reader, query="  pricing   policy ", filters={"domain": ["Pricing", "pricing"], "include_qa": True}
    )

    # then: filters in the URL codec's canonical form, and what the search finds now counts as shown
    assert follow.query == "pricing policy" and follow.label == "pricing policy"
    assert follow.filters == {"domain": ["Pricing"]}
    assert follow.last_run_at is not None
    assert set(follow.shown) == {str(pricing["policy"].pk), str(pricing["guide"].pk)}
    assert follow.shown[str(pricing["policy"].pk)] == pricing["policy"].live_revision.number
    assert _entries(follow) == []  # the baseline reports nothing as new
    assert selectors.follow_news(user=reader).total == 0


def test_following_the_same_search_again_returns_the_same_follow(reader: Any, pricing: dict[str, Any]) -> None:
    first = services.follow_create(owner=reader, query="pricing", filters={"domain": "pricing"})
    second = services.follow_create(owner=reader, query="pricing ", filters={"domain": ["pricing"]})
    assert first.pk == second.pk and Follow.objects.count() == 1


def test_anonymous_callers_and_bad_input_are_refused(reader: Any, db: Any) -> None:
    with pytest.raises(FollowSignInRequired):
        services.follow_create(owner=None, query="pricing")
    with pytest.raises(FollowInvalid) as bad_filter:
        services.follow_create(owner=reader, query="pricing", filters={"freshness": "4000"})
    assert bad_filter.value.field == "filters.freshness" and "between 1 and 3650" in bad_filter.value.message
    with pytest.raises(FollowInvalid) as unknown:
        services.follow_create(owner=reader, query="pricing", filters={"colour": "red"})
    assert unknown.value.field == "filters.colour" and "unknown filter" in unknown.value.message
    with pytest.raises(FollowInvalid) as empty:
        services.follow_create(owner=reader, query="   ")
    assert "set at least one filter" in empty.value.message
    with pytest.raises(FollowInvalid):
        services.follow_create(owner=reader, query="pricing", label="x" * 81)


def test_an_account_follows_at_most_fifty_searches(reader: Any, db: Any) -> None:
    # given 50 follows
    for n in range(services.MAX_FOLLOWS_PER_USER):
        Follow.objects.create(owner=reader, query=f"topic {n}", label=f"topic {n}")

    # when / then: the 51st is refused with what to do
    with pytest.raises(FollowLimitReached) as refused:
        services.follow_create(owner=reader, query="one more")
    assert "50" in refused.value.message and "Unfollow one on /follows" in refused.value.message
    assert Follow.objects.filter(owner=reader).count() == 50


def test_a_published_item_is_new_and_a_new_revision_is_changed(reader: Any, pricing: dict[str, Any]) -> None:
    # given a follow (baseline: the two pricing items)
    follow = services.follow_create(owner=reader, query="pricing policy")

    # when an editor publishes a matching item and the job runs
    fresh = publish("Pricing policy for framework agreements", "The pricing policy for frameworks.")
    outcome = services.follow_run(follow_id=follow.pk)

    # then it is new; the other two are not
    assert outcome.status == "ran" and outcome.new == 1
    assert _entries(follow) == [("new", fresh.pk, fresh.live_revision.number)]
    news = selectors.follow_news(user=reader)
    assert (news.total, news.follows, news.label) == (1, 1, "pricing policy")

    # when a shown item gets a new published revision
    policy = republish(pricing["policy"], title="Pricing policy 2026", body="The pricing policy, revised.")
    outcome = services.follow_run(follow_id=follow.pk)

    # then it is "changed" with its new revision number
    assert outcome.changed == 1 and outcome.new == 0
    kinds = {item_id: (kind, number) for kind, item_id, number in _entries(follow)}
    assert kinds[policy.pk] == ("changed", policy.live_revision.number) and policy.live_revision.number == 2
    assert kinds[fresh.pk][0] == "new"


def test_an_item_changed_again_before_it_is_seen_keeps_one_entry(reader: Any, pricing: dict[str, Any]) -> None:
    follow = services.follow_create(owner=reader, query="pricing policy")
    fresh = publish("Pricing policy for frameworks", "The pricing policy for frameworks.")
    services.follow_run(follow_id=follow.pk)
    fresh = republish(fresh, title="Pricing policy for frameworks", body="The pricing policy for frameworks, v2.")

    services.follow_run(follow_id=follow.pk)

    assert _entries(follow) == [("new", fresh.pk, 2)]


def test_running_twice_records_nothing_twice(reader: Any, pricing: dict[str, Any]) -> None:
    follow = services.follow_create(owner=reader, query="pricing policy")
    publish("Pricing policy for frameworks", "The pricing policy for frameworks.")

    first = services.follow_run(follow_id=follow.pk)
    second = services.follow_run(follow_id=follow.pk)
    report = services.follows_run_all()

    assert first.new == 1 and second.new == 0 and report.new == 0 and report.counts["ran"] == 1
    assert FollowItem.objects.filter(follow=follow).count() == 1


def test_a_run_records_only_the_top_n(reader: Any, pricing: dict[str, Any], settings: Any) -> None:
    # given a follow, then many more matching items than FOLLOW_TOP_N
    settings.FOLLOW_TOP_N = 3
    follow = services.follow_create(owner=reader, query="pricing policy")
    for n in range(6):
        publish(f"Pricing policy annex {n}", f"Annex {n} of the pricing policy.")

    # when
    outcome = services.follow_run(follow_id=follow.pk)

    # then only the top 3 by rank were recorded
    ranks = list(FollowItem.objects.filter(follow=follow).order_by("rank").values_list("rank", flat=True))
    assert 1 <= outcome.new <= 3 and len(ranks) == outcome.new and all(1 <= r <= 3 for r in ranks)
    assert len(Follow.objects.get(pk=follow.pk).shown) == 2 + outcome.new  # the 6 annexes were not all taken


def test_filters_that_no_longer_parse_pause_the_follow_and_keep_it(reader: Any, pricing: dict[str, Any]) -> None:
    # given a follow with an entry in its feed
    follow = services.follow_create(owner=reader, query="pricing policy", filters={"domain": "pricing"})
    publish("Pricing policy for frameworks", "The pricing policy for frameworks.", primary_domain="pricing")
    services.follow_run(follow_id=follow.pk)

    # when its stored filters stop parsing (a filter renamed, a value now refused)
    Follow.objects.filter(pk=follow.pk).update(filters={"sector": ["pricing"]})
    outcome = services.follow_run(follow_id=follow.pk)

    # then it is paused with a reason the page and GraphQL show, and nothing was dropped
    follow.refresh_from_db()
    assert outcome.status == "paused" and follow.paused and follow.paused_at is not None
    assert "no longer works" in follow.paused_reason and "sector" in follow.paused_reason
    assert FollowItem.objects.filter(follow=follow).count() == 1
    [view] = selectors.follows_list(user=reader)
    assert view.paused and view.new_count == 1

    # when the filters parse again, the next run resumes it
    Follow.objects.filter(pk=follow.pk).update(filters={"domain": ["pricing"]})
    assert services.follow_run(follow_id=follow.pk).status == "ran"
    follow.refresh_from_db()
    assert not follow.paused and follow.paused_at is None


def test_an_inactive_owner_pauses_the_follow(reader: Any, pricing: dict[str, Any]) -> None:
    follow = services.follow_create(owner=reader, query="pricing policy")
    get_user_model().objects.filter(pk=reader.pk).update(is_active=False)

    outcome = services.follow_run(follow_id=follow.pk)

    follow.refresh_from_db()
    assert outcome.status == "paused" and follow.paused_reason == services.INACTIVE_REASON


def test_an_item_made_private_disappears_from_the_feed(
    reader: Any, finance_group: Any, pricing: dict[str, Any]
) -> None:
    # given a new item in the reader's feed
    follow = services.follow_create(owner=reader, query="pricing policy")
    fresh = publish("Pricing policy for frameworks", "The pricing policy for frameworks.")
    services.follow_run(follow_id=follow.pk)
    assert selectors.follows_list(user=reader)[0].new_count == 1

    # when it is made visible to a group the reader is not in
    ContentItem.objects.filter(pk=fresh.pk).update(visibility="groups")
    fresh.groups.set([finance_group])

    # then the page no longer shows it at once (read-time filter), and the next run deletes the entry
    reader = get_user_model().objects.get(pk=reader.pk)
    assert selectors.follows_list(user=reader)[0].unseen == ()
    assert selectors.follow_news(user=reader.pk).total in (0, 1)  # cached for a minute at most
    outcome = services.follow_run(follow_id=follow.pk)
    assert outcome.removed == 1 and not FollowItem.objects.filter(follow=follow).exists()
    assert selectors.follow_news(user=reader).total == 0


def test_a_revoked_group_is_honoured_at_the_next_run(reader: Any, finance_group: Any, pricing: dict[str, Any]) -> None:
    # given a reader in the finance group, following a search that finds a finance-only item
    reader.groups.add(finance_group)
    follow = services.follow_create(owner=reader, query="pricing policy")
    secret = publish("Pricing policy margins", "The pricing policy margins.", visibility="groups", groups=["finance"])
    services.follow_run(follow_id=follow.pk)
    assert [item_id for _, item_id, _ in _entries(follow)] == [secret.pk]

    # when the reader leaves the group
    reader.groups.remove(finance_group)
    services.follow_run(follow_id=follow.pk)

    # then the item is gone from the feed
    assert _entries(follow) == []


def test_mark_seen_and_unfollow(reader: Any, other_reader: Any, pricing: dict[str, Any]) -> None:
    follow = services.follow_create(owner=reader, query="pricing policy")
    publish("Pricing policy for frameworks", "The pricing policy for frameworks.")
    services.follow_run(follow_id=follow.pk)

    # someone else cannot touch it
    with pytest.raises(FollowNotFound):
        services.follow_mark_seen(owner=other_reader, follow_id=follow.pk)

    services.follow_mark_seen(owner=reader, follow_id=follow.pk)
    [view] = selectors.follows_list(user=reader)
    assert view.new_count == 0 and len(view.earlier) == 1
    assert selectors.follow_news(user=reader).total == 0

    services.follow_delete(owner=reader, follow_id=follow.pk)
    assert not Follow.objects.exists() and not FollowItem.objects.exists()


def test_a_follow_of_filters_only_lists_the_newest_items(reader: Any, pricing: dict[str, Any]) -> None:
    follow = services.follow_create(owner=reader, filters={"content_type": "checklist"})
    assert follow.label == "content_type: checklist" and follow.shown == {}

    checklist = publish("Bid checklist", "Before you submit.", content_type="checklist")
    services.follow_run(follow_id=follow.pk)

    assert _entries(follow) == [("new", checklist.pk, 1)]


def test_the_header_count_is_one_query_and_cached(
    reader: Any, pricing: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    follow = services.follow_create(owner=reader, query="pricing policy")
    publish("Pricing policy for frameworks", "The pricing policy for frameworks.")
    services.follow_run(follow_id=follow.pk)
    reader = get_user_model().objects.get(pk=reader.pk)

    with django_assert_max_num_queries(2):  # the reader's groups, then one grouped count
        assert selectors.follow_news(user=reader).total == 1
    with django_assert_max_num_queries(0):
        assert selectors.follow_news(user=reader).total == 1


def test_the_follows_page_reads_in_a_fixed_number_of_queries(
    reader: Any, pricing: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    for n in range(5):
        services.follow_create(owner=reader, query=f"pricing policy {n}")
    publish("Pricing policy for frameworks", "The pricing policy for frameworks.")
    services.follows_run_all()
    reader = get_user_model().objects.get(pk=reader.pk)

    with django_assert_max_num_queries(3):
        views = selectors.follows_list(user=reader)
    assert len(views) == 5


@pytest.mark.django_db(transaction=True)
def test_a_second_run_of_a_follow_in_progress_skips_it(reader: Any, pricing: dict[str, Any]) -> None:
    # given a follow whose row another run holds
    follow = services.follow_create(owner=reader, query="pricing policy")
    publish("Pricing policy for frameworks", "The pricing policy for frameworks.")
    outcomes: list[Any] = []

    def other_run() -> None:
        try:
            outcomes.append(services.follow_run(follow_id=follow.pk))
        finally:
            connection.close()

    # when a second run starts while the first holds the lock
    with transaction.atomic():
        Follow.objects.select_for_update().get(pk=follow.pk)
        thread = threading.Thread(target=other_run)
        thread.start()
        thread.join(timeout=30)

    # then it skipped without recording anything, and a later run records the item once
    assert outcomes[0].status == "locked"
    assert not FollowItem.objects.filter(follow=follow).exists()
    assert services.follow_run(follow_id=follow.pk).new == 1
    assert FollowItem.objects.filter(follow=follow).count() == 1


def test_a_follow_of_a_search_nothing_matches_records_nothing(
    reader: Any, pricing: dict[str, Any], settings: Any
) -> None:
    # given the product's floor (the site's), and a follow of a word no item holds
    settings.FOLLOW_THRESHOLD = 0.35
    follow = services.follow_create(owner=reader, query="zanzibarquokka")
    assert follow.shown == {}  # the nearest items are not what the search shows
    # when unrelated items are published and the follow runs
    publish("Catering menu", "Lunch options for the kick-off.")
    outcome = services.follow_run(follow_id=follow.pk)
    # then nothing is reported as new
    assert outcome.new == 0 and _entries(follow) == []
