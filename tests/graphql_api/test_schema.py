"""docs/schema.graphql is the exported schema; this fails (in CI too) when it is stale."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from graphql_api.management.commands.export_schema import schema_sdl

SCHEMA_FILE = Path(settings.BASE_DIR) / "docs" / "schema.graphql"


def test_docs_schema_graphql_is_current() -> None:
    # given the checked-in SDL and the live schema
    checked_in = SCHEMA_FILE.read_text(encoding="utf-8") if SCHEMA_FILE.exists() else ""
    # then they are the same; if not, run: python manage.py export_schema
    assert checked_in == schema_sdl(), "docs/schema.graphql is stale: run `python manage.py export_schema`"


def test_schema_has_the_promised_root_fields() -> None:
    sdl = schema_sdl()
    for signature in (
        "search(input: SearchInput!): SearchResult!",
        "notePaths(filter: NotePathsFilterInput): [String!]!",
        "item(id: ID, slug: String, corpus: Corpus = LIVE): Item",
        "presets: [Preset!]!",
        "recentSearches: [String!]!",
        "presetCreate(input: PresetCreateInput!): PresetCreate",
        "recentSearchesClear: RecentSearchesClear",
    ):
        assert signature in sdl, signature


def test_export_schema_writes_and_checks(tmp_path: Path) -> None:
    # given an empty target
    target = tmp_path / "schema.graphql"
    # when --check runs before the export, then it fails naming the fix
    with pytest.raises(CommandError, match="export_schema"):
        call_command("export_schema", "--check", "--out", str(target), stdout=StringIO())
    # when the export runs, then the file holds the SDL and --check passes
    call_command("export_schema", "--out", str(target), stdout=StringIO())
    assert target.read_text(encoding="utf-8") == schema_sdl()
    out = StringIO()
    call_command("export_schema", "--check", "--out", str(target), stdout=out)
    assert "is current" in out.getvalue()
