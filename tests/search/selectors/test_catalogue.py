"""search.selectors.catalogue and .closed: closed placeholders, top domains, filter options, card extras."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.cache import cache

from search.models import ContentItem
from search.principal import ANONYMOUS, Principal, principal_for_user
from search.selectors.catalogue import card_extras, filter_options, top_domains
from search.selectors.closed import closed_placeholders
from search.services.item_reads import item_mark_read
from search.types import SearchFilters
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def closed_corpus() -> dict[str, ContentItem]:
    items = {
        "members": make_item(title="The rate card for members", visibility="signed_in",
                             allow_closed_placeholder=True, primary_domain="pricing"),
        "staff": make_item(title="Rate card for staff", visibility="staff", allow_closed_placeholder=True),
        "legal": make_item(title="Rate card legal", visibility="groups", groups=["legal"],
                           allow_closed_placeholder=True),
        "no_policy": make_item(title="Rate card hidden", visibility="staff"),
        "body_only": make_item(title="Something else", body="rate card", visibility="staff",
                               allow_closed_placeholder=True),
        "public": make_item(title="Rate card public"),
        "draft": make_item(title="Rate card draft", visibility="staff", allow_closed_placeholder=True,
                           publish=False),
    }
    build()
    return items


def titles(found: list[Any]) -> list[str]:
    return sorted(f.title for f in found)


def test_anonymous_sees_titles_of_allowed_unreadable_title_matches(closed_corpus: dict[str, Any]) -> None:
    found = closed_placeholders(principal=ANONYMOUS, text="rate card")
    assert titles(found) == ["Rate card for staff", "Rate card legal", "The rate card for members"]


def test_every_query_word_must_match_the_title_as_written_or_as_a_prefix(closed_corpus: dict[str, Any]) -> None:
    assert titles(closed_placeholders(principal=ANONYMOUS, text="rate cards")) == []
    assert titles(closed_placeholders(principal=ANONYMOUS, text="members ra")) == []  # "ra": too short for a prefix
    assert titles(closed_placeholders(principal=ANONYMOUS, text="memb")) == ["The rate card for members"]


def test_what_a_principal_can_read_is_never_a_placeholder(closed_corpus: dict[str, Any], user: Any) -> None:
    # given: a member of the legal group
    user.groups.add(Group.objects.get(name="legal"))
    # when
    found = closed_placeholders(principal=principal_for_user(user), text="rate card")
    # then
    assert titles(found) == ["Rate card for staff"]
    assert closed_placeholders(principal=Principal(kind="staff", user_id=1, all_content=True), text="rate card") == []


def test_filters_apply_and_empty_queries_find_nothing(closed_corpus: dict[str, Any]) -> None:
    assert titles(closed_placeholders(principal=ANONYMOUS, text="rate card",
                                      filters=SearchFilters(domain=("pricing",)))) == ["The rate card for members"]
    assert closed_placeholders(principal=ANONYMOUS, text="  the ") == []


def test_top_domains_counts_public_live_items_and_is_cached() -> None:
    # given
    for domain, n, visibility in (("pricing", 2, "public"), ("legal", 1, "public"), ("secret", 5, "staff")):
        for i in range(n):
            make_item(title=f"{domain} {i}", primary_domain=domain, visibility=visibility)
    # when
    first = top_domains(limit=3)
    make_item(title="more legal", primary_domain="legal")
    make_item(title="more legal 2", primary_domain="legal")
    cached = top_domains(limit=3)
    cache.clear()
    fresh = top_domains(limit=3)
    # then
    assert [(d.domain, d.count) for d in first] == [("pricing", 2), ("legal", 1)]
    assert cached == first
    assert [(d.domain, d.count) for d in fresh] == [("legal", 3), ("pricing", 2)]


def test_filter_options_only_offer_values_of_readable_items(user: Any) -> None:
    make_item(title="A", primary_domain="pricing", author_name="Ana")
    make_item(title="B", primary_domain="secret", author_name="Zed", visibility="signed_in")
    anonymous = filter_options(principal=ANONYMOUS)
    member = filter_options(principal=principal_for_user(user))
    assert anonymous["domain"] == ["pricing"] and anonymous["author"] == ["Ana"]
    assert member["domain"] == ["pricing", "secret"]


def test_card_extras_in_one_query(staff: Any, django_assert_num_queries: Any) -> None:
    a = make_item(title="A")
    b = make_item(title="B")
    ContentItem.objects.filter(pk=a.pk).update(quality_score=71.5, verified_by=staff)
    with django_assert_num_queries(1):
        extras = card_extras(item_ids=[a.pk, b.pk])
    assert extras[a.pk].verified_by == "editor" and extras[a.pk].quality_score == 71.5
    assert extras[b.pk].verified_by == "" and extras[b.pk].thumbnail_url == ""


def test_item_mark_read_is_idempotent(user: Any) -> None:
    item = make_item(title="A")
    item_mark_read(user_id=user.pk, item_id=item.pk)
    item_mark_read(user_id=user.pk, item_id=item.pk)
    assert item.reads.count() == 1
