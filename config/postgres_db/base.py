"""Django's PostgreSQL backend, with one change for pooled sessions (web processes, ``DB_POOL_MAX_SIZE``).

psycopg_pool's ``getconn`` waits for a session as long as its timeout, and while PostgreSQL is down no session
ever comes: every request would hang for the whole timeout before its 503. Here the pool is asked for
``POOL_FIRST_WAIT_S`` only; if none comes by then, a direct connection attempt tells whether the server is
down (refused at once: the request fails now, as without a pool) or only busy (then the request waits the
rest of the pool's timeout for a session, and the probe connection is closed).
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base

POOL_FIRST_WAIT_S = 1.0


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        pool = self.pool
        if pool is None or self.settings_dict["OPTIONS"].get("isolation_level") is not None:
            return super().get_new_connection(conn_params)
        from psycopg_pool import PoolTimeout

        pool.open()
        try:
            return pool.getconn(timeout=POOL_FIRST_WAIT_S)
        except PoolTimeout:
            probe = self.Database.connect(**{"connect_timeout": 2, **conn_params})  # raises when the server is down
            probe.close()
            return pool.getconn(timeout=max(pool.timeout - POOL_FIRST_WAIT_S, POOL_FIRST_WAIT_S))
