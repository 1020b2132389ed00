"""Query-log writes: privacy rule, pseudonymous keys, clicks and MCP follow-ups, retention, notes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings
from django.utils import timezone

from analytics import services
from analytics.models import ContentGap, QueryLog
from search.models import Synonym
from search.principal import ANONYMOUS, Principal
from search.types import Hit, RetrievalQuery, RetrievalResult, SearchFilters

pytestmark = pytest.mark.django_db

USER = Principal(kind="user", user_id=41)
RESULT = RetrievalResult(total=0, timings_ms={"total_ms": 12.5, "lexical_ms": 4.0, "vector_ms": 7.25})


def record(
    text: str,
    principal: Principal = ANONYMOUS,
    *,
    surface: str = "browse",
    remote_addr: str = "10.0.0.9",
    result: RetrievalResult = RESULT,
    **query: Any,
) -> QueryLog:
    row = services.querylog_entry(
        query=RetrievalQuery(text=text, principal=principal, **query),
        result=result,
        corpus="live",
        surface=surface,
        remote_addr=remote_addr,
    )
    row.save(force_insert=True)
    return row


def test_signed_out_text_is_hashed_not_stored_by_default() -> None:
    # when
    anonymous = record("Medical leave policy")
    signed_in = record("medical   LEAVE policy", USER)
    # then
    assert anonymous.query_text == "" and anonymous.principal_kind == "anonymous"
    assert signed_in.query_text == "medical   LEAVE policy"
    assert anonymous.query_hash == signed_in.query_hash != ""  # the same query, whoever asked
    assert "medical" not in anonymous.query_hash and len(anonymous.query_hash) == 64
    assert anonymous.display_text.startswith("(hidden #")


@override_settings(QUERY_LOG_ANONYMOUS_TEXT=True)
def test_signed_out_text_is_stored_when_the_setting_is_on() -> None:
    assert record("medical leave").query_text == "medical leave"


def test_principal_keys_are_pseudonymous_and_stable() -> None:
    # given
    now = timezone.now()
    key = services.principal_key(USER)
    # then
    assert key == services.principal_key(Principal(kind="user", user_id=41, group_ids=frozenset({3})))
    assert key != services.principal_key(Principal(kind="user", user_id=42))
    assert "41" not in key and len(key) == 32
    assert services.principal_key(Principal(kind="api_key", api_key_id=41)) != key
    # signed-out callers: by address, and a new key every day
    today = services.principal_key(ANONYMOUS, remote_addr="10.0.0.9", now=now)
    assert today == services.principal_key(ANONYMOUS, remote_addr="10.0.0.9", now=now)
    assert today != services.principal_key(ANONYMOUS, remote_addr="10.0.0.8", now=now)
    assert today != services.principal_key(ANONYMOUS, remote_addr="10.0.0.9", now=now + timedelta(days=1))
    assert services.principal_key(ANONYMOUS, remote_addr="") == ""


def test_row_keeps_filters_timings_and_paging() -> None:
    # when
    row = record(
        "rates",
        USER,
        filters=SearchFilters(domain=("pricing",), freshness_days=30),
        cursor="abc",
        granularity="chunk",
        result=RetrievalResult(
            total=3,
            partial_match=True,
            degraded=("embedding_unavailable",),
            timings_ms={"total_ms": 20.0, "lexical_ms": 5.0},
        ),
    )
    # then
    row.refresh_from_db()
    assert row.filters == {"domain": ["pricing"], "freshness_days": 30}
    assert services.filters_from_json(row.filters) == SearchFilters(domain=("pricing",), freshness_days=30)
    assert row.paged and row.granularity == "chunk" and row.partial_match
    assert row.degraded == ["embedding_unavailable"]
    assert (row.total_ms, row.lexical_ms, row.vector_ms) == (20.0, 5.0, None)


def _hits_result(*item_ids: int) -> RetrievalResult:
    hits = tuple(
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
        for i in item_ids
    )
    return RetrievalResult(hits=hits, total=len(hits), timings_ms={"total_ms": 3.0})


def test_a_click_credits_the_newest_search_of_the_same_caller_and_query() -> None:
    # given two searches of the same visitor, and one of another visitor
    older = record("day rates", result=_hits_result(1, 2))
    newer = record("Day  rates", result=_hits_result(2, 3))
    other = record("day rates", remote_addr="10.0.0.1", result=_hits_result(2))
    # when
    log_id = services.querylog_mark_click(
        principal=ANONYMOUS, query_text="day rates", item_id=2, remote_addr="10.0.0.9"
    )
    # then
    assert log_id == newer.pk
    assert QueryLog.objects.get(pk=newer.pk).clicked_item_id == 2
    assert QueryLog.objects.get(pk=older.pk).clicked_item_id is None
    assert QueryLog.objects.get(pk=other.pk).clicked_item_id is None
    # an item the search never showed, or another query, credits nothing
    assert (
        services.querylog_mark_click(
            principal=ANONYMOUS, query_text="day rates", item_id=99, remote_addr="10.0.0.9"
        )
        is None
    )
    assert (
        services.querylog_mark_click(
            principal=ANONYMOUS, query_text="fees", item_id=2, remote_addr="10.0.0.9"
        )
        is None
    )


def test_a_click_after_the_window_credits_nothing() -> None:
    # given
    row = record("day rates", USER, result=_hits_result(5))
    QueryLog.objects.filter(pk=row.pk).update(
        created_at=timezone.now() - services.FOLLOWUP_WINDOW - timedelta(1)
    )
    # then
    assert services.querylog_mark_click(principal=USER, query_text="day rates", item_id=5) is None


def test_an_mcp_read_credits_the_find_that_returned_the_item() -> None:
    # given
    agent = Principal(kind="api_key", api_key_id=3)
    found = record("fees", agent, surface="mcp", result=_hits_result(8, 9))
    record("fees", Principal(kind="api_key", api_key_id=4), surface="mcp", result=_hits_result(9))
    # when
    assert services.querylog_mark_followup(agent, 9) == found.pk
    # then the first read counts; a second one changes nothing
    assert services.querylog_mark_followup(agent, 8) is None
    found.refresh_from_db()
    assert found.clicked_item_id == 9


@override_settings(QUERY_LOG_RETENTION_DAYS=30)
def test_purge_deletes_rows_older_than_the_retention_only() -> None:
    # given
    now = timezone.now()
    old = [record(f"old {i}", USER) for i in range(5)]
    kept = record("recent", USER)
    QueryLog.objects.filter(pk__in=[r.pk for r in old]).update(created_at=now - timedelta(days=31))
    QueryLog.objects.filter(pk=kept.pk).update(created_at=now - timedelta(days=29))
    # when (small batches: the loop must finish them all)
    deleted = services.querylog_purge(now=now, batch_size=2)
    # then
    assert deleted == 5
    assert list(QueryLog.objects.values_list("pk", flat=True)) == [kept.pk]
    assert services.querylog_purge(now=now) == 0


def test_a_zero_result_query_becomes_a_one_way_synonym() -> None:
    # given
    row = record("CV template", USER)
    # when
    synonym = services.synonym_create_from_query(query_hash=row.query_hash, means="curriculum vitae, resume")
    # then
    assert synonym.terms == ["cv template", "curriculum vitae", "resume"]
    assert synonym.one_way and synonym.language == ""
    assert Synonym.objects.count() == 1


def test_a_synonym_needs_stored_text_and_a_meaning() -> None:
    hidden = record("secret words")  # a signed-out visitor: no text
    with pytest.raises(ValidationError, match="not stored"):
        services.synonym_create_from_query(query_hash=hidden.query_hash, means="x")
    shown = record("rfp", USER)
    with pytest.raises(ValidationError, match="Say what"):
        services.synonym_create_from_query(query_hash=shown.query_hash, means=" , RFP ")


def test_a_zero_result_query_becomes_a_content_gap_once() -> None:
    # given
    rows = [record("modern slavery statement", USER) for _ in range(3)]
    # when
    gap, created = services.content_gap_create(query_hash=rows[0].query_hash, note="No policy yet")
    again, created_again = services.content_gap_create(query_hash=rows[0].query_hash)
    # then
    assert created and not created_again and again.pk == gap.pk
    assert (gap.query_text, gap.searches, gap.status) == (
        "modern slavery statement",
        3,
        ContentGap.Status.OPEN,
    )
    assert ContentGap.objects.count() == 1


def test_synonym_terms_are_normalized_and_need_two() -> None:
    synonym = Synonym(terms=["  Bid ", "TENDER", "bid"], language=" EN ")
    synonym.full_clean()
    synonym.save()
    assert synonym.terms == ["bid", "tender"] and synonym.language == "en"
    assert str(synonym) == "bid ↔ tender [en]"
    with pytest.raises(ValidationError):
        Synonym(terms=["bid", "Bid"]).full_clean()
