"""Reports over the query log, and the popular topics the browse dropdown shows."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.test import override_settings
from django.utils import timezone

from analytics import selectors, services
from analytics.models import ContentGap, QueryLog
from search.models import Synonym
from search.principal import ANONYMOUS, Principal
from search.types import Hit, RetrievalQuery, RetrievalResult

pytestmark = pytest.mark.django_db


def user(n: int) -> Principal:
    return Principal(kind="user", user_id=n)


def hits(*ids: int) -> RetrievalResult:
    found = tuple(
        Hit(
            item_id=i,
            external_id=f"x{i}",
            slug=f"s{i}",
            title="t",
            url="/",
            content_type="guide",
            primary_domain="",
            language="en",
            updated_at=timezone.now(),
            review_status="ok",
            score=1.0,
            lanes=("lexical",),
            lane_ranks={"lexical": 1},
            chunk_id=None,
            toc_path="",
            passage="",
            passage_spans=(),
            title_spans=(),
        )
        for i in ids
    )
    return RetrievalResult(hits=found, total=len(found), timings_ms={"total_ms": 10.0 * (len(ids) + 1)})


NOTHING = RetrievalResult(total=0, timings_ms={"total_ms": 5.0, "lexical_ms": 2.0})


def record(
    text: str,
    principal: Principal,
    result: RetrievalResult = NOTHING,
    *,
    surface: str = "browse",
    at: Any = None,
    addr: str = "10.0.0.1",
    **query: Any,
) -> QueryLog:
    row = services.querylog_entry(
        query=RetrievalQuery(text=text, principal=principal, **query),
        result=result,
        corpus="live",
        surface=surface,
        remote_addr=addr,
    )
    row.save(force_insert=True)
    if at is not None:
        QueryLog.objects.filter(pk=row.pk).update(created_at=at)
        row.refresh_from_db()
    return row


def test_top_queries_group_case_and_spacing_and_count_callers() -> None:
    # given
    for n in range(3):
        record("Day rates", user(n), hits(1))
    record("day   RATES", user(1), hits(1))
    record("fees", user(1), NOTHING)
    record("fees", user(1), hits(2), cursor="next-page")  # a later page is not a new search
    # when
    top = selectors.top_queries(days=7)
    # then
    assert [(r["searches"], r["callers"]) for r in top] == [(4, 3), (1, 1)]
    assert top[0]["text"].casefold().split() == ["day", "rates"]
    assert top[1]["zero"] == 1


def test_hidden_queries_count_without_text() -> None:
    record("secret", ANONYMOUS)
    record("secret", ANONYMOUS, addr="10.0.0.2")
    (row,) = selectors.top_queries(days=7)
    assert row["text"] == "" and row["searches"] == 2 and row["callers"] == 2


def test_zero_result_queries_show_existing_synonyms_and_gaps() -> None:
    # given
    cv = record("cv", user(1))
    record("cv", user(2))
    gap = record("modern slavery", user(1))
    record("pricing", user(1), hits(1))
    Synonym.objects.create(terms=["cv", "curriculum vitae"], one_way=True)
    services.content_gap_create(query_hash=gap.query_hash)
    # when
    zero = {r["text"]: r for r in selectors.zero_result_queries(days=7)}
    # then
    assert set(zero) == {"cv", "modern slavery"}
    assert zero["cv"]["searches"] == 2 and zero["cv"]["synonym"] is not None and not zero["cv"]["has_gap"]
    assert zero["modern slavery"]["has_gap"] and zero["modern slavery"]["synonym"] is None
    assert cv.query_hash == zero["cv"]["query_hash"]
    assert ContentGap.objects.count() == 1


def test_no_click_queries_list_searches_nobody_opened() -> None:
    # given
    record("opened", user(1), hits(1))
    services.querylog_mark_click(principal=user(1), query_text="opened", item_id=1)
    record("ignored", user(1), hits(2))
    record("ignored by agent", Principal(kind="api_key", api_key_id=1), hits(3), surface="mcp")
    record("cli only", user(1), hits(4), surface="cli")
    record("nothing found", user(1))
    # then
    assert {r["text"] for r in selectors.no_click_queries(days=7)} == {"ignored", "ignored by agent"}


def test_retry_loops_are_chains_of_quick_searches_by_one_caller() -> None:
    # given an agent rephrasing four times, 20 s apart, then coming back an hour later
    agent = Principal(kind="api_key", api_key_id=9)
    start = timezone.now() - timedelta(hours=2)
    for i, text in enumerate(["parental leave", "parental leave policy", "maternity leave", "leave policy"]):
        record(text, agent, surface="mcp", at=start + timedelta(seconds=20 * i))
    record("leave", agent, surface="mcp", at=start + timedelta(hours=1))
    # and a person searching twice a minute apart (no loop), and a page-through (not a retry)
    record("a", user(1), at=start)
    record("b", user(1), at=start + timedelta(seconds=90))
    for i in range(4):
        record("c", user(2), hits(1), at=start + timedelta(seconds=i), cursor="p" if i else None)
    # when
    loops = selectors.retry_loops(days=1)
    # then
    assert len(loops) == 1
    loop = loops[0]
    assert (loop.principal_kind, loop.surfaces, loop.searches, loop.seconds) == ("api_key", ["mcp"], 4, 60.0)
    assert loop.queries == ["parental leave", "parental leave policy", "maternity leave", "leave policy"]
    assert loop.pairs[0] == ("parental leave", 0)


def test_slowest_queries_come_first_with_their_lane_timings() -> None:
    record("fast", user(1), hits(1))
    record("slow", user(1), hits(1, 2, 3, 4))
    slow = selectors.slowest_queries(days=1)
    assert [r.query_text for r in slow] == ["slow", "fast"]
    assert slow[0].total_ms == 50.0


def test_surface_summary_counts_each_surface_and_tool() -> None:
    record("x", user(1), surface="browse")
    record("x", Principal(kind="api_key", api_key_id=1), hits(1), surface="mcp")
    summary = {(r["surface"], r["tool"]): r for r in selectors.surface_summary(days=1)}
    assert set(summary) == {("browse", ""), ("mcp", "")}
    assert summary[("browse", "")]["zero"] == 1 and summary[("browse", "")]["avg_lexical_ms"] == 2.0


@override_settings(POPULAR_TOPICS_MIN_CALLERS=2)
def test_popular_topics_are_real_queries_with_results_from_several_callers() -> None:
    # given
    for n in range(4):
        record("tender pricing", user(n), hits(1))
    for n in range(2):
        record("social value", user(n), hits(2))
    record("one person's private query", user(1), hits(3))
    record("no results here", user(1))
    record("no results here", user(2))
    for n in range(3):
        record("anonymous words", ANONYMOUS, hits(4), addr=f"10.0.0.{n}")
        record("x" * 90, user(n), hits(5))  # too long for a dropdown
    # when
    topics = selectors.popular_topics(limit=8)
    # then
    assert topics == ["tender pricing", "social value"]
    # and the answer is cached for 10 minutes
    record("social value", user(3), hits(2))
    record("social value", user(4), hits(2))
    record("social value", user(5), hits(2))
    assert selectors.popular_topics(limit=8) == topics
    cache.clear()
    assert selectors.popular_topics(limit=8) == ["social value", "tender pricing"]


@override_settings(POPULAR_TOPICS_MIN_CALLERS=1, QUERY_LOG_ANONYMOUS_TEXT=True)
def test_popular_topics_use_signed_out_text_only_when_allowed() -> None:
    record("anonymous words", ANONYMOUS, hits(4))
    assert selectors.popular_topics(limit=3) == ["anonymous words"]


@override_settings(POPULAR_TOPICS_MIN_CALLERS=2)
def test_browse_dropdown_shows_real_top_queries_first(client: Any, corpus: Any) -> None:
    # given
    for n in range(2):
        record("discount approval", user(n), hits(corpus["discount"].pk))
    # when
    response = client.get("/browse")
    # then
    topics = response.context["topics"]
    assert topics[0] == "discount approval"
    assert 'id="kb-topics-data"' in response.content.decode() and len(topics) <= 8
