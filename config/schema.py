"""The schema is up to date before a ``manage.py`` command that needs it runs (``manage.py`` calls this).

On a ``KB_HOME`` that ``make run`` has never started, nothing has created the tables yet, and a command that
reads them (``import_content``, ``kb_search``, ``evaluate``, …) ended in ``relation "search_contentitem" does
not exist``. Now, before such a command runs:

- embedded PostgreSQL (no ``DATABASE_URL``): the knowledge base is this product's own, so unapplied
  migrations are applied, with one line on stderr saying so;
- ``DATABASE_URL``: someone else's server, migrated on their schedule: the command refuses in one line that
  says to run ``python manage.py migrate``, and exits with status 2.

Commands in ``NO_SCHEMA_COMMANDS`` (they never read this project's tables, or manage the schema themselves)
and ``--help`` run as they are, without a database connection.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Commands that run without this project's tables, or that manage the schema themselves (``migrate``, and
# ``up``, which migrates before anything else). Every other command is checked.
NO_SCHEMA_COMMANDS = frozenset({
    # Django: the schema itself, and what needs no tables
    "migrate", "makemigrations", "showmigrations", "sqlmigrate", "squashmigrations", "optimizemigration",
    "sqlflush", "sqlsequencereset", "inspectdb", "createcachetable", "check", "diffsettings", "help",
    "version", "shell", "dbshell", "startapp", "startproject", "makemessages", "compilemessages",
    "sendtestemail", "test", "testserver", "collectstatic", "findstatic",
    # this project and graphene: the GraphQL schema is code, not tables
    "up", "export_schema", "graphql_schema",
})
HELP_FLAGS = frozenset({"-h", "--help", "--version"})
EXIT_REFUSED = 2
# pg_advisory_lock key: two commands started at once on a new knowledge base migrate it once.
MIGRATE_LOCK_KEY = 0x6B625F6D  # "kb_m"


def command_name(argv: list[str]) -> str | None:
    """The subcommand ``manage.py`` is asked to run, or None for help and version requests."""
    args = argv[1:]
    if not args or args[0].startswith("-") or HELP_FLAGS & set(args[1:]):
        return None
    return args[0]


def _settings_from_argv(argv: list[str]) -> None:
    """Honour ``--settings`` and ``--pythonpath`` before the settings load, as Django's own parser does."""
    from django.core.management.base import CommandError, CommandParser, handle_default_options

    parser = CommandParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--settings")
    parser.add_argument("--pythonpath")
    parser.add_argument("args", nargs="*")
    try:
        options, _ = parser.parse_known_args(argv[2:])
    except CommandError:
        return  # Django reports the bad option itself
    handle_default_options(options)


def pending_migrations(connection: Any) -> list[str]:
    """``app.name`` of each migration not applied to ``connection``'s database, in the order they run."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [f"{migration.app_label}.{migration.name}" for migration, _backwards in plan]


@contextmanager
def _migrate_lock(connection: Any) -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [MIGRATE_LOCK_KEY])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [MIGRATE_LOCK_KEY])


def _refuse(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    raise SystemExit(EXIT_REFUSED)


def _migrations(count: int) -> str:
    return f"{count} migration" + ("" if count == 1 else "s")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def schema_ensure(argv: list[str]) -> None:
    """Before ``manage.py`` runs ``argv``: bring the embedded database's schema up to date, or refuse in one
    line when ``DATABASE_URL``'s lacks migrations (exit status 2). Commands that need no schema (and unknown
    commands, which Django reports) are left alone; so is a settings error, which Django reports too."""
    name = command_name(argv)
    if name is None or name in NO_SCHEMA_COMMANDS:
        return
    _settings_from_argv(argv)
    import django
    from django.core.exceptions import ImproperlyConfigured

    try:
        django.setup()
    except ImproperlyConfigured:
        return
    from django.conf import settings
    from django.core.management import CommandError, call_command, get_commands
    from django.db import DEFAULT_DB_ALIAS, OperationalError, connections

    if name not in get_commands():
        return
    connection = connections[DEFAULT_DB_ALIAS]
    embedded = settings.DATABASES[DEFAULT_DB_ALIAS]["ENGINE"] == "config.embedded_db"
    where = "the embedded PostgreSQL (under KB_HOME)" if embedded else "the database at DATABASE_URL"
    try:
        pending = pending_migrations(connection)
        if not pending:
            return
        if not embedded:
            _refuse(
                f"The database at DATABASE_URL lacks {_migrations(len(pending))} this version needs "
                f"(first: {pending[0]}): run `python manage.py migrate`, then try again."
            )
        with _migrate_lock(connection):
            pending = pending_migrations(connection)  # another command may have applied them meanwhile
            if pending:
                count = _migrations(len(pending))
                sys.stderr.write(f"Bringing the embedded database up to date ({count})…\n")
                sys.stderr.flush()
                call_command("migrate", interactive=False, verbosity=0)
    except OperationalError as error:
        _refuse(f"Cannot reach {where}: {_first_line(error)}")
    except CommandError as error:
        _refuse(f"Could not bring the schema up to date: {_first_line(error)} (`python manage.py migrate`).")
