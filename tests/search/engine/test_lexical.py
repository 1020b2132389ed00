"""Each rule of the lexical lane (search/engine/lexical.py) has a test here that fails if it breaks."""

from datetime import timedelta

import pytest
from django.utils import timezone

from search.engine import retrieve
from search.principal import Principal
from search.types import RetrievalQuery, SearchFilters
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db

STAFF = Principal(kind="staff", all_content=True)


def lexical(text, **kwargs):
    kwargs.setdefault("limit", 20)
    kwargs.setdefault("threshold", 0.0)  # the full ranking: these tests are about order, not confidence
    return retrieve(query=RetrievalQuery(text=text, mode="lexical", **kwargs))


def titles(result):
    return [h.title for h in result.hits]


def test_chunks_with_every_term_rank_first_then_partial_by_rarity():
    # given: "tender" is common, "zebra" is rare
    for i in range(8):
        make_item(title=f"Filler {i}", body="A tender about roads and a tender about bridges.")
    make_item(title="Both", body="A tender about the zebra crossing.")
    make_item(title="Rare only", body="The zebra crossing near the school gate, zebra stripes.")
    make_item(title="Common only", body="This tender tender tender is about water supply.")
    build()
    # when
    result = lexical("zebra tender")
    # then
    assert titles(result)[0] == "Both"
    assert result.hits[0].lane_ranks == {"lexical": 1}
    assert titles(result).index("Rare only") < titles(result).index("Common only"), "missing a common term costs less"
    # and each partial hit says what it lacks, while the search is not partial: its first hit holds every word
    missing = {h.title: h.missing_words for h in result.hits}
    assert missing["Both"] == () and missing["Rare only"] == ("tender",) and missing["Common only"] == ("zebra",)
    assert result.partial_match is False


def test_complete_match_only_is_not_partial():
    make_item(title="Pricing guide", body="How we price a bid.")
    build()
    result = lexical("pricing guide")
    assert titles(result) == ["Pricing guide"]
    assert result.partial_match is False


def test_stem_and_written_form_match_in_one_query():
    # given: the stem (english) and the written form of the same word
    make_item(title="A", body="The consultants were writing responses.")
    make_item(title="B", body="She writes one response.")
    build()
    # when
    result = lexical("writing")
    # then: "writes" matches by stem, "writing" by both forms and ranks first
    assert set(titles(result)) == {"A", "B"}
    assert titles(result)[0] == "A"


def test_stemming_follows_item_language_and_ignores_stop_words():
    make_item(title="FR", body="Les offres publiques sont analysées.", language="fr")
    make_item(title="EN", body="The offers are analysed.", language="en")
    build()
    assert "FR" in titles(lexical("offre"))
    assert "EN" in titles(lexical("offer"))
    assert lexical("the of and").total == 0, "stop words alone are unsearchable"


@pytest.mark.parametrize("query, body", [("ecrit", "Un rapport écrit à la main."), ("resume", "Le résumé exécutif.")])
def test_accent_insensitive(query, body):
    make_item(title="Doc", body=body, language="fr")
    build()
    assert titles(lexical(query)) == ["Doc"]


def test_accented_query_finds_unaccented_text():
    make_item(title="Doc", body="The cafe menu and resume tips.")
    build()
    assert titles(lexical("résumé")) == ["Doc"]


def test_arabic_leading_conjunction_is_also_tried_stripped():
    make_item(title="وثيقة", body="المرحلة الخامسة من المشروع", language="ar")
    build()
    assert titles(lexical("والخامسة")) == ["وثيقة"]


def test_title_matches_written_word_not_stem():
    # given: forests (الغابات) and Gabon (الغابون) share a stem but are different words
    make_item(title="الغابون", body="دراسة حالة", language="ar")
    make_item(title="حماية الغابات", body="سياسة", language="ar")
    build()
    # when
    result = lexical("الغابات")
    # then
    assert titles(result) == ["حماية الغابات"]


def test_title_article_is_ignored_and_prefix_matches():
    make_item(title="L'offre technique", body="Contenu.", language="fr")
    make_item(title="Procurement handbook", body="Contents.")
    build()
    assert titles(lexical("offre")) == ["L'offre technique"]
    assert titles(lexical("procure")) == ["Procurement handbook"], "a query word matches the start of a title word"


def test_title_word_counts_more_than_body_keywords_or_type():
    make_item(title="Notes", body="Mentions of governance and governance again.")
    make_item(title="Governance", body="Other words entirely.")
    make_item(title="Keywords", body="Unrelated text.", ai_keywords=["governance"])
    build()
    assert titles(lexical("governance"))[0] == "Governance"


def test_newest_item_wins_a_tie():
    now = timezone.now()
    make_item(title="Same words", body="identical body", updated_at=now - timedelta(days=10))
    newer = make_item(title="Same words", body="identical body", updated_at=now)
    build()
    result = lexical("identical")
    assert result.hits[0].item_id == newer.pk


def test_archived_never_match_and_live_corpus_holds_published_only():
    make_item(title="Archived", body="falcon", archived_at=timezone.now())
    make_item(title="Draft", body="falcon", publish=False)
    make_item(title="Live", body="falcon")
    build()
    assert titles(lexical("falcon")) == ["Live"]
    assert set(titles(lexical("falcon", principal=STAFF, corpus="latest"))) == {"Live", "Draft"}


def test_superseded_items_are_out_unless_asked_for():
    new = make_item(title="Policy 2025", body="heron policy")
    make_item(title="Policy 2023", body="heron policy", superseded_by=new)
    build()
    assert titles(lexical("heron")) == ["Policy 2025"]
    assert set(titles(lexical("heron", filters=SearchFilters(include_superseded=True)))) == {
        "Policy 2025", "Policy 2023"}


def test_search_reads_statistics_and_counts_nothing(django_assert_max_num_queries):
    for i in range(5):
        make_item(title=f"Item {i}", body=f"osprey nest {i}")
    build()
    lexical("nest")  # warm the synonym cache
    # statistics + the readable-vocabulary probe (expansion.visible_df) + candidates from the postings + one
    # scoring query + hit hydration; no COUNT over the corpus
    with django_assert_max_num_queries(6) as captured:
        lexical("osprey")
    sql = " ".join(q["sql"] for q in captured.captured_queries).lower()
    assert "search_term_stats" in sql and "search_corpus_stats" in sql and "search_postings" in sql
    assert "ts_stat" not in sql and "count(*) from search_chunk" not in sql


def test_chunks_written_after_the_build_are_found_before_the_next_one():
    # given: a built index, then an item whose chunks got their columns but no statistics or postings yet
    from search.services import indexing

    make_item(title="Old", body="A note about harbours.")
    build()
    make_item(title="Fresh", body="The quokka census, island by island.")
    indexing.columns_build()
    # when
    result = lexical("quokka census")
    # then: found through the live indexes (chunk ids past the postings' snapshot)
    assert titles(result) == ["Fresh"]


def test_a_narrow_filter_past_the_pruned_candidates_still_finds_its_matches(settings, monkeypatch):
    # given: 25 strong matches in one domain and a weak one in another; a candidate pool of 20 chunks
    from search.engine import lexical as lexical_lane

    settings.SEARCH = {**settings.SEARCH, "LANE_DEPTH": 10}
    monkeypatch.setattr(lexical_lane, "CANDIDATES", 1)
    for i in range(25):
        make_item(title=f"Walrus {i}", body="walrus walrus walrus colony", primary_domain="arctic")
    make_item(title="Zoo map", body="The aquarium, the penguins and one walrus.", primary_domain="zoo")
    build()
    # when: the filter excludes every chunk of the pruned pool
    result = lexical("walrus", filters=SearchFilters(domain=("zoo",)), limit=5)
    # then: the lane noticed the pool ran dry and scored every match
    assert titles(result) == ["Zoo map"]


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_a_query_whose_words_have_no_title_form_searches_the_body_instead_of_failing(mode):
    # given: "les" is a title article (never a title form) but not a stop word, so the query has no title
    # lexeme at all and its title tsquery is the empty one ("''" was a PostgreSQL syntax error)
    make_item(title="Les Misérables", body="Les chapitres et les personnages.")
    make_item(title="Unrelated", body="Harbour logistics.")
    build()
    # when
    # (at the default floor: a neighbour only the vector lane found is not an answer)
    result = retrieve(query=RetrievalQuery(text="les", mode=mode))
    # then
    assert titles(result) == ["Les Misérables"]
