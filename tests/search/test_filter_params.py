"""search/filter_params.py: URL parameters ⇄ SearchFilters."""

from __future__ import annotations

from datetime import date

import pytest
from django.http import QueryDict

from search.errors import InvalidQuery
from search.filter_params import FILTER_PARAMS, filters_from_params, has_filters, params_from_filters
from search.types import SearchFilters


def test_list_parameters_repeat_or_use_commas() -> None:
    # when
    filters = filters_from_params(QueryDict("domain=pricing&domain=compliance,security&content_type=qa&q=x"))
    # then
    assert filters.domain == ("pricing", "compliance", "security")
    assert filters.content_type == ("qa",)


def test_the_last_boolean_wins_so_a_hidden_default_and_a_checkbox_work_together() -> None:
    assert filters_from_params(QueryDict("include_qa=0&include_qa=1")).include_qa is True
    assert filters_from_params(QueryDict("include_qa=0")).include_qa is False
    assert filters_from_params(QueryDict("unread_only=on&include_superseded=true")).unread_only is True


def test_scalars_dates_and_freshness() -> None:
    # when
    filters = filters_from_params(
        QueryDict("date_from=2025-01-01&date_to=2025-12-31&freshness=30&language=fr&overdue_review=1"
                  "&review_due_within_days=14")
    )
    # then
    assert filters.date_from == date(2025, 1, 1) and filters.date_to == date(2025, 12, 31)
    assert filters.freshness_days == 30 and filters.language == "fr"
    assert filters.overdue_review is True and filters.review_due_within_days == 14


def test_blank_values_mean_unset() -> None:
    assert filters_from_params(QueryDict("domain=&freshness=&date_from=&subtopic=")) == SearchFilters()


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("date_from=2025-13-01", "date_from"),
        ("freshness=0", "freshness"),
        ("freshness=abc", "freshness"),
        ("include_qa=maybe", "include_qa"),
        ("review_due_within_days=400", "review_due_within_days"),
        ("date_from=2025-02-01&date_to=2025-01-01", "date_to"),
    ],
)
def test_a_bad_value_names_its_parameter(query: str, field: str) -> None:
    with pytest.raises(InvalidQuery) as err:
        filters_from_params(QueryDict(query))
    assert err.value.field == field
    assert field in err.value.message


def test_strict_mode_rejects_unknown_keys_and_names_them() -> None:
    # given: a JSON filters object
    with pytest.raises(InvalidQuery) as err:
        filters_from_params({"domian": "pricing"}, strict=True)
    # then
    assert err.value.field == "domian"
    assert "unknown filter" in err.value.message


def test_json_objects_accept_lists_strings_and_booleans() -> None:
    filters = filters_from_params({"domain": ["pricing", "legal"], "content_type": "qa", "include_qa": False},
                                  strict=True)
    assert filters.domain == ("pricing", "legal") and filters.content_type == ("qa",)
    assert filters.include_qa is False


def test_too_many_values_are_refused() -> None:
    with pytest.raises(InvalidQuery) as err:
        filters_from_params({"domain": [f"d{i}" for i in range(21)]})
    assert err.value.field == "domain"


def test_repeats_blanks_and_spaces_from_commas_and_repeated_keys_are_normalised_by_the_schema() -> None:
    # when 20 distinct values arrive as 41 pieces (commas, a repeated key, blanks, spaces, repeats)
    pieces = ",".join(f" d{i} " for i in range(20))
    filters = filters_from_params(QueryDict(f"domain={pieces},,&domain={pieces}&domain="))
    # then they are the schema's 20 values, in order
    assert filters.domain == tuple(f"d{i}" for i in range(20))


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("freshness=4000", "freshness must be between 1 and 3650 (got 4000)."),
        ("domain=" + "x" * 121, "domain has a value 121 characters long; shorten it to 120 or fewer."),
        ("language=english-uk", "language is 10 characters long; send a language code of at most 8 (en, fr, ar)."),
        ("source=a%00b", "source holds a NUL byte or an unpaired surrogate character; remove it and send plain text."),
    ],
)
def test_a_refusal_is_the_schemas_words_under_the_url_parameters_name(query: str, message: str) -> None:
    with pytest.raises(InvalidQuery) as err:
        filters_from_params(QueryDict(query))
    assert err.value.message == message
    assert err.value.field == message.split()[0]


def test_params_round_trip_and_defaults_are_left_out() -> None:
    # given
    filters = SearchFilters(domain=("pricing",), include_qa=False, date_from=date(2025, 1, 2), freshness_days=90,
                            unread_only=True, include_superseded=True, overdue_review=False)
    # when
    params = params_from_filters(filters)
    # then
    assert params["include_qa"] == ["0"] and params["freshness"] == ["90"]
    assert set(params) <= set(FILTER_PARAMS)
    assert filters_from_params(params) == filters
    assert params_from_filters(SearchFilters()) == {}


def test_has_filters() -> None:
    assert not has_filters(SearchFilters())
    assert has_filters(SearchFilters(include_qa=False))
    assert has_filters(SearchFilters(unread_only=True))


def test_json_values_take_their_url_form_and_list_values_are_unique_ignoring_case() -> None:
    from search.filter_params import json_param_values, unique_list_values

    assert json_param_values([True, False, 30, 2.5, None, "x"]) == ["1", "0", "30", "2.5", "x"]
    assert json_param_values(None) == []
    assert json_param_values("pricing") == ["pricing"]
    assert unique_list_values(["Pricing", "bids", "pricing", "Bids"]) == ["bids", "Pricing"]
