from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from search.services import indexing
from search.services.spaces import active_space
from search.services.vector_index import embeddings_pending

from ._progress import progress_bar


class Command(BaseCommand):
    help = "Build the search index: chunk columns, embeddings of the active model, term statistics, HNSW."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--no-embed", action="store_true", help="skip the embedding backfill")

    def handle(self, *args: Any, **opts: Any) -> None:
        total = indexing.columns_pending().count()
        if not opts["no_embed"]:
            total += embeddings_pending(active_space().model).count()
        with progress_bar(self, total=total, desc="index") as update:
            result = indexing.index_rebuild(progress=update, embed=not opts["no_embed"])
        self.stdout.write(f"{result['columns']} chunks analysed, {result['embedded']} embedded, {result['seconds']} s")
