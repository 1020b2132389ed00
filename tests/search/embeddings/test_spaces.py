"""search.embeddings.spaces reads which space the vector lane searches and never writes it; the writes are
search.services.spaces'."""

from __future__ import annotations

import pytest

from search.embeddings import spaces
from search.embeddings.providers import get_provider
from search.engine import RetrievalQuery, retrieve
from search.models import Chunk, EmbeddingSpace
from search.services import spaces as space_writes
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db


def _without_spaces() -> None:
    EmbeddingSpace.objects.all().delete()
    Chunk.objects.update(embedding=None, embedding_model="")
    spaces.space_caches_forget()


def test_a_search_with_no_active_space_is_lexical_and_writes_nothing() -> None:
    # given an indexed item, then a database with no embedding space at all (a fresh knowledge base)
    make_item(title="Tender rules", body="How to submit a tender before the deadline.")
    build()
    _without_spaces()
    provider = get_provider()
    # when the space is read and a hybrid search runs
    assert spaces.searched_space() == (provider.name, provider.dimensions)
    result = retrieve(query=RetrievalQuery(text="tender deadline", threshold=0.0))
    # then the search answers from the lexical lane and no space row was created by reading
    assert [h.title for h in result.hits] == ["Tender rules"]
    assert all(h.lanes == ("lexical",) for h in result.hits)
    assert not EmbeddingSpace.objects.exists()
    # and the write service creates the configured model's space, active
    space = space_writes.active_space()
    assert (space.model, space.active) == (provider.name, True)
    assert spaces.searched_space() == (provider.name, provider.dimensions)


def test_the_searched_space_is_the_active_one_while_it_holds_vectors() -> None:
    make_item(title="Harbour guide", body="Cranes, berths and tides of the harbour.")
    build()
    provider = get_provider()
    # given an active space of another model that still holds the vectors (a switch building beside it)
    EmbeddingSpace.objects.filter(active=True).update(model="other-model")
    Chunk.objects.update(embedding_model="other-model")
    spaces.space_caches_forget()
    assert spaces.searched_space() == ("other-model", provider.dimensions)
    # given it holds none (nothing to keep searching): the configured model's space is searched
    Chunk.objects.update(embedding_model=provider.name)
    assert spaces.searched_space() == (provider.name, provider.dimensions)
    assert EmbeddingSpace.objects.get(active=True).model == "other-model"  # read, not written
