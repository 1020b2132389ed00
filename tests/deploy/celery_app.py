"""``celery -A tests.deploy.celery_app``: the product's Celery app (``config.celery``) plus test-only tasks.

- ``kbtest.record``: records a start, sleeps, then records its run in a table the test names (upserts:
  running it twice leaves the same row, with the counts saying so).
- With ``KBTEST_BEAT_QUEUE`` set, the beat schedule is one entry, ``kbtest.tick`` every second, whose
  argument is the moment the beat sent it (``BeatLazyFunc``): the test reads the messages straight from the
  queue (no worker consumes it) and checks which beat sent each one, and when.
"""

from __future__ import annotations

import os
import re
import socket
import time
from typing import Any

from celery.beat import BeatLazyFunc

from config.celery import app

_TABLE = re.compile(r"^kbtest_[a-z0-9_]{1,40}$")

if os.environ.get("KBTEST_BEAT_QUEUE"):
    app.conf.beat_schedule = {
        "kbtest-tick": {
            "task": "kbtest.tick",
            "schedule": 1.0,
            "args": (BeatLazyFunc(time.time),),
            "options": {"queue": os.environ["KBTEST_BEAT_QUEUE"], "expires": 300},
        }
    }


@app.task(name="kbtest.record", bind=True, acks_late=True, ignore_result=True)
def record_task(self: Any, job_id: int, table: str, sleep_s: float = 0.0) -> str:
    """Idempotent by ``job_id``: ``starts`` counts deliveries that began, ``runs`` those that finished."""
    from django.db import connection

    if not _TABLE.match(table):
        raise ValueError(f"not a test table: {table!r}")
    worker = f"{self.request.hostname or socket.gethostname()}"
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (id, starts, runs, started_by, started_at) VALUES (%s, 1, 0, %s, clock_timestamp()) "
            f"ON CONFLICT (id) DO UPDATE SET starts = {table}.starts + 1, started_by = EXCLUDED.started_by, "
            "started_at = EXCLUDED.started_at",
            [job_id, worker],
        )
    time.sleep(sleep_s)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET runs = runs + 1, finished_by = %s WHERE id = %s", [worker, job_id])
    return f"recorded {job_id}"
