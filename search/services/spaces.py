"""Writes to the embedding spaces: the space lock, activating a space, the configured model's row.

The reads (which space the lane searches, its provider) are ``search.embeddings.spaces``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from search.embeddings import spaces
from search.embeddings.providers import EmbeddingProvider, get_provider
from search.embeddings.spaces import SPACE_LOCK_KEY
from search.models import EmbeddingSpace


def space_lock(*, shared: bool = False) -> None:
    """Take the embedding-space lock until the end of the current transaction (precondition: inside one)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT pg_advisory_xact_lock{'_shared' if shared else ''}(%s)", [SPACE_LOCK_KEY]
        )


# Held by a switch's prepare step and by its flip, each for its whole length, so a flip never meets a
# half-prepared next space and a prepare never touches the index of a space another run has just flipped.
# Session-level (the prepare builds an index CONCURRENTLY, which no transaction may wrap). The backfill does
# not take it: new content keeps being embedded while a prepare runs.
PREPARE_LOCK_KEY = SPACE_LOCK_KEY + 1
PREPARE_LOCK_POLL_S = 0.2


@contextmanager
def space_prepare_lock() -> Iterator[None]:
    """Hold the prepare lock for the ``with`` block, on this connection's session.

    Polled with ``pg_try_advisory_lock``, never waited for in one statement: a statement waiting holds a
    snapshot, and ``CREATE INDEX CONCURRENTLY`` waits for every older snapshot, so a prepare building its
    index and a run waiting for the lock would deadlock.
    """
    while True:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [PREPARE_LOCK_KEY])
            row = cursor.fetchone()
        if row and row[0]:
            break
        time.sleep(PREPARE_LOCK_POLL_S)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [PREPARE_LOCK_KEY])


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
    spaces.space_caches_forget()  # this process's lane reads the space again (others notice in their statement)
    return space


def active_space(*, provider: EmbeddingProvider | None = None) -> EmbeddingSpace:
    """The space the vector lane searches (``spaces.searched_space``'s rule), as a row: the active one when
    it is that space, else the configured model's space (``provider``'s) made active (no active space yet,
    or one that holds no vectors to keep searching)."""
    provider = provider or get_provider()
    space = EmbeddingSpace.objects.filter(active=True).first()
    if space is not None and (space.model, space.dimensions) == spaces.searched_space(provider=provider):
        return space
    return space_activate(provider=provider)
