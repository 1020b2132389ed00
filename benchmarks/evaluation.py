"""Relevance evaluation on BEIR-layout datasets, in a throwaway database.

The user's knowledge base is never touched: ``evaluation_database`` creates a temporary database
(migrated like the real one), copies the embedding cache in so unchanged text is not embedded
again, and copies new cache rows back before dropping it.
"""

from __future__ import annotations

import csv
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import connection

from benchmarks import require, scratch_db
from search.errors import SearchError

METRICS = ("ndcg@10", "recall@100", "mrr@10")


@dataclass(frozen=True)
class Dataset:
    corpus: Path
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def dataset_load(directory: Path, split: str) -> Dataset:
    corpus = directory / "corpus.jsonl"
    queries_path = directory / "queries.jsonl"
    qrels_path = directory / "qrels" / f"{split}.tsv"
    for path in (corpus, queries_path, qrels_path):
        if not path.exists():
            raise SearchError(f"{path} is missing: --dataset must be a BEIR folder with corpus.jsonl, "
                              f"queries.jsonl and qrels/{split}.tsv.")
    qrels: dict[str, dict[str, int]] = {}
    with qrels_path.open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    queries = {}
    with queries_path.open(encoding="utf-8") as handle:
        for line in handle:
            data = json.loads(line)
            if str(data["_id"]) in qrels:
                queries[str(data["_id"])] = data["text"]
    return Dataset(corpus, queries, qrels)


@contextmanager
def evaluation_database() -> Iterator[None]:
    """Switch the default connection to a fresh, migrated throwaway database for the duration
    (``search.services.scratch_db``), with the embedding cache copied in and new rows copied back."""
    with scratch_db.scratch_database(name=f"kb_eval_{os.getpid()}", copy_embedding_cache=True):
        yield


def run_queries(
    dataset: Dataset, search: Callable[[str], list[str]], *, progress: Callable[[int], None] | None = None
) -> tuple[dict[str, list[str]], list[float]]:
    runs: dict[str, list[str]] = {}
    latencies: list[float] = []
    for qid, text in dataset.queries.items():
        started = time.perf_counter()
        runs[qid] = search(text)
        latencies.append((time.perf_counter() - started) * 1000)
        if progress:
            progress(1)
    return runs, latencies


def score(dataset: Dataset, runs: dict[str, list[str]], latencies: list[float]) -> dict[str, float]:
    import ir_measures
    from ir_measures import RR, R, nDCG

    qrels = [ir_measures.Qrel(q, d, rel) for q, docs in dataset.qrels.items() if q in runs for d, rel in docs.items()]
    run = [
        ir_measures.ScoredDoc(q, d, float(len(docs) - rank)) for q, docs in runs.items() for rank, d in enumerate(docs)
    ]
    agg = ir_measures.calc_aggregate([nDCG @ 10, R @ 100, RR @ 10], qrels, run)
    ordered = sorted(latencies) or [0.0]
    return {
        "ndcg@10": round(agg[nDCG @ 10], 4),
        "recall@100": round(agg[R @ 100], 4),
        "mrr@10": round(agg[RR @ 10], 4),
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
        "queries": len(runs),
    }


TS_CONFIGS = {"en": "english", "fr": "french", "ar": "arabic"}


def baseline_ts_rank(dataset: Dataset, *, language: str = "en", limit: int = 100) -> Callable[[str], list[str]]:
    """Stock PostgreSQL: ts_rank over to_tsvector(<language>, title || body) with an OR query (GIN index)."""
    config = TS_CONFIGS.get(language, "simple")
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS eval_tsrank")
        cursor.execute(
            "CREATE TABLE eval_tsrank AS SELECT i.external_id AS doc, "
            "to_tsvector(%s::regconfig, r.title || ' ' || r.body) AS tsv "
            "FROM search_contentitem i JOIN search_revision r ON r.id = i.live_revision_id",
            [config],
        )
        cursor.execute("CREATE INDEX ON eval_tsrank USING gin (tsv)")
        cursor.execute("ANALYZE eval_tsrank")

    def search(text: str) -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute(
                "WITH q AS (SELECT replace(plainto_tsquery(%s::regconfig, %s)::text, ' & ', ' | ')::tsquery AS q) "
                "SELECT doc FROM eval_tsrank, q WHERE tsv @@ q.q ORDER BY ts_rank(tsv, q.q) DESC LIMIT %s",
                [config, text, limit],
            )
            return [r[0] for r in cursor.fetchall()]

    return search


# The peer library's settings per corpus language: its own stop-word list (bm25s has none for Arabic) and
# the language's Snowball stemmer, as someone would set it up for that language.
BM25S_LANGUAGES = {"en": ("en", "english"), "fr": ("fr", "french"), "ar": (None, "arabic")}


def corpus_language() -> str:
    """The language most items of the evaluation corpus are in (detected at import unless given)."""
    from django.db.models import Count

    from search.models import ContentItem

    row = ContentItem.objects.values("language").annotate(n=Count("id")).order_by("-n").first()
    return row["language"] if row else "en"


def baseline_bm25s(dataset: Dataset, *, language: str = "en", limit: int = 100) -> Callable[[str], list[str]]:
    """A maintained BM25 library (bm25s, Lucene variant) with the corpus language's stop words and Snowball
    stemmer (English ones for a language it has neither for)."""
    bm25s: Any = require("bm25s")
    Stemmer: Any = require("Stemmer")  # PyStemmer's module name

    ids, texts = [], []
    with dataset.corpus.open(encoding="utf-8") as handle:
        for line in handle:
            data = json.loads(line)
            ids.append(str(data["_id"]))
            texts.append(f"{data.get('title', '')} {data.get('text', '')}")
    stopwords, algorithm = BM25S_LANGUAGES.get(language, ("en", "english"))
    stemmer = Stemmer.Stemmer(algorithm)
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(texts, stopwords=stopwords, stemmer=stemmer, show_progress=False), show_progress=False
    )

    def search(text: str) -> list[str]:
        tokens = bm25s.tokenize([text], stopwords=stopwords, stemmer=stemmer, show_progress=False)
        if not tokens.vocab:
            return []
        results, _ = retriever.retrieve(tokens, k=min(limit, len(ids)), show_progress=False)
        return [ids[i] for i in results[0]]

    return search


def baseline_rrf(
    first: Callable[[str], list[str]], second: Callable[[str], list[str]], *, k: int = 60, limit: int = 100
) -> Callable[[str], list[str]]:
    """Plain reciprocal rank fusion (k = 60, equal weights) of two systems: the simple peer of hybrid."""
    from search.engine.fusion import rrf

    def search(text: str) -> list[str]:
        scores = rrf([first(text), second(text)], k=k)
        return [str(d) for d in sorted(scores, key=lambda d: -scores[d])][:limit]

    return search


def engine_search(mode: str, *, threshold: float, limit: int = 100) -> Callable[[str], list[str]]:
    from search.embeddings.providers import provider_warm
    from search.engine import retrieve
    from search.principal import Principal
    from search.types import RetrievalQuery

    staff = Principal(kind="staff", all_content=True)
    provider_warm()  # the model loads before the first query's embedding budget starts

    def search(text: str) -> list[str]:
        result = retrieve(query=RetrievalQuery(text=text[:2000], principal=staff, mode=mode,  # type: ignore[arg-type]
                                               limit=limit, threshold=threshold))
        return [h.external_id for h in result.hits]

    return search


def describe(results: dict[str, Any]) -> str:
    lines = [f"{'system':<22} {'nDCG@10':>8} {'R@100':>8} {'MRR@10':>8} {'p50 ms':>8} {'p95 ms':>8}"]
    for name, r in results.items():
        lines.append(f"{name:<22} {r['ndcg@10']:>8.4f} {r['recall@100']:>8.4f} {r['mrr@10']:>8.4f} "
                     f"{r['p50_ms']:>8.1f} {r['p95_ms']:>8.1f}")
    return "\n".join(lines)
