import pytest

from search.engine import retrieve
from search.types import RetrievalQuery
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db

WORDS = ["government", "procurement", "compliance", "sustainability", "evaluation", "subcontractor",
         "certificate", "insurance", "deadline", "pricing"]
MISSPELLED = ["goverment", "procurment", "complaince", "sustainabilty", "evalution", "subcontracter",
              "certficate", "insurence", "dealine", "pricng"]


@pytest.fixture
def vocabulary_corpus():
    for i, word in enumerate(WORDS):
        make_item(title=f"Note {i}", body=f"This note is about {word} in public tenders. Also {word} rules.")
    make_item(title="Distractor", body="governor procure complaint sustainable evaluate contractor")
    build()


def test_did_you_mean_corrects_seeded_misspellings(vocabulary_corpus):
    corrected = 0
    for wrong, right in zip(MISSPELLED, WORDS, strict=True):
        result = retrieve(query=RetrievalQuery(text=f"{wrong} rules", mode="lexical"))
        if result.suggestion == f"{right} rules":
            corrected += 1
    assert corrected >= 8, f"only {corrected}/10 corrected"


def test_no_suggestion_when_every_word_is_known(vocabulary_corpus):
    assert retrieve(query=RetrievalQuery(text="government rules", mode="lexical")).suggestion is None


def test_one_edit_typo_still_finds_the_word_but_below_exact(vocabulary_corpus):
    result = retrieve(query=RetrievalQuery(text="goverment", mode="lexical"))
    assert result.hits and "government" in result.hits[0].passage
    span = result.hits[0].passage_spans[0]
    assert result.hits[0].passage[span.start : span.end] == "government"


def test_typo_tolerance_needs_five_letters_and_never_matches_titles():
    make_item(title="Tender", body="unrelated words")
    make_item(title="Other", body="the bids are ready")
    build()
    # "tendr" is 5 letters, one edit from "tender" — but "tender" only appears in a title
    assert retrieve(query=RetrievalQuery(text="tendr", mode="lexical")).total == 0
    # "bidz" is under 5 letters: no typo matching
    assert retrieve(query=RetrievalQuery(text="bidz", mode="lexical")).total == 0


def test_synonyms_expand_below_the_written_word():
    from search.models import Synonym

    # given: a two-way synonym set, one item with the word as written in its title, one with the synonym
    make_item(title="Tender calendar", body="Dates for every tender this year.")
    make_item(title="Notes", body="Dates for every bid this year.")
    make_item(title="Unrelated", body="Catering menus.")
    build()
    Synonym.objects.create(terms=["tender", "bid"], one_way=False)
    # when
    result = retrieve(query=RetrievalQuery(text="tender", mode="lexical", threshold=0.0))
    # then: the synonym finds the second item, ranked below the written word
    assert [h.title for h in result.hits] == ["Tender calendar", "Notes"]
    span = result.hits[1].passage_spans[0]
    assert result.hits[1].passage[span.start : span.end] == "bid"


def test_one_way_synonym_does_not_expand_backwards():
    from search.models import Synonym

    make_item(title="A", body="Our ITT response.")
    make_item(title="B", body="Invitation to tender response.")
    build()
    Synonym.objects.create(terms=["itt", "invitation"], one_way=True)
    def found(text: str) -> list[str]:
        return [h.title for h in retrieve(query=RetrievalQuery(text=text, mode="lexical", threshold=0.0)).hits]

    assert set(found("itt")) == {"A", "B"}
    assert found("invitation") == ["B"]
