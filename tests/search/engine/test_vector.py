"""search.engine.vector: the vector lane reads only what the search's scope allows, nearest first, and embeds
a query once per (model, text)."""

from __future__ import annotations

from typing import Any

import pytest

from search.embeddings import providers, spaces
from search.engine import vector
from search.engine.scope import ItemScope
from search.principal import ANONYMOUS, Principal
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db

STAFF = Principal(kind="staff", all_content=True)


def test_vector_search_returns_nearest_chunks_first_and_only_items_in_scope() -> None:
    public = [make_item(title=f"Harbour guide {i}", body=f"Cranes berths tides harbour {i}.") for i in range(4)]
    private = make_item(title="Harbour secrets", body="Cranes berths tides harbour.", visibility="staff")
    build()
    query = vector.query_embedding("cranes berths tides harbour")
    # when an anonymous search and a staff search read the lane
    anonymous = vector.vector_search(vector=query, corpus="live", items_sql=ItemScope.of(ANONYMOUS).items_sql(),
                                     limit=10)
    staff = vector.vector_search(vector=query, corpus="live", items_sql=ItemScope.of(STAFF).items_sql(), limit=10)
    # then each sees only its scope, nearest first
    assert {h.item_id for h in anonymous} == {i.pk for i in public}
    assert private.pk in {h.item_id for h in staff}
    for hits in (anonymous, staff):
        assert [h.similarity for h in hits] == sorted((h.similarity for h in hits), reverse=True)


def test_vector_search_leaves_out_the_item_a_similar_search_starts_from() -> None:
    items = [make_item(title=f"Tide table {i}", body=f"Tide table for the quay number {i}.") for i in range(3)]
    build()
    start = items[0]
    item_vec = vector.item_vector(start.pk, "live")
    assert item_vec is not None
    # when
    hits = vector.vector_search(vector=item_vec, corpus="live", items_sql=ItemScope.of(ANONYMOUS).items_sql(),
                                limit=10, exclude_item=start.pk)
    # then
    assert start.pk not in {h.item_id for h in hits}
    assert {h.item_id for h in hits} == {i.pk for i in items[1:]}


def test_item_vector_is_none_for_a_draft_in_the_live_corpus() -> None:
    draft = make_item(title="Draft note", body="Not published yet.", publish=False)
    build()
    assert vector.item_vector(draft.pk, "live") is None
    assert vector.item_vector(draft.pk, "latest") is not None


def test_query_embedding_embeds_a_query_once_then_reads_it_from_the_cache(monkeypatch: Any) -> None:
    calls: list[str] = []
    real = providers.embed_query

    def counting(provider: Any, text: str) -> list[float]:
        calls.append(text)
        return real(provider, text)

    monkeypatch.setattr(vector, "embed_query", counting)
    # when the same query is embedded twice
    first = vector.query_embedding("harbour tide table")
    second = vector.query_embedding("harbour tide table")
    # then the provider ran once, and both vectors are the same, of the active model
    assert calls == ["harbour tide table"]
    assert list(first) == list(second) and first.model == second.model == spaces.lane_model()

