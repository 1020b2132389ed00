"""Celery tasks: adapters that take ids, load, and call a service (STYLE.md rule 11).

Reliability rules shared by every task here:

- ``acks_late`` with ``task_reject_on_worker_lost`` (settings): a message is acknowledged only after
  the task finished, so a worker that dies mid-task leaves it to be delivered again.
- Every task is idempotent and its service commits in batches: a run killed half-way and run again
  reaches the same final state.
- Retries with exponential back-off for provider errors only (``EmbeddingUnavailable``,
  ``SummaryUnavailable``); any other error is recorded on the job run and not retried.
- Daily jobs claim their period (``search.services.jobs``): two beat processes, or a redelivered
  message, still take effect once per period. Every run is recorded as a ``JobRun`` (admin).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from celery import shared_task
from django.utils import timezone

from config.settings import schedule
from search.errors import EmbeddingUnavailable

if TYPE_CHECKING:
    from search.services.jobs import JobResult

logger = logging.getLogger(__name__)

# Content changes arrive in bursts (an import, a bulk admin action): wait for a quiet moment.
INDEX_DEBOUNCE_S = 5

# Provider back-off for Celery retries: 30 s, 60 s, 120 s … at most 15 minutes, 6 retries, jittered.
PROVIDER_RETRY = {"retry_backoff": 30, "retry_backoff_max": 900, "retry_jitter": True, "max_retries": 6}
# The embedding tasks: late acknowledgement, retried with that back-off while the provider fails.
EMBEDDING_TASK: dict[str, Any] = {
    "bind": True,
    "acks_late": True,
    "ignore_result": True,
    "autoretry_for": (EmbeddingUnavailable,),
    **PROVIDER_RETRY,
}


@shared_task(name="search.index_build", bind=True, acks_late=True, ignore_result=True)
def index_build_task(self: Any) -> str:
    """Debounced build: reschedules itself while changes keep coming; one build at a time (the job's lock).

    The lock is the ``index_build`` job's PostgreSQL advisory lock (``jobs.job_execute``): a worker killed
    mid-build loses it with its connection, so the redelivered message builds at once, not after a timeout.
    A change made while a build runs leaves the index dirty (the build clears the flag only if nothing
    marked it since it started): the build then asks for another one, so the change never waits for the
    beat's safety net.
    """
    from search.models import IndexState
    from search.services import indexing, jobs

    state = IndexState.objects.filter(pk=1).first()
    if state is None or not state.dirty:
        return "clean"
    # Re-queued builds stay on the queue this one came from (the workers that serve it).
    queue = _queue_of(self)
    if state.dirty_since and timezone.now() - state.dirty_since < timedelta(seconds=INDEX_DEBOUNCE_S):
        index_build_task.apply_async(countdown=INDEX_DEBOUNCE_S, queue=queue)
        return "debounced"

    fan_out: list[bool] = []

    def _build() -> jobs.JobResult:
        # A large backlog of chunks to embed goes to every worker after the build (searchable by words at
        # once, by meaning batch by batch), not into this one task.
        fan_out.append(_backlog_fans_out())
        result = indexing.index_rebuild(embed=not fan_out[0])
        return jobs.JobResult(items_touched=int(result["columns"]) + int(result["embedded"]), detail=result)

    outcome = jobs.job_execute(job=jobs.INDEX_BUILD, run=_build)
    if not outcome.ran:
        return "busy"
    if fan_out and fan_out[0]:
        _embed_backlog(queue=queue)
    if IndexState.objects.filter(pk=1, dirty=True).exists():
        index_build_task.apply_async(countdown=INDEX_DEBOUNCE_S, queue=queue)
        return "built, again dirty: another build queued"
    return "built"


def _english_lane_catch_up() -> None:
    """The English lane's vectors (when it is on) of what a fan-out embedded: the build left them out."""
    from django.conf import settings

    from search.services import vector_index

    if settings.SEARCH["ENGLISH_LANE"] != "off":
        vector_index.english_embeddings_backfill()


def _embed_backlog(*, queue: str | None = None) -> None:
    """A fan-out wave for the chunks lacking a vector, or the one-run backfill when it cannot fan out."""
    from search.services import reembed

    if embeddings_fanout(reembed.embeddings_pending_count(), queue=queue) is None:
        embeddings_backfill_task.apply_async(queue=queue)


def _backlog_fans_out() -> bool:
    from django.conf import settings

    from search.services import fanout, reembed

    if fanout.fanout_in_flight():
        return True  # its batches embed; what this build adds goes to the next wave
    threshold = settings.EMBEDDING_FANOUT_MIN_CHUNKS
    return bool(threshold) and reembed.embeddings_pending_count() >= threshold


# Publishing happens on one background thread: a save never waits for the broker (a hung broker holds a
# publish for seconds). While one build request is on its way, or for ENQUEUE_BACKOFF_S after a failed
# one, further requests are dropped: the build is debounced anyway, IndexState.dirty keeps the work, and
# the beat's index-build safety net picks it up once the broker is back.
ENQUEUE_BACKOFF_S = 30.0
_publisher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="index-enqueue")
_publish_lock = threading.Lock()
_publish_state = {"in_flight": False, "retry_at": 0.0}


def _publish_build() -> None:
    try:
        index_build_task.apply_async(countdown=INDEX_DEBOUNCE_S, retry=False)
    except Exception as exc:  # noqa: BLE001
        _publish_state["retry_at"] = time.monotonic() + ENQUEUE_BACKOFF_S
        logger.warning("could not enqueue the index build (%s); it will run on the next build", exc)
    finally:
        _publish_state["in_flight"] = False


def index_build_enqueue() -> None:
    """Ask a worker for a build after the current transaction commits. Never blocks on a dead broker."""
    from django.db import transaction

    def _send() -> None:
        with _publish_lock:
            if _publish_state["in_flight"] or time.monotonic() < _publish_state["retry_at"]:
                return
            _publish_state["in_flight"] = True
        try:
            _publisher.submit(_publish_build)
        except RuntimeError:  # the interpreter is shutting down: the beat's safety net will build
            _publish_state["in_flight"] = False

    transaction.on_commit(_send)


def _daily_job(
    task: Any, job: str, run: Callable[[], JobResult], *, now: datetime, at: tuple[int, int], period: str | None
) -> str:
    """Run a daily job once for its period (``period``, or the slot ``now`` belongs to given the job's time ``at``)
    and say what it did."""
    from search.services import jobs

    outcome = jobs.job_execute(
        job=job, run=run, task_id=task.request.id or "", period=period or jobs.daily_period(now, at=at)
    )
    return outcome.summary()


@shared_task(name="search.review_flags", bind=True, acks_late=True, ignore_result=True)
def review_flags_task(self: Any, period: str | None = None) -> str:
    """Daily review-cadence flagger (03:45 UTC). ``period`` defaults to the slot this run belongs to."""
    from search.services import governance, jobs

    now = timezone.now()

    def _run() -> jobs.JobResult:
        moved = governance.review_flags_update(today=timezone.localdate(now))
        return jobs.JobResult(items_touched=sum(moved.values()), detail=moved)

    return _daily_job(self, jobs.REVIEW_FLAGS, _run, now=now, at=schedule.REVIEW_FLAGS_AT, period=period)


@shared_task(name="search.quality_scores", bind=True, acks_late=True, ignore_result=True)
def quality_scores_task(self: Any, period: str | None = None) -> str:
    """Daily quality score of every item (04:00 UTC)."""
    from search.services import jobs, quality

    now = timezone.now()

    def _run() -> jobs.JobResult:
        written = quality.quality_scores_update(now=now)
        return jobs.JobResult(items_touched=written, detail={"written": written})

    return _daily_job(self, jobs.QUALITY_SCORES, _run, now=now, at=schedule.QUALITY_SCORES_AT, period=period)


@shared_task(name="search.embeddings_backfill", **EMBEDDING_TASK)
def embeddings_backfill_task(self: Any) -> str:
    """Embed chunks lacking a vector of the active model; backs off and retries while the provider fails.

    From ``EMBEDDING_FANOUT_MIN_CHUNKS`` pending chunks on, the work is fanned out instead: batches queued for
    every worker (``search.services.fanout``); fewer are embedded here, in one run."""
    from search.services import jobs, reembed

    pending = reembed.embeddings_pending_count()
    if pending == 0:
        return "embeddings_backfill: nothing to embed"
    fanned = embeddings_fanout(pending, queue=_queue_of(self))
    if fanned is not None:
        return fanned

    def _run() -> jobs.JobResult:
        embedded = reembed.embeddings_backfill_run()
        return jobs.JobResult(items_touched=embedded, detail={"embedded": embedded})

    return jobs.job_execute(job=jobs.EMBEDDINGS_BACKFILL, run=_run, task_id=self.request.id or "").summary()


def _queue_of(task: Any) -> str | None:
    """The queue the running task came from: its batches go to the workers of that queue."""
    info = getattr(task.request, "delivery_info", None) or {}
    return info.get("routing_key") or None


def embeddings_fanout(pending: int, *, queue: str | None = None) -> str | None:
    """Queue a wave of embedding batches when ``pending`` is worth fanning out; None when it is not (few
    chunks, fan-out off, or no cache to keep the wave's state in: the caller embeds in one run)."""
    from django.conf import settings

    from search.services import fanout

    if fanout.fanout_in_flight():  # its last batch plans the next wave if chunks arrived meanwhile
        return "embeddings_backfill: a fan-out is in flight"
    threshold = settings.EMBEDDING_FANOUT_MIN_CHUNKS
    if not threshold or pending < threshold:
        return None
    queued = fanout.fanout_start(embeddings_batch_sender(queue))
    if queued:
        return f"embeddings_backfill: {pending} chunks in {queued} batches for the workers"
    if fanout.fanout_in_flight():
        return "embeddings_backfill: a fan-out is in flight"
    return None


def embeddings_batch_sender(queue: str | None) -> Any:
    def send(wave_id: str, ids: list[int]) -> None:
        embeddings_batch_task.apply_async(args=[ids, wave_id], queue=queue)

    return send


@shared_task(name="search.embeddings_batch", **EMBEDDING_TASK)
def embeddings_batch_task(self: Any, chunk_ids: list[int], wave_id: str = "") -> str:
    """One batch of a fan-out (``search.services.fanout``): embeds those of ``chunk_ids`` still lacking a
    vector. Idempotent, so a batch delivered again after its worker died only finishes what was left; the
    batch that ends a wave plans the next one when chunks arrived meanwhile."""
    from search.services import fanout, reembed

    embedded, wave_finished = fanout.fanout_batch(
        [int(i) for i in chunk_ids], str(wave_id), enqueue=embeddings_batch_sender(_queue_of(self))
    )
    if wave_finished:
        _english_lane_catch_up()
    if wave_finished and reembed.embeddings_pending_count():
        _embed_backlog(queue=_queue_of(self))
    return f"embeddings_batch: {embedded} of {len(chunk_ids)} chunks embedded"


# A model switch runs in slices of about this long, each re-queueing the next: a worker with one process
# (``manage.py up``) still runs the index builds and summaries queued meanwhile.
SPACE_SWITCH_SLICE_S = 300.0


@shared_task(name="search.embedding_space_switch", **EMBEDDING_TASK)
def embedding_space_switch_task(self: Any) -> str:
    """Move the corpus to the configured embedding model in the background, searches keeping the complete
    old space until the atomic flip (search.services.reembed). Idempotent: a no-op when the configured
    model is the active one; resumes a build; one run at a time (the ``reembed`` job lock)."""
    from search.services import jobs, reembed

    status = reembed.space_switch_status()
    if not status.needed:
        return "embedding_space_switch: nothing to do"
    logger.info("%s", status.summary())
    report: dict[str, Any] = {}

    def _run() -> jobs.JobResult:
        report.update(reembed.corpus_reembed(time_budget_s=SPACE_SWITCH_SLICE_S))
        return jobs.JobResult(items_touched=report["embedded"], detail=report)

    outcome = jobs.job_execute(job=jobs.REEMBED, run=_run, task_id=self.request.id or "")
    if outcome.ran and report.get("state") == "building":
        embedding_space_switch_enqueue(countdown=1)  # the next slice, behind whatever was queued meanwhile
    return outcome.summary()


def embedding_space_switch_enqueue(*, countdown: float = 0) -> bool:
    """Queue the switch task now (``up`` on a mismatch, the next slice); False when the broker is down
    (the beat entry starts it later)."""
    try:
        embedding_space_switch_task.apply_async(countdown=countdown, retry=False)
    except Exception as exc:  # noqa: BLE001 - a dead broker must not stop a start; the beat catches up
        logger.warning("could not enqueue the embedding-space switch (%s); the beat will start it", exc)
        return False
    return True


@shared_task(name="search.summaries", bind=True, acks_late=True, ignore_result=True, max_retries=6)
def summaries_task(self: Any, item_ids: list[int], provider: str = "auto") -> str:
    """Regenerate the summaries of ``item_ids``. On a provider failure, retries the items not done yet."""
    from search.services import jobs, summaries

    report = summaries.SummariesReport()

    def _run() -> jobs.JobResult:
        summaries.summaries_regenerate(item_ids=item_ids, provider=provider, report=report)  # type: ignore[arg-type]
        return jobs.JobResult(
            items_touched=report.updated, detail={"items": len(report.done), **dict(report.providers)}
        )

    try:
        outcome = jobs.job_execute(
            job=jobs.SUMMARIES, run=_run, task_id=self.request.id or "", if_busy="raise"
        )
    except jobs.JobBusy as exc:
        # Another summaries job is running: queue behind it (not a provider error, so no back-off).
        raise self.retry(countdown=15, exc=exc, max_retries=40) from exc
    except summaries.SummaryUnavailable as exc:
        remaining = [i for i in item_ids if i not in set(report.done)]
        countdown = min(900, 30 * 2**self.request.retries)
        raise self.retry(args=[remaining, provider], countdown=countdown, exc=exc) from exc
    return outcome.summary()


def summaries_enqueue(*, item_ids: list[int], provider: str = "auto") -> None:
    """Queue a summaries job after the current transaction commits; without a broker, run it here."""
    from django.db import transaction

    def _send() -> None:
        try:
            summaries_task.apply_async(args=[list(item_ids), provider], retry=False)
        except Exception as exc:  # noqa: BLE001 - a dead broker must not lose the request
            logger.warning("could not enqueue summaries (%s); generating them in this process", exc)
            from search.services import summaries

            summaries.summaries_regenerate(item_ids=item_ids, provider=provider)  # type: ignore[arg-type]

    transaction.on_commit(_send)


@shared_task(name="search.job_runs_prune", acks_late=True, ignore_result=True)
def job_runs_prune_task() -> str:
    """Weekly: forget job runs older than 180 days."""
    from search.services import jobs

    outcome = jobs.job_execute(
        job=jobs.JOB_RUNS_PRUNE,
        run=lambda: jobs.JobResult(items_touched=jobs.job_runs_prune(now=timezone.now())),
    )
    return outcome.summary()
