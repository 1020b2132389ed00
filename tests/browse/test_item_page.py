"""/items/<slug>: sanitized Markdown, sidebar, superseded banner, read marks, access."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from search.models import ContentItem, ItemRead
from search.services.content import item_mark_superseded
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db


def test_the_body_is_rendered_from_markdown_and_sanitized(client: Client) -> None:
    # given
    body = (
        "## Steps\n\n1. **Plan** the bid\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "<script>alert('x')</script>\n\n[bad](javascript:alert(1)) [good](https://example.org)\n\n"
        '<img src=x onerror="alert(1)">'
    )
    item = make_item(title="Steps guide", body=body)
    # when
    html = client.get(f"/items/{item.slug}").content.decode()
    prose = html.split('<div class="prose"', 1)[1].split("</div>", 1)[0]
    # then
    assert "<h2>Steps</h2>" in prose and "<strong>Plan</strong>" in prose and "<table>" in prose
    assert "<script" not in prose and "&lt;script&gt;" in prose
    assert "javascript:" not in prose.replace("[bad](javascript:alert(1))", "")
    assert 'href="https://example.org"' in prose and 'rel="noopener noreferrer nofollow"' in prose
    assert "<img" not in prose


def test_the_sidebar_shows_metadata_review_and_quality(client: Client, staff: Any) -> None:
    # given
    item = make_item(title="Pricing policy", body="Text.", primary_domain="pricing", content_type="policy",
                     subtopic="pricing_policy", author_name="Ana Ruiz", review_cadence_days=180,
                     ai_keywords=["margin"])
    ContentItem.objects.filter(pk=item.pk).update(
        quality_score=82.0, quality_breakdown={"freshness": 30.0, "completeness": 27.456, "cadence_penalty": -5},
        governance_review_status="due_soon", verified_by=staff,
    )
    # when
    html = client.get(f"/items/{item.slug}").content.decode()
    # then
    for text in ("Ana Ruiz", "Pricing policy", "Due soon", "every 180 days", "Quality 82 / 100", "Freshness",
                 "27.5", "Cadence penalty", "Verified by editor", "margin"):
        assert text in html, text


def test_an_unscored_item_says_so(client: Client) -> None:
    item = make_item(title="Fresh item")
    assert "Not scored yet." in client.get(f"/items/{item.slug}").content.decode()


def test_a_superseded_item_links_to_the_newer_one(client: Client) -> None:
    # given
    old = make_item(title="Pricing policy 2023")
    new = make_item(title="Pricing policy 2025")
    item_mark_superseded(item=old, by=new)
    # when
    html = client.get(f"/items/{old.slug}").content.decode()
    # then
    assert "This item has been superseded." in html
    assert f'<a href="/items/{new.slug}">Pricing policy 2025</a>' in html


def test_the_newer_item_is_not_named_when_it_cannot_be_read(client: Client) -> None:
    old = make_item(title="Old guide")
    new = make_item(title="Secret replacement", visibility="staff")
    item_mark_superseded(item=old, by=new)
    html = client.get(f"/items/{old.slug}").content.decode()
    assert "A newer version exists that you cannot open." in html
    assert "Secret replacement" not in html


def test_opening_an_item_marks_it_read_for_signed_in_users(client: Client, user_client: Client, user: Any) -> None:
    # given
    item = make_item(title="Read me")
    other = make_item(title="Unread one")
    build()
    # when
    client.get(f"/items/{item.slug}")
    assert not ItemRead.objects.exists()
    user_client.get(f"/items/{item.slug}")
    # then
    assert ItemRead.objects.filter(user=user, item=item).exists()
    html = user_client.get("/browse?unread_only=1").content.decode()
    assert other.title in html and f"/items/{item.slug}\"" not in html


def test_unreadable_drafts_and_missing_items_answer_404(client: Client, user_client: Client) -> None:
    # given
    staff_only = make_item(title="Staff only", visibility="staff")
    draft = make_item(title="Draft only", publish=False)
    members = make_item(title="Members", visibility="signed_in")
    # then
    assert client.get(f"/items/{staff_only.slug}").status_code == 404
    assert client.get(f"/items/{draft.slug}").status_code == 404
    assert client.get("/items/no-such-item").status_code == 404
    assert client.get(f"/items/{members.slug}").status_code == 404
    assert user_client.get(f"/items/{members.slug}").status_code == 200


def test_visitors_read_the_live_revision_not_the_draft(client: Client) -> None:
    # given
    from search.services.content import item_save_revision

    item = make_item(title="Live title", body="Live body.")
    item_save_revision(item=item, title="Draft title", body="Draft body.", publish=False)
    # when
    html = client.get(f"/items/{item.slug}").content.decode()
    # then
    assert "Live title" in html and "Draft title" not in html


def test_a_markup_title_renders_as_text_on_the_item_page(client: Client) -> None:
    item = make_item(title="<img src=x onerror=alert(1)>")
    html = client.get(f"/items/{item.slug}").content.decode()
    assert '<h1 class="item__title">&lt;img src=x onerror=alert(1)&gt;</h1>' in html
