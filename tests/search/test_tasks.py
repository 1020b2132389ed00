"""Celery tasks: the beat schedule, once-per-period daily jobs, real workers (end to end, killed mid-task)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlparse

import pytest
from celery.schedules import crontab
from django.conf import settings
from django.db import connection
from django.utils import timezone

from search.models import Chunk, ContentItem, IndexState, JobRun, ReviewStatus
from search.services import jobs, vector_index
from search.services import spaces as space_writes
from search.tasks import (
    INDEX_DEBOUNCE_S,
    embeddings_backfill_task,
    index_build_task,
    quality_scores_task,
    review_flags_task,
)
from tests.factories import make_item
from tests.search.fake_openai import FakeOpenAI, fake_vector, serving

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with serving() as server:
        yield server


def test_beat_schedule_runs_the_governance_jobs_at_their_times() -> None:
    # given the schedule and the registered tasks
    from config.celery import app

    schedule = settings.CELERY_BEAT_SCHEDULE

    # then
    flagger, score = schedule["review-cadence-flagger"], schedule["quality-score"]
    assert flagger["task"] == "search.review_flags" and score["task"] == "search.quality_scores"
    assert flagger["schedule"] == crontab(hour=3, minute=45)
    assert score["schedule"] == crontab(hour=4, minute=0)
    assert settings.CELERY_TIMEZONE == "UTC"
    assert {"search.index_build", "search.embeddings_backfill"} <= {e["task"] for e in schedule.values()}
    ours = [entry["task"] for entry in schedule.values() if str(entry["task"]).startswith("search.")]
    assert ours and all(task in app.tasks for task in ours)
    assert settings.CELERY_TASK_ACKS_LATE and settings.CELERY_TASK_REJECT_ON_WORKER_LOST


def _flag_corpus() -> dict[str, ContentItem]:
    today = timezone.localdate()
    return {
        "overdue": make_item(title="Overdue", next_review_date=today - timedelta(days=5)),
        "soon": make_item(title="Soon", next_review_date=today + timedelta(days=10)),
        "later": make_item(title="Later", next_review_date=today + timedelta(days=100)),
        "undated": make_item(title="Undated"),
    }


def _assert_flags(items: dict[str, ContentItem]) -> None:
    status = dict(ContentItem.objects.values_list("pk", "governance_review_status"))
    assert status[items["overdue"].pk] == ReviewStatus.OVERDUE
    assert status[items["soon"].pk] == ReviewStatus.DUE_SOON
    assert status[items["later"].pk] == status[items["undated"].pk] == ReviewStatus.OK


@pytest.mark.django_db
def test_duplicate_beat_deliveries_apply_the_daily_job_once() -> None:
    # given stale flags, and the flagger delivered twice for the same day (two beat processes)
    items = _flag_corpus()

    # when
    first = review_flags_task.apply().get()
    ContentItem.objects.filter(pk=items["later"].pk).update(governance_review_status=ReviewStatus.OVERDUE)
    second = review_flags_task.apply().get()

    # then the second delivery changed nothing (not even the flag tampered with in between)
    assert "2 item(s) touched" in first
    assert "already done" in second
    assert ContentItem.objects.get(pk=items["later"].pk).governance_review_status == ReviewStatus.OVERDUE
    run = JobRun.objects.get(job=jobs.REVIEW_FLAGS)
    assert run.period == jobs.daily_period(timezone.now(), at=(3, 45)) and run.attempts == 1
    assert run.detail == {"overdue": 1, "due_soon": 1, "ok": 0} and run.items_touched == 2


@pytest.mark.django_db(transaction=True)
def test_duplicate_beat_deliveries_at_the_same_moment_run_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a quality run in progress when a second beat's delivery of the same slot arrives
    from search.services import quality

    make_item(title="Scored")
    original = quality.quality_scores_update
    outcomes: list[str] = []
    calls: list[int] = []

    def slow_update(**kwargs: object) -> int:
        calls.append(1)
        if len(calls) == 1:
            other = threading.Thread(
                target=lambda: (outcomes.append(quality_scores_task.apply().get()), connection.close())
            )
            other.start()
            other.join(timeout=30)
        return original(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(quality, "quality_scores_update", slow_update)

    # when
    result = quality_scores_task.apply().get()

    # then the concurrent delivery skipped; the job ran once
    assert len(calls) == 1
    assert "another process is running it" in outcomes[0]
    assert "1 item(s) touched" in result
    assert JobRun.objects.filter(job=jobs.QUALITY_SCORES).count() == 1


@pytest.mark.django_db
def test_quality_task_scores_every_item() -> None:
    items = _flag_corpus()

    result = quality_scores_task.apply().get()

    scored = dict(ContentItem.objects.values_list("pk", "quality_breakdown"))
    assert "4 item(s) touched" in result
    assert scored[items["overdue"].pk]["cadence_penalty"] == 15
    assert scored[items["undated"].pk]["score"] == scored[items["undated"].pk]["base"]


@pytest.mark.django_db
def test_backfill_task_embeds_missing_chunks_and_is_idle_otherwise() -> None:
    # given chunks without vectors
    make_item(title="A", body="Alpha text.")
    make_item(title="B", body="Beta text.")

    # when
    first = embeddings_backfill_task.apply().get()
    second = embeddings_backfill_task.apply().get()

    # then
    assert "2 item(s) touched" in first and second == "embeddings_backfill: nothing to embed"
    assert not vector_index.embeddings_pending(space_writes.active_space().model).exists()
    assert JobRun.objects.filter(job=jobs.EMBEDDINGS_BACKFILL).count() == 1


@pytest.mark.django_db
def test_index_build_task_still_debounces_and_builds() -> None:
    # given a change made just now
    make_item(title="Fresh", body="New text.")
    IndexState.objects.filter(pk=1).update(dirty=True, dirty_since=timezone.now() - timedelta(minutes=1))

    # when
    result = index_build_task.apply().get()

    # then
    assert result == "built"
    assert IndexState.objects.get(pk=1).dirty is False
    assert index_build_task.apply().get() == "clean"
    assert JobRun.objects.get(job=jobs.INDEX_BUILD).status == JobRun.Status.SUCCEEDED


@pytest.mark.django_db
def test_a_debounced_build_stays_on_the_queue_it_came_from(monkeypatch) -> None:
    # given a change made a moment ago (inside the debounce) and a build taken from the queue "team-b"
    make_item(title="Fresh", body="New text.")
    IndexState.objects.filter(pk=1).update(dirty=True, dirty_since=timezone.now())
    queued: list[dict] = []
    monkeypatch.setattr(index_build_task, "apply_async", lambda *a, **kw: queued.append(kw))

    # when
    result = index_build_task.apply(routing_key="team-b").get()

    # then: the next try goes to the workers of that queue, not to the default one
    assert result == "debounced"
    assert queued == [{"countdown": INDEX_DEBOUNCE_S, "queue": "team-b"}]


# --- real workers -----------------------------------------------------------------------------------


def _worker_env(**extra: str) -> dict[str, str]:
    """The test process's environment, pointed at the test database (the worker must see our rows)."""
    url = urlparse(os.environ["DATABASE_URL"])._replace(path="/" + connection.settings_dict["NAME"]).geturl()
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": url,
        "REDIS_URL": settings.REDIS_URL,
        "EMBEDDING_PROVIDER": "hash",
        **extra,
    }


def _wait(predicate: Callable[[], bool], *, timeout: float, what: str, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class Worker:
    """``celery -A config worker -P solo`` on its own queue, logging to a file."""

    def __init__(self, tmp_path: Path, queue: str, env: dict[str, str]) -> None:
        self.log = tmp_path / f"worker-{uuid.uuid4().hex[:6]}.log"
        self._handle = self.log.open("w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "-P",
                "solo",
                "-Q",
                queue,
                "--loglevel",
                "INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-n",
                f"{queue}-{uuid.uuid4().hex[:4]}@%h",
            ],
            cwd=ROOT,
            env=env,
            stdout=self._handle,
            stderr=subprocess.STDOUT,
        )
        _wait(
            lambda: "ready." in self.text() or self.proc.poll() is not None,
            timeout=120,
            what="the worker",
            interval=0.2,
        )
        assert self.proc.poll() is None, f"the worker exited:\n{self.text()[-3000:]}"

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_done(self, task_id: str, *, timeout: float = 90) -> None:
        _wait(
            lambda: f"[{task_id}] succeeded" in self.text() or f"[{task_id}] raised" in self.text(),
            timeout=timeout,
            what=f"task {task_id}\n{self.text()[-3000:]}",
            interval=0.2,
        )
        assert f"[{task_id}] succeeded" in self.text(), self.text()[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._handle.close()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def start(queue: str, **env: str) -> Worker:
        worker = Worker(tmp_path, queue, _worker_env(**env))
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()
    connection.close()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_end_to_end_with_a_real_worker_and_the_embedded_valkey(workers: Callable[..., Worker]) -> None:
    # given stale flags, unscored items and chunks without vectors, and a worker on the embedded Valkey
    items = _flag_corpus()
    queue = f"kbtest-{uuid.uuid4().hex[:8]}"
    worker = workers(queue)

    # when beat's jobs are delivered, the flagger twice (two beat processes)
    sent = [
        review_flags_task.apply_async(queue=queue),
        review_flags_task.apply_async(queue=queue),
        quality_scores_task.apply_async(queue=queue),
        embeddings_backfill_task.apply_async(queue=queue),
    ]
    for result in sent:
        worker.wait_done(result.id)

    # then every job took effect, the flagger once
    _assert_flags(items)
    assert "already done for this period" in worker.text()
    flag_runs = list(JobRun.objects.filter(job=jobs.REVIEW_FLAGS))
    assert len(flag_runs) == 1 and flag_runs[0].status == JobRun.Status.SUCCEEDED
    assert flag_runs[0].task_id == sent[0].id and flag_runs[0].attempts == 1
    scores = dict(ContentItem.objects.values_list("pk", "quality_breakdown"))
    assert scores[items["overdue"].pk]["cadence_penalty"] == 15
    assert not vector_index.embeddings_pending("hash-384").exists()
    assert JobRun.objects.filter(status=JobRun.Status.SUCCEEDED).count() == 3


FAKE_MODEL = "text-embedding-3-large@16"


def _slow_openai_env(fake_openai: FakeOpenAI, **extra: str) -> dict[str, str]:
    """Workers embedding through the fake OpenAI (16 dimensions, no client retries)."""
    return {
        "EMBEDDING_PROVIDER": "openai",
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": fake_openai.url,
        "OPENAI_EMBEDDING_DIMENSIONS": "16",
        "OPENAI_MAX_RETRIES": "0",
        "OPENAI_TIMEOUT_S": "20",
        **extra,
    }


def embedded() -> int:
    return Chunk.objects.filter(embedding_model=FAKE_MODEL).count()


def _long_body(i: int) -> str:
    sections = []
    for s in range(14):
        words = " ".join(f"word{i}x{s}x{w}" for w in range(110))
        sections.append(f"## Section {s}\n\n{words}.")
    return "\n\n".join(sections)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_task_then_rerun_reaches_the_same_state(
    workers: Callable[..., Worker],
    fake_openai: FakeOpenAI,
) -> None:
    # given > 2 batches of chunks, and a worker embedding through a slow (fake) OpenAI
    for i in range(10):
        make_item(title=f"Long item {i}", body=_long_body(i))
    total = Chunk.objects.current().count()
    assert total > 2 * vector_index.EMBED_BATCH
    fake_openai.delay_s = 1.0
    # one task embeds everything (the fan-out has its own test)
    env = _slow_openai_env(fake_openai, EMBEDDING_FANOUT_MIN_CHUNKS="0")
    queue = f"kbtest-{uuid.uuid4().hex[:8]}"

    # when the worker is killed (SIGKILL) after its first batch committed
    first = workers(queue, **env)
    embeddings_backfill_task.apply_async(queue=queue)
    _wait(lambda: embedded() > 0, timeout=60, what="the first batch", interval=0.05)
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait(timeout=10)
    halfway = embedded()
    _wait(lambda: not jobs.job_is_running(job=jobs.EMBEDDINGS_BACKFILL), timeout=10, what="the lock to go")
    dead_run = JobRun.objects.get(job=jobs.EMBEDDINGS_BACKFILL)

    # and the task runs again on a fresh worker
    fake_openai.delay_s = 0
    second = workers(queue, **env)
    rerun = embeddings_backfill_task.apply_async(queue=queue)
    second.wait_done(rerun.id)

    # then it was really half-way, and now every chunk holds exactly the vector an uninterrupted run writes
    assert 0 < halfway < total
    assert dead_run.status == JobRun.Status.RUNNING
    chunks = list(Chunk.objects.current().select_related("revision"))
    assert len(chunks) == total and all(c.embedding_model == FAKE_MODEL for c in chunks)
    for chunk in chunks:
        text = vector_index.chunk_embedding_text(chunk.revision.title, chunk.toc_path, chunk.text)
        assert list(map(float, chunk.embedding)) == pytest.approx(fake_vector(text, 16), abs=1e-6)
    dead_run.refresh_from_db()
    assert dead_run.status == JobRun.Status.ABANDONED
    final = JobRun.objects.exclude(pk=dead_run.pk).get(job=jobs.EMBEDDINGS_BACKFILL)
    assert final.status == JobRun.Status.SUCCEEDED and final.items_touched == total - halfway


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_backfill_fans_out_over_two_workers_and_survives_one_killed_mid_batch(
    workers: Callable[..., Worker],
    fake_openai: FakeOpenAI,
) -> None:
    # given about seven batches of chunks, and two workers embedding through a slow (fake) OpenAI
    for i in range(30):
        make_item(title=f"Long item {i}", body=_long_body(i))
    total = Chunk.objects.current().count()
    assert total > 5 * vector_index.EMBED_BATCH
    fake_openai.delay_s = 0.4
    # a message whose worker died goes to another worker after 5 s (production: an hour)
    env = _slow_openai_env(fake_openai, EMBEDDING_FANOUT_MIN_CHUNKS="1", CELERY_VISIBILITY_TIMEOUT_S="5")
    queue = f"kbtest-{uuid.uuid4().hex[:8]}"

    doomed, survivor = workers(queue, **env), workers(queue, **env)
    plan = embeddings_backfill_task.apply_async(queue=queue)

    def batches_in_hand(worker: Worker) -> int:
        log = worker.text()
        received = len(re.findall(r"search\.embeddings_batch\[[^\]]+\] received", log))
        return received - len(re.findall(r"search\.embeddings_batch\[[^\]]+\] succeeded", log))

    # when one worker is killed (SIGKILL) in the middle of a batch, after some batches were committed
    _wait(
        lambda: embedded() >= vector_index.EMBED_BATCH and batches_in_hand(doomed) == 1,
        timeout=60,
        what="a committed batch, and the doomed worker in the middle of one",
        interval=0.02,
    )
    os.kill(doomed.proc.pid, signal.SIGKILL)
    doomed.proc.wait(timeout=10)
    halfway = embedded()

    # then the other worker finishes everything, the dead worker's batch included (delivered to it again)
    try:
        _wait(lambda: embedded() == total, timeout=120, what="every chunk embedded")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {embedded()}/{total}; the survivor's log:\n{survivor.text()[-3000:]}") from None
    assert 0 < halfway < total
    assert batches_in_hand(doomed) == 1, "the killed worker had a batch in hand"
    assert f"Task search.embeddings_backfill[{plan.id}] succeeded" in doomed.text() + survivor.text()
    assert "batches for the workers" in doomed.text() + survivor.text()
    # every chunk holds exactly the vector an uninterrupted run writes
    for chunk in Chunk.objects.current().select_related("revision"):
        text = vector_index.chunk_embedding_text(chunk.revision.title, chunk.toc_path, chunk.text)
        assert list(map(float, chunk.embedding)) == pytest.approx(fake_vector(text, 16), abs=1e-6)
    # nothing embedded twice but what the killed worker had in hand (at most one batch, never committed)
    sent = [text for path, request in fake_openai.requests if path.endswith("/embeddings") for text in request["input"]]
    # (one more batch of slack: a batch slower than the 5 s visibility timeout would be handed out twice)
    assert total <= len(sent) <= total + 2 * vector_index.EMBED_BATCH
    assert "search.embeddings_batch" in survivor.text()
