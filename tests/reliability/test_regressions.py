"""The defects the fuzzers and the permission matrix found, one minimal input each, pinned."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from mcp_api.server import mcp_server
from search.engine import retrieve
from search.principal import ANONYMOUS, Principal
from search.types import RetrievalQuery
from tests.factories import build, make_item
from tests.reliability.strategies import deep_json

pytestmark = pytest.mark.django_db(transaction=True)
MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.fixture
def corpus() -> list[Any]:
    items = [
        make_item(title="Tender pricing guide", body="Day rates and margins for a tender."),
        make_item(title="Platypus notes", body="The platypus lays eggs."),
        make_item(title="Secret platypos file", body="The platypos and the narwhal.", visibility="staff"),
    ]
    build()
    return items


def post_search(client: Client, body: Any) -> Any:
    return client.post(
        "/api/search",
        data=body if isinstance(body, str) else json.dumps(body),
        content_type="application/json",
    )


@pytest.mark.parametrize("word", ["pricing" + "a" * 300, "pricing" + "\u0627" * 1020])
def test_a_word_longer_than_255_characters_is_not_searched_and_not_a_500(
    corpus: list[Any], word: str
) -> None:
    # was: levenshtein() refused it in "did you mean" (DataError), and a word past 2046 bytes made the
    # tsquery fail (ProgramLimitExceeded): HTTP 500 on every surface
    response = post_search(Client(), {"query": f"tender {word}"})
    assert response.status_code == 200
    assert [hit["id"] for hit in response.json()["results"]] == [corpus[0].pk]


def test_a_statement_error_is_not_mistaken_for_an_outage() -> None:
    from django.db import OperationalError, connection

    from config.middleware import is_outage, unavailable_reason

    with pytest.raises(OperationalError) as caught, connection.cursor() as cursor:
        cursor.execute("SELECT repeat('a', 3000)::tsquery")  # "word is too long" (program limit exceeded)
    assert not is_outage(caught.value) and unavailable_reason(caught.value) is None


def test_a_statement_cancelled_by_the_timeout_is_a_503_not_an_outage() -> None:
    from django.db import OperationalError, connection, transaction

    from config.middleware import TIMEOUT_MESSAGE, is_outage, unavailable_reason

    with pytest.raises(OperationalError) as caught, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL statement_timeout = 50")
        cursor.execute("SELECT pg_sleep(2)")
    assert unavailable_reason(caught.value) == TIMEOUT_MESSAGE and not is_outage(caught.value)


@pytest.mark.parametrize("value", ["\x00", "bid\udc80", 0, {"a": 1}])
def test_filter_values_postgres_cannot_store_or_of_the_wrong_type_are_400(
    corpus: list[Any], value: Any
) -> None:
    # was: NUL → DataError, a lone surrogate → UnicodeEncodeError, a number → TypeError (HTTP 500)
    response = post_search(Client(), {"query": "pricing", "filters": {"domain": value}})
    assert response.status_code == 400 and "filters" in response.json()["error"]["message"]


def test_graphql_and_mcp_refuse_a_nul_in_a_filter_cleanly(corpus: list[Any]) -> None:
    graphql = Client().post(
        "/graphql",
        content_type="application/json",
        data=json.dumps(
            {
                "query": 'query($d: String!) { search(input: {query: "pricing", filter: {domain: [$d]}}) '
                "{ totalCount } }",
                "variables": {"d": "a\x00b"},
            }
        ),
    )
    assert graphql.status_code == 200
    assert graphql.json()["errors"][0]["extensions"]["code"] == "INVALID_QUERY"
    result = async_to_sync(mcp_server.call_tool)("find", {"query": "pricing", "scope": "a\x00b"})
    assert result.isError and "NUL" in result.content[0].text


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_json_nested_past_the_recursion_limit_is_a_400_everywhere(kind: str) -> None:
    # was: RecursionError in json.loads (HTTP 500) on /api/search, /graphql and /mcp
    body = deep_json(5000, kind)
    client = Client()
    assert post_search(client, body).status_code == 400
    assert client.post("/graphql", data=body, content_type="application/json").status_code == 400
    assert (
        client.post("/mcp", data=body, content_type="application/json", headers=MCP_ACCEPT).status_code == 400
    )


@pytest.mark.parametrize(
    "payload",
    [
        {"query": True},
        {"query": ["pricing"]},
        {"query": {"": None}},
        {"query": "{ presets { id } }", "variables": []},
        {"query": "{ presets { id } }", "operationName": 3},
    ],
)
def test_graphql_request_fields_of_the_wrong_type_are_400(payload: dict[str, Any]) -> None:
    # was: TypeError inside graphql-core (HTTP 500)
    response = Client().post("/graphql", data=json.dumps(payload), content_type="application/json")
    assert response.status_code == 400 and response.json()["errors"][0]["message"]


def test_graphql_documents_that_are_not_utf8_are_400() -> None:
    # was: graphene decoded an application/graphql body without a check (UnicodeDecodeError, HTTP 500)
    response = Client().post("/graphql", data=b"\x80{", content_type="application/graphql")
    assert response.status_code == 400


def test_graphql_explicit_null_arguments_mean_the_default(corpus: list[Any]) -> None:
    # was: items(first: null) compared None with 1 (INTERNAL_ERROR)
    response = Client().post(
        "/graphql",
        content_type="application/json",
        data=json.dumps(
            {"query": "{ items(first: null, sort: NEWEST, after: null, corpus: null) { totalCount } }"}
        ),
    )
    assert response.json() == {"data": {"items": {"totalCount": 2}}}


def test_mcp_garbage_with_accept_text_html_is_a_4xx() -> None:
    # was: DRF rendered the parse error with its browsable-API template, which is not installed (HTTP 500)
    response = Client().post(
        "/mcp", data=b"\x00", content_type="application/json", headers={"Accept": "text/html"}
    )
    assert 400 <= response.status_code < 500


def test_mcp_error_messages_are_plain_text() -> None:
    # was: an unknown argument's name was echoed with its control characters
    result = async_to_sync(mcp_server.call_tool)("quality", {"\x00\x1b[31m": 1, "item_id": 1})
    text = result.content[0].text
    assert result.isError and not any(ord(ch) < 32 and ch not in "\n\t" for ch in text)


def test_did_you_mean_never_suggests_a_word_only_unreadable_items_hold(corpus: list[Any]) -> None:
    # was: "platypoz" suggested "platypos" (found only in a staff item) to anonymous callers, and a word
    # found only in unreadable items was not typo-corrected, unlike a word found nowhere
    staff = Principal(kind="staff", all_content=True)
    outsider_near = retrieve(query=RetrievalQuery(text="platypoz", principal=ANONYMOUS))
    outsider_exact = retrieve(query=RetrievalQuery(text="platypos", principal=ANONYMOUS))
    outsider_nowhere = retrieve(query=RetrievalQuery(text="platypis", principal=ANONYMOUS))
    insider = retrieve(query=RetrievalQuery(text="platypoz", principal=staff))
    assert outsider_near.suggestion == outsider_exact.suggestion == outsider_nowhere.suggestion == "platypus"
    assert (
        [h.item_id for h in outsider_exact.hits]
        == [h.item_id for h in outsider_nowhere.hits]
        == [corpus[1].pk]
    )
    assert insider.suggestion == "platypos"


def test_an_id_past_the_database_range_finds_nothing_instead_of_failing(corpus: list[Any]) -> None:
    # was: Django raised EmptyResultSet while compiling the access subquery ("unexpected error" in MCP)
    huge = 2**63
    result = async_to_sync(mcp_server.call_tool)("find", {"query": "pricing", "content_item_id": huge})
    assert not result.isError and result.structuredContent["count"] == 0
    page = Client().get("/search", {"q": "pricing"})
    assert page.status_code == 200
    assert retrieve(query=RetrievalQuery(text="pricing", similar_to=huge)).hits
