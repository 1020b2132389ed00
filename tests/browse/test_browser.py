"""The browse surface in a real browser: Debian's headless Chromium driven by Playwright.

The app is served by pytest-django's ``live_server`` (a thread of this process), so tests need
``transaction=True`` for the server to see their data.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.models import UserProfile
from presets.models import RecentSearch
from search.federation import peers
from tests.chromium import launched_chromium, needs_chromium
from tests.factories import build, make_item
from tests.support import fake_peer

XSS_TITLE = "<img src=x onerror=alert(1)>"
TIMEOUT_MS = 10_000

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    needs_chromium,
]


@pytest.fixture(scope="module")  # module: the sync API keeps an event loop running until closed
def browser() -> Iterator[Any]:
    with launched_chromium() as chromium:
        yield chromium


class Session:
    """A browser tab plus what it saw: preview requests, failed requests and JavaScript dialogs."""

    def __init__(self, browser: Any, base_url: str, **context_args: Any) -> None:
        self.context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 900},
                                           **context_args)
        self.context.set_default_timeout(TIMEOUT_MS)
        self.page = self.context.new_page()
        self.previews: list[str] = []
        self.failed: list[str] = []
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", self._on_request)
        self.page.on("requestfailed", lambda r: self.failed.append(r.url))
        self.page.on("dialog", self._on_dialog)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _on_request(self, request: Any) -> None:
        if "/api/search/preview" in request.url:
            self.previews.append(request.url)

    def _on_dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def preview_options(self) -> list[str]:
        rows = self.page.locator("[data-section='preview']:not([hidden]) .dd-option .dd-option__label")
        return rows.all_inner_texts()

    def card_titles(self) -> list[str]:
        return self.page.locator("#results .cards .card__title").all_inner_texts()


@pytest.fixture
def session(browser: Any, live_server: Any) -> Iterator[Session]:
    tab = Session(browser, live_server.url)
    yield tab
    tab.context.close()
    assert tab.dialogs == [], "a script ran a dialog (XSS?)"
    assert tab.errors == [], "JavaScript errors on the page"


@pytest.fixture
def kb() -> None:
    make_item(title="Pricing policy 2025", body="How we price bids: day rates and fixed fees.",
              primary_domain="pricing", content_type="policy", source="handbook", layer="foundation")
    make_item(title="Why we never accept a 50% deposit clause", body="Deposits and payment terms.",
              primary_domain="pricing", content_type="policy")
    make_item(title="Ordering 500 units", body="Bulk orders of 5000 items.", primary_domain="operations",
              content_type="guide")
    make_item(title="Social value guide", body="Writing social value answers.", primary_domain="social_value",
              content_type="guide")
    make_item(title="Template for price schedules", body="A pricing schedule template.",
              primary_domain="pricing", content_type="template")
    make_item(title="Legal note on contracts", body="Contract clauses.", primary_domain="legal",
              content_type="qa")
    build()


def type_slowly(page: Any, selector: str, text: str, delay_ms: int = 40) -> None:
    page.click(selector)
    page.keyboard.type(text, delay=delay_ms)


def _process_events_until(page: Any, condition: Callable[[], bool], timeout_ms: int = 5000) -> None:
    """Let Playwright deliver its events (routes, responses) until `condition` holds or time runs out."""
    waited = 0
    while not condition() and waited < timeout_ms:
        page.wait_for_timeout(25)
        waited += 25


# --- live preview ---

def test_no_preview_request_before_three_characters(session: Session, kb: None) -> None:
    # given
    page = session.page
    page.goto("/browse")
    # when
    type_slowly(page, "#kb-q", "pr")
    page.wait_for_timeout(700)
    # then
    assert session.previews == []
    # when: the third character
    with page.expect_response(lambda r: "/api/search/preview" in r.url):
        page.keyboard.type("i")
    # then
    assert len(session.previews) == 1 and "q=pri" in session.previews[0]


def test_typing_is_debounced_into_one_request(session: Session, kb: None) -> None:
    # given
    page = session.page
    page.goto("/browse")
    # when: seven characters typed 40 ms apart
    with page.expect_response(lambda r: "/api/search/preview" in r.url):
        type_slowly(page, "#kb-q", "pricing", delay_ms=40)
    page.wait_for_timeout(600)
    # then
    assert len(session.previews) == 1 and "q=pricing" in session.previews[0]
    assert "Pricing policy 2025" in session.preview_options()


def test_only_the_last_answer_renders_when_typing_on(session: Session, kb: None) -> None:
    # given: the first answer is held back by the network
    page = session.page
    held: list[Any] = []

    def hold_first(route: Any) -> None:
        if "q=soci" in route.request.url and not held:
            held.append(route)
        else:
            route.continue_()

    page.route("**/api/search/preview*", hold_first)
    page.goto("/browse")
    type_slowly(page, "#kb-q", "soci")
    page.wait_for_function("document.getElementById('kb-listbox').getAttribute('aria-busy') === 'true'")
    # The page marks itself busy before fetch() starts; the route reaches this process a little later.
    _process_events_until(page, lambda: bool(held))
    assert held, "the first preview request was not sent"
    # when: the user types on and the newer answer arrives first
    with page.expect_response(lambda r: "q=social" in r.url):
        page.keyboard.type("al")
    page.wait_for_function("document.getElementById('kb-listbox').getAttribute('aria-busy') === 'false'")
    stale = {"results": [{"id": 999, "title": "STALE ANSWER", "content_type": "guide", "primary_domain": "x",
                          "url": "/items/stale"}], "count": 1}
    try:
        held[0].fulfill(status=200, content_type="application/json", body=json.dumps(stale))
    except Exception:  # noqa: BLE001 - the browser already aborted it, which is the point
        pass
    page.wait_for_timeout(300)
    # then
    assert session.preview_options() == ["Social value guide"]
    assert any("q=soci&" in url for url in session.failed), "the superseded request was not aborted"


def test_percent_matches_literally(session: Session, kb: None) -> None:
    page = session.page
    page.goto("/browse")
    with page.expect_response(lambda r: "/api/search/preview" in r.url):
        type_slowly(page, "#kb-q", "50%")
    page.wait_for_selector("[data-section='preview'] .dd-option")
    assert session.preview_options() == ["Why we never accept a 50% deposit clause"]


def test_arrow_keys_pick_a_preview_and_escape_closes(session: Session, kb: None) -> None:
    # given
    page = session.page
    page.goto("/browse")
    type_slowly(page, "#kb-q", "social")
    page.wait_for_selector("[data-section='preview'] .dd-option")
    assert page.get_attribute("#kb-q", "aria-expanded") == "true"
    assert "suggestion" in page.inner_text("#kb-preview-status")
    # when: Escape closes, ArrowDown reopens and moves
    page.keyboard.press("Escape")
    assert page.get_attribute("#kb-q", "aria-expanded") == "false"
    page.keyboard.press("ArrowDown")
    active = page.get_attribute("#kb-q", "aria-activedescendant")
    # then
    assert active and page.get_attribute(f"#{active}", "aria-selected") == "true"
    assert page.inner_text(f"#{active} .dd-option__label") == "Social value guide"
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert re.search(r"/items/social-value-guide$", page.url)


def test_a_rate_limited_preview_keeps_its_results_quietly(session: Session, kb: None) -> None:
    # given: the second preview is refused
    page = session.page
    seen: list[str] = []

    def limit_second(route: Any) -> None:
        seen.append(route.request.url)
        if len(seen) == 1:
            route.continue_()
        else:
            route.fulfill(status=429, headers={"Retry-After": "42"}, content_type="application/json",
                          body='{"error": {"code": "rate_limited", "message": "slow down", "retry_after": 42}}')

    page.route("**/api/search/preview*", limit_second)
    page.goto("/browse")
    type_slowly(page, "#kb-q", "pric")
    page.wait_for_selector("[data-section='preview'] .dd-option")
    before = session.preview_options()
    # when
    with page.expect_response(lambda r: r.status == 429):
        page.keyboard.type("ing po")
    page.wait_for_timeout(200)
    # then
    assert before and session.preview_options() == before
    assert page.locator("[role=alert]:visible").count() == 0


# --- full search, filters, view ---

def test_enter_submits_and_shows_highlights(session: Session, kb: None) -> None:
    # given
    page = session.page
    page.goto("/browse")
    type_slowly(page, "#kb-q", "pricing")
    # when
    with page.expect_response(lambda r: "/browse?q=pricing" in r.url):
        page.keyboard.press("Enter")
    # then
    page.wait_for_selector("#results .cards mark")
    assert "q=pricing" in page.url
    marks = page.locator("#results .cards mark").all_inner_texts()
    assert "Pricing" in marks
    assert "Pricing policy 2025" in session.card_titles()
    assert page.locator("#prompt-cards").count() == 0
    assert json.loads(page.evaluate("localStorage.getItem('kb.recentSearches')")) == ["pricing"]


def test_a_filter_changes_the_url_and_the_results(session: Session, kb: None) -> None:
    # given
    page = session.page
    page.goto("/browse")
    assert page.inner_text("#results-count") == "6 items"
    # when
    page.click("#filter-panel summary")
    with page.expect_response(lambda r: "domain=pricing" in r.url):
        page.check("#filter-domain input[value='pricing']")
    # then
    page.wait_for_function("document.getElementById('results-count').textContent.trim() === '3 items'")
    assert "domain=pricing" in page.url
    assert page.inner_text("#filter-count") == "1 active"
    # when: Q&A is excluded too, then the browser goes back
    page.check("#filter-domain input[value='legal']")
    page.wait_for_function("document.getElementById('results-count').textContent.trim() === '4 items'")
    with page.expect_response(lambda r: "include_qa=0" in r.url):
        page.uncheck("input[name=include_qa][type=checkbox]")
    page.wait_for_function("document.getElementById('results-count').textContent.trim() === '3 items'")
    page.go_back()
    page.wait_for_function("document.getElementById('results-count').textContent.trim() === '4 items'")
    assert page.is_checked("input[name=include_qa][type=checkbox]")
    # when: clearing the filters keeps the query
    page.goto("/browse?q=pricing&domain=legal&from_bid=BID-9")
    page.click("#kb-clear-filters")
    page.wait_for_url(re.compile(r"/browse\?q=pricing&from_bid=BID-9$"))
    page.wait_for_selector("#results .cards mark")


def test_clearing_the_query_returns_to_browse_mode_with_filters(session: Session, kb: None) -> None:
    page = session.page
    page.goto("/browse?q=pricing&domain=pricing")
    page.click("#kb-clear-q")
    page.wait_for_url(re.compile(r"/browse\?domain=pricing$"))
    page.wait_for_function("document.getElementById('results-count').textContent.trim() === '3 items'")
    assert page.is_visible("#sort-field")


def test_view_mode_and_thumbnails_persist_across_reloads(session: Session, kb: None) -> None:
    # given
    page = session.page
    page.goto("/browse")
    assert page.get_attribute("#kb-browse", "data-view") == "grid"
    # when
    page.click("[data-view-button=list]")
    page.check("#kb-hide-thumbs")
    page.reload()
    # then
    assert page.get_attribute("#kb-browse", "data-view") == "list"
    assert page.get_attribute("[data-view-button=list]", "aria-pressed") == "true"
    assert page.is_checked("#kb-hide-thumbs")
    assert not page.locator(".card__thumb").first.is_visible()


def test_load_more_appends_the_next_page(session: Session) -> None:
    for i in range(23):
        make_item(title=f"Numbered item {i:02d}")
    build()
    page = session.page
    page.goto("/browse?sort=title")
    assert len(session.card_titles()) == 20
    page.click("[data-load-more]")
    page.wait_for_function("document.querySelectorAll('#results .cards .card').length === 23")
    assert session.card_titles()[-1] == "Numbered item 22"
    assert page.locator("[data-load-more]").count() == 0


def test_a_page_that_arrives_after_the_results_changed_is_not_appended(session: Session) -> None:
    # given a first page of 20, a next page held in flight, and two items of another domain
    for i in range(23):
        make_item(title=f"Numbered item {i:02d}")
    make_item(title="Zoo keeping", primary_domain="zoo")
    make_item(title="Zoo feeding", primary_domain="zoo")
    build()
    page = session.page
    held: list[Any] = []
    page.route("**/browse?*", lambda route: held.append(route) if
               route.request.headers.get("x-kb-partial") == "page" else route.continue_())
    page.goto("/browse?sort=title")
    page.click("[data-load-more]")
    page.wait_for_function("document.querySelector('[data-load-more]').textContent === 'Loading…'")
    # when the results change (a filter) before the held page comes back
    page.evaluate("() => { window.kbBrowse.applyParams({domain: ['zoo']}); }")
    page.wait_for_function("document.querySelectorAll('#results .cards .card').length === 2")
    _process_events_until(page, lambda: bool(held))
    assert held, "the next page was not requested"
    held[0].continue_()
    page.wait_for_timeout(300)
    # then the old list's page is dropped: the new results stand alone
    assert sorted(session.card_titles()) == ["Zoo feeding", "Zoo keeping"]


def test_a_rate_limited_search_keeps_the_results_and_says_when(session: Session, kb: None) -> None:
    # given
    page = session.page
    page.goto("/browse?q=pricing")
    before = session.card_titles()
    page.route("**/browse?*", lambda route: route.fulfill(
        status=429, headers={"Retry-After": "17"}, content_type="text/html", body="") if
        route.request.headers.get("x-kb-partial") else route.continue_())
    # when
    page.evaluate("() => { window.kbBrowse.setQuery('social value'); }")
    # then
    page.wait_for_selector("#kb-quiet-notice:visible")
    assert page.inner_text("#kb-quiet-notice") == "Too many searches — try again in 17 s."
    assert session.card_titles() == before
    assert page.is_hidden("#kb-failed-notice")


def test_a_failed_search_offers_a_retry(session: Session, kb: None) -> None:
    # given
    page = session.page
    page.goto("/browse")
    page.route("**/browse?*", lambda route: route.abort() if route.request.headers.get("x-kb-partial")
               else route.continue_())
    # when
    page.evaluate("() => { window.kbBrowse.setQuery('pricing'); }")
    # then
    page.wait_for_selector("#kb-failed-notice:visible")
    assert "Search query failed" in page.inner_text("#kb-failed-notice")
    # when: the network is back
    page.unroute("**/browse?*")
    page.click("#kb-retry")
    page.wait_for_selector("#results .cards mark")
    assert page.is_hidden("#kb-failed-notice")


def test_the_presets_hook_applies_params(session: Session, kb: None) -> None:
    page = session.page
    page.goto("/browse?q=pricing&from_bid=BID-1")
    assert page.locator("#presets-bar[data-presets-api='/api/presets/']").count() == 1
    events = page.evaluate_handle(
        "(() => { const seen = []; document.addEventListener('kb:paramschange', e => seen.push(e.detail)); "
        "return seen; })()")
    page.evaluate("() => { window.kbBrowse.applyParams({content_type: ['template']}); }")
    page.wait_for_url(re.compile(r"q=pricing&from_bid=BID-1&content_type=template"))
    page.wait_for_function("document.getElementById('results-count').textContent.includes('1 result')")
    assert page.is_checked("input[name=content_type][value=template]")
    assert events.evaluate("seen => seen[0].content_type") == ["template"]


# --- cold-start prompt cards ---

def test_prompt_cards_appear_hide_and_dispatch_each_kind(session: Session, kb: None) -> None:
    page = session.page
    # appear
    page.goto("/browse")
    assert page.locator(".prompt-card").count() == 3
    # search kind: runs the query and records it
    page.click("[data-prompt-query]")
    page.wait_for_url(re.compile(r"/browse\?q=pricing\+policy$"))
    page.wait_for_selector("#results .cards mark")
    assert page.locator("#prompt-cards").count() == 0
    assert json.loads(page.evaluate("localStorage.getItem('kb.recentSearches')")) == ["pricing policy"]
    # filter kind: applies whitelisted filters, no recent-search write
    page.goto("/browse")
    page.click("[data-prompt-params]")
    page.wait_for_url(re.compile(r"/browse\?content_type=template&include_qa=0$"))
    page.wait_for_function("document.getElementById('results-count').textContent.trim() === '1 item'")
    assert page.locator("#prompt-cards").count() == 0
    assert json.loads(page.evaluate("localStorage.getItem('kb.recentSearches')")) == ["pricing policy"]
    # chipComposite: a chip applies its domain
    page.goto("/browse")
    assert page.locator("[data-chip-domain]").all_inner_texts()[0].startswith("Pricing")
    page.click("[data-chip-domain='pricing']")
    page.wait_for_url(re.compile(r"/browse\?domain=pricing$"))
    # "More domains…" opens the panel on domain without changing the URL
    page.goto("/browse")
    page.click("[data-more-domains]")
    assert page.url.endswith("/browse")
    assert page.evaluate("document.getElementById('filter-panel').open")
    assert page.evaluate("document.activeElement.name") == "domain"


def test_prompt_cards_hide_while_loading(session: Session, kb: None) -> None:
    # given: the next results are held back
    page = session.page
    held = _browse_with_results_held(page)
    # when
    page.evaluate("() => { window.kbBrowse.applyParams({freshness: '30'}); }")
    page.wait_for_function("document.getElementById('results').getAttribute('aria-busy') === 'true'")
    # then
    assert page.locator(".prompt-card").count() == 3
    assert not page.locator("#prompt-cards").is_visible()
    _process_events_until(page, lambda: bool(held))
    held[0].continue_()
    page.wait_for_function("document.getElementById('results').getAttribute('aria-busy') === 'false'")


def test_a_signed_in_user_picks_a_focus_and_searches_are_kept_on_the_server(
    session: Session, kb: None, live_server: Any
) -> None:
    # given
    user = get_user_model().objects.create_user(username="mia", password="pw-mia-12345")
    session.page.goto("/browse")
    session.context.add_cookies([{"name": "sessionid", "value": _session_cookie(user), "url": live_server.url}])
    page = session.page
    # when: one click on a focus
    page.goto("/browse")
    page.click("button[name=focus][value=marketing]")
    page.wait_for_selector("text=Check our tone of voice")
    # then
    assert UserProfile.objects.get(user=user).primary_focus == "marketing"
    # when: the search card runs
    page.click("[data-prompt-query]")
    page.wait_for_url(re.compile(r"q=tone\+of\+voice"))
    page.wait_for_function("document.querySelector('.results__inner[data-mode=search]') !== null")
    # then: kept on the server, shown in the dropdown on the next visit
    _wait_for(lambda: RecentSearch.objects.filter(user=user, query="tone of voice").exists())
    page.goto("/browse")
    page.click("#kb-q")
    assert page.locator("[data-section='recent'] .dd-option").all_inner_texts() == ["tone of voice"]
    page.click("#kb-clear-recent")
    _wait_for(lambda: not RecentSearch.objects.filter(user=user).exists())


def _browse_with_results_held(page: Any) -> list[Any]:
    """Open /browse with every later results request (the partial the page fetches) held by the network:
    the held routes, in order, to ``continue_()`` when the test lets the results arrive."""
    page.goto("/browse")
    held: list[Any] = []
    page.route("**/browse?*", lambda route: held.append(route) if route.request.headers.get("x-kb-partial")
               else route.continue_())
    return held


def _session_cookie(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def _wait_for(condition: Any, timeout_s: float = 5.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


# --- safety and no-JavaScript ---

def test_a_markup_title_renders_as_text_everywhere(session: Session) -> None:
    # given
    make_item(title=XSS_TITLE, body="img onerror alert body")
    build()
    page = session.page
    # browse card
    page.goto("/browse")
    assert session.card_titles() == [XSS_TITLE]
    # search results with highlights
    page.goto("/browse?q=onerror")
    page.wait_for_selector("#results .cards mark")
    assert session.card_titles() == [XSS_TITLE]
    # live preview
    page.goto("/browse")
    type_slowly(page, "#kb-q", "onerror")
    page.wait_for_selector("[data-section='preview'] .dd-option")
    assert session.preview_options() == [XSS_TITLE]
    # item page
    page.goto("/items/img-srcx-onerroralert1")
    assert page.inner_text("h1.item__title") == XSS_TITLE
    assert page.locator("img[src=x]").count() == 0


def test_search_works_with_javascript_disabled(browser: Any, live_server: Any, kb: None) -> None:
    # given
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    page = context.new_page()
    try:
        # when
        page.goto("/search")
        page.fill("#search-q", "pricing")
        page.click("button[type=submit]")
        # then
        assert "/search?q=pricing" in page.url
        assert "Pricing" in page.locator(".cards mark").all_inner_texts()
        # the browse page's filter form also works as a plain form
        page.goto("/browse")
        page.click("#filter-panel summary")
        page.check("#filter-domain input[value='legal']")
        page.click("#kb-filters button[type=submit]")
        assert "domain=legal" in page.url
        assert page.inner_text("#results-count").strip() == "1 item"
    finally:
        context.close()


# --- issue 21: typing fast, then Enter ---

def test_typing_fast_then_enter_lets_the_first_result_open(session: Session, kb: None) -> None:
    # given: enough matches for a full preview (it would reach down over the first cards), and a typist at
    # 40 ms a key who presses Enter before the 300 ms debounce fires
    for i in range(8):
        make_item(title=f"Pricing note {i}", body="Rates.", primary_domain="pricing", content_type="guide")
    build()
    page = session.page
    page.goto("/browse")
    # when
    page.type("#kb-q", "pricing", delay=40)
    page.press("#kb-q", "Enter")
    page.wait_for_timeout(1000)  # past the debounce: no preview may open over the results
    first = page.locator(".results__inner[data-mode=search] .cards .card .card__title a").first
    href = first.get_attribute("href")
    with page.expect_navigation():
        first.click()
    # then: the click reached the card, not a dropdown option ("popular topic") over it
    assert href and href.startswith("/items/")
    assert page.url.endswith(href)


def test_a_click_on_the_previous_results_while_a_search_loads_opens_nothing(session: Session, kb: None) -> None:
    # given: the browse listing, and the next results held back by the network
    page = session.page
    held = _browse_with_results_held(page)
    # when: a search is submitted and a person clicks the old first card, still shown while it loads
    page.fill("#kb-q", "social value")
    page.press("#kb-q", "Enter")
    page.wait_for_function("document.getElementById('results').getAttribute('aria-busy') === 'true'")
    stale = page.locator(".results__inner .cards .card .card__title a").first
    assert stale.get_attribute("href") != "/items/social-value-guide"
    box = stale.bounding_box()
    page.mouse.click(box["x"] + 5, box["y"] + box["height"] / 2)
    page.wait_for_timeout(300)
    # then: the click opened nothing from the listing being replaced, and the search's results arrive
    assert "/items/" not in page.url and "q=social+value" in page.url
    held[0].continue_()
    page.wait_for_function("document.getElementById('results').getAttribute('aria-busy') === 'false'")
    assert session.card_titles()[0] == "Social value guide"


def test_a_preview_answer_after_enter_is_ignored(session: Session, kb: None) -> None:
    # given: a preview request is in flight, held back by the network
    page = session.page
    held: list[Any] = []
    page.route("**/api/search/preview*", lambda route: held.append(route))
    page.goto("/browse")
    type_slowly(page, "#kb-q", "social")
    page.wait_for_function("document.getElementById('kb-listbox').getAttribute('aria-busy') === 'true'")
    _process_events_until(page, lambda: bool(held))
    assert held, "the preview request was not sent"
    # when: Enter, then the answer arrives
    with page.expect_response(lambda r: "/browse?q=social" in r.url):
        page.keyboard.press("Enter")
    late = {"results": [{"id": 999, "title": "LATE ANSWER", "content_type": "guide", "primary_domain": "x",
                         "url": "/items/late"}], "count": 1}
    try:
        held[0].fulfill(status=200, content_type="application/json", body=json.dumps(late))
    except Exception:  # noqa: BLE001 - the browser already aborted it, which is the point
        pass
    page.wait_for_timeout(500)
    # then: the request was cancelled, the dropdown stays closed and nothing late was rendered
    assert any("q=social&" in url for url in session.failed), "the in-flight preview was not aborted"
    assert page.is_hidden("#kb-dropdown")
    assert page.get_attribute("#kb-q", "aria-expanded") == "false"
    assert page.get_attribute("#kb-listbox", "aria-busy") == "false"
    assert "LATE ANSWER" not in page.inner_text("#kb-listbox")
    assert "Social value guide" in session.card_titles()
    # when: typing on reopens the dropdown as usual
    page.keyboard.type(" v")
    page.wait_for_selector("#kb-dropdown:not([hidden])")


# --- issue 21: the preview shows what matched ---

def _preview_label_nodes(page: Any) -> list[list[tuple[str, str]]]:
    """For each preview row: its label's child nodes as (node name, text)."""
    return page.evaluate(
        "() => Array.from(document.querySelectorAll(\"[data-section='preview'] .dd-option__label\"))"
        ".map(label => Array.from(label.childNodes).map(n => [n.nodeName, n.textContent]))"
    )


def test_the_preview_marks_the_typed_fragment_accents_and_case_folded(session: Session) -> None:
    # given
    make_item(title="Un ÉCRIT, deux écrits", body="Texte.")
    make_item(title="Guide", body="Un écrit dans le texte seulement.")
    build()
    page = session.page
    page.goto("/browse")
    # when
    type_slowly(page, "#kb-q", "ecrit")
    page.wait_for_selector("[data-section='preview'] .dd-option mark")
    # then: the title row marks both occurrences, as written; the content-only row has no mark
    assert session.preview_options() == ["Un ÉCRIT, deux écrits", "Guide"]
    assert _preview_label_nodes(page) == [
        [["#text", "Un "], ["MARK", "ÉCRIT"], ["#text", ", deux "], ["MARK", "écrit"], ["#text", "s"]],
        [["#text", "Guide"]],
    ]


def test_a_markup_title_in_the_preview_is_text_around_bare_marks(session: Session) -> None:
    # given
    title = XSS_TITLE + " onerror notes"
    make_item(title=title, body="img onerror alert body")
    build()
    page = session.page
    page.goto("/browse")
    # when
    type_slowly(page, "#kb-q", "onerror")
    page.wait_for_selector("[data-section='preview'] .dd-option mark")
    # then: text nodes and attribute-free <mark> elements only (no dialog either: the fixture checks)
    assert session.preview_options() == [title]
    assert _preview_label_nodes(page) == [[
        ["#text", "<img src=x "], ["MARK", "onerror"], ["#text", "=alert(1)> "], ["MARK", "onerror"],
        ["#text", " notes"],
    ]]
    assert page.locator("#kb-dropdown img").count() == 0
    assert page.evaluate("() => Array.from(document.querySelectorAll('#kb-dropdown mark'))"
                         ".every(m => m.attributes.length === 0 && m.children.length === 0)")


# --- all knowledge bases ---

def test_all_knowledge_bases_toggle_badges_each_card_and_keeps_a_peers_markup_as_text(
    session: Session, kb: None
) -> None:
    # given a public peer whose answer is laden with markup (tests/support/fake_peer.py, "/ok")
    with fake_peer.serving() as server:
        peers.peer_add(name="emea", base_url=f"http://127.0.0.1:{server.server_address[1]}/ok",
                       api_key="kb_00000001_" + "k" * 43, public=True)
        page = session.page
        page.goto("/browse")
        type_slowly(page, "#kb-q", "pricing", delay_ms=90)
        with page.expect_response(lambda r: "/browse?q=pricing" in r.url):
            page.keyboard.press("Enter")
        page.wait_for_selector("#results .cards mark")
        # then: local only by default, the toggle offered
        assert not page.is_checked("#kb-all-kbs") and page.locator("#sources").count() == 0
        assert page.locator("#results .badge--source").count() == 0
        # when the visitor turns on "All knowledge bases"
        with page.expect_response(lambda r: "sources=all" in r.url):
            page.check("#kb-all-kbs")
        page.wait_for_selector("#sources")
        # then each card says where it comes from, the peer's markup shown as text
        assert "sources=all" in page.url
        assert page.locator("#sources [data-source='emea'][data-status='ok']").count() == 1
        assert page.locator("#results .card[data-sources='emea'] .badge--source").inner_text() == "emea"
        assert page.locator("#results .card[data-sources='local']").count() >= 1
        assert "<script>alert(1)</script> Pricing elsewhere" in session.card_titles()
        assert page.locator("#results .card script").count() == 0
        # and a filter keeps the choice; unticking goes back to this knowledge base only
        page.click("#filter-panel summary")
        with page.expect_response(lambda r: "domain=pricing" in r.url):
            page.check("#filter-domain input[value='pricing']")
        page.wait_for_function("location.search.includes('domain=pricing')")
        assert "sources=all" in page.url and page.is_checked("#kb-all-kbs")
        with page.expect_response(lambda r: "domain=pricing" in r.url and "sources" not in r.url):
            page.uncheck("#kb-all-kbs")
        page.wait_for_function("!document.getElementById('sources')")
        assert "sources" not in page.url and page.locator("#results .badge--source").count() == 0
