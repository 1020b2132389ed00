"""Background job runs: claim a schedule slot once, record each run, take over after a lost worker.

Every job (beat task, ad-hoc task or management command) runs through :func:`job_execute`:

1. **One process per job.** A PostgreSQL session advisory lock keyed by the job name is taken with
   ``pg_try_advisory_lock``. A second process that finds it taken skips (``busy``) or raises
   :class:`JobBusy`, as the caller chooses. The lock belongs to the database connection, so a worker
   that is killed (SIGKILL, OOM, lost host) never leaves it behind.
2. **Once per period.** A scheduled run claims its ``period`` (for a daily job the date of the slot it
   belongs to, see :func:`daily_period`) through the unique (job, period) row of :class:`JobRun`. Once
   that row has succeeded, every later delivery of the same slot (a second beat process, a redelivered
   message, a manual retry) returns ``already done`` without touching anything.
3. **Takeover.** Under the lock nobody else is running the job, so a row still marked ``running`` was
   left by a dead process: it is marked ``abandoned`` (ad-hoc runs) or taken over (the same period,
   ``attempts`` + 1). Jobs are idempotent and commit in batches, so the rerun finishes the work and
   reaches the same final state as an uninterrupted run.

Each run records start, end, items touched, the error (if any) and the host; the admin lists them.

Advisory locks need session-level connections: behind a transaction-pooling PgBouncer, point the
workers at PostgreSQL directly (or use session pooling).
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Any, Literal

from django.db import connection, transaction
from django.utils import timezone

from search.models import JobRun

logger = logging.getLogger(__name__)

# Job names (JobRun.job). One advisory lock per name.
REVIEW_FLAGS = "review_flags"
QUALITY_SCORES = "quality_scores"
INDEX_BUILD = "index_build"
EMBEDDINGS_BACKFILL = "embeddings_backfill"
REEMBED = "reembed"
SUMMARIES = "summaries"
JOB_RUNS_PRUNE = "job_runs_prune"

ERROR_MAX_CHARS = 4000
HISTORY_MAX = 10


class JobBusy(Exception):
    """Another process holds the job's lock. Raised only when the caller asked for ``if_busy="raise"``."""


@dataclass(frozen=True)
class JobResult:
    """What a job's body reports: how many items it touched, plus free-form numbers for the admin."""

    items_touched: int = 0
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobOutcome:
    status: Literal["succeeded", "already_done", "busy"]
    job: str
    period: str | None
    run_id: int | None = None
    items_touched: int = 0
    detail: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ran(self) -> bool:
        return self.status == "succeeded"

    def summary(self) -> str:
        """One line for worker logs and command output."""
        slot = f" [{self.period}]" if self.period else ""
        if self.status == "already_done":
            return f"{self.job}{slot}: already done for this period (run {self.run_id}); nothing changed"
        if self.status == "busy":
            return f"{self.job}{slot}: skipped, another process is running it"
        return f"{self.job}{slot}: {self.items_touched} item(s) touched (run {self.run_id})"


def daily_period(now: datetime, *, at: tuple[int, int]) -> str:
    """The daily slot ``now`` belongs to: the date of the latest ``at`` (hour, minute, UTC) not after ``now``.

    A job scheduled at 03:45 that is delivered at 03:45:02 belongs to today's slot; one delivered late,
    at 01:00 the next day, still belongs to the previous day's slot. Two beat processes therefore
    always compute the same period for the same firing.
    """
    if timezone.is_naive(now):
        raise ValueError("now must be an aware datetime: pass django.utils.timezone.now().")
    utc_now = now.astimezone(UTC)
    slot_today = datetime.combine(utc_now.date(), time(at[0], at[1]), tzinfo=utc_now.tzinfo)
    day = utc_now.date() if utc_now >= slot_today else utc_now.date() - timedelta(days=1)
    return day.isoformat()


def _lock_key(name: str) -> int:
    """A stable signed 64-bit advisory-lock key for a job name."""
    return int.from_bytes(
        hashlib.blake2b(f"kb-job:{name}".encode(), digest_size=8).digest(), "big", signed=True
    )


def _try_lock(key: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        return bool(cursor.fetchone()[0])


def _unlock(key: int) -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
    except Exception:  # noqa: BLE001 - a dead connection has released the lock already
        logger.warning("could not release the job lock %s (the connection is gone, so PostgreSQL has)", key)


def _host() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"[:200]


def _error_text(exc: BaseException) -> str:
    lines = traceback.format_exception_only(type(exc), exc)
    tail = traceback.format_tb(exc.__traceback__)[-3:]
    return ("".join(lines) + "".join(tail))[:ERROR_MAX_CHARS]


def job_is_running(*, job: str) -> bool:
    """Whether some process holds the job's lock right now (for status displays)."""
    key = _lock_key(job)
    if _try_lock(key):
        _unlock(key)
        return False
    return True


def _claim(*, job: str, period: str | None, task_id: str, now: datetime) -> tuple[JobRun, str]:
    """Under the job lock: mark dead runs, then create or take over this run's row.

    Returns (row, "") to run, or (the succeeded row, "already_done") when the period is done.
    """
    host = _host()
    with transaction.atomic():
        stale = JobRun.objects.filter(job=job, status=JobRun.Status.RUNNING)
        if period is not None:
            stale = stale.exclude(period=period)
        stale.update(
            status=JobRun.Status.ABANDONED,
            finished_at=now,
            error="The process running this job stopped before finishing (killed, crashed or lost its host); "
            "a later run took over.",
        )
        if period is None:
            return JobRun.objects.create(job=job, period=None, started_at=now, task_id=task_id, host=host), ""
        row, created = JobRun.objects.select_for_update().get_or_create(
            job=job, period=period, defaults={"started_at": now, "task_id": task_id, "host": host}
        )
        if created:
            return row, ""
        if row.status == JobRun.Status.SUCCEEDED:
            return row, "already_done"
        # Running (its process died: we hold the lock), failed or abandoned: this run takes over.
        history = (
            list(row.detail.get("history", []))[-(HISTORY_MAX - 1) :] if isinstance(row.detail, dict) else []
        )
        history.append(
            {
                "attempt": row.attempts,
                "status": row.status if row.status != JobRun.Status.RUNNING else JobRun.Status.ABANDONED,
                "host": row.host,
                "error": row.error[:500],
                "started_at": row.started_at.isoformat(),
            }
        )
        row.status = JobRun.Status.RUNNING
        row.attempts += 1
        row.started_at = now
        row.finished_at = None
        row.error = ""
        row.task_id = task_id
        row.host = host
        row.detail = {"history": history}
        row.save()
        return row, ""


def job_execute(
    *,
    job: str,
    run: Callable[[], JobResult],
    period: str | None = None,
    task_id: str = "",
    if_busy: Literal["skip", "raise"] = "skip",
) -> JobOutcome:
    """Run ``run`` as job ``job`` (for ``period`` when scheduled), recorded as a :class:`JobRun`.

    Preconditions: called outside a transaction in production (each batch of the job commits on its
    own, so a killed run keeps its progress); ``run`` is idempotent.

    Returns ``succeeded``, ``already_done`` (the period's run already succeeded) or ``busy`` (another
    process holds the lock; with ``if_busy="raise"`` :class:`JobBusy` is raised instead).
    Exceptions from ``run`` are recorded on the row (status ``failed``) and re-raised, so a Celery
    task can retry; the retry takes the same period's row over.
    """
    key = _lock_key(job)
    if not _try_lock(key):
        if if_busy == "raise":
            raise JobBusy(f"The job {job!r} is running in another process; try again when it has finished.")
        logger.info("%s: another process holds the lock; skipping", job)
        return JobOutcome(status="busy", job=job, period=period)
    try:
        row, state = _claim(job=job, period=period, task_id=task_id, now=timezone.now())
        if state == "already_done":
            logger.info("%s [%s]: already done by run %s", job, period, row.pk)
            return JobOutcome(status="already_done", job=job, period=period, run_id=row.pk)
        try:
            result = run()
        except BaseException as exc:
            JobRun.objects.filter(pk=row.pk).update(
                status=JobRun.Status.FAILED, finished_at=timezone.now(), error=_error_text(exc)
            )
            raise
        detail = {**(row.detail or {}), **dict(result.detail)}
        JobRun.objects.filter(pk=row.pk).update(
            status=JobRun.Status.SUCCEEDED,
            finished_at=timezone.now(),
            items_touched=max(0, result.items_touched),
            detail=detail,
            error="",
        )
        return JobOutcome(
            status="succeeded",
            job=job,
            period=period,
            run_id=row.pk,
            items_touched=result.items_touched,
            detail=detail,
        )
    finally:
        _unlock(key)


def job_runs_prune(*, now: datetime, keep_days: int = 180) -> int:
    """Delete finished job runs older than ``keep_days`` (running rows are kept). Returns rows deleted."""
    deleted, _ = (
        JobRun.objects.filter(started_at__lt=now - timedelta(days=keep_days))
        .exclude(status=JobRun.Status.RUNNING)
        .delete()
    )
    return deleted
