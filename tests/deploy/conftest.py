"""Fixtures of the deployment tests: product processes that are always stopped, and the replica seam."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.processes import Beat, Proc, Web, Worker

LOG_TAIL_CHARS = 6000  # of each process's log, printed when its test fails


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    """Keep each phase's report on the item, so a fixture can tell whether its test failed."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


class Processes:
    """Starts product processes for one test and stops every one of them (and their groups) at its end."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[Proc] = []

    def web(self, name: str, host: str, env: dict[str, str]) -> Web:
        return self._keep(Web(name, host, env, self.log_dir))

    def worker(self, name: str, env: dict[str, str], **kwargs: Any) -> Worker:
        return self._keep(Worker(name, env, self.log_dir, **kwargs))

    def beat(self, name: str, env: dict[str, str], **kwargs: Any) -> Beat:
        return self._keep(Beat(name, env, self.log_dir, **kwargs))

    def _keep(self, proc: Any) -> Any:
        self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.started):
            proc.terminate()

    def logs(self) -> str:
        """Every process's log (its tail): what the processes said, for a failed test's report."""
        parts = []
        for proc in self.started:
            text = proc.text() if proc.log.exists() else ""
            cut = "[…]\n" if len(text) > LOG_TAIL_CHARS else ""
            parts.append(f"----- {proc.name} ({proc.log.name}) -----\n{cut}{text[-LOG_TAIL_CHARS:]}")
        return "\n".join(parts)


@pytest.fixture
def processes(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Processes]:
    """The test's processes, stopped at its end; when the test failed, their logs go into its report (CI keeps
    nothing else of them: the log files are in the test's temporary directory)."""
    running = Processes(tmp_path)
    try:
        yield running
    finally:
        running.stop_all()
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            report.sections.append(("product processes' logs", running.logs()))


@pytest.fixture
def replica_urls(django_db_setup: None, django_db_blocker: Any) -> Iterator[list[str]]:
    """One streaming replica of the test database (``tests.support.replica``: ``pg_basebackup`` from the
    session's server), given to every product process as ``DATABASE_REPLICA_URLS``: the many-hosts test runs
    against one primary and this replica. Stopped and deleted after the test."""
    from tests.support.replica import primary_url, start_replica

    with django_db_blocker.unblock():
        replica = start_replica(primary_url())
    try:
        yield [replica.url]
    finally:
        replica.destroy()
