"""The vector lane: the query's embedding (cached) and the nearest chunks of the active embedding space.

The ``embedding`` column has no fixed dimension. Each model gets a partial HNSW index over
``embedding::vector(dim)`` restricted to its own rows, and the lane only ever compares the query
with rows of the active model, so vectors of different models or dimensions never meet.

The active space (``EmbeddingSpace.active``) is not necessarily the configured model: while a switch to
another model is building (search.services.reembed), searches keep using the complete old space, and the
query is embedded with the active space's own model (``search.embeddings.spaces``). A query vector carries the model
it belongs to (:class:`QueryVector`), so a search that finds the space flipped under it embeds the query
again in the new space instead of comparing vectors of two models.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import logging
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction

from search.embeddings import spaces
from search.embeddings.providers import EmbeddingProvider, embed_query
from search.engine.background import QueryBackground, query_background
from search.engine.scope import chunk_column
from search.engine.sql import Fragment, compose, execute, param
from search.errors import EmbeddingModelMismatch, EmbeddingUnavailable
from search.replicas import read_connection

logger = logging.getLogger(__name__)


_pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="embed")


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
        provider = spaces.space_provider(*spaces.known_space())
    full_text = text

    def again(model: str, dimensions: int) -> list[float]:
        return query_embedding(full_text, provider=spaces.space_provider(model, dimensions))

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
    model, dims = space or spaces.known_space()
    with read_connection().cursor() as cursor:
        execute(cursor, Fragment(
            f"SELECT avg(embedding::vector({int(dims)}))::text FROM search_chunk "
            f"WHERE item_id = %s AND embedding_model = %s AND {chunk_column(corpus)}",
            (item_id, model),
        ))
        row = cursor.fetchone()
    if not row or row[0] is None:
        if space is None and spaces.known_space(refresh=True) != (model, dims):  # the space flipped meanwhile
            return item_vector(item_id, corpus, space=spaces.known_space())
        return None
    return QueryVector(
        (float(x) for x in row[0].strip("[]").split(",")),
        model=model,
        again=lambda m, d: item_vector(item_id, corpus, space=(m, d)),
    )


# The HNSW scan settings each search needs, as a session's settings: set once per database connection
# (in autocommit) rather than in a transaction of three more round trips per search.
def _scan_settings_sql(*, local: bool, ef: str, tuples: str) -> Fragment:
    return compose(
        "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', {local}), "
        "set_config('hnsw.ef_search', {ef}, {local}), set_config('hnsw.max_scan_tuples', {tuples}, {local})",
        local=param(local),
        ef=param(ef),
        tuples=param(tuples),
    )


_session_settings: weakref.WeakKeyDictionary[Any, tuple[str, str]] = weakref.WeakKeyDictionary()
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
    known = spaces.known_space()
    in_space = _vector_in_space(vector, known)
    if in_space is None:  # the query has no vector in the active space
        return VectorLane([], None)
    found = _nearest(in_space, known, corpus, items_sql, limit, exclude_item)
    if found is None:  # the active space changed since this process read it
        known = spaces.known_space(refresh=True)
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
    query_vector = param("[" + ",".join(repr(float(v)) for v in vector) + "]", f"vector({dims})")
    # One row (id -1) says whether ``model`` is still the active space, and the newest chunk id (an index
    # lookup); the nearest chunks come with it.
    # ef_search is the graph search's candidate list, not a cap: the iterative scan goes on past it until
    # ``limit`` rows (or max_scan_tuples) are read.
    statement = compose(
        """
        SELECT -1, (SELECT coalesce(max(id), 0) FROM search_chunk), 0.0,
               EXISTS (SELECT 1 FROM search_embeddingspace WHERE active AND model = {model})
        UNION ALL (
            SELECT c.id, c.item_id, 1 - ({column} <=> {query}), true
            FROM search_chunk c
            WHERE c.embedding_model = {model} AND c.{corpus} AND c.item_id IN ({items}) {exclude}
            ORDER BY {column} <=> {query}
            LIMIT {limit}
        )
        """,
        model=param(model),
        column=f"(c.embedding::vector({int(dims)}))",
        query=query_vector,
        corpus=chunk_column(corpus),
        items=items_sql,
        exclude=compose("AND c.item_id <> {item}", item=param(exclude_item)) if exclude_item else "",
        limit=param(limit),
    )
    ef, tuples = _scan_settings()
    reader = read_connection()
    if reader.in_atomic_block:  # a caller's transaction: settings local to a savepoint of it
        with transaction.atomic(using=reader.alias), reader.cursor() as cursor:
            execute(cursor, _scan_settings_sql(local=True, ef=ef, tuples=tuples))
            execute(cursor, statement)
            rows = cursor.fetchall()
    else:
        reader.ensure_connection()
        raw = reader.connection
        with reader.cursor() as cursor:
            if _session_settings.get(raw) != (ef, tuples):
                execute(cursor, _scan_settings_sql(local=False, ef=ef, tuples=tuples))
                _session_settings[raw] = (ef, tuples)
            execute(cursor, statement)
            rows = cursor.fetchall()
    head = next((r for r in rows if r[0] == -1), None)
    if head is None or not head[3]:
        return None
    return [(r[0], r[1], r[2]) for r in rows if r[0] != -1], int(head[1])
