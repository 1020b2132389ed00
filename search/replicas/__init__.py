"""Reads on PostgreSQL replicas: which database a read runs on, the primary (``default``) or a streaming
replica (``DATABASE_REPLICA_URLS``).

The one place this is decided. A read-only path runs under ``replica_read(principal, fn)`` (or the
``replica_reads`` decorator): it picks an alias once, holds it in a context variable for the call, and every
statement the path issues goes there — the engine's raw SQL through ``read_connection()``, the ORM through the
database router (``config.db_router``), lane threads because ``lanes.LanePool`` runs each task in a copy of
the caller's context. Writes never look at it: the router sends them, like migrations, index builds and
view refreshes (plain ``django.db.connection``), to the primary.

The pick (``_choose``), in order:

1. no replicas configured → ``default``, and nothing else happens (no lookup, no query; the read is counted);
2. the caller is inside a transaction on the primary → ``default`` (its own uncommitted rows are there);
3. the principal changed content less than ``READ_YOUR_WRITES_S`` ago → ``default`` (read-your-writes; marks
   live in the shared cache, keyed by user id and API key id, so every web process sees them);
4. a healthy replica, at random → that replica; none → ``default``.

A replica is healthy when the last probe (every ``REPLICA_PROBE_S``, on a background thread per process,
with a connection of its own) reached it and found it at most ``REPLICA_MAX_LAG_S`` behind. A read that
fails on a replica (the server went away, refused the connection, or cancelled the statement for a recovery
conflict) marks it unhealthy until the next probe and is run again on another healthy replica, or on the
primary when no other is healthy (each database at most once, so a read runs at most replicas + 1 times);
only the outermost ``replica_read`` retries, so a nested read simply raises to it. A process's first read waits up to
``FIRST_PROBE_WAIT_S`` for the first probe; a replica no probe has found healthy is never used.

The package, below the engine (every lane reads through ``read_connection``):

- ``routing``: the pick and the retry (``replica_read``, ``replica_reads``, ``read_connection``, ``reading_on``);
- ``freshness``: read-your-writes (``request_scope``, ``note_write``, ``mark_written``, ``wrote_recently``);
- ``health``: the probes and each replica's last known state (``replica_health``, ``healthy_replicas``).

Callers use the names below, ``from search import replicas``.
"""

from search.replicas.freshness import (
    RequestScope,
    mark_written,
    note_write,
    principal_keys,
    request_scope,
    user_key,
    wrote_recently,
)
from search.replicas.health import (
    LAG_SQL,
    ReplicaHealth,
    healthy_replicas,
    replica_aliases,
    replica_health,
    replica_mark_down,
    replica_probe,
    replicas_probe,
)
from search.replicas.routing import (
    read_alias,
    read_alias_set,
    read_connection,
    reading_on,
    replica_failure,
    replica_read,
    replica_reads,
    replicas_reset,
)

__all__ = [
    "LAG_SQL",
    "ReplicaHealth",
    "RequestScope",
    "healthy_replicas",
    "mark_written",
    "note_write",
    "principal_keys",
    "read_alias",
    "read_alias_set",
    "read_connection",
    "reading_on",
    "replica_aliases",
    "replica_failure",
    "replica_health",
    "replica_mark_down",
    "replica_probe",
    "replica_read",
    "replica_reads",
    "replicas_probe",
    "replicas_reset",
    "request_scope",
    "user_key",
    "wrote_recently",
]
