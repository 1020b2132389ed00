"""``bench --flip``: the embedding-space switch at scale, measured while searches run (issue 34.5).

On the bench corpus (hash-384 vectors, the active space) a switch to another model (``hash-256``) is staged
the way ``reembed`` stages it (no search running: that part is the embedder's speed, reported elsewhere);
then, while search threads run hybrid ``retrieve()`` in a loop (each thread its own connections, as web
processes have) and a write probe updates one chunk row every 0.5 s, the rest of ``corpus_reembed``'s
switch runs step by step:

- *prepare* (``reembed.space_prepare``): the next-space columns filled, the new HNSW index built
  concurrently and prewarmed;
- *flip* (``reembed.space_flip``): stragglers, then the column pairs swapped by renaming;
- *cleanup*: the old model's index dropped, the next-space columns emptied (``reembed.space_next_clear``).

Reported: each step's time, every search's latency in each window and before and after (p50, p99, max, how
many took over 1 s), how long the flip waited for running searches before it could swap, and the longest
wait of the write probe.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, connections

from benchmarks.bench_stats import percentiles
from search.embeddings.providers import provider_for_model
from search.engine import RetrievalQuery, retrieve
from search.models import Chunk
from search.services import reembed

NEW_MODEL, NEW_DIMENSIONS = "hash-256", 256
SLOW_S = 1.0


@dataclass
class _Timeline:
    """(started, seconds, ok) of each call, appended by one thread."""

    calls: list[tuple[float, float, bool]] = field(default_factory=list)


def _search_loop(queries: list[str], stop: threading.Event, out: _Timeline, offset: int) -> None:
    i = offset
    try:
        while not stop.is_set():
            text = queries[i % len(queries)]
            i += 1
            started = time.monotonic()
            ok = True
            try:
                retrieve(query=RetrievalQuery(text=text, limit=20, threshold=0.0))
            except Exception:  # noqa: BLE001 - counted, never fatal to the bench
                ok = False
            out.calls.append((started, time.monotonic() - started, ok))
    finally:
        connections.close_all()


def _write_loop(stop: threading.Event, out: _Timeline, chunk_id: int) -> None:
    try:
        while not stop.is_set():
            started = time.monotonic()
            ok = True
            try:
                Chunk.objects.filter(pk=chunk_id).update(toc_path=f"probe {started:.3f}")
            except Exception:  # noqa: BLE001
                ok = False
            out.calls.append((started, time.monotonic() - started, ok))
            stop.wait(0.5)
    finally:
        connections.close_all()


def _window(calls: list[tuple[float, float, bool]], start: float, end: float) -> dict[str, Any]:
    """Calls that overlapped [start, end): count, errors, p50/p99/max ms and how many took over SLOW_S."""
    inside = [(s, d, ok) for s, d, ok in calls if s < end and s + d >= start]
    seconds = [d for _, d, _ in inside]
    summary: dict[str, Any] = {"count": len(inside), "errors": sum(1 for *_, ok in inside if not ok)}
    if seconds:
        p = percentiles([d * 1000 for d in seconds])
        summary.update(
            p50_ms=p["p50_ms"], p99_ms=p["p99_ms"], max_ms=round(max(seconds) * 1000, 1),
            over_1s=sum(1 for d in seconds if d > SLOW_S),
        )
    return summary


def _searches_settle(searches: list[_Timeline], *, since: float, timeout_s: float) -> bool:
    """Wait until every search thread has finished a search it started at or after ``since`` (so every search
    that overlapped what came before has ended and been recorded); False after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(t.calls and t.calls[-1][0] >= since for t in searches):
            return True
        time.sleep(0.05)
    return False


def _flip_window_line(
    searches: list[_Timeline], writes: _Timeline, start: float, end: float, *, settled: bool
) -> str:
    found = _window([c for t in searches for c in list(t.calls)], start, end)
    probe = _window(list(writes.calls), start, end)
    line = f"  flip: searches during the flip: {found['count']}"
    if found["count"]:
        line += (f", p50 {found['p50_ms']} / p99 {found['p99_ms']} / max {found['max_ms']} ms, "
                 f"{found['over_1s']} over {SLOW_S:.0f} s, {found['errors']} errors")
    line += f"; write probe: {probe['count']}" + (f", max {probe['max_ms']} ms" if probe["count"] else "")
    return line if settled else line + " (a search still running: the final figures follow the run)"


# ``prefill``: the next space's vectors, text hashes and staged cache rows written by one table rewrite before
# anything is timed. Placeholders: each chunk's first NEW_DIMENSIONS dimensions of its own vector, and a hash of
# its id and text where it has none (the bench corpus records none).
_PREFILL_SQL = (
    f"""
    ALTER TABLE search_chunk
      ALTER COLUMN embedding_hash TYPE varchar(64) USING coalesce(
        embedding_hash, encode(sha256(convert_to(id::text || ':' || text, 'UTF8')), 'hex')),
      ALTER COLUMN embedding_next TYPE vector USING CASE
        WHEN embedding IS NOT NULL AND (in_live OR in_latest) THEN subvector(embedding, 1, {NEW_DIMENSIONS}) END,
      ALTER COLUMN embedding_next_model TYPE varchar(120) USING CASE
        WHEN embedding IS NOT NULL AND (in_live OR in_latest) THEN '{NEW_MODEL}' ELSE '' END
    """,
    f"""
    INSERT INTO search_embeddingcache (model, text_hash, embedding, created_at)
    SELECT '{NEW_MODEL}', embedding_hash, embedding_next, now() FROM search_chunk
    WHERE embedding_next_model = '{NEW_MODEL}' ON CONFLICT DO NOTHING
    """,
)


def _prefill(log: Callable[[str], None]) -> float:
    """Write the next space's placeholder vectors in one rewrite of the chunk table (its indexes rebuilt), not
    row by row as the prepare does (an hour at 100k items: docs/benchmarks.md); seconds taken."""
    started = time.monotonic()
    with connection.cursor() as cursor:
        for statement in _PREFILL_SQL:
            cursor.execute(statement)
        cursor.execute("ANALYZE search_chunk")
    seconds = time.monotonic() - started
    log(f"  flip: prefilled the next space by one table rewrite in {seconds:.1f} s (placeholder vectors)")
    return seconds


def flip_measure(
    queries: list[str],
    *,
    threads: int = 2,
    window_s: float = 20.0,
    prefill: bool = False,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Stage ``hash-256`` beside the active space, then prepare, flip and clean up while ``threads`` search
    threads and a write probe run; ``window_s`` of searching before and after. Precondition: the default
    connection is on a loaded bench corpus (a scratch database: the switch is not undone).

    ``prefill``: instead of staging (every chunk embedded again) and the prepare's row-by-row fill, the next
    space is written by one table rewrite before anything is timed (``_prefill``), and the clean-up's row-by-row
    emptying is left out: what is measured is then the flip itself at scale (its lock, the searches around it)
    and the prepare's index build, in minutes instead of the three hours the full switch takes at 100k items."""
    provider = provider_for_model(NEW_MODEL, NEW_DIMENSIONS)
    chunks = Chunk.objects.current().count()
    prefill_s = _prefill(log) if prefill else None
    pending = reembed.space_pending(NEW_MODEL).count()
    log(f"  flip: staging {pending} of {chunks} chunks in {NEW_MODEL}")
    started = time.monotonic()
    space = reembed.space_build_start(provider=provider)
    while not reembed.space_stage(space=space, provider=provider):
        pass
    stage_s = time.monotonic() - started
    log(f"  flip: staged in {stage_s:.1f} s; searching {window_s:.0f} s before, then while it prepares, "
        "flips and cleans up, then after")
    probe_id = Chunk.objects.order_by("pk").values_list("pk", flat=True).first()
    connection.close()  # the threads open their own; the steps below open a fresh one
    stop = threading.Event()
    searches = [_Timeline() for _ in range(threads)]
    writes = _Timeline()
    workers = [
        threading.Thread(target=_search_loop, args=(queries, stop, searches[n], n * 7), name=f"flip-search-{n}")
        for n in range(threads)
    ]
    if probe_id is not None:
        workers.append(threading.Thread(target=_write_loop, args=(stop, writes, probe_id), name="flip-write"))
    marks: dict[str, float] = {}
    for worker in workers:
        worker.start()
    try:
        time.sleep(window_s)
        marks["prepare"] = time.monotonic()
        reembed.space_prepare(space=space)
        marks["flip"] = time.monotonic()
        log(f"  flip: prepared in {marks['flip'] - marks['prepare']:.1f} s")
        outcome = reembed.space_flip(space=space, provider=provider, stragglers_max=10**9)
        marks["cleanup"] = time.monotonic()
        log(f"  flip: {outcome.status} in {marks['cleanup'] - marks['flip']:.2f} s "
            f"(waited {outcome.swap_wait_s:.3f} s for running searches)")
        # The flip's own window, logged before the clean-up (an hour at 100k items): a run cut off there keeps it.
        settled = _searches_settle(searches, since=marks["cleanup"], timeout_s=max(window_s, SLOW_S))
        log(_flip_window_line(searches, writes, marks["flip"], marks["cleanup"], settled=settled))
        cleanup_started = time.monotonic()
        dropped = reembed.unused_indexes_drop(keep=space)
        cleared = None if prefill else reembed.space_next_clear()
        marks["after"] = time.monotonic()
        emptied = "next-space columns left as they are (prefill)" if cleared is None else f"{cleared} rows emptied"
        log(f"  flip: cleaned up in {marks['after'] - cleanup_started:.1f} s ({emptied}, {len(dropped)} index dropped)")
        time.sleep(window_s)
        marks["end"] = time.monotonic()
    finally:
        stop.set()
        for worker in workers:
            worker.join()
    calls = [c for t in searches for c in t.calls]
    steps = ("prepare", "flip", "cleanup", "after", "end")
    windows = {"before": (marks["prepare"] - window_s, marks["prepare"])}
    windows.update({step: (marks[step], marks[nxt]) for step, nxt in itertools.pairwise(steps)})
    return {
        "chunks": chunks,
        "model": NEW_MODEL,
        "prefill_s": None if prefill_s is None else round(prefill_s, 1),
        "staged": pending,
        "stage_s": round(stage_s, 1),
        "prepare_s": round(marks["flip"] - marks["prepare"], 2),
        "flip_s": round(marks["cleanup"] - marks["flip"], 3),
        "swap_wait_s": round(outcome.swap_wait_s, 3),
        "cleanup_s": round(marks["after"] - cleanup_started, 2),
        "outcome": outcome.status,
        "filled_in_flip": outcome.filled,
        "cleared": cleared,
        "search_threads": threads,
        "searches": {name: _window(calls, lo, hi) for name, (lo, hi) in windows.items()},
        "writes": {
            name: _window(writes.calls, *windows[name]) for name in ("prepare", "flip", "cleanup")
        } | {"longest_wait_s": round(max((d for _, d, _ in writes.calls), default=0.0), 2)},
    }
