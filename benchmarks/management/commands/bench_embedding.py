from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from benchmarks import bench_embedding

DATASETS = Path(settings.BASE_DIR).parent / "shared" / "datasets"


class Command(BaseCommand):
    help = bench_embedding.__doc__.split("\n\n")[0] if bench_embedding.__doc__ else ""

    def add_arguments(self, parser: Any) -> None:
        every = [DATASETS / name for name in ("scifact", "ar_wikiqa", "fr_piaf")]
        parser.add_argument("--dataset", type=Path, nargs="+", default=every, help="BEIR folders")
        parser.add_argument("--texts", type=int, default=1000, help="chunk texts per dataset")
        parser.add_argument("--queries", type=int, default=200, help="queries per dataset")
        parser.add_argument("--json", action="store_true", help="last line of output: one JSON object")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["texts"] < 1 or opts["queries"] < 1:
            raise CommandError("--texts and --queries must be at least 1.")
        results: dict[str, Any] = {}
        for folder in opts["dataset"]:
            corpus, queries_path = folder / "corpus.jsonl", folder / "queries.jsonl"
            if not corpus.exists() or not queries_path.exists():
                raise CommandError(f"{folder} is not a BEIR folder: it needs corpus.jsonl and queries.jsonl.")
            texts = bench_embedding.chunk_texts_load(corpus, opts["texts"])
            queries = bench_embedding.queries_load(queries_path, opts["queries"])
            if not texts or not queries:
                raise CommandError(f"{folder} has no text or no queries to embed.")
            self.stderr.write(f"== {folder.name}")
            block = bench_embedding.engines_compare(texts, queries, log=self.stderr.write)
            results[folder.name] = block
            self.stdout.write(
                f"{folder.name}: {block['chunks_per_s']} vs {block['baseline_chunks_per_s']} chunks/s "
                f"(x{block['speedup']}), query p50 {block['query_p50_ms']} vs {block['baseline_query_p50_ms']} ms, "
                f"cosine min {block['cosine']['min']} mean {block['cosine']['mean']} "
                f"(>= 0.99: {block['cosine']['share_at_least_0_99']:.1%}), RSS peak {block['rss_mb']['peak']} MB"
            )
        if opts["json"]:
            self.stdout.write(json.dumps(results))
