"""Celery tasks of the presets app (adapters: call a service, record the run)."""

from __future__ import annotations

from celery import shared_task

PRESETS_PURGE = "presets_purge"
# A deleted preset can be restored (undo) for this long; after it the daily purge removes it.
PRESET_TOMBSTONE_DAYS = 30


@shared_task(name="presets.purge_deleted", acks_late=True, ignore_result=True)
def presets_purge_task() -> str:
    """Daily: remove presets deleted more than ``PRESET_TOMBSTONE_DAYS`` ago (idempotent)."""
    from presets.services import preset_purge_deleted
    from search.services import jobs

    outcome = jobs.job_execute(
        job=PRESETS_PURGE,
        run=lambda: jobs.JobResult(items_touched=preset_purge_deleted(older_than_days=PRESET_TOMBSTONE_DAYS)),
    )
    return outcome.summary()
