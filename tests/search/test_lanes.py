"""The vector lane beside the lexical lane (search.services.lanes): same results, own connections."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from search.services import lanes
from search.services.retrieve import retrieve
from search.types import RetrievalQuery
from tests.factories import build, make_item


@pytest.mark.django_db(transaction=True)
def test_hybrid_search_runs_the_vector_lane_in_a_lane_thread_with_the_same_results(settings: Any) -> None:
    # given: committed rows (a lane thread has its own connection and sees committed rows only)
    for i in range(6):
        make_item(title=f"Harbour guide {i}", body=f"Cranes, berths and tides in harbour {i}.")
    make_item(title="Bridge notes", body="Spans and tolls.")
    build()
    threads_used: list[str] = []
    submit = lanes.LanePool.submit

    def spy(self: lanes.LanePool, fn: Any) -> Any:
        def wrapped() -> Any:
            threads_used.append(threading.current_thread().name)
            return fn()

        return submit(self, wrapped)

    query = RetrievalQuery(text="harbour tides", limit=10)
    # when
    try:
        lanes.LanePool.submit = spy  # type: ignore[method-assign]
        side_by_side = retrieve(query=query)
    finally:
        lanes.LanePool.submit = submit  # type: ignore[method-assign]
    settings.SEARCH = {**settings.SEARCH, "LANE_THREADS": 0}
    one_after_the_other = retrieve(query=query)
    # then
    assert threads_used and threads_used[0].startswith("kb-lane-")
    assert [h.item_id for h in side_by_side.hits] == [h.item_id for h in one_after_the_other.hits]
    assert side_by_side.hits and {"lexical", "vector"} <= set(side_by_side.hits[0].lanes)


def test_a_busy_pool_hands_the_lane_back_to_the_caller_and_errors_reach_the_caller() -> None:
    pool = lanes.LanePool(1)
    release = threading.Event()
    try:
        first = pool.submit(release.wait)
        assert first is not None
        assert pool.submit(lambda: 1) is None  # every lane thread busy: run it yourself
        release.set()
        assert first.result(timeout=10) is True
        failing = pool.submit(lambda: 1 / 0)
        assert failing is not None
        with pytest.raises(ZeroDivisionError):
            failing.result(timeout=10)
        again = pool.submit(lambda: 2)  # the thread is free again after an error
        assert again is not None and again.result(timeout=10) == 2
    finally:
        release.set()
        pool.close()
