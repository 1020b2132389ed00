"""The quality score: the cadence penalty's tiers and boundaries, the breakdown, the preservation rule."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from search.models import ContentItem
from search.services import quality
from search.services.quality import QualityInputs, cadence_compliance_penalty, quality_compute
from tests.factories import make_item

# Time is frozen by passing ``now``: the function reads no clock.
NOW = datetime(2025, 3, 10, 12, 30, tzinfo=UTC)
TODAY = date(2025, 3, 10)


@pytest.mark.parametrize(
    ("days_overdue", "expected"),
    [
        (-365, 0.0),
        (-31, 0.0),  # 31 days ahead: outside the window
        (-30, 0.0),  # 30 days ahead: the linear ramp starts at 0
        (-15, 10 * 15 / 29),
        (-14, 10 * 16 / 29),
        (-1, 10.0),  # due tomorrow: the ramp ends at 10
        (0, 15.0),  # due today counts as overdue
        (1, 15.0),
        (14, 15.0),
        (15, 25.0),
        (30, 25.0),
        (31, 40.0),
        (400, 40.0),
    ],
)
def test_penalty_tiers_and_boundaries(days_overdue: int, expected: float) -> None:
    # given a next review date `days_overdue` days before today (negative: still ahead)
    next_review = TODAY - timedelta(days=days_overdue)

    # when
    penalty = cadence_compliance_penalty(next_review, NOW)

    # then
    assert penalty == pytest.approx(expected)


def test_penalty_is_linear_inside_the_window() -> None:
    # given dates 30 → 1 days ahead
    penalties = [cadence_compliance_penalty(TODAY + timedelta(days=d), NOW) for d in range(30, 0, -1)]

    # then it grows by the same step each day, from 0 to 10
    steps = {round(b - a, 9) for a, b in zip(penalties, penalties[1:], strict=False)}
    assert steps == {round(10 / 29, 9)}
    assert penalties[0] == 0 and penalties[-1] == pytest.approx(10)


def test_no_date_means_no_penalty() -> None:
    assert cadence_compliance_penalty(None, NOW) == 0


def test_today_is_the_utc_date_of_now() -> None:
    # given a review due on the 11th, and `now` late on the 10th / just after midnight on the 11th (UTC)
    due = date(2025, 3, 11)

    # then late on the 10th it is due tomorrow (ramp: 10), on the 11th it is overdue (15)
    assert cadence_compliance_penalty(due, datetime(2025, 3, 10, 23, 59, tzinfo=UTC)) == pytest.approx(10)
    assert cadence_compliance_penalty(due, datetime(2025, 3, 11, 0, 0, tzinfo=UTC)) == 15


def test_naive_now_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="timezone.now"):
        cadence_compliance_penalty(TODAY, datetime(2025, 3, 10, 12, 0))  # noqa: DTZ001 - the point of the test


def _completeness(breakdown: quality.QualityBreakdown) -> dict[str, float]:
    return {key: breakdown[key] for key in quality.COMPLETENESS_KEYS}  # type: ignore[literal-required]


COMPLETE = QualityInputs(
    updated_at=NOW - timedelta(days=10),
    summary="A summary.",
    keywords=("bids", "pricing", "tender"),
    body_chars=2000,
    author_name="Ana",
    primary_domain="bids",
)


def test_complete_fresh_item_scores_100_with_its_breakdown() -> None:
    # when
    breakdown = quality_compute(COMPLETE, now=NOW)

    # then
    assert breakdown["score"] == 100
    assert breakdown["freshness"] == 40
    assert _completeness(breakdown) == {"summary": 20, "keywords": 15, "body": 15, "author": 5, "domain": 5}
    assert breakdown["cadence_penalty"] == 0
    assert breakdown["days_to_review"] is None
    assert breakdown["as_of"] == "2025-03-10"


def test_each_component_counts() -> None:
    # given an item missing its summary, with one keyword, half the body, updated a year and a half ago
    inputs = QualityInputs(updated_at=NOW - timedelta(days=410), keywords=("x",), body_chars=750)

    # when
    breakdown = quality_compute(inputs, now=NOW)

    # then
    assert breakdown["freshness"] == pytest.approx(40 * (730 - 410) / 640, abs=0.01)
    assert _completeness(breakdown) == {"summary": 0, "keywords": 5, "body": 7.5, "author": 0, "domain": 0}
    assert breakdown["score"] == pytest.approx(breakdown["freshness"] + 12.5, abs=0.01)


def test_review_freshens_an_old_item() -> None:
    # given an old text reviewed last week
    inputs = QualityInputs(updated_at=NOW - timedelta(days=1000), last_reviewed_at=NOW - timedelta(days=7))

    # then freshness counts the review
    assert quality_compute(inputs, now=NOW)["freshness"] == 40


def test_penalty_is_subtracted_and_the_score_never_goes_negative() -> None:
    # given a complete item 20 days overdue, and an empty one 40 days overdue
    late = QualityInputs(**{**COMPLETE.__dict__, "next_review_date": TODAY - timedelta(days=20)})
    empty = QualityInputs(next_review_date=TODAY - timedelta(days=40))

    # then
    assert quality_compute(late, now=NOW)["score"] == 75
    assert quality_compute(late, now=NOW)["days_to_review"] == -20
    assert quality_compute(empty, now=NOW)["score"] == 0


def test_preservation_rule_no_review_date_scores_as_without_the_penalty() -> None:
    # given the same item without a review date, and with one far away (no penalty either)
    without = quality_compute(COMPLETE, now=NOW)
    far = quality_compute(
        QualityInputs(**{**COMPLETE.__dict__, "next_review_date": TODAY + timedelta(days=90)}), now=NOW
    )

    # then the score is exactly the base score
    assert without["score"] == without["base"] == far["score"]


@settings(max_examples=60, deadline=None)
@given(
    age_days=st.integers(min_value=0, max_value=2000),
    summary=st.sampled_from(["", "A summary."]),
    keywords=st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=5),
    body_chars=st.integers(min_value=0, max_value=5000),
    author=st.sampled_from(["", "Ana"]),
    domain=st.sampled_from(["", "bids"]),
)
def test_preservation_rule_holds_for_any_item(
    age_days: int, summary: str, keywords: list[str], body_chars: int, author: str, domain: str
) -> None:
    # given any item without a review date
    inputs = QualityInputs(
        updated_at=NOW - timedelta(days=age_days),
        summary=summary,
        keywords=keywords,
        body_chars=body_chars,
        author_name=author,
        primary_domain=domain,
    )

    # when
    breakdown = quality_compute(inputs, now=NOW)

    # then its score is its freshness plus completeness, untouched by the penalty
    expected = round(breakdown["freshness"] + sum(_completeness(breakdown).values()), 2)
    assert breakdown["cadence_penalty"] == 0
    assert breakdown["score"] == pytest.approx(expected, abs=0.011)
    assert 0 <= breakdown["score"] <= 100


def test_breakdown_rows_for_display() -> None:
    late = QualityInputs(**{**COMPLETE.__dict__, "next_review_date": TODAY})
    rows = dict(quality.breakdown_rows(dict(quality_compute(late, now=NOW))))

    assert rows["Summary present"] == 20
    assert rows["Review cadence penalty"] == -15
    assert quality.breakdown_rows({}) == []


@pytest.mark.django_db
def test_scores_are_stored_on_items_and_rerunning_writes_nothing() -> None:
    # given two items: one complete and overdue, one bare without a review date
    now = datetime.now(UTC)
    overdue = make_item(
        title="Overdue",
        body="x" * 1600,
        summary="Sum.",
        ai_keywords=["a", "b", "c"],
        author_name="Ana",
        primary_domain="bids",
        next_review_date=now.date() - timedelta(days=3),
    )
    bare = make_item(title="Bare", body="short")

    # when
    written = quality.quality_scores_update(now=now)
    again = quality.quality_scores_update(now=now)

    # then
    overdue.refresh_from_db()
    bare.refresh_from_db()
    assert written == 2 and again == 0
    assert overdue.quality_score == 85 and overdue.quality_breakdown["cadence_penalty"] == 15
    expected_bare = quality_compute(quality.item_quality_inputs(item_id=bare.pk), now=now)
    assert bare.quality_score == expected_bare["base"] == bare.quality_breakdown["score"]


@pytest.mark.django_db
def test_scores_use_the_live_revision_and_can_target_items() -> None:
    # given a published item without summary and a newer draft that has one
    from search.services import content

    now = datetime.now(UTC)
    item = make_item(title="T", body="body")
    other = make_item(title="Other", body="body")
    content.item_save_revision(item=item, title="T", body="body", summary="Draft summary.", publish=False)

    # when only the first item is scored
    quality.quality_scores_update(now=now, item_ids=[item.pk])

    # then the live text counts (no summary), and the other item was not touched
    item.refresh_from_db()
    assert item.quality_breakdown["summary"] == 0
    assert ContentItem.objects.get(pk=other.pk).quality_breakdown == {}


@pytest.mark.django_db
def test_score_quality_command() -> None:
    # given two unscored items
    from io import StringIO

    from django.core.management import call_command

    from search.models import JobRun

    first = make_item(title="One")
    make_item(title="Two")
    out, err = StringIO(), StringIO()

    # when only the first is asked for, then all
    call_command("score_quality", "--item", str(first.pk), stdout=out, stderr=err)
    call_command("score_quality", stdout=out, stderr=StringIO())

    # then
    assert "1 of 1 item(s) changed score" in out.getvalue()
    assert "1 of 2 item(s) changed score" in out.getvalue()
    assert "quality" in err.getvalue()  # the progress bar
    assert JobRun.objects.filter(job="quality_scores", status="succeeded").count() == 2
