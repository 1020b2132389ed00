"""The daily purge task applies the retention setting and is recorded as a job run."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from analytics.models import QueryLog
from analytics.tasks import QUERYLOG_PURGE, querylog_purge_task
from config.settings.schedule import CELERY_BEAT_SCHEDULE
from search.models import JobRun

pytestmark = pytest.mark.django_db


def test_purge_is_scheduled_daily() -> None:
    entry = CELERY_BEAT_SCHEDULE["querylog-purge"]
    assert entry["task"] == querylog_purge_task.name == "analytics.querylog_purge"


@override_settings(QUERY_LOG_RETENTION_DAYS=7)
def test_purge_task_deletes_expired_rows_and_records_its_run() -> None:
    # given
    now = timezone.now()
    expired = QueryLog.objects.create(surface="browse", principal_kind="user", query_text="old")
    fresh = QueryLog.objects.create(surface="browse", principal_kind="user", query_text="new")
    QueryLog.objects.filter(pk=expired.pk).update(created_at=now - timedelta(days=8))
    # when
    summary = querylog_purge_task()
    # then
    assert list(QueryLog.objects.values_list("pk", flat=True)) == [fresh.pk]
    run = JobRun.objects.get(job=QUERYLOG_PURGE)
    assert run.status == JobRun.Status.SUCCEEDED and run.items_touched == 1
    assert "1 item(s) touched" in summary
