"""Move the corpus to the configured embedding model (EMBEDDING_PROVIDER): resumable, with a progress bar.

The same service the worker's ``search.embedding_space_switch`` task runs, in the foreground: the new space
is built beside the one searches use and replaces it atomically when complete.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from search.embeddings.providers import get_provider
from search.errors import EmbeddingUnavailable
from search.models import EmbeddingSpace
from search.services import jobs, reembed

from ._progress import progress_bar


class _StepBars:
    """The steps after the embedding, as the admin names them: a line each, and a bar over the id ranges of
    those that go through the table (putting the vectors in place, emptying the previous ones)."""

    def __init__(self, command: BaseCommand) -> None:
        self.command = command
        self.step = ""
        self.bars = ExitStack()
        self.update: Callable[[int], Any] | None = None
        self.done = 0

    def __call__(self, step: str, done: int, total: int) -> None:
        if step != self.step:
            self.close()
            self.step = step
            if step:
                self.command.stderr.write(f"reembed: {EmbeddingSpace.Step(step).label}")
        if step and total and self.update is None:
            self.update = self.bars.enter_context(progress_bar(self.command, total=total, desc="id ranges"))
        if self.update is not None and done > self.done:
            self.update(done - self.done)
            self.done = done

    def close(self) -> None:
        self.bars.close()
        self.update, self.done = None, 0


class Command(BaseCommand):
    help = (
        "Embed every current chunk with the configured model beside the vectors searches use, then make it "
        "the model the vector lane searches in one transaction (with its HNSW index). Safe to interrupt: "
        "run it again to continue."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--dry-run", action="store_true", help="only say what would be embedded")

    def handle(self, *args: Any, **opts: Any) -> None:
        provider = get_provider()
        active = EmbeddingSpace.objects.filter(active=True).first()
        pending = reembed.reembed_pending_count(provider=provider)
        source = f"{active.model} ({active.dimensions} dims)" if active else "no model"
        self.stdout.write(
            f"from {source} to {provider.name} ({provider.dimensions} dims): {pending} chunk(s) to embed"
        )
        if opts["dry_run"]:
            return
        report: dict[str, Any] = {}
        steps = _StepBars(self)
        try:
            with progress_bar(self, total=pending, desc="reembed") as update:

                def _run() -> jobs.JobResult:
                    report.update(reembed.corpus_reembed(provider=provider, progress=update, on_step=steps))
                    return jobs.JobResult(items_touched=report["embedded"], detail=report)

                try:
                    outcome = jobs.job_execute(job=jobs.REEMBED, run=_run)
                finally:
                    steps.close()
        except EmbeddingUnavailable as exc:
            raise CommandError(
                f"{exc.message} Progress is kept (searches still use the previous model): run "
                "`python manage.py reembed` again to continue."
            ) from exc
        if outcome.status == "busy":
            raise CommandError(
                "reembed is already running in another process (the worker's embedding-space switch, or "
                "another reembed); the admin's Embedding spaces page shows its progress."
            )
        if report["state"] != "active":
            raise CommandError(
                f"{report['embedded']} chunk(s) embedded, "
                f"{report['chunks_done']}/{report['chunks_total']} ready; "
                f"searches still use {report['previous_model']}: chunks kept being written while it tried to "
                "switch. Run `python manage.py reembed` again to continue."
            )
        dropped = f"; dropped {', '.join(report['dropped_indexes'])}" if report["dropped_indexes"] else ""
        self.stdout.write(
            f"{report['embedded']} chunk(s) embedded; the vector lane now searches {report['model']} "
            f"(index {report['index']}){dropped}"
        )
