"""Throwaway databases for ``evaluate`` and ``bench``: the user's knowledge base is never touched.

``scratch_database`` creates a fresh database on the configured PostgreSQL server (migrated like the
real one, through Django's test-database machinery), switches the default connection to it for the
duration, and drops it afterwards. With ``copy_embedding_cache`` the embedding cache is copied in, so
unchanged text is not embedded again, and new cache rows are copied back before the drop.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

from django.db import DatabaseError, connection
from django.test import override_settings

from search.engine.lanes import lane_pool_close
from search.errors import SearchError

# Scratch databases are recognisable by name; ``scratch_database`` refuses any other name, so a
# mistyped option can never migrate, fill or drop the user's database.
SCRATCH_NAME_RE = re.compile(r"^kb_(eval|bench)_[a-z0-9_]{1,40}$")


def _has_cache() -> bool:
    """Whether the current database holds an embedding cache (a server nothing was ever migrated on does not)."""
    return "search_embeddingcache" in connection.introspection.table_names()


def _cache_rows() -> list[tuple[str, str, str]]:
    if not _has_cache():
        return []
    with connection.cursor() as cursor:
        cursor.execute("SELECT model, text_hash, embedding::text FROM search_embeddingcache")
        return list(cursor.fetchall())


def _cache_insert(rows: list[tuple[str, str, str]]) -> None:
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 1000):
            cursor.executemany(
                "INSERT INTO search_embeddingcache (model, text_hash, embedding, created_at) "
                "VALUES (%s, %s, %s::vector, now()) ON CONFLICT DO NOTHING",
                rows[start : start + 1000],
            )


def scratch_database_exists(name: str) -> bool:
    with connection._nodb_cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        return cursor.fetchone() is not None


@contextmanager
def scratch_database(*, name: str, copy_embedding_cache: bool = False, keep: bool = False) -> Iterator[str]:
    """Switch the default connection to the migrated scratch database ``name``; yields its name.

    ``keep``: an existing database of that name is reused (migrated forward) and left in place at the
    end instead of dropped (``bench --keep-db``). Otherwise any database of that name is replaced and
    dropped on exit. ``name`` must look like ``kb_eval_…`` or ``kb_bench_…``.
    """
    if not SCRATCH_NAME_RE.match(name):
        raise SearchError(f"{name!r} is not a scratch database name (kb_eval_… or kb_bench_…, lower-case).")
    cached = _cache_rows() if copy_embedding_cache else []
    creation = connection.creation
    original_name = connection.settings_dict["NAME"]
    test_settings = connection.settings_dict.setdefault("TEST", {})
    original_test_name = test_settings.get("NAME")
    test_settings["NAME"] = name
    fresh: list[tuple[str, str, str]] = []
    # Lane threads keep connections open (search.engine.lanes): closed on the way in, so none stays on
    # the user's database while searches should run here, and on the way out, so the drop can proceed.
    lane_pool_close()
    # Replicas (DATABASE_REPLICA_URLS) hold the user's database, not this one: every read stays on the primary.
    no_replicas = override_settings(DATABASE_REPLICAS=())
    no_replicas.enable()
    try:
        creation.create_test_db(verbosity=0, autoclobber=True, serialize=False, keepdb=keep)
        try:
            if cached:
                _cache_insert(cached)
            yield name
        finally:
            # Also when the run failed or was interrupted (Ctrl-C): the embeddings it paid for are kept.
            if copy_embedding_cache:
                known = {(m, h) for m, h, _ in cached}
                try:
                    fresh = [row for row in _cache_rows() if (row[0], row[1]) not in known]
                except DatabaseError:  # the server went away: nothing to save, the drop below reports it
                    fresh = []
            lane_pool_close()
            creation.destroy_test_db(original_name, verbosity=0, keepdb=keep)
    finally:
        no_replicas.disable()
        test_settings["NAME"] = original_test_name
        if original_test_name is None:
            del test_settings["NAME"]
    if fresh and _has_cache():
        _cache_insert(fresh)


def database_url(name: str | None = None) -> str:
    """A ``postgresql://`` URL for database ``name`` (default: the current one) on the configured server,
    for a subprocess (e.g. a web server started by ``bench``) to use as ``DATABASE_URL``."""
    settings_dict = connection.settings_dict
    connection.ensure_connection()  # the embedded backend fills HOST/PORT/USER on first connection
    user = quote(str(settings_dict.get("USER") or ""), safe="")
    password = quote(str(settings_dict.get("PASSWORD") or ""), safe="")
    host = str(settings_dict.get("HOST") or "")
    port = str(settings_dict.get("PORT") or "")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    db = quote(name or str(settings_dict["NAME"]), safe="")
    if host.startswith("/"):  # a Unix socket folder goes in the query string
        return f"postgresql://{auth}localhost{':' + port if port else ''}/{db}?host={quote(host, safe='')}"
    return f"postgresql://{auth}{host or 'localhost'}{':' + port if port else ''}/{db}"


def scratch_database_drop(name: str) -> None:
    """Drop scratch database ``name`` if it exists (one ``scratch_database(keep=True)`` left)."""
    if not SCRATCH_NAME_RE.match(name):
        raise SearchError(f"{name!r} is not a scratch database name (kb_eval_… or kb_bench_…, lower-case).")
    lane_pool_close()
    with connection._nodb_cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def scratch_database_copy(*, template: str, name: str) -> None:
    """Create scratch database ``name`` as a copy of scratch database ``template`` (replacing any ``name``):
    PostgreSQL copies its files, minutes for a 100k-item corpus where building it again takes half an hour.
    Nothing may be connected to ``template`` meanwhile (this process's connections are closed first)."""
    for database in (template, name):
        if not SCRATCH_NAME_RE.match(database):
            raise SearchError(
                f"{database!r} is not a scratch database name (kb_eval_… or kb_bench_…, lower-case)."
            )
    lane_pool_close()
    connection.close()
    with connection._nodb_cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        # FILE_COPY: one checkpoint and a file copy, instead of writing a large database through the WAL
        cursor.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY = FILE_COPY')
