"""The live preview matches words: every typed word in any order, the last one as a prefix, typos forgiven,
folded as the engine folds (Step 17)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from search.engine import preview
from search.engine.preview import TypedWord, preview_search, typed_words, typo_forms
from search.principal import ANONYMOUS, Principal
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db
STAFF = Principal(kind="staff", all_content=True)


def titles(text: str, **kwargs: Any) -> list[str]:
    return [h.title for h in preview_search(principal=kwargs.pop("principal", ANONYMOUS), text=text, **kwargs)]


@pytest.fixture
def tenders() -> None:
    make_item(title="Abnormally low tenders", body="How to judge a tender submission that is priced too low.")
    make_item(title="Bid pricing guide", body="Pricing a bid: unit rates, contingency and margins.")
    make_item(title="Rédiger une réponse à un appel d'offres", body="Structure de l'offre.", language="fr")
    make_item(title="Solar panel maintenance checklist", body="Clean the panels every quarter.")
    make_item(title="Tender calendar", body="Dates of the year's calls.")
    build()


@pytest.mark.parametrize(
    ("typed", "found"),
    [
        ("tender submiss", ["Abnormally low tenders"]),  # both words in the body, the last one unfinished
        ("submission tender", ["Abnormally low tenders"]),  # any order
        ("tender sub", ["Abnormally low tenders"]),
        ("bid pric", ["Bid pricing guide"]),
        ("pric bid", []),  # only the last word is a prefix: "pric" is not a word of the guide
        ("reponse appel", ["Rédiger une réponse à un appel d'offres"]),  # accents folded
        ("REPONSE l'app", ["Rédiger une réponse à un appel d'offres"]),  # case and elision
        ("low submission", ["Abnormally low tenders"]),  # one word in the title, one in the body
        ("tender quokka", []),  # every word is required
    ],
)
def test_every_typed_word_in_any_order_the_last_as_a_prefix(tenders: None, typed: str, found: list[str]) -> None:
    assert titles(typed) == found


def test_titles_that_hold_every_word_come_first_those_beginning_with_one_before_the_others(tenders: None) -> None:
    # "Tender calendar" begins with the typed word; "Abnormally low tenders" holds it later (and is older);
    # "Abnormally low tenders" also matches in its body, after the titles
    make_item(title="Calendar of the tender board", body="Meetings.")
    build()
    assert titles("tender") == ["Tender calendar", "Calendar of the tender board", "Abnormally low tenders"]
    hits = preview_search(principal=ANONYMOUS, text="tender")
    assert [h.title_match for h in hits] == [True, True, True]
    # both begin with a typed word: the newest first
    assert titles("calendar tender") == ["Calendar of the tender board", "Tender calendar"]


def test_a_short_word_only_narrows(tenders: None) -> None:
    # a last word of one or two letters is not required while being typed, nor matched as a prefix
    assert titles("bid p") == titles("bid")
    # elsewhere it is a whole word: "a" is in the guide's body ("Pricing a bid")
    assert titles("a pricing") == ["Bid pricing guide"]
    assert titles("to bid") == []  # no "to" in the guide


def test_arabic_article_and_clitics_are_folded_as_the_engine_folds() -> None:
    make_item(title="إدارة الغابات", body="حماية الأشجار.", language="ar")
    make_item(title="تقرير سنوي", body="عن الغابات والأنهار.", language="ar")
    build()
    assert titles("والغاب") == ["إدارة الغابات", "تقرير سنوي"]
    assert titles("الغاب") == ["إدارة الغابات", "تقرير سنوي"]
    assert titles("غابات") == ["إدارة الغابات", "تقرير سنوي"]
    assert titles("انهار الغابات") == ["تقرير سنوي"]  # "والأنهار": clitic and article, hamza folded


def test_harakat_do_not_split_a_word() -> None:
    make_item(title="دليل الكِتَابةِ", body="نص.", language="ar")
    build()
    assert titles("الكتابة") == ["دليل الكِتَابةِ"]


@pytest.mark.parametrize(
    ("typed", "found"),
    [
        ("pannel maint", ["Solar panel maintenance checklist"]),  # one edit in a whole word
        ("mainteance", ["Solar panel maintenance checklist"]),  # one edit in the last word
        ("solra panel", ["Solar panel maintenance checklist"]),  # a swapped pair is one edit
        ("mantenanse", ["Solar panel maintenance checklist"]),  # 10 letters: two edits
        ("chekclist", ["Solar panel maintenance checklist"]),  # 9 letters: two edits
        ("pnl", []),  # under 5 letters: exact only
        ("sxlrr", []),  # 5 letters, two edits from "solar"
        ("panle maintenance", ["Solar panel maintenance checklist"]),
    ],
)
def test_typos_are_forgiven_in_longer_words(tenders: None, typed: str, found: list[str]) -> None:
    hits = preview_search(principal=ANONYMOUS, text=typed)
    assert [h.title for h in hits] == found
    assert all(h.fuzzy for h in hits)


def test_exact_matches_come_before_typo_matches() -> None:
    make_item(title="Panel inspection", body="Visual checks.")
    make_item(title="Pannel de contrôle", body="Interface.", language="fr")
    build()
    hits = preview_search(principal=ANONYMOUS, text="pannel")
    assert [(h.title, h.fuzzy) for h in hits] == [("Pannel de contrôle", False), ("Panel inspection", True)]


def test_typo_forms_of_a_whole_word_and_of_the_last_word() -> None:
    make_item(title="Maintenance", body="maintain maintained panel panels")
    build()
    words = typo_forms(typed_words("pannel maintenanse"), None)
    assert words is not None
    assert words[0].typos == ("panel",)
    assert words[1].typos[0] == "maintenance"  # the last word: a prefix of a corpus word, two edits at most
    assert typo_forms([TypedWord("qqqqqq", ("qqqqqq",), False)], None) == [TypedWord("qqqqqq", ("qqqqqq",), False)]


def test_the_typo_lookup_uses_indexes_not_a_scan_of_the_vocabulary(tenders: None) -> None:
    # given: the planner told a sequential scan is the last resort (a test corpus is small enough to scan),
    # with the vocabulary's statistics (without them it guesses a tenth of the rows per field)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE search_term_stats")
    words = typed_words("pannel maintenanse")
    captured: list[str] = []
    real = preview._within_budget

    def explain(statement: Any, budget_ms: Any, *, setting: Any = None) -> Any:
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("EXPLAIN " + statement.sql, list(statement.params))
            captured.append("\n".join(r[0] for r in cursor.fetchall()))
        return real(statement, budget_ms, setting=setting)

    preview._within_budget = explain  # type: ignore[assignment]
    try:
        typo_forms(words, None)
    finally:
        preview._within_budget = real  # type: ignore[assignment]
    [plan] = captured
    assert "search_term_stats_prefix" in plan and "search_term_stats_suffix" in plan
    # the middle piece's route: the trigram index at scale (the 100k plan in docs/benchmarks.md); on a vocabulary
    # this small the planner may as well read a whole small index, so only its condition is pinned here
    assert "~~ (('%'::text || q.middle) || '%'::text)" in plan
    assert "Seq Scan on search_term_stats" not in plan


def test_rows_mark_every_typed_word_and_a_body_match_gets_a_snippet(tenders: None) -> None:
    [hit] = preview_search(principal=ANONYMOUS, text="submission tend")
    assert not hit.title_match
    # the title holds "tenders": only the typed part of the last word is marked
    assert [hit.title[s.start : s.end] for s in hit.title_spans] == ["tend"]
    assert "tender submission" in hit.snippet
    assert [hit.snippet[s.start : s.end] for s in hit.snippet_spans] == ["tend", "submission"]
    [hit] = preview_search(principal=ANONYMOUS, text="checklist solar")
    assert hit.title_match and hit.snippet == ""
    assert [hit.title[s.start : s.end] for s in hit.title_spans] == ["Solar", "checklist"]


def test_a_snippet_far_into_a_long_body_is_cut_around_the_word() -> None:
    body = "Filler words. " * 300 + "Here the **quokka** census starts. " + "More filler. " * 100
    make_item(title="Island report", body=body)
    build()
    [hit] = preview_search(principal=ANONYMOUS, text="quokka")
    assert hit.snippet.startswith("… ") and hit.snippet.endswith(" …")
    assert len(hit.snippet) <= preview.SNIPPET_CHARS + 4
    assert [hit.snippet[s.start : s.end] for s in hit.snippet_spans] == ["quokka"]
    assert "**" not in hit.snippet


def test_what_a_principal_may_not_read_is_never_previewed_not_even_by_a_typo() -> None:
    make_item(title="Quokka census", body="Public.")
    make_item(title="Quokkas merger plan", body="Secret.", visibility="staff")
    make_item(title="Quokka draft", body="Draft.", publish=False)
    build()
    assert titles("quokka") == ["Quokka census"]
    assert titles("quokkas merger") == []
    assert titles("qokkas merger") == []
    # staff see the staff item (the preview reads the live corpus: no drafts there either)
    assert sorted(titles("quokka", principal=STAFF)) == ["Quokka census", "Quokkas merger plan"]


def test_a_revision_edited_in_the_admin_is_previewed_by_its_new_words(client: Any) -> None:
    from django.contrib.auth import get_user_model

    # given: an item, and an admin who corrects its title in Django admin
    item = make_item(title="Quarterly reprot", body="Figures.")
    build()
    admin = get_user_model().objects.create_user("editor", password="pw", is_staff=True, is_superuser=True)
    client.force_login(admin)
    revision = item.live_revision
    form = client.get(f"/admin/search/revision/{revision.pk}/change/").content.decode()
    assert "preview_words" not in form  # derived, never typed by hand
    # when
    response = client.post(
        f"/admin/search/revision/{revision.pk}/change/",
        {"title": "Quarterly report", "body": "Figures.", "summary": "", "author": ""},
    )
    # then
    assert response.status_code == 302, response.content.decode()[:2000]
    hits = preview_search(principal=ANONYMOUS, text="quarterly report")
    assert [(h.title, h.fuzzy) for h in hits] == [("Quarterly report", False)]  # the new words, not a typo match


def test_fragments_no_item_can_hold_get_nothing_not_an_error(tenders: None) -> None:
    assert titles("a" * 2000) == []  # longer than any stored word
    assert titles("tender " + "b" * 1500) == []  # typo lookups skip it too
    assert titles("'\\ : & | ! ( ) <-> * tender:*") == titles("tender")  # tsquery syntax is only text
    assert titles(" ".join(f"word{i}" for i in range(300))) == []


def test_the_snippet_comes_from_the_first_chunk_that_holds_a_typed_word_as_a_word() -> None:
    # given: the first chunk holds "tenders" only (the typed form inside a longer word), a later one the words
    body = "Tenders opened. " * 120 + "\n\nA tender submission arrives late. " * 3
    make_item(title="Harbour notes", body=body)
    build()
    # when
    [hit] = preview_search(principal=ANONYMOUS, text="tender submiss")
    # then
    assert "tender submission" in hit.snippet
    assert [hit.snippet[s.start : s.end] for s in hit.snippet_spans][:2] == ["tender", "submiss"]


# --- how the preview plans its lookups at scale (``_words_in_corpus``) ---


def test_the_word_check_says_which_typed_words_the_corpus_holds_and_how_common_they_are(tenders: None) -> None:
    # given
    words = typed_words("tender zzyzzx pric")
    # when
    known = preview._words_in_corpus(words, None)
    # then: "zzyzzx" is in no item; "tender" and the prefix "pric" are, and counted in the vocabulary
    assert known is not None
    assert known.held == frozenset({0, 2})
    assert known.text_counts[0] > 0 and known.text_counts[2] > 0 and known.text_counts[1] == 0
    # and a word written since the last index build (not in the vocabulary yet) is still held: the word index
    # is exact
    make_item(title="Quokka census", body="Counting quokkas.")
    later = preview._words_in_corpus(typed_words("quokk"), None)
    assert later is not None and later.held == frozenset({0})


def test_the_index_looks_up_whole_words_and_the_typed_prefix_only_where_it_is_rarest() -> None:
    # given: "using" is common, "minimisation" (typed last, a prefix) rare; "the" is uncounted (a stop word)
    words = typed_words("using minimisation")
    common_first = preview._WordsInCorpus(frozenset({0, 1}), 0.0, {0: 5000, 1: 12})
    # then: both (the prefix is the rarest word)
    assert [w.folded for w in common_first.indexed(words)] == ["using", "minimisation"]
    # and when the prefix is the common one ("for" typed last), only the whole word is looked up; the prefix
    # is checked on each revision found
    words = typed_words("required for")
    assert [w.folded for w in preview._WordsInCorpus(frozenset({0, 1}), 0.0, {0: 6000, 1: 90000}).indexed(words)] == [
        "required"
    ]
    # and a word no revision holds as typed (matched by its typo forms) counts as the rarest
    words = typed_words("cell autonnom")
    assert [w.folded for w in preview._WordsInCorpus(frozenset({0}), 0.0, {0: 90000}).indexed(words)] == [
        "cell",
        "autonnom",
    ]


def test_common_words_walk_items_newest_first_before_asking_the_index(tenders: None) -> None:
    assert preview._WordsInCorpus(frozenset({0}), 0.3, {}).walk_first
    assert not preview._WordsInCorpus(frozenset({0}), 0.001, {}).walk_first
    # and stop words, which the vocabulary does not count, are taken for common ones
    known = preview._words_in_corpus(typed_words("the and"), None)
    assert known is not None and known.walk_first


def test_snippet_chunks_are_found_by_a_word_start_pattern_with_its_characters_escaped() -> None:
    assert preview._word_start_pattern("tender") == r"\mtender"
    assert preview._word_start_pattern("c.a+b") == r"\mc\.a\+b"
    # an Arabic form may follow a clitic or the article: anywhere in a word
    assert preview._word_start_pattern("غابات") == "غابات"
