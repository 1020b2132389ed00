"""The embedding backfill fanned out over workers: idempotent batches any number of Celery workers take at once.

A *wave* (``fanout_start``) lists the chunks lacking a vector of the active space, most-read items first,
then the most recently changed (``vector_index.embeddings_pending_by_priority``), cuts them into batches of
``EMBED_BATCH`` and hands each to ``enqueue`` (the ``search.embeddings_batch`` task). A worker embeds a batch
(``fanout_batch``) in one transaction, so the corpus becomes searchable by meaning batch by batch.

Why it survives a killed worker: the batch messages are acknowledged late (a message whose worker died is
delivered again, ``CELERY_TASK_REJECT_ON_WORKER_LOST`` and the broker's visibility timeout), and a batch
embeds only those of its chunks still lacking a vector (``vector_index.embeddings_embed_chunks``), with the
embedding cache answering for texts already embedded: nothing is embedded twice, nothing is lost.

The wave's state (batches queued and finished, chunks embedded, start time) lives in the cache, which makes
the progress and the ETA (``fanout_progress``) visible to the admin and to ``backfill_embeddings
--fan-out``. One wave at a time (an atomic ``add``); a wave's key expires ``FANOUT_IDLE_S`` after its last
finished batch, so a wave whose messages were lost (a broker wiped) is planned again by the next backfill. The
batch that finishes a wave starts the next one when chunks arrived meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from search.engine import vector
from search.models import Chunk
from search.services import vector_index

WAVE_KEY = "embeddings:fanout:wave"
BATCHES_DONE_KEY = "embeddings:fanout:batches_done"
EMBEDDED_KEY = "embeddings:fanout:embedded"


def fanout_idle_s() -> int:
    """How long a wave's state outlives its last finished batch: longer than a message can stay unacked."""
    return int(settings.CELERY_VISIBILITY_TIMEOUT_S) + 600


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


def fanout_start(enqueue: Callable[[list[int]], None], *, batch_size: int = vector_index.EMBED_BATCH) -> int:
    """Plan a wave and hand its batches to ``enqueue``; returns batches queued (0: nothing to embed, or a wave
    is already in flight)."""
    started = time.time()
    if not cache.add(WAVE_KEY, {"batches": 0, "started": started}, timeout=fanout_idle_s()):
        return 0
    ids = vector_index.embeddings_pending_by_priority(vector.active_space().model)
    batches = [ids[i : i + batch_size] for i in range(0, len(ids), batch_size)]
    if not batches:
        cache.delete(WAVE_KEY)
        return 0
    cache.set_many({BATCHES_DONE_KEY: 0, EMBEDDED_KEY: 0}, timeout=fanout_idle_s())
    cache.set(WAVE_KEY, {"batches": len(batches), "chunks": len(ids), "started": started}, fanout_idle_s())
    for batch in batches:
        enqueue(batch)
    return len(batches)


def _incr(key: str, delta: int) -> int:
    try:
        return int(cache.incr(key, delta))
    except ValueError:  # the key expired (or the cache was down): count from here
        cache.set(key, delta, timeout=fanout_idle_s())
        return delta


def fanout_batch(chunk_ids: list[int]) -> tuple[int, bool]:
    """Embed one batch of a wave: (chunks written, whether this batch finished a wave that embedded something,
    so a next wave may be worth planning)."""
    embedded = vector_index.embeddings_embed_chunks(chunk_ids)
    wave = cache.get(WAVE_KEY)
    if wave is None or not chunk_ids:
        return embedded, False
    total_embedded = _incr(EMBEDDED_KEY, embedded)
    # A batch counts once, however often it is delivered (its first chunk id names it within the wave).
    first_delivery = cache.add(f"{WAVE_KEY}:{wave.get('started')}:{chunk_ids[0]}", 1, timeout=fanout_idle_s())
    done = _incr(BATCHES_DONE_KEY, 1) if first_delivery else int(cache.get(BATCHES_DONE_KEY) or 0)
    if done < int(wave.get("batches") or 0):
        cache.touch(WAVE_KEY, fanout_idle_s())
        return embedded, False
    cache.delete_many([WAVE_KEY, BATCHES_DONE_KEY, EMBEDDED_KEY])
    return embedded, total_embedded > 0


def fanout_progress() -> FanoutProgress:
    current = Chunk.objects.current()
    pending = int(vector_index.embeddings_pending(vector.active_space().model).count())
    wave = cache.get(WAVE_KEY) or {}
    embedded = int(cache.get(EMBEDDED_KEY) or 0)
    started = wave.get("started")
    rate = embedded / (time.time() - started) if started and embedded else None
    return FanoutProgress(
        pending=pending,
        total=int(current.count()),
        batches=int(wave.get("batches") or 0),
        batches_done=int(cache.get(BATCHES_DONE_KEY) or 0),
        embedded=embedded,
        started_at=started,
        chunks_per_s=round(rate, 2) if rate else None,
        eta_s=round(pending / rate, 1) if rate else None,
    )
