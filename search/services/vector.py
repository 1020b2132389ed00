"""The vector lane and everything about the active embedding model.

The ``embedding`` column has no fixed dimension. Each model gets a partial HNSW index over
``embedding::vector(dim)`` restricted to its own rows, and the lane only ever compares the query
with rows of the active model, so vectors of different models or dimensions never meet.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import logging
import re
import weakref
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Q

from search.errors import EmbeddingModelMismatch, EmbeddingUnavailable
from search.models import Chunk, EmbeddingSpace
from search.services.embeddings import EmbeddingProvider, embed_documents, get_provider

logger = logging.getLogger(__name__)

EMBED_BATCH = 64
_pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="embed")


def _index_name(model: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_")[:30]
    return f"chunk_hnsw_{slug}_{hashlib.sha1(model.encode()).hexdigest()[:6]}"


def space_activate(*, provider: EmbeddingProvider) -> EmbeddingSpace:
    with transaction.atomic():
        EmbeddingSpace.objects.exclude(model=provider.name).update(active=False)
        space, _ = EmbeddingSpace.objects.update_or_create(
            model=provider.name, defaults={"dimensions": provider.dimensions, "active": True}
        )
    return space


def active_space(*, provider: EmbeddingProvider | None = None) -> EmbeddingSpace:
    """The space the vector lane searches. Refuses a configured model that does not match the corpus."""
    provider = provider or get_provider()
    space = EmbeddingSpace.objects.filter(active=True).first()
    if space is None:
        return space_activate(provider=provider)
    if space.model != provider.name or space.dimensions != provider.dimensions:
        has_vectors = Chunk.objects.filter(embedding_model=space.model).exists()
        if has_vectors:
            raise EmbeddingModelMismatch(
                f"The corpus is embedded with {space.model} ({space.dimensions} dims) but the configured "
                f"embedding model is {provider.name} ({provider.dimensions} dims). Run "
                f"`python manage.py reembed` to move the corpus to {provider.name}, or set "
                "EMBEDDING_PROVIDER back."
            )
        return space_activate(provider=provider)
    return space


def chunk_embedding_text(title: str, toc_path: str, text: str) -> str:
    return "\n".join(part for part in (title, toc_path, text) if part)


def embeddings_pending(model: str) -> Any:
    return Chunk.objects.current().filter(~Q(embedding_model=model) | Q(embedding__isnull=True))


def embeddings_backfill(*, progress: Any = None, provider: EmbeddingProvider | None = None, limit: int | None = None) -> int:
    """Embed current chunks that have no vector of the active model, in batches. Resumable: each batch commits."""
    provider = provider or get_provider()
    space = active_space(provider=provider)
    done = 0
    last = 0
    while True:
        batch = list(
            embeddings_pending(space.model).filter(pk__gt=last).select_related("revision").order_by("pk")[:EMBED_BATCH]
        )
        if not batch:
            break
        last = batch[-1].pk
        texts = [chunk_embedding_text(c.revision.title, c.toc_path, c.text) for c in batch]
        vectors = embed_documents(texts, provider=provider)
        with transaction.atomic():
            for chunk, vec in zip(batch, vectors, strict=True):
                Chunk.objects.filter(pk=chunk.pk).update(embedding=vec, embedding_model=space.model)
        done += len(batch)
        if progress:
            progress(len(batch))
        if limit and done >= limit:
            break
    return done


def vector_index_ensure(*, space: EmbeddingSpace | None = None) -> str:
    """Create the partial HNSW index of the active model if it does not exist yet."""
    space = space or active_space()
    name = _index_name(space.model)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", [name])
        if cursor.fetchone():
            return name
        if connection.in_atomic_block:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # DDL refuses pending deferred FK checks
        cursor.execute("SET maintenance_work_mem = '2GB'")
        model_literal = space.model.replace("'", "''")
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON search_chunk USING hnsw "
            f"((embedding::vector({int(space.dimensions)})) vector_cosine_ops) "
            f"WITH (m = 16, ef_construction = 64) WHERE embedding_model = '{model_literal}'"
        )
        cursor.execute("RESET maintenance_work_mem")
    return name


@dataclass(frozen=True)
class VectorHit:
    chunk_id: int
    item_id: int
    similarity: float


def query_embedding(text: str, *, provider: EmbeddingProvider | None = None) -> list[float]:
    """Embed a query once, cached in Redis by (model, text hash); bounded by EMBEDDING_BUDGET_S."""
    provider = provider or get_provider()
    text = text[: settings.SEARCH["QUERY_EMBED_MAX_CHARS"]]
    key = "qemb:" + hashlib.sha256(f"{provider.name}\x00{text}".encode()).hexdigest()
    try:
        cached = cache.get(key)
    except Exception:  # noqa: BLE001 - the cache is an optimisation; a dead Valkey must not fail search
        logger.warning("query-embedding cache unavailable; embedding without it")
        cached = None
    if cached is not None:
        return list(cached)
    future = _pool.submit(provider.embed, [text])
    try:
        vector = future.result(timeout=settings.EMBEDDING_BUDGET_S)[0]
    except concurrent.futures.TimeoutError as exc:
        raise EmbeddingUnavailable("The embedding provider did not answer within the budget.") from exc
    except EmbeddingUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 - any provider failure degrades to lexical
        raise EmbeddingUnavailable(f"The embedding provider failed: {exc.__class__.__name__}") from exc
    try:
        cache.set(key, vector, 24 * 3600)
    except Exception:  # noqa: BLE001
        pass
    return vector


def item_vector(item_id: int, corpus: str) -> list[float] | None:
    """An item's vector for similar_to: the mean of its chunk vectors in the corpus (active model)."""
    space = active_space()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT avg(embedding::vector({int(space.dimensions)}))::text FROM search_chunk "
            f"WHERE item_id = %s AND embedding_model = %s AND {'in_live' if corpus == 'live' else 'in_latest'}",
            [item_id, space.model],
        )
        row = cursor.fetchone()
    if not row or row[0] is None:
        return None
    return [float(x) for x in row[0].strip("[]").split(",")]


# The HNSW scan settings each search needs, as a session's settings: set once per database connection
# (in autocommit) rather than in a transaction of three more round trips per search.
_SCAN_SETTINGS_SQL = (
    "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', %(local)s), "
    "set_config('hnsw.ef_search', %(ef)s, %(local)s), "
    "set_config('hnsw.max_scan_tuples', %(tuples)s, %(local)s)"
)
_session_settings: weakref.WeakKeyDictionary[Any, tuple[str, str]] = weakref.WeakKeyDictionary()
# The active space as this process last read it, per configured provider: the search statement checks it
# itself (one more row says whether that model is still the active one), so no query reads it first.
_known_spaces: dict[tuple[str, int], tuple[str, int]] = {}


def _scan_settings() -> tuple[str, str]:
    return str(settings.SEARCH["HNSW_EF_SEARCH"]), str(settings.SEARCH["HNSW_MAX_SCAN_TUPLES"])


def vector_search(
    *, vector: list[float], corpus: str, items_sql: tuple[str, list[Any]], limit: int, exclude_item: int | None = None
) -> list[VectorHit]:
    """Nearest chunks by cosine similarity. Access and filters are applied inside the index scan
    (pgvector iterative scan, bounded by ``max_scan_tuples``), so a narrow filter still fills ``limit``."""
    provider = get_provider()
    key = (provider.name, provider.dimensions)
    known = _known_spaces.get(key)
    if known is None:
        space = active_space(provider=provider)
        known = _known_spaces[key] = (space.model, int(space.dimensions))
    rows = _nearest(vector, known, corpus, items_sql, limit, exclude_item)
    if rows is None:  # the active space changed since this process read it
        _known_spaces.pop(key, None)
        space = active_space(provider=provider)
        known = _known_spaces[key] = (space.model, int(space.dimensions))
        rows = _nearest(vector, known, corpus, items_sql, limit, exclude_item) or []
    hits = [VectorHit(r[0], r[1], float(r[2])) for r in rows]
    hits.sort(key=lambda h: (-h.similarity, h.chunk_id))  # relaxed_order may be slightly out of order
    return hits


def _nearest(
    vector: list[float],
    space: tuple[str, int],
    corpus: str,
    items_sql: tuple[str, list[Any]],
    limit: int,
    exclude_item: int | None,
) -> list[tuple[int, int, float]] | None:
    """The lane's rows from the HNSW index of ``space``; None when ``space`` is no longer the active one."""
    model, dims = space
    if len(vector) != dims:
        raise EmbeddingModelMismatch(
            f"The query vector has {len(vector)} dimensions but the index holds {dims}; run "
            "`python manage.py reembed`."
        )
    literal = "[" + ",".join(repr(float(v)) for v in vector) + "]"
    items_query, items_params = items_sql
    corpus_col = "in_live" if corpus == "live" else "in_latest"
    exclude = "AND c.item_id <> %s" if exclude_item else ""
    params: list[Any] = [literal, model, *items_params]
    if exclude_item:
        params.append(exclude_item)
    params += [literal, limit]
    # One row (id -1) says whether ``model`` is still the active space; the nearest chunks come with it.
    # ef_search is the graph search's candidate list, not a cap: the iterative scan goes on past it until
    # ``limit`` rows (or max_scan_tuples) are read.
    sql = f"""
        SELECT -1, -1, 0.0, EXISTS (SELECT 1 FROM search_embeddingspace WHERE active AND model = %s)
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
    if connection.in_atomic_block:  # a caller's transaction: settings local to a savepoint of it
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_SCAN_SETTINGS_SQL, {"local": True, "ef": ef, "tuples": tuples})
            cursor.execute(sql, params)
            rows = cursor.fetchall()
    else:
        connection.ensure_connection()
        raw = connection.connection
        with connection.cursor() as cursor:
            if _session_settings.get(raw) != (ef, tuples):
                cursor.execute(_SCAN_SETTINGS_SQL, {"local": False, "ef": ef, "tuples": tuples})
                _session_settings[raw] = (ef, tuples)
            cursor.execute(sql, params)
            rows = cursor.fetchall()
    if not any(r[0] == -1 and r[3] for r in rows):
        return None
    return [(r[0], r[1], r[2]) for r in rows if r[0] != -1]
