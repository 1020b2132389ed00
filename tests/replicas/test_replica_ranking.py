"""The build runs on the primary and reaches the replica by streaming: searches there rank exactly as on the
primary (same ids, same order) for a set of queries in every mode."""

from __future__ import annotations

import psycopg

from search import replicas
from search.engine import retrieve
from search.principal import ANONYMOUS, Principal
from search.services import indexing
from search.types import RetrievalQuery
from tests.factories import build, make_item
from tests.support.replica import Replica, primary_url, replica_db

pytestmark = replica_db

STAFF = Principal(kind="staff", all_content=True)
QUERIES = ("harbour crane", "crane berth containers", "quay safety", "menus", "tide tables harbour", "crane")
MODES = ("hybrid", "lexical", "vector")
TEXTS = [
    ("Harbour crane manual", "How the harbour cranes lift containers at each berth."),
    ("Crane berth allocation", "Berths are allocated to cranes by tonnage and by the tide tables."),
    ("Quay safety checklist", "Safety on the quay: helmets, vests and the crane exclusion zone."),
    ("Tide tables", "Tide tables for the harbour, updated every week."),
    ("Catering menus", "Menus for events and receptions at the harbour office."),
    ("Container stacking", "Stacking containers safely next to the crane rails."),
]


def _rankings() -> dict[tuple[str, str, str], list[int]]:
    out = {}
    for who, principal in (("anonymous", ANONYMOUS), ("staff", STAFF)):
        for text in QUERIES:
            for mode in MODES:
                result = retrieve(query=RetrievalQuery(text=text, principal=principal, mode=mode, threshold=0.0))
                out[(who, text, mode)] = [hit.item_id for hit in result.hits]
    return out


def _on(alias: str) -> dict[tuple[str, str, str], list[int]]:
    with replicas.reading_on(alias):
        return _rankings()


def _corpus_stats(url: str) -> tuple[object, ...]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT n_chunks, avg_body_len, max_chunk_id FROM search_corpus_stats").fetchone()
        terms = conn.execute("SELECT count(*), sum(df) FROM search_term_stats").fetchone()
    assert row is not None and terms is not None
    return (*row, *terms)


def test_the_statistics_refreshed_on_the_primary_reach_the_replica_and_rank_the_same(replica: Replica) -> None:
    # given: a corpus built on the primary, streamed to the replica
    for title, body in TEXTS:
        make_item(title=title, body=body)
    make_item(title="Crane draft", body="A crane draft only staff read.", publish=False)
    build()
    replica.wait_caught_up()
    # then: the statistics are the same on both, and so is every ranking
    assert _corpus_stats(replica.url) == _corpus_stats(primary_url())
    first = _on("default")
    assert any(first.values())
    assert _on("replica_1") == first
    # when: more content changes document frequencies and the statistics views are refreshed on the primary
    for i in range(4):
        make_item(title=f"Crane note {i}", body=f"Crane maintenance note {i} for the quay cranes.")
    indexing.columns_build()
    indexing.stats_refresh()
    replica.wait_caught_up()
    # then: the replica has the refreshed statistics, and ranks as the primary does, which now ranks differently
    assert _corpus_stats(replica.url) == _corpus_stats(primary_url())
    second = _on("default")
    assert second != first
    assert _on("replica_1") == second
