"""What every read-only admin page shares: nothing can be added or edited there, and errors show one line."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written by the product (job runs, query logs, embedding spaces): admins read them, never edit."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def error_line(error: str, *, limit: int) -> str:
    """The first line of a stored error, at most ``limit`` characters ("" for none)."""
    return error.splitlines()[0][:limit] if error else ""
