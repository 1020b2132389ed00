"""Peers for federated search (docs/federation.md): add, list, remove, check."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from search.errors import SearchError
from search.federation import peers
from search.models import FederationPeer


class Command(BaseCommand):
    help = "Register other instances of this product as peers for federated search, list, remove or check them."

    def add_arguments(self, parser: Any) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        add = actions.add_parser("add", help="register a peer with a key it issued (manage.py api_key create there)")
        add.add_argument("name", help="how sources and badges name it: lowercase letters, digits, dashes")
        add.add_argument("base_url", help="its address, e.g. https://kb.emea.example.org")
        add.add_argument("--api-key", required=True,
                         help="the key the peer issued us; '-' reads it from standard input (keeps it out of "
                              "the shell history)")
        add.add_argument("--timeout-ms", type=int, default=800, help="give up on its answer after this long")
        add.add_argument("--groups", default="", help="comma-separated groups of our users who see its results")
        add.add_argument("--public", action="store_true", help="anonymous visitors see its results too")
        add.add_argument("--replace", action="store_true", help="change an existing peer of that name")
        actions.add_parser("list", help="the peers (never their key)")
        remove = actions.add_parser("remove", help="forget a peer and its key")
        remove.add_argument("name")
        check = actions.add_parser("check", help="ask each peer (or one) who it is, with our key")
        check.add_argument("name", nargs="?")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            getattr(self, f"_{opts['action']}")(opts)
        except SearchError as exc:
            raise CommandError(exc.message) from exc

    def _add(self, opts: dict[str, Any]) -> None:
        key = sys.stdin.readline().strip() if opts["api_key"] == "-" else opts["api_key"]
        peer = peers.peer_add(
            name=opts["name"], base_url=opts["base_url"], api_key=key, timeout_ms=opts["timeout_ms"],
            groups=opts["groups"].split(","), public=opts["public"], replace=opts["replace"],
        )
        self.stdout.write(f"Peer {peer.name} at {peer.base_url} (key {peer.api_key_prefix}…, stored encrypted). "
                          f"Check it: manage.py federation_peer check {peer.name}")

    def _list(self, opts: dict[str, Any]) -> None:
        rows = FederationPeer.objects.prefetch_related("groups")
        if not rows:
            self.stdout.write("No peers. Add one: manage.py federation_peer add NAME BASE_URL --api-key KEY")
        for peer in rows:
            seen_by = "anyone" if peer.public else (",".join(g.name for g in peer.groups.all()) or "signed-in users")
            state = "" if peer.enabled else " (disabled)"
            self.stdout.write(f"{peer.name}{state}  {peer.base_url}  key {peer.api_key_prefix}…  "
                              f"{peer.timeout_ms} ms  seen by {seen_by}  last check: {peer.check_status}"
                              + (f" ({peer.check_detail})" if peer.check_detail else ""))

    def _remove(self, opts: dict[str, Any]) -> None:
        peers.peer_remove(name=opts["name"])
        self.stdout.write(f"Removed peer {opts['name']}.")

    def _check(self, opts: dict[str, Any]) -> None:
        rows = list(FederationPeer.objects.all())
        if opts["name"]:
            rows = [p for p in rows if p.name == opts["name"]]
            if not rows:
                raise CommandError(f"No peer named {opts['name']!r}; `manage.py federation_peer list` shows them.")
        failed = False
        for peer in rows:
            status, ms, detail = peers.peer_check(peer=peer)
            failed |= status != "ok"
            self.stdout.write(f"{peer.name}: {status} in {ms} ms — {detail}")
        if failed:
            raise CommandError("At least one peer did not answer as it should (see above).")
