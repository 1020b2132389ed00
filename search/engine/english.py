"""The English lane: a second embedder (all-MiniLM-L6-v2) re-scores the candidates of an English search.

multilingual-e5-small serves English, French and Arabic with one vector space; on English text an
English-only model sees other things (SciFact: MiniLM alone 0.6713 nDCG@10, e5 alone 0.6689), and fusing
both beside the lexical lane beats either (docs/benchmarks.md). This lane does not search an index of its
own: it scores the candidates the lexical and vector lanes already found, by the cosine between the query's
MiniLM vector and each candidate chunk's, and fusion adds those scores as a third list (z-scored like the
others) at the weight ``lane_weights`` holds for the model ``english:all-MiniLM-L6-v2`` in the query's
languages (0 in French and Arabic: the lane is not run there).

Chunk vectors live in the embedding cache, keyed (model, sha256 of the chunk's embedding text) like every
document embedding (``Chunk.embedding_hash``): the build embeds English chunks with MiniLM
(``services.vector_index.english_embeddings_backfill``); a chunk without one yet simply counts at the lane's
lowest score. ``SEARCH_ENGLISH_LANE=off`` turns the lane off; it is off when the main embedder already is
MiniLM.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.conf import settings

from search.embeddings.providers import EmbeddingProvider, HashEmbedder, provider_named
from search.engine.sql import Fragment, execute
from search.errors import EmbeddingUnavailable
from search.replicas import read_connection

logger = logging.getLogger(__name__)

# The name lane_weights.json knows the lane's weights by (per language).
LANE_MODEL_PREFIX = "english:"
# Chunks written in these languages get the lane's vectors.
LANGUAGES = ("en",)


def english_provider() -> EmbeddingProvider | None:
    """The lane's embedder, or None when the lane is off (the setting, or MiniLM already is the main model)."""
    name = str(settings.SEARCH.get("ENGLISH_LANE", "off"))
    if name == "off":
        return None
    if name.startswith("hash:"):  # tests: a deterministic embedder of another size than the main one
        return HashEmbedder(int(name.removeprefix("hash:")))
    return provider_named(name)


def lane_key(provider: EmbeddingProvider) -> str:
    return LANE_MODEL_PREFIX + provider.name


def english_scores(
    vector: Sequence[float], *, provider: EmbeddingProvider, chunk_ids: Sequence[int]
) -> dict[int, float]:
    """Cosine between ``vector`` (the query's, of ``provider``) and each chunk's vector of that model, for the
    chunks that have one (one statement: the cache's unique (model, text_hash) index per chunk)."""
    if not chunk_ids:
        return {}
    dims = int(provider.dimensions)
    literal = "[" + ",".join(repr(float(v)) for v in vector) + "]"
    with read_connection().cursor() as cursor:
        execute(cursor, Fragment(
            f"SELECT c.id, 1 - (e.embedding::vector({dims}) <=> %s::vector({dims})) "
            "FROM search_chunk c JOIN search_embeddingcache e ON e.model = %s AND e.text_hash = c.embedding_hash "
            "WHERE c.id = ANY(%s::bigint[])",
            (literal, provider.name, list(chunk_ids)),
        ))
        return {int(chunk_id): float(score) for chunk_id, score in cursor.fetchall()}


def english_query_vector(text: str, *, provider: EmbeddingProvider) -> list[float] | None:
    """The query's vector of the lane's model (cached like every query vector); None when it cannot be had
    within the embedding budget (the search then fuses without the lane)."""
    from search.engine.vector import query_embedding

    try:
        return list(query_embedding(text, provider=provider))
    except EmbeddingUnavailable as exc:
        logger.warning("English lane unavailable: %s", exc)
        return None
