"""Moving the corpus's vectors: the embedding backfill (with back-off) and the switch to a new model.

**Backfill** (``embeddings_backfill_run``): current chunks without a vector of the active space get one, with
that space's model, in batches that each commit; a run killed half-way and started again embeds what is
left and ends in the same state as an uninterrupted run.

**Switch** (``corpus_reembed``; ``manage.py reembed`` in the foreground, the ``search.embedding_space_switch``
task in the background). When the configured model (``EMBEDDING_PROVIDER``) is not the active space's and
the corpus has vectors, searches must keep a complete space while the new one is built:

1. *Building.* The configured model's ``EmbeddingSpace`` is marked ``building``. Every current chunk's vector
   of the new model is computed in batches and staged in the embedding cache, keyed (model, text hash) like
   every document embedding; the chunk records its text hash (``Chunk.embedding_hash``). The ``embedding``
   column, which searches read, is not touched, so the vector lane keeps searching the old space, whole.
   Each batch commits: a killed run resumes where it stopped. Passes repeat until one finds nothing missing,
   so chunks written meanwhile are staged too (the ordinary build still embeds them in the old space, so
   they are searchable before the flip as well).
2. *Prepare* (``space_prepare``): the staged vectors are copied into the chunk's next-space columns
   (``embedding_next``/``embedding_next_model``) in short id-range UPDATEs, and the new model's HNSW index is
   built over them ``CONCURRENTLY`` and loaded into memory (pg_prewarm). Searches still read only the
   searched pair; saves go on.
3. *Flip* (``space_flip``): one transaction takes the space lock, locks ``search_chunk`` against writes
   (``SHARE ROW EXCLUSIVE``: searches read on, saves wait), stages and fills the few chunks written since
   the last pass (more than ``FLIP_STRAGGLERS_MAX`` and it gives up, and the run stages another pass), then
   takes ``ACCESS EXCLUSIVE`` in short tries (``SWAP_LOCK_TIMEOUT_MS``) and swaps the two column pairs by
   renaming them, and makes the new space the active one. It rewrites no row and builds no index: searches
   wait for the renames only (milliseconds, plus at most one try while running searches finish). A search
   is one statement: it sees the complete old space or the complete new one, never a mix (and
   ``vector.vector_search`` re-embeds a query of the old model that meets the new space).
4. The old model's index, now over the next-space columns, is dropped (``CONCURRENTLY``) and those columns
   are emptied in id ranges (``space_next_clear``).

Before this design the flip copied every vector into the searched column with one UPDATE and built the
index inside its lock: at 10k items saves waited 110.8 s and searches just after it were slow for seconds
(docs/benchmarks.md).

Runs are serialised by the ``reembed`` job lock (``jobs.job_execute``). Without it nothing breaks either:
staging is idempotent (the cache ignores duplicates) and the flip happens once, under the space lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, TypeVar

from django.contrib.postgres.aggregates import ArrayAgg
from django.db import DatabaseError, OperationalError, connection, transaction
from django.db.models import Count, Exists, F, Max, OuterRef, Q, QuerySet
from django.utils import timezone

from search.embeddings import spaces
from search.embeddings.providers import EmbeddingProvider, embed_documents, get_provider, text_hash
from search.errors import EmbeddingUnavailable
from search.models import Chunk, EmbeddingCache, EmbeddingSpace
from search.services import spaces as space_writes
from search.services import vector_index

logger = logging.getLogger(__name__)

# In-process back-off when the provider fails: 2 s, 4 s, 8 s, … capped, then give up (the Celery task
# then retries later with its own, longer back-off).
BACKOFF_ATTEMPTS = 4
BACKOFF_BASE_S = 2.0
BACKOFF_MAX_S = 60.0

# The flip embeds at most this many chunks written since the last staging pass, inside its transaction
# (chunk writes wait for it); with more it gives up and the run stages another pass first.
FLIP_STRAGGLERS_MAX = 64
# Refused flips (writes kept coming, or a deadlock with a concurrent writer) before a run stops and leaves
# the space building for the next run.
FLIP_ATTEMPTS = 5

T = TypeVar("T")
State = EmbeddingSpace.State
Step = EmbeddingSpace.Step


def _with_backoff(
    run: Callable[[Callable[[int], None]], T],
    *,
    progress: Callable[[int], None] | None,
    attempts: int,
    base_delay_s: float,
    max_delay_s: float,
    sleep: Callable[[float], None],
) -> tuple[T, int]:
    """``run(progress)`` until it returns, resuming after :class:`EmbeddingUnavailable`.

    It waits ``base_delay_s · 2ⁿ`` (at most ``max_delay_s``) between tries; ``attempts`` consecutive
    failures without progress re-raise the error. Returns ``run``'s result and the units it reported.
    """
    done = 0
    failures = 0
    moved = False

    def _progress(n: int) -> None:
        nonlocal done, moved
        done += n
        moved = True
        if progress:
            progress(n)

    while True:
        moved = False
        try:
            return run(_progress), done
        except EmbeddingUnavailable as exc:
            failures = 1 if moved else failures + 1
            if failures >= attempts:
                raise
            delay = min(max_delay_s, base_delay_s * 2 ** (failures - 1))
            logger.warning(
                "embedding provider failed (%s); retrying in %.1f s (%s/%s)",
                exc.message,
                delay,
                failures,
                attempts,
            )
            sleep(delay)


def embeddings_backfill_run(
    *,
    progress: Callable[[int], None] | None = None,
    provider: EmbeddingProvider | None = None,
    attempts: int = BACKOFF_ATTEMPTS,
    base_delay_s: float = BACKOFF_BASE_S,
    max_delay_s: float = BACKOFF_MAX_S,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Embed every current chunk lacking a vector of the active space, backing off when the provider fails.

    ``provider`` defaults to the active space's model (the configured provider when it is that model).
    Other errors (e.g. ``EmbeddingModelMismatch`` for a ``provider`` of another model: run ``reembed``) are
    raised at once. Returns chunks embedded.
    """
    if provider is None:
        configured = get_provider()
        space = space_writes.active_space(provider=configured)
        if (space.model, space.dimensions) == (configured.name, configured.dimensions):
            provider = configured
    _, done = _with_backoff(
        lambda p: vector_index.embeddings_backfill(progress=p, provider=provider),
        progress=progress,
        attempts=attempts,
        base_delay_s=base_delay_s,
        max_delay_s=max_delay_s,
        sleep=sleep,
    )
    return done


def embeddings_pending_count(*, provider: EmbeddingProvider | None = None) -> int:
    """Chunks the backfill would embed (for progress bars)."""
    return int(vector_index.embeddings_pending(space_writes.active_space(provider=provider).model).count())


# --- the switch ------------------------------------------------------------------------------------------


def space_pending(model: str) -> QuerySet[Chunk]:
    """Current chunks without a staged vector of ``model`` in the embedding cache (or no text hash yet)."""
    staged = EmbeddingCache.objects.filter(model=model, text_hash=OuterRef("embedding_hash"))
    return Chunk.objects.current().filter(Q(embedding_hash__isnull=True) | ~Exists(staged))


def _has_vectors(model: str) -> bool:
    return bool(Chunk.objects.filter(embedding_model=model).exists())


def _stage_batch(chunks: list[Chunk], *, provider: EmbeddingProvider) -> None:
    """Stage ``chunks``' vectors of ``provider``'s model (the cache) and record their text hashes."""
    texts = vector_index.chunk_texts(chunks)
    embed_documents(texts, provider=provider)
    hashes = [text_hash(t) for t in texts]
    changed = [
        Chunk(pk=c.pk, embedding_hash=h) for c, h in zip(chunks, hashes, strict=True) if c.embedding_hash != h
    ]
    if changed:
        Chunk.objects.bulk_update(changed, ["embedding_hash"])


def _space_recount(space: EmbeddingSpace) -> tuple[int, int]:
    total = int(Chunk.objects.current().count())
    done = total - int(space_pending(space.model).count())
    EmbeddingSpace.objects.filter(pk=space.pk).update(
        chunks_done=done, chunks_total=total, progress_at=timezone.now()
    )
    return done, total


def space_build_start(*, provider: EmbeddingProvider) -> EmbeddingSpace:
    """Mark ``provider``'s space as building (a space already building resumes, keeping its start) and
    retire any other building space (the configured model changed again)."""
    now = timezone.now()
    with transaction.atomic():
        space_writes.space_lock()
        EmbeddingSpace.objects.filter(state=State.BUILDING, active=False).exclude(model=provider.name).update(
            state=State.RETIRED
        )
        space, created = EmbeddingSpace.objects.get_or_create(
            model=provider.name,
            defaults={"dimensions": provider.dimensions, "state": State.BUILDING, "started_at": now},
        )
        # (never the active row: a concurrent run may have flipped it already; the flip then says so)
        if not created and not space.active and (space.state != State.BUILDING or space.started_at is None):
            space.state = State.BUILDING
            space.dimensions = provider.dimensions
            space.started_at = now
            space.finished_at = None
            space.chunks_done = 0
            space.save(update_fields=["state", "dimensions", "started_at", "finished_at", "chunks_done"])
        EmbeddingSpace.objects.filter(pk=space.pk).update(last_error="", progress_at=now)
    space.refresh_from_db()
    return space


def space_stage(
    *,
    space: EmbeddingSpace,
    provider: EmbeddingProvider,
    progress: Callable[[int], None] | None = None,
    deadline: float | None = None,
) -> bool:
    """Stage the vectors of every current chunk that lacks one, in batches that each commit.

    Returns True once a whole pass found nothing missing, False when ``deadline`` (``time.monotonic()``)
    passed first. Provider errors propagate (the batches done stay).
    """
    _step(space, Step.STAGING)
    while True:
        _space_recount(space)
        staged = 0
        last = 0
        while True:
            batch = list(
                space_pending(space.model)
                .filter(pk__gt=last)
                .select_related("revision")
                .order_by("pk")[: vector_index.EMBED_BATCH]
            )
            if not batch:
                break
            last = batch[-1].pk
            _stage_batch(batch, provider=provider)
            staged += len(batch)
            EmbeddingSpace.objects.filter(pk=space.pk).update(
                chunks_done=F("chunks_done") + len(batch), progress_at=timezone.now()
            )
            if progress:
                progress(len(batch))
            if deadline is not None and time.monotonic() >= deadline:
                _space_recount(space)
                return False
        if staged == 0:
            return True


@dataclass(frozen=True)
class FlipOutcome:
    status: Literal["flipped", "already_active", "cancelled", "refused"]
    stragglers: int = 0  # chunks embedded inside the flip (written since the last staging pass)
    filled: int = 0  # chunks whose next-space vector the flip filled (the stragglers and any prepare missed)
    seconds: float = 0.0
    swap_wait_s: float = 0.0  # how long the flip waited for running searches before it could swap


# The next-space columns of a range of chunk ids get their staged vector (one UPDATE joined to the cache on
# the text hash); rows of another model there (an earlier switch's, or a cancelled one's) are emptied.
_FILL_SQL = """
    UPDATE search_chunk c SET embedding_next = e.embedding, embedding_next_model = %(model)s
    FROM search_embeddingcache e
    WHERE c.id > %(lo)s AND c.id <= %(hi)s AND e.model = %(model)s AND e.text_hash = c.embedding_hash
      AND c.embedding_next_model <> %(model)s
"""
_FILL_IDS_SQL = """
    UPDATE search_chunk c SET embedding_next = e.embedding, embedding_next_model = %(model)s
    FROM search_embeddingcache e
    WHERE c.id = ANY(%(ids)s) AND e.model = %(model)s AND e.text_hash = c.embedding_hash
"""
_NEXT_CLEAR_SQL = """
    UPDATE search_chunk SET embedding_next = NULL, embedding_next_model = ''
    WHERE id > %(lo)s AND id <= %(hi)s AND embedding_next_model NOT IN ('', %(keep)s)
"""
# The flip: the two column pairs trade names (catalogue changes only; the indexes follow their columns).
_SWAP_SQL = [
    f"ALTER TABLE search_chunk RENAME COLUMN {old} TO {new}"
    for searched, upcoming in zip(vector_index.SEARCHED, vector_index.NEXT, strict=True)
    for old, new in ((searched, f"{searched}_swap"), (upcoming, searched), (f"{searched}_swap", upcoming))
]
# Chunk ids per UPDATE of the fill and of the clean-up: short transactions, so a save that touches a chunk
# row (a publish flags the old revision's chunks) never waits long behind one, and a killed run keeps what
# it did. Each row update also enters the searched model's HNSW index (a new row version): about 5 ms a row
# on 2 cores at 10k items, so 2,000 ids held a row for 10 s in the bench, 250 for about 1.3 s.
RANGE_IDS = 250
# The flip waits at most this long for the searches running when it asks to swap (searches that arrive
# meanwhile queue behind it), then lets them through and asks again, up to SWAP_TRIES times.
SWAP_LOCK_TIMEOUT_MS = 300
SWAP_TRIES = 20
# How often a step that goes through the table records its progress (one small UPDATE each time).
STEP_REPORT_S = 1.0


def _id_ranges() -> list[tuple[int, int]]:
    top = Chunk.objects.aggregate(top=Max("pk"))["top"] or 0
    return [(lo, min(lo + RANGE_IDS, top)) for lo in range(0, top, RANGE_IDS)]


# Told each step of a switch as it is recorded: (step, ranges done, ranges in all; 0 and 0 for a step
# without ranges). ``manage.py reembed`` prints them.
StepListener = Callable[[str, int, int], None]


def _step(
    space: EmbeddingSpace, step: str, *, done: int = 0, total: int = 0, on_step: StepListener | None = None
) -> None:
    """Record where the switch to ``space`` stands, for the admin (its own statement: seen at once)."""
    EmbeddingSpace.objects.filter(pk=space.pk).update(
        step=step, step_done=done, step_total=total, progress_at=timezone.now()
    )
    if on_step is not None:
        on_step(step, done, total)


def _ranges_with_progress(
    space: EmbeddingSpace | None, step: str, on_step: StepListener | None = None
) -> Iterator[tuple[int, int]]:
    """The id ranges, recording ``step``'s progress on ``space`` about every STEP_REPORT_S as they are done."""
    ranges = _id_ranges()
    if space is not None:
        _step(space, step, total=len(ranges), on_step=on_step)
    reported = time.monotonic()
    for done, bounds in enumerate(ranges, start=1):
        yield bounds
        if space is not None and (done == len(ranges) or time.monotonic() - reported >= STEP_REPORT_S):
            _step(space, step, done=done, total=len(ranges), on_step=on_step)
            reported = time.monotonic()


def space_prepare(
    *, space: EmbeddingSpace, deadline: float | None = None, on_step: StepListener | None = None
) -> bool:
    """Put the building ``space``'s staged vectors where the flip will find them, while searches go on.

    Fills the next-space columns from the embedding cache in id ranges that each commit (emptying other
    models' leftovers there), drops the HNSW indexes of spaces that are neither active nor this one, builds
    this space's index over the next-space columns (``CONCURRENTLY``: saves go on) and loads it into memory.
    Nothing here changes what a search reads. Returns False when ``deadline`` passed during the fill (the
    next call goes on; ranges already filled are skipped by their model).
    """
    model = space.model
    with space_writes.space_prepare_lock():
        if not EmbeddingSpace.objects.filter(pk=space.pk, active=False, state=State.BUILDING).exists():
            return True  # flipped or cancelled by another run meanwhile: the flip says which
        for lo, hi in _ranges_with_progress(space, Step.FILLING, on_step):
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(_NEXT_CLEAR_SQL, {"lo": lo, "hi": hi, "keep": model})
                cursor.execute(_FILL_SQL, {"lo": lo, "hi": hi, "model": model})
            if deadline is not None and time.monotonic() >= deadline:
                return False
        _step(space, Step.INDEXING, on_step=on_step)
        for other in EmbeddingSpace.objects.filter(active=False).exclude(pk=space.pk):
            vector_index.vector_index_drop(model=other.model)
        vector_index.vector_index_ensure(space=space, staged=True)
        vector_index.vector_index_prewarm(model)
    return True


def _swap_columns() -> float:
    """Trade the column pairs' names under an ACCESS EXCLUSIVE lock taken in short tries (a savepoint each).
    Returns the seconds spent waiting for it; raises the lock error after SWAP_TRIES."""
    started = time.monotonic()
    with connection.cursor() as cursor:
        for attempt in range(SWAP_TRIES):
            try:
                with transaction.atomic():
                    cursor.execute(f"SET LOCAL lock_timeout = '{SWAP_LOCK_TIMEOUT_MS}ms'")
                    cursor.execute("LOCK TABLE search_chunk IN ACCESS EXCLUSIVE MODE")
                break
            except OperationalError as exc:
                if getattr(exc.__cause__, "sqlstate", None) != "55P03" or attempt == SWAP_TRIES - 1:
                    raise
                time.sleep(SWAP_LOCK_TIMEOUT_MS / 1000 / 2)  # the queued searches run meanwhile
        waited = time.monotonic() - started
        cursor.execute("SET LOCAL lock_timeout = 0")
        named = _plain_index_names(cursor)
        for statement in _SWAP_SQL:
            cursor.execute(statement)
        _index_names_swap(cursor, named)
    return waited


# The plain (non-expression, non-partial) indexes of the model columns: Django's ``db_index`` ones (a btree
# and a ``_like`` one each), named after their column.
_PLAIN_INDEXES_SQL = """
    SELECT c.relname, a.attname FROM pg_index i
    JOIN pg_class c ON c.oid = i.indexrelid
    JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
    WHERE i.indrelid = 'search_chunk'::regclass AND i.indnatts = 1 AND i.indexprs IS NULL
      AND i.indpred IS NULL AND a.attname IN (%s, %s)
    ORDER BY c.relname
"""


def _plain_index_names(cursor: Any) -> dict[str, list[str]]:
    """Column -> names of its plain indexes (sorted), before the swap."""
    cursor.execute(_PLAIN_INDEXES_SQL, [vector_index.SEARCHED[1], vector_index.NEXT[1]])
    named: dict[str, list[str]] = {}
    for name, column in cursor.fetchall():
        named.setdefault(column, []).append(name)
    return named


def _index_names_swap(cursor: Any, named: dict[str, list[str]]) -> None:
    """After the columns traded names, trade their plain indexes' names too, so each index keeps the name
    of the column it is on (migrations that later drop or re-add a column find its own index by name)."""
    searched = named.get(vector_index.SEARCHED[1], [])
    upcoming = named.get(vector_index.NEXT[1], [])
    if len(searched) != len(upcoming):
        logger.warning("embedding space flip: index names not swapped (%s vs %s)", searched, upcoming)
        return
    for a, b in zip(searched, upcoming, strict=True):
        cursor.execute(f'ALTER INDEX "{a}" RENAME TO "{a}_swap"')
        cursor.execute(f'ALTER INDEX "{b}" RENAME TO "{a}"')
        cursor.execute(f'ALTER INDEX "{a}_swap" RENAME TO "{b}"')


def space_flip(
    *, space: EmbeddingSpace, provider: EmbeddingProvider, stragglers_max: int | None = None
) -> FlipOutcome:
    """Make the building ``space`` the active one in one transaction (see the module docstring).

    Precondition: ``space_stage`` and ``space_prepare`` have just completed (without the prepare the flip
    still works, filling and indexing inside its lock: the tests' way), and no caller transaction is open in
    production (the flip must commit on its own for searches to see it). Chunk writes wait from the
    straggler check to the commit; searches wait only for the swap itself (catalogue renames, milliseconds)
    plus at most SWAP_LOCK_TIMEOUT_MS per try while running searches finish.
    Returns ``refused`` (more than ``stragglers_max``, default FLIP_STRAGGLERS_MAX, chunks written since
    the last pass, the swap's lock not had in SWAP_TRIES, or a deadlock with a concurrent writer: stage and
    retry), ``cancelled`` (the space is no longer building) or ``already_active`` (another run flipped it).
    """
    model = space.model
    stragglers_max = FLIP_STRAGGLERS_MAX if stragglers_max is None else stragglers_max
    started = time.monotonic()
    with space_writes.space_prepare_lock():
        try:
            with transaction.atomic():
                space_writes.space_lock()
                target = EmbeddingSpace.objects.get(pk=space.pk)
                if target.active:
                    return FlipOutcome(status="already_active")
                if target.state != State.BUILDING:
                    return FlipOutcome(status="cancelled")
                with connection.cursor() as cursor:
                    cursor.execute("LOCK TABLE search_chunk IN SHARE ROW EXCLUSIVE MODE")  # writes wait, reads go on
                stragglers = list(
                    space_pending(model).select_related("revision").order_by("pk")[: stragglers_max + 1]
                )
                if len(stragglers) > stragglers_max:
                    return FlipOutcome(status="refused", stragglers=len(stragglers))
                if stragglers:
                    _stage_batch(stragglers, provider=provider)
                # One scan for both: the chunks the prepare did not fill, and the corpus count. Counted before
                # the swap: writes already wait, so it is the same number, and nothing scans the table while
                # the swap's lock holds searches (1-2 s a scan at 500k chunks).
                counted = Chunk.objects.current().aggregate(
                    total=Count("pk"), unfilled=ArrayAgg("pk", filter=~Q(embedding_next_model=model), default=[])
                )
                total = int(counted["total"])
                with connection.cursor() as cursor:
                    cursor.execute(_FILL_IDS_SQL, {"ids": counted["unfilled"], "model": model})
                    filled = cursor.rowcount
                vector_index.vector_index_ensure(space=target, staged=True)
                waited = _swap_columns()
                now = timezone.now()
                EmbeddingSpace.objects.filter(active=True).update(active=False, state=State.RETIRED)
                EmbeddingSpace.objects.filter(state=State.BUILDING).exclude(pk=target.pk).update(
                    state=State.RETIRED
                )
                EmbeddingSpace.objects.filter(pk=target.pk).update(
                    active=True,
                    state=State.ACTIVE,
                    chunks_done=total,
                    chunks_total=total,
                    finished_at=now,
                    progress_at=now,
                    last_error="",
                    step=Step.NONE,
                    step_done=0,
                    step_total=0,
                )
        except DatabaseError as exc:
            sqlstate = getattr(exc.__cause__, "sqlstate", None)
            # deadlock, serialization failure, the swap's lock not had: try again
            if sqlstate not in ("40P01", "40001", "55P03"):
                raise
            logger.warning("embedding space flip to %s rolled back (%s); retrying", model, sqlstate)
            return FlipOutcome(status="refused")
    spaces._known_spaces.clear()  # this process's lane reads the new space at once
    seconds = time.monotonic() - started
    logger.info(
        "embedding space flip: %s is active (%s stragglers, %s filled, swap waited %.3f s, %.2f s in all)",
        model,
        len(stragglers),
        filled,
        waited,
        seconds,
    )
    return FlipOutcome(
        status="flipped", stragglers=len(stragglers), filled=filled, seconds=seconds, swap_wait_s=waited
    )


def space_next_clear(
    *, keep: str = "", space: EmbeddingSpace | None = None, on_step: StepListener | None = None
) -> int:
    """Empty the next-space columns (after a flip they hold the previous model's vectors), in id ranges that
    each commit; rows of ``keep`` stay. Returns the rows emptied. Run after the previous model's index is
    dropped, so the updates do not feed it. ``space`` (the one just flipped to) shows the progress."""
    cleared = 0
    for lo, hi in _ranges_with_progress(space, Step.CLEARING, on_step):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_NEXT_CLEAR_SQL, {"lo": lo, "hi": hi, "keep": keep})
            cleared += cursor.rowcount
    if space is not None:
        _step(space, Step.NONE, on_step=on_step)
    return cleared


def unused_indexes_drop(*, keep: EmbeddingSpace) -> list[str]:
    """Drop the HNSW index of every inactive space but ``keep`` that no searched vector uses (after a flip:
    the previous model's, over the next-space columns). Returns the names dropped."""
    dropped = []
    for space in EmbeddingSpace.objects.exclude(pk=keep.pk).filter(active=False):
        if _has_vectors(space.model):
            continue
        if vector_index.vector_index_drop(model=space.model):
            dropped.append(vector_index.hnsw_index_name(space.model))
    return dropped


def _building_retire(*, keep_model: str) -> None:
    with transaction.atomic():
        space_writes.space_lock()
        EmbeddingSpace.objects.filter(state=State.BUILDING, active=False).exclude(model=keep_model).update(
            state=State.RETIRED
        )


@dataclass(frozen=True)
class SpaceSwitchStatus:
    """Which space searches use and whether ``corpus_reembed`` has a switch to do (read only; never raises
    on a mismatch, which is the normal state while a switch builds)."""

    active_model: str | None
    configured_model: str
    configured_dimensions: int
    building: EmbeddingSpace | None
    needed: bool

    def summary(self, *, background: bool = True) -> str:
        """One line for ``up`` and the worker's log."""
        if not self.needed or self.active_model is None:
            return f"The vector lane searches {self.active_model or self.configured_model}."
        how = (
            "in the background (progress: admin, Embedding spaces)"
            if background
            else "by `python manage.py reembed` (no worker is running)"
        )
        return f"Searches keep using {self.active_model} while {self.configured_model} is built {how}."


def space_switch_status(*, provider: EmbeddingProvider | None = None) -> SpaceSwitchStatus:
    provider = provider or get_provider()
    spaces = list(EmbeddingSpace.objects.filter(Q(active=True) | Q(state=State.BUILDING)))
    active = next((s for s in spaces if s.active), None)
    building = next((s for s in spaces if not s.active and s.model == provider.name), None)
    stale = any(not s.active and s.model != provider.name for s in spaces)
    differs = active is not None and (active.model, active.dimensions) != (provider.name, provider.dimensions)
    # A different active space without vectors is no switch: the next build activates the configured model.
    needed = stale or (differs and active is not None and _has_vectors(active.model))
    return SpaceSwitchStatus(
        active_model=active.model if active else None,
        configured_model=provider.name,
        configured_dimensions=provider.dimensions,
        building=building,
        needed=needed,
    )


def embedding_space_progress(*, space: EmbeddingSpace) -> tuple[int, int]:
    """(chunks with a vector of ``space``, current chunks), for the admin. Live counts for the active
    space, the figures the build last wrote for the others."""
    if space.active:
        current = Chunk.objects.current()
        return int(current.filter(embedding_model=space.model).count()), int(current.count())
    return min(space.chunks_done, space.chunks_total), space.chunks_total


class ReembedReport(TypedDict):
    previous_model: str | None
    model: str
    dimensions: int
    # "active": the vector lane searches ``model``; "building": staged so far, searches still use the
    # previous model (a time budget ran out, or writes kept refusing the flip): run again to continue;
    # "retired": another run or a configuration change cancelled this build.
    state: str
    embedded: int
    chunks_done: int
    chunks_total: int
    index: str | None
    dropped_indexes: list[str]
    flip_seconds: float | None


def reembed_pending_count(*, provider: EmbeddingProvider | None = None) -> int:
    """Chunks that have no vector of the configured model yet (what ``reembed`` still has to embed):
    staged ones count as done while a switch builds."""
    provider = provider or get_provider()
    active = EmbeddingSpace.objects.filter(active=True).first()
    if active is not None and active.model != provider.name and _has_vectors(active.model):
        return int(space_pending(provider.name).count())
    return int(vector_index.embeddings_pending(provider.name).count())


def _space_error(space: EmbeddingSpace, message: str) -> None:
    EmbeddingSpace.objects.filter(pk=space.pk).update(last_error=message[:2000], progress_at=timezone.now())


def corpus_reembed(
    *,
    provider: EmbeddingProvider | None = None,
    progress: Callable[[int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    time_budget_s: float | None = None,
    on_step: StepListener | None = None,
    **backoff: Any,
) -> ReembedReport:
    """Move the corpus to ``provider`` (default: the configured model); see the module docstring.

    A corpus without vectors (a fresh knowledge base) simply activates the model and embeds. With
    ``time_budget_s`` the staging stops after about that long and the report says ``building``; the next
    call continues. Preconditions: outside a transaction in production (every batch, and the flip, commit
    on their own); runs serialised by the ``reembed`` job lock. Provider failures back off (``backoff``:
    ``attempts``, ``base_delay_s``, ``max_delay_s``) and are then raised, the message kept on the space.
    """
    provider = provider or get_provider()
    previous = EmbeddingSpace.objects.filter(active=True).first()
    previous_model = previous.model if previous else None
    retry = {"sleep": sleep, "attempts": BACKOFF_ATTEMPTS, "base_delay_s": BACKOFF_BASE_S,
             "max_delay_s": BACKOFF_MAX_S, **backoff}

    def _report(space: EmbeddingSpace, *, embedded: int, index: str | None, dropped: list[str],
                flip_seconds: float | None = None) -> ReembedReport:
        space.refresh_from_db()
        done, total = embedding_space_progress(space=space)
        return {
            "previous_model": previous_model,
            "model": space.model,
            "dimensions": space.dimensions,
            "state": State.ACTIVE if space.active else space.state,
            "embedded": embedded,
            "chunks_done": done,
            "chunks_total": total,
            "index": index,
            "dropped_indexes": dropped,
            "flip_seconds": flip_seconds,
        }

    same = previous is not None and (previous.model, previous.dimensions) == (
        provider.name,
        provider.dimensions,
    )
    if same or previous is None or not _has_vectors(previous.model):
        # Nothing to keep searching meanwhile (or nothing to move): the model is (made) active at once and the
        # chunks lacking its vector are embedded into it.
        space = previous if same and previous is not None else space_writes.space_activate(provider=provider)
        if previous is None or not same:
            logger.info(
                "reembed: the vector lane now searches %s (was %s)", space.model, previous_model or "nothing"
            )
        _building_retire(keep_model=space.model)
        embedded = embeddings_backfill_run(progress=progress, provider=provider, **retry)
        index = vector_index.vector_index_ensure(space=space)
        return _report(space, embedded=embedded, index=index, dropped=unused_indexes_drop(keep=space))

    space = space_build_start(provider=provider)
    logger.info("reembed: building %s while searches use %s", space.model, previous_model)
    deadline = time.monotonic() + time_budget_s if time_budget_s else None
    embedded = 0
    outcome: FlipOutcome | None = None
    for _ in range(FLIP_ATTEMPTS):
        try:
            complete, staged = _with_backoff(
                lambda p: space_stage(space=space, provider=provider, progress=p, deadline=deadline),
                progress=progress,
                **retry,
            )
            embedded += staged
            if not complete or not space_prepare(space=space, deadline=deadline, on_step=on_step):
                return _report(space, embedded=embedded, index=None, dropped=[])
            outcome = space_flip(space=space, provider=provider)
        except EmbeddingUnavailable as exc:
            _space_error(space, f"{exc.message} Staged vectors are kept; the next run continues.")
            raise
        embedded += outcome.stragglers if outcome.status == "flipped" else 0
        if outcome.status != "refused":
            break
    if outcome is None or outcome.status not in ("flipped", "already_active"):
        if outcome is not None and outcome.status == "refused":
            _space_error(
                space, "Chunks kept being written faster than the flip could take them; the next run tries again."
            )
        return _report(space, embedded=embedded, index=None, dropped=[])
    index = vector_index.hnsw_index_name(space.model)
    _step(space, Step.CLEARING, on_step=on_step)
    dropped = unused_indexes_drop(keep=space)
    space_next_clear(space=space, on_step=on_step)
    return _report(space, embedded=embedded, index=index, dropped=dropped, flip_seconds=outcome.seconds)
