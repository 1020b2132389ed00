"""The beat entry and ``follows.run_all`` through a real Celery worker on the embedded Valkey."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings

from follows import services
from follows.models import FollowItem
from follows.tasks import FOLLOWS_RUN, follows_run_all_task
from search.models import JobRun
from tests.follows.conftest import publish
from tests.search.test_tasks import Worker, workers  # noqa: F401 - the real-worker fixture, reused


def test_one_beat_entry_runs_the_follows_every_15_minutes() -> None:
    from config.celery import app

    entries = [e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == "follows.run_all"]
    assert len(entries) == 1
    [entry] = entries
    assert entry["schedule"] == timedelta(minutes=15) and entry["options"]["expires"] == 15 * 60 - 30
    assert "follows.run_all" in app.tasks
    task = app.tasks["follows.run_all"]
    assert task.acks_late and task.reject_on_worker_lost


@pytest.mark.django_db
def test_the_task_records_what_is_new_once(reader: Any, pricing: dict[str, Any]) -> None:
    follow = services.follow_create(owner=reader, query="pricing policy")
    publish("Pricing policy for frameworks", "The pricing policy for frameworks.")

    first = follows_run_all_task.apply().get()
    second = follows_run_all_task.apply().get()

    assert "1 item(s) touched" in first and "0 item(s) touched" in second
    assert FollowItem.objects.filter(follow=follow).count() == 1
    runs = list(JobRun.objects.filter(job=FOLLOWS_RUN).order_by("id"))
    assert len(runs) == 2 and runs[0].detail["new"] == 1 and runs[0].detail["ran"] == 1


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_the_follows_and_a_redelivery_changes_nothing(
    workers: Callable[..., Worker],  # noqa: F811
    reader: Any,
    pricing: dict[str, Any],
) -> None:
    # given a follow, a newly published matching item and a worker
    follow = services.follow_create(owner=reader, query="pricing policy")
    fresh = publish("Pricing policy for frameworks", "The pricing policy for frameworks.")
    queue = f"kbtest-{uuid.uuid4().hex[:8]}"
    worker = workers(queue, FOLLOW_THRESHOLD="0")  # every match, as the other follows tests

    # when beat delivers the job twice (a redelivered message)
    sent = [follows_run_all_task.apply_async(queue=queue), follows_run_all_task.apply_async(queue=queue)]
    for result in sent:
        worker.wait_done(result.id)

    # then the item was recorded once, as new
    assert list(FollowItem.objects.filter(follow=follow).values_list("item_id", "kind")) == [(fresh.pk, "new")]
    assert JobRun.objects.filter(job=FOLLOWS_RUN, status=JobRun.Status.SUCCEEDED).count() == 2
