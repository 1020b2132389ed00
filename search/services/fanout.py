"""The embedding backfill fanned out over workers: idempotent batches any number of Celery workers take at once.

A *wave* (``fanout_start``) lists the chunks lacking a vector of the active space, most-read items first,
then the most recently changed (``vector_index.embeddings_pending_by_priority``), cuts them into batches of
``EMBED_BATCH`` and hands each to ``enqueue`` (the ``search.embeddings_batch`` task). A worker embeds a batch
(``fanout_batch``) in one transaction, so the corpus becomes searchable by meaning batch by batch.

Why it survives a killed worker: the batch messages are acknowledged late (a message whose worker died is
delivered again, ``CELERY_TASK_REJECT_ON_WORKER_LOST`` and the broker's visibility timeout), and a batch
embeds only those of its chunks still lacking a vector (``vector_index.embeddings_embed_chunks``), with the
embedding cache answering for texts already embedded: nothing is embedded twice, nothing is lost.

Only ``EMBEDDING_FANOUT_WINDOW`` batches are queued at once; each batch finished (the first time) queues the
next planned one, so an index build or a summary queued meanwhile waits behind a few batches, not the wave.

The wave's state (its id, which every batch message carries; batches planned and finished; chunks embedded;
start time; the batches not queued yet) lives in the cache, which makes the progress and the ETA
(``fanout_progress``) visible to the admin and to ``backfill_embeddings --fan-out``. One wave at a time (an
atomic ``add``); its keys expire ``fanout_idle_s()`` after its last finished batch, so a wave whose messages
were lost (a broker wiped) is planned again by the next backfill. A batch of an older wave, delivered late,
still embeds what it can but counts for no wave. The batch that finishes a wave starts the next one when
chunks arrived meanwhile.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from config.cache import CacheUnavailable
from search.models import Chunk
from search.services import spaces as space_writes
from search.services import vector_index

WAVE_KEY = "embeddings:fanout:wave"
# A wave being planned holds its key this long at most (a planner killed mid-plan frees it by then).
PLANNING_TTL_S = 600


def fanout_idle_s() -> int:
    """How long a wave's state outlives its last finished batch: longer than a message can stay unacked."""
    return int(settings.CELERY_VISIBILITY_TIMEOUT_S) + 600


def _keys(wave_id: str) -> tuple[str, str]:
    return f"{WAVE_KEY}:{wave_id}:done", f"{WAVE_KEY}:{wave_id}:embedded"


@dataclass(frozen=True)
class FanoutProgress:
    pending: int  # chunks lacking a vector of the active space
    total: int  # current chunks
    batches: int  # batches of the wave in flight (0: none)
    batches_done: int
    embedded: int  # chunks the wave's batches wrote so far
    started_at: float | None  # epoch seconds
    chunks_per_s: float | None
    eta_s: float | None

    def summary(self) -> str:
        if not self.batches:
            return f"{self.pending} of {self.total} chunks lack a vector; no fan-out in flight"
        rate = f", {self.chunks_per_s:.1f} chunks/s" if self.chunks_per_s else ""
        eta = f", ETA {_duration(self.eta_s)}" if self.eta_s is not None else ""
        return f"{self.batches_done}/{self.batches} batches, {self.pending} chunks to go{rate}{eta}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def fanout_in_flight() -> bool:
    return cache.get(WAVE_KEY) is not None


def fanout_start(enqueue: Callable[[str, list[int]], None], *, batch_size: int = vector_index.EMBED_BATCH) -> int:
    """Plan a wave and hand its batches to ``enqueue(wave_id, chunk_ids)``; returns batches queued (0: nothing
    to embed, or a wave is already in flight). A failure while planning or queueing leaves no wave behind that
    claims more batches than were queued."""
    wave = {"id": uuid.uuid4().hex, "batches": 0, "started": time.time(), "planning": True}
    if not cache.add(WAVE_KEY, wave, timeout=PLANNING_TTL_S):
        return 0
    queued = 0
    try:
        ids = vector_index.embeddings_pending_by_priority(space_writes.active_space().model)
        batches = [ids[i : i + batch_size] for i in range(0, len(ids), batch_size)]
        if not batches:
            cache.delete(WAVE_KEY)
            return 0
        wave_id = str(wave["id"])
        done_key, embedded_key = _keys(wave_id)
        window = max(1, int(settings.EMBEDDING_FANOUT_WINDOW))
        # Only a window of batches is queued at once; each finished batch queues the next one, so an index
        # build or a summary queued meanwhile waits behind a few batches, not behind the whole wave.
        later = {_plan_key(wave_id, i): batch for i, batch in enumerate(batches) if i >= window}
        cache.set_many({done_key: 0, embedded_key: 0, _next_key(wave_id): min(window, len(batches)), **later},
                       timeout=fanout_idle_s())
        wave.update(batches=len(batches), chunks=len(ids), planning=False)
        cache.set(WAVE_KEY, wave, timeout=fanout_idle_s())
        for batch in batches[:window]:
            enqueue(wave_id, batch)
            queued += 1
    except BaseException:
        if queued:  # the wave is what reached the queue
            wave["batches"] = queued
            cache.set(WAVE_KEY, wave, timeout=fanout_idle_s())
            _finish_if_done(wave)
        else:
            cache.delete(WAVE_KEY)
        raise
    return len(batches)


def _plan_key(wave_id: str, index: int) -> str:
    return f"{WAVE_KEY}:{wave_id}:plan:{index}"


def _next_key(wave_id: str) -> str:
    return f"{WAVE_KEY}:{wave_id}:next"


def _incr(key: str, delta: int) -> int:
    try:
        return int(cache.incr(key, delta))
    except ValueError:  # the key expired: start it again, atomically
        cache.add(key, 0, timeout=fanout_idle_s())
        return int(cache.incr(key, delta))


def _queue_next(wave_id: str, batches: int, enqueue: Callable[[str, list[int]], None] | None) -> None:
    """Queue the wave's next planned batch (the window moves on by one)."""
    if enqueue is None:
        return
    index = _incr(_next_key(wave_id), 1) - 1
    if index < batches:
        batch = cache.get(_plan_key(wave_id, index))
        if batch:
            enqueue(wave_id, list(batch))
            cache.delete(_plan_key(wave_id, index))


def _finish_if_done(wave: dict[str, object]) -> bool:
    """End ``wave`` if all its batches are done: (True) its keys are gone and a next wave may be planned."""
    done_key, embedded_key = _keys(str(wave["id"]))
    if int(cache.get(done_key) or 0) < int(str(wave.get("batches") or 0)):
        return False
    cache.delete_many([WAVE_KEY, done_key, embedded_key])
    return True


def fanout_batch(
    chunk_ids: list[int], wave_id: str = "", *, enqueue: Callable[[str, list[int]], None] | None = None
) -> tuple[int, bool]:
    """Embed one batch of wave ``wave_id``: (chunks written, whether this batch ended a wave that embedded
    something, so a next wave may be worth planning). A batch of an earlier wave (delivered late) is embedded
    all the same (its chunks may still lack vectors) but counts for no wave."""
    embedded = vector_index.embeddings_embed_chunks(chunk_ids)
    wave = cache.get(WAVE_KEY)
    if not chunk_ids or not wave or wave.get("id") != wave_id or wave.get("planning"):
        return embedded, False
    done_key, embedded_key = _keys(wave_id)
    try:
        for key in (WAVE_KEY, done_key, embedded_key):
            cache.touch(key, fanout_idle_s())
        total_embedded = _incr(embedded_key, embedded)
        # A batch counts once, however often it is delivered (its first chunk id names it within the wave).
        if cache.add(f"{WAVE_KEY}:{wave_id}:batch:{chunk_ids[0]}", 1, timeout=fanout_idle_s()):
            _incr(done_key, 1)
            _queue_next(wave_id, int(wave.get("batches") or 0), enqueue)
        finished = _finish_if_done(wave)
    except CacheUnavailable:  # the work is committed; the wave's state catches up or expires
        return embedded, False
    return embedded, finished and total_embedded > 0


def fanout_progress() -> FanoutProgress:
    current = Chunk.objects.current()
    pending = int(vector_index.embeddings_pending(space_writes.active_space().model).count())
    wave = cache.get(WAVE_KEY) or {}
    done_key, embedded_key = _keys(str(wave.get("id")))
    embedded = int(cache.get(embedded_key) or 0) if wave else 0
    started = wave.get("started")
    rate = embedded / (time.time() - started) if started and embedded else None
    return FanoutProgress(
        pending=pending,
        total=int(current.count()),
        batches=int(wave.get("batches") or 0),
        batches_done=int(cache.get(done_key) or 0) if wave else 0,
        embedded=embedded,
        started_at=started,
        chunks_per_s=round(rate, 2) if rate else None,
        eta_s=round(pending / rate, 1) if rate else None,
    )
