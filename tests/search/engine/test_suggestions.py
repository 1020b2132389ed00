""""Did you mean" draws on every vocabulary the lexical lane matches (bodies, titles, keywords), within the
reader's scope (search/engine/expansion.py, migration 0013)."""

from __future__ import annotations

import pytest
from django.db import connection

from search.engine import retrieve
from search.principal import ANONYMOUS, Principal
from search.text import analysis
from search.types import RetrievalQuery
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db

STAFF = Principal(kind="staff", all_content=True)
TITLE_WORD = "lighthouse"  # only in a title
KEYWORD_WORD = "whistleblowing"  # only in keywords
# One slip of each kind: deletion, insertion, substitution, transposition.
SLIPS = {
    TITLE_WORD: ["lighthose", "lighthousse", "lighthoise", "lighthuose"],
    KEYWORD_WORD: ["whistleblowng", "whistlebllowing", "whistleblowimg", "whistlebolwing"],
}


def suggestion(
    text: str, *, principal: Principal = ANONYMOUS, corpus: str = "live", threshold: float = 0.0
) -> str | None:
    """The "did you mean" of a lexical search over the full ranking (threshold 0: these tests are about the
    vocabularies; whether the suggested query must find something itself is tested at the end)."""
    query = RetrievalQuery(text=text, mode="lexical", principal=principal, corpus=corpus, threshold=threshold)
    return retrieve(query=query).suggestion


@pytest.fixture
def vocabularies():
    make_item(title="Lighthouse keepers", body="Rota and duties of the coastal station.")
    make_item(title="Reporting concerns", body="How staff raise a concern in confidence.",
              ai_keywords=["whistleblowing", "speak up"])
    make_item(title="Coastal notes", body="Station duties, the rota and the concern log.")
    build()


@pytest.mark.parametrize(("word", "slip"), [(w, s) for w, slips in SLIPS.items() for s in slips])
def test_a_slip_in_a_title_or_keyword_word_suggests_the_word(vocabularies, word, slip):
    # given: the word occurs only in one item's title, or only in its keywords
    # when / then
    assert suggestion(slip) == word
    assert suggestion(f"{slip} duties") == f"{word} duties"


def test_a_title_or_keyword_word_typed_right_is_no_typo(vocabularies):
    for word in (TITLE_WORD, KEYWORD_WORD):
        result = retrieve(query=RetrievalQuery(text=word, mode="lexical"))
        assert result.suggestion is None
        assert result.hits, f"{word} finds its item"


def test_content_type_words_are_suggested_too(vocabularies):
    make_item(title="Station log", body="Entries.", content_type="checklist")
    build()
    assert suggestion("cheklist") == "checklist"


def test_an_arabic_title_word_keeps_its_article_in_the_suggestion():
    # the title vocabulary holds "غابات" (article stripped): the suggestion puts the query's article back
    make_item(title="الغابات", body="نص عن الأشجار والمطر.", language="ar")
    build()
    assert suggestion("الغبات") == "الغابات"


def test_a_staff_only_title_or_keyword_word_is_never_suggested_to_anonymous_readers():
    # given: the words only in a staff-only item, and a public item without them
    make_item(title="Lighthouse keepers", body="Rota of the station.", visibility="staff",
              ai_keywords=["whistleblowing"])
    make_item(title="Coastal notes", body="Station duties and the rota.")
    build()
    for word, slips in SLIPS.items():
        for slip in slips:
            # then: nothing to anonymous readers (as for a word found nowhere), the word to staff
            assert suggestion(slip) is None, slip
            assert suggestion(slip, principal=STAFF) == word, slip
        # and the word typed right reads as unknown to anonymous readers, exactly like a word found nowhere
        assert suggestion(word) == suggestion("qqqqqqqqqq") is None


def test_a_draft_title_word_is_suggested_only_in_the_latest_corpus_of_a_reader_who_may_see_drafts():
    make_item(title="Lighthouse keepers", body="Rota of the station.", publish=False)
    make_item(title="Coastal notes", body="Station duties and the rota.")
    build()
    assert suggestion("lighthose") is None
    assert suggestion("lighthose", principal=STAFF) is None  # live corpus: the draft is not in it
    assert suggestion("lighthose", principal=STAFF, corpus="latest") == TITLE_WORD


def test_a_correction_held_by_a_readable_title_and_an_unreadable_body_is_no_body_word():
    # given: "lighthouse" in a public title and in a staff-only body
    make_item(title="Lighthouse keepers", body="Rota of the station.")
    make_item(title="Private notes", body="The lighthouse budget.", visibility="staff")
    build()
    # when: anonymous readers mistype it
    result = retrieve(query=RetrievalQuery(text="lighthoise", mode="lexical"))
    # then: suggested (the title is readable), but no typo expansion into bodies finds the staff item
    assert result.suggestion == TITLE_WORD
    assert result.total == 0


FOLD_SAMPLES = ["École", "ΟΔΟΣ", "Ærø", "ﬁnance", "مَدْرَسَةٌ", "ٱلكتاب", "على", "İstanbul", "Ｆｕｌｌ", "naïve",
                "e\u0301te\u0301", "kitab\u0640\u0640"]
KEYWORD_SAMPLES = [
    ["Appel d'offres", "No-Bid decision", "L\u2019Offre", "Jusqu'à"],
    ["مَدرسة الغابات", "x_y z\u02bcw", "cafe\u0301 ﬁnance", "ΟΔΟΣ"],
]


def test_the_sql_fold_and_keyword_words_are_the_python_ones():
    with connection.cursor() as cursor:
        for word in FOLD_SAMPLES:
            cursor.execute("SELECT search_fold(%s)", [word])
            assert cursor.fetchone()[0] == analysis.fold(word), word
        for keywords in KEYWORD_SAMPLES:
            cursor.execute("SELECT search_keyword_words(%s, 'case_study')", [keywords])
            expected = {t.folded for phrase in [*keywords, "case study"] for t in analysis.tokens(phrase)}
            assert set(cursor.fetchone()[0]) == expected, keywords


def test_did_you_mean_is_offered_only_when_the_suggested_query_finds_something_itself(vocabularies):
    # given: a slip of a title word; the corrected query finds its item at the site's floor
    answered = retrieve(query=RetrievalQuery(text="lighthose", mode="lexical"))
    assert answered.count == 0 and answered.suggestion == "lighthouse"
    # when: the reader asks for a floor no hit of the corrected query reaches either
    strict = retrieve(query=RetrievalQuery(text="lighthose", mode="lexical", threshold=1.0))
    # then: nothing, and no suggestion that would lead to nothing
    assert strict.count == 0 and strict.suggestion is None
    # and at the site's floor a corrected query whose words no item holds together is no suggestion either
    assert suggestion("whistleblowng duties", threshold=0.35) is None
    assert suggestion("whistleblowng", threshold=0.35) == "whistleblowing"
    # and at threshold 0 (the full ranking, as evaluate reads it) the suggestion is what it always was
    assert retrieve(query=RetrievalQuery(text="lighthose", mode="lexical", threshold=0.0)).suggestion == "lighthouse"
