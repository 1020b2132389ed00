"""Django's PostgreSQL backend, with one change for pooled sessions (web processes, ``DB_POOL_MAX_SIZE``).

psycopg_pool's ``getconn`` waits for a session as long as its timeout. While PostgreSQL is down no session
comes, and just after it comes back the pool is still waiting out its reconnection back-off: every request
would hang for seconds. Here the pool is asked for ``POOL_FIRST_WAIT_S`` only. If no session comes by then,
the request opens a connection of its own: refused at once when the server is down (the request answers
503 now, as it would without a pool), used for this request and closed at its end otherwise (the server is
back before the pool noticed, or every pooled session is busy).
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base

POOL_FIRST_WAIT_S = 0.25


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
            pass
        connection = self.Database.connect(**{"connect_timeout": 5, **conn_params})
        if self._configure_connection(connection):  # what the pool does for its own sessions
            connection.commit()
        return connection

    def _close(self) -> Any:
        own = self.connection is not None and getattr(self.connection, "_pool", None) is None
        if own and self.pool is not None:
            with self.wrap_database_errors:
                return self.connection.close()  # a request's own connection, not the pool's
        return super()._close()
