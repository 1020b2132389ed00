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
    assert set(data["results"][0]) == {
        "id", "title", "title_spans", "snippet", "snippet_spans", "match", "typo", "content_type", "primary_domain",
        "url",
    }


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
    # then: which typed words the corpus holds, titles, title and body, the hits, their snippets, and (at
    # most once a minute) the corpus size
    with django_assert_max_num_queries(6):
        assert client.get("/api/search/preview", {"q": "tender"}).json()["count"] == 8
    # and on a corpus large enough for the time budget: per step the budget is set and the query runs
    # (inside this test's transaction the step also takes a savepoint, resets the budget and releases it:
    # 5 per step, the word check included, 7 for a title step, which also sets a planner setting); nothing
    # scales with the corpus or the number of matches
    settings.SEARCH = {**settings.SEARCH, "PREVIEW_BUDGET_MIN_CHUNKS": 0}
    with django_assert_max_num_queries(26):
        assert client.get("/api/search/preview", {"q": "tender"}).json()["count"] == 8


def test_title_steps_past_their_budget_retry_walking_items_newest_first(
    client: Client, monkeypatch: Any, settings: Any
) -> None:
    # given: a corpus under the time budget, and every first attempt at a step runs out of it (as a fragment
    # of common words does at scale)
    import search.engine.preview as selectors

    settings.SEARCH = {**settings.SEARCH, "PREVIEW_BUDGET_MIN_CHUNKS": 0}

    make_item(title="Tender checklist", body="Nothing here.")
    make_item(title="Something else", body="Mentions the tender once.")
    build()
    real = selectors._within_budget
    calls: list[tuple[str, Any]] = []
    retry = False

    def first_attempt_runs_out(statement: Any, budget_ms: int, *, setting: Any = None) -> Any:
        nonlocal retry
        kind = _step_kind(statement.sql)
        calls.append((kind, setting))
        if kind == "words":
            return real(statement, budget_ms, setting=setting)
        if kind == "title":
            retry = not retry
            return real(statement, budget_ms, setting=setting) if not retry else None
        return None

    monkeypatch.setattr(selectors, "_within_budget", first_attempt_runs_out)
    # when
    data = client.get("/api/search/preview", {"q": "tender"}).json()
    # then: which words the corpus holds; titles that begin with the word (the index first: such titles are
    # few), then the other titles (the word is in half the titles: common, so items are walked newest first
    # before the index is asked), each retried the other way; then title and body (not retried: a walk that
    # checks each item's whole word list is slower than the index); then (fewer than 8 found) the typo
    # lookup, which ran out too
    walk, index = ("enable_bitmapscan", "off"), ("enable_seqscan", "off")
    assert calls == [
        ("words", None),
        ("title", index), ("title", walk),
        ("title", walk), ("title", index),
        ("body", None),
        ("typo", None),
    ]
    assert [r["title"] for r in data["results"]] == ["Tender checklist"]


def _step_kind(sql: str) -> str:
    if "search_corpus_stats" in sql:
        return "words"
    if "search_term_stats" in sql:
        return "typo"
    return "body" if "r.preview_words" in sql else "title" if "r.title_" in sql else "other"


def test_rare_words_ask_the_index_before_walking_items(client: Client, monkeypatch: Any, settings: Any) -> None:
    # given: a corpus under the time budget where "checklist" is in one title of 60
    import search.engine.preview as selectors

    settings.SEARCH = {**settings.SEARCH, "PREVIEW_BUDGET_MIN_CHUNKS": 0}
    make_item(title="Tender checklist", body="Nothing here.")
    for i in range(59):
        make_item(title=f"Guide {i}", body="About tenders.")
    build()
    real = selectors._within_budget
    settings_used: list[Any] = []

    def spy(statement: Any, budget_ms: Any, *, setting: Any = None) -> Any:
        if _step_kind(statement.sql) == "title":
            settings_used.append(setting)
        return real(statement, budget_ms, setting=setting)

    monkeypatch.setattr(selectors, "_within_budget", spy)
    # when
    data = client.get("/api/search/preview", {"q": "checklist"}).json()
    # then: the index first, and it answered
    assert settings_used[0] == ("enable_seqscan", "off")
    assert [r["title"] for r in data["results"]] == ["Tender checklist"]


def test_a_word_no_item_holds_skips_straight_to_typos(client: Client, monkeypatch: Any) -> None:
    # given
    import search.engine.preview as selectors

    make_item(title="Tender checklist", body="Nothing here.")
    build()
    real = selectors._within_budget
    kinds: list[str] = []

    def spy(statement: Any, budget_ms: Any, *, setting: Any = None) -> Any:
        kinds.append(_step_kind(statement.sql))
        return real(statement, budget_ms, setting=setting)

    monkeypatch.setattr(selectors, "_within_budget", spy)
    # when: "chekclist" is in no item, so no exact step can match
    data = client.get("/api/search/preview", {"q": "tender chekclist"}).json()
    # then: the word check, then the typo lookup at once, then the steps with typo forms
    assert kinds[:2] == ["words", "typo"]
    assert [(r["title"], r["typo"]) for r in data["results"]] == [("Tender checklist", True)]
    # and a short word no item holds cannot be a typo: nothing is looked up after the check
    kinds.clear()
    assert client.get("/api/search/preview", {"q": "qz tender"}).json()["count"] == 0
    assert kinds == ["words"]


def test_a_step_that_runs_out_twice_shows_what_the_others_found(
    client: Client, monkeypatch: Any, settings: Any
) -> None:
    # given: the title-and-body step always runs out of time
    import search.engine.preview as selectors

    settings.SEARCH = {**settings.SEARCH, "PREVIEW_BUDGET_MIN_CHUNKS": 0}
    make_item(title="Tender checklist", body="Nothing here.")
    make_item(title="Something else", body="Mentions the tender once.")
    build()
    real = selectors._within_budget

    def body_runs_out(statement: Any, budget_ms: int, *, setting: Any = None) -> Any:
        return None if "r.preview_words" in statement.sql else real(statement, budget_ms, setting=setting)

    monkeypatch.setattr(selectors, "_within_budget", body_runs_out)
    # when
    data = client.get("/api/search/preview", {"q": "tender"}).json()
    # then
    assert [r["title"] for r in data["results"]] == ["Tender checklist"]


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

    def spy(statement: Any, budget_ms: Any, *, setting: Any = None) -> Any:
        budgets.append(budget_ms)
        return real(statement, budget_ms, setting=setting)

    monkeypatch.setattr(selectors, "_within_budget", spy)
    # when
    data = client.get("/api/search/preview", {"q": "tender"}).json()
    # then: every step (which words the corpus holds, titles that begin with the word, other titles, title
    # and body, the typo lookup: no corpus word is one edit from "tender") ran without a timeout
    assert budgets == [None, None, None, None, None]
    assert [r["title"] for r in data["results"]] == ["Tender checklist", "Something else"]
