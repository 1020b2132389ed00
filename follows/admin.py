from __future__ import annotations

from django.contrib import admin

from follows.models import Follow, FollowItem


@admin.register(Follow)
class FollowAdmin(admin.ModelAdmin):
    list_display = ("label", "owner", "query", "created_at", "last_run_at", "paused_reason")
    list_filter = (("paused_at", admin.EmptyFieldListFilter),)
    search_fields = ("label", "query", "owner__username")
    raw_id_fields = ("owner",)
    readonly_fields = ("created_at", "last_run_at", "shown", "paused_at")


@admin.register(FollowItem)
class FollowItemAdmin(admin.ModelAdmin):
    list_display = ("follow", "item", "kind", "revision_number", "rank", "found_at", "seen_at")
    list_filter = ("kind",)
    raw_id_fields = ("follow", "item")
