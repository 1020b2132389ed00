"""Spend a request's rate-limit budget (the shared counters of ``accounts.limits``)."""

from __future__ import annotations

from django.http import HttpRequest

from accounts.limits import LimitResult, client_key, rate_limit_hit


def caller_key(request: HttpRequest) -> str:
    """Who pays: the signed-in user, else the client IP (``REMOTE_ADDR`` only)."""
    user_id = request.user.pk if request.user.is_authenticated else None
    return client_key(user_id=user_id, remote_addr=request.META.get("REMOTE_ADDR"))


def spend(request: HttpRequest, group: str, *, cost: int = 1) -> LimitResult:
    """Spend ``cost`` units of the caller's ``group`` budget (a key of ``accounts.limits.RATES``)."""
    return rate_limit_hit(group=group, key=caller_key(request), cost=cost)
