"""Exactly one beat sends (config/beat.py): two real ``celery beat`` processes, a one-second test schedule.

The beats send ``kbtest.tick`` (its argument: the moment of sending) to a queue no worker reads, so the
test reads every message a beat sent, with the beat that sent it (the message's ``origin``: ``gen<pid>@…``).
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from django.conf import settings

from config.beat import LeaderScheduler
from tests.deploy.conftest import Processes
from tests.deploy.processes import product_env
from tests.reliability.figures import record

TTL_S = 3.0  # BEAT_LEADER_TTL_S for the test: renewals every 1 s, a standby polls every 0.6 s
TICK_S = 1.0


@dataclass(frozen=True)
class Sent:
    pid: int
    at: float


def _sent(client: redis.Redis, queue: str) -> list[Sent]:
    """Every ``kbtest.tick`` message in ``queue``, in the order they were sent."""
    sent = []
    for raw in client.lrange(queue, 0, -1):
        message = json.loads(raw)
        args = json.loads(base64.b64decode(message["body"]))[0]
        pid = int(message["headers"]["origin"].split("@")[0].removeprefix("gen"))
        sent.append(Sent(pid, float(args[0])))
    return sorted(sent, key=lambda s: s.at)


@pytest.mark.slow
def test_two_beats_send_each_slot_once_and_a_standby_takes_over(processes: Processes, tmp_path: Path) -> None:
    # given two beat processes (as on two hosts) sharing one Valkey, with a one-second schedule
    queue, key = f"kbtest-beat-{uuid.uuid4().hex[:8]}", f"kbtest:{uuid.uuid4().hex[:8]}:beat"
    client = redis.Redis.from_url(settings.REDIS_URL)
    env = product_env(
        database_url="postgresql://unused@127.0.0.1:1/unused",  # a beat never touches the database
        redis_url=settings.REDIS_URL,
        home=tmp_path / "kb",
        KBTEST_BEAT_QUEUE=queue,
        BEAT_LEADER_KEY=key,
        BEAT_LEADER_TTL_S=str(TTL_S),
        LOG_LEVEL="INFO",
    )
    try:
        first = processes.beat("beat-a", env)
        first.wait_log("beat: leading", timeout=120)
        second = processes.beat("beat-b", env)
        second.wait_log("beat: standby", timeout=120)
        both_from = time.time()

        # when both run for a while, then the leader is killed (SIGKILL: it cannot release its lock)
        time.sleep(6)
        killed_at = time.time()
        first.kill()
        took_over_in = second.wait_log("beat: leading", timeout=3 * TTL_S)
        time.sleep(4)
        # and a third beat waits as standby while the second stops gracefully (it releases the lock)
        third = processes.beat("beat-c", env)
        third.wait_log("beat: standby", timeout=120)
        stopped_at = time.time()
        second.terminate()
        handed_over_in = third.wait_log("beat: leading", timeout=3 * TTL_S)
        time.sleep(3)
        third.terminate()
        sent = _sent(client, queue)
    finally:
        client.delete(queue, key, f"{key}:last-run")

    # then while both ran, only the leader sent
    pids = [s.pid for s in sent]
    assert {first.pid, second.pid, third.pid} >= set(pids), pids
    while_both = [s for s in sent if both_from <= s.at < killed_at]
    assert while_both and {s.pid for s in while_both} == {first.pid}, pids
    # the senders took turns, never interleaved: the first, then the second, then the third
    order = [pid for i, pid in enumerate(pids) if i == 0 or pids[i - 1] != pid]
    assert order == [first.pid, second.pid, third.pid], order
    # each slot was sent once: no two sends closer than a tick, at takeovers included (the new leader
    # adopted the old one's last run)
    gaps = [b.at - a.at for a, b in zip(sent, sent[1:], strict=False)]
    assert min(gaps) > 0.8 * TICK_S, gaps
    # the standby took over within the lock's TTL plus one poll after the leader died, at once (one poll)
    # after a graceful stop, and no tick was skipped beyond those waits
    assert took_over_in < TTL_S + TTL_S / 5 + 1.5, took_over_in
    assert handed_over_in < TTL_S / 5 + 1.5, handed_over_in
    takeover_gap = next(b.at - a.at for a, b in zip(sent, sent[1:], strict=False) if b.pid == second.pid)
    assert takeover_gap < TTL_S + TTL_S / 5 + 1.5 + TICK_S, takeover_gap
    assert max(g for g in gaps if g != takeover_gap) < TTL_S / 5 + 1.5 + TICK_S, gaps
    assert all(s.at < stopped_at for s in sent if s.pid == second.pid)
    record(
        "deploy.one_beat",
        {
            "beats": 3,
            "sent": len(sent),
            "sent_while_two_ran": len(while_both),
            "senders_while_two_ran": 1,
            "min_gap_s": round(min(gaps), 3),
            "takeover_after_sigkill_s": round(took_over_in, 2),
            "takeover_after_sigterm_s": round(handed_over_in, 2),
            "lock_ttl_s": TTL_S,
        },
    )


@pytest.mark.slow
def test_without_the_lock_two_beats_both_send(processes: Processes, tmp_path: Path) -> None:
    """The control: Celery's own scheduler in both beats sends every slot twice, and the check above sees it."""
    queue = f"kbtest-beat-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(settings.REDIS_URL)
    env = product_env(
        database_url="postgresql://unused@127.0.0.1:1/unused",
        redis_url=settings.REDIS_URL,
        home=tmp_path / "kb",
        KBTEST_BEAT_QUEUE=queue,
        LOG_LEVEL="INFO",
    )
    try:
        beats = [processes.beat(name, env, scheduler="celery.beat:PersistentScheduler") for name in ("a", "b")]
        for beat in beats:
            beat.wait_log("Sending due task", timeout=120)
        time.sleep(3)
        sent = _sent(client, queue)
    finally:
        client.delete(queue)
    assert {s.pid for s in sent} == {b.pid for b in beats}


def test_the_settings_run_beat_with_the_leader_scheduler() -> None:
    from config.celery import app

    assert settings.CELERY_BEAT_SCHEDULER == "config.beat:LeaderScheduler"
    assert app.conf.beat_scheduler == "config.beat:LeaderScheduler"
    assert settings.BEAT_LEADER_TTL_S == 30.0 and settings.BEAT_LEADER_KEY == "kb:beat:leader"


class _FakeRedis:
    """Enough of redis.Redis for the lock: SET NX PX, the two scripts, GET, and the last-run hash."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.hashes: dict[str, dict[str, str]] = {}
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise redis.ConnectionError("down")

    def set(self, key: str, value: str, nx: bool, px: int) -> bool:
        self._check()
        if nx and key in self.values:
            return False
        self.values[key] = value
        return True

    def get(self, key: str) -> str | None:
        self._check()
        return self.values.get(key)

    def eval(self, script: str, numkeys: int, key: str, token: str, *args: object) -> int:
        self._check()
        if self.values.get(key) != token:
            return 0
        if "del" in script:
            del self.values[key]
        return 1

    def hgetall(self, key: str) -> dict[str, str]:
        self._check()
        return dict(self.hashes.get(key, {}))

    def hset(self, key: str, field: str, value: str) -> int:
        self._check()
        self.hashes.setdefault(key, {})[field] = value
        return 1


def _scheduler(tmp_path: Path, fake: _FakeRedis, name: str) -> LeaderScheduler:
    from config.celery import app

    scheduler = LeaderScheduler(app=app, schedule_filename=str(tmp_path / name), lazy=True)
    scheduler._client = fake  # type: ignore[assignment]
    return scheduler


def test_a_beat_that_cannot_renew_its_lock_stops_sending(tmp_path: Path) -> None:
    # given a leader and a standby
    fake = _FakeRedis()
    leader, standby = _scheduler(tmp_path, fake, "a"), _scheduler(tmp_path, fake, "b")
    leader._adopt_last_runs = lambda: 0  # type: ignore[method-assign]  # lazy: no schedule to adopt into
    standby._adopt_last_runs = lambda: 0  # type: ignore[method-assign]
    assert leader._hold() and not standby._hold()
    # when Valkey is unreachable, the leader steps down at its next tick (it cannot know who leads)
    fake.down = True
    assert not leader._hold() and not leader.leading
    # when the leader's lock expired and the standby took it, the old leader does not send
    fake.down = False
    assert leader._hold()  # the lock was still its own: it leads again
    fake.values.clear()  # the lock expired
    assert standby._hold()
    assert not leader._hold() and not leader.leading
    # and releasing never deletes another beat's lock
    leader.leading = True
    leader._release()
    assert fake.values[leader.lock_key] == standby.token
