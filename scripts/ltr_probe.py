"""Would LightGBM lambdarank over the fusion-time features beat the fusion's order? An offline check.

Record the in-collection questions of each dev set once (the candidates' confidence features, best first, as
the engine saw them; embeddings come from the cache of an earlier ``evaluate`` in the same KB_HOME):
    KB_HOME=/tmp/kb-ar EMBEDDING_PROVIDER=e5 python manage.py evaluate --dataset ../shared/datasets/ar_wikiqa \
        --split dev --mode hybrid --dump /tmp/dump-ar.npz --kinds in
then (LightGBM is not a dependency of the product: ``pip install lightgbm==4.7.0`` first):
    python scripts/ltr_probe.py ar=/tmp/dump-ar.npz fr=/tmp/dump-fr.npz en=/tmp/dump-en.npz --depth 50 --trees 200

Each question's first ``depth`` candidates are reordered by the model (the rest keep the fusion's order) and
nDCG@10 is taken against its judged answers, as ``evaluate`` counts them. Three fits per language, questions
split in ``calibration.FOLDS`` folds by id: its own language's other folds (``cv``), every language's other
folds (``pooled_cv``, with the standard error of the per-question difference to the fusion), and only the
other languages (``transfer``). Features: the engine's ``confidence.FEATURES`` and the fusion position
(1 / (1 + position), log(1 + position)). docs/benchmarks.md has the figures of 2026-12-07.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")


@dataclass
class Question:
    qid: str
    features: np.ndarray  # the first ``depth`` candidates
    labels: np.ndarray  # 1: a judged answer (the first ``depth`` candidates)
    judged: int
    every_label: np.ndarray  # every candidate's, fusion order


def questions_of(path: Path, depth: int) -> list[Question]:
    from benchmarks import calibration

    out = []
    for s in calibration.collected_load(path).searches:
        if s.kind != "in" or s.head != "hybrid":
            continue
        n = min(len(s.matrix), depth)
        position = np.arange(n, dtype=float)
        features = np.column_stack([s.matrix[:n], 1.0 / (position + 1), np.log1p(position)])
        out.append(Question(s.qid, features, s.answers[:n].astype(int), s.judged, s.answers.astype(int)))
    return out


def ndcg10(labels: list[int], judged: int) -> float:
    dcg = sum(r / math.log2(i + 2) for i, r in enumerate(labels[:10]))
    ideal = sum(1 / math.log2(i + 2) for i in range(min(judged, 10)))
    return dcg / ideal if ideal else 0.0


def fit(questions: list[Question], trees: int) -> Any:
    import lightgbm

    model = lightgbm.LGBMRanker(
        objective="lambdarank", n_estimators=trees, learning_rate=0.05, num_leaves=15, min_child_samples=20,
        subsample=0.8, subsample_freq=1, colsample_bytree=0.8, reg_lambda=1.0, random_state=0, verbose=-1,
        lambdarank_truncation_level=20,
    )
    model.fit(np.vstack([q.features for q in questions]), np.concatenate([q.labels for q in questions]),
              group=[len(q.labels) for q in questions])
    return model


def gains(model: Any, questions: list[Question]) -> np.ndarray:
    """Per question: nDCG@10 reordered by the model minus nDCG@10 in the fusion's order."""
    out = []
    for q in questions:
        order = np.argsort(-model.predict(q.features), kind="stable")
        reordered = [*q.labels[order], *q.every_label[len(q.labels):]]
        out.append(ndcg10(reordered, q.judged) - ndcg10(list(q.every_label), q.judged))
    return np.array(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dumps", nargs="+", help="language=path of an `evaluate --dump --kinds in` recording")
    parser.add_argument("--depth", type=int, default=50, help="candidates the model reorders")
    parser.add_argument("--trees", type=int, default=200)
    args = parser.parse_args()
    import django

    django.setup()
    from benchmarks import calibration

    data = {}
    for spec in args.dumps:
        language, _, path = spec.partition("=")
        data[language] = questions_of(Path(path), args.depth)
    report: dict[str, Any] = {"depth": args.depth, "trees": args.trees}
    for language, questions in data.items():
        fusion = np.mean([ndcg10(list(q.every_label), q.judged) for q in questions])
        own, pooled = np.zeros(len(questions)), np.zeros(len(questions))
        for fold in range(calibration.FOLDS):
            test = [i for i, q in enumerate(questions) if calibration.fold_of(q.qid) == fold]
            tested = [questions[i] for i in test]
            mine = [q for q in questions if calibration.fold_of(q.qid) != fold]
            every = [q for qs in data.values() for q in qs if calibration.fold_of(q.qid) != fold]
            own[test] = gains(fit(mine, args.trees), tested)
            pooled[test] = gains(fit(every, args.trees), tested)
        others = [q for other, qs in data.items() if other != language for q in qs]
        transfer = gains(fit(others, args.trees), questions).mean() if others else math.nan
        report[language] = {
            "questions": len(questions),
            "fusion": round(float(fusion), 4),
            "cv": round(float(fusion + own.mean()), 4),
            "pooled_cv": round(float(fusion + pooled.mean()), 4),
            "pooled_gain_se": round(float(pooled.std(ddof=1) / math.sqrt(len(pooled))), 4),
            "transfer": round(float(fusion + transfer), 4),
        }
        print(language, report[language], file=sys.stderr, flush=True)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
