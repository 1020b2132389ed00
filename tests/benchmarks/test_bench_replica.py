"""``bench --replica``: the server CPU it reports is the server's, and the report shows both runs side by side.
(The comparison itself, with a real replica and web servers, is what docs/benchmarks.md reports; its pieces are
tested here and in tests/replicas.)"""

from __future__ import annotations

import pytest
from django.db import connection

from benchmarks import bench_replica, bench_report


@pytest.mark.django_db
def test_the_cpu_of_the_primary_is_its_processes_own_and_grows_with_its_work() -> None:
    # given: the test database's server runs on this machine
    pid = bench_replica.server_pid()
    assert pid is not None
    before = bench_replica.server_cpu_s(pid)
    # when: it does some work
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM generate_series(1, 3000000)")
    after = bench_replica.server_cpu_s(pid)
    # then: its CPU seconds (postmaster, backends, exited backends) grew
    assert before is not None and after is not None and after > before
    assert bench_replica.server_cpu_s(None) is None


def _run(rps: float, primary_cpu: float, **extra: object) -> dict[str, object]:
    return {"requests": 1000, "errors": 0, "rps": rps, "p50_ms": 20.0, "p95_ms": 80.0, "p99_ms": 150.0,
            "primary_cpu_s": primary_cpu, "primary_cpu_ms_per_request": primary_cpu, **extra}


def test_the_report_puts_the_two_runs_side_by_side() -> None:
    compared = {
        "items": 2000,
        "single": _run(30.0, 40.0),
        "replica": _run(31.0, 2.0, replica_cpu_s=38.5, lag_max_s=0.012, reads_on_replicas_share=0.995),
        "primary_cpu_per_request_saved": 0.95,
    }
    results = {"sizes": {}, "replica": {"2000": compared}, "machine": {}, "options": {}, "build": {}}
    summary = bench_report.summary_table(results)
    assert "replica @2000: primary CPU per request saved: 95.0%" in summary
    assert "reads on the replica 99.5%" in summary
    markdown = bench_report.markdown(results)
    assert "### Reads on a replica (2000 items)" in markdown
    assert "| reads on a replica | 31.0 | 20.0 | 80.0 | 150.0 | 0 | 2.00 | 2.00 | 38.50 | 0.012 | 99.5% |" in markdown
    failed = {"sizes": {}, "replica": {"2000": {"items": 2000, "error": "pg_basebackup failed"}}}
    assert "no replica run: pg_basebackup failed" in bench_report.summary_table(failed)
