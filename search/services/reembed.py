"""Moving the corpus's vectors: the embedding backfill (with back-off) and ``reembed`` to a new model.

Both are resumable: ``search.services.vector.embeddings_backfill`` commits every batch and only picks
chunks that have no vector of the active model, so a run that is killed half-way and started again
embeds what is left and ends in the same state as an uninterrupted run.

``reembed`` is how the corpus moves to the model configured by ``EMBEDDING_PROVIDER`` (the vector
lane refuses a mismatched model and names this command). It activates the configured model's space,
embeds every current chunk with it, builds that model's HNSW index, and drops the index of a model
no chunk uses any more. While it runs, the vector lane searches the chunks already moved.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypedDict

from django.db import connection

from search.errors import EmbeddingUnavailable
from search.models import Chunk, EmbeddingSpace
from search.services import vector
from search.services.embeddings import EmbeddingProvider, get_provider

logger = logging.getLogger(__name__)

# In-process back-off when the provider fails: 2 s, 4 s, 8 s, … capped, then give up (the Celery task
# then retries later with its own, longer back-off).
BACKOFF_ATTEMPTS = 4
BACKOFF_BASE_S = 2.0
BACKOFF_MAX_S = 60.0


def embeddings_backfill_run(
    *,
    progress: Callable[[int], None] | None = None,
    provider: EmbeddingProvider | None = None,
    attempts: int = BACKOFF_ATTEMPTS,
    base_delay_s: float = BACKOFF_BASE_S,
    max_delay_s: float = BACKOFF_MAX_S,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Embed every current chunk lacking a vector of the active model, backing off when the provider fails.

    On :class:`EmbeddingUnavailable` it waits ``base_delay_s · 2ⁿ`` (at most ``max_delay_s``) and resumes
    where it stopped; ``attempts`` consecutive failures without progress re-raise the error. Other
    errors (e.g. ``EmbeddingModelMismatch``: run ``reembed``) are raised at once. Returns chunks embedded.
    """
    provider = provider or get_provider()
    done = 0
    failures = 0
    batch_counts: list[int] = []  # batches committed by the current attempt

    def _progress(n: int) -> None:
        batch_counts.append(n)
        if progress:
            progress(n)

    while True:
        batch_counts.clear()
        try:
            done += vector.embeddings_backfill(progress=_progress, provider=provider)
            return done
        except EmbeddingUnavailable as exc:
            done += sum(batch_counts)
            failures = 1 if batch_counts else failures + 1
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


def embeddings_pending_count(*, provider: EmbeddingProvider | None = None) -> int:
    """Chunks the backfill would embed (for progress bars)."""
    return int(vector.embeddings_pending(vector.active_space(provider=provider).model).count())


class ReembedReport(TypedDict):
    previous_model: str | None
    model: str
    dimensions: int
    embedded: int
    index: str
    dropped_indexes: list[str]


def reembed_pending_count(*, provider: EmbeddingProvider | None = None) -> int:
    """Chunks that have no vector of the configured model yet (what ``reembed`` still has to embed)."""
    provider = provider or get_provider()
    return int(vector.embeddings_pending(provider.name).count())


def _unused_indexes_drop(*, keep: EmbeddingSpace) -> list[str]:
    dropped = []
    for space in EmbeddingSpace.objects.exclude(pk=keep.pk):
        if Chunk.objects.filter(embedding_model=space.model).exists():
            continue
        name = vector._index_name(space.model)
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", [name])
            if cursor.fetchone():
                cursor.execute(f"DROP INDEX IF EXISTS {name}")
                dropped.append(name)
    return dropped


def corpus_reembed(
    *,
    provider: EmbeddingProvider | None = None,
    progress: Callable[[int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    **backoff: Any,
) -> ReembedReport:
    """Move the corpus to ``provider`` (default: the configured one). Resumable; see the module docstring."""
    provider = provider or get_provider()
    previous = EmbeddingSpace.objects.filter(active=True).first()
    space = vector.space_activate(provider=provider)
    if previous is None or previous.model != space.model:
        logger.info(
            "reembed: the vector lane now searches %s (was %s)",
            space.model,
            previous.model if previous else "nothing",
        )
    embedded = embeddings_backfill_run(progress=progress, provider=provider, sleep=sleep, **backoff)
    index = vector.vector_index_ensure(space=space)
    dropped = _unused_indexes_drop(keep=space)
    return {
        "previous_model": previous.model if previous else None,
        "model": space.model,
        "dimensions": space.dimensions,
        "embedded": embedded,
        "index": index,
        "dropped_indexes": dropped,
    }
