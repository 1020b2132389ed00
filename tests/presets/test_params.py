"""Normalisation of preset parameters against the engine's filters (browse's URL vocabulary)."""

from __future__ import annotations

from datetime import date

import pytest
from django.http import QueryDict

from presets.errors import PresetParamsInvalid
from presets.params import (
    FILTER_KINDS,
    apply_params,
    filters_from_params,
    normalize_params,
    params_identity,
    query_items,
)
from search.filter_params import FILTER_PARAMS
from search.types import SearchFilters


def test_filter_names_are_the_browse_url_filters() -> None:
    # given / when
    names = set(FILTER_KINDS)

    # then
    assert names == set(FILTER_PARAMS)
    assert FILTER_KINDS["content_type"] == "multi"
    assert FILTER_KINDS["include_qa"] == "bool"
    assert FILTER_KINDS["freshness"] == "int"
    assert FILTER_KINDS["date_from"] == "date"


def test_sort_order_cursor_q_and_from_bid_are_dropped_and_keys_sorted() -> None:
    # given
    raw = {
        "sort": "title",
        "q": "pricing",
        "order": "asc",
        "cursor": "abc",
        "from_bid": "BID-1",
        "layer": "core",
        "domain": ["pricing"],
    }

    # when
    params = normalize_params(raw)

    # then
    assert params == {"domain": ["pricing"], "layer": ["core"]}
    assert list(params) == ["domain", "layer"]


def test_values_are_canonical_deduplicated_and_defaults_dropped() -> None:
    # given: a query string as the browse page writes it
    raw = QueryDict(
        "content_type=policy&content_type=Guide&content_type=guide,qa&content_type=&include_qa=1"
        "&include_superseded=0&overdue_review=no&freshness=+30&date_from=2025-01-31&language=fr"
    )

    # when
    params = normalize_params(raw)

    # then
    assert params == {
        "content_type": ["Guide", "policy", "qa"],
        "date_from": "2025-01-31",
        "freshness": "30",
        "language": "fr",
        "overdue_review": "0",
    }


def test_same_filters_written_differently_normalise_equal() -> None:
    # given
    a = {"content_type": ["qa", "policy"], "include_qa": "on", "unread_only": "true"}
    b = QueryDict("unread_only=1&content_type=policy,qa&sort=newest")

    # when / then
    assert normalize_params(a) == normalize_params(b)


def test_a_repeated_boolean_keeps_its_last_value_like_the_browse_form() -> None:
    # given: a hidden include_qa=0 followed by the checked checkbox
    raw = QueryDict("include_qa=0&include_qa=1&domain=pricing")

    # when / then
    assert normalize_params(raw) == {"domain": ["pricing"]}


def test_json_booleans_and_integers_are_accepted() -> None:
    # given / when
    params = normalize_params({"unread_only": True, "review_due_within_days": 14, "include_qa": False})

    # then
    assert params == {"include_qa": "0", "review_due_within_days": "14", "unread_only": "1"}


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"colour": "red"}, "params.colour"),
        ({"freshness_days": "3"}, "params.freshness_days"),
        ({"freshness": "0"}, "params.freshness"),
        ({"freshness": "soon"}, "params.freshness"),
        ({"include_qa": "maybe"}, "params.include_qa"),
        ({"date_to": "31/01/2025"}, "params.date_to"),
        ({"date_to": "2025-13-01"}, "params.date_to"),
        ({"language": "x" * 9}, "params.language"),
        ({"domain": ["x" * 201]}, "params.domain"),
        ({"domain": [f"d{i}" for i in range(21)]}, "params.domain"),
        ({"domain": ["x" * 121]}, "params.domain"),
        ({"review_due_within_days": "366"}, "params.review_due_within_days"),
    ],
)
def test_invalid_values_are_refused_naming_the_field(raw: dict[str, object], field: str) -> None:
    # when
    with pytest.raises(PresetParamsInvalid) as caught:
        normalize_params(raw)

    # then
    assert caught.value.field == field
    assert field.removeprefix("params.") in caught.value.message


def test_dates_in_the_wrong_order_are_refused() -> None:
    # when
    with pytest.raises(PresetParamsInvalid) as caught:
        normalize_params({"date_from": "2025-02-01", "date_to": "2025-01-01"})

    # then: the message names both days, in the words of the one filter schema (search.filters)
    assert caught.value.field == "params.date_to"
    assert caught.value.message == (
        "date_to (2025-01-01) is before the start date (2025-02-01); send an end date on or after it."
    )


def test_filters_from_params_builds_engine_filters() -> None:
    # given / when
    filters = filters_from_params({"content_type": ["qa"], "date_from": "2025-01-01", "freshness": "90"})

    # then
    assert filters == SearchFilters(content_type=("qa",), date_from=date(2025, 1, 1), freshness_days=90)


def test_identity_ignores_case_of_list_values() -> None:
    # when / then
    assert params_identity({"domain": ["Security"]}) == params_identity({"domain": ["security"]})
    assert params_identity({"domain": ["a"]}) != params_identity({"layer": ["a"]})


def test_apply_keeps_query_and_sticky_from_bid_and_replaces_filters() -> None:
    # given
    current = QueryDict("q=tender&from_bid=BID-7&domain=pricing&cursor=xyz&sort=title")

    # when
    applied = apply_params({"content_type": ["case_study", "qa"]}, current)

    # then
    assert applied == {
        "content_type": ["case_study", "qa"],
        "from_bid": ["BID-7"],
        "q": ["tender"],
        "sort": ["title"],
    }


def test_clearing_keeps_query_and_from_bid_only() -> None:
    # given
    current = {"q": "tender", "from_bid": "BID-7", "domain": ["pricing"], "include_qa": "0"}

    # when
    cleared = apply_params({}, current)

    # then
    assert cleared == {"from_bid": ["BID-7"], "q": ["tender"]}


def test_query_items_repeat_multi_valued_keys() -> None:
    # given / when
    items = query_items({"domain": ["a", "b"], "include_qa": "0"})

    # then
    assert items == [("domain", "a"), ("domain", "b"), ("include_qa", "0")]
