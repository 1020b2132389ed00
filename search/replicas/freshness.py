"""Read-your-writes: a principal who changed content reads from the primary for ``READ_YOUR_WRITES_S``."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field

from django.conf import settings
from django.core.cache import cache

from search.principal import Principal
from search.replicas.health import replica_aliases

logger = logging.getLogger(__name__)


@dataclass
class RequestScope:
    """What one HTTP request did: its principals (the session user's key comes lazily from ``user_keys``) and
    whether it changed content (``note_write``)."""

    user_keys: Callable[[], Sequence[str]]
    principals: set[Principal] = field(default_factory=set)
    wrote: bool = False
    _decided: dict[tuple[str, ...], bool] = field(default_factory=dict)

    def keys(self) -> list[str]:
        keys = list(self.user_keys())
        for principal in self.principals:
            keys += [k for k in principal_keys(principal) if k not in keys]
        return keys


_request: ContextVar[RequestScope | None] = ContextVar("kb_request_reads", default=None)
# This process's own marks (key → monotonic expiry): its next read honours a write at once, and still does
# while the shared cache is unreachable (config.cache turns that into misses).
_local_marks: dict[str, float] = {}
_marks_lock = threading.Lock()


def user_key(user_id: int) -> str:
    return f"user:{user_id}"


def principal_keys(principal: Principal) -> list[str]:
    """The read-your-writes keys of a principal: its user id and its API key id, when it has them."""
    keys = []
    if principal.user_id:
        keys.append(user_key(principal.user_id))
    if principal.api_key_id:
        keys.append(f"key:{principal.api_key_id}")
    return keys


def _window_s() -> float:
    return float(getattr(settings, "READ_YOUR_WRITES_S", 10.0))


def _cache_key(key: str) -> str:
    return f"ryw:{key}"


@contextlib.contextmanager
def request_scope(user_keys: Callable[[], Sequence[str]]) -> Iterator[RequestScope]:
    """One HTTP request (``config.middleware.ReadYourWritesMiddleware``): reads inside it without a principal
    of their own answer for the request's caller, and content written inside it marks that caller."""
    scope = RequestScope(user_keys)
    token = _request.set(scope)
    try:
        yield scope
    finally:
        _request.reset(token)


def note_write() -> None:
    """Content was written in the current request (a no-op outside one): its caller is marked when it ends."""
    scope = _request.get()
    if scope is not None:
        scope.wrote = True


def mark_written(*, keys: Sequence[str]) -> None:
    """Reads by these principals (``principal_keys``) go to the primary for the next ``READ_YOUR_WRITES_S``."""
    window = _window_s()
    if not keys or window <= 0 or not replica_aliases():
        return
    expiry = time.monotonic() + window
    with _marks_lock:
        for key in keys:
            _local_marks[key] = expiry
    try:
        cache.set_many({_cache_key(k): 1 for k in keys}, timeout=max(1, int(window + 0.999)))
    except Exception:  # noqa: BLE001 - a dead cache: this process's marks still hold
        logger.warning("read-your-writes: could not record the write in the shared cache")
    scope = _request.get()
    if scope is not None:
        scope._decided.clear()


def wrote_recently(principal: Principal | None) -> bool:
    """Whether reads for ``principal`` (None: the current request's caller) must see the primary."""
    if _window_s() <= 0:
        return False
    scope = _request.get()
    keys = principal_keys(principal) if principal is not None else (scope.keys() if scope is not None else [])
    if not keys:
        return False
    decided_key = tuple(keys)
    if scope is not None and decided_key in scope._decided:
        return scope._decided[decided_key]
    now = time.monotonic()
    with _marks_lock:
        local = any(_local_marks.get(k, 0.0) > now for k in keys)
    recent = local
    if not local:
        try:
            recent = bool(cache.get_many([_cache_key(k) for k in keys]))
        except Exception:  # noqa: BLE001 - no shared cache: only this process's marks are known
            recent = False
    if scope is not None:
        scope._decided[decided_key] = recent
    return recent


def current_scope() -> RequestScope | None:
    """The current HTTP request's scope (None outside one)."""
    return _request.get()


def marks_reset() -> None:
    """Forget this process's read-your-writes marks (tests)."""
    with _marks_lock:
        _local_marks.clear()
