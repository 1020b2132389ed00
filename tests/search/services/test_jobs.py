"""Job runs: once per period, recorded outcomes, takeover after a lost worker, one process per job."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from search.models import JobRun
from search.services import jobs
from search.services.jobs import JobResult, daily_period, job_execute


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (datetime(2025, 3, 10, 3, 45, tzinfo=UTC), "2025-03-10"),  # on time
        (datetime(2025, 3, 10, 3, 44, 59, tzinfo=UTC), "2025-03-09"),  # before today's slot
        (datetime(2025, 3, 11, 1, 0, tzinfo=UTC), "2025-03-10"),  # delivered late, next night
        (datetime(2025, 3, 10, 23, 0, tzinfo=timezone.get_fixed_timezone(-300)), "2025-03-11"),  # 04:00 UTC
    ],
)
def test_daily_period_is_the_slot_the_run_belongs_to(now: datetime, expected: str) -> None:
    assert daily_period(now, at=(3, 45)) == expected


@pytest.mark.django_db
def test_a_run_is_recorded_and_its_period_takes_effect_once() -> None:
    # given a job body that counts its calls
    calls = []

    def body() -> JobResult:
        calls.append(1)
        return JobResult(items_touched=7, detail={"overdue": 7})

    # when the same period is delivered twice (two beat processes)
    first = job_execute(job="demo", period="2025-03-10", run=body, task_id="t-1")
    second = job_execute(job="demo", period="2025-03-10", run=body, task_id="t-2")
    next_day = job_execute(job="demo", period="2025-03-11", run=body)

    # then it ran once for that period, and again for the next one
    assert len(calls) == 2
    assert (first.status, second.status, next_day.status) == ("succeeded", "already_done", "succeeded")
    assert second.run_id == first.run_id
    run = JobRun.objects.get(pk=first.run_id)
    assert run.status == JobRun.Status.SUCCEEDED
    assert run.items_touched == 7 and run.detail == {"overdue": 7} and run.task_id == "t-1"
    assert run.started_at <= run.finished_at and run.attempts == 1 and run.host
    assert "already done" in second.summary()


@pytest.mark.django_db
def test_a_failure_is_recorded_then_the_retry_takes_the_period_over() -> None:
    # given a body that fails once
    attempts = []

    def flaky() -> JobResult:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("provider down")
        return JobResult(items_touched=3)

    # when
    with pytest.raises(RuntimeError):
        job_execute(job="flaky", period="p1", run=flaky)
    failed = JobRun.objects.get(job="flaky")
    outcome = job_execute(job="flaky", period="p1", run=flaky)

    # then the failure was recorded, and the retry reused the claim
    assert failed.status == JobRun.Status.FAILED and "RuntimeError: provider down" in failed.error
    run = JobRun.objects.get(job="flaky")
    assert outcome.ran and run.pk == failed.pk
    assert run.status == JobRun.Status.SUCCEEDED and run.attempts == 2 and run.error == ""
    assert run.detail["history"][0]["status"] == "failed"


@pytest.mark.django_db
def test_a_period_left_running_by_a_killed_worker_is_taken_over() -> None:
    # given a claim whose process died (its row says running; nobody holds the lock)
    dead = JobRun.objects.create(
        job="quality_scores", period="2025-03-10", started_at=timezone.now(), host="gone:1"
    )

    # when the message is delivered again
    outcome = job_execute(job="quality_scores", period="2025-03-10", run=lambda: JobResult(items_touched=5))

    # then the rerun finished the period on the same row
    dead.refresh_from_db()
    assert outcome.ran and outcome.run_id == dead.pk
    assert dead.status == JobRun.Status.SUCCEEDED and dead.attempts == 2
    assert dead.detail["history"][0] == {**dead.detail["history"][0], "status": "abandoned", "host": "gone:1"}


@pytest.mark.django_db
def test_ad_hoc_runs_left_running_are_marked_abandoned() -> None:
    # given an ad-hoc run whose worker was killed
    dead = JobRun.objects.create(job="embeddings_backfill", started_at=timezone.now() - timedelta(hours=1))

    # when the next run starts
    outcome = job_execute(job="embeddings_backfill", run=lambda: JobResult(items_touched=2))

    # then
    dead.refresh_from_db()
    assert dead.status == JobRun.Status.ABANDONED and "later run took over" in dead.error
    assert JobRun.objects.get(pk=outcome.run_id).status == JobRun.Status.SUCCEEDED


@pytest.mark.django_db(transaction=True)
def test_two_processes_at_once_run_the_job_once() -> None:
    # given a run in progress, and a second delivery of the same job arriving meanwhile (another thread,
    # so another database connection, as a second beat would give)
    seen: dict[str, object] = {}

    def second_delivery() -> None:
        try:
            seen["outcome"] = job_execute(
                job="review_flags", period="2025-03-10", run=lambda: JobResult(items_touched=99)
            )
            with pytest.raises(jobs.JobBusy):
                job_execute(job="review_flags", run=lambda: JobResult(), if_busy="raise")
            seen["raised"] = True
        finally:
            connection.close()

    def body() -> JobResult:
        thread = threading.Thread(target=second_delivery)
        thread.start()
        thread.join(timeout=30)
        return JobResult(items_touched=1)

    # when
    first = job_execute(job="review_flags", period="2025-03-10", run=body)

    # then the second delivery skipped without touching anything, and only one run exists
    assert first.ran
    assert seen["outcome"].status == "busy" and seen["raised"] is True  # type: ignore[union-attr]
    assert JobRun.objects.filter(job="review_flags").count() == 1
    assert JobRun.objects.get().items_touched == 1
    assert jobs.job_is_running(job="review_flags") is False


@pytest.mark.django_db
def test_old_runs_are_pruned() -> None:
    now = timezone.now()
    JobRun.objects.create(job="a", started_at=now - timedelta(days=200), status=JobRun.Status.SUCCEEDED)
    JobRun.objects.create(job="a", started_at=now - timedelta(days=10), status=JobRun.Status.SUCCEEDED)

    assert jobs.job_runs_prune(now=now) == 1
    assert JobRun.objects.count() == 1
