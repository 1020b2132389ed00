import time
from datetime import date, timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.embeddings import providers, spaces
from search.engine import rerank, retrieve
from search.engine import vector as vector_service
from search.engine.fusion import rrf
from search.errors import EmbeddingModelMismatch, InvalidCursor, InvalidQuery
from search.models import Chunk, EmbeddingSpace
from search.principal import ANONYMOUS, Principal
from search.services import spaces as space_writes
from search.types import RetrievalQuery, SearchFilters
from tests.factories import build, make_item

STAFF = Principal(kind="staff", all_content=True)


def test_rrf_is_weighted_reciprocal_rank():
    scores = rrf([["a", "b"], ["b", "c"]], k=60, weights=[1.0, 2.0])
    assert scores["b"] == pytest.approx(1 / 62 + 2 / 61)
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["c"] == pytest.approx(2 / 62)
    with pytest.raises(ValueError):
        rrf([["a"]], k=0)
    with pytest.raises(ValueError):
        rrf([["a"]], weights=[1, 2])


@pytest.mark.django_db
def test_empty_or_unsearchable_query_returns_early_without_database(django_assert_num_queries):
    with django_assert_num_queries(0):
        assert retrieve(query=RetrievalQuery(text="   ")).total == 0
        assert retrieve(query=RetrievalQuery(text="the and of")).total == 0


@pytest.mark.django_db
def test_hybrid_reports_lanes_and_ranks():
    make_item(title="Bid writing guide", body="How to write a winning bid response.")
    make_item(title="Unrelated", body="Catering menus for events.")
    build()
    result = retrieve(query=RetrievalQuery(text="winning bid response", threshold=0.1))
    top = result.hits[0]
    assert top.title == "Bid writing guide"
    assert set(top.lanes) == {"lexical", "vector"}
    assert top.lane_ranks["lexical"] == 1 and top.lane_ranks["vector"] == 1
    assert top.passage_spans and top.passage[top.passage_spans[0].start : top.passage_spans[0].end].lower() in {
        "winning", "bid", "response"}


@pytest.mark.django_db
def test_vector_lane_filters_inside_the_scan_fill_the_limit():
    # given: many similar items in one domain, a few in a narrow domain
    for i in range(40):
        make_item(title=f"Compliance note {i}", body="security compliance audit evidence", primary_domain="compliance")
    for i in range(5):
        make_item(title=f"Pricing note {i}", body="security compliance audit evidence pricing",
                  primary_domain="pricing")
    build()
    # when
    result = retrieve(query=RetrievalQuery(text="security compliance audit", mode="vector", limit=5, threshold=0.0,
                                           filters=SearchFilters(domain=("pricing",))))
    # then
    assert len(result.hits) == 5
    assert all(h.primary_domain == "pricing" for h in result.hits)


@pytest.mark.django_db
def test_vector_lane_searches_with_the_configured_ef_search_and_still_fills_a_deeper_lane(settings):
    # given: 60 items, and an HNSW candidate list (ef_search) shorter than the lane depth asked for
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.SEARCH = {**settings.SEARCH, "HNSW_EF_SEARCH": 10}
    for i in range(60):
        make_item(title=f"Note {i}", body=f"harbour tide table number {i} for the quay")
    build()
    qvec = vector_service.query_embedding("harbour tide table")
    from search.engine.scope import ItemScope

    items_sql = ItemScope.of(ANONYMOUS).items_sql()
    # when
    with CaptureQueriesContext(connection) as queries:
        hits = vector_service.vector_search(vector=qvec, corpus="live", items_sql=items_sql, limit=40)
    # then: the graph search used the configured ef_search (not the depth), and the iterative scan went on
    # past it to the 40 rows asked for, nearest first
    assert any("set_config('hnsw.ef_search', '10', true)" in q["sql"] for q in queries.captured_queries)
    assert len(hits) == 40
    assert [h.similarity for h in hits] == sorted((h.similarity for h in hits), reverse=True)


@pytest.mark.django_db(transaction=True)
def test_vector_lane_sets_its_scan_settings_once_per_connection_and_notices_a_changed_active_space(settings):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from search.engine.scope import ItemScope
    from search.models import Chunk, EmbeddingSpace

    # given: a corpus, and a fresh database connection (autocommit, as in a request or a lane thread)
    for i in range(12):
        make_item(title=f"Note {i}", body=f"harbour tide table number {i} for the quay")
    build()
    qvec = vector_service.query_embedding("harbour tide table")
    items_sql = ItemScope.of(ANONYMOUS).items_sql()
    connection.close()

    def search() -> list:
        return vector_service.vector_search(vector=qvec, corpus="live", items_sql=items_sql, limit=5)

    def setting(name: str) -> str:
        with connection.cursor() as cursor:
            cursor.execute(f"SHOW {name}")
            return cursor.fetchone()[0]

    # when: three searches, the third after the configured ef_search changed
    with CaptureQueriesContext(connection) as queries:
        first, second = search(), search()
        settings.SEARCH = {**settings.SEARCH, "HNSW_EF_SEARCH": 30}
        third = search()
    # then: the settings went to the connection's session twice (first use, then the change), not per search
    sets = [q["sql"] for q in queries.captured_queries if "set_config('hnsw.ef_search'" in q["sql"]]
    assert len(sets) == 2 and "'30', false" in sets[1]
    assert (setting("hnsw.ef_search"), setting("hnsw.iterative_scan")) == ("30", "relaxed_order")
    assert len(first) == 5 and first == second == third
    # when: another process moved the corpus to another model (the active space changed under this one)
    active = list(EmbeddingSpace.objects.filter(active=True).values_list("pk", flat=True))
    EmbeddingSpace.objects.update(active=False)
    other = EmbeddingSpace.objects.create(model="other-model", dimensions=384, active=True)
    Chunk.objects.filter(pk=first[0].chunk_id).update(embedding_model="other-model")
    try:
        # then: the next search notices it in its own statement and refuses, as a fresh process would
        with pytest.raises(EmbeddingModelMismatch, match="reembed"):
            search()
    finally:
        # The closed connection left the test's transaction: what changed since is committed, so put the
        # active space back (a later test's searches would otherwise meet "other-model").
        Chunk.objects.filter(pk=first[0].chunk_id).update(embedding_model=spaces.lane_model())
        other.delete()
        EmbeddingSpace.objects.filter(pk__in=active).update(active=True)
        spaces.space_caches_forget()


@pytest.mark.django_db
def test_vector_threshold_drops_weak_matches():
    make_item(title="Alpha", body="kiwi mango papaya")
    build()
    strict = retrieve(query=RetrievalQuery(text="quantum chromodynamics lattice", mode="vector", threshold=0.9))
    assert strict.total == 0


@pytest.mark.django_db
def test_embedding_failure_degrades_to_lexical_within_budget(monkeypatch):
    make_item(title="Tender checklist", body="Checklist for tender submissions.")
    build()

    def hang(texts):
        time.sleep(5)
        return [[0.0]]

    provider = providers.get_provider()
    monkeypatch.setattr(provider, "embed", hang)
    with override_settings(EMBEDDING_BUDGET_S=0.3):
        started = time.monotonic()
        result = retrieve(query=RetrievalQuery(text="tender checklist unique words here", threshold=0.0))
        elapsed = time.monotonic() - started
    assert result.degraded == ("embedding_unavailable",)
    assert [h.title for h in result.hits] == ["Tender checklist"]
    assert elapsed < 1.5


@pytest.mark.django_db
def test_a_configured_model_that_differs_keeps_the_active_space_and_an_unknown_one_degrades(settings):
    make_item(title="A", body="text")
    build()
    settings.HASH_EMBEDDING_DIMENSIONS = 64
    providers._provider.cache_clear()
    try:
        # another configured model: searches keep the active space (the switch builds the new one beside it)
        assert space_writes.active_space().model == "hash-384"
        result = retrieve(query=RetrievalQuery(text="text"))
        assert not result.degraded and result.hits
        # a stored space no provider can embed queries for: lexical results, flagged, with the fix named
        EmbeddingSpace.objects.filter(active=True).update(model="word2vec-300")
        Chunk.objects.update(embedding_model="word2vec-300")
        spaces._known_spaces.clear()
        with pytest.raises(EmbeddingModelMismatch, match="reembed"):
            vector_service.query_embedding("text")
        result = retrieve(query=RetrievalQuery(text="text"))
        assert "embedding_model_mismatch" in result.degraded and result.hits
    finally:
        settings.HASH_EMBEDDING_DIMENSIONS = 384
        providers._provider.cache_clear()
        spaces._known_spaces.clear()


@pytest.mark.django_db
def test_paging_reaches_every_counted_hit_and_cursor_is_bound_to_query():
    for i in range(23):
        make_item(title=f"Harbour {i}", body="harbour logistics")
    build()
    seen, cursor = [], None
    while True:
        page = retrieve(query=RetrievalQuery(text="harbour", limit=10, cursor=cursor, mode="lexical"))
        seen += [h.item_id for h in page.hits]
        cursor = page.next_cursor
        if not cursor:
            break
    assert len(seen) == len(set(seen)) == page.total == 23
    first = retrieve(query=RetrievalQuery(text="harbour", limit=10, mode="lexical"))
    with pytest.raises(InvalidCursor):
        retrieve(query=RetrievalQuery(text="other words", limit=10, cursor=first.next_cursor))
    with pytest.raises(InvalidCursor):
        retrieve(query=RetrievalQuery(text="harbour", cursor="garbage!!"))


@pytest.mark.django_db
def test_pages_equal_one_long_page_although_only_reachable_candidates_are_reranked(monkeypatch):
    # given: hybrid hits whose rerank signals (title, summary, recency) move them across page edges
    words = ["tide", "crane", "berth", "quay", "pilot", "cargo", "ferry", "dock"]
    for i in range(45):
        make_item(
            title=f"Harbour tide logistics {i}" if i % 3 == 0 else f"{words[i % 8].title()} note {i}",
            body=" ".join(["harbour"] * (1 + (i * 7) % 5) + [words[(i * 5) % 8], words[(i * 3) % 8], "logistics"]),
            summary="harbour operations" if i % 5 == 0 else "",
            updated_at=timezone.now() - timedelta(days=(i * 7) % 90),
        )
    build()
    query = dict(text="harbour tide logistics", mode="hybrid", threshold=0.0)

    def pages() -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        long_page = retrieve(query=RetrievalQuery(limit=30, **query))
        assert {"lexical", "vector"} <= {lane for h in long_page.hits for lane in h.lanes}
        paged, cursor = [], None
        for _ in range(3):
            page = retrieve(query=RetrievalQuery(limit=10, cursor=cursor, **query))
            paged += [(h.item_id, h.score) for h in page.hits]
            cursor = page.next_cursor
        return paged, [(h.item_id, h.score) for h in long_page.hits]

    # then: every page is exactly the stretch of the long page it covers, scores included
    paged, long_page = pages()
    assert paged == long_page
    # and the corpus does exercise the cut: claiming no signal can lift a candidate breaks the pages
    monkeypatch.setattr(rerank, "max_factor", lambda: 1.0)
    paged, long_page = pages()
    assert paged != long_page


@pytest.mark.django_db
def test_won_citations_lift_an_item_and_pending_ones_do_not_count():
    from search.models import Citation

    # given: two items the lanes can hardly tell apart
    first = make_item(title="Tender note A", body="offshore tender evidence pack", updated_at=timezone.now())
    second = make_item(title="Tender note B", body="offshore tender evidence pack",
                       updated_at=timezone.now() - timedelta(minutes=1))
    build()
    query = RetrievalQuery(text="offshore tender evidence", mode="hybrid", threshold=0.0)
    before = {h.item_id: h.score for h in retrieve(query=query).hits}
    # when: the second has won 3 of its 4 decided bids (and one is pending)
    for ref, outcome in [("b1", "won"), ("b2", "won"), ("b3", "won"), ("b4", "lost"), ("b5", "pending")]:
        Citation.objects.create(item=second, bid_reference=ref, outcome=outcome)
    hits = retrieve(query=query).hits
    # then: its score is lifted by the win rate of 3/4 exactly; the other is unchanged
    after = {h.item_id: h.score for h in hits}
    assert after[second.pk] == pytest.approx(before[second.pk] * (1 + rerank.WIN_RATE_WEIGHT * 0.75), abs=2e-6)
    assert after[first.pk] == before[first.pk]


@pytest.mark.django_db
def test_facets_count_the_fused_set():
    make_item(title="One", body="lighthouse", primary_domain="marketing", content_type="guide")
    make_item(title="Two", body="lighthouse", primary_domain="marketing", content_type="policy")
    make_item(title="Three", body="lighthouse", primary_domain="pricing", content_type="guide")
    build()
    result = retrieve(query=RetrievalQuery(text="lighthouse", with_facets=True, mode="lexical", threshold=0.0))
    assert result.facets["domain"] == {"marketing": 2, "pricing": 1}
    assert result.facets["content_type"] == {"guide": 2, "policy": 1}


@pytest.mark.django_db
def test_chunk_granularity_returns_passages_with_toc_path():
    body = "# Intro\n\nGeneral words.\n\n## Pricing\n\n" + "Our pelican pricing model. " * 5
    make_item(title="Handbook", body=body)
    build()
    result = retrieve(query=RetrievalQuery(text="pelican", granularity="chunk", mode="lexical", threshold=0.0))
    assert result.hits[0].toc_path == "Intro > Pricing"
    assert result.hits[0].chunk_id is not None


@pytest.mark.django_db
def test_similar_to_excludes_itself_and_respects_access():
    seed = make_item(title="Seed", body="offshore wind farm maintenance contract")
    similar = make_item(title="Similar", body="offshore wind farm maintenance tender")
    make_item(title="Hidden", body="offshore wind farm maintenance", visibility="staff")
    make_item(title="Other", body="school catering menu")
    build()
    result = retrieve(query=RetrievalQuery(similar_to=seed.pk, threshold=0.2))
    ids = [h.item_id for h in result.hits]
    assert seed.pk not in ids and ids[0] == similar.pk
    assert "Hidden" not in [h.title for h in result.hits]


@pytest.mark.django_db
def test_validation_errors_name_the_field():
    with pytest.raises(InvalidQuery) as excinfo:
        retrieve(query=RetrievalQuery(text="x", limit=0))
    assert excinfo.value.field == "limit"
    with pytest.raises(InvalidQuery) as excinfo:
        retrieve(query=RetrievalQuery(text="x", threshold=2))
    assert excinfo.value.field == "threshold"


@pytest.mark.django_db
def test_signed_in_principal_cannot_request_drafts():
    make_item(title="Draft only", body="walrus", publish=False)
    build()
    user = Principal(kind="user", user_id=1)
    assert retrieve(query=RetrievalQuery(text="walrus", principal=user, corpus="latest")).total == 0
    assert retrieve(query=RetrievalQuery(text="walrus", principal=STAFF, corpus="latest")).total == 1


FILTERS = st.builds(
    SearchFilters,
    domain=st.lists(st.sampled_from(["pricing", "legal", "x"]), max_size=2).map(tuple),
    content_type=st.lists(st.sampled_from(["guide", "policy", "qa"]), max_size=2).map(tuple),
    language=st.sampled_from([None, "en", "fr"]),
    include_qa=st.booleans(),
    date_from=st.sampled_from([None, date(2000, 1, 1)]),
    freshness_days=st.sampled_from([None, 30, 3650]),
    overdue_review=st.sampled_from([None, True, False]),
    review_due_within_days=st.sampled_from([None, 1, 365]),
    include_superseded=st.booleans(),
    unread_only=st.booleans(),
)


@pytest.fixture
def access_corpus(db):
    """Items in every state, sharing the word 'secret' so every one would match.

    Made inside the test's transaction (``db``), so the rollback removes them: no TRUNCATE, which
    PostgreSQL refuses while deferred foreign-key checks of the same transaction are pending.
    """
    from tests.factories import make_item as mk

    made = []
    past = timezone.now().date() - timedelta(days=5)
    for domain in ("pricing", "legal"):
        for ctype in ("guide", "qa"):
            made.append(mk(title=f"Public {domain} {ctype}", body="secret plan", primary_domain=domain,
                           content_type=ctype, next_review_date=past, governance_review_status="review_overdue"))
            made.append(mk(title=f"Draft {domain} {ctype}", body="secret plan", publish=False,
                           primary_domain=domain, content_type=ctype))
            made.append(mk(title=f"Staff {domain} {ctype}", body="secret plan", visibility="staff",
                           primary_domain=domain, content_type=ctype))
            made.append(mk(title=f"Group {domain} {ctype}", body="secret plan", visibility="groups",
                           groups=["legal"], primary_domain=domain, content_type=ctype))
            made.append(mk(title=f"Signed {domain} {ctype}", body="secret plan", visibility="signed_in",
                           primary_domain=domain, content_type=ctype))
    build()
    return made


@pytest.mark.django_db
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(filters=FILTERS, mode=st.sampled_from(["hybrid", "lexical", "vector"]),
       granularity=st.sampled_from(["item", "chunk"]), corpus=st.sampled_from(["live", "latest"]))
def test_no_filter_combination_shows_drafts_or_restricted_to_anonymous(access_corpus, filters, mode, granularity,
                                                                        corpus):
    result = retrieve(query=RetrievalQuery(text="secret plan", principal=ANONYMOUS, corpus=corpus, filters=filters,
                                           mode=mode, granularity=granularity, threshold=0.0, limit=100,
                                           with_facets=True))
    assert all(h.title.startswith("Public") for h in result.hits), [h.title for h in result.hits]
    assert sum(result.facets.get("domain", {}).values()) == result.total


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "pinned"),
    [("hybrid", 10), ("lexical", 6), ("second_page", 10)],
)
def test_retrieve_query_count_is_pinned(django_assert_num_queries, name, pinned):
    """The exact queries a search takes today (lane threads are off inside a test transaction, so both lanes
    count here). Lexical: corpus statistics, readable vocabulary, candidates, the cut check, hit rows, passages
    (6); hybrid and its second page add the vector lane's savepoint, scan settings, scan and release (10). A change
    that adds a query fails this test: lower the pin when one goes, justify a rise."""
    # given: a small corpus, and a first search so per-connection settings and cached statistics are warm
    for i in range(12):
        make_item(title=f"Harbour crane {i}", body=f"Harbour logistics and crane berth number {i}.")
    make_item(title="Catering", body="Menus for events.")
    build()
    retrieve(query=RetrievalQuery(text="crane berth", threshold=0.1))
    first = retrieve(query=RetrievalQuery(text="harbour logistics", limit=5, threshold=0.1))
    assert first.next_cursor is not None
    query = {
        "hybrid": RetrievalQuery(text="harbour logistics", limit=5, threshold=0.1),
        "lexical": RetrievalQuery(text="harbour crane", limit=5, mode="lexical"),
        "second_page": RetrievalQuery(text="harbour logistics", limit=5, threshold=0.1, cursor=first.next_cursor),
    }[name]
    # when / then
    with django_assert_num_queries(pinned):
        result = retrieve(query=query)
    lanes = {lane for hit in result.hits for lane in hit.lanes}
    assert lanes == ({"lexical"} if name == "lexical" else {"lexical", "vector"})


def _vector_lookalikes(word: str, count: int) -> list[str]:
    """Made-up words the test embedder (feature hashing) puts close to ``word`` that share no letters' worth of
    words with it: the vector lane finds them near, the lexical lane never matches them."""
    embedder = providers.HashEmbedder()
    target = embedder.embed([word])[0]
    found = []
    for n in range(200_000):
        candidate = f"zq{n}x"
        if sum(a * b for a, b in zip(target, embedder.embed([candidate])[0], strict=True)) > 0.4:
            found.append(candidate)
            if len(found) == count:
                return found
    raise AssertionError("no look-alike words found")


@pytest.mark.django_db
def test_a_word_only_one_item_holds_puts_that_item_first_in_hybrid():
    # given items the vector lane puts nearer the word than its one holder (a long body, where it weighs little)
    lookalikes = _vector_lookalikes("quorvex", 2)
    for i in range(40):
        near = " ".join(lookalikes) if i % 3 == 0 else ""
        make_item(title=f"Delivery note {i}", body=f"Shipping schedule {near} route {i}.")
    filler = " ".join(f"word{n}" for n in range(300))
    holder = make_item(title="Weekly report", body=f"The audit named quorvex as the supplier at fault. {filler}")
    build()
    # when a hybrid search asks for that word (the lexical lane returns its one holder: it is complete)
    result = retrieve(query=RetrievalQuery(text="quorvex", principal=STAFF, mode="hybrid", threshold=0))
    # then the only item holding it comes first, though the vector lane ranks it below the look-alikes
    top = result.hits[0]
    assert top.item_id == holder.pk
    assert top.lane_ranks["lexical"] == 1 and top.lane_ranks.get("vector", 99) > 1
