"""A replica that stops, or falls behind, under searches: no error, reads move to the primary and come back."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from django.test import Client

from search import replicas
from search.engine import retrieve
from search.types import RetrievalQuery
from tests.factories import build, make_item
from tests.support.replica import Replica, replica_db, server_reads, stop_under_load

pytestmark = replica_db


def _corpus() -> None:
    for i in range(8):
        make_item(title=f"Harbour crane manual {i}", body=f"Crane berth {i}: how the harbour cranes lift containers.")
    build()


def test_a_replica_stopped_under_load_costs_no_errors_and_is_used_again_once_back(
    replica: Replica, settings: Any, routed: list[tuple[float, str]]
) -> None:
    # given: a corpus on the replica, a probe every 0.2 s, and 4 threads searching without pause (two through
    # the JSON API with Django's test client, two calling retrieve(); lane threads on)
    settings.REPLICA_PROBE_S = 0.2
    _corpus()
    replica.wait_caught_up()
    replicas.replicas_reset()
    settings.RATELIMIT_ENABLE = False
    clients = [Client() for _ in range(4)]

    def search(number: int) -> tuple[bool, str]:
        if number % 2:
            response = clients[number].post("/api/search", data={"query": "harbour crane"},
                                            content_type="application/json", REMOTE_ADDR=f"10.0.0.{number}")
            return response.status_code == 200 and len(response.json()["results"]) == 8, f"HTTP {response.status_code}"
        result = retrieve(query=RetrievalQuery(text="harbour crane", threshold=0.1))
        return len(result.hits) == 8, f"{len(result.hits)} hits"

    # when: the replica stops (fast shutdown: its sessions are cut mid-read), stays down, and starts again
    outage = stop_under_load(replica, search, threads=4)
    # then: not one search failed or came back short; reads went to the primary while the replica was down,
    # and to the replica again within a few probes of it answering (0.2 s apart; 3 s allows a busy machine)
    assert outage.ok > 40 and not outage.errors, (outage.ok, outage.errors[:5])
    down = [alias for at, alias in routed if outage.stopped_at + 0.5 < at < outage.starting_at]
    assert down and set(down) == {"default"}, Counter(down)
    back = [at for at, alias in routed if at > outage.started_at and alias == "replica_1"]
    assert back and back[0] - outage.started_at < 3.0, (back[:1], outage.started_at)
    late = [alias for at, alias in routed if at > outage.started_at + 3.5]
    assert late and Counter(late)["replica_1"] == len(late), Counter(late)


def test_a_lagging_replica_is_skipped_past_the_limit_and_used_again_once_caught_up(
    replica: Replica, settings: Any, routed: list[tuple[float, str]]
) -> None:
    # given: a replica at most 1 s behind is used
    settings.REPLICA_MAX_LAG_S = 1.0
    _corpus()
    replica.wait_caught_up()
    assert replicas.replicas_probe()["replica_1"].healthy
    # when: its replay pauses while the primary keeps writing
    replica.pause_replay()
    make_item(title="Quay bollard inspection", body="Bollards on the quay are inspected.")
    build()
    deadline = time.monotonic() + 20
    while replicas.replicas_probe()["replica_1"].healthy:
        assert time.monotonic() < deadline, "the paused replica never counted as lagging"
        time.sleep(0.2)
    lag = replicas.replica_health()["replica_1"].lag_s
    routed.clear()
    skipped = retrieve(query=RetrievalQuery(text="bollard inspection", threshold=0.1))
    # then: past the limit reads go to the primary (which has the new item) ...
    assert lag is not None and lag > 1.0
    assert [alias for _, alias in routed] == ["default"]
    assert [hit.title for hit in skipped.hits] == ["Quay bollard inspection"]
    # ... and once the replica has replayed it, back to the replica
    replica.resume_replay()
    replica.wait_caught_up()
    assert replicas.replicas_probe()["replica_1"].healthy
    routed.clear()
    before = server_reads(replica.url, "search_chunk")
    back = retrieve(query=RetrievalQuery(text="bollard inspection", threshold=0.1))
    assert [alias for _, alias in routed] == ["replica_1"]
    assert [hit.title for hit in back.hits] == ["Quay bollard inspection"]
    assert server_reads(replica.url, "search_chunk") > before


def test_a_read_cut_off_on_the_replica_is_run_again_once_on_the_primary(replica: Replica) -> None:
    # given: a read whose session on the replica is terminated under it (what a replica restart does)
    attempts: list[str] = []

    def read() -> bool:
        attempts.append(replicas.read_alias())
        with replicas.read_connection().cursor() as cursor:
            if len(attempts) == 1:
                cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
            cursor.execute("SELECT pg_is_in_recovery()")
            return bool(cursor.fetchone()[0])

    # when
    in_recovery = replicas.replica_read(None, read)
    # then: it ran once more, on the primary; the replica is skipped until a probe finds it answering
    assert attempts == ["replica_1", "default"] and in_recovery is False
    assert replicas.healthy_replicas() == []
    assert replicas.replicas_probe()["replica_1"].healthy
    assert replicas.replica_read(None, lambda: replicas.read_alias()) == "replica_1"


def test_a_failing_query_on_the_replica_is_not_retried(replica: Replica) -> None:
    # given: a read that fails by its own fault (a bad statement), not the replica's
    attempts: list[str] = []

    def read() -> None:
        attempts.append(replicas.read_alias())
        with replicas.read_connection().cursor() as cursor:
            cursor.execute("SELECT no_such_column FROM search_chunk")

    # when / then: the error reaches the caller, the replica stays in use
    with pytest.raises(Exception, match="no_such_column"):
        replicas.replica_read(None, read)
    assert attempts == ["replica_1"]
    assert replicas.healthy_replicas() == ["replica_1"]


def test_a_restarted_replica_of_a_quiet_primary_is_used_again_without_waiting_for_a_write(
    replica: Replica, settings: Any
) -> None:
    # given: a replica caught up with a primary that then writes nothing for longer than the lag limit
    settings.REPLICA_MAX_LAG_S = 1.0
    _corpus()
    replica.wait_caught_up()
    time.sleep(1.5)
    # when: the replica restarts (its receive position starts again at the start of a WAL segment, behind what
    # it has replayed, and it has replayed no transaction since the restart)
    replica.stop(mode="fast")
    replica.start()
    started = time.monotonic()
    deadline = started + 20
    states = []
    while time.monotonic() < deadline:
        state = replicas.replicas_probe()["replica_1"]
        states.append((state.healthy, state.lag_s))
        if state.healthy:
            break
        time.sleep(0.2)
    # then: once it streams it counts as caught up (lag 0) and takes reads again, within a few probes; it does
    # not wait for the primary's next write (without one, PostgreSQL's own WAL comes every 15 s at best)
    assert states[-1] == (True, 0.0), states[-5:]
    assert time.monotonic() - started < 5.0, (time.monotonic() - started, len(states))
    assert replicas.replica_read(None, lambda: replicas.read_alias()) == "replica_1"
