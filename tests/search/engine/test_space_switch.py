"""Changing the embedding model is safe: the new space is built beside the searched one and flips atomically.

Old and new models are the hash embedder at 384 and 256 dimensions (``HASH_EMBEDDING_DIMENSIONS``).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from config.management.commands.up import Command as UpCommand
from search.embeddings import providers, spaces
from search.embeddings.providers import HashEmbedder, get_provider, provider_for_model, text_hash
from search.engine import retrieve, vector
from search.engine.scope import ItemScope
from search.errors import EmbeddingModelMismatch, EmbeddingUnavailable
from search.models import Chunk, EmbeddingCache, EmbeddingSpace, JobRun
from search.principal import Principal
from search.services import jobs, reembed, vector_index
from search.types import RetrievalQuery
from tests.factories import build, make_item

STAFF = Principal(kind="staff", all_content=True)
OLD, NEW = "hash-384", "hash-256"
QUERIES = ["harbour cranes tide", "pricing tender margins", "berth schedule quay"]
WORDS = ["harbour", "cranes", "tide", "pricing", "tender", "margins", "berth", "schedule", "quay", "pilot",
         "cargo", "customs", "freight", "dock", "anchor"]


@pytest.fixture(autouse=True)
def _known_space_forgotten() -> Iterator[None]:
    """The process remembers the active space; each test's database starts without one."""
    spaces._known_spaces.clear()
    yield
    spaces._known_spaces.clear()


@pytest.fixture
def vector_indexes_dropped() -> Iterator[None]:
    """Committed tests create and drop HNSW indexes, which the flush between tests keeps: drop them before
    the test (an earlier committed test elsewhere may have left one, e.g. the English lane's model) and
    after it."""
    _hnsw_indexes_drop()
    yield
    _hnsw_indexes_drop()
    connection.close()


def _hnsw_indexes_drop() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'search_chunk' AND indexname LIKE 'chunk_hnsw_%'"
        )
        for (name,) in cursor.fetchall():
            cursor.execute(f"DROP INDEX IF EXISTS {name}")


class SlowEmbedder(HashEmbedder):
    """The hash embedder, ``delay`` seconds per call; ``on_call(n)`` runs before call number ``n``."""

    def __init__(
        self, dimensions: int, *, delay: float = 0.0, on_call: Callable[[int], None] | None = None
    ) -> None:
        super().__init__(dimensions)
        self.delay = delay
        self.on_call = on_call
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.on_call:
            self.on_call(self.calls)
        time.sleep(self.delay)
        return super().embed(texts)


class DyingEmbedder(HashEmbedder):
    """Works for ``ok_calls`` calls, then the provider is down (the run dies half-way)."""

    def __init__(self, dimensions: int, *, ok_calls: int) -> None:
        super().__init__(dimensions)
        self.ok_calls = ok_calls
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls > self.ok_calls:
            raise EmbeddingUnavailable("The provider is down.")
        return super().embed(texts)


def _corpus(n: int, *, start: int = 0) -> None:
    for i in range(start, start + n):
        words = " ".join(WORDS[(i * 3 + k) % len(WORDS)] for k in range(6))
        make_item(title=f"Port note {i}", body=f"{words} lesson {i}.")


def _items_sql() -> Any:
    return ItemScope.of(STAFF, "live").items_sql()


def _lane(text: str) -> tuple[str, dict[int, float]]:
    """What the vector lane does for a search (retrieve's ``_vector_lane``): the query vector's model and
    every live chunk's similarity."""
    query_vector = vector.query_embedding(text)
    hits = vector.vector_search(vector=query_vector, corpus="live", items_sql=_items_sql(), limit=100)
    return query_vector.model, {h.chunk_id: h.similarity for h in hits}


def _brute_force(text: str, dimensions: int) -> dict[int, float]:
    """Every live chunk's cosine similarity to ``text`` in the hash space of ``dimensions``, in Python."""
    embedder = HashEmbedder(dimensions)
    chunks = list(Chunk.objects.filter(in_live=True).select_related("revision").order_by("pk"))
    vectors = embedder.embed(vector_index.chunk_texts(chunks))
    query = embedder.embed([text])[0]
    return {
        c.pk: sum(a * b for a, b in zip(query, v, strict=True)) for c, v in zip(chunks, vectors, strict=True)
    }


def _same(found: dict[int, float], expected: dict[int, float]) -> bool:
    return found.keys() == expected.keys() and all(abs(found[k] - expected[k]) < 1e-4 for k in expected)


def _index_names() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'search_chunk' "
            "AND indexname LIKE 'chunk_hnsw_%' ORDER BY 1"
        )
        return [row[0] for row in cursor.fetchall()]


def _assert_switched(*, chunks: int) -> None:
    """The end state of a complete switch to hash-256, whatever happened on the way."""
    current = list(Chunk.objects.current().select_related("revision").order_by("pk"))
    texts = vector_index.chunk_texts(current)
    expected = HashEmbedder(256).embed(texts)
    assert len(current) == chunks
    assert {c.embedding_model for c in current} == {NEW}
    assert [c.embedding_hash for c in current] == [text_hash(t) for t in texts]
    for chunk, vec in zip(current, expected, strict=True):
        assert list(map(float, chunk.embedding)) == pytest.approx(vec, abs=1e-6)
    assert not Chunk.objects.exclude(embedding_model=NEW).exists()
    # the next-space columns, which held the old vectors after the swap, are empty again
    assert not Chunk.objects.exclude(embedding_next_model="").exists()
    assert not Chunk.objects.filter(embedding_next__isnull=False).exists()
    spaces = sorted(
        (s.model, s.dimensions, s.state, s.active, s.chunks_done, s.chunks_total, s.last_error)
        for s in EmbeddingSpace.objects.all()
    )
    assert spaces == [(NEW, 256, "active", True, chunks, chunks, ""), (OLD, 384, "retired", False, 0, 0, "")]
    assert _index_names() == [vector_index.hnsw_index_name(NEW)]
    assert set(EmbeddingCache.objects.filter(model=NEW).values_list("text_hash", flat=True)) == {
        text_hash(t) for t in texts
    }


# --- providers of stored spaces --------------------------------------------------------------------------


def test_provider_for_model_names_the_provider_of_each_space(settings) -> None:
    # given / when / then: the models this version embeds with, sharing the configured instances
    assert provider_for_model("hash-256", 256).dimensions == 256
    assert provider_for_model("hash-384", 384) is providers._provider("hash", 384)
    assert provider_for_model("all-MiniLM-L6-v2", 384) is providers._provider("local", 384)
    assert provider_for_model("multilingual-e5-small-q4", 384) is providers._provider("e5", 0)
    assert isinstance(provider_for_model("multilingual-e5-small-q4", 384), providers.E5Embedder)
    # and clear refusals, each saying how to fix it
    with pytest.raises(EmbeddingModelMismatch, match="manage.py reembed"):
        provider_for_model("word2vec-300", 300)
    with pytest.raises(EmbeddingModelMismatch, match="says 128 dimensions but that model has 384"):
        provider_for_model("all-MiniLM-L6-v2", 128)
    settings.OPENAI_API_KEY = ""
    with pytest.raises(EmbeddingModelMismatch, match="OPENAI_API_KEY"):
        provider_for_model("text-embedding-3-large@1024", 1024)


def test_provider_for_model_builds_an_openai_space_of_its_own_size(settings) -> None:
    settings.OPENAI_API_KEY = "sk-test"
    settings.OPENAI_EMBEDDING_DIMENSIONS = 1024

    provider = provider_for_model("text-embedding-3-small@512", 512)

    assert (provider.name, provider.dimensions) == ("text-embedding-3-small@512", 512)


# --- while the new space builds ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_while_the_new_space_builds_every_search_uses_the_whole_old_space(settings, monkeypatch) -> None:
    # given a hash-384 corpus, and what the vector lane answers before any switch
    monkeypatch.setattr(vector_index, "EMBED_BATCH", 2)
    _corpus(6)
    build()
    before = {q: _lane(q) for q in QUERIES}
    exact = {q: _brute_force(q, 384) for q in QUERIES}

    # when the configured model becomes hash-256 and the switch has staged one batch
    settings.HASH_EMBEDDING_DIMENSIONS = 256
    spaces._known_spaces.clear()  # (as a freshly started process would)
    space = reembed.space_build_start(provider=get_provider())
    assert reembed.space_stage(space=space, provider=get_provider(), deadline=time.monotonic()) is False
    part_way = {q: _lane(q) for q in QUERIES}
    hybrid = retrieve(query=RetrievalQuery(text=QUERIES[0], principal=STAFF, threshold=0.0))
    # and a new item arrives and is built, then the staging completes (the flip has not happened)
    make_item(title="Port note new", body="harbour cranes tide pilot arrives")
    build()
    assert reembed.space_stage(space=space, provider=get_provider()) is True
    staged = {q: _lane(q) for q in QUERIES}

    # then every search compared a hash-384 query vector with the hash-384 space, and found what it found
    # before the switch began
    for q in QUERIES:
        model, hits = part_way[q]
        assert model == OLD and _same(hits, before[q][1]) and _same(hits, exact[q])
        assert vector.query_embedding(q) == pytest.approx(HashEmbedder(384).embed([q])[0])
    assert spaces.lane_model() == OLD
    assert not hybrid.degraded and hybrid.hits
    # and the chunk written during the build is in the old space too (the build embeds it there)
    for q in QUERIES:
        model, hits = staged[q]
        assert model == OLD and _same(hits, _brute_force(q, 384)) and len(hits) == 7
    assert set(Chunk.objects.values_list("embedding_model", flat=True)) == {OLD}
    space.refresh_from_db()
    assert (space.state, space.active, space.chunks_done, space.chunks_total) == ("building", False, 7, 7)
    assert EmbeddingSpace.objects.get(active=True).model == OLD


# --- resumable ---------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("interrupted", [False, True], ids=["uninterrupted", "killed-and-restarted"])
def test_a_switch_killed_half_way_and_restarted_ends_as_an_uninterrupted_one(
    interrupted: bool, settings, monkeypatch
) -> None:
    # given 7 chunks in batches of 2, moving from hash-384 to hash-256
    monkeypatch.setattr(vector_index, "EMBED_BATCH", 2)
    _corpus(7)
    build()
    settings.HASH_EMBEDDING_DIMENSIONS = 256

    if interrupted:
        # when the first run dies after two batches
        dying = DyingEmbedder(256, ok_calls=2)

        def dies() -> jobs.JobResult:
            report = reembed.corpus_reembed(provider=dying, sleep=lambda s: None, attempts=1)
            return jobs.JobResult(items_touched=report["embedded"])

        with pytest.raises(EmbeddingUnavailable):
            jobs.job_execute(job=jobs.REEMBED, run=dies)
        # then searches still have the whole old space, and the building space says where and why it stopped
        space = EmbeddingSpace.objects.get(model=NEW)
        assert (space.state, space.active, space.chunks_done, space.chunks_total) == ("building", False, 4, 7)
        assert "The provider is down." in space.last_error
        assert set(Chunk.objects.current().values_list("embedding_model", flat=True)) == {OLD}
        assert JobRun.objects.get(job=jobs.REEMBED).status == JobRun.Status.FAILED
        assert reembed.reembed_pending_count() == 3

    # when the switch runs (again)
    counting = SlowEmbedder(256)
    report = reembed.corpus_reembed(provider=counting)

    # then the end state is the uninterrupted one, and a restart embedded only what was left
    _assert_switched(chunks=7)
    assert report["state"] == "active" and report["previous_model"] == OLD
    assert report["embedded"] == (3 if interrupted else 7)
    assert counting.calls == (2 if interrupted else 4)


@pytest.mark.django_db(transaction=True)
def test_two_runs_at_once_flip_once_and_corrupt_nothing(
    settings, monkeypatch, vector_indexes_dropped
) -> None:
    # given a committed hash-384 corpus moving to hash-256
    monkeypatch.setattr(vector_index, "EMBED_BATCH", 2)
    _corpus(6)
    build()
    settings.HASH_EMBEDDING_DIMENSIONS = 256
    start = threading.Barrier(2)
    reports: list[reembed.ReembedReport] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            start.wait()
            reports.append(reembed.corpus_reembed(provider=SlowEmbedder(256, delay=0.02)))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    # when two runs go at once, without the job lock (the worst case)
    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    # then both finished, the space flipped once, and the state is that of one run
    assert not errors
    assert [r["state"] for r in reports] == ["active", "active"]
    _assert_switched(chunks=6)


# --- atomic, under load --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_switch_under_load_gives_every_search_one_whole_space(
    settings, monkeypatch, vector_indexes_dropped
) -> None:
    # given a committed hash-384 corpus, and each query's answer in the old and in the new space
    monkeypatch.setattr(vector_index, "EMBED_BATCH", 2)
    _corpus(10)
    build()
    old = {q: _brute_force(q, 384) for q in QUERIES}
    new = {q: _brute_force(q, 256) for q in QUERIES}
    assert all(not _same(old[q], new[q]) for q in QUERIES)  # the two spaces answer differently
    settings.HASH_EMBEDDING_DIMENSIONS = 256
    stop = threading.Event()
    flipped_at: list[float] = []
    records: list[tuple[str, float, str, str]] = []  # thread, started, query, "old" / "new" / "mixed"
    errors: list[str] = []
    lock = threading.Lock()

    def lane_searches(name: str) -> None:
        try:
            n = 0
            while not stop.is_set():
                q = QUERIES[n % len(QUERIES)]
                n += 1
                started = time.monotonic()
                try:
                    _, hits = _lane(q)
                except Exception as exc:  # noqa: BLE001 - every error is a failure of the test
                    with lock:
                        errors.append(f"{name}: {exc!r}")
                    continue
                label = "old" if _same(hits, old[q]) else "new" if _same(hits, new[q]) else "mixed"
                with lock:
                    records.append((name, started, q, label))
        finally:
            connection.close()

    def full_searches() -> None:
        try:
            while not stop.is_set():
                result = retrieve(query=RetrievalQuery(text=QUERIES[0], principal=STAFF, threshold=0.0))
                if result.degraded or not result.hits:
                    with lock:
                        errors.append(f"retrieve: degraded={result.degraded} hits={len(result.hits)}")
        except Exception as exc:  # noqa: BLE001
            with lock:
                errors.append(f"retrieve: {exc!r}")
        finally:
            connection.close()

    threads = [threading.Thread(target=lane_searches, args=(f"lane-{i}",)) for i in range(3)]
    threads.append(threading.Thread(target=full_searches))
    for thread in threads:
        thread.start()
    try:
        # when the switch runs (slowly: a pause per batch) and flips while they search
        time.sleep(0.3)
        report = reembed.corpus_reembed(provider=SlowEmbedder(256, delay=0.1))
        flipped_at.append(time.monotonic())
        time.sleep(0.5)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)

    # then no search failed, each saw one whole space, and every search that started after the flip saw
    # the new one; each thread, once it saw the new space, never saw the old one again
    assert report["state"] == "active"
    assert not errors, errors[:5]
    labels = [label for _, _, _, label in records]
    assert "mixed" not in labels
    assert labels.count("old") > 0 and labels.count("new") > 0
    assert all(label == "new" for _, started, _, label in records if started >= flipped_at[0])
    for name in {r[0] for r in records}:
        mine = [label for thread, _, _, label in sorted(records, key=lambda r: r[1]) if thread == name]
        assert "old" not in mine[mine.index("new"):] if "new" in mine else True
    _assert_switched(chunks=10)


# --- the flip swaps, it does not rewrite ------------------------------------------------------------


def _row_versions() -> dict[int, str]:
    """Each chunk row's physical place and version: an UPDATE of the row changes both."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, ctid::text || '/' || xmin::text FROM search_chunk")
        return dict(cursor.fetchall())


def _index_oid(name: str) -> int | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT oid FROM pg_class WHERE relname = %s", [name])
        row = cursor.fetchone()
    return row[0] if row else None


def _prepared_switch(settings: Any, items: int) -> EmbeddingSpace:
    """A committed hash-384 corpus of ``items`` items, and hash-256 staged and prepared beside it."""
    _corpus(items)
    build()
    settings.HASH_EMBEDDING_DIMENSIONS = 256
    space = reembed.space_build_start(provider=get_provider())
    assert reembed.space_stage(space=space, provider=get_provider()) is True
    assert reembed.space_prepare(space=space) is True
    return space


@pytest.mark.django_db(transaction=True)
def test_the_flip_rewrites_no_chunk_row_and_builds_no_index(settings, vector_indexes_dropped) -> None:
    # given hash-256 staged and prepared beside a searched hash-384 corpus: its vectors in the next-space
    # columns, its index built over them, and searches still on hash-384
    space = _prepared_switch(settings, 6)
    name = vector_index.hnsw_index_name(NEW)
    assert set(Chunk.objects.values_list("embedding_model", "embedding_next_model")) == {(OLD, NEW)}
    assert _lane(QUERIES[0])[0] == OLD
    rows, index = _row_versions(), _index_oid(name)
    assert index is not None

    # when the flip runs
    with CaptureQueriesContext(connection) as flip_queries:
        outcome = reembed.space_flip(space=space, provider=get_provider())

    # then nothing reads chunk rows once the swap holds its lock (searches wait on that lock: at 100k items a
    # count there held them 1-2 s)
    statements = [q["sql"] for q in flip_queries.captured_queries]
    locked = next(i for i, sql in enumerate(statements) if "IN ACCESS EXCLUSIVE MODE" in sql)
    reads_after = [sql for sql in statements[locked:] if re.search(r'FROM "?search_chunk"?\b', sql)]
    assert reads_after == []
    # and while writes wait (from the SHARE ROW EXCLUSIVE lock) the current chunks are scanned once for what the
    # prepare left unfilled and the corpus count together, beside the straggler check (saves waited for each
    # scan: about 2 s apiece at 500k chunks)
    writes_wait = next(i for i, sql in enumerate(statements) if "IN SHARE ROW EXCLUSIVE MODE" in sql)
    scans = [sql for sql in statements[writes_wait:locked]
             if re.search(r'FROM "?search_chunk"?\b', sql) and re.search(r'"in_live"|"in_latest"', sql)]
    assert len(scans) == 2, scans
    # and it swapped the column pairs: not one row was written, the index is the one built before (now
    # over the searched pair), and searches find the hash-256 space whole
    assert outcome.status == "flipped" and outcome.filled == 0 and outcome.stragglers == 0
    assert _row_versions() == rows
    assert _index_oid(name) == index
    assert vector_index.vector_index_ensure(space=EmbeddingSpace.objects.get(model=NEW)) == name
    assert _index_oid(name) == index  # (already over the searched pair: nothing rebuilt)
    assert set(Chunk.objects.values_list("embedding_model", "embedding_next_model")) == {(NEW, OLD)}
    # and each column's own indexes still carry its name (a migration that drops the column drops them)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'search_chunk' "
            "AND indexname LIKE 'search_chunk_embedding_%'"
        )
        plain = cursor.fetchall()
    assert len(plain) == 4
    for index, definition in plain:
        column = "embedding_next_model" if index.startswith("search_chunk_embedding_next_model") else "embedding_model"
        assert f"({column}" in definition, (index, definition)
    for q in QUERIES:
        model, hits = _lane(q)
        assert model == NEW and _same(hits, _brute_force(q, 256))


def _hold_chunk_reads(holding: threading.Event, release: threading.Event) -> None:
    """A long read of search_chunk (a slow report, say): its ACCESS SHARE lock lasts until ``release``."""
    from django.db import transaction

    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM search_chunk")
            holding.set()
            release.wait(30)
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_long_read_makes_the_flip_ask_again_and_searches_never_queue_behind_it(
    settings, vector_indexes_dropped
) -> None:
    # given a prepared switch, and a read of search_chunk that runs until told to stop
    space = _prepared_switch(settings, 4)
    holding, release = threading.Event(), threading.Event()
    reader = threading.Thread(target=_hold_chunk_reads, args=(holding, release))
    reader.start()
    assert holding.wait(10)
    outcomes: list[reembed.FlipOutcome] = []

    def flip() -> None:
        try:
            outcomes.append(reembed.space_flip(space=space, provider=get_provider()))
        finally:
            connection.close()

    searched: list[str] = []

    def search() -> None:
        try:
            for q in QUERIES * 3:
                searched.append(_lane(q)[0])
                time.sleep(0.05)
        finally:
            connection.close()

    flipper = threading.Thread(target=flip)
    searcher = threading.Thread(target=search)
    try:
        # when the flip starts (it cannot swap while the read runs) and searches run meanwhile
        flipper.start()
        time.sleep(reembed.SWAP_LOCK_TIMEOUT_MS / 1000)
        searcher.start()
        searcher.join(20)
        # then every search was answered, in the old space, while the read still ran and the flip waited
        assert not searcher.is_alive() and searched == [OLD] * len(QUERIES) * 3
        assert flipper.is_alive() and not outcomes
    finally:
        release.set()
        reader.join(10)
        flipper.join(30)
    # and once the read ended the flip swapped
    assert [o.status for o in outcomes] == ["flipped"]
    assert outcomes[0].swap_wait_s >= reembed.SWAP_LOCK_TIMEOUT_MS / 1000
    assert _lane(QUERIES[0])[0] == NEW


@pytest.mark.django_db(transaction=True)
def test_a_flip_that_never_gets_its_lock_gives_up_and_changes_nothing(
    settings, monkeypatch, vector_indexes_dropped
) -> None:
    # given a prepared switch, a read that outlasts every try of the swap, and a chunk written meanwhile
    space = _prepared_switch(settings, 3)
    monkeypatch.setattr(reembed, "SWAP_TRIES", 2)
    holding, release = threading.Event(), threading.Event()
    reader = threading.Thread(target=_hold_chunk_reads, args=(holding, release))
    reader.start()
    assert holding.wait(10)
    try:
        make_item(title="Port note late", body="harbour cranes tide pilot late")
        build()
        # when the flip runs
        outcome = reembed.space_flip(space=space, provider=get_provider())
    finally:
        release.set()
        reader.join(10)

    # then it was refused and rolled back whole: searches stay on hash-384, the space is still building,
    # and the late chunk's straggler work is undone with it (the next run does it again)
    assert outcome.status == "refused"
    assert spaces.lane_model() == OLD and _lane(QUERIES[0])[0] == OLD
    assert EmbeddingSpace.objects.get(model=NEW).state == "building"
    assert set(Chunk.objects.values_list("embedding_model", flat=True)) == {OLD}
    assert Chunk.objects.filter(embedding_next_model="").count() == 1
    # and the run's next try flips
    assert reembed.corpus_reembed(provider=get_provider())["state"] == "active"
    _assert_switched(chunks=4)


@pytest.mark.django_db
def test_switching_back_to_an_earlier_model_searches_its_vectors_again(settings) -> None:
    # given a corpus switched from hash-384 to hash-256
    _corpus(4)
    build()
    settings.HASH_EMBEDDING_DIMENSIONS = 256
    assert reembed.corpus_reembed()["state"] == "active"

    # when the configuration goes back to hash-384 and the switch runs again
    settings.HASH_EMBEDDING_DIMENSIONS = 384
    report = reembed.corpus_reembed()

    # then hash-384 is searched again, whole and exact, from the columns searches read, with its own index
    assert (report["previous_model"], report["state"]) == (NEW, "active")
    for q in QUERIES:
        model, hits = _lane(q)
        assert model == OLD and _same(hits, _brute_force(q, 384))
    assert set(Chunk.objects.values_list("embedding_model", "embedding_next_model")) == {(OLD, "")}
    assert _index_names() == [vector_index.hnsw_index_name(OLD)]


@pytest.mark.django_db
def test_a_query_vector_of_the_old_space_that_meets_the_new_one_is_embedded_again(settings) -> None:
    # given a hash-384 corpus, and a query and an item vector computed just before a switch flipped
    _corpus(4)
    build()
    settings.HASH_EMBEDDING_DIMENSIONS = 256
    text = QUERIES[0]
    item = Chunk.objects.filter(in_live=True).order_by("pk").first()
    assert item is not None
    query_vector = vector.query_embedding(text)
    item_vector = vector.item_vector(item.item_id, "live")
    assert query_vector.model == item_vector.model == OLD  # type: ignore[union-attr]
    reembed.corpus_reembed()
    key = next(iter(spaces._known_spaces), None) or (connection.alias, str(connection.settings_dict["NAME"]))

    for stale in (True, False):
        # when this process still believes hash-384 is active (another process flipped), or knows better
        if stale:
            spaces._known_spaces[key] = (OLD, 384, time.monotonic())
        else:
            spaces._known_spaces.clear()
        hits = vector.vector_search(vector=query_vector, corpus="live", items_sql=_items_sql(), limit=100)
        similar = vector.vector_search(
            vector=item_vector,  # type: ignore[arg-type]
            corpus="live", items_sql=_items_sql(), limit=100, exclude_item=item.item_id,
        )
        fresh_item = vector.item_vector(item.item_id, "live")
        expected_similar = vector.vector_search(
            vector=fresh_item,  # type: ignore[arg-type]
            corpus="live", items_sql=_items_sql(), limit=100, exclude_item=item.item_id,
        )

        # then both were compared in the new space, as hash-256 vectors
        assert _same({h.chunk_id: h.similarity for h in hits}, _brute_force(text, 256))
        assert fresh_item is not None and fresh_item.model == NEW
        assert similar == expected_similar and similar
    assert spaces.lane_model() == NEW


@pytest.mark.django_db
def test_a_backfill_batch_of_the_old_model_never_lands_after_the_flip(settings) -> None:
    # given a hash-384 corpus staged in hash-256, and a new chunk the build has not embedded yet
    _corpus(3)
    build()
    settings.HASH_EMBEDDING_DIMENSIONS = 256
    space = reembed.space_build_start(provider=get_provider())
    assert reembed.space_stage(space=space, provider=get_provider())
    _corpus(1, start=50)
    flipped: list[str] = []

    def flip_meanwhile(n: int) -> None:
        if n == 1:  # while the backfill embeds its batch with hash-384, the switch flips
            flipped.append(reembed.space_flip(space=space, provider=get_provider()).status)

    # when the old model's backfill runs into the flip
    written = vector_index.embeddings_backfill(provider=SlowEmbedder(384, on_call=flip_meanwhile))

    # then the backfill wrote nothing, and the new chunk is in the new space (a straggler of the flip)
    assert flipped == ["flipped"] and written == 0
    assert set(Chunk.objects.values_list("embedding_model", flat=True)) == {NEW}


# --- chunks written during the build -------------------------------------------------------------------


@pytest.mark.django_db
def test_chunks_written_during_the_build_and_just_before_the_flip_are_in_the_new_space(
    settings, monkeypatch
) -> None:
    # given a hash-384 corpus, a switch whose second batch sees a new item arrive, and one more item
    # written between the last staging pass and the flip
    monkeypatch.setattr(vector_index, "EMBED_BATCH", 2)
    _corpus(4)
    build()
    settings.HASH_EMBEDDING_DIMENSIONS = 256
    provider = SlowEmbedder(256, on_call=lambda n: _corpus(1, start=100) if n == 2 else None)
    flip = reembed.space_flip
    stragglers: list[int] = []

    def flip_after_a_write(**kwargs: Any) -> reembed.FlipOutcome:
        if not stragglers:
            _corpus(1, start=200)
        outcome = flip(**kwargs)
        stragglers.append(outcome.stragglers)
        return outcome

    monkeypatch.setattr(reembed, "space_flip", flip_after_a_write)

    # when
    report = reembed.corpus_reembed(provider=provider)

    # then both are in the new space at the flip (the last one embedded inside the flip's transaction)
    assert report["state"] == "active"
    assert stragglers == [1]
    _assert_switched(chunks=6)
    model, hits = _lane("harbour cranes tide")
    assert model == NEW and _same(hits, _brute_force("harbour cranes tide", 256))


@pytest.mark.django_db
def test_a_flip_with_too_many_new_chunks_gives_up_and_stages_them_first(settings, monkeypatch) -> None:
    # given a flip allowed no stragglers, and two items written just before the first flip
    monkeypatch.setattr(vector_index, "EMBED_BATCH", 2)
    monkeypatch.setattr(reembed, "FLIP_STRAGGLERS_MAX", 0)
    _corpus(3)
    build()
    settings.HASH_EMBEDDING_DIMENSIONS = 256
    flip = reembed.space_flip
    outcomes: list[str] = []

    def flip_after_writes(**kwargs: Any) -> reembed.FlipOutcome:
        if not outcomes:
            _corpus(2, start=300)
        outcome = flip(**kwargs)
        outcomes.append(outcome.status)
        return outcome

    monkeypatch.setattr(reembed, "space_flip", flip_after_writes)

    # when
    report = reembed.corpus_reembed()

    # then the first flip changed nothing, the run staged the newcomers, and the second flip took all
    assert outcomes == ["refused", "flipped"]
    assert report["state"] == "active" and report["embedded"] == 5
    _assert_switched(chunks=5)


# --- a fresh knowledge base, the task, the admin, `up` ------------------------------------------------------


@pytest.mark.django_db
def test_reembed_on_a_fresh_knowledge_base_activates_and_embeds() -> None:
    # given chunks and no embedding space yet (a row committed by another test's server process may be there)
    EmbeddingSpace.objects.all().delete()
    _corpus(3)
    out = StringIO()

    # when
    call_command("reembed", stdout=out, stderr=StringIO())

    # then the configured model is active at once, with every chunk embedded; nothing was staged
    assert "from no model to hash-384 (384 dims): 3 chunk(s) to embed" in out.getvalue()
    assert "3 chunk(s) embedded; the vector lane now searches hash-384" in out.getvalue()
    assert list(EmbeddingSpace.objects.values_list("model", "state", "active")) == [(OLD, "active", True)]
    assert set(Chunk.objects.values_list("embedding_model", flat=True)) == {OLD}


@pytest.mark.django_db
def test_the_switch_task_moves_the_corpus_then_has_nothing_to_do(settings) -> None:
    from config.celery import app
    from search.tasks import embedding_space_switch_task

    # given the beat entry, and a hash-384 corpus configured for hash-256
    entry = settings.CELERY_BEAT_SCHEDULE["embedding-space-switch"]
    assert entry["task"] == "search.embedding_space_switch" and entry["task"] in app.tasks
    _corpus(3)
    build()
    assert embedding_space_switch_task.apply().get() == "embedding_space_switch: nothing to do"
    settings.HASH_EMBEDDING_DIMENSIONS = 256
    assert reembed.space_switch_status().needed

    # when the worker runs it twice
    first = embedding_space_switch_task.apply().get()
    second = embedding_space_switch_task.apply().get()

    # then the first switched, the second found nothing to do
    assert "reembed: 3 item(s) touched" in first
    assert second == "embedding_space_switch: nothing to do"
    _assert_switched(chunks=3)


@pytest.mark.django_db
def test_the_admin_shows_each_space_and_the_progress_of_a_build(settings, monkeypatch) -> None:
    # given a hash-384 corpus of 4 chunks, and a switch to hash-256 that has staged 2 of them
    monkeypatch.setattr(vector_index, "EMBED_BATCH", 2)
    _corpus(4)
    build()
    settings.HASH_EMBEDDING_DIMENSIONS = 256
    space = reembed.space_build_start(provider=get_provider())
    reembed.space_stage(space=space, provider=get_provider(), deadline=time.monotonic())
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(admin)

    # when
    page = client.get("/admin/search/embeddingspace/")
    add = client.get("/admin/search/embeddingspace/add/")

    # then both spaces, their state and progress; nothing to add or edit
    html = page.content.decode()
    assert page.status_code == 200
    assert "hash-384" in html and "active (searched)" in html and "4/4 (100%)" in html
    assert "hash-256" in html and "building (waiting for the worker)" in html and "2/4 (50%)" in html
    assert '<progress value="2" max="4"' in html
    assert add.status_code == 403


@pytest.mark.django_db
def test_up_on_a_mismatch_says_searches_keep_the_old_model_and_queues_the_switch(
    settings, monkeypatch
) -> None:
    # given a hash-384 knowledge base started with hash-256 configured
    _corpus(2)
    build()
    settings.HASH_EMBEDDING_DIMENSIONS = 256
    queued: list[bool] = []
    monkeypatch.setattr(
        "search.tasks.embedding_space_switch_enqueue", lambda **kw: queued.append(True) or True
    )
    out = StringIO()

    # when up's start path runs
    UpCommand(stdout=out, stderr=StringIO())._first_start({"no_demo": True, "no_worker": False})

    # then it did not raise: one line, the switch queued for the worker, searches still on hash-384
    assert (
        "Searches keep using hash-384 while hash-256 is built in the background (progress: admin, "
        "Embedding spaces)." in out.getvalue()
    )
    assert queued == [True]
    assert spaces.lane_model() == OLD
    # and without a worker it names the command instead
    out = StringIO()
    UpCommand(stdout=out, stderr=StringIO())._first_start({"no_demo": True, "no_worker": True})
    assert "built by `python manage.py reembed` (no worker is running)" in out.getvalue()
    assert queued == [True]
