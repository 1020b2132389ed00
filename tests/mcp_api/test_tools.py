"""The tools in-process: degradation, error handling and the Markdown size budget."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from mcp.types import CallToolResult

from mcp_api import tools
from mcp_api.schemas import FindArgs, FindHit, FindResult, MatchOffset, ReadArgs
from mcp_api.server import mcp_server
from search.embeddings import providers
from search.principal import ANONYMOUS, Principal
from search.types import Hit, Span
from tests.factories import build, make_item
from tests.mcp_api.conftest import Corpus

KEY = Principal(kind="api_key", all_content=True, api_key_id=1)


def call(name: str, arguments: dict[str, Any]) -> CallToolResult:
    """``KbMCP.call_tool`` as the transport calls it; the tool runs in asgiref's sync thread."""

    async def run() -> CallToolResult:
        try:
            return await mcp_server.call_tool(name, arguments)
        finally:  # that thread's connection would keep the test database from being dropped
            await sync_to_async(connections.close_all)()

    return anyio.run(run)


def text_of(result: CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


@pytest.mark.django_db
def test_embedding_failure_is_not_an_error_but_degraded_lexical_results(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given: the embedding provider is down
    make_item(title="Tender checklist", body="Checklist for tender submissions.")
    build()

    def broken(texts: list[str]) -> list[list[float]]:
        raise ConnectionError("provider down")

    monkeypatch.setattr(providers.get_provider(), "embed", broken)
    # when
    output = tools.find_tool(FindArgs(query="tender checklist"), ANONYMOUS)
    # then
    assert isinstance(output.structured, FindResult)
    assert output.structured.degraded == ["embedding_unavailable"]
    assert [hit.title for hit in output.structured.results] == ["Tender checklist"]
    assert output.structured.results[0].lanes == ["lexical"]
    assert "keyword matches only" in output.markdown


def test_unexpected_failure_is_one_helpful_line_with_nothing_internal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given
    def explode(*, query: Any) -> Any:
        raise RuntimeError("psycopg.OperationalError: connection to 10.0.0.5 refused")

    monkeypatch.setattr(tools, "retrieve", explode)
    # when
    result = call("find", {"query": "anything"})
    # then
    assert result.isError is True
    message = text_of(result)
    assert message.startswith("Search failed: ") and message.endswith("Try simplifying your query.")
    assert "\n" not in message and "psycopg" not in message and "10.0.0.5" not in message


def test_validation_error_names_each_field_and_unknown_tool_is_an_error() -> None:
    # when
    bad = call("find", {"query": "x", "limit": 31, "colour": "red", "sort": "new"})
    unknown = call("delete_everything", {})
    missing = call("read", {})
    # then
    assert bad.isError
    assert all(field in text_of(bad) for field in ("limit:", "colour: unknown argument", "sort: unknown argument"))
    assert unknown.isError and "Available tools: find, read, quality, list_presets, follow_news" in text_of(unknown)
    assert missing.isError and "item_id or match_id" in text_of(missing)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"scope": "x" * 121}, "find: scope has a value 121 characters long; shorten it to 120 or fewer."),
        ({"type": "x" * 121}, "find: type has a value 121 characters long; shorten it to 120 or fewer."),
        ({"review_due_within_days": 400}, "find: review_due_within_days must be between 1 and 365 (got 400)."),
        ({"language": "english-uk"},
         "find: language is 10 characters long; send a language code of at most 8 (en, fr, ar)."),
        ({"scope": "a\x00b"},
         "find: scope holds a NUL byte or an unpaired surrogate character; remove it and send plain text."),
    ],
)
def test_filter_limits_are_the_engines_in_its_words_under_finds_names(
    arguments: dict[str, Any], message: str
) -> None:
    # when a filter argument is past the one schema's limits (search/filters.py)
    result = call("find", {"query": "pricing", **arguments})
    # then find refuses it as every surface does, naming the argument the agent sent
    assert result.isError
    assert text_of(result) == message


def test_the_input_schema_advertises_the_engines_filter_limits() -> None:
    # when
    schema = FindArgs.model_json_schema()["properties"]
    # then the limits come from search/filters.py
    assert schema["scope"]["maxLength"] == schema["type"]["maxLength"] == 120
    assert schema["language"]["maxLength"] == 8
    assert (schema["review_due_within_days"]["minimum"], schema["review_due_within_days"]["maximum"]) == (1, 365)


@pytest.mark.django_db(transaction=True)
def test_results_carry_markdown_text_and_structured_content(corpus: Corpus) -> None:
    # when: through the server object, as an MCP request would
    result = call("find", {"query": "pricing approval"})
    # then
    assert not result.isError
    assert result.structuredContent and result.structuredContent["results"]
    assert text_of(result).startswith('## find: "pricing approval"')


def _hit(i: int) -> FindHit:
    return FindHit(
        match_id=f"c{i}",
        item_id=i,
        title=f"Title {i}",
        url=f"/items/t{i}",
        toc_path="A > B",
        snippet="word " * 96,
        match_offsets=[MatchOffset(start=0, end=4)],
        lanes=["lexical"],
        score=0.5,
        confidence=0.8,
        updated_at="2025-01-01T00:00:00+00:00",
        review_status="ok",
    )


def test_markdown_stays_under_10000_characters_and_says_how_to_get_the_rest() -> None:
    # given: a full page of 30 long passages
    found = FindResult(
        query="word",
        count=90,
        results=[_hit(i) for i in range(1, 31)],
        content_item_id=None,
        overdue_review_filter=None,
        review_due_within_days_filter=None,
        partial_match=False,
        degraded=[],
        next_cursor="abc",
    )
    # when
    markdown = tools.find_markdown(FindArgs(query="word", limit=30), found)
    # then
    assert len(markdown) <= 10_000
    shown = markdown.count("<document ")
    assert 0 < shown < 30
    assert f"{shown} of 30 results on this page are shown" in markdown
    assert f"limit={shown}" in markdown and 'cursor="abc"' in markdown


def test_match_id_is_chunk_for_chunk_hits_and_item_otherwise() -> None:
    # given
    hit = Hit(
        item_id=7,
        external_id="x",
        slug="x",
        title="T",
        url="/items/x",
        content_type="guide",
        primary_domain="",
        language="en",
        updated_at=datetime(2025, 1, 1, tzinfo=UTC),
        review_status="ok",
        score=1.0,
        lanes=("lexical",),
        lane_ranks={"lexical": 1},
        chunk_id=42,
        toc_path="",
        passage="a\u200bb word",
        passage_spans=(Span(4, 8),),
        title_spans=(),
    )
    # when / then
    assert tools.match_id_of(hit, "chunk") == "c42"
    assert tools.match_id_of(hit, "item") == "i7"
    converted = tools.find_hit(hit, "chunk")
    assert converted.snippet == "ab word"
    assert converted.snippet[converted.match_offsets[0].start : converted.match_offsets[0].end] == "word"


@pytest.mark.django_db
def test_read_cursor_belongs_to_one_target(corpus: Corpus) -> None:
    # given
    first = tools.read_tool(ReadArgs(item_id=corpus.guide.pk, max_chars=500), ANONYMOUS).structured
    # when / then: the cursor continues the same item
    second = tools.read_tool(
        ReadArgs(item_id=corpus.guide.pk, max_chars=500, cursor=first.next_cursor), ANONYMOUS
    )
    assert second.structured.offset == first.offset + len(first.text)
    # and is refused for another one
    from search.errors import InvalidCursor

    with pytest.raises(InvalidCursor):
        tools.read_tool(ReadArgs(item_id=corpus.policy.pk, cursor=first.next_cursor), ANONYMOUS)


@pytest.mark.django_db
def test_key_principal_reads_latest_corpus(corpus: Corpus) -> None:
    # when
    anonymous = tools.read_tool(ReadArgs(item_id=corpus.with_draft.pk), ANONYMOUS).structured
    keyed = tools.read_tool(ReadArgs(item_id=corpus.with_draft.pk), KEY).structured
    # then
    assert tools.corpus_of(ANONYMOUS) == "live" and tools.corpus_of(KEY) == "latest"
    assert "zebra" not in anonymous.text and anonymous.metadata["is_draft"] is False
    assert "zebra" in keyed.text and keyed.metadata["is_draft"] is True


def test_read_markdown_keeps_the_whole_text_page_and_trims_a_long_table_of_contents() -> None:
    # given: the largest page and a very long table of contents
    from mcp_api.schemas import READ_MAX_CHARS, ReadResult, TocItem

    text = ("lorem ipsum " * 1000)[:READ_MAX_CHARS]
    result = ReadResult(
        item_id=1,
        match_id=None,
        scope="item",
        title="T" * 500,
        url="/items/t",
        metadata={
            "content_type": "guide",
            "domain": "d",
            "language": "en",
            "updated_at": "2025-01-01",
            "review_status": "ok",
            "is_draft": False,
            "revision": 1,
            "superseded_by_item_id": None,
        },
        toc=[TocItem(path=f"Section {i} " + "x" * 80, level=1, char_start=i) for i in range(200)],
        passage_chunk_ids=[],
        text=text,
        offset=0,
        total_chars=20_000,
        next_cursor="cur",
    )
    # when
    markdown = tools.read_markdown(result, len(text))
    # then
    assert len(markdown) <= 10_000
    assert text in markdown and 'cursor="cur"' in markdown
    assert "more sections" in markdown


@pytest.mark.django_db
def test_agents_never_receive_closed_material_placeholders() -> None:
    # given an item the site (and GraphQL, when asked) would show anonymous visitors as closed material
    make_item(title="Rate card 2026", body="Members only.", visibility="signed_in", allow_closed_placeholder=True)
    make_item(title="Rate card public", body="Public rates.")
    build()
    # when an anonymous agent searches its title
    output = tools.find_tool(FindArgs(query="rate card"), ANONYMOUS)
    # then only what it may read comes back, and nothing of the closed item, not even its title
    assert isinstance(output.structured, FindResult)
    assert [hit.title for hit in output.structured.results] == ["Rate card public"]
    assert "Rate card 2026" not in output.markdown
    # and find has no argument that would ask for placeholders
    assert not any("closed" in name for name in FindArgs.model_fields)
