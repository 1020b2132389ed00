"""The official MCP Python client over real streamable HTTP, with small sync wrappers for tests.

``mcp_find_ids(base_url, query, **args)`` is what the cross-surface contract test calls.
``asgi_server(...)`` starts the product's ASGI app under uvicorn on a free port (what ``manage.py up`` runs).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import anyio
import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from config.runtime import web_command

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]


def mcp_url(base_url: str) -> str:
    return base_url.rstrip("/") + "/mcp"


def _headers(api_key: str | None, headers: dict[str, str] | None) -> dict[str, str]:
    merged = dict(headers or {})
    if api_key:
        merged["Authorization"] = f"Bearer {api_key}"
    return merged


@contextlib.asynccontextmanager
async def mcp_session(
    base_url: str, *, api_key: str | None = None, headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized ``ClientSession`` against ``base_url``/mcp."""
    timeout = httpx.Timeout(30.0, read=60.0)
    async with httpx.AsyncClient(headers=_headers(api_key, headers), timeout=timeout) as http:
        async with streamable_http_client(mcp_url(base_url), http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def run(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    return anyio.run(fn, *args)


def mcp_call(
    base_url: str,
    tool: str,
    arguments: dict[str, Any],
    *,
    api_key: str | None = None,
    headers: dict[str, str] | None = None,
) -> CallToolResult:
    async def call() -> CallToolResult:
        async with mcp_session(base_url, api_key=api_key, headers=headers) as session:
            return await session.call_tool(tool, arguments)

    return run(call)


def mcp_calls(
    base_url: str,
    calls: list[tuple[str, dict[str, Any]]],
    *,
    api_key: str | None = None,
    headers: dict[str, str] | None = None,
) -> list[CallToolResult]:
    """Several tool calls in one session, in order."""

    async def call_all() -> list[CallToolResult]:
        async with mcp_session(base_url, api_key=api_key, headers=headers) as session:
            return [await session.call_tool(tool, arguments) for tool, arguments in calls]

    return run(call_all)


def mcp_find_ids(base_url: str, query: str, **args: Any) -> list[int]:
    """Item ids of one ``find`` page, in rank order. ``api_key=`` is sent as a Bearer key, not an argument."""
    api_key = args.pop("api_key", None)
    result = mcp_call(base_url, "find", {"query": query, **args}, api_key=api_key)
    if result.isError:
        raise AssertionError(f"find failed: {result.content[0].text if result.content else result}")
    assert result.structuredContent is not None
    return [hit["item_id"] for hit in result.structuredContent["results"]]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def database_url_for(db_name: str) -> str:
    """``DATABASE_URL`` (exported by the test settings) pointed at another database, e.g. ``test_kb``."""
    parsed = urlparse(os.environ["DATABASE_URL"])
    return parsed._replace(path=f"/{db_name}").geturl()


def spawn_uvicorn(env: dict[str, str], *, workers: int = 1, stdout: Any = None) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``uvicorn config.asgi:application`` as ``manage.py up`` does, in its own process group, with
    ``env`` on top of this process's environment; returns the process and its base URL (not yet ready:
    each caller waits for what it needs)."""
    port = free_port()
    proc = subprocess.Popen(
        web_command(host="127.0.0.1", port=port, workers=workers),
        cwd=ROOT,
        env={**os.environ, **env},
        start_new_session=True,
        stdout=stdout,
        stderr=subprocess.STDOUT if stdout is not None else None,
    )
    return proc, f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def asgi_server(
    *, db_name: str, startup_timeout: float = 60.0, extra_env: dict[str, str] | None = None
) -> Iterator[str]:
    """Run ``uvicorn config.asgi:application`` against database ``db_name``; yields its base URL.

    Use with ``@pytest.mark.django_db(transaction=True)`` so the server sees the rows a test commits.
    """
    proc, base_url = spawn_uvicorn(
        {
            "DATABASE_URL": database_url_for(db_name),
            "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "config.settings.test"),
            "CONN_MAX_AGE": "0",  # hold no connection, so the test database can be dropped at the end
            "LOG_LEVEL": os.environ.get("MCP_TEST_SERVER_LOG_LEVEL", "WARNING"),
            **(extra_env or {}),
        }
    )
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"uvicorn exited with {proc.returncode} before serving")
            try:
                httpx.get(base_url + "/admin/login/", timeout=1.0)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"uvicorn did not answer within {startup_timeout} s") from None
                time.sleep(0.2)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
