"""The product as ``manage.py up`` serves it (uvicorn, its own process, probe and pools) with
``DATABASE_REPLICA_URLS`` set: MCP and GraphQL read from the replica, and ``/metrics`` says so."""

from __future__ import annotations

import re

import httpx
from django.db import connection
from django.test import Client

from search import replicas
from search.engine import retrieve
from search.types import RetrievalQuery
from tests.factories import build, make_item
from tests.mcp_api.client import asgi_server, mcp_calls
from tests.support.replica import Replica, primary_url, replica_db, server_reads

pytestmark = replica_db

GRAPHQL = "query($q: String!) { search(input: {query: $q, threshold: 0.1}) { totalCount hits { itemId } } }"


def _metric(text: str, name: str, database: str) -> float | None:
    match = re.search(rf'^{name}{{database="{database}"}} (\S+)$', text, re.M)
    return float(match.group(1)) if match else None


def test_mcp_and_graphql_served_by_a_web_process_read_from_the_replica(replica: Replica) -> None:
    # given: a corpus on the replica, and the web app started with the replica configured
    items = [make_item(title=f"Harbour crane manual {i}", body=f"Crane berth {i}: harbour cranes lift containers.")
             for i in range(5)]
    build()
    replica.wait_caught_up()
    before = (server_reads(primary_url(), "search_chunk"), server_reads(replica.url, "search_chunk"))
    with asgi_server(db_name=connection.settings_dict["NAME"],
                     extra_env={"DATABASE_REPLICA_URLS": replica.url, "REPLICA_PROBE_S": "0.5"}) as base_url:
        # when: an agent finds, reads and checks quality over MCP, and a program searches over GraphQL
        found, read, quality = mcp_calls(base_url, [
            ("find", {"query": "harbour crane"}),
            ("read", {"item_id": items[0].pk}),
            ("quality", {"item_id": items[0].pk}),
        ])
        graphql = httpx.post(base_url + "/graphql", json={"query": GRAPHQL, "variables": {"q": "harbour crane"}})
        metrics = httpx.get(base_url + "/metrics").text
    after = (server_reads(primary_url(), "search_chunk"), server_reads(replica.url, "search_chunk"))
    # then: right answers, all chunk reads on the replica, and the process's /metrics counted them there
    assert not found.isError and found.structuredContent is not None
    assert len(found.structuredContent["results"]) == 5
    assert not read.isError and not quality.isError
    assert graphql.status_code == 200 and graphql.json()["data"]["search"]["totalCount"] == 5
    assert after[1] > before[1] and after[0] == before[0], (before, after)
    assert (_metric(metrics, "kb_db_reads_total", "replica_1") or 0) >= 4
    assert _metric(metrics, "kb_db_reads_total", "default") is None
    assert _metric(metrics, "kb_replica_lag_seconds", "replica_1") is not None
    assert _metric(metrics, "kb_replica_up", "replica_1") == 1.0


def test_metrics_show_reads_per_database_and_the_lag_of_each_replica(replica: Replica) -> None:
    # given: reads on the replica, and one on the primary (a principal who just wrote)
    make_item(title="Harbour crane manual", body="Harbour cranes lift containers.")
    build()
    replica.wait_caught_up()
    replicas.replicas_probe()
    client = Client()

    def scrape() -> str:
        return client.get("/metrics").content.decode()

    start = scrape()
    retrieve(query=RetrievalQuery(text="harbour crane"))
    client.get("/api/search/preview", {"q": "harb"})
    replicas.mark_written(keys=["user:42"])
    from search.principal import Principal

    retrieve(query=RetrievalQuery(text="harbour crane", principal=Principal(kind="user", user_id=42)))
    end = scrape()
    # then: per-database read counters moved by what ran where, and the replica's lag and state are shown

    def delta(database: str) -> float:
        return (_metric(end, "kb_db_reads_total", database) or 0) - (_metric(start, "kb_db_reads_total", database) or 0)

    assert delta("replica_1") == 2 and delta("default") == 1
    assert _metric(end, "kb_replica_lag_seconds", "replica_1") == 0.0
    assert _metric(end, "kb_replica_up", "replica_1") == 1.0
