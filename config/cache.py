"""The cache backend: Django's Redis cache, made unable to fail or stall a request.

Everything this product keeps in Valkey/Redis is an optimisation (query embeddings, synonyms, browse
options, popular topics) or a rate-limit counter that fails open. So when the server is down or hung:

- reads return their default (a miss) and writes are dropped, with one warning per outage;
- ``incr``/``decr`` raise ``CacheUnavailable``: a counter must know it could not count (the rate limiter
  catches it, logs, and lets the request through);
- after one failure the backend skips the server for ``SKIP_AFTER_FAILURE_S`` seconds, so a hung
  server costs one socket timeout (0.5 s, ``CACHES`` options) per process per window, not one per call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

T = TypeVar("T")
SKIP_AFTER_FAILURE_S = 5.0
_FAILURES = (RedisConnectionError, RedisTimeoutError, OSError)


class CacheUnavailable(RedisConnectionError):
    """The cache server is down or hung (raised only where a silent miss would be wrong: counters)."""


class FailSafeRedisCache(RedisCache):
    _state_lock = threading.Lock()
    _skip_until: dict[str, float] = {}  # per server location, shared by every thread of the process

    def _skipping(self) -> bool:
        return time.monotonic() < self._skip_until.get(self._key_location, 0.0)

    @property
    def _key_location(self) -> str:
        return ",".join(self._servers)

    def _failed(self, exc: BaseException) -> None:
        with self._state_lock:
            first = not self._skipping()
            self._skip_until[self._key_location] = time.monotonic() + SKIP_AFTER_FAILURE_S
        if first:
            logger.warning(
                "cache unavailable (%s: %s): serving without it for %.0f s",
                type(exc).__name__,
                exc,
                SKIP_AFTER_FAILURE_S,
            )

    def _safe(self, call: Callable[[], T], default: T) -> T:
        if self._skipping():
            return default
        try:
            return call()
        except _FAILURES as exc:
            self._failed(exc)
            return default

    def _counted(self, call: Callable[[], T]) -> T:
        if self._skipping():
            raise CacheUnavailable("cache unavailable (recent failure); not counting")
        try:
            return call()
        except _FAILURES as exc:
            self._failed(exc)
            raise CacheUnavailable(f"cache unavailable: {exc}") from exc

    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None) -> bool:
        return self._safe(lambda: super(FailSafeRedisCache, self).add(key, value, timeout, version), False)

    def get(self, key: Any, default: Any = None, version: Any = None) -> Any:
        return self._safe(lambda: super(FailSafeRedisCache, self).get(key, default, version), default)

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None) -> None:
        self._safe(lambda: super(FailSafeRedisCache, self).set(key, value, timeout, version), None)

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None) -> bool:
        return self._safe(lambda: super(FailSafeRedisCache, self).touch(key, timeout, version), False)

    def delete(self, key: Any, version: Any = None) -> bool:
        return self._safe(lambda: super(FailSafeRedisCache, self).delete(key, version), False)

    def get_many(self, keys: Any, version: Any = None) -> dict[str, Any]:
        return self._safe(lambda: super(FailSafeRedisCache, self).get_many(keys, version), {})

    def has_key(self, key: Any, version: Any = None) -> bool:
        return self._safe(lambda: super(FailSafeRedisCache, self).has_key(key, version), False)

    def set_many(self, data: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None) -> list[Any]:
        return self._safe(
            lambda: super(FailSafeRedisCache, self).set_many(data, timeout, version), list(data)
        )

    def delete_many(self, keys: Any, version: Any = None) -> None:
        self._safe(lambda: super(FailSafeRedisCache, self).delete_many(keys, version), None)

    def clear(self) -> bool:
        return self._safe(lambda: super(FailSafeRedisCache, self).clear(), False)

    def incr(self, key: Any, delta: int = 1, version: Any = None) -> int:
        return self._counted(lambda: super(FailSafeRedisCache, self).incr(key, delta, version))
