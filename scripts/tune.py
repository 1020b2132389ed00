"""Sweep the engine's knobs on a BEIR train split, in the current database (already holding the corpus).

Usage (after `manage.py import_content DATASET/corpus.jsonl --format beir --publish` into a scratch KB_HOME):
    KB_HOME=/tmp/kb-tune EMBEDDING_PROVIDER=local python scripts/tune.py --dataset ../shared/datasets/scifact

Prints one line per configuration: nDCG@10, Recall@100, MRR@10. Tune on train only; the product is judged
on data we do not have, so prefer settings that are robust over the last 0.001.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from benchmarks import evaluation  # noqa: E402
from search.engine import rerank  # noqa: E402


def _measures(r: dict) -> str:
    return f"ndcg@10={r['ndcg@10']} recall@100={r['recall@100']} mrr@10={r['mrr@10']}"


def run(dataset: evaluation.Dataset, mode: str, cache: dict) -> dict:
    search = evaluation.engine_search(mode, threshold=0.0)
    runs, latencies = evaluation.run_queries(dataset, search)
    return evaluation.score(dataset, runs, latencies)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--split", default="train")
    parser.add_argument("--what", choices=["bm25", "fusion", "rerank"], default="bm25")
    parser.add_argument("--max-queries", type=int, default=None)
    args = parser.parse_args()
    dataset = evaluation.dataset_load(args.dataset, args.split)
    if args.max_queries:
        for qid in list(dataset.queries)[args.max_queries :]:
            del dataset.queries[qid]
    base = dict(settings.SEARCH)
    if args.what == "bm25":
        grid = [(1.2, 0.75, t) for t in (1.0, 2.0, 3.0)] + [(0.9, 0.4, 2.0)]
        for k1, b, title in grid:
            settings.SEARCH = {**base, "BM25_K1": k1, "BM25_B": b, "TITLE_WEIGHT": title}
            r = run(dataset, "lexical", {})
            print(f"k1={k1} b={b} title={title} {_measures(r)}", flush=True)
    elif args.what == "fusion":
        r = run(dataset, "vector", {})
        print(f"vector-only ndcg@10={r['ndcg@10']} recall@100={r['recall@100']} mrr@10={r['mrr@10']}", flush=True)
        for k, wl, wv in [(60, 1.0, 1.0), (20, 1.0, 1.0), (60, 1.0, 1.5), (60, 1.5, 1.0)]:
            settings.SEARCH = {**base, "RRF_K": k, "LEXICAL_WEIGHT": wl, "VECTOR_WEIGHT": wv}
            r = run(dataset, "hybrid", {})
            print(f"rrf_k={k} w_lex={wl} w_vec={wv} {_measures(r)}", flush=True)
    else:
        for title_w in [0.0, 0.1, 0.2, 0.4]:
            rerank.TITLE_WEIGHT = title_w
            r = run(dataset, "hybrid", {})
            print(f"rerank_title={title_w} {_measures(r)}", flush=True)


if __name__ == "__main__":
    main()
