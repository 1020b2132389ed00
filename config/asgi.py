import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
# A web process: the settings cap each SQL statement at STATEMENT_TIMEOUT_MS (workers and commands are not).
os.environ.setdefault("KB_PROCESS_ROLE", "web")
from config.handlers import sync_chain_asgi_application  # noqa: E402 - after the settings module is chosen

# Django's ASGI handler with the whole request (middleware, view) in one thread hop (config/handlers.py).
_django_application = sync_chain_asgi_application()

from django.conf import settings  # noqa: E402 - loaded by sync_chain_asgi_application

from config.middleware import BoundedRequestBody  # noqa: E402
from search.embeddings.spaces import lane_warm_blocking  # noqa: E402

# The query-embedding model loads before this process accepts a request, so the first search after a start
# is hybrid (its embedding budget is for a slow provider, not for loading weights).
lane_warm_blocking()

application = BoundedRequestBody(_django_application, max_bytes=settings.MAX_REQUEST_BODY_BYTES)
