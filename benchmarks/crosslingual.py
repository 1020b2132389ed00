"""A cross-lingual dev check built from the dev sets themselves, translating nothing.

Arabic and French Wikipedia paragraphs often give a subject's English name in parentheses
("السرطان (بالإنجليزية: Cancer)", "l'Écosse (en anglais : Scotland)"). Each such name becomes an English
question whose answers are its article's paragraphs (the one that names it counts 2, the article's others 1).
The parentheses are taken out of every paragraph of the corpus, and a name still written elsewhere in its
article, or in its title, is left out, so the lexical lane cannot find the answer by its Latin letters: only
the embedder's cross-lingual meaning can.

``crosslingual_dataset(source, out)`` writes that check as a BEIR folder (``corpus.jsonl``, ``queries.jsonl``,
``qrels/dev.tsv``); ``evaluate --cross-lingual`` builds it in a temporary folder and evaluates it like any dev
set (``--abstention`` reports how many of its questions are still answered at each threshold).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

# "(بالإنجليزية: Name)" or "(en anglais : Name)", up to the closing parenthesis or a semicolon.
PATTERNS = (
    re.compile(r"\(\s*بالإنجليزية\s*:\s*([^)؛;]*)[^)]*\)"),
    re.compile(r"\(\s*en anglais\s*[:,]\s*([^)؛;]*)[^)]*\)", re.IGNORECASE),
)
_LATIN_RUN = re.compile(r"[A-Za-z][A-Za-z .'\-&]*[A-Za-z.]")
MIN_NAME_CHARS = 3


def _english_name(raw: str) -> str | None:
    """The Latin-script name at the start of ``raw`` ("United States of America يونايتد…" → the English part)."""
    found = _LATIN_RUN.match(raw.strip())
    if not found:
        return None
    name = " ".join(found.group(0).split()).strip(" .")
    return name if len(name) >= MIN_NAME_CHARS else None


def _without_names(text: str) -> str:
    for pattern in PATTERNS:
        text = pattern.sub("", text)
    return " ".join(text.split())


def crosslingual_dataset(source: Path, out: Path) -> dict[str, int]:
    """Write the check derived from the BEIR folder ``source`` into ``out``; returns its sizes."""
    docs: list[dict[str, str]] = []
    with (source / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            data = json.loads(line)
            docs.append({"_id": str(data["_id"]), "title": str(data.get("title") or ""), "text": str(data["text"])})
    by_title: dict[str, list[str]] = defaultdict(list)
    for doc in docs:
        by_title[doc["title"]].append(doc["_id"])
    named: dict[str, tuple[str, str]] = {}  # name (lower) -> (name, doc id naming it)
    for doc in docs:
        for pattern in PATTERNS:
            for match in pattern.finditer(doc["text"]):
                name = _english_name(match.group(1))
                if name and name.lower() not in named:
                    named[name.lower()] = (name, doc["_id"])
    cleaned = {doc["_id"]: _without_names(doc["text"]) for doc in docs}
    title_of = {doc["_id"]: doc["title"] for doc in docs}
    queries: dict[str, str] = {}
    qrels: list[tuple[str, str, int]] = []
    for i, (low, (name, doc_id)) in enumerate(sorted(named.items())):
        article = by_title[title_of[doc_id]]
        if any(low in cleaned[d].lower() for d in article) or low in title_of[doc_id].lower():
            continue  # still written in Latin letters in the answer: not a cross-lingual question
        qid = f"xl-{i}"
        queries[qid] = name
        for d in article:
            qrels.append((qid, d, 2 if d == doc_id else 1))
    out.mkdir(parents=True, exist_ok=True)
    (out / "qrels").mkdir(exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for doc in docs:
            handle.write(json.dumps({"_id": doc["_id"], "title": doc["title"], "text": cleaned[doc["_id"]]},
                                    ensure_ascii=False) + "\n")
    with (out / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for qid, text in queries.items():
            handle.write(json.dumps({"_id": qid, "text": text}, ensure_ascii=False) + "\n")
    with (out / "qrels" / "dev.tsv").open("w", encoding="utf-8") as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        for qid, doc_id, score in qrels:
            handle.write(f"{qid}\t{doc_id}\t{score}\n")
    return {"documents": len(docs), "questions": len(queries), "judgements": len(qrels)}
