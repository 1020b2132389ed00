"""Real product processes for the deployment tests: uvicorn web processes, Celery workers and beats.

Each runs in a process group of its own (``start_new_session``), logs to a file, and is stopped by the
``processes`` fixture (``tests/deploy/conftest.py``) whatever the test did: SIGTERM to the group, then SIGKILL,
so no worker's pool child or beat outlives the test.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

import httpx

from config.runtime import web_command

ROOT = Path(__file__).resolve().parents[2]
# Variables of the test session that must not leak into a product process.
_SESSION_ONLY = ("DJANGO_SETTINGS_MODULE", "KB_PROCESS_ROLE", "KB_EPHEMERAL", "KB_VALKEY_OWNER",
                 "DJANGO_ALLOW_ASYNC_UNSAFE", "PROMETHEUS_MULTIPROC_DIR", "DATABASE_REPLICA_URLS")


def wait_until(predicate: Callable[[], bool], *, timeout: float, what: str, interval: float = 0.1) -> float:
    """Poll ``predicate`` until true; returns the seconds it took. Fails the test after ``timeout``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if predicate():
            return time.monotonic() - started
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def product_env(
    *, database_url: str, redis_url: str, home: Path, replica_urls: list[str] | None = None, **extra: str
) -> dict[str, str]:
    """What every host of a deployment sets: the real settings (``config.settings.base``), one database, one
    Valkey, one SECRET_KEY (sessions and CSRF tokens must be valid on every host)."""
    env = {k: v for k, v in os.environ.items() if k not in _SESSION_ONLY}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings.base",
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "KB_HOME": str(home),
            "EMBEDDING_PROVIDER": "hash",
            "DEBUG": "0",
            "SECRET_KEY": secrets.token_urlsafe(64),
            "LOG_LEVEL": "WARNING",
        }
    )
    if replica_urls:
        env["DATABASE_REPLICA_URLS"] = ",".join(replica_urls)
    env.update(extra)
    return env


def database_url_for(db_name: str) -> str:
    """``DATABASE_URL`` (exported by the test settings) pointed at the test database (e.g. ``test_kb``)."""
    return urlparse(os.environ["DATABASE_URL"])._replace(path=f"/{db_name}").geturl()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class Proc:
    """One product process (its whole process group), logging to ``log``."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log = log_dir / f"{name}-{uuid.uuid4().hex[:6]}.log"
        self._handle = self.log.open("w")
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=self._handle, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_log(self, needle: str, *, timeout: float = 120) -> float:
        def seen() -> bool:
            if not self.alive():
                raise AssertionError(f"{self.name} exited ({self.proc.returncode}):\n{self.text()[-3000:]}")
            return needle in self.text()

        return wait_until(seen, timeout=timeout, what=f"{needle!r} from {self.name}", interval=0.1)

    def kill(self) -> None:
        """SIGKILL to the whole group: what a lost host or the OOM killer does (no cleanup runs)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=20)

    def terminate(self, timeout: float = 20) -> None:
        """SIGTERM (a graceful stop), then SIGKILL to the group for anything left."""
        if self.alive():
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group may still hold pool children
        except (ProcessLookupError, PermissionError):
            pass
        if self.proc.poll() is None:
            self.proc.wait(timeout=10)
        self._handle.close()


class Web(Proc):
    """``uvicorn config.asgi:application`` bound to ``host`` (a loopback address: 127.0.0.2, 127.0.0.3, …)."""

    def __init__(self, name: str, host: str, env: dict[str, str], log_dir: Path) -> None:
        self.host, self.port = host, free_port(host)
        self.base_url = f"http://{host}:{self.port}"
        super().__init__(
            name,
            web_command(host=host, port=self.port),
            env,
            log_dir,
        )

    def wait_ready(self, *, timeout: float = 120) -> None:
        """Until ``/readyz`` answers 200, as a load balancer would before routing here."""

        def ready() -> bool:
            if not self.alive():
                raise AssertionError(f"{self.name} exited:\n{self.text()[-3000:]}")
            try:
                return httpx.get(self.base_url + "/readyz", timeout=5).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(ready, timeout=timeout, what=f"{self.name} ready", interval=0.25)


def celery_argv(*args: str) -> list[str]:
    """``celery -A tests.deploy.celery_app …``: the product's app (``config.celery``) plus the test tasks."""
    return [sys.executable, "-m", "celery", "-A", "tests.deploy.celery_app", *args]


class Worker(Proc):
    """``celery worker`` with a prefork pool (``concurrency`` children), consuming the env's default queue."""

    def __init__(self, name: str, env: dict[str, str], log_dir: Path, *, concurrency: int = 1) -> None:
        self.nodename = f"{name}-{uuid.uuid4().hex[:4]}@{socket.gethostname()}"
        super().__init__(
            name,
            celery_argv("worker", "--loglevel", "INFO", "-P", "prefork", "-c", str(concurrency), "-n",
                        self.nodename, "--without-gossip", "--without-mingle", "--without-heartbeat"),
            env,
            log_dir,
        )

    def wait_ready(self, *, timeout: float = 120) -> None:
        self.wait_log("ready.", timeout=timeout)


class Beat(Proc):
    """``celery beat`` with its own schedule file (as on its own host); the scheduler is the settings'
    (``config.beat:LeaderScheduler``) unless ``scheduler`` names another."""

    def __init__(self, name: str, env: dict[str, str], log_dir: Path, *, scheduler: str | None = None) -> None:
        chosen = ["--scheduler", scheduler] if scheduler else []
        super().__init__(
            name,
            celery_argv("beat", "--loglevel", "INFO", "--schedule", str(log_dir / f"{name}-schedule"), *chosen),
            env,
            log_dir,
        )
