"""Two streaming replicas: reads spread over both, and one that stops or fails moves its reads to the other."""

from __future__ import annotations

from collections import Counter
from typing import Any

from search import replicas
from search.engine import retrieve
from search.types import RetrievalQuery
from tests.factories import build, make_item
from tests.support.replica import Replica, primary_url, server_reads, stop_under_load, two_replicas_db

pytestmark = two_replicas_db

QUERY = RetrievalQuery(text="harbour crane", threshold=0.1)


def _corpus(servers: tuple[Replica, Replica]) -> None:
    for i in range(6):
        make_item(title=f"Harbour crane manual {i}", body=f"Crane berth {i}: how the harbour cranes lift containers.")
    build()
    for server in servers:
        server.wait_caught_up()
    replicas.replicas_probe()


def test_reads_spread_over_both_replicas_and_none_reach_the_primary(
    two_replicas: tuple[Replica, Replica], routed: list[tuple[float, str]]
) -> None:
    # given: a corpus streamed to both replicas
    first, second = two_replicas
    _corpus(two_replicas)
    primary = primary_url()
    before = [server_reads(url, "search_chunk") for url in (primary, first.url, second.url)]
    routed.clear()
    # when: 40 searches
    results = [retrieve(query=QUERY) for _ in range(40)]
    after = [server_reads(url, "search_chunk") for url in (primary, first.url, second.url)]
    # then: every search is whole; both replicas served some (counted by the servers), the primary none
    assert all(len(result.hits) == 6 for result in results)
    picks = Counter(alias for _, alias in routed)
    assert set(picks) == {"replica_1", "replica_2"} and min(picks.values()) >= 5, picks
    assert after[1] > before[1] and after[2] > before[2], (before, after)
    assert after[0] == before[0], (before, after)


def test_a_stopped_replica_sends_its_reads_to_the_other_not_to_the_primary(
    two_replicas: tuple[Replica, Replica], settings: Any, routed: list[tuple[float, str]]
) -> None:
    # given: 3 threads searching without pause, a probe every 0.2 s
    first, _ = two_replicas
    settings.REPLICA_PROBE_S = 0.2
    settings.RATELIMIT_ENABLE = False
    _corpus(two_replicas)
    replicas.replicas_reset()

    def search(number: int) -> tuple[bool, str]:
        hits = len(retrieve(query=QUERY).hits)
        return hits == 6, f"{hits} hits"

    # when: replica_1 stops (fast shutdown: its sessions are cut mid-read) and starts again 3 s later
    outage = stop_under_load(first, search, threads=3)
    # then: no search failed or came back short; while replica_1 was down its reads went to replica_2 (the
    # primary got none), and replica_1 took reads again within a few probes of answering
    assert outage.ok > 30 and not outage.errors, (outage.ok, outage.errors[:5])
    down = Counter(alias for at, alias in routed if outage.stopped_at + 0.5 < at < outage.starting_at)
    assert down and set(down) == {"replica_2"}, down
    back = Counter(alias for at, alias in routed if at > outage.started_at + 3.5)
    assert back["replica_1"] and back["replica_2"] and not back["default"], back


def test_a_read_cut_off_on_one_replica_runs_again_on_the_other_then_on_the_primary(
    two_replicas: tuple[Replica, Replica],
) -> None:
    # given: a read whose session is terminated under it on the first database it runs on, or on the first two
    def cut_off(times: int) -> tuple[list[str], bool]:
        attempts: list[str] = []

        def read() -> bool:
            attempts.append(replicas.read_alias())
            with replicas.read_connection().cursor() as cursor:
                if len(attempts) <= times:
                    cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
                cursor.execute("SELECT pg_is_in_recovery()")
                return bool(cursor.fetchone()[0])

        return attempts, replicas.replica_read(None, read)

    # when / then: cut once, it runs again on the other replica (a server in recovery), not on the primary
    attempts, in_recovery = cut_off(1)
    assert sorted(attempts) == ["replica_1", "replica_2"] and in_recovery is True
    assert replicas.healthy_replicas() == [alias for alias in ("replica_1", "replica_2") if alias != attempts[0]]
    # cut on both replicas, it ends on the primary: each database once
    replicas.replicas_probe()
    attempts, in_recovery = cut_off(2)
    assert sorted(attempts[:2]) == ["replica_1", "replica_2"] and attempts[2:] == ["default"]
    assert in_recovery is False and replicas.healthy_replicas() == []
    assert sorted(replicas.replicas_probe()) == ["replica_1", "replica_2"]
    assert replicas.healthy_replicas() == ["replica_1", "replica_2"]
