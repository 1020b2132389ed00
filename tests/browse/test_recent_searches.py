"""Recent searches: kept on the server for signed-in users, capped, clearable; CSRF-protected writes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from presets.models import RECENT_SEARCHES_KEPT, RecentSearch
from presets.selectors import recent_searches_list
from presets.services import recent_search_clear, recent_search_record
from search.errors import InvalidQuery

pytestmark = pytest.mark.django_db


def test_recording_dedupes_moves_to_front_and_keeps_ten(user: Any) -> None:
    # given
    for i in range(12):
        recent_search_record(user_id=user.pk, query=f"query {i}")
    # when
    recent_search_record(user_id=user.pk, query="  query   5 ")
    # then
    recent = recent_searches_list(user_id=user.pk)
    assert recent[0] == "query 5"
    assert len(recent) == RECENT_SEARCHES_KEPT
    assert recent.count("query 5") == 1
    assert "query 0" not in recent


def test_empty_queries_are_refused(user: Any) -> None:
    with pytest.raises(InvalidQuery):
        recent_search_record(user_id=user.pk, query="  \u200b ")


def test_clearing_forgets_only_this_user(user: Any, staff: Any) -> None:
    recent_search_record(user_id=user.pk, query="mine")
    recent_search_record(user_id=staff.pk, query="theirs")
    assert recent_search_clear(user_id=user.pk) == 1
    assert recent_searches_list(user_id=user.pk) == []
    assert recent_searches_list(user_id=staff.pk) == ["theirs"]


def test_the_api_lists_records_and_clears(user_client: Client) -> None:
    # when
    recorded = user_client.post("/api/recent-searches", json.dumps({"query": "social value"}),
                                content_type="application/json")
    listed = user_client.get("/api/recent-searches")
    cleared = user_client.delete("/api/recent-searches")
    # then
    assert recorded.json() == {"results": ["social value"]}
    assert listed.json() == {"results": ["social value"]}
    assert cleared.json() == {"results": []}
    assert not RecentSearch.objects.exists()


def test_the_api_names_a_bad_field(user_client: Client) -> None:
    response = user_client.post("/api/recent-searches", json.dumps({"q": "x"}), content_type="application/json")
    assert response.status_code == 400 and response.json()["error"]["field"] == "query"


def test_anonymous_visitors_keep_theirs_in_the_browser(client: Client) -> None:
    response = client.get("/api/recent-searches")
    assert response.status_code == 403
    assert "browser" in response.json()["error"]["message"]


def test_writes_need_the_csrf_header(user: Any) -> None:
    # given
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/browse")
    token = client.cookies["csrftoken"].value
    body = json.dumps({"query": "pricing"})
    # then
    assert client.post("/api/recent-searches", body, content_type="application/json").status_code == 403
    assert client.post("/api/recent-searches", body, content_type="application/json",
                       HTTP_X_CSRFTOKEN=token).status_code == 200


def test_the_browse_page_embeds_the_users_recent_searches(user_client: Client, user: Any) -> None:
    recent_search_record(user_id=user.pk, query="bid </script> tricks")
    html = user_client.get("/browse").content.decode()
    assert '<script id="kb-recent-data" type="application/json">["bid \\u003C/script\\u003E tricks"]</script>' in html
