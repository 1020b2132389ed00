"""Reads on a real streaming replica: every read-only path lands there, counted by the servers themselves."""

from __future__ import annotations

import json

from django.test import Client

from search import replicas
from search.engine import lanes, retrieve
from search.models import ContentItem
from search.principal import ANONYMOUS
from search.selectors.revisions import item_quality, item_read
from search.types import RetrievalQuery
from tests.factories import build, make_item
from tests.support.replica import Replica, primary_url, replica_db, server_reads

pytestmark = replica_db

GRAPHQL = "query($q: String!) { search(input: {query: $q, threshold: 0.1}) { totalCount hits { itemId } } }"


def _corpus() -> list[ContentItem]:
    items = [
        make_item(title=f"Harbour crane manual {i}", body=f"Crane berth {i}: how the harbour cranes lift containers.")
        for i in range(6)
    ]
    items.append(make_item(title="Catering menus", body="Menus for events and receptions."))
    build()
    return items


def test_every_read_only_path_reads_from_the_replica_and_none_from_the_primary(replica: Replica) -> None:
    # given: a corpus committed on the primary and streamed to the replica
    items = _corpus()
    replica.wait_caught_up()
    replicas.replicas_probe()
    primary = primary_url()
    before = (server_reads(primary, "search_chunk"), server_reads(replica.url, "search_chunk"))
    client = Client()
    # when: a search through each surface, the live preview, an item page and the MCP read paths
    hybrid = retrieve(query=RetrievalQuery(text="harbour crane", threshold=0.1))
    lexical = retrieve(query=RetrievalQuery(text="crane berth", mode="lexical"))
    api = client.post("/api/search", data={"query": "harbour cranes"}, content_type="application/json")
    preview = client.get("/api/search/preview", {"q": "harb"})
    page = client.get("/search", {"q": "harbour"})
    item_page = client.get(items[0].get_absolute_url())
    graphql = client.post("/graphql", data={"query": GRAPHQL, "variables": {"q": "harbour"}},
                          content_type="application/json")
    read = item_read(principal=ANONYMOUS, item_id=items[0].pk)
    quality = item_quality(principal=ANONYMOUS, item_id=items[0].pk)
    after = (server_reads(primary, "search_chunk"), server_reads(replica.url, "search_chunk"))
    # then: every answer is right, the replica counted the chunk reads, the primary none
    assert hybrid.hits and lexical.hits and hybrid.hits[0].title.startswith("Harbour crane")
    assert api.status_code == 200 and api.json()["results"]
    assert preview.status_code == 200 and preview.json()["results"]
    assert page.status_code == 200 and b"manual 0" in page.content
    assert item_page.status_code == 200
    assert graphql.status_code == 200 and json.loads(graphql.content)["data"]["search"]["totalCount"] > 0
    assert read.item.pk == items[0].pk and quality.item.pk == items[0].pk
    assert after[1] - before[1] >= 7, (before, after)
    assert after[0] == before[0], (before, after)


def test_lane_threads_read_from_the_callers_database(replica: Replica) -> None:
    # given: the caller reads on the replica
    def where() -> tuple[str, bool]:
        with replicas.read_connection().cursor() as cursor:
            cursor.execute("SELECT pg_is_in_recovery()")
            return replicas.read_alias(), cursor.fetchone()[0]

    # when: a task runs on a lane thread
    with replicas.reading_on("replica_1"):
        future = lanes.lane_pool().submit(where)
        assert future is not None
        on_replica = future.result(timeout=30)
    off = lanes.lane_pool().submit(where)
    assert off is not None
    # then: it ran on the replica (a server in recovery), and on the primary for a caller outside a read
    assert on_replica == ("replica_1", True)
    assert off.result(timeout=30) == ("default", False)
