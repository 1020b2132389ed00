"""Run the review-cadence flagger now (the same service as the daily 03:45 UTC beat job)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from search.services import governance, jobs


class Command(BaseCommand):
    help = "Flag items whose review is overdue (next review date past) or due within 30 days."

    def handle(self, *args: Any, **opts: Any) -> None:
        today = timezone.localdate()
        moved: dict[str, int] = {}

        def _run() -> jobs.JobResult:
            moved.update(governance.review_flags_update(today=today))
            return jobs.JobResult(items_touched=sum(moved.values()), detail=moved)

        outcome = jobs.job_execute(job=jobs.REVIEW_FLAGS, run=_run)
        if outcome.status == "busy":
            raise CommandError("The review flagger is running in another process; try again in a minute.")
        counts = governance.review_counts(today=today)
        self.stdout.write(
            f"flags changed: {moved['overdue']} → overdue, {moved['due_soon']} → due soon, "
            f"{moved['ok']} → ok; "
            f"now {counts['overdue']} overdue, {counts['due_soon']} due soon (run {outcome.run_id})"
        )
