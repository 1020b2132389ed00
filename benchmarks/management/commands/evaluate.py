from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from benchmarks import calibration, crosslingual, evaluation, federated_eval, scratch_db
from search.embeddings.spaces import lane_model
from search.engine import confidence, english, lane_weights
from search.errors import SearchError
from search.management.commands._progress import progress_bar
from search.services import importer, indexing
from search.services.spaces import active_space
from search.services.vector_index import embeddings_pending

# Vector-lane weights --calibrate tries (RRF weight beside the lexical lane's 1.0).
CALIBRATION_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)  # the vector lane against lexical (1.0)
ENGLISH_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)  # the English lane's, beside both


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
        parser.add_argument("--threshold", type=float, default=0.0,
                            help="confidence floor (default 0: the full ranking, so nDCG is unchanged by it)")
        parser.add_argument("--fit-confidence", action="store_true",
                            help="fit the confidence models only (--calibrate also sweeps the lane weights first)")
        parser.add_argument("--abstention", action="store_true",
                            help="report, per threshold, in-collection questions answered and off-collection "
                                 "ones (other dev sets' questions, held-out ones, made-up words) left unanswered")
        parser.add_argument("--cross-lingual", action="store_true",
                            help="evaluate the cross-lingual check derived from --dataset (English names of the "
                                 "subjects of Arabic or French paragraphs; benchmarks/crosslingual.py)")
        parser.add_argument("--dump", type=Path, default=None,
                            help="write the recorded confidence features of every search to this .npz file")
        parser.add_argument("--kinds", default=None,
                            help="with --dump: record only these question kinds (comma-separated, of "
                                 f"{', '.join(calibration.KINDS)}), e.g. a kind added after a full recording")
        parser.add_argument("--from-dump", type=Path, nargs="+", default=None,
                            help="fit the confidence models from --dump files (one recording, or several of the "
                                 "same corpus and model) instead of running the searches again (with --model "
                                 "and --language when the files do not name them)")
        parser.add_argument("--model", default=None, help="with --from-dump: the embedding model it was recorded with")
        parser.add_argument("--federated", type=int, default=None, metavar="N",
                            help="split the corpus across N instances (N-1 served as real peers over HTTP) and "
                                 "compare federated search's figures with one instance holding it all")
        parser.add_argument("--max-queries", type=int, default=None)
        parser.add_argument("--json", action="store_true", help="last line of output: one JSON object")

    def handle(self, *args: Any, **opts: Any) -> None:
        source = opts["dataset"]
        if opts["kinds"] is not None:
            kinds = [k.strip() for k in opts["kinds"].split(",") if k.strip()]
            unknown = sorted(set(kinds) - set(calibration.KINDS))
            if unknown or not kinds:
                raise CommandError(f"--kinds: unknown kind(s) {', '.join(unknown) or '(none given)'}; "
                                   f"choose among {', '.join(calibration.KINDS)}.")
            if not opts["dump"] or opts["calibrate"] or opts["fit_confidence"] or opts["abstention"]:
                raise CommandError("--kinds records part of the questions: use it with --dump alone, then fit "
                                   "with --from-dump on every recording.")
            opts["kinds"] = set(kinds)
        if opts["from_dump"]:
            self._refit(opts)
            return
        try:
            if opts["cross_lingual"]:
                derived = Path(tempfile.mkdtemp(prefix="kb-crosslingual-"))
                sizes = crosslingual.crosslingual_dataset(source, derived)
                self.stderr.write(f"cross-lingual check from {source.name}: {sizes}")
                dataset = evaluation.dataset_load(derived, "dev")
            else:
                dataset = evaluation.dataset_load(source, opts["split"])
        except (SearchError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        if opts["max_queries"] is not None:
            if opts["max_queries"] < 1:
                raise CommandError("--max-queries must be at least 1.")
            for qid in list(dataset.queries)[opts["max_queries"] :]:
                del dataset.queries[qid]
        if opts["federated"] is not None:
            self._federated(dataset, opts)
            return
        results: dict[str, Any] = {}
        with evaluation.evaluation_database():
            self._build(dataset.corpus, opts["language"])
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
            if opts["calibrate"] or opts["fit_confidence"] or opts["abstention"] or opts["dump"]:
                results.update(self._confidence(dataset, model, language, opts))
        if opts["json"]:
            headline = dict(results[opts["mode"]])
            if opts["baselines"] or opts["calibrate"]:
                headline["systems"] = results
            headline["language"] = language
            self.stdout.write(json.dumps(headline))
        else:
            self.stdout.write(evaluation.describe(results))

    def _build(self, corpus: Path, language: str | None) -> None:
        """Import ``corpus`` (published) into the current database and index it, lexical and vector."""
        with progress_bar(self, total=importer.count_records(corpus, "beir"), desc="import") as update:
            importer.import_path(corpus, fmt="beir", publish=True, defaults={"language": language}, progress=update)
        total = indexing.columns_pending().count() + embeddings_pending(active_space().model).count()
        with progress_bar(self, total=total, desc="index") as update:
            indexing.index_rebuild(progress=update)

    def _federated(self, dataset: evaluation.Dataset, opts: dict[str, Any]) -> None:
        """``--federated N``: one instance holding the whole corpus, then N instances holding a shard each, the
        first asking the others over HTTP (benchmarks/federated_eval.py); both scored on the same questions."""
        parts, mode = opts["federated"], opts["mode"]
        if not 2 <= parts <= 8:
            raise CommandError("--federated N: N must be between 2 and 8 instances.")
        if opts["baselines"] or opts["calibrate"] or opts["fit_confidence"] or opts["abstention"] or opts["dump"]:
            raise CommandError("--federated measures the merge only: run it without --baselines, --calibrate, "
                               "--fit-confidence, --abstention and --dump.")
        directory = Path(tempfile.mkdtemp(prefix="kb-federated-"))
        paths = federated_eval.corpus_split(dataset.corpus, parts, directory)
        shards = federated_eval.shards_build(paths, build=lambda path: self._build(path, opts["language"]),
                                             run_id=str(os.getpid()))
        try:
            self.stderr.write("shards: " + ", ".join(f"{s.name} {s.documents} documents" for s in shards))
            with evaluation.evaluation_database():
                self._build(dataset.corpus, opts["language"])
                language = evaluation.corpus_language()
                single = self._run(dataset, f"{mode} (one instance)", evaluation.engine_search(mode, threshold=0.0))
            first, others = shards[0], shards[1:]
            with federated_eval.peers_serving(others) as urls, \
                    scratch_db.scratch_database(name=first.database, keep=True):
                run = federated_eval.federated_searcher(first, [(s, urls[s.name]) for s in others], mode=mode)
                federated = self._run(dataset, f"{mode} ({parts} instances)", run.search)
        finally:
            federated_eval.shards_drop(shards)
        # The same answers merged by the previous rule (by confidence, each source's order kept).
        recorded = evaluation.run_queries(dataset, lambda text: run.by_confidence[text])
        # (its latencies would be of a dict lookup: the federated run's are the search's)
        by_confidence = {k: v for k, v in evaluation.score(dataset, *recorded).items() if not k.endswith("_ms")}
        ratio = round(federated["ndcg@10"] / single["ndcg@10"], 4) if single["ndcg@10"] else None
        ratio_confidence = round(by_confidence["ndcg@10"] / single["ndcg@10"], 4) if single["ndcg@10"] else None
        report = {
            "language": language, "mode": mode, "instances": parts,
            "shards": [{"name": s.name, "documents": s.documents} for s in shards],
            "single": single, "federated": federated, "ndcg@10_ratio": ratio,
            "federated_by_confidence": by_confidence, "ndcg@10_ratio_by_confidence": ratio_confidence,
            "source_failures": run.failures, "unmapped_hits": len(run.unmapped),
        }
        self.stderr.write(evaluation.describe({f"{mode} one instance": single, f"{mode} {parts} instances": federated,
                                               f"{mode} {parts} instances, by confidence":
                                                   {**by_confidence, "p50_ms": math.nan, "p95_ms": math.nan}}))
        self.stderr.write(f"federated / one instance nDCG@10: {ratio} (merged by confidence: {ratio_confidence}); "
                          f"source failures {run.failures or 'none'}; hits not mapped to a document: "
                          f"{len(run.unmapped)}")
        if opts["json"]:
            self.stdout.write(json.dumps(report))

    def _run(self, dataset: evaluation.Dataset, name: str, search: Any) -> dict[str, Any]:
        search(next(iter(dataset.queries.values())))  # warm-up
        with progress_bar(self, total=len(dataset.queries), desc=name) as update:
            runs, latencies = evaluation.run_queries(dataset, search, progress=update)
        return evaluation.score(dataset, runs, latencies)

    def _confidence(
        self, dataset: evaluation.Dataset, model: str, language: str, opts: dict[str, Any]
    ) -> dict[str, Any]:
        """Record every kind of question (calibration module), fit the confidence when calibrating, and report
        abstention with the table as it then stands."""
        collected = self._collect(dataset, language, opts["dataset"], cross_lingual=opts["cross_lingual"],
                                  kinds=opts["kinds"])
        out: dict[str, Any] = {}
        if opts["dump"]:  # what was recorded, as it was; --from-dump relabels it as below
            calibration.collected_dump(collected, opts["dump"], model=model, language=language,
                                       dataset=dataset.corpus.parent.name)
            self.stderr.write(f"wrote {len(collected.searches)} recorded searches to {opts['dump']}")
        collected = calibration.rare_words_as_the_engine_matches(collected)
        if opts["calibrate"] or opts["fit_confidence"]:
            fitted = calibration.table_fit(collected, model=model, language=language,
                                           dataset=dataset.corpus.parent.name)
            out["confidence_fit"] = fitted["fit"]
            self.stderr.write(f"recorded confidence models for {model} in {language} ({confidence.table_path()})")
            if "abstention_cross_validated" in fitted:
                out["abstention_cross_validated"] = fitted["abstention_cross_validated"]
                self.stderr.write("abstention, cross-validated (each question scored by models fitted without it):")
                self.stderr.write(calibration.describe_abstention(fitted["abstention_cross_validated"]))
        if opts["abstention"] or opts["calibrate"] or opts["fit_confidence"]:
            out["abstention"] = calibration.abstention(collected, model=model, language=language)
            self.stderr.write("abstention with the stored table:")
            self.stderr.write(calibration.describe_abstention(out["abstention"]))
        return out

    def _refit(self, opts: dict[str, Any]) -> None:
        """Fit the confidence table from recorded searches (``--dump`` of an earlier run), and report."""
        paths: list[Path] = opts["from_dump"]
        try:
            collected = calibration.rare_words_as_the_engine_matches(calibration.collected_load(*paths))
            infos = [calibration.dump_info(path) for path in paths]
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(f"--from-dump: cannot read {' '.join(map(str, paths))}: {exc}") from exc
        named = {(i.get("model"), i.get("language")) for i in infos if i}
        if len(named) > 1:
            raise CommandError(f"--from-dump: these recordings are of different models or languages {sorted(named)}; "
                               "fit each (model, language) from its own.")
        info = next((i for i in infos if i), {})
        model, language = opts["model"] or info.get("model"), opts["language"] or info.get("language")
        if not model or not language:
            raise CommandError("--from-dump: this file does not name its model and language; "
                               "give --model and --language")
        fitted = calibration.table_fit(collected, model=model, language=language,
                                       dataset=info.get("dataset") or opts["dataset"].name)
        self.stderr.write(f"recorded confidence models for {model} in {language} ({confidence.table_path()})")
        out = {"confidence_fit": fitted["fit"], "abstention": calibration.abstention(collected, model=model,
                                                                                     language=language)}
        if "abstention_cross_validated" in fitted:
            out["abstention_cross_validated"] = fitted["abstention_cross_validated"]
            self.stderr.write("abstention, cross-validated (each question scored by models fitted without it):")
            self.stderr.write(calibration.describe_abstention(fitted["abstention_cross_validated"]))
        self.stderr.write("abstention with the stored table:")
        self.stderr.write(calibration.describe_abstention(out["abstention"]))
        if opts["json"]:
            self.stdout.write(json.dumps({"model": model, "language": language, **out}))

    def _collect(
        self, dataset: evaluation.Dataset, language: str, source: Path, *, cross_lingual: bool,
        kinds: set[str] | None = None,
    ) -> calibration.Collected:
        """Every kind of question (or only ``kinds``), recorded in each head. The cross-lingual check records its
        own questions only (its corpus is the dev set's, whose off-collection kinds the dev set's own run
        measures)."""
        collected = calibration.Collected()
        qrels = dataset.qrels

        def judged(qid: str) -> set[str]:
            return {d for d, rel in qrels.get(qid, {}).items() if rel > 0}

        def nothing(qid: str) -> set[str]:
            return set()

        def wanted(kind: str) -> bool:
            return kinds is None or kind in kinds

        # kind -> (questions, their answers); off-collection kinds have none
        asked: dict[str, tuple[dict[str, str], Callable[[str], set[str]]]] = {}
        if wanted("in"):
            asked["in"] = (dataset.queries, judged)
        if not cross_lingual:
            for kind, make in (("known_item", calibration.title_queries), ("keyword", calibration.keyword_queries),
                               ("rare_word", calibration.rare_word_queries)):
                if wanted(kind):
                    questions, answers = make(dataset)
                    asked[kind] = (questions, answers.__getitem__)
            if wanted("other_language"):
                asked["other_language"] = (calibration.other_language_queries(source), nothing)
            if wanted("nonsense"):
                asked["nonsense"] = (calibration.nonsense_queries(language), nothing)
        for head in calibration.HEADS_RUN:
            for kind, (questions, answers_of) in asked.items():
                with progress_bar(self, total=len(questions), desc=f"confidence {kind}/{head}") as update:
                    collected.searches += calibration.run_recorded(
                        questions, kind=kind, mode=head, relevant_of=answers_of, progress=update
                    )
        if cross_lingual or not wanted("same_language"):
            return collected
        held, removed = calibration.held_out_split(dataset)
        with calibration.documents_archived(removed):
            held_queries = {q: dataset.queries[q] for q in sorted(held)}
            for head in calibration.HEADS_RUN:
                with progress_bar(self, total=len(held_queries), desc=f"confidence same_language/{head}") as update:
                    collected.searches += calibration.run_recorded(
                        held_queries, kind="same_language", mode=head, relevant_of=nothing, progress=update
                    )
        return collected

    def _calibrate(
        self, dataset: evaluation.Dataset, model: str, language: str, results: dict[str, Any], threshold: float
    ) -> dict[str, Any]:
        """The vector lane's weight, then the English lane's (search.engine.english) with the vector lane at its
        recorded weight: each sweep's best hybrid nDCG@10 goes into the table (the smaller weight on a tie)."""
        measured = {"lexical": results["lexical"]["ndcg@10"], "vector": results["vector"]["ndcg@10"]}
        tried = self._sweep(dataset, model, language, CALIBRATION_WEIGHTS, "hybrid", threshold, measured)
        provider = english.english_provider()
        if provider is not None and provider.name != model and language in english.LANGUAGES:
            tried.update(self._sweep(dataset, english.lane_key(provider), language, ENGLISH_WEIGHTS, "english",
                                     threshold, {}))
        return tried

    def _sweep(
        self,
        dataset: evaluation.Dataset,
        key: str,
        language: str,
        weights: tuple[float, ...],
        name: str,
        threshold: float,
        measured: dict[str, float],
    ) -> dict[str, Any]:
        """Hybrid with lane ``key`` at each of ``weights`` in ``language``; records the best in lane_weights.json
        (0: the lane does not run) with every figure tried beside ``measured``."""
        tried: dict[str, Any] = {}
        for weight in weights:
            with lane_weights.weight_override(model=key, code=language, weight=weight):
                tried[f"{name}@{weight}"] = self._run(
                    dataset, f"{name}@{weight}", evaluation.engine_search("hybrid", threshold=threshold)
                )
        best = max(weights, key=lambda w: (tried[f"{name}@{w}"]["ndcg@10"], -w))
        lane_weights.table_update(
            model=key,
            code=language,
            weight=best,
            measured={
                "dataset": dataset.corpus.parent.name,
                "queries": len(dataset.queries),
                "measured_on": timezone.now().date().isoformat(),
                "ndcg@10": {**measured, **{label: r["ndcg@10"] for label, r in tried.items()}},
            },
        )
        self.stderr.write(f"recorded lane weight {best} for {key} in {language} ({lane_weights.TABLE_PATH})")
        return tried
