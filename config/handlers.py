"""The ASGI handler the product is served with: Django's, with the request handled in one thread hop.

Every view and middleware here is sync (the ORM is). Django's ``ASGIHandler`` builds its middleware chain
for async mode and adapts each sync step: the chain runs in a thread, calls back into the event loop for
the innermost async handler, which hands the view middleware and then the view to a thread again, each
hop a round trip through the loop (tests/test_asgi_hops.py lists them). This handler builds the chain in
Django's sync mode, as WSGI would, and runs ``get_response`` (every middleware, the URL resolution and
the view) in one ``sync_to_async`` call. Everything else (reading the body, the request signals, sending
and closing the response, streaming, a client disconnect cancelling the request) is Django's
``ASGIHandler`` unchanged. An ``async def`` view would still work: Django's sync path runs it with
``async_to_sync`` on the server's event loop.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.http import HttpRequest, HttpResponseBase


class SyncChainASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        BaseHandler.__init__(self)  # not ASGIHandler.__init__, which loads the chain in async mode
        self.load_middleware(is_async=False)

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        response: HttpResponseBase = await sync_to_async(self.get_response, thread_sensitive=True)(request)
        return response


def sync_chain_asgi_application() -> SyncChainASGIHandler:
    """``django.core.asgi.get_asgi_application`` with this handler."""
    import django

    django.setup(set_prefix=False)
    return SyncChainASGIHandler()
