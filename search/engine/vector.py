"""The vector lane and everything about the active embedding model.

The ``embedding`` column has no fixed dimension. Each model gets a partial HNSW index over
``embedding::vector(dim)`` restricted to its own rows, and the lane only ever compares the query
with rows of the active model, so vectors of different models or dimensions never meet.

The active space (``EmbeddingSpace.active``) is not necessarily the configured model: while a switch to
another model is building (search.services.reembed), searches keep using the complete old space, and the
query is embedded with the active space's own model (``space_provider``). A query vector carries the model
it belongs to (:class:`QueryVector`), so a search that finds the space flipped under it embeds the query
again in the new space instead of comparing vectors of two models.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import logging
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from search.engine.background import QueryBackground, query_background
from search.engine.embeddings import (
    EmbeddingProvider,
    embed_query,
    get_provider,
    provider_for_model,
)
from search.engine.reads import read_connection
from search.engine.scope import chunk_column
from search.engine.sql import Fragment
from search.errors import EmbeddingModelMismatch, EmbeddingUnavailable
from search.models import Chunk, EmbeddingSpace

logger = logging.getLogger(__name__)


_pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="embed")


# Changes of the active space (activation, a switch's flip) take this transaction-level advisory lock
# exclusively; a backfill batch takes it shared before writing vectors of the space it read as active, so
# no batch of the old model lands after a flip (it would sit outside the new space).
SPACE_LOCK_KEY = 0x6B62_5350  # "kbSP"


def space_lock(*, shared: bool = False) -> None:
    """Take the embedding-space lock until the end of the current transaction (precondition: inside one)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT pg_advisory_xact_lock{'_shared' if shared else ''}(%s)", [SPACE_LOCK_KEY]
        )


def space_activate(*, provider: EmbeddingProvider) -> EmbeddingSpace:
    """Make ``provider``'s space the active one at once. Only for a corpus with no vectors to keep
    searching (a fresh knowledge base); a corpus with vectors moves through ``reembed.corpus_reembed``'s
    staged switch."""
    now = timezone.now()
    with transaction.atomic():
        space_lock()
        EmbeddingSpace.objects.exclude(model=provider.name).filter(
            Q(active=True) | Q(state=EmbeddingSpace.State.BUILDING)
        ).update(active=False, state=EmbeddingSpace.State.RETIRED)
        space, _ = EmbeddingSpace.objects.update_or_create(
            model=provider.name,
            defaults={
                "dimensions": provider.dimensions,
                "active": True,
                "state": EmbeddingSpace.State.ACTIVE,
                "finished_at": now,
                "last_error": "",
            },
            create_defaults={
                "dimensions": provider.dimensions,
                "active": True,
                "state": EmbeddingSpace.State.ACTIVE,
                "started_at": now,
                "finished_at": now,
            },
        )
    _known_spaces.clear()  # this process's lane reads the space again (others notice in their statement)
    return space


def active_space(*, provider: EmbeddingProvider | None = None) -> EmbeddingSpace:
    """The space the vector lane searches: the active row, whatever model is configured (a switch to the
    configured model builds beside it and flips when complete). With no active space, or one that holds no
    vectors (nothing to keep searching), the configured model's space (``provider``'s) becomes active."""
    provider = provider or get_provider()
    space = EmbeddingSpace.objects.filter(active=True).first()
    if space is not None:
        if (space.model, space.dimensions) == (provider.name, provider.dimensions):
            return space
        if Chunk.objects.filter(embedding_model=space.model).exists():
            return space
    return space_activate(provider=provider)


def space_provider(model: str, dimensions: int) -> EmbeddingProvider:
    """The provider of a stored space: the configured instance when it is that model (one instance, its
    weights loaded once), else ``embeddings.provider_for_model`` (raises EmbeddingModelMismatch, with the
    fix, for a model this version cannot embed with)."""
    try:
        configured: EmbeddingProvider | None = get_provider()
    except ImproperlyConfigured:  # e.g. openai without a key: the space may still be another model's
        configured = None
    if configured is not None and (configured.name, configured.dimensions) == (model, int(dimensions)):
        return configured
    return provider_for_model(model, int(dimensions))


def lane_model() -> str:
    """The model of the space the vector lane searches, as this process last read it (no query once known;
    a search that finds the space changed reads it again, and so does this after KNOWN_SPACE_MAX_AGE_S)."""
    return _known_space(max_age_s=KNOWN_SPACE_MAX_AGE_S)[0]


_lane_providers: dict[tuple[str, str], tuple[EmbeddingProvider, float]] = {}


def lane_provider(*, max_age_s: float | None = None) -> EmbeddingProvider:
    """The provider the vector lane embeds queries with: the active space's model, or the configured one
    while no space is active (the first build activates it). Read-only (never activates a space: that takes
    the space lock, which a starting process or a health probe must not wait on); the space is read again
    when this process's copy is older than ``max_age_s`` (default KNOWN_SPACE_MAX_AGE_S)."""
    max_age_s = KNOWN_SPACE_MAX_AGE_S if max_age_s is None else max_age_s
    key = (connection.alias, str(connection.settings_dict.get("NAME")))
    known = _lane_providers.get(key)
    if known is not None and time.monotonic() - known[1] <= max_age_s:
        return known[0]
    space = EmbeddingSpace.objects.filter(active=True).values_list("model", "dimensions").first()
    provider = space_provider(*space) if space else get_provider()
    _lane_providers[key] = (provider, time.monotonic())
    return provider


def lane_warm() -> None:
    """Load the model the vector lane embeds queries with, now, so the first search's embedding budget
    (EMBEDDING_BUDGET_S, meant for a slow provider) is not spent loading weights. Web processes, workers and
    ``kb_search`` call it at start; a failure is logged, never raised (searches then degrade as usual)."""
    from search.engine.embeddings import provider_warm

    try:
        provider_warm(lane_provider(max_age_s=0))
    except Exception as exc:  # noqa: BLE001 - a cold model must not stop a process from starting
        logger.warning("could not load the embedding model ahead of searches: %s", exc)


def lane_warm_blocking() -> None:
    """``lane_warm`` on a thread of its own, waited for: callable where the caller may be inside an event
    loop (uvicorn imports the ASGI app from one, where Django refuses database access), and the connection
    it opened is closed with it."""
    import threading

    from django.db import connections

    def run() -> None:
        try:
            lane_warm()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, name="embedding-warm")
    thread.start()
    thread.join()


@dataclass(frozen=True)
class VectorHit:
    chunk_id: int
    item_id: int
    similarity: float


def _query_embedding_key(provider: EmbeddingProvider, text: str) -> str:
    return "qemb:" + hashlib.sha256(f"{provider.name}\x00{text}".encode()).hexdigest()


def query_embedding_forget(text: str, *, provider: EmbeddingProvider) -> None:
    """Drop a query's cached vector (the bench times uncached query embeddings with it)."""
    cache.delete(_query_embedding_key(provider, text[: settings.SEARCH["QUERY_EMBED_MAX_CHARS"]]))


class QueryVector(list[float]):
    """A query's vector and the model (embedding space) it belongs to.

    ``again(model, dimensions)`` gives the same query's vector in another space (None: it has none there),
    for a search that finds the active space changed between embedding the query and reading the index.
    A plain list handed to ``vector_search`` is taken to be of the active space.
    """

    def __init__(
        self, values: Iterable[float], *, model: str, again: Callable[[str, int], list[float] | None]
    ) -> None:
        super().__init__(values)
        self.model = model
        self.again = again


def query_embedding(text: str, *, provider: EmbeddingProvider | None = None) -> QueryVector:
    """Embed a query once, cached in Redis by (model, text hash); bounded by EMBEDDING_BUDGET_S.

    ``provider`` defaults to the active space's model (not the configured one: while a switch is building,
    searches compare queries with the old space)."""
    if provider is None:
        provider = space_provider(*_known_space())
    full_text = text

    def again(model: str, dimensions: int) -> list[float]:
        return query_embedding(full_text, provider=space_provider(model, dimensions))

    text = text[: settings.SEARCH["QUERY_EMBED_MAX_CHARS"]]
    key = _query_embedding_key(provider, text)
    try:
        cached = cache.get(key)
    except Exception:  # noqa: BLE001 - the cache is an optimisation; a dead Valkey must not fail search
        logger.warning("query-embedding cache unavailable; embedding without it")
        cached = None
    if cached is not None:
        return QueryVector(cached, model=provider.name, again=again)
    future = _pool.submit(embed_query, provider, text)
    try:
        vector = future.result(timeout=settings.EMBEDDING_BUDGET_S)
    except concurrent.futures.TimeoutError as exc:
        raise EmbeddingUnavailable("The embedding provider did not answer within the budget.") from exc
    except EmbeddingUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 - any provider failure degrades to lexical
        raise EmbeddingUnavailable(f"The embedding provider failed: {exc.__class__.__name__}") from exc
    try:
        cache.set(key, list(vector), 24 * 3600)
    except Exception:  # noqa: BLE001
        pass
    return QueryVector(vector, model=provider.name, again=again)


def item_vector(item_id: int, corpus: str, *, space: tuple[str, int] | None = None) -> QueryVector | None:
    """An item's vector for similar_to: the mean of its chunk vectors in the corpus, in the active space
    (or ``space``, a (model, dimensions) pair)."""
    model, dims = space or _known_space()
    with read_connection().cursor() as cursor:
        cursor.execute(
            f"SELECT avg(embedding::vector({int(dims)}))::text FROM search_chunk "
            f"WHERE item_id = %s AND embedding_model = %s AND {chunk_column(corpus)}",
            [item_id, model],
        )
        row = cursor.fetchone()
    if not row or row[0] is None:
        if space is None and _known_space(refresh=True) != (model, dims):  # the space flipped meanwhile
            return item_vector(item_id, corpus, space=_known_space())
        return None
    return QueryVector(
        (float(x) for x in row[0].strip("[]").split(",")),
        model=model,
        again=lambda m, d: item_vector(item_id, corpus, space=(m, d)),
    )


# The HNSW scan settings each search needs, as a session's settings: set once per database connection
# (in autocommit) rather than in a transaction of three more round trips per search.
_SCAN_SETTINGS_SQL = (
    "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', %(local)s), "
    "set_config('hnsw.ef_search', %(ef)s, %(local)s), "
    "set_config('hnsw.max_scan_tuples', %(tuples)s, %(local)s)"
)
_session_settings: weakref.WeakKeyDictionary[Any, tuple[str, str]] = weakref.WeakKeyDictionary()
# The active space (model, dimensions, when read) as this process last read it, per database (alias and
# name: evaluate and bench switch the default connection to a scratch database; a replica streams the primary's
# rows, its own entry all the same): the search statement
# checks it itself (one more row says whether that model is still the active one), so no query reads it
# first. ``lane_model`` (fusion's lane weights) has no statement to check it, so it re-reads the space
# when the process's copy is older than KNOWN_SPACE_MAX_AGE_S.
_known_spaces: dict[tuple[str, str], tuple[str, int, float]] = {}


def space_caches_forget() -> None:
    """Read the active space and its lane provider again at the next search (tests; a replaced database)."""
    _known_spaces.clear()
    _lane_providers.clear()
KNOWN_SPACE_MAX_AGE_S = 30.0


def _known_space(*, refresh: bool = False, max_age_s: float | None = None) -> tuple[str, int]:
    reader = read_connection()
    key = (reader.alias, str(reader.settings_dict.get("NAME")))
    known = None if refresh else _known_spaces.get(key)
    if known is not None and max_age_s is not None and time.monotonic() - known[2] > max_age_s:
        known = None
    if known is None:
        space = active_space()
        known = _known_spaces[key] = (space.model, int(space.dimensions), time.monotonic())
    return known[0], known[1]


def _vector_in_space(vector: list[float], space: tuple[str, int]) -> list[float] | None:
    """``vector`` as a vector of ``space``: itself when it is of that model (or untagged), else the same
    query embedded again in that space, so a search never compares vectors of two models."""
    model = getattr(vector, "model", None)
    if model is None or model == space[0]:
        return vector
    again: list[float] = vector.again(*space)  # type: ignore[attr-defined]
    return again


def _scan_settings() -> tuple[str, str]:
    return str(settings.SEARCH["HNSW_EF_SEARCH"]), str(settings.SEARCH["HNSW_MAX_SCAN_TUPLES"])


def vector_search(
    *, vector: list[float], corpus: str, items_sql: Fragment, limit: int, exclude_item: int | None = None
) -> list[VectorHit]:
    """Nearest chunks by cosine similarity (``vector_lane``'s hits)."""
    return vector_lane(vector=vector, corpus=corpus, items_sql=items_sql, limit=limit, exclude_item=exclude_item).hits


@dataclass(frozen=True)
class VectorLane:
    """The lane's hits, best first, and the query's score distribution over the corpus (None when the space
    holds no vectors): what fusion's confidence reads as "how far a hit stands out"."""

    hits: list[VectorHit]
    background: QueryBackground | None


def vector_lane(
    *, vector: list[float], corpus: str, items_sql: Fragment, limit: int, exclude_item: int | None = None
) -> VectorLane:
    """Nearest chunks by cosine similarity. Access and filters are applied inside the index scan
    (pgvector iterative scan, bounded by ``max_scan_tuples``), so a narrow filter still fills ``limit``.

    Only chunks of the active space are read, and only with a query vector of that space: a
    :class:`QueryVector` of another model (the space flipped since it was embedded) is embedded again."""
    known = _known_space()
    in_space = _vector_in_space(vector, known)
    if in_space is None:  # the query has no vector in the active space
        return VectorLane([], None)
    found = _nearest(in_space, known, corpus, items_sql, limit, exclude_item)
    if found is None:  # the active space changed since this process read it
        known = _known_space(refresh=True)
        in_space = _vector_in_space(vector, known)
        if in_space is not None:
            found = _nearest(in_space, known, corpus, items_sql, limit, exclude_item)
    if found is None or in_space is None:
        return VectorLane([], None)
    rows, newest_chunk_id = found
    hits = [VectorHit(r[0], r[1], float(r[2])) for r in rows]
    hits.sort(key=lambda h: (-h.similarity, h.chunk_id))  # relaxed_order may be slightly out of order
    background = query_background(in_space, model=known[0], dims=known[1], newest_chunk_id=newest_chunk_id)
    return VectorLane(hits, background)


def _nearest(
    vector: list[float],
    space: tuple[str, int],
    corpus: str,
    items_sql: Fragment,
    limit: int,
    exclude_item: int | None,
) -> tuple[list[tuple[int, int, float]], int] | None:
    """The lane's rows from the HNSW index of ``space`` and the newest chunk id (for the background's
    freshness); None when ``space`` is no longer the active one."""
    model, dims = space
    if len(vector) != dims:
        raise EmbeddingModelMismatch(
            f"The query vector has {len(vector)} dimensions but the index holds {dims}; run "
            "`python manage.py reembed`."
        )
    literal = "[" + ",".join(repr(float(v)) for v in vector) + "]"
    items_query, items_params = items_sql.sql, list(items_sql.params)
    corpus_col = chunk_column(corpus)
    exclude = "AND c.item_id <> %s" if exclude_item else ""
    params: list[Any] = [literal, model, *items_params]
    if exclude_item:
        params.append(exclude_item)
    params += [literal, limit]
    # One row (id -1) says whether ``model`` is still the active space, and the newest chunk id (an index
    # lookup); the nearest chunks come with it.
    # ef_search is the graph search's candidate list, not a cap: the iterative scan goes on past it until
    # ``limit`` rows (or max_scan_tuples) are read.
    sql = f"""
        SELECT -1, (SELECT coalesce(max(id), 0) FROM search_chunk), 0.0,
               EXISTS (SELECT 1 FROM search_embeddingspace WHERE active AND model = %s)
        UNION ALL (
            SELECT c.id, c.item_id, 1 - ((c.embedding::vector({dims})) <=> %s::vector({dims})), true
            FROM search_chunk c
            WHERE c.embedding_model = %s AND c.{corpus_col} AND c.item_id IN ({items_query}) {exclude}
            ORDER BY (c.embedding::vector({dims})) <=> %s::vector({dims})
            LIMIT %s
        )
    """
    params = [model, *params]
    ef, tuples = _scan_settings()
    reader = read_connection()
    if reader.in_atomic_block:  # a caller's transaction: settings local to a savepoint of it
        with transaction.atomic(using=reader.alias), reader.cursor() as cursor:
            cursor.execute(_SCAN_SETTINGS_SQL, {"local": True, "ef": ef, "tuples": tuples})
            cursor.execute(sql, params)
            rows = cursor.fetchall()
    else:
        reader.ensure_connection()
        raw = reader.connection
        with reader.cursor() as cursor:
            if _session_settings.get(raw) != (ef, tuples):
                cursor.execute(_SCAN_SETTINGS_SQL, {"local": False, "ef": ef, "tuples": tuples})
                _session_settings[raw] = (ef, tuples)
            cursor.execute(sql, params)
            rows = cursor.fetchall()
    head = next((r for r in rows if r[0] == -1), None)
    if head is None or not head[3]:
        return None
    return [(r[0], r[1], r[2]) for r in rows if r[0] != -1], int(head[1])
