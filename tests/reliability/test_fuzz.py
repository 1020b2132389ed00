"""Fuzzing every search surface with hostile input: never a 5xx, never a stack trace, always a clear answer.

Volume runs in process (Django's test client, direct MCP tool calls, ``call_command``): ``FUZZ_EXAMPLES``
generated inputs per surface (10,000 by default). Tests are ``transaction=True`` so that each request
runs in autocommit as in production: a failing SQL statement cannot hide behind an aborted test
transaction. Each test writes what it tried to ``docs/reliability/figures.json``.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from io import StringIO
from typing import Any
from urllib.parse import quote

import graphql
import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client
from hypothesis import given
from hypothesis import strategies as st
from hypothesis_graphql import Mode, mutations, queries
from mcp_server.djangomcp import django_request_ctx

from graphql_api.schema import schema as kb_schema
from mcp_api.server import mcp_server
from mcp_api.tools import TOOLS
from search.principal import Principal
from search.types import MAX_QUERY_CHARS
from tests.reliability import strategies as s
from tests.reliability.checks import assert_clear_answer, assert_no_leak, body_text, fuzz_corpus
from tests.reliability.figures import record

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("unlimited")]

TARGET = s.FUZZ_EXAMPLES
# Whole JSON-RPC bodies through the /mcp view (the tool arguments above get the full TARGET).
HTTP_TARGET = max(100, TARGET // 10)
# Hypothesis may skip a duplicate input; the count actually sent must still be near the target.
MIN_SENT = int(TARGET * 0.95)


def _summary(statuses: Counter[Any], started: float, **extra: Any) -> dict[str, Any]:
    return {
        "inputs": sum(statuses.values()),
        "by_answer": {str(k): v for k, v in sorted(statuses.items(), key=lambda kv: str(kv[0]))},
        "server_errors": 0,
        "stack_traces": 0,
        "seconds": round(time.perf_counter() - started, 1),
        **extra,
    }


# --- GET /api/search/preview --------------------------------------------------------------------------


def _encode(value: str) -> str:
    """Percent-encode any string, lone surrogates included (they become invalid UTF-8 bytes on the wire)."""
    return quote(value.encode("utf-8", "surrogatepass"), safe="")


preview_params = st.lists(
    st.one_of(
        st.tuples(st.just("q"), s.query_text),
        st.tuples(st.just("limit"), st.one_of(s.huge_ints.map(str), s.short_text, s.odd_floats.map(str))),
        st.tuples(s.short_text, s.short_text),
    ),
    max_size=5,
)
raw_query_strings = st.one_of(
    preview_params.map(lambda pairs: "&".join(f"{_encode(k)}={_encode(v)}" for k, v in pairs)),
    st.binary(max_size=80).map(lambda b: "q=" + "".join(f"%{byte:02x}" for byte in b)),
    st.sampled_from(["q", "q=", "q=%", "q=%zz", "q=%ff%fe", "q=a&q=b&q=", "limit=5", "q=a&limit=&limit=2"]),
)


def test_preview_endpoint_answers_every_input_clearly() -> None:
    # given
    fuzz_corpus()
    client = Client()
    statuses: Counter[int] = Counter()
    started = time.perf_counter()

    @s.fuzz_settings()
    @given(batch=s.batches(raw_query_strings, st.sampled_from(["GET"] * 12 + ["POST", "HEAD", "PUT"])))
    def check(batch: list[tuple[str, str]]) -> None:
        for query_string, method in batch:
            # when
            response = client.generic(method, "/api/search/preview", QUERY_STRING=query_string)
            # then
            status = assert_clear_answer(response, context=f"{method} ?{query_string[:200]}")
            if status == 200 and method == "GET":
                data = json.loads(response.content)
                assert set(data) == {"results", "count"} and data["count"] == len(data["results"]) <= 20
            statuses[status] += 1

    check()
    assert sum(statuses.values()) >= MIN_SENT
    assert statuses[200] > TARGET // 10, "too few inputs reached the preview search"
    record("fuzz.preview", _summary(statuses, started, endpoint="GET /api/search/preview"))


# --- POST /api/search ---------------------------------------------------------------------------------

search_objects = st.one_of(
    st.fixed_dictionaries(
        {"query": s.query_text},
        optional={
            "limit": st.one_of(s.huge_ints, s.json_values),
            "threshold": st.one_of(s.odd_floats, s.json_values),
            "cursor": s.cursors,
            "filters": st.one_of(s.filter_objects, s.json_values),
        },
    ),
    st.fixed_dictionaries(
        {"query": st.one_of(s.json_values, s.query_text)}, optional={"filters": s.filter_objects}
    ),
    st.dictionaries(s.short_text, s.json_values, max_size=4),
    s.json_values,
)
search_bodies = st.one_of(
    search_objects.map(s.dumps),
    search_objects.map(s.dumps),
    search_objects.map(s.dumps),
    s.deep_bodies,
    st.binary(max_size=120),
    st.text(s.any_characters, max_size=60).map(lambda t: t.encode("utf-8", "surrogatepass")),
)


def test_search_api_answers_every_input_clearly() -> None:
    # given
    fuzz_corpus()
    client = Client()
    statuses: Counter[int] = Counter()
    started = time.perf_counter()

    content_types = st.sampled_from(
        ["application/json"] * 12
        + [
            "application/json; charset=utf-8",
            "text/plain",
            "multipart/form-data; boundary=x",
            "application/x-www-form-urlencoded",
        ]
    )

    @s.fuzz_settings()
    @given(batch=s.batches(search_bodies, content_types))
    def check(batch: list[tuple[str | bytes, str]]) -> None:
        for body, content_type in batch:
            # when
            response = client.post("/api/search", data=body, content_type=content_type)
            # then
            status = assert_clear_answer(response, context=f"POST /api/search {str(body)[:300]!r}")
            if status == 200:
                data = json.loads(response.content)
                assert isinstance(data["results"], list) and data["count"] >= len(data["results"])
            statuses[status] += 1

    check()
    assert sum(statuses.values()) >= MIN_SENT
    assert statuses[200] > TARGET // 20, "too few inputs reached the engine"
    record("fuzz.search_api", _summary(statuses, started, endpoint="POST /api/search"))


# --- /graphql -----------------------------------------------------------------------------------------

GRAPHQL_SDL = graphql.print_schema(kb_schema.graphql_schema)


def _string_node(value: str) -> graphql.StringValueNode:
    return graphql.StringValueNode(value=value)


GRAPHQL_SCALARS = {
    "Date": s.date_like.map(_string_node),
    "DateTime": st.one_of(st.datetimes().map(lambda d: d.isoformat()), s.short_text).map(_string_node),
    "GenericScalar": s.short_text.map(_string_node),
}
SEARCH_DOCUMENT = """query Search($input: SearchInput!) { search(input: $input) {
  totalCount partialMatch degraded nextCursor suggestion facets { name values { value count } }
  hits { itemId highlightedTitle highlightedContent passage closed
         item { id title revision { body } } } } }"""
filter_inputs = st.dictionaries(
    st.sampled_from(
        [
            "domain",
            "subtopic",
            "contentType",
            "platform",
            "author",
            "layer",
            "source",
            "language",
            "includeQa",
            "dateFrom",
            "dateTo",
            "freshnessDays",
            "overdueReview",
            "reviewDueWithinDays",
            "includeSuperseded",
            "unreadOnly",
            "bogus",
        ]
    ),
    s.filter_values,
    max_size=4,
)
search_variables = st.one_of(
    st.fixed_dictionaries(
        {
            "input": st.fixed_dictionaries(
                {"query": st.one_of(s.query_text, s.query_text, s.json_values)},
                optional={
                    "limit": st.one_of(s.huge_ints, s.json_values),
                    "cursor": s.cursors,
                    "threshold": st.one_of(s.odd_floats, s.json_values),
                    "filter": st.one_of(filter_inputs, s.json_values),
                    "granularity": st.one_of(st.sampled_from(["ITEM", "CHUNK"]), s.short_text),
                    "mode": st.one_of(st.sampled_from(["HYBRID", "LEXICAL", "VECTOR"]), s.short_text),
                    "corpus": st.one_of(st.sampled_from(["LIVE", "LATEST"]), s.short_text),
                },
            )
        }
    ),
    s.json_values,
)


def _nested_input(depth: int) -> str:
    return (
        'query { search(input: {query: "pricing", filter: {domain: '
        + "[" * depth
        + '"x"'
        + "]" * depth
        + "}}) { totalCount } }"
    )


def _aliases(count: int) -> str:
    fields = " ".join(f'a{i}: search(input: {{query: "pricing {i}"}}) {{ totalCount }}' for i in range(count))
    return "query { " + fields + " }"


def _deep_selection(depth: int) -> str:
    return (
        'query { search(input: {query: "pricing"}) { hits { item { '
        + "supersededBy { " * depth
        + "id"
        + " }" * depth
        + " } } } }"
    )


graphql_documents = st.one_of(
    queries(GRAPHQL_SDL, custom_scalars=GRAPHQL_SCALARS, codec=None, mode=Mode.POSITIVE),
    queries(GRAPHQL_SDL, custom_scalars=GRAPHQL_SCALARS, codec=None, mode=Mode.POSITIVE),
    queries(GRAPHQL_SDL, custom_scalars=GRAPHQL_SCALARS, codec=None, mode=Mode.NEGATIVE),
    mutations(GRAPHQL_SDL, custom_scalars=GRAPHQL_SCALARS, codec=None),
    st.text(s.any_characters, max_size=80),
    st.builds(_nested_input, st.integers(min_value=1, max_value=30_000)),
    st.builds(_aliases, st.integers(min_value=1, max_value=40)),
    st.builds(_deep_selection, st.integers(min_value=1, max_value=3000)),
    st.builds(lambda n: "{" * n, st.integers(min_value=1, max_value=60_000)),
)
graphql_payloads = st.one_of(
    st.builds(lambda doc: {"query": doc}, graphql_documents),
    st.builds(lambda doc: {"query": doc}, graphql_documents),
    st.builds(lambda v: {"query": SEARCH_DOCUMENT, "variables": v}, search_variables),
    st.builds(lambda v: {"query": SEARCH_DOCUMENT, "variables": v}, search_variables),
    st.fixed_dictionaries(
        {}, optional={"query": s.json_values, "variables": s.json_values, "operationName": s.json_values}
    ),
    st.lists(st.builds(lambda doc: {"query": doc}, graphql_documents), max_size=3),
    s.json_values,
)
graphql_bodies = st.one_of(
    graphql_payloads.map(s.dumps),
    graphql_payloads.map(s.dumps),
    graphql_payloads.map(s.dumps),
    s.deep_bodies,
    st.binary(max_size=120),
)


def _graphql_errors_are_clear(data: Any, context: str) -> str:
    """Every error has a message and none is an internal error; returns the first error code (or "data")."""
    errors = data.get("errors") if isinstance(data, dict) else None
    if not errors:
        assert isinstance(data, dict) and "data" in data, f"{context}: neither data nor errors: {data!r:.300}"
        return "data"
    for error in errors:
        assert error.get("message"), f"{context}: an error without a message: {error!r:.300}"
        code = (error.get("extensions") or {}).get("code")
        assert code != "INTERNAL_ERROR", f"{context}: internal error: {error!r:.500}"
    return str((errors[0].get("extensions") or {}).get("code") or "GRAPHQL_VALIDATION")


def test_graphql_answers_every_input_clearly() -> None:
    # given
    fuzz_corpus()
    users = get_user_model().objects
    clients = {"anonymous": Client()}
    for name, staff in (("user", False), ("staff", True)):
        clients[name] = Client()
        clients[name].force_login(users.create_user(f"fuzz-{name}", password="pw-fuzz-123", is_staff=staff))
    statuses: Counter[str] = Counter()
    started = time.perf_counter()

    def one(body: str | bytes, who: str, method: str, content_type: str) -> None:
        client = clients[who]
        context = f"{who} {method} /graphql {str(body)[:300]!r}"
        # when
        if method == "GET":
            text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
            response = client.generic(
                "GET", "/graphql", QUERY_STRING="query=" + _encode(text), HTTP_ACCEPT="application/json"
            )
        else:
            response = client.generic(
                method, "/graphql", data=body, content_type=content_type, HTTP_ACCEPT="application/json"
            )
        # then
        status = assert_clear_answer(response, context=context, json_errors=False)
        text = body_text(response)
        if status != 405:
            data = json.loads(text)
            kind = _graphql_errors_are_clear(data, context)
        else:
            kind = "not_allowed"
        statuses[f"{status} {kind}"] += 1

    @s.fuzz_settings()
    @given(
        batch=s.batches(
            graphql_bodies,
            st.sampled_from(sorted(clients)),
            st.sampled_from(["POST"] * 10 + ["GET", "PUT"]),
            st.sampled_from(["application/json"] * 10 + ["application/graphql", "text/plain"]),
        )
    )
    def check(batch: list[tuple[Any, ...]]) -> None:
        for args in batch:
            one(*args)

    check()
    assert sum(statuses.values()) >= MIN_SENT
    assert statuses["200 data"] > TARGET // 20, "too few operations executed"
    record(
        "fuzz.graphql", _summary(statuses, started, endpoint="/graphql (hypothesis-graphql + hostile bodies)")
    )


# --- MCP: tool arguments (direct calls) and JSON-RPC bodies (the /mcp view) -----------------------------

TOOL_FIELDS = {spec.name: tuple(spec.args_model.model_fields) for spec in TOOLS}
mcp_argument_values = st.one_of(
    s.query_text,
    s.short_text,
    s.huge_ints,
    s.odd_floats,
    st.booleans(),
    st.none(),
    s.cursors,
    s.json_values,
    st.sampled_from(["c1", "i1", "c0", "i99999999999999999999", "x1", "c-1", "item", "chunk", "ITEM"]),
)


# Filled by the MCP test once its corpus exists (ids depend on what ran before), read lazily.
REAL_ITEM_IDS: list[int] = []
REAL_CHUNK_IDS: list[int] = []
real_item_ids = st.deferred(lambda: st.sampled_from(REAL_ITEM_IDS or [1]))
real_chunk_ids = st.deferred(lambda: st.sampled_from(REAL_CHUNK_IDS or [1]))
small_ids = st.one_of(real_item_ids, real_item_ids, st.integers(min_value=-2, max_value=40), s.huge_ints)
# Per tool argument: mostly well-typed values (valid or out of range), sometimes anything at all.
TYPED_ARGUMENTS: dict[str, st.SearchStrategy[Any]] = {
    "query": s.query_text,
    "type": st.one_of(st.sampled_from(["guide", "policy", "checklist", "qa"]), s.short_text),
    "scope": st.one_of(st.just("pricing"), s.short_text),
    "granularity": st.one_of(st.sampled_from(["item", "chunk"]), s.short_text),
    "similar_to": small_ids,
    "limit": st.one_of(st.integers(min_value=-1, max_value=35), s.huge_ints),
    "content_item_id": small_ids,
    "overdue_review": st.one_of(st.none(), st.booleans()),
    "review_due_within_days": st.one_of(st.integers(min_value=-1, max_value=400), s.huge_ints),
    "include_superseded": st.booleans(),
    "language": st.one_of(st.sampled_from(["en", "fr", "ar"]), s.short_text),
    "preset": st.one_of(small_ids, s.short_text),
    "cursor": s.cursors,
    "item_id": small_ids,
    "match_id": st.one_of(
        real_chunk_ids.map(lambda n: f"c{n}"),
        real_item_ids.map(lambda n: f"i{n}"),
        st.builds(lambda k, n: f"{k}{n}", st.sampled_from("ci"), small_ids),
        s.short_text,
    ),
    "neighbours": st.integers(min_value=-2, max_value=6),
    "max_chars": st.one_of(st.integers(min_value=400, max_value=9000), s.huge_ints),
}


@st.composite
def tool_calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """Mostly well-formed calls of real tools (find most often), with hostile values; sometimes anything."""
    names = ["find"] * 6 + ["read", "read", "quality", "list_presets"]
    junk = draw(st.integers(min_value=0, max_value=9)) == 0
    name = draw(s.short_text) if junk else draw(st.sampled_from(names))
    fields = TOOL_FIELDS.get(name) or ("query",)
    keys = draw(st.lists(st.sampled_from(fields), max_size=4, unique=True))
    if junk or draw(st.integers(min_value=0, max_value=9)) == 0:
        keys.append(draw(s.short_text))
    arguments = {
        key: draw(TYPED_ARGUMENTS[key] if not junk and key in TYPED_ARGUMENTS else mcp_argument_values)
        for key in keys
    }
    if name == "find" and not junk and "similar_to" not in arguments:
        arguments["query"] = draw(s.query_text)
    return name, arguments


def _plain(text: str) -> bool:
    """MCP text is plain: no control characters other than newline and tab."""
    return not any(ord(ch) < 32 and ch not in "\n\t" or 0x7F <= ord(ch) <= 0x9F for ch in text)


def test_mcp_tool_arguments_answer_every_input_clearly() -> None:
    # given: anonymous callers and an all-content API key (latest corpus, drafts included)
    from search.models import Chunk

    REAL_ITEM_IDS[:] = [item.pk for item in fuzz_corpus()]
    REAL_CHUNK_IDS[:] = list(Chunk.objects.filter(item_id__in=REAL_ITEM_IDS).values_list("pk", flat=True))
    from accounts.api_keys import api_key_authenticate, api_key_create

    principals = {
        "anonymous": None,
        "api_key": api_key_authenticate(raw=api_key_create(name="fuzz agent").raw_key),
    }
    outcomes: Counter[str] = Counter()
    started = time.perf_counter()

    class _Request:
        def __init__(self, principal: Principal | None) -> None:
            if principal is not None:
                self.kb_principal = principal

    def one(call: tuple[str, dict[str, Any]], who: str) -> None:
        name, arguments = call
        token = django_request_ctx.set(_Request(principals[who]))
        # when
        try:
            result = async_to_sync(mcp_server.call_tool)(name, arguments)
        finally:
            django_request_ctx.reset(token)
        # then
        text = "\n".join(part.text for part in result.content)
        context = f"{who} {name}({json.dumps(arguments, default=str)[:300]})"
        assert text, f"{context}: empty answer"
        assert_no_leak(text, context)
        assert "unexpected error" not in text, f"{context}: {text}"
        assert _plain(text), f"{context}: control characters in {text[:300]!r}"
        if not result.isError:
            spec = next(spec for spec in TOOLS if spec.name == name)
            spec.result_model.model_validate(result.structuredContent)
        outcomes[
            f"{name if name in TOOL_FIELDS else 'unknown_tool'} {'error' if result.isError else 'ok'}"
        ] += 1

    @s.fuzz_settings()
    @given(batch=s.batches(tool_calls(), st.sampled_from(sorted(principals))))
    def check(batch: list[tuple[Any, ...]]) -> None:
        for args in batch:
            one(*args)

    check()
    assert sum(outcomes.values()) >= MIN_SENT
    assert outcomes["find ok"] > TARGET // 20, "too few find calls reached the engine"
    record(
        "fuzz.mcp_tools",
        _summary(
            outcomes,
            started,
            endpoint="MCP tools/call arguments (find, read, quality, list_presets), in process",
        ),
    )


jsonrpc_messages = st.one_of(
    st.fixed_dictionaries(
        {
            "jsonrpc": st.one_of(st.just("2.0"), s.json_values),
            "method": st.one_of(
                st.sampled_from(["tools/call", "tools/list", "initialize", "ping", "resources/list", "nope"]),
                s.short_text,
            ),
        },
        optional={
            "id": st.one_of(s.huge_ints, s.short_text, st.none(), s.json_values),
            "params": st.one_of(
                tool_calls().map(lambda call: {"name": call[0], "arguments": call[1]}), s.json_values
            ),
        },
    ),
    s.json_values,
)
jsonrpc_bodies = st.one_of(
    jsonrpc_messages.map(s.dumps),
    jsonrpc_messages.map(s.dumps),
    st.lists(jsonrpc_messages, max_size=3).map(s.dumps),
    s.deep_bodies,
    st.binary(max_size=100),
)


def test_mcp_endpoint_answers_every_body_clearly() -> None:
    # given
    fuzz_corpus()
    client = Client()
    statuses: Counter[int] = Counter()
    started = time.perf_counter()

    def one(body: str | bytes, accept: str, authorization: str | None) -> None:
        headers = {"Accept": accept}
        if authorization is not None:
            headers["Authorization"] = authorization.encode("utf-8", "surrogatepass").decode("latin-1")
        # when
        response = client.post("/mcp", data=body, content_type="application/json", headers=headers)
        # then
        statuses[
            assert_clear_answer(response, context=f"POST /mcp {str(body)[:300]!r}", json_errors=False)
        ] += 1

    authorizations = st.one_of(
        st.none(),
        st.none(),
        st.none(),
        st.sampled_from(["Bearer x", "Basic eA==", "Bearer kb_0000000a_" + "x" * 40]),
        s.short_text.filter(lambda v: "\n" not in v and "\r" not in v),
    )

    @s.fuzz_settings(inputs=HTTP_TARGET)
    @given(
        batch=s.batches(
            jsonrpc_bodies,
            st.sampled_from(["application/json, text/event-stream"] * 5 + ["text/html", ""]),
            authorizations,
        )
    )
    def check(batch: list[tuple[Any, ...]]) -> None:
        for args in batch:
            one(*args)

    check()
    assert sum(statuses.values()) >= HTTP_TARGET * 0.95
    record("fuzz.mcp_http", _summary(statuses, started, endpoint="POST /mcp JSON-RPC bodies and headers"))


# --- manage.py kb_search ------------------------------------------------------------------------------

kb_search_options = st.lists(
    st.one_of(
        st.tuples(st.just("--limit"), st.one_of(s.huge_ints.map(str), s.short_text)),
        st.tuples(st.just("--threshold"), st.one_of(s.odd_floats.map(str), s.short_text)),
        st.tuples(st.just("--domain"), s.short_text),
        st.tuples(
            st.sampled_from(["--corpus", "--granularity", "--mode", "--env"]),
            st.one_of(
                st.sampled_from(
                    ["live", "latest", "item", "chunk", "hybrid", "lexical", "vector", "dev", "prod"]
                ),
                s.short_text,
            ),
        ),
        st.tuples(
            st.sampled_from(["--json", "--full", "--include-superseded", "--exclude-superseded", "--bogus"])
        ),
    ),
    max_size=4,
).map(lambda groups: [part for group in groups for part in group])


def test_kb_search_answers_every_input_clearly() -> None:
    # given
    fuzz_corpus()
    outcomes: Counter[str] = Counter()
    started = time.perf_counter()

    def one(query: str, options: list[str], as_json: bool) -> None:
        argv = [query, *options, *(["--json"] if as_json else [])]
        out, err = StringIO(), StringIO()
        # when
        try:
            call_command("kb_search", *argv, stdout=out, stderr=err)
        except CommandError as exc:
            # then: a one-line message saying what is wrong
            message = str(exc)
            assert message and "\n" not in message.strip() or message.startswith("Error:"), message
            assert_no_leak(message, f"kb_search {argv!r:.300}")
            outcomes["refused"] += 1
            return
        text = out.getvalue()
        assert_no_leak(text + err.getvalue(), f"kb_search {argv!r:.300}")
        if "--json" in argv:
            data = json.loads(text)
            assert data["count"] >= len(data["results"])
        outcomes["answered"] += 1

    @s.fuzz_settings()
    @given(batch=s.batches(s.query_text, kb_search_options, st.booleans()))
    def check(batch: list[tuple[Any, ...]]) -> None:
        for args in batch:
            one(*args)

    check()
    assert sum(outcomes.values()) >= MIN_SENT
    assert outcomes["answered"] > TARGET // 20
    record(
        "fuzz.kb_search",
        _summary(
            outcomes, started, endpoint="manage.py kb_search (call_command)", max_query_chars=MAX_QUERY_CHARS
        ),
    )
