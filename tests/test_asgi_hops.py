"""Under ASGI (uvicorn serves the product) a request's middleware and view run in one thread hop.

Django's own ``ASGIHandler`` builds the middleware chain in async mode: the sync chain runs in a thread,
calls back into the event loop for the innermost handler, which hands the view middleware and the view to a
thread again. ``config.handlers.SyncChainASGIHandler`` builds it in sync mode and runs ``get_response`` in
one ``sync_to_async`` call (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from asgiref import sync
from django.core.handlers.asgi import ASGIHandler
from django.core.signals import request_finished
from django.db import connections
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.test import override_settings
from django.urls import include, path

from config.handlers import SyncChainASGIHandler

# Django's sync code runs in asgiref's thread here, on its own connection, outside the test's transaction: the
# searches it logs are committed, so the tables are emptied after the test rather than rolled back.
pytestmark = pytest.mark.django_db(transaction=True)

BODY = json.dumps({"query": "pricing", "limit": 5})


def _boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a view that fails")


def _stream(request: HttpRequest) -> StreamingHttpResponse:
    return StreamingHttpResponse(f"line {n}\n" for n in range(3))


async def _lines():
    for n in range(3):
        yield f"line {n}\n"


def _stream_async(request: HttpRequest) -> StreamingHttpResponse:
    return StreamingHttpResponse(_lines())


async def _async_view(request: HttpRequest) -> StreamingHttpResponse:
    return StreamingHttpResponse(_lines())


urlpatterns = [
    path("t/boom", _boom),
    path("t/stream", _stream),
    path("t/stream-async", _stream_async),
    path("t/async-view", _async_view),
    path("", include("config.urls")),
]


def _served(app, monkeypatch, requests: list[tuple[str, str]]) -> tuple[list[str], list[httpx.Response]]:
    """What the thread hops (``sync_to_async`` calls) of the last request ran, and every response."""
    hops: list[str] = []
    last: list[str] = []
    original = sync.SyncToAsync.__call__

    async def counting(self, *args, **kwargs):
        hops.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(sync.SyncToAsync, "__call__", counting)

    async def run() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
        responses = []
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            for method, path in requests:
                hops.clear()
                content = BODY if method == "POST" else None
                headers = {"content-type": "application/json"} if content else {}
                responses.append(await client.request(method, path, content=content, headers=headers))
                last[:] = hops
        return responses

    # Each request's sync code runs in a thread of its own (Django's ThreadSensitiveContext), on connections of
    # its own: closed as the request finishes, so none outlives the test.
    def close_connections(**kwargs) -> None:
        connections.close_all()

    request_finished.connect(close_connections, dispatch_uid="test_asgi_hops")
    try:
        responses = asyncio.run(run())
    finally:
        monkeypatch.setattr(sync.SyncToAsync, "__call__", original)
        request_finished.disconnect(dispatch_uid="test_asgi_hops")
    return last, responses


def test_a_request_runs_its_middleware_and_view_in_one_thread_hop(monkeypatch) -> None:
    search = [("POST", "/api/search"), ("POST", "/api/search")]  # the second one warm
    shipped, ours = _served(SyncChainASGIHandler(), monkeypatch, search)
    django, theirs = _served(ASGIHandler(), monkeypatch, search)
    # the same answer either way
    assert [r.status_code for r in ours] == [r.status_code for r in theirs] == [200, 200]
    assert ours[1].json()["results"] == theirs[1].json()["results"]
    # request_started, the whole chain with the view, the response's close
    assert len(shipped) == 3 and shipped[1] == "BaseHandler.get_response"
    # Django's handler also hands the view middleware and the view to a thread of their own
    assert "search_api" in django and len(django) >= len(shipped) + 2


def test_errors_and_redirects_come_back_as_under_django_handler(monkeypatch) -> None:
    requests = [("GET", "/api/search"), ("GET", "/no-such-page"), ("GET", "/browse")]
    _, ours = _served(SyncChainASGIHandler(), monkeypatch, requests)
    _, theirs = _served(ASGIHandler(), monkeypatch, requests)
    assert [r.status_code for r in ours] == [r.status_code for r in theirs]
    assert [r.status_code for r in ours[:2]] == [405, 404]
    # the same headers (a page's CSRF cookie and token differ by design), the same error bodies
    for mine, django in zip(ours, theirs, strict=True):
        assert sorted(mine.headers.keys()) == sorted(django.headers.keys())
        for name in ("content-type", "vary", "x-frame-options", "cache-control"):
            assert mine.headers.get(name) == django.headers.get(name)
    assert [r.content for r in ours[:2]] == [r.content for r in theirs[:2]]


@override_settings(ROOT_URLCONF=__name__)
@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators")
def test_failures_and_streams_come_back_as_under_django_handler(monkeypatch) -> None:
    requests = [("GET", "/t/boom"), ("GET", "/t/stream"), ("GET", "/t/stream-async"), ("GET", "/t/async-view")]
    _, ours = _served(SyncChainASGIHandler(), monkeypatch, requests)
    _, theirs = _served(ASGIHandler(), monkeypatch, requests)
    assert [r.status_code for r in ours] == [r.status_code for r in theirs] == [500, 200, 200, 200]
    assert [r.content for r in ours] == [r.content for r in theirs]
    assert ours[1].content == ours[2].content == ours[3].content == b"line 0\nline 1\nline 2\n"
