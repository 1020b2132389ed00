"""The vector index's build side: embed current chunks with the active space's model (resumable batches) and
keep each model's partial HNSW index. Searches read what this writes through ``search.engine.vector``.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Exists, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

from search.embeddings.providers import EmbeddingProvider, embed_documents, text_hash
from search.embeddings.spaces import space_provider
from search.engine import english
from search.errors import EmbeddingModelMismatch, EmbeddingUnavailable
from search.models import Chunk, EmbeddingCache, EmbeddingSpace, ItemRead
from search.services.spaces import active_space, space_lock

logger = logging.getLogger(__name__)

EMBED_BATCH = 64


def hnsw_index_name(model: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_")[:30]
    return f"chunk_hnsw_{slug}_{hashlib.sha1(model.encode()).hexdigest()[:6]}"


def chunk_embedding_text(title: str, toc_path: str, text: str) -> str:
    return "\n".join(part for part in (title, toc_path, text) if part)


def chunk_texts(chunks: Iterable[Chunk]) -> list[str]:
    """The embedding texts of chunks fetched with ``select_related("revision")``."""
    return [chunk_embedding_text(c.revision.title, c.toc_path, c.text) for c in chunks]


def embeddings_pending(model: str) -> Any:
    return Chunk.objects.current().filter(~Q(embedding_model=model) | Q(embedding__isnull=True))


def _backfill_space(provider: EmbeddingProvider | None) -> tuple[EmbeddingSpace, EmbeddingProvider | None]:
    """The active space and the provider that embeds for it (None: this version cannot, logged)."""
    space = active_space(provider=provider)
    if provider is not None and (provider.name, provider.dimensions) != (space.model, space.dimensions):
        raise EmbeddingModelMismatch(
            f"The vector lane searches {space.model} ({space.dimensions} dims); the backfill cannot add "
            f"{provider.name} ({provider.dimensions} dims) vectors to it. Run `python manage.py reembed` to "
            f"move the corpus to {provider.name}."
        )
    if provider is None:
        try:
            provider = space_provider(space.model, space.dimensions)
        except EmbeddingModelMismatch as exc:
            logger.warning("embedding backfill skipped: %s", exc.message)
            return space, None
    return space, provider


def _embed_batch(batch: list[Chunk], space: EmbeddingSpace, provider: EmbeddingProvider) -> int | None:
    """Embed and write one batch in one transaction: the chunks written (those deleted meanwhile are not), or
    None (nothing written) when ``space`` stopped being the active one (shared space lock: a flip waits for
    the write, or the write sees the flip)."""
    texts = chunk_texts(batch)
    vectors = embed_documents(texts, provider=provider)
    with transaction.atomic():
        space_lock(shared=True)
        if not EmbeddingSpace.objects.filter(pk=space.pk, active=True).exists():
            logger.info("embedding backfill: %s is no longer the active space; stopping", space.model)
            return None
        written = 0
        for chunk, text, vec in zip(batch, texts, vectors, strict=True):
            written += Chunk.objects.filter(pk=chunk.pk).update(
                embedding=vec, embedding_model=space.model, embedding_hash=text_hash(text)
            )
    return written


def embeddings_backfill(
    *, progress: Any = None, provider: EmbeddingProvider | None = None, limit: int | None = None
) -> int:
    """Embed current chunks that have no vector of the active space, with its model, in batches.

    Resumable: each batch commits. ``provider`` defaults to the active space's model; a ``provider`` of
    another model is refused (moving to another model is ``reembed``'s staged switch). A batch is written
    only while its space is still the active one (shared space lock): after a flip the backfill stops and
    the next run embeds with the new model. An active space this version cannot embed with is skipped
    (logged): the switch to the configured model replaces it.
    """
    space, provider = _backfill_space(provider)
    if provider is None:
        return 0
    done = 0
    last = 0
    while True:
        batch = list(
            embeddings_pending(space.model).filter(pk__gt=last).select_related("revision").order_by("pk")[:EMBED_BATCH]
        )
        if not batch:
            break
        last = batch[-1].pk
        written = _embed_batch(batch, space, provider)
        if written is None:
            break
        done += written
        if progress:
            progress(len(batch))
        if limit and done >= limit:
            break
    return done


def embeddings_pending_by_priority(model: str) -> list[int]:
    """Ids of the chunks the backfill would embed, most-read items first (readers who opened them), then the
    most recently changed, then in item order: what a fan-out hands to workers, batch by batch."""
    readers = ItemRead.objects.filter(item=OuterRef("item_id")).values("item").annotate(n=Count("*")).values("n")
    rows = (
        embeddings_pending(model)
        .annotate(readers=Coalesce(Subquery(readers), 0))
        .order_by("-readers", "-item__updated_at", "item_id", "pk")
        .values_list("pk", flat=True)
    )
    return list(rows)


def embeddings_embed_chunks(chunk_ids: Iterable[int], *, provider: EmbeddingProvider | None = None) -> int:
    """Embed those of ``chunk_ids`` that still lack a vector of the active space (one fan-out batch).

    Idempotent: a batch delivered again after its worker died embeds only what the first delivery did not
    commit, and the embedding cache answers for texts it had already embedded. Returns chunks written.
    """
    space, provider = _backfill_space(provider)
    if provider is None:
        return 0
    pending = embeddings_pending(space.model).filter(pk__in=list(chunk_ids))
    batch = list(pending.select_related("revision").order_by("pk"))
    return (_embed_batch(batch, space, provider) or 0) if batch else 0


def english_embeddings_pending(provider: EmbeddingProvider) -> Any:
    """Current English chunks (embedded in the active space, so their text hash is known) without a vector of the
    English lane's model in the embedding cache."""
    cached = EmbeddingCache.objects.filter(model=provider.name, text_hash=OuterRef("embedding_hash"))
    return (
        Chunk.objects.current()
        .filter(language__in=english.LANGUAGES, embedding_hash__isnull=False)
        .exclude(Exists(cached))
    )


def english_embeddings_backfill(*, progress: Any = None, limit: int | None = None) -> int:
    """Embed current English chunks with the English lane's model (search.engine.english), into the embedding
    cache, where the lane reads them. Resumable (each batch is written as it is embedded); nothing to do when the
    lane is off or the active space already is its model. A failing embedder stops it for this build (logged):
    the lane then scores only the chunks it has."""
    provider = english.english_provider()
    if provider is None or provider.name == active_space().model:
        return 0
    done, last = 0, 0
    while True:
        batch = list(
            english_embeddings_pending(provider).filter(pk__gt=last).select_related("revision")
            .order_by("pk")[:EMBED_BATCH]
        )
        if not batch:
            break
        last = batch[-1].pk
        try:
            embed_documents(chunk_texts(batch), provider=provider)  # written to the cache, keyed by text hash
        except (EmbeddingUnavailable, OSError, RuntimeError) as exc:
            logger.warning("English lane backfill stopped: %s", exc)
            break
        done += len(batch)
        if progress:
            progress(len(batch))
        if limit and done >= limit:
            break
    return done


# The two column pairs of search_chunk (search.models.Chunk): the searched space's vectors, and the next space's
# while a switch builds. The flip trades their names (search.services.reembed.space_flip).
SEARCHED = ("embedding", "embedding_model")
NEXT = ("embedding_next", "embedding_next_model")


def _index_state(name: str) -> tuple[str, bool] | None:
    """(definition, valid) of the index ``name``, or None. An interrupted ``CREATE INDEX CONCURRENTLY``
    leaves an invalid one behind."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_indexdef(i.indexrelid), i.indisvalid FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = %s",
            [name],
        )
        row = cursor.fetchone()
    return (str(row[0]), bool(row[1])) if row else None


def vector_index_exists(model: str) -> bool:
    return _index_state(hnsw_index_name(model)) is not None


def vector_index_drop(*, model: str) -> bool:
    """Drop ``model``'s HNSW index if it exists; returns whether it did.

    ``CONCURRENTLY`` outside a transaction: a plain DROP INDEX takes an ACCESS EXCLUSIVE lock on
    search_chunk, which would make every search wait behind it. Precondition: no search needs it (its model
    is not the active one).
    """
    if not vector_index_exists(model):
        return False
    concurrently = "" if connection.in_atomic_block else "CONCURRENTLY"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {concurrently} IF EXISTS {hnsw_index_name(model)}")
    return True


def vector_index_ensure(*, space: EmbeddingSpace | None = None, staged: bool = False) -> str:
    """Create the partial HNSW index of the active model (or of ``space``) if it does not exist yet.

    ``staged``: over the next-space columns, where a switch fills ``space``'s vectors before the flip; built
    ``CONCURRENTLY`` when outside a transaction, so content saves go on meanwhile. An index of the model
    that is invalid (an interrupted concurrent build) or over the other column pair (left by an earlier
    switch; no search reads it, since its model is not the searched one there) is rebuilt.
    """
    space = space or active_space()
    name = hnsw_index_name(space.model)
    vector, model_column = NEXT if staged else SEARCHED
    state = _index_state(name)
    if state is not None:
        definition, valid = state
        if valid and f"({model_column})" in definition:
            return name
        vector_index_drop(model=space.model)
    plain = not staged or connection.in_atomic_block  # the searched pair: built as before, writes waiting
    with connection.cursor() as cursor:
        if connection.in_atomic_block:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # DDL refuses pending deferred FK checks
        cursor.execute("SET maintenance_work_mem = '2GB'")
        model_literal = space.model.replace("'", "''")
        cursor.execute(
            f"CREATE INDEX {'' if plain else 'CONCURRENTLY'} IF NOT EXISTS {name} ON search_chunk "
            f"USING hnsw (({vector}::vector({int(space.dimensions)})) vector_cosine_ops) "
            f"WITH (m = 16, ef_construction = 64) WHERE {model_column} = '{model_literal}'"
        )
        cursor.execute("RESET maintenance_work_mem")
    return name


def vector_index_prewarm(model: str) -> int | None:
    """Load ``model``'s HNSW index into PostgreSQL's shared buffers (pg_prewarm), so the first searches after
    a flip do not read it from disk page by page. Returns the blocks loaded, or None without pg_prewarm
    (it is optional: migration 0018 installs it where the server has it)."""
    name = hnsw_index_name(model)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_prewarm'")
        if cursor.fetchone() is None or _index_state(name) is None:
            return None
        cursor.execute("SELECT pg_prewarm(%s::regclass)", [name])
        row = cursor.fetchone()
    return int(row[0]) if row else None
