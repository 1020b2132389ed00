"""The review-cadence flagger's transitions, recording a review, and the admin's governance screens."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from search.models import ContentItem, JobRun, ReviewStatus
from search.services import governance, jobs, quality
from tests.factories import make_item

TODAY = date(2025, 3, 10)


@pytest.mark.parametrize(
    ("offset_days", "expected"),
    [
        (None, ReviewStatus.OK),
        (-400, ReviewStatus.OVERDUE),
        (-1, ReviewStatus.OVERDUE),  # yesterday: overdue
        (0, ReviewStatus.DUE_SOON),  # today: still reviewable on time
        (30, ReviewStatus.DUE_SOON),
        (31, ReviewStatus.OK),
    ],
)
def test_status_for_a_review_date(offset_days: int | None, expected: str) -> None:
    next_review = None if offset_days is None else TODAY + timedelta(days=offset_days)
    assert governance.review_status_for(next_review, TODAY) == expected


def _item(offset: int | None, status: str = ReviewStatus.OK, **fields: object) -> ContentItem:
    return make_item(
        title=f"Item {offset}",
        next_review_date=None if offset is None else TODAY + timedelta(days=offset),
        governance_review_status=status,
        **fields,
    )


@pytest.mark.django_db
def test_flagger_transitions_and_idempotence() -> None:
    # given items whose stored flags are stale
    overdue = _item(-1)
    due_today = _item(0, ReviewStatus.OVERDUE)
    due_soon = _item(30)
    later = _item(31, ReviewStatus.DUE_SOON)
    undated = _item(None, ReviewStatus.OVERDUE)
    already = _item(-5, ReviewStatus.OVERDUE)

    # when
    moved = governance.review_flags_update(today=TODAY)
    again = governance.review_flags_update(today=TODAY)

    # then every flag follows its date, and a second run changes nothing
    status = dict(ContentItem.objects.values_list("pk", "governance_review_status"))
    assert status[overdue.pk] == ReviewStatus.OVERDUE
    assert status[due_today.pk] == ReviewStatus.DUE_SOON
    assert status[due_soon.pk] == ReviewStatus.DUE_SOON
    assert status[later.pk] == ReviewStatus.OK
    assert status[undated.pk] == ReviewStatus.OK
    assert status[already.pk] == ReviewStatus.OVERDUE
    assert moved == {"overdue": 1, "due_soon": 2, "ok": 2}
    assert again == {"overdue": 0, "due_soon": 0, "ok": 0}


@pytest.mark.django_db
def test_flags_move_as_days_pass() -> None:
    # given an item due in 31 days
    item = _item(31)

    # when the flagger runs on the day it enters the window, on its due date, and the day after
    seen = []
    for day in (TODAY, TODAY + timedelta(days=1), TODAY + timedelta(days=31), TODAY + timedelta(days=32)):
        governance.review_flags_update(today=day)
        seen.append(ContentItem.objects.get(pk=item.pk).governance_review_status)

    # then ok → due soon → due soon → overdue
    assert seen == [ReviewStatus.OK, ReviewStatus.DUE_SOON, ReviewStatus.DUE_SOON, ReviewStatus.OVERDUE]


@pytest.mark.django_db
def test_mark_reviewed_moves_the_date_by_the_cadence_and_clears_the_flag() -> None:
    # given an overdue item with a 90-day cadence, scored with its penalty
    now = datetime(2025, 3, 10, 9, 0, tzinfo=UTC)
    item = _item(-20, ReviewStatus.OVERDUE, review_cadence_days=90)
    quality.quality_scores_update(now=now)
    item.refresh_from_db()
    assert item.quality_breakdown["cadence_penalty"] == 25

    # when
    governance.item_mark_reviewed(item=item, now=now)

    # then
    item.refresh_from_db()
    assert item.last_reviewed_at == now
    assert item.next_review_date == TODAY + timedelta(days=90)
    assert item.governance_review_status == ReviewStatus.OK
    assert item.quality_breakdown["cadence_penalty"] == 0
    assert item.quality_score == item.quality_breakdown["base"]


@pytest.mark.django_db
def test_mark_reviewed_without_a_cadence_clears_the_review_date() -> None:
    # given an overdue item with no cadence
    item = _item(-3, ReviewStatus.OVERDUE)

    # when
    governance.item_mark_reviewed(item=item, now=datetime(2025, 3, 10, 9, 0, tzinfo=UTC))

    # then no further review is scheduled and the flag is cleared
    item.refresh_from_db()
    assert item.next_review_date is None
    assert item.governance_review_status == ReviewStatus.OK


@pytest.fixture
def staff_client() -> Client:
    user = User.objects.create_superuser("gov-admin", "gov@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_admin_mark_reviewed_action(staff_client: Client) -> None:
    # given an overdue item
    item = _item(-40, ReviewStatus.OVERDUE, review_cadence_days=30)

    # when staff run the action
    response = staff_client.post(
        "/admin/search/contentitem/", {"action": "mark_reviewed", "_selected_action": [item.pk]}
    )

    # then
    item.refresh_from_db()
    assert response.status_code == 302
    assert item.next_review_date == timezone.localdate() + timedelta(days=30)
    assert item.governance_review_status == ReviewStatus.DUE_SOON  # a 30-day cadence is due soon again


@pytest.mark.django_db
def test_admin_item_page_shows_the_quality_breakdown(staff_client: Client) -> None:
    # given a scored item
    item = make_item(
        title="Scored", summary="A summary.", next_review_date=timezone.localdate() - timedelta(days=3)
    )
    quality.quality_scores_update(now=timezone.now())

    # when
    html = staff_client.get(f"/admin/search/contentitem/{item.pk}/change/").content.decode()

    # then
    assert "Review cadence penalty" in html and "-15.0" in html and "Summary present" in html


@pytest.fixture
def eager_tasks() -> object:
    from config.celery import app

    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


@pytest.mark.django_db
def test_admin_regenerate_summary_action(
    staff_client: Client, django_capture_on_commit_callbacks, settings, eager_tasks: None
) -> None:
    # given an item without a summary, no OpenAI key, and tasks run in-process
    settings.OPENAI_API_KEY = ""
    item = make_item(
        title="Tender pricing",
        body="Pricing a tender needs a clear method for every cost line. "
        "Managers compare each cost line against the budget before the deadline.",
    )

    # when
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            "/admin/search/contentitem/", {"action": "regenerate_summary", "_selected_action": [item.pk]}
        )

    # then a local summary was written and the run recorded
    item.refresh_from_db()
    assert response.status_code == 302
    assert item.live_revision.summary.startswith("Pricing a tender")
    run = JobRun.objects.get(job=jobs.SUMMARIES)
    assert run.status == JobRun.Status.SUCCEEDED and run.items_touched == 1 and run.detail["local"] == 1


@pytest.mark.django_db
def test_admin_lists_job_runs(staff_client: Client) -> None:
    # given a failed run
    JobRun.objects.create(
        job="quality_scores",
        period="2025-03-10",
        status=JobRun.Status.FAILED,
        started_at=timezone.now(),
        error="ValueError: boom\n",
    )

    # when
    html = staff_client.get("/admin/search/jobrun/").content.decode()

    # then
    assert "quality_scores" in html and "ValueError: boom" in html
    assert staff_client.get("/admin/search/jobrun/add/").status_code == 403


@pytest.mark.django_db
def test_flag_reviews_command() -> None:
    # given an overdue item not flagged yet
    from io import StringIO

    from django.core.management import call_command

    item = make_item(title="Late", next_review_date=timezone.localdate() - timedelta(days=2))
    out = StringIO()

    # when
    call_command("flag_reviews", stdout=out)

    # then
    item.refresh_from_db()
    assert item.governance_review_status == ReviewStatus.OVERDUE
    assert "1 → overdue" in out.getvalue() and "now 1 overdue" in out.getvalue()
    assert JobRun.objects.get(job=jobs.REVIEW_FLAGS).period is None  # ad hoc: never blocks the daily claim
