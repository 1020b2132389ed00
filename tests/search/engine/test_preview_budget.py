"""search.engine.preview._within_budget: a preview step bounded by statement_timeout, in one round trip when the
connection is in autocommit (every request), and never leaving its settings behind."""

from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from search.engine import preview as selectors
from search.engine.sql import Fragment

pytestmark = pytest.mark.django_db(transaction=True)  # autocommit, as in a request


def _show(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SHOW {name}")
        return cursor.fetchone()[0]


def test_a_step_within_its_budget_returns_its_rows_in_one_round_trip_with_its_settings_applied() -> None:
    # given: the session's own values
    timeout_before, bitmap_before = _show("statement_timeout"), _show("enable_bitmapscan")
    # when: a step with a budget and a planner setting
    with CaptureQueriesContext(connection) as queries:
        rows = selectors._within_budget(
            Fragment("SELECT current_setting('statement_timeout'), current_setting('enable_bitmapscan'), %s", ("x",)),
            250,
            setting=("enable_bitmapscan", "off"),
        )
    # then: the statement ran under the budget and the setting, in one round trip
    assert rows == [("250ms", "off", "x")]
    assert len(queries) == 1
    # and both settings are back as they were for the next statement
    assert (_show("statement_timeout"), _show("enable_bitmapscan")) == (timeout_before, bitmap_before)


def test_a_step_past_its_budget_is_cancelled_and_the_connection_stays_usable() -> None:
    timeout_before = _show("statement_timeout")
    # when: the statement takes longer than its budget
    rows = selectors._within_budget(Fragment("SELECT pg_sleep(1)"), 30)
    # then: None (cut short), and the session is unchanged and usable
    assert rows is None
    assert _show("statement_timeout") == timeout_before
    assert selectors._within_budget(Fragment("SELECT 1"), 250) == [(1,)]


def test_inside_a_callers_transaction_the_budget_is_restored_before_the_transaction_goes_on() -> None:
    with transaction.atomic():
        before = _show("statement_timeout")
        assert selectors._within_budget(Fragment("SELECT 2"), 250, setting=("enable_bitmapscan", "off")) == [(2,)]
        assert selectors._within_budget(Fragment("SELECT pg_sleep(1)"), 30) is None
        # then: the caller's transaction still works and has its own settings
        assert (_show("statement_timeout"), _show("enable_bitmapscan")) == (before, "on")


def test_other_errors_are_raised_not_taken_for_a_spent_budget() -> None:
    from django.db import ProgrammingError

    with pytest.raises(ProgrammingError):
        selectors._within_budget(Fragment("SELECT no_such_column FROM search_chunk"), 250)
    assert selectors._within_budget(Fragment("SELECT 3"), 250) == [(3,)]


def test_only_plain_setting_names_and_values_are_accepted(monkeypatch: Any) -> None:
    with pytest.raises(ValueError, match="not a PostgreSQL setting"):
        selectors._within_budget(Fragment("SELECT 1"), 250, setting=("enable_bitmapscan; DROP TABLE x", "off"))


def test_a_budget_running_out_as_its_statement_ends_never_cancels_the_next_statement() -> None:
    # given: steps that end just as their budget does. The timer can fire after the statement's last
    # interrupt check; PostgreSQL then cancels whatever the connection runs next (seen as 503s on the
    # preview under load). The race is rare (about 1 in 1,500 such steps here), so this tries 1,000.
    failures = 0
    errors = []
    for attempt in range(1000):
        selectors._within_budget(Fragment("SELECT pg_sleep(%s)", (0.004 + (attempt % 5) * 0.0005,)), 5)
        # then: a statement outside any budget right after it always runs
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        except Exception as exc:  # noqa: BLE001 - counted, asserted below
            failures += 1
            errors.append(repr(exc))
    assert failures == 0, f"{failures} of 1000 next statements cancelled: {errors[:3]}"
