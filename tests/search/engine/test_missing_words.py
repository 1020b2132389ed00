"""``Hit.missing_words`` and the one definition of ``partial_match`` (search.engine.pipeline._Coverage)."""

import pytest

from search.engine import retrieve
from search.principal import Principal
from search.types import RetrievalQuery
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db

STAFF = Principal(kind="staff", all_content=True)


def search(text, **kwargs):
    kwargs.setdefault("limit", 20)
    kwargs.setdefault("threshold", 0.0)  # the full ranking: these tests are about words, not confidence
    return retrieve(query=RetrievalQuery(text=text, **kwargs))


def missing_by_title(result):
    return {h.title: h.missing_words for h in result.hits}


def test_each_hit_names_the_words_it_lacks_and_complete_first_hits_are_not_partial():
    # given one item holding both words and two holding one each
    make_item(title="Tender pricing guide", body="How to price a tender for the council.")
    make_item(title="Approval policy", body="Every price above budget needs approval.")
    make_item(title="Bid calendar", body="When each tender closes, in one calendar.")
    build()
    # when
    result = search("Tender pricing", mode="lexical")
    # then the complete match lacks nothing, the others lack exactly the word they miss (as typed)
    assert missing_by_title(result) == {
        "Tender pricing guide": (),
        "Approval policy": ("Tender",),
        "Bid calendar": ("pricing",),
    }
    # and since one result holds every word, the search is not a partial match
    assert result.partial_match is False


def test_partial_match_when_no_result_holds_every_word():
    make_item(title="Harbour safety", body="Visitors wear vests in the harbour.")
    make_item(title="Crane rules", body="Crane operators follow harbour signals.")
    build()
    result = search("harbour quokka", mode="lexical")
    assert result.hits and result.partial_match is True
    assert all(h.missing_words == ("quokka",) for h in result.hits)


def test_no_words_and_no_results_are_never_partial():
    make_item(title="Harbour safety", body="Visitors wear vests in the harbour.")
    build()
    assert search("zzqqxx wwvvkk", mode="lexical").partial_match is False  # nothing found
    assert search("the", mode="lexical").partial_match is False  # stop words only: no query words


def test_an_item_holds_what_any_of_its_passages_holds():
    # given an item whose two words sit in different passages (chunks)
    first = "Lighthouse keepers log the weather every hour. " * 30
    second = "The fog signal is tested by the keepers each Monday. " * 30
    make_item(title="Coast station manual", body=f"# Part one\n\n{first}\n\n# Part two\n\n{second}")
    build()
    # when searching both words by item, then by passage
    by_item = search("lighthouse fog", mode="lexical")
    by_chunk = search("lighthouse fog", mode="lexical", granularity="chunk")
    # then the item lacks nothing, while each passage lacks the other's word
    assert [h.missing_words for h in by_item.hits] == [()]
    assert by_item.partial_match is False
    assert {h.missing_words for h in by_chunk.hits} == {("fog",), ("lighthouse",)}
    assert by_chunk.partial_match is True


def test_hits_only_the_vector_lane_found_are_checked_too():
    # given items the vector lane returns whatever their words
    make_item(title="Security compliance audit", body="The yearly security audit checks compliance.")
    make_item(title="Audit trail", body="Every change leaves an audit record.")
    build()
    # when the lexical lane does not run at all
    result = search("security audit", mode="vector", threshold=0.0)
    # then each hit still says which words it lacks
    found = missing_by_title(result)
    assert found["Security compliance audit"] == ()
    assert found["Audit trail"] == ("security",)
    assert result.partial_match is False


def test_title_and_keyword_words_count_as_held():
    make_item(title="Quarterly invoice", body="Send it before the fifth.", ai_keywords=["reminders"])
    build()
    result = search("invoice reminders", mode="lexical", principal=STAFF)
    assert [h.missing_words for h in result.hits] == [()]
