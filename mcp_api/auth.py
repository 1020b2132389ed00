"""Who is calling /mcp, and whether the request may proceed at all.

- No ``Authorization`` header: anonymous (live corpus, public items).
- ``Authorization: Bearer <API key>``: the key's principal (latest corpus, the key's scope).
- Anything else — a wrong, malformed, expired or revoked key, or another scheme — is refused with 401.
  There is never a silent fall back to anonymous: a client that meant to send a key learns it failed.

Browsers are only allowed from ``settings.MCP_ALLOWED_ORIGINS`` (DNS-rebinding protection).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest

from adapters.auth import AuthenticationFailed, bearer_principal
from search.principal import Principal

__all__ = ["AuthenticationFailed", "origin_allowed", "request_principal"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_parts(origin: str) -> tuple[str, str, int | None] | None:
    """(scheme, host, port) of ``scheme://host[:port]``, the default port filled in; None if malformed."""
    try:
        parts = urlsplit(origin.strip().lower())
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname or parts.path not in ("", "/") or parts.query or parts.username:
        return None
    return parts.scheme, parts.hostname, port or _DEFAULT_PORTS.get(parts.scheme)


def origin_allowed(origin: str | None, allowed: list[str] | None = None) -> bool:
    """True when a request may proceed: no Origin header at all, or one matching an allowed rule.

    Rules are ``scheme://host`` (default port), ``scheme://host:port`` or ``scheme://host:*`` (any port).
    ``Origin: null`` (sandboxed frames, file://) and malformed origins are refused.
    """
    if origin is None:
        return True
    actual = _origin_parts(origin)
    if actual is None:
        return False
    rules = allowed if allowed is not None else list(settings.MCP_ALLOWED_ORIGINS)
    for rule in rules:
        any_port = rule.strip().endswith(":*")
        expected = _origin_parts(rule.strip()[:-2] if any_port else rule)
        if expected is None:
            continue
        if expected[:2] == actual[:2] and (any_port or expected[2] == actual[2]):
            return True
    return False


def request_principal(request: HttpRequest) -> Principal:
    """The principal of an /mcp request; ``AuthenticationFailed`` (→ 401) for a credential we refuse."""
    return bearer_principal(request)
