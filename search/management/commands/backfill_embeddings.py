"""Embed chunks that have no vector of the active model (resumable; backs off while the provider fails)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from search.errors import EmbeddingModelMismatch, EmbeddingUnavailable
from search.services import jobs, reembed

from ._progress import progress_bar


class Command(BaseCommand):
    help = (
        "Embed current chunks lacking a vector of the active model, in batches. Safe to interrupt and rerun."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--attempts",
            type=int,
            default=reembed.BACKOFF_ATTEMPTS,
            help="consecutive provider failures before giving up (default %(default)s)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["attempts"] < 1:
            raise CommandError("--attempts must be at least 1.")
        try:
            total = reembed.embeddings_pending_count()
            with progress_bar(self, total=total, desc="embed") as update:

                def _run() -> jobs.JobResult:
                    done = reembed.embeddings_backfill_run(progress=update, attempts=opts["attempts"])
                    return jobs.JobResult(items_touched=done, detail={"embedded": done})

                outcome = jobs.job_execute(job=jobs.EMBEDDINGS_BACKFILL, run=_run)
        except EmbeddingModelMismatch as exc:
            raise CommandError(exc.message) from exc
        except EmbeddingUnavailable as exc:
            raise CommandError(
                f"{exc.message} Embedded chunks are kept; run this command again when the provider answers."
            ) from exc
        if outcome.status == "busy":
            raise CommandError(
                "An embedding backfill is running in another process; it will embed these chunks."
            )
        self.stdout.write(f"{outcome.items_touched} chunk(s) embedded (run {outcome.run_id})")
