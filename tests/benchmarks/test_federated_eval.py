"""``evaluate --federated N`` end to end on a tiny dataset: shards in scratch databases, a real web server per
peer, the shipped merge scored beside one instance and beside the merge by confidence, on the same answers."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.benchmarks.test_bench import SENTENCES

pytestmark = pytest.mark.slow


@pytest.fixture
def judged(tmp_path: Path) -> Path:
    """24 documents recombining the sentences, one question per sentence whose answer is the document that
    opens with it."""
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for n in range(24):
            picked = [SENTENCES[(n + k * 5) % len(SENTENCES)] for k in range(3)]
            handle.write(json.dumps({"_id": f"d{n}", "title": picked[0].rstrip("."), "text": " ".join(picked)}) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as handle, \
            (folder / "qrels" / "dev.tsv").open("w", encoding="utf-8") as qrels:
        qrels.write("query-id\tcorpus-id\tscore\n")
        for n, sentence in enumerate(SENTENCES):
            handle.write(json.dumps({"_id": f"q{n}", "text": sentence}) + "\n")
            qrels.write(f"q{n}\td{n}\t1\nq{n}\td{n + 12}\t1\n")
    return folder


def test_evaluate_federated_scores_the_merge_against_one_instance(
    judged: Path, django_db_setup, django_db_blocker
) -> None:
    out, err = io.StringIO(), io.StringIO()
    with django_db_blocker.unblock():
        call_command("evaluate", "--dataset", str(judged), "--split", "dev", "--mode", "hybrid", "--federated", "2",
                     "--language", "en", "--json", stdout=out, stderr=err)
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    # both instances answered every question, and every hit mapped back to a document
    assert report["instances"] == 2 and sum(s["documents"] for s in report["shards"]) == 24
    assert report["source_failures"] == {} and report["unmapped_hits"] == 0
    assert report["single"]["queries"] == report["federated"]["queries"] == len(SENTENCES)
    # the shipped merge and the merge by confidence, each scored against one instance on the same answers
    for merged, ratio in (("federated", "ndcg@10_ratio"), ("federated_by_confidence", "ndcg@10_ratio_by_confidence")):
        assert 0 < report[merged]["ndcg@10"] <= 1
        assert report[ratio] == round(report[merged]["ndcg@10"] / report["single"]["ndcg@10"], 4)
    assert "p50_ms" not in report["federated_by_confidence"]
    assert "merged by confidence" in err.getvalue()
