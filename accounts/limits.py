"""Rate limits shared by every surface (django-ratelimit's counters in the cache).

One budget per group and caller: ``search`` is spent by ``POST /api/search`` and by each GraphQL
``search`` field alike. If the cache is down the limiter fails open and logs, so search keeps working.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django_ratelimit.core import get_usage

logger = logging.getLogger(__name__)

RATES = {
    "preview": "60/m",
    "search": "30/m",
    "mcp": "120/m",
}


def rate_of(group: str) -> str:
    """The budget of ``group``: ``RATES``, or for ``federation`` (per API key, on POST /api/federation/search:
    a peer asks on behalf of all of its users) the ``FEDERATION_RATE_PER_MINUTE`` setting."""
    if group == "federation":
        return f"{settings.FEDERATION_RATE_PER_MINUTE}/m"
    return RATES[group]


@dataclass(frozen=True)
class LimitResult:
    limited: bool
    retry_after: int = 0


def _period(rate: str) -> int:
    unit = rate.split("/")[1]
    return {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit[-1]] * int(unit[:-1] or 1)


def rate_limit_hit(*, group: str, key: str, cost: int = 1) -> LimitResult:
    """Spend ``cost`` from the caller's budget for ``group``; ``key`` identifies the caller (user id or IP)."""
    rate = rate_of(group)
    try:
        for _ in range(max(1, cost)):
            usage = get_usage(None, group=f"kb:{group}", key=lambda _g, _r: key, rate=rate, increment=True)
            if usage and usage["should_limit"]:
                return LimitResult(True, retry_after=max(1, int(usage.get("time_left") or _period(rate))))
    except Exception as exc:  # noqa: BLE001 - a dead cache must not stop search
        logger.warning("rate limiter unavailable (%s): failing open", exc)
    return LimitResult(False)


def client_key(*, user_id: int | None, remote_addr: str | None, api_key_id: int | None = None) -> str:
    """Per user when signed in, per API key, else per IP (REMOTE_ADDR only: X-Forwarded-For is not trusted)."""
    if api_key_id:
        return f"key:{api_key_id}"
    if user_id:
        return f"user:{user_id}"
    return f"ip:{remote_addr or 'unknown'}"
