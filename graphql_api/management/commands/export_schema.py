"""Write the GraphQL schema (SDL) to docs/schema.graphql, or check that the file is current."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from graphql import print_schema

from graphql_api.schema import schema

DEFAULT_PATH = Path(settings.BASE_DIR) / "docs" / "schema.graphql"


def schema_sdl() -> str:
    """The schema as SDL, ending with one newline (what docs/schema.graphql holds)."""
    return print_schema(schema.graphql_schema).rstrip() + "\n"


class Command(BaseCommand):
    help = "Export the GraphQL schema to docs/schema.graphql (--check: fail when the file is stale)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--out", type=Path, default=DEFAULT_PATH, help="where to write the SDL")
        parser.add_argument("--check", action="store_true", help="do not write; exit 1 when the file differs")

    def handle(self, *args: Any, **opts: Any) -> None:
        path: Path = opts["out"]
        sdl = schema_sdl()
        if opts["check"]:
            current = path.read_text(encoding="utf-8") if path.exists() else ""
            if current != sdl:
                raise CommandError(
                    f"{path} is stale: run `python manage.py export_schema` and commit the file."
                )
            self.stdout.write(f"{path} is current.")
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(sdl, encoding="utf-8")
        self.stdout.write(f"Wrote {path} ({len(sdl.splitlines())} lines).")
