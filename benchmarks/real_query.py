"""The web server's side of ``bench``'s load run with the real query embedder (issue 33, point 2).

The bench corpus holds ``hash`` vectors (embedding 500,000 chunks for real would take days here), so a web
server that searches it must compare queries in the hash space. With ``BENCH_REAL_QUERY_EMBEDDING=1`` in its
environment, each web worker (``BenchmarksConfig.ready``) makes every search pay what a real one pays first:
the query is embedded afresh by the product's default embedder (``e5`` on ONNX Runtime), its cached vector
dropped before each search so no search is answered from the query cache, and the hash vector of the same
text is what the vector lane then compares. Nothing of this runs unless that variable is set.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

ENV_FLAG = "BENCH_REAL_QUERY_EMBEDDING"


class RealQueryEmbedding:
    """The corpus's provider, but each query is first embedded by the default embedder too (its vector is
    thrown away: the corpus holds hash vectors), so the time of a real query embedding is paid."""

    def __init__(self, corpus_provider: Any, real: Any) -> None:
        self.name, self.dimensions = corpus_provider.name, corpus_provider.dimensions
        self._corpus, self._real = corpus_provider, real

    def embed(self, texts: Any) -> list[list[float]]:
        return self._corpus.embed(texts)  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> list[float]:
        from search.embeddings import providers

        providers.embed_query(self._real, text)
        return self._corpus.embed([text])[0]  # type: ignore[no-any-return]


def install() -> None:
    """Route this process's query embeddings through the real embedder, uncached (see the module docstring)."""
    from search.embeddings import providers, spaces
    from search.engine import vector

    real = providers.provider_named(settings.DEFAULT_EMBEDDING_PROVIDER)
    providers.embed_query(real, "warm-up")  # the model loads before the server answers
    space_provider, query_embedding = spaces.space_provider, vector.query_embedding

    def real_space_provider(model: str, dimensions: int) -> Any:
        return RealQueryEmbedding(space_provider(model, dimensions), real)

    active: list[Any] = []  # the bench corpus's space, read once (it never changes under the bench)

    def uncached_query_embedding(text: str, *, provider: Any = None) -> Any:
        if provider is None:
            if not active:
                active.append(real_space_provider(*spaces.searched_space()))
            provider = active[0]
        vector.query_embedding_forget(text, provider=provider)
        return query_embedding(text, provider=provider)

    spaces.space_provider = real_space_provider  # type: ignore[assignment]
    vector.query_embedding = uncached_query_embedding  # type: ignore[assignment]
