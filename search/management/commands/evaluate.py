from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from search.errors import SearchError
from search.services import evaluation, importer, indexing
from search.services.vector import active_space, embeddings_pending

from ._progress import progress_bar


class Command(BaseCommand):
    help = "Evaluate retrieval on a BEIR dataset (nDCG@10, Recall@100, MRR@10, latency) in a throwaway database."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--dataset", type=Path, required=True, help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/)")
        parser.add_argument("--split", default="test")
        parser.add_argument("--mode", choices=["lexical", "vector", "hybrid"], default="hybrid")
        parser.add_argument("--baselines", action="store_true",
                            help="also run every lane and the baselines (stock ts_rank OR query, bm25s) side by side")
        parser.add_argument("--threshold", type=float, default=0.0, help="vector similarity threshold (default 0)")
        parser.add_argument("--max-queries", type=int, default=None)
        parser.add_argument("--json", action="store_true", help="last line of output: one JSON object")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            dataset = evaluation.dataset_load(opts["dataset"], opts["split"])
        except SearchError as exc:
            raise CommandError(str(exc)) from exc
        if opts["max_queries"]:
            dataset.queries.update({})
            for qid in list(dataset.queries)[opts["max_queries"] :]:
                del dataset.queries[qid]
        results: dict[str, Any] = {}
        with evaluation.evaluation_database():
            with progress_bar(self, total=importer.count_records(dataset.corpus, "beir"), desc="import") as update:
                importer.import_path(dataset.corpus, fmt="beir", publish=True, defaults={"language": "en"},
                                     progress=update)
            total = indexing.columns_pending().count() + embeddings_pending(active_space().model).count()
            with progress_bar(self, total=total, desc="index") as update:
                indexing.index_rebuild(progress=update)
            modes = ["lexical", "vector", "hybrid"] if opts["baselines"] else [opts["mode"]]
            systems: dict[str, Any] = {m: evaluation.engine_search(m, threshold=opts["threshold"]) for m in modes}
            if opts["baselines"]:
                systems["ts_rank_or"] = evaluation.baseline_ts_rank(dataset)
                systems["bm25s"] = evaluation.baseline_bm25s(dataset)
            for name, search in systems.items():
                search(next(iter(dataset.queries.values())))  # warm-up
                with progress_bar(self, total=len(dataset.queries), desc=name) as update:
                    runs, latencies = evaluation.run_queries(dataset, search, progress=update)
                results[name] = evaluation.score(dataset, runs, latencies)
        if opts["json"]:
            headline = dict(results[opts["mode"]])
            if opts["baselines"]:
                headline["systems"] = results
            self.stdout.write(json.dumps(headline))
        else:
            self.stdout.write(evaluation.describe(results))
