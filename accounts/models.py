"""Who uses the knowledge base: staff profiles and the API keys programs (MCP agents) authenticate with.

The search engine never reads these: every surface turns its caller into a ``search.principal.Principal``
(``accounts.api_keys.api_key_authenticate`` does it for a key) and the engine decides what it may read.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models


class UserProfile(models.Model):
    class Focus(models.TextChoices):
        BID_WRITING = "bid_writing", "Bid writing"
        ACCOUNT_MANAGEMENT = "account_management", "Account management"
        MARKETING = "marketing", "Marketing"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profile")
    primary_focus = models.CharField(max_length=30, choices=Focus.choices, blank=True)

    def __str__(self) -> str:
        return f"{self.user} ({self.primary_focus or 'unset'})"


class ApiKey(models.Model):
    """A key for programmatic access (MCP). Stored hashed; only the prefix is shown again."""

    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64)
    all_content = models.BooleanField(default=True, help_text="Read everything; otherwise only `groups`.")
    groups = models.ManyToManyField(Group, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="api_keys",
        help_text="The person the key acts for, for tools about their own things (MCP follow_news). The key's "
        "scope above still decides what it may read.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"
