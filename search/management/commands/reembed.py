"""Move the corpus to the configured embedding model (EMBEDDING_PROVIDER): resumable, with a progress bar.

The same service the worker's ``search.embedding_space_switch`` task runs, in the foreground: the new space
is built beside the one searches use and replaces it atomically when complete.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from search.embeddings.providers import get_provider
from search.errors import EmbeddingUnavailable
from search.models import EmbeddingSpace
from search.services import jobs, reembed

from ._progress import progress_bar


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
        try:
            with progress_bar(self, total=pending, desc="reembed") as update:

                def _run() -> jobs.JobResult:
                    report.update(reembed.corpus_reembed(provider=provider, progress=update))
                    return jobs.JobResult(items_touched=report["embedded"], detail=report)

                outcome = jobs.job_execute(job=jobs.REEMBED, run=_run)
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
