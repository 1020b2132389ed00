"""The presets bar in a real browser (Playwright + Debian's headless Chromium) against a live server.

Flows: set filters -> save -> clear -> apply -> rename -> delete -> undo, with inline name errors and a
sticky ``from_bid``; and an anonymous visitor's browser presets imported into the account at sign-in.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from django.test import Client

from presets.models import Preset
from presets.system import system_presets_ensure
from tests.chromium import launched_chromium, needs_chromium
from tests.factories import build, make_item

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    needs_chromium,
]


@pytest.fixture(scope="module")  # module: the sync API keeps an event loop running until closed
def browser() -> Iterator[Any]:
    with launched_chromium() as chromium:
        yield chromium


@pytest.fixture
def corpus(transactional_db: Any) -> None:
    system_presets_ensure()  # a transactional test before this one may have flushed the migration's rows
    make_item(
        title="Pricing policy", body="How we price bids.", content_type="policy", primary_domain="pricing"
    )
    make_item(
        title="Bid writing guide",
        body="Writing winning bids.",
        content_type="guide",
        primary_domain="bid_writing",
    )
    make_item(
        title="Security questions", body="Answers on security.", content_type="qa", primary_domain="security"
    )
    build()


def _signed_in_context(browser: Any, live_server: Any, user: Any) -> Any:
    client = Client()
    client.force_login(user)
    context = browser.new_context()
    context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    return context


def _query(page: Any) -> dict[str, list[str]]:
    return parse_qs(urlparse(page.url).query)


def test_save_apply_rename_delete_undo(browser: Any, live_server: Any, corpus: None, make_user: Any) -> None:
    from playwright.sync_api import expect

    # given: a signed-in user on /browse, arriving from a bid
    user = make_user("browser-user")
    context = _signed_in_context(browser, live_server, user)
    page = context.new_page()
    page.goto(f"{live_server.url}/browse?from_bid=BID-42")
    chips = page.locator("#presets-bar .preset-chip")
    expect(chips).to_have_count(5)
    save = page.get_by_role("button", name="Save filters…")
    expect(save).to_be_hidden()  # nothing to save without filters

    # when: set a filter in the panel
    panel = page.locator("#filter-panel")
    if panel.get_attribute("open") is None:
        panel.locator("summary").click()
    panel.locator("input[name='content_type'][value='policy']").check()
    expect(page).to_have_url(re.compile(r"content_type=policy"))

    # then: "Save" is offered; the name is checked inline (empty, 41 characters)
    expect(save).to_be_visible()
    save.click()
    dialog = page.locator("dialog.presets__dialog")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Save", exact=True).click()
    expect(dialog.locator("#preset-name-error")).to_contain_text("Give the preset a name")
    dialog.get_by_label("Name").fill("x" * 41)
    dialog.get_by_role("button", name="Save", exact=True).click()
    expect(dialog.locator("#preset-name-error")).to_contain_text("41 characters")
    dialog.get_by_label("Name").fill("Policies")  # a system preset's name: the server refuses it
    dialog.get_by_role("button", name="Save", exact=True).click()
    expect(dialog.locator("#preset-name-error")).to_contain_text("system preset")

    # when: a valid name
    dialog.get_by_label("Name").fill("  My pricing policies ")
    dialog.get_by_role("button", name="Save", exact=True).click()

    # then: the chip is there and active; the server holds the normalised preset
    expect(dialog).to_be_hidden()
    mine = page.locator("#presets-bar .preset-chip", has_text="My pricing policies")
    expect(mine).to_have_attribute("aria-pressed", "true")
    saved = Preset.objects.get(owner=user)
    assert (saved.name, saved.params) == ("My pricing policies", {"content_type": ["policy"]})

    # when: clicking the active chip clears the filters, keeping from_bid
    mine.click()
    expect(page).not_to_have_url(re.compile(r"content_type="))
    assert _query(page) == {"from_bid": ["BID-42"]}
    expect(mine).to_have_attribute("aria-pressed", "false")

    # when: clicking it again applies its filters, from_bid still sticky
    mine.click()
    expect(page).to_have_url(re.compile(r"content_type=policy"))
    assert _query(page) == {"content_type": ["policy"], "from_bid": ["BID-42"]}
    expect(mine).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#results")).to_contain_text("Pricing policy")
    expect(page.locator("#results")).not_to_contain_text("Bid writing guide")

    # when: another chip (a system preset) replaces the filters
    page.locator("#presets-bar .preset-chip", has_text="Q&A library").click()
    expect(page).to_have_url(re.compile(r"content_type=qa"))
    assert _query(page)["from_bid"] == ["BID-42"]

    # when: rename inline in "Manage"
    page.get_by_role("button", name="Manage").click()
    page.get_by_role("button", name="Rename My pricing policies").click()
    rename = page.get_by_label("New name for My pricing policies")
    rename.fill("y" * 41)
    rename.press("Enter")
    expect(page.locator("#presets-manage .presets__error")).to_contain_text("41 characters")
    rename.fill("Policies I use")
    rename.press("Enter")

    # then
    expect(page.locator("#presets-bar .preset-chip", has_text="Policies I use")).to_have_count(1)
    saved.refresh_from_db()
    assert saved.name == "Policies I use"

    # when: delete, then undo
    page.get_by_role("button", name="Delete Policies I use").click()
    expect(page.locator("#presets-bar .preset-chip", has_text="Policies I use")).to_have_count(0)
    saved.refresh_from_db()
    assert saved.deleted_at is not None
    page.locator("#presets-bar .presets__status").get_by_role("button", name="Undo").click()

    # then: the same preset is back
    expect(page.locator("#presets-bar .preset-chip", has_text="Policies I use")).to_have_count(1)
    saved.refresh_from_db()
    assert saved.deleted_at is None
    page.reload()
    expect(page.locator("#presets-bar .preset-chip")).to_have_count(6)
    context.close()


def test_anonymous_presets_stay_in_the_browser_and_import_on_sign_in(
    browser: Any, live_server: Any, corpus: None, make_user: Any
) -> None:
    from playwright.sync_api import expect

    # given: an anonymous visitor saves a preset (kept in localStorage)
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{live_server.url}/browse?content_type=guide&q=bids")
    expect(page.locator("#presets-bar .preset-chip")).to_have_count(5)
    page.get_by_role("button", name="Save filters…").click()
    page.get_by_label("Name").fill("Guides")
    page.locator("dialog.presets__dialog").get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#presets-bar .preset-chip", has_text="Guides")).to_have_attribute(
        "aria-pressed", "true"
    )
    stored = page.evaluate("JSON.parse(localStorage.getItem('kb.presets.v1'))")
    assert [(p["name"], p["params"]) for p in stored] == [("Guides", {"content_type": ["guide"]})]
    assert Preset.objects.filter(is_system=False).count() == 0

    # when: the visitor signs in (same browser) and comes back to /browse
    user = make_user("importer")
    client = Client()
    client.force_login(user)
    context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    page.goto(f"{live_server.url}/browse")
    offer = page.locator("#presets-bar .presets__import")
    expect(offer).to_contain_text("1 preset is saved in this browser")
    offer.get_by_role("button", name="Import").click()

    # then: the preset is in the account, the browser copy is gone, and a second import has nothing to do
    expect(page.locator("#presets-bar .presets__status")).to_contain_text("Imported 1 preset")
    expect(page.locator("#presets-bar .preset-chip", has_text="Guides")).to_have_count(1)
    assert list(Preset.objects.filter(owner=user).values_list("name", flat=True)) == ["Guides"]
    assert page.evaluate("localStorage.getItem('kb.presets.v1')") is None
    page.reload()
    expect(page.locator("#presets-bar .preset-chip")).to_have_count(6)
    expect(offer).to_be_hidden()
    context.close()
