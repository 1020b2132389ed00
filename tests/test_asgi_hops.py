"""Under ASGI (uvicorn serves the product), every middleware runs in Django's sync mode, in one thread hop.

A middleware that can only run sync, placed between ones that can run async, makes Django hand each step of
the async-capable ones below it to a thread and back. ``config.middleware.ReadYourWritesMiddleware`` is sync-only
and comes last in ``MIDDLEWARE``, so nothing runs async inside the chain: 5 hops a request instead of 8 (about
1-2 ms of every request here, docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref import sync
from django.conf import settings
from django.db import connections
from django.test import AsyncClient, override_settings
from django.utils.module_loading import import_string

# Django's sync code runs in asgiref's thread here, on its own connection, outside the test's transaction: the
# searches it logs are committed, so the tables are emptied after the test rather than rolled back.
pytestmark = pytest.mark.django_db(transaction=True)

BODY = json.dumps({"query": "pricing", "limit": 5})


def _hops(monkeypatch) -> int:
    """Thread hops (``sync_to_async`` calls) of one warm ``POST /api/search`` through Django's ASGI handler."""
    calls = [0]
    original = sync.SyncToAsync.__call__

    async def counting(self, *args, **kwargs):
        calls[0] += 1
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(sync.SyncToAsync, "__call__", counting)

    async def run() -> int:
        client = AsyncClient()
        assert (await client.post("/api/search", BODY, content_type="application/json")).status_code == 200
        calls[0] = 0
        assert (await client.post("/api/search", BODY, content_type="application/json")).status_code == 200
        hops = calls[0]
        # the thread Django's sync code ran in holds its own database connections: close them
        await sync.sync_to_async(connections.close_all)()
        return hops

    try:
        return asyncio.run(run())
    finally:
        monkeypatch.setattr(sync.SyncToAsync, "__call__", original)


def test_the_innermost_middleware_is_sync_only() -> None:
    last = import_string(settings.MIDDLEWARE[-1])
    assert getattr(last, "sync_capable", True) and not getattr(last, "async_capable", False)


def test_a_request_hops_threads_as_few_times_as_under_a_sync_chain(monkeypatch) -> None:
    shipped = _hops(monkeypatch)
    # the order before: ReadYourWrites above the message and clickjacking middleware, which then ran async
    before = [m for m in settings.MIDDLEWARE if not m.endswith("ReadYourWritesMiddleware")]
    before.insert(before.index("django.contrib.messages.middleware.MessageMiddleware"),
                  "config.middleware.ReadYourWritesMiddleware")
    with override_settings(MIDDLEWARE=before):
        mixed = _hops(monkeypatch)
    assert shipped <= 5
    assert mixed >= shipped + 3
