"""Peers: register, remove, check, and which of them a caller may see (docs/federation.md)."""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from search.errors import SearchError
from search.federation import client
from search.federation.secrets import secret_decrypt, secret_encrypt
from search.models import FederationPeer
from search.principal import Principal

logger = logging.getLogger(__name__)

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,49}$")
RESERVED_NAMES = frozenset({"local", "all"})
KEY_RE = re.compile(r"^(kb_[0-9a-f]{8})_[A-Za-z0-9_-]{32,64}$")


class PeerInvalid(SearchError):
    code = "invalid_peer"


def name_clean(name: str) -> str:
    if not NAME_RE.match(name):
        raise PeerInvalid(
            f"Peer name {name!r} is not valid: use 1-50 lowercase letters, digits and dashes (e.g. emea-kb).",
            field="name",
        )
    if name in RESERVED_NAMES:
        raise PeerInvalid(f"Peer name {name!r} is reserved (it names a choice in `sources`); pick another.",
                          field="name")
    return name


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def base_url_clean(url: str) -> str:
    """An https address (http only on this machine, or with ``FEDERATION_ALLOW_HTTP``: the key would travel in
    clear) without credentials, query or fragment, its trailing slash dropped."""
    parts = urlsplit(url.strip())
    try:
        parts.port  # noqa: B018 - raises on a port out of range
    except ValueError:
        raise PeerInvalid(f"Base URL {url!r} has an invalid port.", field="base_url") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PeerInvalid(f"Base URL {url!r} must be an absolute https:// address.", field="base_url")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise PeerInvalid("Base URL must not hold credentials, a query or a fragment; pass the key with --api-key.",
                          field="base_url")
    if parts.scheme == "http" and not (_loopback(parts.hostname) or settings.FEDERATION_ALLOW_HTTP):
        raise PeerInvalid(
            f"Base URL {url!r} is plain http: our key would cross the network unencrypted. Use https:// (or set "
            "FEDERATION_ALLOW_HTTP=true on a private network).",
            field="base_url",
        )
    return url.strip().rstrip("/")


def key_clean(raw: str) -> str:
    raw = raw.strip()
    if not KEY_RE.match(raw):
        raise PeerInvalid(
            "The API key is malformed: it should look like kb_xxxxxxxx_… , as the peer's `manage.py api_key "
            "create` printed it.",
            field="api_key",
        )
    return raw


def timeout_clean(timeout_ms: int) -> int:
    if not 50 <= timeout_ms <= settings.FEDERATION_MAX_TIMEOUT_MS:
        raise PeerInvalid(
            f"The timeout must be between 50 and {settings.FEDERATION_MAX_TIMEOUT_MS} ms (got {timeout_ms}).",
            field="timeout_ms",
        )
    return timeout_ms


def groups_named(names: Iterable[str]) -> list[Group]:
    wanted = [n.strip() for n in names if n.strip()]
    found = {g.name: g for g in Group.objects.filter(name__in=wanted)}
    missing = [n for n in wanted if n not in found]
    if missing:
        raise PeerInvalid(f"No group named {', '.join(missing)}; create it in the admin first.", field="groups")
    return [found[n] for n in wanted]


@transaction.atomic
def peer_add(
    *,
    name: str,
    base_url: str,
    api_key: str,
    timeout_ms: int = 800,
    groups: Iterable[str] = (),
    public: bool = False,
    replace: bool = False,
) -> FederationPeer:
    """Register a peer (or, with ``replace``, change one: its address, key, timeout, groups, public flag)."""
    name = name_clean(name.strip())
    raw = key_clean(api_key)
    peer = FederationPeer.objects.select_for_update().filter(name=name).first()
    if peer is not None and not replace:
        raise PeerInvalid(f"A peer named {name!r} exists; pass --replace to change it, or pick another name.",
                          field="name")
    peer = peer or FederationPeer(name=name)
    peer.base_url = base_url_clean(base_url)
    peer.api_key_encrypted = secret_encrypt(raw)
    peer.api_key_prefix = KEY_RE.match(raw).group(1)  # type: ignore[union-attr]
    peer.timeout_ms = timeout_clean(timeout_ms)
    peer.public = public
    peer.check_status, peer.check_detail, peer.checked_at = FederationPeer.CheckStatus.UNCHECKED, "", None
    peer.save()
    peer.groups.set(groups_named(groups))
    return peer


def peer_key_set(*, peer: FederationPeer, api_key: str) -> None:
    """Replace a peer's key (the admin's write-only field)."""
    raw = key_clean(api_key)
    peer.api_key_encrypted = secret_encrypt(raw)
    peer.api_key_prefix = KEY_RE.match(raw).group(1)  # type: ignore[union-attr]


def peer_remove(*, name: str) -> None:
    deleted, _ = FederationPeer.objects.filter(name=name).delete()
    if not deleted:
        raise PeerInvalid(f"No peer named {name!r}; `manage.py federation_peer list` shows them.", field="name")


def peer_call(peer: FederationPeer | PeerLink) -> client.PeerCall:
    """What a thread needs to ask ``peer`` (the key decrypted here, in the caller's thread)."""
    return client.PeerCall(
        name=peer.name,
        base_url=peer.base_url,
        api_key=secret_decrypt(peer.api_key_encrypted),
        timeout_s=peer.timeout_ms / 1000,
        max_bytes=settings.FEDERATION_MAX_ANSWER_BYTES,
    )


def peer_check(*, peer: FederationPeer) -> tuple[str, int, str]:
    """Ask the peer who it is with our key; record and return (status, ms, what it said or why not)."""
    try:
        call = peer_call(peer)
    except SearchError as exc:
        status, ms, detail = "refused", 0, exc.message
    else:
        status, ms, info, detail = client.peer_info(call)
        if info is not None:
            detail = f"{info.instance}, kb-search {info.version}, protocol {info.protocol}"
            if info.embedding_model:
                detail += f", embeddings {info.embedding_model}"
    FederationPeer.objects.filter(pk=peer.pk).update(
        checked_at=timezone.now(), check_status=status, check_detail=detail[:300]
    )
    return status, ms, detail


@dataclass(frozen=True)
class PeerLink:
    """What a search needs of an enabled peer: read from the database once per change, not once per search."""

    name: str
    base_url: str
    api_key_encrypted: str
    timeout_ms: int
    public: bool
    group_ids: frozenset[int]


# Every process keeps the enabled peers in memory, tagged with a version token kept in the cache (Valkey). Any
# change to a peer or to its groups sets a new token (search.receivers, when it is made and again when it is
# committed), so every process reads the peers again on its next search. With the cache unreachable the peers
# are read on every search, and a copy from before an outage is dropped; a token that could not be set is
# logged. Whatever happens to the cache, no copy serves for more than PEERS_SNAPSHOT_MAX_S. Reading the peers
# was one query (about 2 ms of a federated search here); reading the token is one round trip to Valkey.
PEERS_VERSION_KEY = "federation:peers:version"
PEERS_SNAPSHOT_MAX_S = 10.0
_snapshot: tuple[str, float, tuple[PeerLink, ...]] | None = None
_snapshot_lock = threading.Lock()


def _announce() -> None:
    global _snapshot
    _snapshot = None  # this process reads them again whatever the cache does
    if cache.set_many({PEERS_VERSION_KEY: uuid.uuid4().hex}, timeout=None):  # the keys it could not set
        logger.error("A change to the federation peers could not be announced (the cache is unreachable): other "
                     "web processes apply it within %.0f s.", PEERS_SNAPSHOT_MAX_S)


def peers_changed() -> None:
    """Every process reads the peers again on its next search (called on every change; search.receivers)."""
    _announce()
    transaction.on_commit(_announce)


def peers_forget() -> None:
    """Drop this process's copy (tests; a forked child)."""
    global _snapshot, _snapshot_lock
    _snapshot = None
    _snapshot_lock = threading.Lock()


os.register_at_fork(after_in_child=peers_forget)


def _peers_read() -> tuple[PeerLink, ...]:
    return tuple(
        PeerLink(name=peer.name, base_url=peer.base_url, api_key_encrypted=peer.api_key_encrypted,
                 timeout_ms=peer.timeout_ms, public=peer.public,
                 group_ids=frozenset(g.pk for g in peer.groups.all()))
        for peer in FederationPeer.objects.filter(enabled=True).prefetch_related("groups")
    )


def _current(snapshot: tuple[str, float, tuple[PeerLink, ...]] | None, version: str) -> bool:
    return snapshot is not None and snapshot[0] == version and time.monotonic() - snapshot[1] < PEERS_SNAPSHOT_MAX_S


def peers_enabled() -> tuple[PeerLink, ...]:
    """The enabled peers, from this process's copy while the version token says it is current."""
    global _snapshot
    version = cache.get(PEERS_VERSION_KEY)
    if version is None:  # never set, evicted, flushed, or the cache is down
        token = uuid.uuid4().hex
        version = token if cache.add(PEERS_VERSION_KEY, token, timeout=None) else cache.get(PEERS_VERSION_KEY)
        if version is None:  # the cache is unreachable: no token to trust a copy by, now or after the outage
            _snapshot = None
            return _peers_read()
    snapshot = _snapshot
    if _current(snapshot, version):
        return snapshot[2]  # type: ignore[index]
    with _snapshot_lock:
        snapshot = _snapshot
        if _current(snapshot, version):  # another thread read them while this one waited
            return snapshot[2]  # type: ignore[index]
        # tagged with the token read before the peers: a change committed in between sets a newer token, so
        # this copy is read again on the next search
        links = _peers_read()
        _snapshot = (version, time.monotonic(), links)
    return links


def group_deleting(group: Group) -> None:
    """Before ``group`` goes: a peer only its members could see would be left without groups, which means every
    signed-in user. It is disabled instead (fail closed), and says why in its check detail."""
    for peer in FederationPeer.objects.filter(groups=group, enabled=True).prefetch_related("groups"):
        if {g.pk for g in peer.groups.all()} == {group.pk}:
            FederationPeer.objects.filter(pk=peer.pk).update(
                enabled=False, check_detail=f"disabled: its only group, {group.name!r}, was deleted"[:300])
            logger.warning("Federation peer %s disabled: its only group, %r, was deleted; give it groups and "
                           "enable it again in the admin.", peer.name, group.name)


def peers_visible(principal: Principal) -> list[PeerLink]:
    """The enabled peers whose results ``principal`` may see: staff every one; anonymous callers the public
    ones; signed-in users the public ones, those without groups, and those sharing one of their groups; API
    keys none."""
    if principal.kind == "api_key":
        # A key (a peer's, an agent's) searches this knowledge base only: a key one peer issued must never reach
        # the peers that peer federates with, which never granted it anything.
        return []
    enabled = peers_enabled()
    if principal.all_content:
        return list(enabled)
    if principal.is_anonymous:
        return [peer for peer in enabled if peer.public]
    return [peer for peer in enabled if peer.public or not peer.group_ids or peer.group_ids & principal.group_ids]
