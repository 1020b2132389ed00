"""The request is the GraphQL context; who is asking is worked out once per request."""

from __future__ import annotations

from typing import Any

from search.principal import ANONYMOUS, Principal, principal_for_user


def get_principal(context: Any) -> Principal:
    """The request's principal: the session user (staff, user) or anonymous. Cached on the request."""
    principal = getattr(context, "_kb_principal", None)
    if principal is None:
        user = getattr(context, "user", None)
        principal = principal_for_user(user) if user is not None else ANONYMOUS
        context._kb_principal = principal
    return principal


def get_user(context: Any) -> Any | None:
    """The signed-in Django user, or ``None``."""
    user = getattr(context, "user", None)
    return user if user is not None and user.is_authenticated else None
