"""The embedding spaces as the search reads them: which model the vector lane searches and embeds queries with.

An ``EmbeddingSpace`` row per model; the active one is what searches compare with. It is not necessarily the
configured model: while a switch to another model builds (``search.services.reembed``), searches keep using the
complete old space and embed the query with its own model (``space_provider``). Everything here reads; the
writes (the space lock, activating a space, creating the configured model's row) are
``search.services.spaces``'.
"""

from __future__ import annotations

import logging
import time

from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from search.embeddings.providers import EmbeddingProvider, get_provider, provider_for_model, provider_warm
from search.models import Chunk, EmbeddingSpace
from search.replicas import read_connection

logger = logging.getLogger(__name__)

# Changes of the active space (activation, a switch's flip) take this transaction-level advisory lock
# exclusively; a backfill batch takes it shared before writing vectors of the space it read as active, so
# no batch of the old model lands after a flip (it would sit outside the new space).
SPACE_LOCK_KEY = 0x6B62_5350  # "kbSP"


def searched_space(*, provider: EmbeddingProvider | None = None) -> tuple[str, int]:
    """The (model, dimensions) the vector lane searches, without writing: the active space when it is the
    configured model (``provider``'s) or holds vectors to keep searching; else the configured model's, which
    the next build activates (``services.spaces.active_space``; until then the lane finds nothing)."""
    provider = provider or get_provider()
    space = EmbeddingSpace.objects.filter(active=True).values_list("model", "dimensions").first()
    if space is not None:
        model, dims = space[0], int(space[1])
        if (model, dims) == (provider.name, provider.dimensions):
            return model, dims
        if Chunk.objects.filter(embedding_model=model).exists():
            return model, dims
    return provider.name, provider.dimensions


def space_provider(model: str, dimensions: int) -> EmbeddingProvider:
    """The provider of a stored space: the configured instance when it is that model (one instance, its
    weights loaded once), else ``providers.provider_for_model`` (raises EmbeddingModelMismatch, with the
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
    return known_space(max_age_s=KNOWN_SPACE_MAX_AGE_S)[0]


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


def known_space(*, refresh: bool = False, max_age_s: float | None = None) -> tuple[str, int]:
    """The (model, dimensions) the vector lane searches, as this process last read it from the database it
    reads (``refresh``: read it again; ``max_age_s``: read it again when older)."""
    reader = read_connection()
    key = (reader.alias, str(reader.settings_dict.get("NAME")))
    known = None if refresh else _known_spaces.get(key)
    if known is not None and max_age_s is not None and time.monotonic() - known[2] > max_age_s:
        known = None
    if known is None:
        model, dims = searched_space()
        known = _known_spaces[key] = (model, dims, time.monotonic())
    return known[0], known[1]
