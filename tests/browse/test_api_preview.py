"""GET /api/search/preview: validation, literal matching, ordering, access, rate limit."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accounts.limits import rate_limit_hit
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db


def test_q_is_required_and_trimmed(client: Client) -> None:
    for url in ("/api/search/preview", "/api/search/preview?q=", "/api/search/preview?q=%20%20"):
        response = client.get(url)
        assert response.status_code == 400
        assert response.json()["error"]["field"] == "q"


@pytest.mark.parametrize("limit", ["0", "-3", "abc", "1.5"])
def test_limit_must_be_a_positive_integer(client: Client, limit: str) -> None:
    response = client.get("/api/search/preview", {"q": "policy", "limit": limit})
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "limit"


def test_limit_is_clamped_to_twenty(client: Client) -> None:
    # given
    for i in range(23):
        make_item(title=f"Policy number {i}")
    build()
    # when
    data = client.get("/api/search/preview", {"q": "policy", "limit": "500"}).json()
    # then
    assert data["count"] == 20 and len(data["results"]) == 20
    assert client.get("/api/search/preview", {"q": "policy"}).json()["count"] == 8


def test_percent_and_underscore_match_literally(client: Client) -> None:
    # given
    make_item(title="Why we never accept a 50% deposit clause", body="Deposits.")
    make_item(title="Ordering 500 units", body="Bulk orders of 5000 items.")
    make_item(title="Field naming", body="Use snake_case names.")
    make_item(title="Field names", body="Use snakeXcase names.")
    build()
    # when
    percent = client.get("/api/search/preview", {"q": "50%"}).json()
    underscore = client.get("/api/search/preview", {"q": "snake_case"}).json()
    # then
    assert [r["title"] for r in percent["results"]] == ["Why we never accept a 50% deposit clause"]
    assert [r["title"] for r in underscore["results"]] == ["Field naming"]


def test_title_matches_come_before_content_only_matches(client: Client) -> None:
    # given: the content match is newer, the title match still comes first
    make_item(title="Tender checklist", body="Nothing here.")
    make_item(title="Something else", body="Mentions the tender once.")
    build()
    # when
    data = client.get("/api/search/preview", {"q": "TENDER"}).json()
    # then
    assert [r["title"] for r in data["results"]] == ["Tender checklist", "Something else"]
    assert set(data["results"][0]) == {"id", "title", "title_spans", "content_type", "primary_domain", "url"}


def test_rows_carry_where_an_accented_fragment_of_another_case_occurs_in_the_title(client: Client) -> None:
    # given
    make_item(title="Un ÉCRIT, deux écrits", body="Texte.")
    make_item(title="Guide", body="Un écrit dans le texte seulement.")
    build()
    # when: typed without accents, in lower case
    data = client.get("/api/search/preview", {"q": "ecrit"}).json()
    # then: offsets in the title as written (characters, end exclusive); none for a content-only match
    assert [(r["title"], r["title_spans"]) for r in data["results"]] == [
        ("Un ÉCRIT, deux écrits", [[3, 8], [15, 20]]),
        ("Guide", []),
    ]
    title = data["results"][0]["title"]
    assert [title[a:b] for a, b in data["results"][0]["title_spans"]] == ["ÉCRIT", "écrit"]


def test_an_arabic_fragment_marks_its_letters_with_their_harakat(client: Client) -> None:
    # given
    make_item(title="دليل الكِتَابةِ", body="نص.", language="ar")
    build()
    # when: typed without harakat
    data = client.get("/api/search/preview", {"q": "كتاب"}).json()
    # then: the span covers the letters as written, harakat included
    [row] = data["results"]
    assert row["title_spans"] == [[7, 13]]
    assert row["title"][7:13] == "كِتَاب"


def test_anonymous_visitors_see_public_live_items_only(client: Client, user_client: Client) -> None:
    # given
    make_item(title="Pricing public")
    make_item(title="Pricing signed in", visibility="signed_in")
    make_item(title="Pricing staff", visibility="staff")
    make_item(title="Pricing draft", publish=False)
    build()
    # when
    anonymous = [r["title"] for r in client.get("/api/search/preview", {"q": "pricing"}).json()["results"]]
    signed_in = [r["title"] for r in user_client.get("/api/search/preview", {"q": "pricing"}).json()["results"]]
    # then
    assert anonymous == ["Pricing public"]
    assert sorted(signed_in) == ["Pricing public", "Pricing signed in"]


def test_the_sixty_first_preview_in_a_minute_is_refused_with_retry_after(client: Client) -> None:
    # given: this IP already spent its 60 previews
    rate_limit_hit(group="preview", key="ip:127.0.0.1", cost=60)
    # when
    response = client.get("/api/search/preview", {"q": "policy"})
    # then
    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1
    assert response.json()["error"]["code"] == "rate_limited"


def test_signed_in_users_have_their_own_budget(client: Client, user_client: Client, user: Any) -> None:
    # given
    rate_limit_hit(group="preview", key="ip:127.0.0.1", cost=60)
    # when / then
    assert client.get("/api/search/preview", {"q": "policy"}).status_code == 429
    assert user_client.get("/api/search/preview", {"q": "policy"}).status_code == 200


def test_preview_query_count_is_bounded(client: Client, django_assert_max_num_queries: Any, settings: Any) -> None:
    # given
    for i in range(10):
        make_item(title=f"Guide {i}", body="About tenders.")
    build()
    # then: the check that the typed word occurs in some text, titles, content, the hits, and (at most once
    # a minute) the corpus size
    with django_assert_max_num_queries(5):
        assert client.get("/api/search/preview", {"q": "tender"}).json()["count"] == 8
    # and on a corpus large enough for the time budget: per step the budget is set and the query runs
    # (inside this test's transaction the step also takes a savepoint, resets the budget and releases it:
    # 5 per step); nothing scales with the corpus or the number of matches
    settings.SEARCH = {**settings.SEARCH, "PREVIEW_BUDGET_MIN_CHUNKS": 0}
    with django_assert_max_num_queries(17):
        assert client.get("/api/search/preview", {"q": "tender"}).json()["count"] == 8


def test_steps_past_their_budget_retry_titles_newest_first_and_skip_content(
    client: Client, monkeypatch: Any, settings: Any
) -> None:
    # given: a corpus under the time budget, and every first attempt at a step runs out of it (as a common
    # fragment does at scale)
    import search.engine.preview as selectors

    settings.SEARCH = {**settings.SEARCH, "PREVIEW_BUDGET_MIN_CHUNKS": 0}

    make_item(title="Tender checklist", body="Nothing here.")
    make_item(title="Something else", body="Mentions the tender once.")
    build()
    real = selectors._within_budget
    calls: list[tuple[str, Any]] = []

    def first_attempt_runs_out(sql: str, params: list[Any], budget_ms: int, *, setting: Any = None) -> Any:
        kind = "pieces" if "search_text_pieces" in sql else "content" if "search_chunk" in sql else "title"
        calls.append((kind, setting))
        return real(sql, params, budget_ms, setting=setting) if setting else None

    monkeypatch.setattr(selectors, "_within_budget", first_attempt_runs_out)
    # when
    data = client.get("/api/search/preview", {"q": "tender"}).json()
    # then: the check that the word occurs somewhere ran out (so nothing was ruled out), the title step was
    # retried walking titles newest first; both content steps (the best chunks of the word "tender" completes
    # to, then the trigram index) ran out too
    assert calls == [
        ("pieces", None), ("title", None), ("title", ("enable_bitmapscan", "off")), ("content", None),
        ("content", None),
    ]
    assert [r["title"] for r in data["results"]] == ["Tender checklist"]


def test_one_typed_word_gets_content_matches_from_its_most_frequent_completion(
    client: Client, monkeypatch: Any, settings: Any
) -> None:
    # given: a large-corpus preview (budgeted) where the trigram content search runs out of time
    import search.engine.preview as selectors

    settings.SEARCH = {**settings.SEARCH, "PREVIEW_BUDGET_MIN_CHUNKS": 0}
    make_item(title="Harbour notes", body="Tender rules for the harbour, and tenders received.")
    make_item(title="Quay notes", body="Tenderness of the quay wall; tender offers.")
    make_item(title="Dock notes", body="Nothing about that here.")
    build()
    real = selectors._within_budget
    checked: list[str] = []

    def trigram_runs_out(sql: str, params: list[Any], budget_ms: int, *, setting: Any = None) -> Any:
        if "search_postings" in sql:
            checked.append(params[0])
            return real(sql, params, budget_ms, setting=setting)
        return None if "FROM search_chunk c" in sql else real(sql, params, budget_ms, setting=setting)

    monkeypatch.setattr(selectors, "_within_budget", trigram_runs_out)
    # when: "tende" is unfinished; "tender" is its most frequent completion in the corpus
    data = client.get("/api/search/preview", {"q": "Tende"}).json()
    # then: the chunks holding "tender" were checked, and each result really contains the fragment
    assert checked == ["tender"]
    assert sorted(r["title"] for r in data["results"]) == ["Harbour notes", "Quay notes"]


def test_a_bounded_postings_pass_checks_what_the_time_left_allows() -> None:
    import search.engine.preview as selectors

    # no budget (a small corpus): every posting; a budget: in proportion, never fewer than wanted, at most all
    assert selectors._checks_within(None, 32) is None
    assert selectors._checks_within(2, 32) == 32
    assert selectors._checks_within(6, 32) == 6 * selectors.POSTINGS_CHECKS_PER_MS
    assert selectors._checks_within(10_000, 32) == 1000


def test_a_middle_word_with_a_complete_postings_list_finds_content_matches_exactly(
    client: Client, monkeypatch: Any
) -> None:
    # given: the fragment's middle word "census" is rare, so its postings hold every chunk with it
    import search.engine.preview as selectors

    make_item(title="Island report", body="The annual quokka census island by island, with maps.")
    make_item(title="Other report", body="A census of bridges, quokka free.")
    build()
    used: list[str] = []
    real = selectors._content_from_postings

    def spy(term: str, *args: Any) -> Any:
        used.append(term)
        return real(term, *args)

    monkeypatch.setattr(selectors, "_content_from_postings", spy)
    # when
    data = client.get("/api/search/preview", {"q": "quokka census isl"}).json()
    # then: only the chunks holding "census" were checked, and the substring decided
    assert used == ["census"]
    assert [r["title"] for r in data["results"]] == ["Island report"]


def test_past_the_budget_content_comes_from_the_rarest_typed_words_postings(
    client: Client, monkeypatch: Any, settings: Any
) -> None:
    # given: the trigram content search runs out of time (as a common fragment does at scale)
    import search.engine.preview as selectors

    settings.SEARCH = {**settings.SEARCH, "PREVIEW_BUDGET_MIN_CHUNKS": 0}

    make_item(title="Harbour notes", body="Tide tables for the harbour entrance, updated weekly.")
    build()
    real = selectors._within_budget

    def trigram_content_runs_out(sql: str, params: list[Any], budget_ms: int, *, setting: Any = None) -> Any:
        if "FROM search_chunk c" in sql and "search_postings" not in sql:
            return None
        return real(sql, params, budget_ms, setting=setting)

    monkeypatch.setattr(selectors, "_within_budget", trigram_content_runs_out)
    # when: "tables" is complete (the last word may be unfinished), "for" is a stop word
    data = client.get("/api/search/preview", {"q": "tide tables for the harb"}).json()
    # then
    assert [r["title"] for r in data["results"]] == ["Harbour notes"]


def test_a_small_corpus_has_no_time_budget_so_a_loaded_machine_cannot_cut_its_preview(
    client: Client, monkeypatch: Any
) -> None:
    # given: a small knowledge base (under PREVIEW_BUDGET_MIN_CHUNKS)
    import search.engine.preview as selectors

    make_item(title="Tender checklist", body="Nothing here.")
    make_item(title="Something else", body="Mentions the tender once.")
    build()
    budgets: list[Any] = []
    real = selectors._within_budget

    def spy(sql: str, params: list[Any], budget_ms: Any, *, setting: Any = None) -> Any:
        budgets.append(budget_ms)
        return real(sql, params, budget_ms, setting=setting)

    monkeypatch.setattr(selectors, "_within_budget", spy)
    # when
    data = client.get("/api/search/preview", {"q": "tender"}).json()
    # then: every step (the check that the word occurs somewhere, titles, content) ran without a timeout
    assert budgets == [None, None, None]
    assert [r["title"] for r in data["results"]] == ["Tender checklist", "Something else"]
