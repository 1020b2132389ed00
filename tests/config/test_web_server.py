"""The web server as ``manage.py up`` runs it keeps idle connections longer than clients keep theirs.

httpx (and so the MCP SDK) drops an idle connection after 5 s; uvicorn's own default is also 5 s. When the
server closes first, a request a client sends on the connection at that moment is lost ("Server
disconnected without sending a response"): the restart-under-load test met it about once in four runs.
"""

from __future__ import annotations

import http.client
import time
from urllib.parse import urlsplit

import pytest
from django.db import connection

from config.runtime import KEEP_ALIVE_S, web_command
from tests.mcp_api.client import asgi_server

CLIENT_IDLE_S = 6.0  # past httpx's 5 s keep-alive expiry and uvicorn's default


def _get(conn: http.client.HTTPConnection) -> int:
    """One ``GET /healthz`` on ``conn``'s open connection (http.client never reopens one the server closed)."""
    conn.request("GET", "/healthz")
    response = conn.getresponse()
    response.read()
    return response.status


def test_web_command_sets_the_keep_alive() -> None:
    command = web_command(host="127.0.0.1", port=8123, workers=2)
    assert command[command.index("--timeout-keep-alive") + 1] == str(KEEP_ALIVE_S)
    assert command[command.index("--workers") + 1] == "2"
    assert KEEP_ALIVE_S > 60  # beyond httpx (5 s) and common load balancers (60 s)


@pytest.mark.django_db(transaction=True)
def test_an_idle_connection_is_still_served_after_the_client_keep_alive() -> None:
    # given: the product served as `up` serves it, and one connection that has answered a request
    with asgi_server(db_name=connection.settings_dict["NAME"]) as base_url:
        parts = urlsplit(base_url)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
        try:
            assert _get(conn) == 200
            opened = conn.sock
            # when: the connection stays idle longer than a client would keep it
            time.sleep(CLIENT_IDLE_S)
            # then: the server has not closed it: a second request on the same socket is answered
            assert _get(conn) == 200
            assert conn.sock is opened
        finally:
            conn.close()
