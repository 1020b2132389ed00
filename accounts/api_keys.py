"""API keys for programmatic access (MCP): issue, authenticate, revoke.

A raw key looks like ``kb_1a2b3c4d_<43 url-safe characters>``. Only its first part (the *prefix*,
``kb_1a2b3c4d``) and the SHA-256 of the whole key are stored; the raw key is shown once, when it is issued.
Authentication finds the row by prefix and compares hashes in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import ApiKey
from search.errors import SearchError
from search.principal import Principal

KEY_PREFIX = "kb_"
_PREFIX_HEX = 8
KEY_RE = re.compile(r"^(kb_[0-9a-f]{8})_[A-Za-z0-9_-]{32,64}$")
# last_used_at is a hint for administrators, not an audit log: write it at most this often per key.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class ApiKeyInvalid(SearchError):
    """The presented key is unknown, malformed, expired or revoked. ``message`` says which and what to do."""

    code = "invalid_api_key"


@dataclass(frozen=True)
class IssuedKey:
    api_key: ApiKey
    raw_key: str


def api_key_hash(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode("utf-8")).hexdigest()


def _new_secret() -> tuple[str, str]:
    prefix = KEY_PREFIX + secrets.token_hex(_PREFIX_HEX // 2)
    return prefix, f"{prefix}_{secrets.token_urlsafe(32)}"


@transaction.atomic
def api_key_issue(*, api_key: ApiKey) -> str:
    """Give an unsaved key its secret (prefix + hash), save it, and return the raw key.

    The raw key is returned once and never stored: show it to the administrator, then drop it.
    """
    if api_key.pk is not None:
        raise ValueError(
            "api_key_issue takes a new, unsaved key; revoke an old key and issue a new one instead."
        )
    for _ in range(5):  # a prefix collision (32 bits) is rare; try again with a fresh secret
        prefix, raw = _new_secret()
        api_key.prefix = prefix
        api_key.key_hash = api_key_hash(raw)
        try:
            with transaction.atomic():
                api_key.save()
        except IntegrityError:
            api_key.pk = None
            continue
        return raw
    raise RuntimeError("could not find a free API key prefix after 5 attempts")


def api_key_create(
    *, name: str, all_content: bool = True, groups: Iterable[Group] = (), expires_at: datetime | None = None
) -> IssuedKey:
    """Create a key. ``all_content`` keys read every item; others public, signed-in and ``groups`` items."""
    if not name.strip():
        raise ValueError("name is required: say who or what uses the key (e.g. 'Claude Desktop, J. Smith').")
    with transaction.atomic():
        api_key = ApiKey(name=name.strip(), all_content=all_content, expires_at=expires_at)
        raw = api_key_issue(api_key=api_key)
        group_list = list(groups)
        if group_list:
            api_key.groups.set(group_list)
    return IssuedKey(api_key, raw)


def api_key_authenticate(*, raw: str, now: datetime | None = None) -> Principal:
    """The principal of a raw key, or ``ApiKeyInvalid`` saying why it was refused.

    Expired and revoked are only reported to a caller who holds the real key (the hash matched);
    anything else is "not recognised", so the answer reveals nothing about other keys.
    """
    now = now or timezone.now()
    match = KEY_RE.match(raw.strip())
    if not match:
        raise ApiKeyInvalid(
            "API key is malformed: it should look like kb_xxxxxxxx_… . Copy the whole key shown when it was "
            "created."
        )
    key = ApiKey.objects.filter(prefix=match.group(1)).first()
    if key is None or not hmac.compare_digest(key.key_hash, api_key_hash(raw.strip())):
        raise ApiKeyInvalid("API key not recognised. Check the key, or ask an administrator for a new one.")
    if key.revoked_at is not None:
        raise ApiKeyInvalid(
            f"API key {key.prefix} was revoked on {key.revoked_at:%Y-%m-%d}; ask an administrator for a new "
            "key."
        )
    if key.expires_at is not None and key.expires_at <= now:
        raise ApiKeyInvalid(
            f"API key {key.prefix} expired on {key.expires_at:%Y-%m-%d}; ask an administrator for a new key."
        )
    if key.last_used_at is None or now - key.last_used_at >= LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    group_ids = frozenset() if key.all_content else frozenset(key.groups.values_list("id", flat=True))
    return Principal(kind="api_key", all_content=key.all_content, group_ids=group_ids, api_key_id=key.pk)


def api_key_revoke(*, api_key: ApiKey, now: datetime | None = None) -> bool:
    """Revoke a key at once. Returns False when it was already revoked (the first revocation time stays)."""
    updated = ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(
        revoked_at=now or timezone.now()
    )
    api_key.refresh_from_db(fields=["revoked_at"])
    return bool(updated)


def api_key_user_id(*, api_key_id: int | None) -> int | None:
    """The user a key acts for (``ApiKey.user``), or ``None`` for a key without one (or no key)."""
    if api_key_id is None:
        return None
    return ApiKey.objects.filter(pk=api_key_id).values_list("user_id", flat=True).first()
