from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from presets.models import Preset


@admin.register(Preset)
class PresetAdmin(admin.ModelAdmin):
    """System presets are read-only here too: they are created by a migration and never change."""

    list_display = ("name", "owner", "is_system", "created_at", "deleted_at")
    list_filter = ("is_system",)
    search_fields = ("name", "owner__username")
    raw_id_fields = ("owner",)
    readonly_fields = ("created_at", "updated_at")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return not (obj is not None and obj.is_system) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return not (obj is not None and obj.is_system) and super().has_delete_permission(request, obj)
