from __future__ import annotations

from typing import Any

from config import env, runtime
from config.postgres_db import base


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's PostgreSQL backend pointed at the embedded server, which it starts on first connection.

    Lazy so that commands that never touch the database (``help``, ``check``) start nothing. The
    database name stays whatever settings say (the test runner renames it to ``test_kb``).
    """

    def get_connection_params(self) -> dict[str, Any]:
        parsed = env.parse_database_url(runtime.ensure_postgres(env.kb_home()))
        self.settings_dict.update({key: parsed[key] for key in ("USER", "HOST", "PORT")})
        return super().get_connection_params()
