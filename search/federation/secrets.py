"""The API keys peers issued us, encrypted at rest (Fernet: AES-128-CBC with an HMAC, from ``cryptography``).

The key comes from ``FEDERATION_SECRET_KEY`` or, when that is unset, is derived from ``SECRET_KEY``: a
database copy alone never reveals a peer's key. A stored key that no longer decrypts (the secret changed) is
reported as such, with what to do; it is never sent.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

from search.errors import SearchError


class PeerKeyUnreadable(SearchError):
    code = "peer_key_unreadable"


def _fernet() -> Fernet:
    secret = settings.FEDERATION_SECRET_KEY or settings.SECRET_KEY
    digest = hashlib.sha256(b"kb-search federation peer keys\x00" + secret.encode("utf-8")).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def secret_encrypt(raw: str) -> str:
    return _fernet().encrypt(raw.encode("utf-8")).decode("ascii")


def secret_decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode("ascii")).decode("utf-8")
    except (InvalidToken, ValueError, UnicodeError) as exc:
        raise PeerKeyUnreadable(
            "The peer's API key can no longer be read (FEDERATION_SECRET_KEY or SECRET_KEY changed since it was "
            "stored). Add it again: manage.py federation_peer add NAME URL --api-key KEY --replace."
        ) from exc
