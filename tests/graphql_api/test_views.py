"""The protected /graphql view: depth, aliases, batching, body size, CSRF, the shared rate limit."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client, override_settings

from accounts.limits import RATES
from graphql_api.protection import MAX_ALIASES, MAX_DEPTH
from tests.graphql_api.conftest import gql

SEARCH_LIMIT = int(RATES["search"].split("/")[0])


def _nested_superseded(levels: int) -> str:
    inner = "id"
    for _ in range(levels):
        inner = f"supersededBy {{ {inner} }}"
    return f'{{ item(id: "1") {{ {inner} }} }}'


@pytest.mark.django_db
def test_query_within_depth_limit_runs(client: Client) -> None:
    # given a query exactly at the depth limit (item at depth 0, each supersededBy one level deeper)
    query = _nested_superseded(MAX_DEPTH - 1)
    # when it is posted
    status, body = gql(client, query)
    # then it executes (the item does not exist, so it is null)
    assert status == 200, body
    assert body == {"data": {"item": None}}


@pytest.mark.django_db
def test_query_deeper_than_limit_is_refused(client: Client, django_assert_num_queries: Any) -> None:
    # given a query one level deeper than allowed
    query = _nested_superseded(MAX_DEPTH + 1)
    # when it is posted
    with django_assert_num_queries(0):
        status, body = gql(client, query)
    # then it is refused before execution with a typed error
    assert status == 400
    error = body["errors"][0]
    assert error["extensions"]["code"] == "QUERY_TOO_COMPLEX"
    assert f"maximum operation depth of {MAX_DEPTH}" in error["message"]
    assert "data" not in body


@pytest.mark.django_db
def test_depth_counts_through_fragments(client: Client) -> None:
    # given a deep selection hidden in a fragment
    deep = "id " + "".join("supersededBy { " for _ in range(MAX_DEPTH + 1)) + "id" + " }" * (MAX_DEPTH + 1)
    query = f'query {{ item(id: "1") {{ ...F }} }} fragment F on Item {{ {deep} }}'
    # when it is posted, then it is refused just the same
    status, body = gql(client, query)
    assert status == 400
    assert body["errors"][0]["extensions"]["code"] == "QUERY_TOO_COMPLEX"


@pytest.mark.django_db
def test_alias_limit(client: Client) -> None:
    # given queries with exactly the allowed number of aliases and one more
    allowed = "{ " + " ".join(f"a{i}: recentSearches" for i in range(MAX_ALIASES)) + " }"
    too_many = "{ " + " ".join(f"a{i}: recentSearches" for i in range(MAX_ALIASES + 1)) + " }"
    # when both are posted
    ok_status, ok_body = gql(client, allowed)
    status, body = gql(client, too_many)
    # then the first runs and the second is refused naming the limit
    assert ok_status == 200 and len(ok_body["data"]) == MAX_ALIASES
    assert status == 400
    assert body["errors"][0]["extensions"]["code"] == "QUERY_TOO_COMPLEX"
    assert f"at most {MAX_ALIASES}" in body["errors"][0]["message"]


@pytest.mark.django_db
def test_aliases_in_a_fragment_count_each_time_it_is_spread(client: Client) -> None:
    # given a fragment with 11 aliases spread twice (22 aliased fields executed)
    aliases = " ".join(f"a{i}: id" for i in range(11))
    query = (
        f'{{ x: item(id: "1") {{ ...F }} y: item(id: "2") {{ ...F }} }} fragment F on Item {{ {aliases} }}'
    )
    # when it is posted, then it is refused
    status, body = gql(client, query)
    assert status == 400
    assert body["errors"][0]["extensions"]["code"] == "QUERY_TOO_COMPLEX"


@pytest.mark.django_db
def test_batched_operations_are_refused(client: Client) -> None:
    # given a JSON array of two operations
    payload = [{"query": "{ recentSearches }"}, {"query": "{ recentSearches }"}]
    # when it is posted
    response = client.post("/graphql", data=json.dumps(payload), content_type="application/json")
    # then the whole request is refused with a clear message
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["extensions"]["code"] == "BATCH_NOT_SUPPORTED"
    assert "one operation per request" in error["message"]


@pytest.mark.django_db
@override_settings(GRAPHQL_MAX_BODY_BYTES=2048)
def test_request_body_limit(client: Client) -> None:
    # given a body above the configured limit
    padding = " " * 3000
    # when it is posted
    response = client.post(
        "/graphql",
        data=json.dumps({"query": "{ recentSearches }" + padding}),
        content_type="application/json",
    )
    # then it is refused as too large
    assert response.status_code == 413
    assert response.json()["errors"][0]["extensions"]["code"] == "REQUEST_TOO_LARGE"


@pytest.mark.django_db
def test_get_may_query_but_not_mutate(client: Client) -> None:
    # given a query and a mutation sent with GET
    query_response = client.get("/graphql", {"query": "{ recentSearches }"}, HTTP_ACCEPT="application/json")
    mutation_response = client.get(
        "/graphql",
        {"query": "mutation { recentSearchesClear { errors { code } } }"},
        HTTP_ACCEPT="application/json",
    )
    # then the query runs and the mutation is refused
    assert query_response.status_code == 200
    assert query_response.json() == {"data": {"recentSearches": []}}
    assert mutation_response.status_code == 405


@pytest.mark.django_db
def test_graphiql_is_not_served_without_debug(client: Client) -> None:
    # given DEBUG off (test settings)
    # when a browser asks for /graphql
    response = client.get("/graphql", HTTP_ACCEPT="text/html")
    # then no GraphiQL page is served
    assert b"graphiql" not in response.content.lower()
    assert response.status_code == 400


@pytest.mark.django_db
@override_settings(DEBUG=True)
def test_graphiql_is_served_with_debug(client: Client) -> None:
    response = client.get("/graphql", HTTP_ACCEPT="text/html")
    assert response.status_code == 200
    assert b"graphiql" in response.content.lower()


@pytest.mark.django_db
def test_queries_need_no_csrf_token_but_mutations_do(user_client: Client) -> None:
    # given a signed-in session whose client enforces CSRF like a browser
    user_client.handler.enforce_csrf_checks = True
    # when it queries without a token
    status, body = gql(user_client, "{ recentSearches }")
    # then the query runs
    assert status == 200, body
    # when it mutates without a token
    status, body = gql(user_client, 'mutation { recentSearchAdd(query: "tides") { recentSearches } }')
    # then the mutation is refused and nothing is recorded
    assert status == 403
    assert body["errors"][0]["extensions"]["code"] == "CSRF_FAILED"
    assert gql(user_client, "{ recentSearches }")[1]["data"]["recentSearches"] == []
    # when it mutates with the token from the cookie
    token = user_client.get("/graphql", {"query": "{ recentSearches }"}).cookies["csrftoken"].value
    status, body = gql(
        user_client,
        'mutation { recentSearchAdd(query: "tides") { recentSearches errors { code } } }',
        HTTP_X_CSRFTOKEN=token,
    )
    # then it runs
    assert status == 200, body
    assert body["data"]["recentSearchAdd"] == {"recentSearches": ["tides"], "errors": []}


@pytest.mark.django_db
def test_each_search_field_spends_the_shared_budget(client: Client) -> None:
    # given an operation with three aliased search fields and one notePaths search
    query = """{ a: search(input: {query: "x"}) { totalCount } b: search(input: {query: "y"}) { totalCount }
      c: search(input: {query: "z"}) { totalCount } notePaths(filter: {search: "w"}) }"""
    runs = SEARCH_LIMIT // 4
    # when it runs until the budget cannot pay for another round
    for _ in range(runs):
        status, body = gql(client, query)
        assert status == 200, body
    status, body = gql(client, query)
    # then the next round is refused with a clear, typed error and a Retry-After
    assert status == 429
    error = body["errors"][0]
    assert error["extensions"]["code"] == "RATE_LIMITED"
    assert error["extensions"]["retryAfter"] >= 1
    assert "Retry in" in error["message"]


@pytest.mark.django_db
def test_note_paths_without_search_and_other_fields_are_free(client: Client) -> None:
    # given the whole search budget spent
    for _ in range(SEARCH_LIMIT):
        gql(client, '{ search(input: {query: "x"}) { totalCount } }')
    # when browse-mode fields run
    status, body = gql(client, "{ notePaths items { totalCount } recentSearches presets { id } }")
    # then they still answer
    assert status == 200, body


@pytest.mark.django_db
def test_budget_is_shared_with_post_api_search(client: Client, django_assert_num_queries: Any) -> None:
    # given the budget spent by POST /api/search (all but one unit)
    for _ in range(SEARCH_LIMIT - 1):
        response = client.post(
            "/api/search", data=json.dumps({"query": "harbour"}), content_type="application/json"
        )
        assert response.status_code == 200
    # when a GraphQL operation asks for two searches
    query = '{ a: search(input: {query: "x"}) { totalCount } b: search(input: {query: "y"}) { totalCount } }'
    with django_assert_num_queries(0):  # refused before any SQL (and before any embedding)
        status, body = gql(client, query)
    # then it is refused, and so is the REST endpoint afterwards
    assert status == 429
    assert body["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
    response = client.post(
        "/api/search", data=json.dumps({"query": "harbour"}), content_type="application/json"
    )
    assert response.status_code == 429


@pytest.mark.django_db
def test_rate_limited_search_never_embeds(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    # given the budget spent, and an embedder that records calls
    calls: list[str] = []
    from search.engine import vector

    real = vector.query_embedding
    monkeypatch.setattr(vector, "query_embedding", lambda text: calls.append(text) or real(text))
    for _ in range(SEARCH_LIMIT):
        gql(client, '{ search(input: {query: "warmup"}) { totalCount } }')
    calls.clear()
    # when one more search arrives
    status, _ = gql(client, '{ search(input: {query: "harbour"}) { totalCount } }')
    # then nothing was embedded
    assert status == 429
    assert calls == []


@pytest.mark.django_db
def test_syntax_and_validation_errors_are_plain_graphql_errors(client: Client) -> None:
    status, body = gql(client, "{ search(input: {query: 1}) { nope } }")
    assert status == 400
    assert body["errors"]


@pytest.mark.django_db
def test_unexpected_resolver_failures_are_masked(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    # given a service that fails with an internal detail in its message
    from graphql_api import resolvers

    def boom(**_kwargs: Any) -> Any:
        raise RuntimeError("password=hunter2 at db-host-7")

    monkeypatch.setattr(resolvers, "items_list", boom)
    # when the field runs
    status, body = gql(client, "{ items { totalCount } }")
    # then the caller sees a typed internal error without the detail
    error = body["errors"][0]
    assert error["extensions"]["code"] == "INTERNAL_ERROR"
    assert "hunter2" not in json.dumps(body)


@pytest.mark.django_db
def test_several_operations_need_an_operation_name(client: Client) -> None:
    # given a document with two operations
    document = "query A { recentSearches } query B { presets { id } }"
    # when no operationName is sent, then nothing runs and the error says what to pass
    status, body = gql(client, document)
    assert status == 400
    assert "operationName" in body["errors"][0]["message"]
    # when one is chosen, then only that one runs
    response = client.post(
        "/graphql",
        data=json.dumps({"query": document, "operationName": "A"}),
        content_type="application/json",
    )
    assert response.json() == {"data": {"recentSearches": []}}


@pytest.mark.django_db
def test_introspection_passes_the_protection_rules(client: Client) -> None:
    # given the introspection query GraphiQL and code generators send (deeper than 8 levels)
    from graphql import get_introspection_query

    # when it is posted
    status, body = gql(client, get_introspection_query())
    # then it runs: introspection fields do not count towards the depth limit
    assert status == 200, body
    assert body["data"]["__schema"]["queryType"]["name"] == "Query"
