"""Management commands on a brand-new knowledge base (config/schema.py, called by manage.py): on the embedded
PostgreSQL the schema is brought up to date first; with DATABASE_URL a command refuses in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import psycopg
import pytest
from django.conf import settings
from django.core.management import get_commands

from config import schema

ROOT = Path(__file__).resolve().parents[2]
TINY_JSONL = '{"id": "guard-1", "title": "Lighthouse rota", "body": "Who keeps the light on which night."}\n'


def command_env(home: Path, **extra: str) -> dict[str, str]:
    """A fresh ``KB_HOME`` of its own (the test session's Valkey is shared: it holds no schema)."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "KB_HOME", "KB_EPHEMERAL", "DJANGO_SETTINGS_MODULE"}}
    env.update(KB_HOME=str(home), EMBEDDING_PROVIDER="hash", REDIS_URL=settings.REDIS_URL, **extra)
    return env


def start(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "manage.py", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def lines(text: str) -> list[str]:
    """Output lines, without the noise of libraries and the embedded servers' log lines."""
    return [line for line in text.splitlines()
            if line.strip() and "RuntimeDirWarning" not in line and "user_runtime_dir" not in line
            and " INFO " not in line and not line.startswith(("import:", "index:"))]


def test_import_and_search_work_the_first_time_on_a_new_knowledge_base(tmp_path):
    # given: a KB_HOME nothing has ever started, and a tiny file to import
    source = tmp_path / "tiny.jsonl"
    source.write_text(TINY_JSONL)
    env = command_env(tmp_path / "kb")
    # when: the first two commands ever run there, at the same time
    importing = start("import_content", str(source), "--format", "jsonl", "--publish", env=env)
    searching = start("kb_search", "x", "--json", env=env)
    imported_out, imported_err = importing.communicate(timeout=300)
    searched_out, searched_err = searching.communicate(timeout=300)
    # then: both work, and the schema was brought up to date once, saying so in one line
    assert importing.returncode == 0, imported_err
    assert searching.returncode == 0, searched_err
    assert "1 created" in imported_out
    assert json.loads(searched_out)["query"] == "x"
    said = [line for line in lines(imported_err + searched_err) if "up to date" in line]
    assert len(said) == 1 and said[0].startswith("Bringing the embedded database up to date ("), said
    # and the next command finds it current and says nothing about it
    again = start("kb_search", "light", "--json", env=env)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    assert [hit["external_id"] for hit in json.loads(out)["results"]] == ["guard-1"]
    assert not [line for line in lines(err) if "up to date" in line]


@pytest.fixture
def empty_database():
    """A new, empty database on the test session's PostgreSQL server; its URL."""
    server = urlparse(os.environ["DATABASE_URL"])
    name = f"kb_schema_guard_{os.getpid()}"
    admin = urlunparse(server._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    yield urlunparse(server._replace(path=f"/{name}"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_with_database_url_an_unmigrated_database_is_refused_in_one_line(tmp_path, empty_database):
    env = command_env(tmp_path / "kb", DATABASE_URL=empty_database)
    # when
    refused = start("kb_search", "x", "--json", env=env)
    out, err = refused.communicate(timeout=120)
    # then: one line, naming the fix; nothing migrated behind the owner's back
    assert refused.returncode == schema.EXIT_REFUSED
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert "manage.py migrate" in err and "DATABASE_URL" in err
    with psycopg.connect(empty_database) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0]
    assert tables == 0
    # a command that needs no tables still runs
    listed = start("showmigrations", "search", env=env)
    out, err = listed.communicate(timeout=120)
    assert listed.returncode == 0, err
    assert "[ ] 0001_initial" in out


def test_help_and_schema_commands_are_never_checked():
    assert schema.command_name(["manage.py"]) is None
    assert schema.command_name(["manage.py", "--help"]) is None
    assert schema.command_name(["manage.py", "kb_search", "--help"]) is None
    assert schema.command_name(["manage.py", "kb_search", "x"]) == "kb_search"
    assert {"migrate", "makemigrations", "showmigrations", "check", "help", "shell", "sqlmigrate",
            "collectstatic", "export_schema", "up"} <= schema.NO_SCHEMA_COMMANDS
    # every name on the list is a command (a typo there would check a command that needs no check)
    assert schema.NO_SCHEMA_COMMANDS - {"help", "version"} <= set(get_commands())
