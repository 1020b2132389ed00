"""Follow a search in a real browser (Debian's headless Chromium through Playwright, the app on ``live_server``).

A follows a search from the results page; B, who is not in the group that can read the item about to be
published, follows the same search; an editor publishes a matching group-only item; the job runs; A sees the
header count and the item marked New on /follows, and B sees nothing of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from follows.models import Follow
from follows.tasks import follows_run_all_task
from tests.chromium import launched_chromium, needs_chromium
from tests.follows.conftest import publish

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_chromium]
TIMEOUT_MS = 10_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched_chromium() as chromium:
        yield chromium


def _signed_in_page(browser: Any, live_server: Any, user: Any) -> Any:
    client = Client()
    client.force_login(user)
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}])
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (errors.append(d.message), d.dismiss()))
    page.kb_errors = errors
    return page


def _text(locator: Any) -> str:
    return " ".join(locator.inner_text().split())


def _follow_from_the_results_page(page: Any) -> None:
    page.goto("/browse?q=pricing+policy")
    page.wait_for_selector("#result-cards")
    page.get_by_role("button", name="Follow this search").click()
    page.wait_for_url("**/follows#follow-*")
    assert "You follow “pricing policy”" in page.locator(".follows-messages").inner_text()


def test_a_follower_sees_a_newly_published_item_marked_new_and_a_user_without_access_does_not(
    browser: Any, live_server: Any, finance_group: Any, pricing: dict[str, Any]
) -> None:
    # given A (in the finance group) and B (not in it), both signed in
    users = get_user_model().objects
    ada = users.create_user("ada", "ada@example.com", "pw-ada-12345")
    ada.groups.add(finance_group)
    bob = users.create_user("bob", "bob@example.com", "pw-bob-12345")
    a_page = _signed_in_page(browser, live_server, ada)
    b_page = _signed_in_page(browser, live_server, bob)

    # when each searches and clicks "Follow this search"
    _follow_from_the_results_page(a_page)
    _follow_from_the_results_page(b_page)
    assert Follow.objects.filter(query="pricing policy").count() == 2
    a_page.goto("/browse?q=pricing+policy")
    assert a_page.locator("#follow-state").inner_text().startswith("Following this search")

    # and an editor publishes a matching item only the finance group may read, and the job runs
    secret = publish("Pricing policy for finance leads", "The pricing policy margins for finance leads.",
                     visibility="groups", groups=["finance"])
    follows_run_all_task.apply().get()

    # then A's header counts it and /follows marks it New
    a_page.goto("/browse")
    assert _text(a_page.locator("#follow-news")) == "1 new for “pricing policy”"
    a_page.locator("#follow-news").click()
    a_page.wait_for_url("**/follows")
    entry = a_page.locator(f"li.follow-entry[data-item-id='{secret.pk}']")
    assert entry.get_attribute("data-kind") == "new"
    assert entry.locator(".follow-entry__kind").inner_text() == "New"
    assert entry.locator("a").inner_text() == "Pricing policy for finance leads"

    # and B, without access, sees neither a count nor the title
    b_page.goto("/follows")
    assert _text(b_page.locator("#follow-news")) == "Followed searches"
    assert "Pricing policy for finance leads" not in b_page.content()
    assert b_page.locator(".follow-entry").count() == 0
    assert "Nothing new since you last looked." in b_page.locator("#follows-list").inner_text()

    # when A marks it seen, the count goes
    a_page.get_by_role("button", name="Mark the 1 new items of pricing policy as seen").click()
    a_page.wait_for_url("**/follows#follow-*")
    assert _text(a_page.locator("#follow-news")) == "Followed searches"
    assert a_page.kb_errors == [] and b_page.kb_errors == []
    a_page.context.close()
    b_page.context.close()
