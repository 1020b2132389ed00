"""Root fields: search, notePaths, item, items, presets, recentSearches — values straight from the engine."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from search.engine import retrieve
from search.principal import ANONYMOUS
from search.types import RetrievalQuery
from tests.factories import build, make_item
from tests.graphql_api.conftest import gql

HIT_FIELDS = """itemId highlightedTitle highlightedContent passage tocPath chunkId lanes
  laneRanks { lane rank }
  score similarity closed item { id slug url title contentType primaryDomain updatedAt reviewStatus }"""


@pytest.fixture
def river_corpus(db: Any) -> list[Any]:
    items = [
        make_item(
            title=f"River crossing {n}",
            body=f"The river crossing number {n} needs a ferry and a bridge.",
            primary_domain="Transport" if n % 2 else "Safety",
            content_type="guide" if n % 3 else "policy",
        )
        for n in range(1, 8)
    ]
    make_item(title="Mountain pass", body="Snow chains for the mountain pass.")
    build()
    return items


@pytest.mark.django_db
def test_search_returns_the_engine_result(client: Client, river_corpus: list[Any]) -> None:
    # given the engine's own answer for an anonymous search
    expected = retrieve(query=RetrievalQuery(text="river ferry", principal=ANONYMOUS, limit=5))
    # when the same search goes through GraphQL
    status, body = gql(
        client,
        f"""{{ search(input: {{query: "river ferry", limit: 5}}) {{
        totalCount partialMatch degraded nextCursor hits {{ {HIT_FIELDS} }} }} }}""",
    )
    # then ids, order, totals and scores are the engine's
    assert status == 200, body
    result = body["data"]["search"]
    assert result["totalCount"] == expected.total
    assert [int(h["itemId"]) for h in result["hits"]] == [h.item_id for h in expected.hits]
    assert [h["score"] for h in result["hits"]] == [h.score for h in expected.hits]
    assert result["nextCursor"] == expected.next_cursor
    assert result["partialMatch"] is expected.partial_match
    assert result["degraded"] == []
    first = result["hits"][0]
    assert first["item"]["id"] == first["itemId"]
    assert first["item"]["url"].startswith("/items/")
    assert first["item"]["reviewStatus"] == "OK"
    assert first["closed"] is False
    assert {lr["lane"] for lr in first["laneRanks"]} == set(first["lanes"])


@pytest.mark.django_db
def test_highlight_is_escaped_html_with_only_mark_tags(client: Client) -> None:
    # given an item whose title and body hold markup
    make_item(title="<script>alert(1)</script> Lantern & wick", body='Trim the lantern <b>wick</b> "daily".')
    build()
    # when it is found
    status, body = gql(
        client,
        """{ search(input: {query: "lantern"}) { hits {
        highlightedTitle highlightedContent passage } } }""",
    )
    # then the text is escaped and only <mark> tags were added around the matched word
    assert status == 200, body
    hit = body["data"]["search"]["hits"][0]
    assert hit["highlightedTitle"] == "&lt;script&gt;alert(1)&lt;/script&gt; <mark>Lantern</mark> &amp; wick"
    assert "<mark>lantern</mark>" in hit["highlightedContent"]
    assert "<b>" not in hit["highlightedContent"] and "&lt;b&gt;wick&lt;/b&gt;" in hit["highlightedContent"]
    assert "&quot;daily&quot;" in hit["highlightedContent"]
    stripped = hit["highlightedContent"].replace("<mark>", "").replace("</mark>", "")
    assert "<" not in stripped
    assert "<b>wick</b>" in hit["passage"]


@pytest.mark.django_db
def test_search_paginates_with_cursor(client: Client, river_corpus: list[Any]) -> None:
    # given a first page of 3
    query = """query($cursor: String) { search(input: {query: "river", limit: 3, cursor: $cursor}) {
        totalCount nextCursor hits { itemId } } }"""
    _, first = gql(client, query)
    page1 = first["data"]["search"]
    # when the next page is asked for with its cursor
    _, second = gql(client, query, {"cursor": page1["nextCursor"]})
    page2 = second["data"]["search"]
    # then the pages do not overlap and follow the engine's order
    ids1 = [h["itemId"] for h in page1["hits"]]
    ids2 = [h["itemId"] for h in page2["hits"]]
    assert len(ids1) == 3 and ids2 and not set(ids1) & set(ids2)
    assert page1["totalCount"] == page2["totalCount"] == 7


@pytest.mark.django_db
def test_search_filters_and_facets(client: Client, river_corpus: list[Any]) -> None:
    # given filters on domain and content type
    status, body = gql(
        client,
        """{ search(input: {query: "river", limit: 50,
        filter: {domain: ["transport"], contentType: ["guide"]}}) {
        totalCount hits { item { primaryDomain contentType } } facets { name values { value count } } } }""",
    )
    # then every hit matches the filters, and facets count the whole result
    assert status == 200, body
    result = body["data"]["search"]
    assert result["hits"]
    assert all(h["item"] == {"primaryDomain": "Transport", "contentType": "guide"} for h in result["hits"])
    facets = {f["name"]: {v["value"]: v["count"] for v in f["values"]} for f in result["facets"]}
    assert facets["domain"] == {"Transport": result["totalCount"]}


@pytest.mark.django_db
def test_chunk_granularity_returns_passages(client: Client) -> None:
    # given an item with two sections that both mention the word
    make_item(title="Tides", body="# Morning\n\nHigh tide at dawn.\n\n# Evening\n\nLow tide at dusk.")
    build()
    # when searching by chunk
    status, body = gql(
        client,
        """{ search(input: {query: "tide", granularity: CHUNK}) {
        hits { itemId chunkId tocPath } } }""",
    )
    # then each hit is a passage with its own chunk id
    assert status == 200, body
    hits = body["data"]["search"]["hits"]
    assert all(h["chunkId"] for h in hits)
    assert len({h["chunkId"] for h in hits}) == len(hits)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("input_", "field"),
    [
        ('{query: "river", limit: 0}', "limit"),
        ('{query: "river", threshold: 2.0}', "threshold"),
        ('{query: "river", cursor: "not-a-cursor"}', "cursor"),
    ],
)
def test_invalid_search_input_is_a_typed_error(client: Client, input_: str, field: str) -> None:
    # when the engine refuses the input
    status, body = gql(client, f"{{ search(input: {input_}) {{ totalCount }} }}")
    # then the error names the field and carries a SearchErrorCode
    assert status == 200
    error = body["errors"][0]
    assert error["extensions"]["field"] == field
    assert error["extensions"]["code"] in {"INVALID_QUERY", "INVALID_CURSOR"}
    assert body["data"] is None


FILTERED_SEARCH = "query($f: SearchFilterInput) { search(input: {query: \"river\", filter: $f}) { totalCount } }"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("filter_", "field", "message"),
    [
        ({"domain": [f"d{i}" for i in range(21)]}, "filter.domain", "filter.domain has 21 values; send at most 20."),
        ({"contentType": ["x" * 121]}, "filter.contentType",
         "filter.contentType has a value 121 characters long; shorten it to 120 or fewer."),
        ({"freshnessDays": 0}, "filter.freshnessDays", "filter.freshnessDays must be between 1 and 3650 (got 0)."),
        ({"dateFrom": "2025-02-01", "dateTo": "2025-01-01"}, "filter.dateTo",
         "filter.dateTo (2025-01-01) is before the start date (2025-02-01); send an end date on or after it."),
    ],
)
def test_filters_have_the_engines_limits_under_their_graphql_names(
    client: Client, filter_: dict[str, Any], field: str, message: str
) -> None:
    # when a filter is past the one schema's limits (search/filters.py: 20 values, not GraphQL's old 50)
    _, body = gql(client, FILTERED_SEARCH, {"f": filter_})
    # then the engine's words, under the input's camelCase path
    assert body["errors"][0]["message"] == message
    assert body["errors"][0]["extensions"] == {"code": "INVALID_QUERY", "field": field}


@pytest.mark.django_db
def test_filter_values_are_stripped_and_repeats_do_not_count(client: Client, river_corpus: list[Any]) -> None:
    # given 40 spellings of one domain, blanks included
    values = [" Safety ", "Safety", ""] * 20
    # when
    _, body = gql(client, FILTERED_SEARCH, {"f": {"domain": values}})
    _, plain = gql(client, FILTERED_SEARCH, {"f": {"domain": ["Safety"]}})
    # then they are one filter value
    assert "errors" not in body, body
    assert body["data"]["search"]["totalCount"] == plain["data"]["search"]["totalCount"] > 0


@pytest.mark.django_db
def test_overlong_query_is_refused_with_a_fix(client: Client) -> None:
    status, body = gql(
        client, "query($q: String!) { search(input: {query: $q}) { totalCount } }", {"q": "a " * 1500}
    )
    error = body["errors"][0]
    assert error["extensions"] == {"code": "INVALID_QUERY", "field": "query"}
    assert "shorten it to 2000" in error["message"]


@pytest.mark.django_db
def test_empty_query_returns_empty_result(client: Client, django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(0):
        status, body = gql(client, '{ search(input: {query: "   "}) { totalCount hits { itemId } } }')
    assert body["data"]["search"] == {"totalCount": 0, "hits": []}


@pytest.mark.django_db
def test_note_paths_follow_search_order_or_newest_first(client: Client, river_corpus: list[Any]) -> None:
    # given the engine's order for "river ferry"
    expected = retrieve(query=RetrievalQuery(text="river ferry", principal=ANONYMOUS, limit=100))
    # when notePaths runs with and without a search
    _, searched = gql(client, '{ notePaths(filter: {search: "river ferry"}) }')
    _, listed = gql(client, '{ notePaths(filter: {domain: ["safety"], first: 2}) }')
    # then paths follow the search order, or list filtered items newest first
    assert searched["data"]["notePaths"] == [h.url for h in expected.hits]
    safety = sorted(
        (i for i in river_corpus if i.primary_domain == "Safety"),
        key=lambda i: (i.updated_at, i.pk),
        reverse=True,
    )
    assert listed["data"]["notePaths"] == [i.get_absolute_url() for i in safety[:2]]


@pytest.mark.django_db
def test_item_by_id_or_slug(client: Client, river_corpus: list[Any]) -> None:
    item = river_corpus[0]
    query = """query($id: ID, $slug: String) { item(id: $id, slug: $slug) {
        id slug title url revision { number title body } } }"""
    _, by_id = gql(client, query, {"id": str(item.pk)})
    _, by_slug = gql(client, query, {"slug": item.slug})
    assert by_id["data"]["item"] == by_slug["data"]["item"]
    assert by_id["data"]["item"]["revision"]["body"].startswith("The river crossing number 1")
    _, neither = gql(client, "{ item { id } }")
    assert neither["errors"][0]["extensions"]["code"] == "INVALID_QUERY"
    _, bad = gql(client, '{ item(id: "abc") { id } }')
    assert bad["errors"][0]["extensions"] == {"code": "INVALID_QUERY", "field": "id"}


@pytest.mark.django_db
def test_items_pages_sorted_by_title(client: Client, river_corpus: list[Any]) -> None:
    # given a title-sorted browse of 3 per page
    query = """query($after: String) { items(sort: TITLE, first: 3, after: $after) {
        totalCount pageInfo { hasNextPage endCursor } edges { node { title } } } }"""
    titles: list[str] = []
    after = None
    # when every page is walked
    for _ in range(5):
        _, body = gql(client, query, {"after": after})
        page = body["data"]["items"]
        titles += [e["node"]["title"] for e in page["edges"]]
        after = page["pageInfo"]["endCursor"]
        if not page["pageInfo"]["hasNextPage"]:
            break
    # then every item came once, in title order
    assert titles == sorted(titles)
    assert len(titles) == page["totalCount"] == 8


@pytest.mark.django_db
def test_items_with_a_bad_cursor_is_a_typed_error(client: Client) -> None:
    _, body = gql(client, '{ items(after: "zzz") { totalCount } }')
    assert body["errors"][0]["extensions"] == {"code": "INVALID_CURSOR", "field": "cursor"}


@pytest.mark.django_db
def test_presets_lists_system_presets_for_anonymous(client: Client) -> None:
    _, body = gql(client, "{ presets { id name params isSystem isDeleted } }")
    presets = body["data"]["presets"]
    assert presets and all(p["isSystem"] and not p["isDeleted"] for p in presets)
    assert all(isinstance(p["params"], dict) and p["params"] for p in presets)


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["reviewDueWithinDays", "freshnessDays"])
@pytest.mark.parametrize("value", [-739951, 0, 99999999])
def test_day_counts_out_of_range_are_refused_not_crashed(client, field: str, value: int) -> None:
    # found by the GraphQL fuzzer: notePaths without a search and a day count past the calendar's range
    query = f"query($v: Int) {{ notePaths(filter: {{search: \"\", {field}: $v}}) }}"
    response = client.post("/graphql", {"query": query, "variables": {"v": value}}, content_type="application/json")
    errors = response.json()["errors"]
    assert errors[0]["extensions"]["code"] != "INTERNAL_ERROR"
    assert "must be" in errors[0]["message"]


@pytest.mark.django_db
@pytest.mark.parametrize("slug", ["\u0000", "a\u0000b"])
def test_an_item_slug_postgresql_cannot_store_is_simply_not_found(client, slug: str) -> None:
    # found by the GraphQL fuzzer: a NUL in the slug reached PostgreSQL and came back as an internal error
    query = "query($s: String) { item(slug: $s) { id supersededBy { superseded } } }"
    response = client.post("/graphql", {"query": query, "variables": {"s": slug}}, content_type="application/json")
    assert response.json() == {"data": {"item": None}}


@pytest.fixture
def closed_corpus(db: Any) -> None:
    # the same rule as the site's (tests/browse/test_views.py): title match, policy on, unreadable
    make_item(title="Rate card 2026", body="Members only.", visibility="signed_in", allow_closed_placeholder=True)
    make_item(title="Rate card secret", body="Hidden.", visibility="staff", allow_closed_placeholder=False)
    make_item(
        title="Another thing", body="rate card in the body only", visibility="staff", allow_closed_placeholder=True
    )
    make_item(title="Rate card public", body="Public rates.")
    build()


CLOSED_SEARCH = """query($q: String!, $closed: Boolean, $cursor: String, $limit: Int) {
  search(input: {query: $q, includeClosed: $closed, cursor: $cursor, limit: $limit}) {
    totalCount nextCursor hits { itemId closed highlightedTitle passage highlightedContent chunkId lanes
      item { id } } } }"""


def closed_search(client: Client, **variables: Any) -> dict[str, Any]:
    status, body = gql(client, CLOSED_SEARCH, {"q": "rate card", **variables})
    assert status == 200 and "errors" not in body, body
    return body["data"]["search"]


@pytest.mark.django_db
def test_closed_material_only_when_asked_with_the_sites_rule_and_title_only(
    client: Client, closed_corpus: None
) -> None:
    # without the argument: readable hits only, as before
    plain = closed_search(client)
    assert [h["closed"] for h in plain["hits"]] == [False]
    # when the frontend asks for closed material
    asked = closed_search(client, closed=True)
    # then the readable hit comes first, then the one placeholder the site shows, title alone
    readable, placeholder = asked["hits"]
    assert readable["closed"] is False and readable["item"] is not None
    assert placeholder["closed"] is True
    assert placeholder["highlightedTitle"] == "<mark>Rate</mark> <mark>card</mark> 2026"
    assert placeholder["item"] is None and placeholder["passage"] == "" and placeholder["highlightedContent"] == ""
    assert placeholder["chunkId"] is None and placeholder["lanes"] == []
    # and totalCount counts readable results only
    assert asked["totalCount"] == plain["totalCount"] == 1


@pytest.mark.django_db
def test_closed_material_is_not_offered_to_those_who_can_read_it_nor_on_later_pages(
    client: Client, closed_corpus: None
) -> None:
    from django.contrib.auth import get_user_model

    # a signed-in reader sees "Rate card 2026" as a real hit, never as a placeholder
    user = get_user_model().objects.create_user("reader", "r@example.com", "pw-reader-1")
    client.force_login(user)
    hits = closed_search(client, closed=True)["hits"]
    assert not any(h["closed"] for h in hits) and len(hits) == 2
    client.logout()
    # given a second readable page for anonymous callers
    make_item(title="Rate card archive", body="Older public rates.")
    build()
    # then the first page carries the placeholder and a later page (cursor) repeats none
    first = closed_search(client, closed=True, limit=1)
    assert [h["closed"] for h in first["hits"]] == [False, True]
    later = closed_search(client, closed=True, limit=1, cursor=first["nextCursor"])
    assert [h["closed"] for h in later["hits"]] == [False]
