"""Signals: only bookkeeping that must follow a write wherever it happens (no indexing here)."""

from django.dispatch import Signal

# Sent by search.engine.retrieve after every search with ``query``, ``result`` and ``corpus``.
# Receivers (the query log, metrics) must be cheap and must never raise into the search.
search_performed = Signal()

# Sent by search.services.content when the term statistics become stale (with SEARCH_AUTO_BUILD on);
# search.receivers asks a worker for a debounced build.
index_marked_dirty = Signal()

# Sent by search.replicas once per read-only call (a search, a preview, a page's reads) with ``alias``, the
# database it ran on (``default`` or a replica; a read retried on the primary is sent again). /metrics counts it.
database_read = Signal()

# Sent by search.replicas after each replica probe or failure with ``alias``, ``healthy`` and ``lag_s``
# (seconds behind the primary; None when it did not answer).
replica_checked = Signal()
