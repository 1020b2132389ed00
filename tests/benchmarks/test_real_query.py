"""``bench``'s web server with ``BENCH_REAL_QUERY_EMBEDDING=1``: every search embeds its query for real."""

from __future__ import annotations

import pytest
from django.test import override_settings

from benchmarks import real_query
from search.embeddings import providers, spaces
from search.engine import retrieve, vector
from search.principal import ANONYMOUS
from search.types import RetrievalQuery
from tests.factories import build, make_item


class CountingEmbedder(providers.HashEmbedder):
    """A stand-in for the default embedder that counts the queries it embeds."""

    name = "counting"

    def __init__(self) -> None:
        super().__init__(dimensions=64)
        self.queries: list[str] = []

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return self.embed([text])[0]


@pytest.mark.django_db
@override_settings(EMBEDDING_PROVIDER="hash")
def test_each_search_embeds_its_query_with_the_real_embedder_never_from_the_cache(monkeypatch) -> None:
    # given an indexed item (hash vectors) and the install, with a counting "real" embedder
    make_item(title="Solar panel maintenance", body="Clean the panels twice a year.")
    build()
    real = CountingEmbedder()
    monkeypatch.setattr(providers, "provider_named", lambda name: real)
    monkeypatch.setattr(spaces, "space_provider", spaces.space_provider)  # restored after the test
    monkeypatch.setattr(vector, "query_embedding", vector.query_embedding)
    real_query.install()

    # when the same search runs twice
    hits = [
        retrieve(query=RetrievalQuery(text="panel maintenance", principal=ANONYMOUS, limit=5))
        for _ in range(2)
    ]

    # then the real embedder embedded it both times (after the warm-up), and the vector lane still found the
    # item with the corpus's own (hash) vectors
    assert real.queries == ["warm-up", "panel maintenance", "panel maintenance"]
    assert all("vector" in page.hits[0].lanes for page in hits)
