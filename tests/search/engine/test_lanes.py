"""The vector lane beside the lexical lane (search.engine.lanes): same results, own connections."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from search.engine import lanes, retrieve
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


@pytest.mark.django_db(transaction=True)
def test_rows_and_passages_read_while_the_vector_lane_runs_give_the_same_hits(settings: Any) -> None:
    from search.engine import page_rows as hit_rows
    from search.engine import passages

    # given: committed rows, and a vector lane slow enough that the lexical lane is done first
    for i in range(8):
        make_item(title=f"Harbour guide {i}", body=f"Cranes, berths and tides in harbour {i}.",
                  summary="harbour tides" if i % 2 else "")
    build()
    submit, item_rows, chunk_rows, make_passage = (
        lanes.LanePool.submit, hit_rows.item_rows, hit_rows.chunk_rows, passages.make_passage
    )
    lane_done = threading.Event()
    reads: list[tuple[str, bool, int]] = []  # (what, after the lane ended, how many)

    def slow(self: lanes.LanePool, fn: Any) -> Any:
        def wrapped() -> Any:
            time.sleep(0.3)
            try:
                return fn()
            finally:
                lane_done.set()

        return submit(self, wrapped)

    def spy(what: str, fn: Any) -> Any:
        def inner(ids: Any, *args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is threading.main_thread():
                reads.append((what, lane_done.is_set(), len(ids) if what != "passage" else 1))
            return fn(ids, *args, **kwargs)

        return inner

    query = RetrievalQuery(text="harbour tides", limit=5, threshold=0.0)
    # when
    try:
        lanes.LanePool.submit = slow  # type: ignore[method-assign]
        hit_rows.item_rows, hit_rows.chunk_rows = spy("items", item_rows), spy("chunks", chunk_rows)
        passages.make_passage = spy("passage", make_passage)
        overlapped = retrieve(query=query)
    finally:
        lanes.LanePool.submit = submit  # type: ignore[method-assign]
        hit_rows.item_rows, hit_rows.chunk_rows, passages.make_passage = item_rows, chunk_rows, make_passage
    settings.SEARCH = {**settings.SEARCH, "LANE_THREADS": 0}
    sequential = retrieve(query=query)
    # then: the lexical hits' items, and the chunks and passages of the lexical lane's first 5 keys, were
    # read before the vector lane ended; nothing a hit shows differs from a search that read them after
    ahead = [(what, n) for what, late, n in reads if not late]
    assert ("items", 8) in ahead and ("chunks", 5) in ahead
    assert sum(n for what, n in ahead if what == "passage") == 5
    assert overlapped.hits == sequential.hits and len(overlapped.hits) == 5
    assert overlapped.total == sequential.total


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
