"""The database router: ORM reads of a read-only path go where ``search.replicas`` chose; the rest to the
primary.

- ``db_for_read``: inside ``replica_read`` its alias (a replica, or ``default``). Outside one, an object that
  was loaded from a replica reads its relations from the primary (a write path handed such an object must not
  read stale rows); anything else as Django decides (``default``).
- ``db_for_write``: always ``default``. Replicas are read-only.
- ``allow_migrate``: never on a replica (they stream the primary's schema).
- ``allow_relation``: objects of the primary and its replicas are the same rows.

With no ``DATABASE_REPLICA_URLS`` every answer is ``default`` or Django's own: nothing changes.
"""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS

from search import replicas


class ReplicaRouter:
    def db_for_read(self, model: type[Any], **hints: Any) -> str | None:
        alias = replicas.read_alias_set()
        if alias is not None:
            return alias
        instance = hints.get("instance")
        db = getattr(getattr(instance, "_state", None), "db", None)
        if db is not None and db in replicas.replica_aliases():
            return DEFAULT_DB_ALIAS
        return None

    def db_for_write(self, model: type[Any], **hints: Any) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        same = {DEFAULT_DB_ALIAS, *replicas.replica_aliases()}
        if obj1._state.db in same and obj2._state.db in same:
            return True
        return None

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None, **hints: Any) -> bool | None:
        if db in replicas.replica_aliases():
            return False
        return None
