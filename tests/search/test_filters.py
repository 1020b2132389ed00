"""search/filters.py: the one filter schema (limits, normalisation, the words of each refusal)."""

from __future__ import annotations

import dataclasses
from datetime import date
from typing import Any

import pytest

from search.errors import InvalidQuery
from search.filters import (
    LIST_FILTERS,
    MAX_FRESHNESS_DAYS,
    MAX_LANGUAGE_CHARS,
    MAX_REVIEW_DUE_DAYS,
    MAX_VALUE_CHARS,
    MAX_VALUES,
    InvalidFilter,
)
from search.types import RetrievalQuery, SearchFilters


def refusal(**values: Any) -> InvalidQuery:
    with pytest.raises(InvalidQuery) as caught:
        SearchFilters(**values)
    return caught.value


def test_the_limits_are_the_ones_every_surface_documents() -> None:
    assert (MAX_VALUES, MAX_VALUE_CHARS, MAX_LANGUAGE_CHARS) == (20, 120, 8)
    assert (MAX_FRESHNESS_DAYS, MAX_REVIEW_DUE_DAYS) == (3650, 365)


def test_values_are_stripped_blanks_dropped_and_repeats_dropped_in_order() -> None:
    # when
    filters = SearchFilters(domain=(" pricing ", "", "legal", "pricing", "  "), language="  fr ")
    # then
    assert filters.domain == ("pricing", "legal")
    assert filters.language == "fr"
    assert SearchFilters(language="   ") == SearchFilters() == SearchFilters(domain=("", " "))


def test_lists_and_a_single_string_become_tuples() -> None:
    filters = SearchFilters(content_type=["guide", "qa"], layer="practice")  # type: ignore[arg-type]
    assert filters.content_type == ("guide", "qa") and filters.layer == ("practice",)
    assert hash(filters) == hash(SearchFilters(content_type=("guide", "qa"), layer=("practice",)))


@pytest.mark.parametrize("name", LIST_FILTERS)
def test_every_list_filter_takes_20_values_and_refuses_21(name: str) -> None:
    # given: 20 distinct values are fine, and repeats do not count
    assert len(getattr(SearchFilters(**{name: tuple(f"v{i}" for i in range(20)) * 2}), name)) == 20
    # when
    error = refusal(**{name: tuple(f"v{i}" for i in range(21))})
    # then
    assert error.field == name
    assert error.message == f"{name} has 21 values; send at most 20."


def test_a_value_of_121_characters_is_refused_120_is_fine() -> None:
    assert SearchFilters(author=("a" * 120,)).author == ("a" * 120,)
    error = refusal(author=("ok", "a" * 121))
    assert error.field == "author"
    assert error.message == "author has a value 121 characters long; shorten it to 120 or fewer."


def test_a_language_code_is_at_most_8_characters() -> None:
    assert SearchFilters(language="zh-Hant").language == "zh-Hant"
    error = refusal(language="x" * 9)
    assert error.field == "language"
    assert error.message == "language is 9 characters long; send a language code of at most 8 (en, fr, ar)."


@pytest.mark.parametrize(
    ("name", "value", "high"),
    [
        ("freshness_days", 0, 3650),
        ("freshness_days", 4000, 3650),
        ("review_due_within_days", 0, 365),
        ("review_due_within_days", 400, 365),
    ],
)
def test_day_counts_outside_their_range_are_refused(name: str, value: int, high: int) -> None:
    # given: both ends of the range are fine
    assert getattr(SearchFilters(**{name: 1}), name) == 1
    assert getattr(SearchFilters(**{name: high}), name) == high
    # when
    error = refusal(**{name: value})
    # then
    assert error.field == name
    assert error.message == f"{name} must be between 1 and {high} (got {value})."


def test_a_day_count_must_be_a_whole_number() -> None:
    assert refusal(freshness_days="30").message == "freshness_days must be a whole number of days."
    assert refusal(review_due_within_days=True).field == "review_due_within_days"


def test_date_to_before_date_from_is_refused_the_same_day_is_fine() -> None:
    # given
    same = SearchFilters(date_from=date(2025, 2, 1), date_to=date(2025, 2, 1))
    assert same.date_to == date(2025, 2, 1)
    # when
    error = refusal(date_from=date(2025, 2, 1), date_to=date(2025, 1, 1))
    # then
    assert error.field == "date_to"
    assert error.message == (
        "date_to (2025-01-01) is before the start date (2025-02-01); send an end date on or after it."
    )


@pytest.mark.parametrize("text", ["a\x00b", "\ud800", "x\udfff"])
@pytest.mark.parametrize("name", ["domain", "source", "language"])
def test_a_nul_or_a_lone_surrogate_is_refused_in_any_text(name: str, text: str) -> None:
    error = refusal(**{name: text if name == "language" else (text,)})
    assert error.field == name
    assert error.message == (
        f"{name} holds a NUL byte or an unpaired surrogate character; remove it and send plain text."
    )


def test_a_non_text_value_is_refused_not_crashed() -> None:
    assert refusal(domain=(1,)).message == "domain must hold text values only."
    assert refusal(language=3).field == "language"
    assert refusal(date_from="2025-01-01").message == "date_from must be a day (YYYY-MM-DD)."


def test_a_refusal_can_be_renamed_by_a_surface_with_the_same_words() -> None:
    # given
    error = refusal(content_type=tuple(f"t{i}" for i in range(30)))
    assert isinstance(error, InvalidFilter)
    # when
    renamed = error.at("filter.contentType")
    # then
    assert renamed.field == "filter.contentType"
    assert renamed.message == "filter.contentType has 30 values; send at most 20."
    assert renamed.detail == error.detail and renamed.code == "invalid_query"


def test_replace_checks_again() -> None:
    with pytest.raises(InvalidQuery):
        dataclasses.replace(SearchFilters(), review_due_within_days=366)


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"threshold": 1.5}, "threshold"),
        ({"granularity": "page"}, "granularity"),
        ({"mode": "fuzzy"}, "mode"),
        ({"corpus": "drafts"}, "corpus"),
    ],
)
def test_a_retrieval_query_checks_itself_when_built(values: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidQuery) as caught:
        RetrievalQuery(text="x", **values)
    assert caught.value.field == field
    assert caught.value.message.startswith(field)


def test_changed_since_is_an_aware_time_kept_in_utc() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    # ISO text with Z or an offset, or an aware datetime: all kept as UTC
    assert SearchFilters(changed_since="2025-01-31T09:00:00Z").changed_since == datetime(2025, 1, 31, 9, tzinfo=UTC)
    plus_one = SearchFilters(changed_since="2025-01-31T10:00:00+01:00").changed_since
    assert plus_one == datetime(2025, 1, 31, 9, tzinfo=UTC) and plus_one.tzinfo is UTC
    aware = datetime(2025, 1, 31, 12, tzinfo=timezone(timedelta(hours=3)))
    assert SearchFilters(changed_since=aware).changed_since == datetime(2025, 1, 31, 9, tzinfo=UTC)
    assert SearchFilters(changed_since="  ").changed_since is None

    # refused in the schema's words
    assert refusal(changed_since="last tuesday").message.startswith(
        "changed_since must be an ISO 8601 time with a time zone, e.g. 2025-01-31T09:00:00Z"
    )
    assert refusal(changed_since="2025-01-31T09:00:00").message.startswith("changed_since has no time zone")
    assert refusal(changed_since=datetime(2025, 1, 31)).field == "changed_since"  # noqa: DTZ001 - the naive case
    assert refusal(changed_since=date(2025, 1, 31)).field == "changed_since"
    assert "characters long" in refusal(changed_since="2025" * 20).message


@pytest.mark.django_db
def test_changed_since_keeps_items_updated_at_or_after_it() -> None:
    from datetime import timedelta

    from django.utils import timezone

    from search.models import ContentItem
    from tests.factories import make_item

    now = timezone.now()
    old = make_item(title="Old", updated_at=now - timedelta(days=3))
    new = make_item(title="New", updated_at=now)

    kept = ContentItem.objects.apply_filters(SearchFilters(changed_since=now - timedelta(days=1)))

    assert set(kept.values_list("pk", flat=True)) == {new.pk} and old.pk not in kept.values_list("pk", flat=True)
