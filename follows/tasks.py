"""Celery tasks of the follows app (adapters: call a service, record the run).

``follows.run_all`` is delivered by beat every ``FOLLOWS_EVERY_MINUTES`` (config/settings/schedule.py).
``acks_late`` + ``reject_on_worker_lost``: a worker that dies mid-run leaves the message to be delivered
again, and the run is idempotent (each follow is locked, compared with what it has shown and updated in one
transaction), so the redelivery reaches the same state. One run at a time (``search.services.jobs``' lock):
a delivery that finds one running skips.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

FOLLOWS_RUN = "follows_run"


@shared_task(name="follows.run_all", bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def follows_run_all_task(self: Any) -> str:
    """Run every follow as its owner and record what is new (then the e-mail digest, when it is on)."""
    from follows import services
    from search.services import jobs

    def _run() -> jobs.JobResult:
        report = services.follows_run_all()
        return jobs.JobResult(items_touched=report.new + report.changed, detail=report.detail())

    return jobs.job_execute(job=FOLLOWS_RUN, run=_run, task_id=self.request.id or "").summary()
