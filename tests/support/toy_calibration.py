"""The toy confidence calibration every test searches with (``config/settings/test.py`` points the engine at it).

Fitted, not written by hand: the demo knowledge base (search/demo, English, French and Arabic) is loaded with
the deterministic test embedder, each public item's keywords become a question whose answer is that item,
made-up words and questions whose items are archived become off-collection questions, and the same fit as
``evaluate --calibrate`` (benchmarks.calibration) turns what the engine recorded into the table.

``tests/search/engine/test_toy_calibration.py`` refits it and compares with the committed file, so a change
to the features or the fit that would change it fails until the file is refitted:
``KB_REFIT_TOY_CALIBRATION=1 python -m pytest tests/search/engine/test_toy_calibration.py``.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

from django.test import override_settings

TOY_TABLE = Path(__file__).resolve().parent.parent / "fixtures" / "confidence_toy.json"
DEMO = Path(__file__).resolve().parent.parent.parent / "search" / "demo" / "kb_published.jsonl"


_WORDS = re.compile(r"\w+")


def _public_items() -> list[dict[str, Any]]:
    with DEMO.open(encoding="utf-8") as handle:
        items = [json.loads(line) for line in handle]
    return [i for i in items if i.get("visibility", "public") == "public" and not i.get("archived")
            and not i.get("superseded_by")]


def toy_questions() -> dict[str, tuple[str, set[str]]]:
    """qid → (question, the external ids of its answers), three per public, live demo item: its title (answered
    by that item), its first keywords (answered by every item whose title and keywords hold all their words), and
    four words of a sentence of its body (answered by that item; some answers hold every word, some a few)."""
    out: dict[str, tuple[str, set[str]]] = {}
    rng = random.Random(17)
    items = _public_items()
    described = {i["id"]: set(_WORDS.findall((i["title"] + " " + " ".join(i.get("ai_keywords") or [])).lower()))
                 for i in items}
    for item in items:
        out[f"toy-{item['id']}-t"] = (item["title"], {item["id"]})
        words = [w for w in item.get("ai_keywords") or [] if w][:2]
        if words:
            text = " ".join(words)
            needed = set(_WORDS.findall(text.lower()))
            out[f"toy-{item['id']}-k"] = (text, {d for d, held in described.items() if needed <= held})
        sentences = [s for s in re.split(r"(?<=[.!?؟])\s+", re.sub(r"[#*|>\-]+", " ", item["body"])) if s]
        long = [s.split() for s in sentences if len(s.split()) >= 8]
        if long:
            sentence = rng.choice(long)
            picked = sorted(rng.sample(range(len(sentence)), 4))
            out[f"toy-{item['id']}-s"] = (" ".join(sentence[i] for i in picked), {item["id"]})
    return out


def toy_fit(path: Path) -> dict[str, Any]:
    """Load the demo, record every kind of question and fit the table into ``path`` (inside a test with the
    database, on an empty knowledge base, with the hash embedder)."""
    from benchmarks import calibration
    from search.embeddings.spaces import lane_model
    from search.engine import background
    from search.services import demo, indexing

    demo.demo_load()
    indexing.index_rebuild()
    background.background_forget()
    questions = toy_questions()
    texts = {qid: text for qid, (text, _) in questions.items()}
    answer = {qid: docs for qid, (_, docs) in questions.items()}
    keywords, keyword_answers = calibration.keyword_queries(_published_dataset(), n=60, most=10)
    rng = random.Random(13)
    held = set(rng.sample(sorted(questions), k=len(questions) // 5))
    collected = calibration.Collected()
    # The vector lane searches exactly (ef_search past the demo's chunk count): the HNSW graph keeps the entries
    # of earlier tests' rolled-back chunks, and an approximate search over it would make the fit depend on
    # which tests ran before.
    exact = {"HNSW_EF_SEARCH": 1000, "HNSW_MAX_SCAN_TUPLES": 1_000_000}
    with override_settings(SEARCH={**_search_settings(), **exact, "CONFIDENCE_TABLE": str(path)}):
        for head in calibration.HEADS_RUN:
            collected.searches += calibration.run_recorded(
                texts, kind="in", mode=head, relevant_of=lambda q: answer[q]
            )
            collected.searches += calibration.run_recorded(
                keywords, kind="keyword", mode=head, relevant_of=lambda q: keyword_answers[q]
            )
            collected.searches += calibration.run_recorded(
                calibration.nonsense_queries("en", n=40), kind="nonsense", mode=head, relevant_of=lambda q: set()
            )
        with calibration.documents_archived({d for q in held for d in questions[q][1]}):
            for head in calibration.HEADS_RUN:
                collected.searches += calibration.run_recorded(
                    {q: texts[q] for q in sorted(held)}, kind="same_language", mode=head,
                    relevant_of=lambda q: set(),
                )
        if path.exists():
            path.unlink()
        return calibration.table_fit(collected, model=lane_model(), language="*", dataset="demo (toy, hash embedder)")


def _published_dataset() -> Any:
    """The demo's public, live items as a BEIR-like dataset (for the keyword questions of their titles)."""
    import tempfile

    from benchmarks.evaluation import Dataset

    folder = Path(tempfile.mkdtemp(prefix="kb-toy-"))
    with DEMO.open(encoding="utf-8") as handle, (folder / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for line in handle:
            item = json.loads(line)
            if item.get("visibility", "public") == "public" and not item.get("archived"):
                out.write(json.dumps({"_id": item["id"], "title": item["title"], "text": ""}) + "\n")
    return Dataset(folder / "corpus.jsonl", {}, {})


def _search_settings() -> dict[str, Any]:
    from django.conf import settings

    return dict(settings.SEARCH)
