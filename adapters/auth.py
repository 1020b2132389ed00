"""``Authorization: Bearer <API key>``, as every surface that takes API keys reads it (/mcp, the federation
endpoint).

- No header: anonymous (``required=False``), or refused (``required=True``).
- ``Bearer <key>``: the key's principal.
- Anything else — a wrong, malformed, expired or revoked key, or another scheme — is refused. There is never
  a silent fall back to anonymous: a client that meant to send a key learns it failed.
"""

from __future__ import annotations

import re

from django.http import HttpRequest

from accounts.api_keys import ApiKeyInvalid, api_key_authenticate
from search.principal import ANONYMOUS, Principal

_BEARER_RE = re.compile(r"^Bearer[ \t]+(\S+)[ \t]*$", re.IGNORECASE)


class AuthenticationFailed(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def bearer_principal(request: HttpRequest, *, required: bool = False) -> Principal:
    """The caller's principal; ``AuthenticationFailed`` (→ 401) for a credential we refuse or a missing one
    where ``required``."""
    header = request.headers.get("Authorization")
    if header is None:
        if required:
            raise AuthenticationFailed(
                "An API key is required: send 'Authorization: Bearer <API key>' with a key this knowledge base's "
                "administrator issued (manage.py api_key create)."
            )
        return ANONYMOUS
    match = _BEARER_RE.match(header)
    if not match:
        hint = "" if required else " Leave the header out to search public content anonymously."
        raise AuthenticationFailed("Authorization must be 'Bearer <API key>'." + hint)
    try:
        return api_key_authenticate(raw=match.group(1))
    except ApiKeyInvalid as exc:
        raise AuthenticationFailed(exc.message) from None
