"""The site's follow UI without a browser: the results page's button, /follows, its forms and the header."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from follows import services
from follows.models import Follow, FollowItem
from tests.follows.conftest import publish, session_client

pytestmark = pytest.mark.django_db


def test_the_results_page_offers_follow_to_signed_in_users_only(reader: Any, pricing: dict[str, Any]) -> None:
    anonymous = Client().get("/browse?q=pricing+policy").content.decode()
    signed_in = session_client(reader).get("/browse?q=pricing+policy&domain=pricing").content.decode()
    no_js = session_client(reader).get("/search?q=pricing+policy").content.decode()

    assert 'id="follow-search"' not in anonymous
    assert 'id="follow-search"' in signed_in and 'id="follow-search"' in no_js
    assert '<input type="hidden" name="q" value="pricing policy">' in signed_in
    assert '<input type="hidden" name="domain" value="pricing">' in signed_in


def test_following_from_the_results_page_then_the_page_says_so(reader: Any, pricing: dict[str, Any]) -> None:
    client = session_client(reader)

    # when the form is posted (what the button sends)
    response = client.post("/follows/new", {"q": "pricing policy", "domain": ["pricing"]})

    # then the follow exists, its baseline taken, and /follows says so
    follow = Follow.objects.get(owner=reader)
    assert response.status_code == 302 and response["Location"] == f"/follows#follow-{follow.pk}"
    assert follow.filters == {"domain": ["pricing"]} and follow.last_run_at is not None
    page = client.get("/follows").content.decode()
    assert "You follow “pricing policy”" in page and "Nothing new since you last looked." in page
    results = client.get("/browse?q=pricing+policy&domain=pricing").content.decode()
    assert 'id="follow-state"' in results and 'id="follow-search"' not in results


def test_follow_forms_need_a_session_and_the_csrf_token(reader: Any, pricing: dict[str, Any]) -> None:
    anonymous = Client().post("/follows/new", {"q": "pricing"})
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/admin/login/")
    assert Client().get("/follows")["Location"].startswith("/admin/login/")

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(reader)
    assert strict.post("/follows/new", {"q": "pricing"}).status_code == 403
    assert not Follow.objects.exists()


def test_a_bad_filter_is_refused_in_words_on_the_follows_page(reader: Any, db: Any) -> None:
    client = session_client(reader)
    response = client.post("/follows/new", {"q": "pricing", "freshness": "4000"}, follow=True)
    assert "That search could not be followed: freshness must be between 1 and 3650" in response.content.decode()
    assert not Follow.objects.exists()


def test_the_follows_page_marks_new_items_and_the_header_counts_them(reader: Any, pricing: dict[str, Any]) -> None:
    # given a follow and a new item found by a run
    client = session_client(reader)
    client.post("/follows/new", {"q": "pricing policy"})
    fresh = publish("Pricing policy for frameworks", "The pricing policy for frameworks.")
    services.follows_run_all()

    # then the header counts it on every page, and /follows marks it
    header = client.get("/browse").content.decode()
    assert 'id="follow-news"' in header and "new for “pricing policy”" in header
    page = client.get("/follows").content.decode()
    assert f'data-item-id="{fresh.pk}" data-kind="new"' in page and ">New</span>" in page
    assert "Pricing policy for frameworks" in page

    # when marked seen, it moves to "Earlier" and the header count goes
    follow = Follow.objects.get(owner=reader)
    assert client.post(f"/follows/{follow.pk}/seen").status_code == 302
    assert FollowItem.objects.get(follow=follow).seen_at is not None
    assert "Followed searches</a>" in client.get("/browse").content.decode()
    assert "Earlier (1)" in client.get("/follows").content.decode()

    # when unfollowed, it is gone
    client.post(f"/follows/{follow.pk}/delete")
    assert not Follow.objects.exists()


def test_a_paused_follow_shows_its_reason(reader: Any, pricing: dict[str, Any]) -> None:
    follow = services.follow_create(owner=reader, query="pricing policy")
    Follow.objects.filter(pk=follow.pk).update(filters={"freshness": ["99999"]})
    services.follows_run_all()

    page = session_client(reader).get("/follows").content.decode()

    assert "data-paused-reason" in page and "The saved search no longer works: freshness must be between" in page


def test_a_saved_preset_can_be_followed(reader: Any, pricing: dict[str, Any]) -> None:
    from presets.services import preset_create

    preset = preset_create(
        owner=reader, name="Pricing policies", params={"domain": "pricing", "content_type": "policy"}
    )
    client = session_client(reader)

    assert "Follow a saved preset" in client.get("/follows").content.decode()
    client.post("/follows/new", {"preset": str(preset.pk), "q": ""})

    follow = Follow.objects.get(owner=reader)
    assert follow.label == "Pricing policies" and follow.query == ""
    assert follow.filters == {"content_type": ["policy"], "domain": ["pricing"]}


def test_another_users_follow_cannot_be_touched(reader: Any, other_reader: Any, pricing: dict[str, Any]) -> None:
    follow = services.follow_create(owner=reader, query="pricing policy")
    client = session_client(other_reader)
    response = client.post(f"/follows/{follow.pk}/delete", follow=True)
    assert "You follow no search with id" in response.content.decode()
    assert Follow.objects.filter(pk=follow.pk).exists()


def test_the_digest_form_turns_the_choice_on_only_where_digests_are_sent(reader: Any, settings: Any) -> None:
    from follows.models import FollowPreference

    client = session_client(reader)
    # a server without digests: the page does not offer it, and a post says why nothing changed
    settings.FOLLOWS_DIGEST = False
    assert "E-mail digest" not in client.get("/follows").content.decode()
    refused = client.post("/follows/digest", {"email_digest": "1"}, follow=True).content.decode()
    assert "FOLLOWS_DIGEST is off" in refused and not FollowPreference.objects.filter(user=reader).exists()
    # with digests: on, shown checked, then off
    settings.FOLLOWS_DIGEST = True
    page = client.post("/follows/digest", {"email_digest": "1"}, follow=True).content.decode()
    assert "E-mail digest turned on." in page and FollowPreference.objects.get(user=reader).email_digest
    client.post("/follows/digest", {})
    assert FollowPreference.objects.get(user=reader).email_digest is False
