"""Embedding backfill with back-off, `reembed` to a new model, the OpenAI embedder against a local fake."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from search.embeddings.providers import HashEmbedder, OpenAIEmbedder, get_provider
from search.engine import retrieve
from search.errors import EmbeddingModelMismatch, EmbeddingUnavailable
from search.models import Chunk, EmbeddingSpace, JobRun
from search.principal import Principal
from search.services import jobs, reembed, vector_index
from search.services import spaces as space_writes
from search.types import RetrievalQuery
from tests.factories import build, make_item
from tests.search.fake_openai import FakeOpenAI, fake_vector, serving

STAFF = Principal(kind="staff", all_content=True)


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with serving() as server:
        yield server


class FlakyEmbedder(HashEmbedder):
    """A hash embedder whose calls number ``fail_on`` (1-based) raise EmbeddingUnavailable."""

    def __init__(self, dimensions: int, fail_on: set[int]) -> None:
        super().__init__(dimensions)
        self.fail_on = fail_on
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls in self.fail_on:
            raise EmbeddingUnavailable("The provider is down.")
        return super().embed(texts)


def _corpus(n: int = 6) -> list[int]:
    return [
        make_item(title=f"Tender guide {i}", body=f"Pricing tenders, lesson {i}: costs and margins.").pk
        for i in range(n)
    ]


def _expected(provider: HashEmbedder) -> dict[int, list[float]]:
    chunks = list(Chunk.objects.current().select_related("revision").order_by("pk"))
    texts = [vector_index.chunk_embedding_text(c.revision.title, c.toc_path, c.text) for c in chunks]
    return {c.pk: v for c, v in zip(chunks, provider.embed(texts), strict=True)}


def _stored(model: str) -> dict[int, list[float]]:
    return {
        pk: list(map(float, emb))
        for pk, emb in Chunk.objects.current().filter(embedding_model=model).values_list("pk", "embedding")
    }


def _assert_same_vectors(stored: dict[int, list[float]], expected: dict[int, list[float]]) -> None:
    assert stored.keys() == expected.keys()
    for pk, vec in expected.items():
        assert stored[pk] == pytest.approx(vec, abs=1e-6)


def _index_exists(model: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", [vector_index.hnsw_index_name(model)])
        return cursor.fetchone() is not None


@pytest.mark.django_db
def test_backfill_backs_off_and_resumes_when_the_provider_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    # given 6 chunks in batches of 2, and a provider failing on its 2nd and 3rd calls
    monkeypatch.setattr(vector_index, "EMBED_BATCH", 2)
    _corpus(6)
    provider = FlakyEmbedder(384, fail_on={2, 3})
    sleeps: list[float] = []

    # when
    done = reembed.embeddings_backfill_run(
        provider=provider, sleep=sleeps.append, base_delay_s=2, max_delay_s=60
    )

    # then it waited 2 s then 4 s, and embedded everything exactly once
    assert sleeps == [2, 4]
    assert done == 6
    _assert_same_vectors(_stored(provider.name), _expected(HashEmbedder(384)))


@pytest.mark.django_db
def test_backfill_gives_up_after_its_attempts_and_keeps_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a provider that dies after the first batch
    monkeypatch.setattr(vector_index, "EMBED_BATCH", 2)
    _corpus(6)
    provider = FlakyEmbedder(384, fail_on=set(range(2, 100)))
    sleeps: list[float] = []

    # when / then
    with pytest.raises(EmbeddingUnavailable):
        reembed.embeddings_backfill_run(
            provider=provider, sleep=sleeps.append, attempts=3, base_delay_s=1, max_delay_s=1.5
        )
    assert sleeps == [1, 1.5]  # capped
    assert len(_stored(provider.name)) == 2  # the committed batch stays


@pytest.mark.django_db
def test_a_model_mismatch_is_not_retried() -> None:
    # given a corpus embedded with hash-384, and a different provider
    _corpus(2)
    build()
    sleeps: list[float] = []

    # when / then
    with pytest.raises(EmbeddingModelMismatch, match="reembed"):
        reembed.embeddings_backfill_run(provider=HashEmbedder(256), sleep=sleeps.append)
    assert sleeps == []


@pytest.mark.django_db
def test_backfill_command(monkeypatch: pytest.MonkeyPatch) -> None:
    # given chunks without embeddings
    _corpus(3)
    out, err = StringIO(), StringIO()

    # when
    call_command("backfill_embeddings", stdout=out, stderr=err)

    # then
    assert "3 chunk(s) embedded" in out.getvalue()
    assert "embed" in err.getvalue()  # the progress bar
    assert JobRun.objects.get(job=jobs.EMBEDDINGS_BACKFILL).items_touched == 3
    assert len(_stored(get_provider().name)) == 3


@pytest.mark.django_db
def test_reembed_moves_the_corpus_to_the_configured_model(settings) -> None:
    # given a corpus built with hash-384, then the configuration changed to hash-256
    _corpus(4)
    build()
    assert _index_exists("hash-384")
    settings.HASH_EMBEDDING_DIMENSIONS = 256
    # (searches keep the complete hash-384 space until the switch: no refusal any more)
    assert space_writes.active_space().model == "hash-384"
    out, err = StringIO(), StringIO()

    # when
    call_command("reembed", stdout=out, stderr=err)

    # then every current chunk has a hash-256 vector, the space is active with its index, the old index went
    assert "from hash-384 (384 dims) to hash-256 (256 dims): 4 chunk(s) to embed" in out.getvalue()
    # (and the command named each step after the embedding, in order, with a bar over the id ranges)
    said = err.getvalue()
    steps = ["reembed: putting its vectors beside the searched ones", "reembed: building its index",
             "reembed: emptying the previous model's vectors"]
    assert all(step in said for step in steps), said
    assert [said.index(step) for step in steps] == sorted(said.index(step) for step in steps)
    assert said.count("id ranges") >= 2
    _assert_same_vectors(_stored("hash-256"), _expected(HashEmbedder(256)))
    assert not Chunk.objects.exclude(embedding_model="hash-256").exists()
    space = space_writes.active_space()
    assert (space.model, space.dimensions) == ("hash-256", 256)
    assert list(EmbeddingSpace.objects.filter(active=True).values_list("model", flat=True)) == ["hash-256"]
    assert _index_exists("hash-256") and not _index_exists("hash-384")
    result = retrieve(
        query=RetrievalQuery(
            text="pricing tenders margins",
            principal=STAFF,
            corpus="latest",
            mode="vector",
            limit=5,
            threshold=0.0,
        )
    )
    assert result.hits and not result.degraded
    run = JobRun.objects.get(job=jobs.REEMBED)
    assert run.status == JobRun.Status.SUCCEEDED and run.items_touched == 4


@pytest.mark.django_db
def test_reembed_interrupted_then_rerun_reaches_the_same_state(
    settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a hash-384 corpus moving to hash-256, and a provider that dies after the first batch
    monkeypatch.setattr(vector_index, "EMBED_BATCH", 2)
    _corpus(5)
    build()
    settings.HASH_EMBEDDING_DIMENSIONS = 256
    flaky = FlakyEmbedder(256, fail_on=set(range(2, 100)))

    # when the first run stops half-way
    with pytest.raises(EmbeddingUnavailable):
        reembed.corpus_reembed(provider=flaky, sleep=lambda s: None, attempts=1)
    building = EmbeddingSpace.objects.get(model="hash-256")
    halfway = reembed.reembed_pending_count()
    searched = _stored("hash-384")
    # and the command runs again with a working provider
    call_command("reembed", stdout=StringIO(), stderr=StringIO())

    # then the first run had staged one batch beside the space searches kept using (not the searched
    # vectors: those stay hash-384 until the flip), the rerun finished the rest, and the result equals an
    # uninterrupted move
    assert (building.state, building.active, building.chunks_done, halfway) == ("building", False, 2, 3)
    assert "provider is down" in building.last_error
    _assert_same_vectors(searched, _expected(HashEmbedder(384)))
    _assert_same_vectors(_stored("hash-256"), _expected(HashEmbedder(256)))
    assert _index_exists("hash-256")
    assert reembed.reembed_pending_count() == 0


@pytest.mark.django_db
def test_a_switch_records_each_step_for_the_admin(settings, monkeypatch: pytest.MonkeyPatch) -> None:
    # given a hash-384 corpus of several id ranges moving to hash-256, every range's progress recorded
    from search.admin import EmbeddingSpaceAdmin

    monkeypatch.setattr(reembed, "RANGE_IDS", 2)
    monkeypatch.setattr(reembed, "STEP_REPORT_S", 0.0)
    _corpus(5)
    build()
    settings.HASH_EMBEDDING_DIMENSIONS = 256
    seen: list[tuple[str, str, str, int, int]] = []
    original = reembed._step

    def recording(space: EmbeddingSpace, step: str, *, done: int = 0, total: int = 0, on_step=None) -> None:
        original(space, step, done=done, total=total, on_step=on_step)
        row = EmbeddingSpace.objects.get(pk=space.pk)
        seen.append((row.model, row.state, row.step, row.step_done, row.step_total))

    monkeypatch.setattr(reembed, "_step", recording)

    # when
    reembed.corpus_reembed()

    # then the space went through staging, filling range by range, indexing, and (once searched) clearing
    # range by range, and ends with no step
    steps = [step for _, _, step, _, _ in seen]
    order = ["staging", "filling", "indexing", "clearing", ""]
    assert [s for i, s in enumerate(steps) if i == 0 or steps[i - 1] != s] == order
    ranges = -(-max(Chunk.objects.values_list("pk", flat=True)) // 2)
    for step in ("filling", "clearing"):
        progress = [(done, total) for _, _, s, done, total in seen if s == step and total]
        assert progress == [(done, ranges) for done in range(ranges + 1)], step
    assert {(model, state) for model, state, step, _, _ in seen if step in ("staging", "filling", "indexing")} == {
        ("hash-256", "building")}
    assert {(model, state) for model, state, step, _, _ in seen if step == "clearing"} == {("hash-256", "active")}
    space = EmbeddingSpace.objects.get(model="hash-256")
    assert (space.step, space.step_done, space.step_total) == ("", 0, 0)
    # and the admin says so in words
    admin_view = EmbeddingSpaceAdmin(EmbeddingSpace, None)  # type: ignore[arg-type]
    assert admin_view.space_state(space) == "active (searched)"
    space.step, space.step_done, space.step_total = "clearing", 1, 4
    assert admin_view.space_state(space) == "active (searched); emptying the previous model's vectors 25 %"
    space.active, space.state, space.step, space.step_done = False, "building", "filling", 3
    assert admin_view.space_state(space) == (
        "building (waiting for the worker): putting its vectors beside the searched ones 75 %")
    space.step, space.step_done, space.step_total = "indexing", 0, 0
    assert admin_view.space_state(space) == "building (waiting for the worker): building its index"


@pytest.mark.django_db
def test_reembed_dry_run_changes_nothing(settings) -> None:
    _corpus(2)
    build()
    settings.HASH_EMBEDDING_DIMENSIONS = 128
    out = StringIO()

    call_command("reembed", "--dry-run", stdout=out, stderr=StringIO())

    assert "2 chunk(s) to embed" in out.getvalue()
    assert EmbeddingSpace.objects.get(active=True).model == "hash-384"


@pytest.mark.django_db
def test_backfill_command_explains_a_provider_outage(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a provider that is down
    _corpus(1)
    monkeypatch.setattr(reembed, "get_provider", lambda: FlakyEmbedder(384, fail_on=set(range(1, 100))))
    monkeypatch.setattr(reembed, "BACKOFF_BASE_S", 0.01)

    # when / then
    with pytest.raises(CommandError, match="run this command again"):
        call_command("backfill_embeddings", "--attempts", "1", stdout=StringIO(), stderr=StringIO())
    assert JobRun.objects.get(job=jobs.EMBEDDINGS_BACKFILL).status == JobRun.Status.FAILED


# --- the OpenAI embedder through the real client and a local fake server ---------------------------


@pytest.fixture
def openai_embedding_settings(settings, fake_openai: FakeOpenAI):
    settings.OPENAI_API_KEY = "sk-test"
    settings.OPENAI_BASE_URL = fake_openai.url
    settings.OPENAI_EMBEDDING_MODEL = "text-embedding-3-large"
    settings.OPENAI_EMBEDDING_DIMENSIONS = 16
    settings.OPENAI_TIMEOUT_S = 0.4
    settings.OPENAI_MAX_RETRIES = 1
    return settings


def test_openai_embedder_through_the_real_client(openai_embedding_settings, fake_openai: FakeOpenAI) -> None:
    # given
    embedder = OpenAIEmbedder()

    # when
    vectors = embedder.embed(["first text", "second text"])

    # then
    assert embedder.name == "text-embedding-3-large@16"
    assert vectors[0] == pytest.approx(fake_vector("first text", 16))
    assert vectors[1] == pytest.approx(fake_vector("second text", 16))
    path, request = fake_openai.requests[0]
    assert path == "/v1/embeddings"
    assert request["model"] == "text-embedding-3-large" and request["dimensions"] == 16


def test_openai_embedder_gives_up_on_a_hanging_server_within_its_bounds(
    openai_embedding_settings,
    fake_openai: FakeOpenAI,
) -> None:
    # given a server that never answers; timeout 0.4 s, one retry
    fake_openai.hang = True
    embedder = OpenAIEmbedder()

    # when
    started = time.monotonic()
    with pytest.raises(EmbeddingUnavailable, match="APITimeoutError"):
        embedder.embed(["anything"])
    elapsed = time.monotonic() - started

    # then two attempts were made, and it gave up within 2 timeouts plus the client's short back-off
    assert len(fake_openai.requests) == 2
    assert elapsed < 0.4 * 2 + 2.5


def test_openai_embedder_retries_server_errors_a_bounded_number_of_times(
    openai_embedding_settings,
    fake_openai: FakeOpenAI,
) -> None:
    # given a server answering 500, then a healthy one after one failure
    fake_openai.fail_status = 500
    embedder = OpenAIEmbedder()

    # when / then: 1 + OPENAI_MAX_RETRIES attempts, then EmbeddingUnavailable
    with pytest.raises(EmbeddingUnavailable, match="InternalServerError"):
        embedder.embed(["x"])
    assert len(fake_openai.requests) == 2

    fake_openai.fail_status = None
    fake_openai.fail_times = 1
    assert embedder.embed(["x"])[0] == pytest.approx(fake_vector("x", 16))
    assert len(fake_openai.requests) == 4
