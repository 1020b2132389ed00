"""Loaders batch every relation: a page of 20 hits costs the same queries as a page of 2."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext

from graphql_api.dataloaders import ContentItemByIdLoader, RevisionByIdLoader
from search.engine import retrieve
from search.principal import ANONYMOUS
from search.services import content
from search.types import RetrievalQuery
from tests.factories import build, make_item
from tests.graphql_api.conftest import gql

PAGE_QUERY = """query($limit: Int) { search(input: {query: "lighthouse", limit: $limit}) {
  totalCount hits { itemId highlightedTitle highlightedContent score lanes
    item { id slug url title summary contentType primaryDomain updatedAt reviewStatus superseded
      revision { number title createdAt }
      supersededBy { id title revision { number } supersededBy { id } } } } } }"""
BARE_QUERY = """query($limit: Int) { search(input: {query: "lighthouse", limit: $limit}) {
  totalCount hits { itemId score } } }"""
# The GraphQL layer may add, on top of the engine's own queries: the page's items (1 query, their
# revisions joined and primed) and one query per `supersededBy` level that has ids to load.
ITEMS_QUERY = 1
LOADER_QUERIES = 3


@pytest.fixture
def lighthouse_corpus(db: Any) -> list[Any]:
    newer = [
        make_item(title=f"Lighthouse log {n} (new)", body=f"Lighthouse keeper log {n}, current.")
        for n in range(3)
    ]
    items = [
        make_item(title=f"Lighthouse keeper {n}", body=f"The lighthouse keeper {n} trims the lamp.")
        for n in range(22)
    ]
    for old, new in zip(items[:3], newer, strict=True):
        content.item_mark_superseded(item=old, by=new)
    build()
    return items


def _count(client: Client, query: str, limit: int) -> tuple[int, dict[str, Any]]:
    with CaptureQueriesContext(connection) as ctx:
        status, body = gql(client, query, {"limit": limit})
    assert status == 200, body
    return len(ctx.captured_queries), body


def _engine_queries(limit: int) -> int:
    """Queries ``retrieve`` itself runs for this search (warm: one-time lookups done), the baseline."""
    query = RetrievalQuery(text="lighthouse", principal=ANONYMOUS, limit=limit)
    retrieve(query=query)
    with CaptureQueriesContext(connection) as ctx:
        retrieve(query=query)
    return len(ctx.captured_queries)


@pytest.mark.django_db
def test_page_of_20_hits_with_every_relation_is_pinned(
    client: Client, lighthouse_corpus: list[Any], django_assert_max_num_queries: Any
) -> None:
    # given 25 matching items (the superseded ones are hidden by default) and the engine's own cost
    engine = _engine_queries(20)
    gql(client, BARE_QUERY, {"limit": 20})  # warm the per-process caches the engine keeps
    # when a page of 20 hits asks for every relation
    with django_assert_max_num_queries(engine + ITEMS_QUERY):
        status, body = gql(client, PAGE_QUERY, {"limit": 20})
    # then the page is full and every item resolved, for one query on top of the engine's
    assert status == 200, body
    hits = body["data"]["search"]["hits"]
    assert len(hits) == 20
    assert all(h["item"]["title"].startswith("Lighthouse") for h in hits)
    assert all(h["item"]["revision"]["number"] == 1 for h in hits)


@pytest.mark.django_db
def test_relations_cost_a_constant_number_of_queries(client: Client, lighthouse_corpus: list[Any]) -> None:
    # given warm caches and the cost of the bare search at 2 and at 20 hits
    gql(client, BARE_QUERY, {"limit": 20})
    bare_2, _ = _count(client, BARE_QUERY, 2)
    bare_20, _ = _count(client, BARE_QUERY, 20)
    # when the same pages ask for every relation
    full_2, _ = _count(client, PAGE_QUERY, 2)
    full_20, _ = _count(client, PAGE_QUERY, 20)
    # then relations add the same small number of queries whatever the page size
    assert full_2 - bare_2 == full_20 - bare_20 == ITEMS_QUERY


@pytest.mark.django_db
def test_superseded_relation_is_loaded_in_one_batch(client: Client, db: Any) -> None:
    # given three superseded items (searched with includeSuperseded) and their successors
    olds = [make_item(title=f"Beacon rule {n}", body=f"Beacon rule {n} old text.") for n in range(3)]
    news = [make_item(title=f"Beacon rule {n} revised", body=f"Revised rule {n}.") for n in range(3)]
    for old, new in zip(olds, news, strict=True):
        content.item_mark_superseded(item=old, by=new)
    build()
    query = """{ search(input: {query: "beacon", limit: 10, filter: {includeSuperseded: true}}) {
        hits { item { id supersededBy { id title } } } } }"""
    # when the successors are asked for
    with CaptureQueriesContext(connection) as ctx:
        status, body = gql(client, query)
    # then each old item points at its successor, fetched by one query
    assert status == 200, body
    pairs = {
        h["item"]["id"]: (h["item"]["supersededBy"] or {}).get("id") for h in body["data"]["search"]["hits"]
    }
    for old, new in zip(olds, news, strict=True):
        assert pairs[str(old.pk)] == str(new.pk)
    item_queries = [
        q
        for q in ctx.captured_queries
        if 'FROM "search_contentitem"' in q["sql"] and '"search_contentitem"."id" IN' in q["sql"]
    ]
    engine_item_reads = 2  # retrieve() reads the page's items and their rerank signals
    assert len(item_queries) <= engine_item_reads + ITEMS_QUERY + 1  # + one batch for the supersededBy level


@pytest.mark.django_db
def test_loader_batches_expected_keys_and_applies_access(db: Any, django_assert_num_queries: Any) -> None:
    # given a public and a staff-only item
    public = make_item(title="Open", body="Open body.")
    hidden = make_item(title="Closed", body="Closed body.", visibility="staff")
    request = RequestFactory().get("/graphql")
    request._kb_principal = ANONYMOUS  # type: ignore[attr-defined]
    loader = ContentItemByIdLoader(request, "live")
    # when both are announced and then loaded
    loader.expect([public.pk, hidden.pk])
    with django_assert_num_queries(1):
        first = loader.load(public.pk)
        second = loader.load(hidden.pk)
        again = loader.load(public.pk)
    # then one query answered both, the restricted item is None, and the loader is per request
    assert first is again and first.pk == public.pk
    assert second is None
    assert ContentItemByIdLoader(request, "live") is loader
    assert ContentItemByIdLoader(RequestFactory().get("/"), "live") is not loader
    with django_assert_num_queries(0):  # the item's revision came with it
        assert RevisionByIdLoader(request).load(first.live_revision_id).title == "Open"


@pytest.mark.django_db
def test_anonymous_loader_never_reads_drafts_corpus(db: Any) -> None:
    # given an item with a newer draft
    item = make_item(title="Published title", body="Body.")
    content.item_save_revision(item=item, title="Draft title", body="Draft body.", publish=False)
    request = RequestFactory().get("/graphql")
    request._kb_principal = ANONYMOUS  # type: ignore[attr-defined]
    # when an anonymous caller asks for the latest corpus, then the loader answers from the live one
    assert ContentItemByIdLoader(request, "latest") is ContentItemByIdLoader(request, "live")
