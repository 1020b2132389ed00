"""Admin analytics pages render with data; a zero-result query becomes a synonym or gap note in one click."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from analytics.models import ContentGap, QueryLog
from mcp_api.schemas import FindArgs
from mcp_api.tools import find_tool
from search.models import Synonym
from search.principal import Principal

pytestmark = pytest.mark.django_db

REPORT = "/admin/analytics/querylog/report/"


@pytest.fixture
def activity(client: Client, user_client: Client, corpus: Any, logged: Any) -> None:
    """Searches from the site (signed in and out) and an agent, some with nothing found."""
    with logged():
        for text in ("pricing", "pricing", "zzyzx unicorn", "Tender <b>pricing</b>"):
            user_client.post("/api/search", json.dumps({"query": text}), content_type="application/json")
        client.post(
            "/api/search", json.dumps({"query": "secret anonymous words"}), content_type="application/json"
        )
        agent = Principal(kind="api_key", api_key_id=1, all_content=True)
        for text in ("discount", "discount approval", "qwertyuiop"):
            find_tool(FindArgs(query=text), agent)


def test_report_renders_every_section_with_data(admin_client: Client, activity: None) -> None:
    # when
    response = admin_client.get(REPORT, {"days": 1})
    # then
    assert response.status_code == 200
    html = response.content.decode()
    for heading in (
        "Per surface and tool",
        "Top queries",
        "Zero-result queries",
        "Queries with results but no click",
        "Retry loops",
        "Slowest searches",
    ):
        assert heading in html
    assert "zzyzx unicorn" in html and "qwertyuiop" in html
    assert "(hidden #" in html and "secret anonymous words" not in html  # the privacy rule holds here too
    assert "Tender &lt;b&gt;pricing&lt;/b&gt;" in html  # escaped
    assert "Add synonym" in html and "Note content gap" in html and "explain" in html
    loops = response.context["loops"]
    assert sorted((loop.principal_kind, loop.searches) for loop in loops) == [("api_key", 3), ("user", 4)]
    assert {row["surface"] for row in response.context["surfaces"]} == {"browse", "mcp"}


def test_report_is_for_staff_with_the_view_permission(
    client: Client, user_client: Client, activity: None
) -> None:
    # given a staff member without analytics permissions
    staff = get_user_model().objects.create_user("clerk", password="pw-clerk-123", is_staff=True)
    clerk = Client()
    clerk.force_login(staff)
    # then
    assert client.get(REPORT).status_code == 302  # to the admin login
    assert user_client.get(REPORT).status_code == 302
    assert clerk.get(REPORT).status_code == 403


def test_query_log_list_renders(admin_client: Client, activity: None) -> None:
    response = admin_client.get("/admin/analytics/querylog/")
    assert response.status_code == 200
    assert "Analytics report" in response.content.decode()
    assert admin_client.get("/admin/analytics/querylog/add/").status_code == 403


def test_one_click_synonym_from_a_zero_result_query(admin_client: Client, activity: None) -> None:
    # given
    zero = QueryLog.objects.filter(query_text="zzyzx unicorn").first()
    assert zero is not None and zero.result_count == 0
    # when
    response = admin_client.post(
        "/admin/analytics/querylog/zero/synonym/",
        {"query_hash": zero.query_hash, "means": "pricing", "days": "1"},
    )
    # then
    assert response.status_code == 302 and response["Location"].endswith("?days=1#zero")
    synonym = Synonym.objects.get()
    assert synonym.terms == ["zzyzx unicorn", "pricing"] and synonym.one_way
    page = admin_client.get(REPORT, {"days": 1}).content.decode()
    assert "Synonym created" in page and "synonym: zzyzx unicorn → pricing" in page


def test_one_click_content_gap_from_a_zero_result_query(
    admin_client: Client, admin_user: Any, activity: None
) -> None:
    zero = QueryLog.objects.get(query_text="qwertyuiop")
    response = admin_client.post("/admin/analytics/querylog/zero/gap/", {"query_hash": zero.query_hash})
    assert response.status_code == 302
    gap = ContentGap.objects.get()
    assert (gap.query_text, gap.searches, gap.created_by) == ("qwertyuiop", 1, admin_user)
    assert "content gap noted" in admin_client.get(REPORT, {"days": 1}).content.decode()


def test_a_hidden_query_cannot_become_a_synonym(admin_client: Client, activity: None) -> None:
    hidden = QueryLog.objects.get(principal_kind="anonymous")
    admin_client.post(
        "/admin/analytics/querylog/zero/synonym/", {"query_hash": hidden.query_hash, "means": "x"}
    )
    assert not Synonym.objects.exists()
    assert "was not stored" in admin_client.get(REPORT).content.decode()


def test_explain_reruns_the_search_and_shows_its_plans(admin_client: Client, activity: None) -> None:
    # given
    log = QueryLog.objects.filter(query_text="pricing").first()
    assert log is not None
    url = f"/admin/analytics/querylog/{log.pk}/explain/"
    # when
    page = admin_client.get(url)
    explained = admin_client.post(url)
    # then
    assert page.status_code == 200 and "Explain" in page.content.decode()
    assert explained.status_code == 200
    report = explained.context["report"]
    assert report is not None and report.result.total >= 1 and report.statements
    html = explained.content.decode()
    assert "Execution Time" in html and ("Scan" in html or "Result" in html)
    assert QueryLog.objects.filter(query_text="pricing").count() == 2  # the re-run is not logged


def test_explain_of_a_hidden_query_says_why_not(admin_client: Client, activity: None) -> None:
    hidden = QueryLog.objects.get(principal_kind="anonymous")
    response = admin_client.post(f"/admin/analytics/querylog/{hidden.pk}/explain/")
    assert response.status_code == 200 and "QUERY_LOG_ANONYMOUS_TEXT" in response.content.decode()


def test_synonym_and_gap_admins_render(admin_client: Client) -> None:
    Synonym.objects.create(terms=["rfp", "request for proposal"])
    ContentGap.objects.create(query_text="modern slavery")
    assert admin_client.get("/admin/search/synonym/").status_code == 200
    assert "rfp" in admin_client.get("/admin/search/synonym/", {"q": "proposal"}).content.decode()
    added = admin_client.post(
        "/admin/search/synonym/add/", {"terms": "Bid, tender", "language": "", "one_way": ""}
    )
    assert added.status_code == 302 and Synonym.objects.filter(terms=["bid", "tender"]).exists()
    assert admin_client.get("/admin/analytics/contentgap/").status_code == 200
