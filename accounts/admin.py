"""Accounts in the admin: user profiles, and API keys (create: the full key is shown once; see prefix, expiry,
last use; revoke).

Only the SHA-256 of a key and its visible prefix are stored (``accounts.api_keys``). The key is
shown on the page that answers the "add" form — never stored in a message, cookie or session.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers

from accounts.api_keys import api_key_issue, api_key_revoke
from accounts.models import ApiKey, UserProfile


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "prefix", "all_content", "status", "expires_at", "last_used_at", "created_at"]
    list_filter = ["all_content", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix", "user__username"]
    filter_horizontal = ["groups"]
    raw_id_fields = ["user"]
    actions = ["revoke"]
    ordering = ["-created_at"]

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> Any:
        if obj is None:
            return ["name", "user", "all_content", "groups", "expires_at"]
        return [
            "name",
            "user",
            "prefix",
            "all_content",
            "groups",
            "expires_at",
            "created_at",
            "last_used_at",
            "revoked_at",
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:
        if obj is None:
            return []
        # The scope of an issued key is fixed: issue a new key to change it.
        return ["prefix", "all_content", "groups", "created_at", "last_used_at", "revoked_at"]

    @admin.display(description="status")
    def status(self, obj: ApiKey) -> str:
        if obj.revoked_at:
            return "revoked"
        if obj.expires_at and obj.expires_at <= timezone.now():
            return "expired"
        return "active"

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        obj._raw_key = api_key_issue(api_key=obj)  # type: ignore[attr-defined]

    def response_add(
        self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None
    ) -> HttpResponse:
        raw_key = getattr(obj, "_raw_key", None)
        if raw_key is None:
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "API key created",
            "api_key": obj,
            "raw_key": raw_key,
            "changelist_url": reverse("admin:accounts_apikey_changelist"),
        }
        response = TemplateResponse(request, "admin/accounts/apikey_created.html", context)
        add_never_cache_headers(response)
        return response

    @admin.action(description="Revoke selected keys (they stop working at once)")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        revoked = sum(1 for key in queryset if api_key_revoke(api_key=key))
        self.message_user(request, f"Revoked {revoked} key(s).", messages.SUCCESS)


@admin.register(UserProfile)
class UserProfileAdmin(admin.ModelAdmin):
    list_display = ["user", "primary_focus"]
    list_filter = ["primary_focus"]
