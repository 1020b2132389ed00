"""Recompute quality scores now (the same service as the daily 04:00 UTC beat job)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from search.models import ContentItem
from search.services import jobs, quality

from ._options import item_ids_option
from ._progress import progress_bar


class Command(BaseCommand):
    help = "Recompute every item's quality score and breakdown (freshness, completeness, cadence penalty)."

    def add_arguments(self, parser: Any) -> None:
        item_ids_option(parser, help="only this item id (repeatable)")

    def handle(self, *args: Any, **opts: Any) -> None:
        item_ids = opts["item_ids"]
        total = len(item_ids) if item_ids else ContentItem.objects.count()
        now = timezone.now()
        with progress_bar(self, total=total, desc="quality") as update:

            def _run() -> jobs.JobResult:
                written = quality.quality_scores_update(now=now, item_ids=item_ids, progress=update)
                return jobs.JobResult(items_touched=written, detail={"written": written, "items": total})

            outcome = jobs.job_execute(job=jobs.QUALITY_SCORES, run=_run)
        if outcome.status == "busy":
            raise CommandError(
                "Quality scoring is running in another process; try again when it has finished."
            )
        self.stdout.write(f"{outcome.items_touched} of {total} item(s) changed score (run {outcome.run_id})")
