"""Celery tasks of the analytics app (adapters: call a service, record the run)."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

QUERYLOG_PURGE = "querylog_purge"


@shared_task(name="analytics.querylog_purge", acks_late=True, ignore_result=True)
def querylog_purge_task() -> str:
    """Daily: delete query-log rows older than ``QUERY_LOG_RETENTION_DAYS`` (idempotent, batched)."""
    from analytics.services import querylog_purge
    from search.services import jobs

    outcome = jobs.job_execute(
        job=QUERYLOG_PURGE,
        run=lambda: jobs.JobResult(items_touched=querylog_purge(now=timezone.now())),
    )
    return outcome.summary()
