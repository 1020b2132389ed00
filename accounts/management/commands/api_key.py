"""API keys from the command line: ``create`` prints a new key once; ``list`` and ``revoke`` manage them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from accounts.api_keys import api_key_create, api_key_revoke
from accounts.models import ApiKey


def _groups(value: str) -> list[Group]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    found = {g.name: g for g in Group.objects.filter(name__in=names)}
    missing = [n for n in names if n not in found]
    if missing:
        raise CommandError(f"No group named {', '.join(missing)}; create it in the admin first.")
    return [found[n] for n in names]


class Command(BaseCommand):
    help = (
        "Create, list or revoke API keys (for agents over MCP and for peers' federated searches). "
        "A new key is printed once: copy it then."
    )

    def add_arguments(self, parser: Any) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="issue a key and print it once")
        create.add_argument("name", help="who or what uses the key, e.g. 'emea-kb federation'")
        create.add_argument("--all-content", action="store_true",
                            help="read every item (staff-only and group items too); default: public, signed-in "
                                 "and --groups items")
        create.add_argument("--groups", default="", help="comma-separated groups whose items the key reads")
        create.add_argument("--expires-days", type=int, default=0, help="expire after this many days (0: never)")
        actions.add_parser("list", help="the keys (never their secret)")
        revoke = actions.add_parser("revoke", help="revoke a key by its prefix (kb_xxxxxxxx)")
        revoke.add_argument("prefix")

    def handle(self, *args: Any, **opts: Any) -> None:
        action = opts["action"]
        if action == "create":
            if opts["expires_days"] < 0:
                raise CommandError("--expires-days must be 0 (never) or more.")
            if opts["all_content"] and opts["groups"]:
                raise CommandError("--all-content already reads every group's items; drop --groups or it.")
            expires = timezone.now() + timedelta(days=opts["expires_days"]) if opts["expires_days"] else None
            try:
                issued = api_key_create(name=opts["name"], all_content=opts["all_content"],
                                        groups=_groups(opts["groups"]), expires_at=expires)
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
            scope = "every item" if issued.api_key.all_content else (
                "public and signed-in items" + (f" and groups {opts['groups']}" if opts["groups"] else ""))
            self.stderr.write(f"Created key {issued.api_key.prefix} ({issued.api_key.name}; reads {scope}). "
                              "It is shown once, below:")
            self.stdout.write(issued.raw_key)
        elif action == "list":
            for key in ApiKey.objects.order_by("created_at").prefetch_related("groups"):
                state = "revoked" if key.revoked_at else ("expired" if key.expires_at and key.expires_at <=
                                                           timezone.now() else "active")
                scope = "all content" if key.all_content else ",".join(g.name for g in key.groups.all()) or "public"
                self.stdout.write(f"{key.prefix}  {state:<8} {scope:<20} {key.name}")
        else:
            found = ApiKey.objects.filter(prefix=opts["prefix"]).first()
            if found is None:
                raise CommandError(f"No key with prefix {opts['prefix']!r}; `manage.py api_key list` shows them.")
            api_key_revoke(api_key=found)
            self.stdout.write(f"Revoked {found.prefix} ({found.name}).")
