from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from benchmarks import evaluation
from search.engine import lane_weights
from search.engine.vector import active_space, lane_model
from search.errors import SearchError
from search.management.commands._progress import progress_bar
from search.services import importer, indexing
from search.services.vector_index import embeddings_pending

# Vector-lane weights --calibrate tries (RRF weight beside the lexical lane's 1.0).
CALIBRATION_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)  # the vector lane against lexical (1.0)


class Command(BaseCommand):
    help = "Evaluate retrieval on a BEIR dataset (nDCG@10, Recall@100, MRR@10, latency) in a throwaway database."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--dataset", type=Path, required=True, help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/)"
        )
        parser.add_argument("--split", default="test")
        parser.add_argument("--mode", choices=["lexical", "vector", "hybrid"], default="hybrid")
        parser.add_argument("--baselines", action="store_true",
                            help="also run every lane and the peers (stock ts_rank OR query, bm25s with the "
                                 "language's stemmer, plain RRF of bm25s and the vector lane) side by side")
        parser.add_argument("--calibrate", action="store_true",
                            help="try vector-lane weights for the corpus language and record the best in "
                                 "search/lane_weights.json for the active embedding model")
        parser.add_argument("--language", default=None,
                            help="the corpus's language (en, fr, ar, …); by default each document's is detected")
        parser.add_argument("--threshold", type=float, default=0.0, help="vector similarity threshold (default 0)")
        parser.add_argument("--max-queries", type=int, default=None)
        parser.add_argument("--json", action="store_true", help="last line of output: one JSON object")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            dataset = evaluation.dataset_load(opts["dataset"], opts["split"])
        except SearchError as exc:
            raise CommandError(str(exc)) from exc
        if opts["max_queries"] is not None:
            if opts["max_queries"] < 1:
                raise CommandError("--max-queries must be at least 1.")
            for qid in list(dataset.queries)[opts["max_queries"] :]:
                del dataset.queries[qid]
        results: dict[str, Any] = {}
        with evaluation.evaluation_database():
            with progress_bar(self, total=importer.count_records(dataset.corpus, "beir"), desc="import") as update:
                importer.import_path(dataset.corpus, fmt="beir", publish=True,
                                     defaults={"language": opts["language"]}, progress=update)
            total = indexing.columns_pending().count() + embeddings_pending(active_space().model).count()
            with progress_bar(self, total=total, desc="index") as update:
                indexing.index_rebuild(progress=update)
            language = evaluation.corpus_language()
            model = lane_model()
            weight = lane_weights.language_weight(model, language)
            self.stderr.write(f"corpus language {language}; vector lane: {model}, weight {weight} in {language}")
            modes = ["lexical", "vector", "hybrid"] if opts["baselines"] or opts["calibrate"] else [opts["mode"]]
            systems: dict[str, Any] = {m: evaluation.engine_search(m, threshold=opts["threshold"]) for m in modes}
            if opts["baselines"]:
                systems["ts_rank_or"] = evaluation.baseline_ts_rank(dataset, language=language)
                systems["bm25s"] = evaluation.baseline_bm25s(dataset, language=language)
                systems["rrf_bm25s_vector"] = evaluation.baseline_rrf(systems["bm25s"], systems["vector"])
            for name, search in systems.items():
                results[name] = self._run(dataset, name, search)
            if opts["calibrate"]:
                results.update(self._calibrate(dataset, model, language, results, opts["threshold"]))
        if opts["json"]:
            headline = dict(results[opts["mode"]])
            if opts["baselines"] or opts["calibrate"]:
                headline["systems"] = results
            headline["language"] = language
            self.stdout.write(json.dumps(headline))
        else:
            self.stdout.write(evaluation.describe(results))

    def _run(self, dataset: evaluation.Dataset, name: str, search: Any) -> dict[str, Any]:
        search(next(iter(dataset.queries.values())))  # warm-up
        with progress_bar(self, total=len(dataset.queries), desc=name) as update:
            runs, latencies = evaluation.run_queries(dataset, search, progress=update)
        return evaluation.score(dataset, runs, latencies)

    def _calibrate(
        self, dataset: evaluation.Dataset, model: str, language: str, results: dict[str, Any], threshold: float
    ) -> dict[str, Any]:
        """Hybrid at each weight; the best nDCG@10 (the smaller weight on a tie) goes into the table."""
        tried: dict[str, Any] = {}
        for weight in CALIBRATION_WEIGHTS:
            with lane_weights.weight_override(model=model, code=language, weight=weight):
                tried[f"hybrid@{weight}"] = self._run(
                    dataset, f"hybrid@{weight}", evaluation.engine_search("hybrid", threshold=threshold)
                )
        best = max(CALIBRATION_WEIGHTS, key=lambda w: (tried[f"hybrid@{w}"]["ndcg@10"], -w))
        lane_weights.table_update(
            model=model,
            code=language,
            weight=best,
            measured={
                "dataset": dataset.corpus.parent.name,
                "queries": len(dataset.queries),
                "measured_on": timezone.now().date().isoformat(),
                "ndcg@10": {
                    "lexical": results["lexical"]["ndcg@10"],
                    "vector": results["vector"]["ndcg@10"],
                    **{name: r["ndcg@10"] for name, r in tried.items()},
                },
            },
        )
        self.stderr.write(f"recorded vector weight {best} for {model} in {language} ({lane_weights.TABLE_PATH})")
        return tried
