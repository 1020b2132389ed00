from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from search.errors import SearchError
from search.services import importer, indexing
from search.services.spaces import active_space
from search.services.vector_index import embeddings_pending

from ._progress import progress_bar


class Command(BaseCommand):
    help = "Import content (BEIR, JSONL or Markdown). Idempotent by id; ends with an index build."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("path", type=Path)
        parser.add_argument("--format", choices=["beir", "jsonl", "markdown"], default="jsonl")
        parser.add_argument("--publish", action="store_true", help="imported revisions go live")
        parser.add_argument("--visibility", help="default visibility: public, signed_in, staff, groups")
        parser.add_argument("--domain", help="default primary_domain")
        parser.add_argument("--language", help="default language (en, fr, ar, …)")
        parser.add_argument("--no-build", action="store_true", help="skip the index build (run build_index later)")

    def handle(self, *args: Any, **opts: Any) -> None:
        path: Path = opts["path"]
        if not path.exists():
            raise CommandError(f"{path}: no such file or folder.")
        defaults = {"visibility": opts["visibility"], "primary_domain": opts["domain"], "language": opts["language"]}
        try:
            with progress_bar(self, total=importer.count_records(path, opts["format"]), desc="import") as update:
                report = importer.import_path(
                    path, fmt=opts["format"], publish=opts["publish"], defaults=defaults, progress=update
                )
            self.stdout.write(
                f"{report.records} records: {report.created} created, {report.updated} updated, "
                f"{report.unchanged} unchanged"
            )
            if not opts["no_build"]:
                self._build()
        except (SearchError, ValueError) as exc:
            raise CommandError(str(exc)) from exc

    def _build(self) -> None:
        pending_columns = indexing.columns_pending().count()
        pending_vectors = embeddings_pending(active_space().model).count()
        with progress_bar(self, total=pending_columns + pending_vectors, desc="index") as update:
            result = indexing.index_rebuild(progress=update)
        self.stdout.write(
            f"index: {result['columns']} chunks analysed, {result['embedded']} embedded, {result['seconds']} s"
        )
