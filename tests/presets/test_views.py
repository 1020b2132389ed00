"""The JSON API under /api/presets/: session auth, CSRF, JSON errors, two tabs, import on sign-in."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from presets.models import Preset

pytestmark = pytest.mark.django_db

API = "/api/presets/"


def _json(client: Client, method: str, url: str, body: Any = None) -> Any:
    send = getattr(client, method)
    if body is None:
        return send(url)
    return send(url, data=json.dumps(body), content_type="application/json")


@pytest.fixture
def tab(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _save(client: Client, name: str = "Pricing", params: Any = None) -> dict[str, Any]:
    response = _json(client, "post", API, {"name": name, "params": params or {"domain": ["pricing"]}})
    assert response.status_code == 201, response.content
    return response.json()["preset"]


def test_anonymous_lists_system_presets_with_the_filter_schema(client: Client) -> None:
    # when
    response = client.get(API)

    # then
    assert response.status_code == 200
    body = response.json()
    assert [p["name"] for p in body["presets"]] == [
        "Overdue for review",
        "Case studies",
        "Q&A library",
        "Updated this quarter",
        "Policies",
    ]
    assert all(p["is_system"] for p in body["presets"])
    assert body["authenticated"] is False
    assert body["filters"]["include_qa"] == {"kind": "bool", "default": "1"}
    assert body["presets"][1]["query"] == "content_type=case_study"
    assert "csrftoken" in response.cookies
    assert "no-cache" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]


def test_anonymous_writes_get_403_with_a_clear_message(client: Client, user: Any) -> None:
    # given
    mine = Preset.objects.create(owner=user, name="Mine", params={"domain": ["a"]})

    # when
    responses = [
        _json(client, "post", API, {"name": "x", "params": {"domain": ["a"]}}),
        _json(client, "patch", f"{API}{mine.pk}/", {"name": "y"}),
        client.delete(f"{API}{mine.pk}/"),
        client.post(f"{API}{mine.pk}/restore/"),
        _json(client, "post", f"{API}import/", {"presets": []}),
    ]

    # then
    for response in responses:
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "preset_sign_in_required"
        assert "Sign in" in response.json()["error"]["message"]


def test_writes_without_a_csrf_token_are_refused_in_json(user: Any) -> None:
    # given
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)

    # when
    refused = _json(strict, "post", API, {"name": "x", "params": {"domain": ["a"]}})
    token = strict.get(API).cookies["csrftoken"].value
    accepted = strict.post(
        API,
        data=json.dumps({"name": "x", "params": {"domain": ["a"]}}),
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )

    # then
    assert refused.status_code == 403
    assert refused["Content-Type"] == "application/json"
    assert refused.json()["error"]["code"] == "csrf_failed"
    assert accepted.status_code == 201


def test_save_list_rename_delete_undo(tab: Client) -> None:
    # given
    saved = _save(tab, "Pricing", {"domain": ["pricing"], "q": "ignored", "include_qa": "0"})

    # when
    listed = tab.get(API).json()["presets"]
    renamed = _json(tab, "patch", f"{API}{saved['id']}/", {"name": "Pricing, no Q&A"})
    deleted = tab.delete(f"{API}{saved['id']}/")
    after_delete = [p["id"] for p in tab.get(API).json()["presets"]]
    restored = tab.post(f"{API}{saved['id']}/restore/")

    # then
    assert saved["params"] == {"domain": ["pricing"], "include_qa": "0"}
    assert saved["query"] == "domain=pricing&include_qa=0"
    assert listed[-1]["id"] == saved["id"] and not listed[-1]["is_system"]
    assert renamed.status_code == 200 and renamed.json()["preset"]["name"] == "Pricing, no Q&A"
    assert deleted.status_code == 200 and deleted.json()["preset"]["deleted_at"]
    assert saved["id"] not in after_delete
    assert restored.status_code == 200 and restored.json()["preset"]["deleted_at"] is None
    assert tab.get(API).json()["presets"][-1]["name"] == "Pricing, no Q&A"


@pytest.mark.parametrize(
    ("name", "status"), [("", 400), (" ", 400), ("a", 201), ("b" * 40, 201), ("c" * 41, 400)]
)
def test_name_bounds_over_http(tab: Client, name: str, status: int) -> None:
    # when
    response = _json(tab, "post", API, {"name": name, "params": {"domain": ["pricing"]}})

    # then
    assert response.status_code == status
    if status == 400:
        assert response.json()["error"]["field"] == "name"


def test_errors_are_json_with_field_and_status(tab: Client) -> None:
    # given
    _save(tab, "Pricing")
    system = Preset.objects.get(system_key="policies")

    # when
    taken = _json(tab, "post", API, {"name": "pricing", "params": {"domain": ["x"]}})
    bad_param = _json(tab, "post", API, {"name": "New", "params": {"colour": "red"}})
    bad_body = tab.post(API, data="not json", content_type="application/json")
    extra = _json(tab, "post", API, {"name": "New", "params": {"domain": ["x"]}, "owner": 1})
    immutable = _json(tab, "patch", f"{API}{system.pk}/", {"name": "Mine"})
    missing = tab.delete(f"{API}999999/")

    # then
    assert (taken.status_code, taken.json()["error"]["field"]) == (409, "name")
    assert (bad_param.status_code, bad_param.json()["error"]["field"]) == (400, "params.colour")
    assert bad_body.status_code == 400 and "JSON" in bad_body.json()["error"]["message"]
    assert extra.status_code == 400 and extra.json()["error"]["field"] == "owner"
    assert immutable.status_code == 403 and "system preset" in immutable.json()["error"]["message"]
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "preset_not_found"


def test_two_tabs_renaming_the_same_preset_last_write_wins(user: Any) -> None:
    # given: two tabs of the same session-holding user, both showing the preset
    tab_one, tab_two = Client(), Client()
    tab_one.force_login(user)
    tab_two.force_login(user)
    preset = _save(tab_one, "Pricing")

    # when
    one = _json(tab_one, "patch", f"{API}{preset['id']}/", {"name": "From tab one"})
    two = _json(tab_two, "patch", f"{API}{preset['id']}/", {"name": "From tab two"})

    # then: neither tab sees an error page; the later write is what stays
    assert (one.status_code, two.status_code) == (200, 200)
    assert [p["name"] for p in tab_one.get(API).json()["presets"]][-1] == "From tab two"


def test_a_tab_renaming_a_preset_another_tab_deleted_gets_a_json_answer(user: Any) -> None:
    # given
    tab_one, tab_two = Client(), Client()
    tab_one.force_login(user)
    tab_two.force_login(user)
    preset = _save(tab_one, "Pricing")
    tab_one.delete(f"{API}{preset['id']}/")

    # when
    response = _json(tab_two, "patch", f"{API}{preset['id']}/", {"name": "Renamed"})

    # then
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert "Undo the delete" in response.json()["error"]["message"]


@pytest.mark.django_db(transaction=True)
def test_two_tabs_renaming_at_the_same_moment_both_succeed(make_user: Any) -> None:
    # given
    user = make_user("racer")
    preset = Preset.objects.create(owner=user, name="Start", params={"domain": ["a"]})
    barrier = threading.Barrier(2)
    statuses: list[int] = []

    def rename(name: str) -> None:
        try:
            tab = Client()
            tab.force_login(user)
            barrier.wait(timeout=10)
            statuses.append(_json(tab, "patch", f"{API}{preset.pk}/", {"name": name}).status_code)
        finally:
            connection.close()

    # when
    threads = [threading.Thread(target=rename, args=(n,)) for n in ("Left", "Right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)

    # then
    assert statuses == [200, 200]
    preset.refresh_from_db()
    assert preset.name in {"Left", "Right"}


def test_apply_endpoint_returns_url_params(tab: Client) -> None:
    # given
    preset = _save(tab, "QA", {"content_type": ["qa"]})

    # when
    response = tab.get(
        f"{API}{preset['id']}/apply/", {"q": "bid", "from_bid": "BID-9", "domain": "x", "cursor": "c"}
    )

    # then
    assert response.json() == {
        "params": {"content_type": ["qa"], "from_bid": ["BID-9"], "q": ["bid"]},
        "query": "content_type=qa&from_bid=BID-9&q=bid",
    }


def test_validate_works_for_anonymous_visitors(client: Client) -> None:
    # when
    ok = _json(
        client, "post", f"{API}validate/", {"name": "  Mine ", "params": {"content_type": ["qa"], "q": "x"}}
    )
    bad = _json(client, "post", f"{API}validate/", {"name": "x" * 41, "params": {"content_type": ["qa"]}})

    # then
    assert ok.json() == {"name": "Mine", "params": {"content_type": ["qa"]}, "query": "content_type=qa"}
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "name"


def test_import_on_sign_in_merges_browser_presets(client: Client, user: Any) -> None:
    # given: presets kept in the browser while anonymous, then the visitor signs in
    kept = [
        {"id": "local-1", "name": "Security", "params": {"domain": ["security"]}, "created_at": "2025-01-01"},
        {"id": "local-2", "name": "Same as system", "params": {"content_type": ["qa"]}},
    ]
    assert client.login(username="alice", password="pw-presets-123")

    # when
    first = _json(client, "post", f"{API}import/", {"presets": kept})
    second = _json(client, "post", f"{API}import/", {"presets": kept})

    # then
    assert first.status_code == 200
    assert [p["name"] for p in first.json()["created"]] == ["Security"]
    assert [s["name"] for s in first.json()["skipped"]] == ["Same as system"]
    assert first.json()["presets"][-1]["name"] == "Security"
    assert second.json()["created"] == [] and len(second.json()["skipped"]) == 2
    assert Preset.objects.filter(owner=user).count() == 1


def test_listing_presets_takes_a_fixed_number_of_queries(
    tab: Client, django_assert_max_num_queries: Any
) -> None:
    # given
    for n in range(5):
        _save(tab, f"Preset {n}", {"domain": [f"d{n}"]})

    # when / then: session + user + presets, however many presets there are
    with django_assert_max_num_queries(3):
        response = tab.get(API)
    assert len(response.json()["presets"]) == 10
