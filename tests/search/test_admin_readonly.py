"""The read-only admin pages: rows the product writes are read there, never added or edited."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from analytics.models import QueryLog
from search.admin_readonly import error_line
from search.models import JobRun


@pytest.fixture
def superuser_client() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw"))
    return client


@pytest.mark.django_db
@pytest.mark.parametrize("page", ["search/jobrun", "search/embeddingspace", "analytics/querylog"])
def test_nothing_can_be_added_even_by_a_superuser(superuser_client: Client, page: str) -> None:
    # when a superuser opens the add form
    response = superuser_client.get(f"/admin/{page}/add/")

    # then it is refused
    assert response.status_code == 403


@pytest.mark.django_db
def test_a_job_run_opens_read_only_and_a_post_changes_nothing(superuser_client: Client) -> None:
    # given a failed run
    run = JobRun.objects.create(job="quality_scores", period="2025-03-10", status=JobRun.Status.FAILED,
                                started_at=timezone.now(), error="ValueError: boom\nTraceback …")

    # when a superuser opens it and posts a change
    page = superuser_client.get(f"/admin/search/jobrun/{run.pk}/change/").content.decode()
    superuser_client.post(f"/admin/search/jobrun/{run.pk}/change/", {"job": "renamed", "status": "ok"})

    # then the page has no save button and the row is as it was; the list shows the error's first line
    assert 'name="_save"' not in page
    run.refresh_from_db()
    assert (run.job, run.status) == ("quality_scores", JobRun.Status.FAILED)
    listing = superuser_client.get("/admin/search/jobrun/").content.decode()
    assert "ValueError: boom" in listing and "Traceback" not in listing


@pytest.mark.django_db
def test_a_query_log_row_cannot_be_edited(superuser_client: Client) -> None:
    # given a logged search
    row = QueryLog.objects.create(surface="browse", principal_kind="staff", query_text="pricing", result_count=3)

    # when a superuser posts a change to it
    superuser_client.post(f"/admin/analytics/querylog/{row.pk}/change/", {"query_text": "other"})

    # then it is unchanged
    row.refresh_from_db()
    assert row.query_text == "pricing"


def test_error_line_is_the_first_line_cut_to_its_limit() -> None:
    assert error_line("", limit=10) == ""
    assert error_line("ValueError: boom\nTraceback", limit=160) == "ValueError: boom"
    assert error_line("x" * 300, limit=120) == "x" * 120
