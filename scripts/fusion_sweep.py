"""Dump both lanes' hits for a BEIR dev set once, then compare fusion rules on them offline.

Usage (embeddings come from the cache of an earlier ``evaluate`` run with the same provider):
    KB_HOME=/tmp/kb-eval EMBEDDING_PROVIDER=e5 python scripts/fusion_sweep.py \
        --dataset ../shared/datasets/ar_wikiqa --split dev --dump /tmp/lanes-ar.json
    python scripts/fusion_sweep.py --dataset ../shared/datasets/ar_wikiqa --split dev --load /tmp/lanes-ar.json

Item-level, as ``evaluate`` scores: each item's best chunk in each lane. Rerank signals are left out (they
are small and the same for every rule). Tune on the dev sets only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")


def dump(args: argparse.Namespace) -> None:
    import django

    django.setup()
    from benchmarks import evaluation
    from search.engine import lexical, vector
    from search.models import ContentItem
    from search.principal import Principal
    from search.services import importer, indexing
    from search.text import query_parser

    dataset = evaluation.dataset_load(args.dataset, args.split)
    out: dict[str, dict[str, list[list[float | str]]]] = {}
    with evaluation.evaluation_database():
        importer.import_path(dataset.corpus, fmt="beir", publish=True, defaults={"language": args.language})
        indexing.index_rebuild()
        from search.embeddings.providers import provider_warm

        provider_warm()
        ids = dict(ContentItem.objects.values_list("pk", "external_id"))
        staff = Principal(kind="staff", all_content=True)
        from search.engine.scope import ItemScope

        items_sql = ItemScope.of(staff, "latest").items_sql()
        for n, (qid, text) in enumerate(dataset.queries.items()):
            parsed = query_parser.parse(text[:2000])
            lex = lexical.lexical_search(parsed=parsed, corpus="latest", items_sql=items_sql, limit=200).hits
            qvec = vector.query_embedding(parsed.text)
            vec = vector.vector_search(vector=qvec, corpus="latest", items_sql=items_sql, limit=200)
            seen: set[int] = set()
            lex_rows = []
            for h in lex:
                if h.item_id not in seen:
                    seen.add(h.item_id)
                    lex_rows.append([ids[h.item_id], h.score, int(h.complete)])
            seen = set()
            vec_rows = []
            for v in vec:
                if v.item_id not in seen:
                    seen.add(v.item_id)
                    vec_rows.append([ids[v.item_id], v.similarity])
            out[qid] = {"lex": lex_rows, "vec": vec_rows}
            if n % 100 == 0:
                print(n, file=sys.stderr, flush=True)
    Path(args.dump).write_text(json.dumps(out))


def ndcg10(ranked: list[str], rel: dict[str, int]) -> float:
    dcg = sum((2 ** rel.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(rel.values(), reverse=True)[:10]
    idcg = sum((2**r - 1) / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def rrf(lex: list, vec: list, k: int, wl: float, wv: float) -> list[str]:
    s: dict[str, float] = {}
    for r, row in enumerate(lex, 1):
        s[row[0]] = s.get(row[0], 0) + wl / (k + r)
    for r, row in enumerate(vec, 1):
        s[row[0]] = s.get(row[0], 0) + wv / (k + r)
    lex_rank = {row[0]: r for r, row in enumerate(lex)}
    return sorted(s, key=lambda d: (-s[d], lex_rank.get(d, 10**9)))


def convex(lex: list, vec: list, alpha: float, norm: str, depth: int = 200) -> list[str]:
    lex, vec = lex[:depth], vec[:depth]

    def scaled(rows: list, idx: int) -> dict[str, float]:
        if not rows:
            return {}
        vals = [r[idx] for r in rows]
        if norm == "minmax":
            lo, hi = min(vals), max(vals)
            return {r[0]: (r[idx] - lo) / (hi - lo) if hi > lo else 1.0 for r in rows}
        if norm == "max":
            hi = max(vals) or 1.0
            return {r[0]: r[idx] / hi for r in rows}
        mean = sum(vals) / len(vals)
        sd = (sum((v - mean) ** 2 for v in vals) / len(vals)) ** 0.5 or 1.0
        return {r[0]: (r[idx] - mean) / sd for r in rows}

    ls, vs = scaled(lex, 1), scaled(vec, 1)
    floor_l = min(ls.values(), default=0.0)
    floor_v = min(vs.values(), default=0.0)
    docs = set(ls) | set(vs)
    score = {d: alpha * ls.get(d, floor_l) + (1 - alpha) * vs.get(d, floor_v) for d in docs}
    return sorted(score, key=lambda d: -score[d])


def sweep(args: argparse.Namespace) -> None:
    import csv

    lanes = json.loads(Path(args.load).read_text())
    qrels: dict[str, dict[str, int]] = {}
    with (args.dataset / "qrels" / f"{args.split}.tsv").open() as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    qids = [q for q in lanes if q in qrels]

    def mean(fn) -> float:  # type: ignore[no-untyped-def]
        return round(sum(ndcg10(fn(lanes[q]), qrels[q]) for q in qids) / len(qids), 4)

    print("lexical", mean(lambda x: [r[0] for r in x["lex"]]))
    print("vector", mean(lambda x: [r[0] for r in x["vec"]]))
    for k in (10, 20, 40, 60):
        for wv in (0.0, 0.25, 0.5, 0.75, 1.0, 1.25):
            print(f"rrf k={k} wv={wv}", mean(lambda x, k=k, wv=wv: rrf(x["lex"], x["vec"], k, 1.0, wv)))
    for norm in ("minmax", "max", "z"):
        for alpha in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
            print(f"convex {norm} a={alpha}", mean(lambda x, a=alpha, n=norm: convex(x["lex"], x["vec"], a, n)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--split", default="dev")
    parser.add_argument("--language", default=None)
    parser.add_argument("--dump")
    parser.add_argument("--load")
    args = parser.parse_args()
    if args.dump:
        dump(args)
    else:
        sweep(args)


if __name__ == "__main__":
    main()
