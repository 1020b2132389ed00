"""End to end: the official MCP client over real streamable HTTP against uvicorn serving the product."""

from __future__ import annotations

import re
from typing import Any

import pytest
from mcp.types import CallToolResult

from search.federation import peers
from tests.mcp_api.client import mcp_call, mcp_calls, mcp_find_ids, mcp_session, run
from tests.mcp_api.conftest import Corpus
from tests.support import fake_peer

pytestmark = pytest.mark.django_db(transaction=True)

FIND_RESULT_KEYS = {
    "query",
    "count",
    "results",
    "content_item_id",
    "overdue_review_filter",
    "review_due_within_days_filter",
    "partial_match",
    "degraded",
    "next_cursor",
    "suggestion",
    "threshold",
    "nearest",
    "sources",
}
HIT_KEYS = {
    "match_id",
    "item_id",
    "title",
    "url",
    "toc_path",
    "snippet",
    "match_offsets",
    "lanes",
    "lane_ranks",
    "missing_words",
    "score",
    "confidence",
    "updated_at",
    "review_status",
    "source",
    "sources",
}


def text_of(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.isError, text_of(result)
    assert result.structuredContent is not None
    return result.structuredContent


def ids(result: CallToolResult) -> list[int]:
    return [hit["item_id"] for hit in ok(result)["results"]]


def test_initialize_then_list_tools_gives_exactly_the_fixed_tools(mcp_base_url: str) -> None:
    # given / when
    async def go() -> tuple[Any, Any]:
        async with mcp_session(mcp_base_url) as session:
            return session.get_server_capabilities(), await session.list_tools()

    capabilities, tools = run(go)
    # then
    assert capabilities is not None and capabilities.tools is not None
    assert [t.name for t in tools.tools] == ["find", "read", "quality", "list_presets", "follow_news"]
    for tool in tools.tools:
        schema = tool.inputSchema
        assert schema["additionalProperties"] is False
        assert all(prop.get("description") for prop in schema["properties"].values()), tool.name
        assert tool.outputSchema and tool.outputSchema["type"] == "object"
        assert tool.annotations and tool.annotations.readOnlyHint is True
    find = tools.tools[0]
    assert find.inputSchema["properties"]["limit"]["maximum"] == 30
    assert set(tools.tools[0].outputSchema["properties"]) == FIND_RESULT_KEYS


def test_find_anonymous_item_granularity_returns_markdown_and_structured_content(
    mcp_base_url: str, corpus: Corpus
) -> None:
    # when
    result = mcp_call(mcp_base_url, "find", {"query": "pricing"})
    # then: structured payload exactly as documented, filters not given are null
    data = ok(result)
    assert set(data) == FIND_RESULT_KEYS
    assert data["query"] == "pricing"
    assert data["content_item_id"] is None
    assert data["overdue_review_filter"] is None
    assert data["review_due_within_days_filter"] is None
    assert data["degraded"] == []
    found = {hit["item_id"] for hit in data["results"]}
    assert {corpus.guide.pk, corpus.policy.pk, corpus.with_draft.pk} <= found
    # anonymous never sees drafts, restricted or superseded items
    assert not found & {
        corpus.staff_only.pk,
        corpus.group_only.pk,
        corpus.draft_only.pk,
        corpus.superseded.pk,
    }
    assert data["count"] == len(data["results"])
    for hit in data["results"]:
        assert set(hit) == HIT_KEYS
        assert hit["match_id"] == f"i{hit['item_id']}"
        assert "<mark" not in hit["snippet"] and "&lt;" not in hit["snippet"]
        for offset in hit["match_offsets"]:
            assert hit["snippet"][offset["start"] : offset["end"]].lower().startswith("pric")
    # and the Markdown names the ids inside untrusted document blocks
    markdown = text_of(result)
    assert len(markdown) <= 10_000
    assert "untrusted" in markdown
    assert f'<document match_id="i{corpus.guide.pk}" item_id="{corpus.guide.pk}">' in markdown
    assert markdown.count("<document ") == markdown.count("</document>") == len(data["results"])


def test_find_chunk_granularity_inside_one_document(mcp_base_url: str, corpus: Corpus) -> None:
    # when
    data = ok(
        mcp_call(
            mcp_base_url,
            "find",
            {
                "query": "pricing rule",
                "granularity": "chunk",
                "content_item_id": corpus.guide.pk,
                "limit": 30,
            },
        )
    )
    # then: several passages of the one item, each with its own chunk match_id and section
    assert data["content_item_id"] == corpus.guide.pk
    assert len(data["results"]) >= 3
    assert {hit["item_id"] for hit in data["results"]} == {corpus.guide.pk}
    match_ids = [hit["match_id"] for hit in data["results"]]
    assert all(re.fullmatch(r"c\d+", m) for m in match_ids) and len(set(match_ids)) == len(match_ids)
    assert {"Day rates", "Fixed fees"} <= {hit["toc_path"] for hit in data["results"]}


def test_find_filters_type_scope_language_superseded(mcp_base_url: str, corpus: Corpus) -> None:
    # when
    policy, scoped, french, with_superseded, default = mcp_calls(
        mcp_base_url,
        [
            ("find", {"query": "pricing", "type": "policy"}),
            ("find", {"query": "invoice", "scope": "finance"}),
            ("find", {"query": "tarification", "language": "fr"}),
            ("find", {"query": "outdated pricing advice", "include_superseded": True}),
            ("find", {"query": "outdated pricing advice"}),
        ],
    )
    # then
    assert ids(policy) == [corpus.policy.pk]
    assert ids(scoped) == [corpus.hidden_chars.pk]
    assert ids(french) == [corpus.french.pk]
    assert corpus.superseded.pk in ids(with_superseded)
    assert corpus.superseded.pk not in ids(default)


def test_find_review_filters(mcp_base_url: str, corpus: Corpus) -> None:
    # when
    overdue, not_overdue, due_soon, due_tomorrow = mcp_calls(
        mcp_base_url,
        [
            ("find", {"query": "pricing", "overdue_review": True}),
            ("find", {"query": "pricing", "overdue_review": False}),
            ("find", {"query": "pricing", "review_due_within_days": 30}),
            ("find", {"query": "pricing", "review_due_within_days": 1}),
        ],
    )
    # then
    assert ids(overdue) == [corpus.policy.pk]
    assert ok(overdue)["overdue_review_filter"] is True
    assert corpus.policy.pk not in ids(not_overdue) and corpus.guide.pk in ids(not_overdue)
    assert ok(not_overdue)["overdue_review_filter"] is False
    assert set(ids(due_soon)) == {corpus.guide.pk, corpus.policy.pk}
    assert ok(due_soon)["review_due_within_days_filter"] == 30
    assert ids(due_tomorrow) == [corpus.policy.pk]


def test_find_similar_to_without_query(mcp_base_url: str, corpus: Corpus) -> None:
    # when
    similar, hidden = mcp_calls(
        mcp_base_url,
        [
            ("find", {"similar_to": corpus.policy.pk}),
            ("find", {"similar_to": corpus.staff_only.pk}),
        ],
    )
    # then: related items, never the item itself; an item the caller cannot read is refused by name
    data = ok(similar)
    assert data["query"] is None
    assert ids(similar)[0] == corpus.related.pk and corpus.policy.pk not in ids(similar)
    assert "vector" in data["results"][0]["lanes"]
    # each hit explains itself as on the site: its rank in every lane that found it
    assert all(set(r["lane_ranks"]) == set(r["lanes"]) for r in data["results"])
    assert data["results"][0]["lane_ranks"]["vector"] == 1
    assert "vector #1" in text_of(similar)
    assert hidden.isError and "similar_to" in text_of(hidden)


def test_find_pages_with_cursor(mcp_base_url: str, corpus: Corpus) -> None:
    # given
    args = {"query": "pricing", "limit": 2}
    first = ok(mcp_call(mcp_base_url, "find", args))
    assert first["next_cursor"]
    # when
    second, everything, wrong = mcp_calls(
        mcp_base_url,
        [
            ("find", {**args, "cursor": first["next_cursor"]}),
            ("find", {"query": "pricing", "limit": 30}),
            ("find", {"query": "other words", "limit": 2, "cursor": first["next_cursor"]}),
        ],
    )
    # then
    page_ids = [h["item_id"] for h in first["results"]] + ids(second)
    assert page_ids == ids(everything)[:4]
    assert f'cursor="{first["next_cursor"]}"' in text_of(mcp_call(mcp_base_url, "find", args))
    assert wrong.isError and "cursor" in text_of(wrong)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"query": "pricing", "limit": 31}, "limit"),
        ({"query": "pricing", "limit": 0}, "limit"),
        ({"query": "pricing", "review_due_within_days": 366}, "review_due_within_days"),
        ({"query": "pricing", "review_due_within_days": 0}, "review_due_within_days"),
        ({"query": "pricing", "granularity": "page"}, "granularity"),
        ({"query": "pricing", "colour": "red"}, "colour"),
        ({"type": "guide"}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "x" * 2001}, "query"),
    ],
)
def test_find_invalid_arguments_are_validation_errors_naming_the_field(
    mcp_base_url: str, arguments: dict[str, Any], field: str
) -> None:
    # when
    result = mcp_call(mcp_base_url, "find", arguments)
    # then
    assert result.isError
    message = text_of(result)
    assert message.startswith("Invalid arguments for find:") or message.startswith("find: ")
    assert field in message
    assert "Traceback" not in message


def test_api_key_sees_drafts_and_restricted_items(mcp_base_url: str, corpus: Corpus, api_key: str) -> None:
    # when
    anonymous = mcp_find_ids(mcp_base_url, "pricing", limit=30)
    keyed = mcp_find_ids(mcp_base_url, "pricing", limit=30, api_key=api_key)
    # then
    assert corpus.draft_only.pk not in anonymous and corpus.draft_only.pk in keyed
    assert corpus.staff_only.pk not in anonymous and corpus.staff_only.pk in keyed
    assert corpus.group_only.pk in keyed
    # the draft text of a published item is searchable with the key only
    assert mcp_find_ids(mcp_base_url, "zebra deadline") == []
    assert mcp_find_ids(mcp_base_url, "zebra deadline", api_key=api_key) == [corpus.with_draft.pk]


def test_group_scoped_key_reads_its_groups_but_not_staff_items(mcp_base_url: str, corpus: Corpus) -> None:
    # given
    from django.contrib.auth.models import Group

    from accounts.api_keys import api_key_create

    raw = api_key_create(
        name="bid team bot", all_content=False, groups=[Group.objects.get(name="bid-team")]
    ).raw_key
    # when
    found = mcp_find_ids(mcp_base_url, "pricing", limit=30, api_key=raw)
    # then
    assert corpus.group_only.pk in found
    assert corpus.staff_only.pk not in found
    assert corpus.draft_only.pk in found  # keys read the latest corpus


def test_read_passage_item_and_pages(mcp_base_url: str, corpus: Corpus) -> None:
    # given: a chunk hit in the middle of the long guide
    hits = ok(
        mcp_call(
            mcp_base_url,
            "find",
            {"query": "discount pricing rule", "granularity": "chunk", "content_item_id": corpus.guide.pk},
        )
    )["results"]
    match_id = hits[0]["match_id"]
    # when
    passage, alone, whole, first_page = mcp_calls(
        mcp_base_url,
        [
            ("read", {"match_id": match_id, "neighbours": 1}),
            ("read", {"match_id": match_id, "neighbours": 0}),
            ("read", {"item_id": corpus.guide.pk, "max_chars": 8000}),
            ("read", {"item_id": corpus.guide.pk, "max_chars": 1000}),
        ],
    )
    # then: the passage is a slice of the body, wider with neighbours
    body = corpus.guide.live_revision.body
    p = ok(passage)
    assert p["scope"] == "passage" and p["match_id"] == match_id
    assert p["text"] in body and hits[0]["snippet"].strip("…")[:40] in p["text"]
    assert len(p["passage_chunk_ids"]) > len(ok(alone)["passage_chunk_ids"]) == 1
    # the whole item comes with its table of contents and metadata
    w = ok(whole)
    assert w["text"] == body and w["next_cursor"] is None and w["total_chars"] == len(body)
    assert [t["path"] for t in w["toc"]] == ["Day rates", "Fixed fees", "Discounts", "Payment terms"]
    assert w["metadata"]["content_type"] == "guide" and w["metadata"]["review_status"] == "due_soon"
    assert "Contents:" in text_of(whole) and "- Discounts" in text_of(whole)
    # and long text pages with a cursor until it is all read
    pages = [ok(first_page)]
    while pages[-1]["next_cursor"]:
        pages.append(
            ok(
                mcp_call(
                    mcp_base_url,
                    "read",
                    {"item_id": corpus.guide.pk, "max_chars": 1000, "cursor": pages[-1]["next_cursor"]},
                )
            )
        )
        assert len(pages) < 20
    assert "".join(p["text"] for p in pages) == body
    assert all(len(p["text"]) <= 1000 for p in pages)
    assert "cursor=" in text_of(first_page)


def test_read_respects_access_and_corpus(mcp_base_url: str, corpus: Corpus, api_key: str) -> None:
    # when
    draft, staff, live_text = mcp_calls(
        mcp_base_url,
        [
            ("read", {"item_id": corpus.draft_only.pk}),
            ("read", {"item_id": corpus.staff_only.pk}),
            ("read", {"item_id": corpus.with_draft.pk}),
        ],
    )
    keyed_draft, keyed_text = mcp_calls(
        mcp_base_url,
        [
            ("read", {"item_id": corpus.draft_only.pk}),
            ("read", {"match_id": f"i{corpus.with_draft.pk}"}),
        ],
        api_key=api_key,
    )
    # then
    assert draft.isError and "item_id" in text_of(draft)
    assert staff.isError
    assert "zebra" not in ok(live_text)["text"]
    assert ok(keyed_draft)["metadata"]["is_draft"] is True
    assert "zebra" in ok(keyed_text)["text"]


def test_read_of_a_draft_passage_is_refused_anonymously(
    mcp_base_url: str, corpus: Corpus, api_key: str
) -> None:
    # given: a chunk of the draft revision, found with a key
    hits = ok(mcp_call(mcp_base_url, "find", {"query": "zebra", "granularity": "chunk"}, api_key=api_key))[
        "results"
    ]
    # when
    anonymous = mcp_call(mcp_base_url, "read", {"match_id": hits[0]["match_id"]})
    # then
    assert anonymous.isError and "match_id" in text_of(anonymous)


def test_quality_returns_persisted_score_and_review_status(mcp_base_url: str, corpus: Corpus) -> None:
    # when
    quality, hidden, bad = mcp_calls(
        mcp_base_url,
        [
            ("quality", {"item_id": corpus.guide.pk}),
            ("quality", {"item_id": corpus.staff_only.pk}),
            ("quality", {}),
        ],
    )
    # then
    data = ok(quality)
    assert data["quality_score"] == pytest.approx(0.82)
    assert data["quality_breakdown"] == {"freshness": 0.9, "completeness": 0.7}
    assert data["review_status"] == "due_soon" and data["review_cadence_days"] == 90
    assert "Quality score: 0.8 (0 to 100" in text_of(quality) and "freshness" in text_of(quality)
    assert hidden.isError and "item_id" in text_of(hidden)
    assert bad.isError and "item_id" in text_of(bad)


def test_retrieved_text_is_cleaned_and_cannot_close_its_block(mcp_base_url: str, corpus: Corpus) -> None:
    # when
    result = mcp_call(mcp_base_url, "find", {"query": "invoice checklist"})
    read = mcp_call(mcp_base_url, "read", {"item_id": corpus.hidden_chars.pk})
    # then: no invisible or tag characters anywhere, offsets still point at the words
    hit = ok(result)["results"][0]
    invisible = re.compile("[\u200b\u202e\u202c\U000e0000-\U000e0fff]")
    for text in (hit["snippet"], hit["title"], text_of(result), ok(read)["text"], text_of(read)):
        assert not invisible.search(text)
    assert hit["title"] == "Invoice checklist"
    assert {hit["snippet"][o["start"] : o["end"]].lower() for o in hit["match_offsets"]} >= {
        "invoice",
        "checklist",
    }
    # the fake delimiter in the document is defused: exactly one real closing tag per block
    for markdown in (text_of(result), text_of(read)):
        assert markdown.count("</document>") == markdown.count("<document ")
        assert "‹/document>" in markdown


def test_list_presets_and_find_with_a_preset(mcp_base_url: str, corpus: Corpus) -> None:
    # given: the system presets (a transactional test starts from an empty database)
    from presets.system import system_presets_ensure

    system_presets_ensure()
    listed = ok(mcp_call(mcp_base_url, "list_presets", {}))["presets"]
    policies = next(p for p in listed if p["name"] == "Policies")
    # when
    by_name, by_id, overdue, overridden, unknown = mcp_calls(
        mcp_base_url,
        [
            ("find", {"query": "pricing", "preset": "policies"}),
            ("find", {"query": "pricing", "preset": policies["id"]}),
            ("find", {"query": "pricing", "preset": "Overdue for review"}),
            ("find", {"query": "pricing", "preset": "Overdue for review", "overdue_review": False}),
            ("find", {"query": "pricing", "preset": "no such preset"}),
        ],
    )
    # then
    assert {p["name"] for p in listed} >= {"Overdue for review", "Policies", "Case studies"}
    assert all(p["system"] for p in listed)
    assert ids(by_name) == ids(by_id) == [corpus.policy.pk]
    assert ids(overdue) == [corpus.policy.pk]
    assert ok(overdue)["overdue_review_filter"] is True  # the filter in effect, from the preset
    assert corpus.policy.pk not in ids(overridden) and ok(overridden)["overdue_review_filter"] is False
    assert unknown.isError and "preset" in text_of(unknown) and "Policies" in text_of(unknown)


def test_find_about_something_the_knowledge_base_does_not_hold_says_nothing_matches(
    mcp_base_url: str, corpus: Corpus
) -> None:
    # given a made-up word no item holds, asked anonymously at find's default threshold
    result = mcp_call(mcp_base_url, "find", {"query": "zanzibarquokka"})
    # then it is an answer, not an error: no results, and the nearest items labelled as not matching
    data = ok(result)
    assert data["count"] == 0 and data["results"] == []
    assert data["threshold"] == 0.3
    assert 1 <= len(data["nearest"]) <= 3
    assert all(n["matches"] is False and n["confidence"] < 0.3 for n in data["nearest"])
    text = text_of(result)
    assert "No item in the knowledge base matches this query" in text
    assert "do NOT match" in text


def test_find_with_threshold_zero_returns_the_candidates_a_made_up_word_only_comes_near(
    mcp_base_url: str, corpus: Corpus
) -> None:
    data = ok(mcp_call(mcp_base_url, "find", {"query": "zanzibarquokka", "threshold": 0}))
    assert data["count"] > 0 and data["nearest"] == []
    assert all(0.0 <= hit["confidence"] < 0.3 for hit in data["results"])


def test_find_a_word_only_a_staff_item_holds_gives_an_anonymous_agent_nothing_and_no_leak(
    mcp_base_url: str, corpus: Corpus, api_key: str
) -> None:
    # given a word only the staff-only item holds ("plutoniumwombat" in the fixture)
    anonymous = ok(mcp_call(mcp_base_url, "find", {"query": "plutoniumwombat"}))
    assert anonymous["count"] == 0
    assert corpus.staff_only.pk not in {n["item_id"] for n in anonymous["nearest"]}
    # while a key that may read it finds it, confidently
    keyed = ok(mcp_call(mcp_base_url, "find", {"query": "plutoniumwombat"}, api_key=api_key))
    assert [hit["item_id"] for hit in keyed["results"]][:1] == [corpus.staff_only.pk]
    assert keyed["results"][0]["confidence"] >= 0.3


def test_find_rejects_a_threshold_outside_0_to_1(mcp_base_url: str, corpus: Corpus) -> None:
    result = mcp_call(mcp_base_url, "find", {"query": "pricing", "threshold": 1.5})
    assert result.isError
    assert "threshold" in text_of(result)


def test_find_with_sources_merges_a_peer_and_reports_a_broken_one(mcp_base_url: str, corpus: Corpus) -> None:
    # given two public peers: one answers a hit (its title laden with HTML), one answers HTTP 500
    with fake_peer.serving() as server:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        peers.peer_add(name="friendly", base_url=f"{base}/ok", api_key="kb_00000001_" + "k" * 43, public=True)
        peers.peer_add(name="broken", base_url=f"{base}/fail", api_key="kb_00000002_" + "k" * 43, public=True)
        # when an anonymous agent searches everything, and then only here
        result = mcp_call(mcp_base_url, "find", {"query": "pricing", "sources": "all", "threshold": 0})
        local_only = ok(mcp_call(mcp_base_url, "find", {"query": "pricing"}))
    # then the peer's hit is merged by confidence and says where it comes from; the broken peer is reported
    data = ok(result)
    assert {s["name"]: s["status"] for s in data["sources"]} == {"local": "ok", "friendly": "ok", "broken": "error"}
    first = data["results"][0]
    assert (first["source"], first["item_id"], first["match_id"]) == ("friendly", None, None)
    assert first["url"] == "https://evil.example/p" and first["confidence"] == 0.99
    assert any(hit["source"] == "local" and hit["item_id"] for hit in data["results"])
    text = text_of(result)
    assert "Knowledge bases asked: local ok" in text and "broken error" in text
    assert '<document source="friendly">' in text and "untrusted" in text
    # and without sources nothing but this knowledge base is asked
    assert local_only["sources"] == [] and all(hit["source"] == "local" for hit in local_only["results"])


def test_find_with_sources_refuses_an_unknown_peer_and_a_cursor(mcp_base_url: str, corpus: Corpus) -> None:
    unknown = mcp_call(mcp_base_url, "find", {"query": "pricing", "sources": ["local", "nowhere"]})
    assert unknown.isError and "Unknown source 'nowhere'" in text_of(unknown)
    paged = mcp_call(mcp_base_url, "find", {"query": "pricing", "sources": "all", "cursor": "abc"})
    assert paged.isError and "cursor" in text_of(paged)
