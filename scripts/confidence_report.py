"""Render the confidence figures of docs/benchmarks.md from ``evaluate --from-dump … --json`` outputs.

Usage (one JSON file per dev set and embedder, each the last line of a refit):
    python manage.py evaluate --dataset ../shared/datasets/ar_wikiqa --from-dump /tmp/ar-e5.npz --json \
        | tail -1 > /tmp/ar-e5.json
    python scripts/confidence_report.py /tmp/ar-e5.json /tmp/fr-e5.json /tmp/en-e5.json

Prints, per file: the abstention table at the thresholds the surfaces use (cross-validated: each question
scored by models fitted without it), and the reliability diagram of the hybrid head (with its vector floor)
on the dev set's own questions against their judged answers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

THRESHOLDS = ("0.25", "0.3", "0.35", "0.4", "0.5")
ANSWERED = ("in_answered", "known_item_answered", "keyword_answered", "rare_word_answered")
OFF = ("other_language_abstained", "same_language_abstained", "nonsense_abstained")


def report(path: Path) -> str:
    data = json.loads(path.read_text(encoding="utf-8"))
    ab = data.get("abstention_cross_validated") or data["abstention"]
    lines = [f"#### {data['model']}, {data['language']} ({path.stem})", ""]
    lines.append("| threshold | " + " | ".join(ANSWERED + OFF) + " |")
    lines.append("|---" * (1 + len(ANSWERED) + len(OFF)) + "|")
    for t in THRESHOLDS:
        row = ab["thresholds"].get(t)
        if row is None:
            continue
        cells = [f"{row[k]:.3f}" if k in row else "–" for k in ANSWERED + OFF]
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"Questions: {ab['queries']}; a judged answer in the top 10 at all: {ab['in_success@10']}.")
    fit = data["confidence_fit"].get("hybrid_with_vector_floor") or data["confidence_fit"].get("hybrid")
    if fit:
        lines += ["", "| confidence bin | hits | mean confidence | share relevant (judged) |", "|---|---|---|---|"]
        for b in fit["reliability_judged"]:
            lines.append(f"| {b['bin']} | {b['hits']} | {b['confidence']:.3f} | {b['relevant']:.3f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(report(Path(arg)))  # noqa: T201
