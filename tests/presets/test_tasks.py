"""The daily purge of deleted presets is scheduled and recorded as a job run."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from config.settings.schedule import CELERY_BEAT_SCHEDULE
from presets import services
from presets.models import Preset
from presets.tasks import PRESET_TOMBSTONE_DAYS, PRESETS_PURGE, presets_purge_task
from search.models import JobRun

pytestmark = pytest.mark.django_db


def test_purge_is_scheduled_daily() -> None:
    entry = CELERY_BEAT_SCHEDULE["presets-purge"]
    assert entry["task"] == presets_purge_task.name == "presets.purge_deleted"


def test_purge_task_removes_presets_deleted_past_the_undo_window_and_records_its_run() -> None:
    # given: two deleted presets, one past the undo window, and one alive
    user: Any = get_user_model().objects.create_user("ana", password="x" * 12)
    old, recent, alive = (
        services.preset_create(owner=user, name=name, params={"domain": [name.lower()]})
        for name in ("Old", "Recent", "Alive")
    )
    services.preset_delete(owner=user, preset_id=old.pk)
    services.preset_delete(owner=user, preset_id=recent.pk)
    Preset.objects.filter(pk=old.pk).update(deleted_at=timezone.now() - timedelta(days=PRESET_TOMBSTONE_DAYS + 1))
    # when
    summary = presets_purge_task()
    # then
    assert set(Preset.objects.filter(owner=user).values_list("pk", flat=True)) == {recent.pk, alive.pk}
    run = JobRun.objects.get(job=PRESETS_PURGE)
    assert run.status == JobRun.Status.SUCCEEDED and run.items_touched == 1
    assert "1 item(s) touched" in summary
