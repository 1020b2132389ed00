"""Celery beat that sends only while it leads: any number of beat processes may run, exactly one schedules.

``CELERY_BEAT_SCHEDULER`` points ``celery -A config beat`` at :class:`LeaderScheduler`. Each beat process
runs the usual schedule (``config.settings.schedule``), but sends a due task only while it holds the leader
lock in Valkey/Redis (``REDIS_URL``):

- **Acquire**: ``SET <BEAT_LEADER_KEY> <token> NX PX <ttl>``; the token names the host and process, so a
  standby's log says who leads.
- **Hold**: every tick renews the lock, and only if it still holds the beat's own token (a Lua
  compare-and-expire), before anything is sent. Ticks come at least every ``TTL / 3`` seconds. A renewal
  that fails (the key expired and another beat took it, or Valkey cannot be reached) makes this beat a
  standby at once: it sends nothing more.
- **Release**: on shutdown (SIGTERM, Ctrl-C) the lock is deleted, again only if it is ours, so a standby
  takes over at its next poll instead of waiting for the TTL.
- **Standby**: polls every ``TTL / 5`` seconds. When the leader dies without releasing (SIGKILL, a lost host),
  its lock expires at most ``TTL`` after its last renewal, and a standby takes over within one more poll.

What was sent is shared, so a takeover neither repeats nor skips a slot: after each send the leader records
the entry's ``last_run_at`` in the hash ``<BEAT_LEADER_KEY>:last-run``, and a beat that becomes leader
adopts those times before it looks at the schedule. An entry whose slot passed while no beat led (the old
leader died just before it) is sent once on takeover, not once per missed slot. A send and its record are
two steps: a leader that dies between them leaves the slot to be sent again by the next one, never lost.
That is why the daily jobs still claim their period (``search.services.jobs``): two deliveries of one
slot take effect once.

The lock is only as good as the clocks' rates: a leader frozen longer than the TTL between a renewal and a
send (microseconds apart) could send one task after a standby took over. The period claims cover that too.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from datetime import datetime
from typing import Any

import redis
from celery.beat import PersistentScheduler
from django.conf import settings

logger = logging.getLogger(__name__)

# KEYS[1] = lock, ARGV[1] = token, ARGV[2] = ttl in ms. 1 when the lock was ours (and is extended), else 0.
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
# KEYS[1] = lock, ARGV[1] = token. Deletes the lock only if it is ours.
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""
REDIS_TIMEOUT_S = 2.0


class LeaderScheduler(PersistentScheduler):
    """A ``PersistentScheduler`` that sends due tasks only while it holds the leader lock (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.lock_key: str = settings.BEAT_LEADER_KEY
        self.last_run_key = f"{self.lock_key}:last-run"
        self.ttl_s: float = float(settings.BEAT_LEADER_TTL_S)
        self.renew_every_s = self.ttl_s / 3
        self.poll_every_s = self.ttl_s / 5
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.leading = False
        self._client: redis.Redis | None = None
        self._standby_logged: str | None = None
        super().__init__(*args, **kwargs)

    # --- the lock ---

    @property
    def client(self) -> redis.Redis:
        if self._client is None:
            self._client = redis.Redis.from_url(
                settings.REDIS_URL, socket_connect_timeout=REDIS_TIMEOUT_S, socket_timeout=REDIS_TIMEOUT_S
            )
        return self._client

    def _hold(self) -> bool:
        """Renew the lock if this beat leads, else try to take it. True when this beat may send now."""
        ttl_ms = int(self.ttl_s * 1000)
        try:
            if self.leading:
                if self.client.eval(_RENEW, 1, self.lock_key, self.token, ttl_ms):
                    return True
                self._step_down("the lock expired and another beat may have taken it")
            # Free, or still ours (this beat stepped down when Valkey did not answer, and nobody took it).
            if self.client.set(self.lock_key, self.token, nx=True, px=ttl_ms) or self.client.eval(
                _RENEW, 1, self.lock_key, self.token, ttl_ms
            ):
                self._take_over()
                return True
            holder = self.client.get(self.lock_key)
        except redis.RedisError as exc:
            if self.leading:
                self._step_down(f"Valkey/Redis unreachable ({exc})")
            elif self._standby_logged != "unreachable":
                logger.warning("beat: standby, cannot reach Valkey/Redis for the leader lock (%s)", exc)
                self._standby_logged = "unreachable"
            return False
        who = holder.decode(errors="replace") if isinstance(holder, bytes) else str(holder)
        if self._standby_logged != who:
            logger.info("beat: standby, %s leads (lock %s)", who, self.lock_key)
            self._standby_logged = who
        return False

    def _take_over(self) -> None:
        self.leading = True
        self._standby_logged = None
        adopted = self._adopt_last_runs()
        self._heap = None  # rebuilt from the adopted times at the next tick
        logger.info(
            "beat: leading as %s (lock %s, ttl %.1f s; %d entr%s adopted from the previous leader)",
            self.token, self.lock_key, self.ttl_s, adopted, "y" if adopted == 1 else "ies",
        )

    def _step_down(self, why: str) -> None:
        self.leading = False
        self._standby_logged = None
        logger.warning("beat: no longer leading: %s; sending nothing until the lock is ours again", why)

    def _release(self) -> None:
        if not self.leading:
            return
        self.leading = False
        try:
            self.client.eval(_RELEASE, 1, self.lock_key, self.token)
            logger.info("beat: released the leader lock %s", self.lock_key)
        except redis.RedisError as exc:  # it expires within the TTL anyway
            logger.warning("beat: could not release the leader lock (%s); it expires by itself", exc)

    # --- what was sent, shared between leaders ---

    def _adopt_last_runs(self) -> int:
        """Set each entry's ``last_run_at`` to the time the cluster last sent it (when known)."""
        try:
            shared = self.client.hgetall(self.last_run_key)
        except redis.RedisError as exc:
            logger.warning("beat: could not read the entries' last runs (%s); using this beat's own", exc)
            return 0
        adopted = 0
        for raw_name, raw_when in shared.items():
            name = raw_name.decode() if isinstance(raw_name, bytes) else str(raw_name)
            entry = self.schedule.get(name)
            if entry is None:
                continue
            try:
                when = datetime.fromisoformat(raw_when.decode() if isinstance(raw_when, bytes) else str(raw_when))
            except ValueError:
                continue
            entry.last_run_at = when
            adopted += 1
        return adopted

    def _record_last_run(self, name: str) -> None:
        entry = self.schedule.get(name)
        if entry is None or entry.last_run_at is None:
            return
        try:
            self.client.hset(self.last_run_key, name, entry.last_run_at.isoformat())
        except redis.RedisError as exc:
            logger.warning("beat: could not record the last run of %s (%s)", name, exc)

    # --- celery.beat.Scheduler hooks ---

    def tick(self, *args: Any, **kwargs: Any) -> float:
        if not self._hold():
            return self.poll_every_s
        delay = super().tick(*args, **kwargs)
        return min(delay, self.renew_every_s)

    def apply_async(self, entry: Any, producer: Any = None, advance: bool = True, **kwargs: Any) -> Any:
        result = super().apply_async(entry, producer=producer, advance=advance, **kwargs)
        self._record_last_run(entry.name)
        return result

    def close(self) -> None:
        try:
            self._release()
        finally:
            super().close()

    @property
    def info(self) -> str:
        return f"{super().info}\n    . leader lock -> {self.lock_key} (ttl {self.ttl_s:g} s)"
