"""The retrieval engine's front door: everything a surface may use, and nothing else.

Surfaces (browse, graphql_api, mcp_api, follows, analytics, the CLI) import from here, never from a module
below it; an import-linter contract in pyproject.toml enforces it (``benchmarks`` may also reach the lanes it
times, by their public names). Inside ``search``, services and selectors may use the modules directly.

- ``retrieve(query=RetrievalQuery(...)) -> RetrievalResult``: the search (lanes, fusion, rerank, calibrated
  confidence, threshold, facets, cursor), on a replica or the primary (``search.replicas``).
- ``preview_search(principal=, text=, limit=) -> list[PreviewHit]``: search-as-you-type, every typed word in
  any order, the last a prefix, typos forgiven, within its time budget.
- ``corpus_for(principal, corpus)``: which corpus (live or draft) a principal searches; ``ItemScope`` is the
  access rule both use, for a surface that lists items itself.
- ``cursor_encode`` / ``cursor_decode``: opaque page cursors bound to one query's fingerprint.
- The types, declared in ``search.types``: ``RetrievalQuery``, ``RetrievalResult``, ``Hit``, ``Span``,
  ``SearchFilters``, ``Corpus``.

Below the engine: ``search.embeddings`` (models, the embedding spaces), ``search.replicas`` (which database a
read runs on), ``search.text`` (analysis, chunking, the query parser).
"""

from search.engine.cursors import cursor_decode, cursor_encode
from search.engine.pipeline import retrieve
from search.engine.preview import PreviewHit, preview_search
from search.engine.scope import ItemScope, corpus_for
from search.types import Corpus, Hit, RetrievalQuery, RetrievalResult, SearchFilters, Span

__all__ = [
    "Corpus",
    "Hit",
    "ItemScope",
    "PreviewHit",
    "RetrievalQuery",
    "RetrievalResult",
    "SearchFilters",
    "Span",
    "corpus_for",
    "cursor_decode",
    "cursor_encode",
    "preview_search",
    "retrieve",
]
