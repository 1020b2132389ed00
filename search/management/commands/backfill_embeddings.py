"""Embed chunks that have no vector of the active model (resumable; backs off while the provider fails), here or,
with ``--fan-out``, in batches on every Celery worker while a progress bar follows them."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from search.errors import EmbeddingModelMismatch, EmbeddingUnavailable
from search.services import fanout, jobs, reembed

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

        parser.add_argument(
            "--fan-out",
            action="store_true",
            help="queue the work in batches for the Celery workers (most-read and newest items first) and "
            "follow their progress; safe to interrupt (the workers go on)",
        )
        parser.add_argument(
            "--stall-s",
            type=float,
            default=600.0,
            help="with --fan-out: give up following when no batch finished for this long (default %(default)s)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["attempts"] < 1:
            raise CommandError("--attempts must be at least 1.")
        if opts["fan_out"]:
            self._fan_out(stall_s=max(1.0, opts["stall_s"]))
            return
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

    def _fan_out(self, *, stall_s: float, poll_s: float = 1.0) -> None:
        from search.tasks import embeddings_batch_sender

        try:
            start_pending = fanout.fanout_progress().pending
            queued = fanout.fanout_start(embeddings_batch_sender(None))
        except EmbeddingModelMismatch as exc:
            raise CommandError(exc.message) from exc
        state = fanout.fanout_progress()
        if not queued and not state.batches:
            if state.pending and state.pending == start_pending:
                raise CommandError(
                    f"Could not plan a fan-out ({state.summary()}): the cache (Valkey) keeps its state and did "
                    "not answer. Run this command without --fan-out to embed here."
                )
            self.stdout.write(f"nothing to fan out: {state.summary()}")
            return
        self.stderr.write(("queued " + str(queued) + " batch(es); " if queued else "following the wave in flight: ")
                          + state.summary())
        last_change, last_done = time.monotonic(), -1
        with progress_bar(self, total=start_pending, desc="embed (workers)") as update:
            update(max(0, start_pending - state.pending))
            last_pending = state.pending
            while state.batches:  # until the wave ends (chunks arriving meanwhile go to the next one)
                time.sleep(poll_s)
                state = fanout.fanout_progress()
                if state.pending < last_pending:
                    update(last_pending - state.pending)
                    last_pending = state.pending
                if state.batches_done != last_done:
                    last_done, last_change = state.batches_done, time.monotonic()
                elif time.monotonic() - last_change > stall_s:
                    raise CommandError(
                        f"No batch finished for {stall_s:.0f} s ({state.summary()}). Are Celery workers running "
                        "(`celery -A config worker`)? The batches stay queued; run this again to follow them."
                    )
        left = f"; {state.pending} chunk(s) arrived meanwhile, for the next wave" if state.pending else ""
        self.stdout.write(f"{max(0, start_pending - state.pending)} chunk(s) embedded by the workers{left}")
