"""Search-as-you-type in Chromium at real typing speed (90 ms a key): words in any order, the last a prefix,
typos, French without accents, Arabic with a clitic, typing on and backspacing (Step 17)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.browse import test_browser
from tests.browse.test_browser import Session
from tests.chromium import needs_chromium
from tests.factories import build, make_item

browser = test_browser.browser  # the fixtures of the browse tests: one Chromium, one tab per test
session = test_browser.session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_chromium]

KEY_MS = 90


@pytest.fixture
def kb() -> None:
    make_item(title="Abnormally low tenders", body="How to judge a tender submission that is priced too low.",
              primary_domain="procurement", content_type="guide")
    make_item(title="Bid pricing guide", body="Pricing a bid: unit rates, contingency and margins.",
              primary_domain="pricing", content_type="guide")
    make_item(title="Rédiger une réponse à un appel d'offres", body="Structure de l'offre.", language="fr",
              content_type="guide")
    make_item(title="Solar panel maintenance checklist", body="Clean the panels every quarter.",
              content_type="template")
    make_item(title="إدارة الغابات", body="حماية الأشجار والأنهار.", language="ar", content_type="guide")
    build()


def typed(session: Session, text: str) -> list[str]:
    """Type ``text`` into the empty search bar at ``KEY_MS`` a key; the preview rows once the answer to the
    whole text has rendered."""
    page = session.page
    page.goto("/browse")
    page.click("#kb-q")
    with page.expect_response(lambda r: "/api/search/preview" in r.url):
        page.keyboard.type(text, delay=KEY_MS)  # 90 ms apart: one request, 300 ms after the last key
    page.wait_for_timeout(150)
    assert len(session.previews) == 1, session.previews
    return session.preview_options()


def marked(session: Session, selector: str) -> list[str]:
    return session.page.locator(f"[data-section='preview'] .dd-option {selector} mark").all_inner_texts()


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        ("tender submiss", ["Abnormally low tenders"]),
        ("submission tend", ["Abnormally low tenders"]),
        ("pannel maint", ["Solar panel maintenance checklist"]),
        ("reponse appel", ["Rédiger une réponse à un appel d'offres"]),
        ("والغاب", ["إدارة الغابات"]),
    ],
)
def test_words_in_any_order_typos_accents_and_clitics(
    session: Session, kb: None, text: str, rows: list[str]
) -> None:
    assert typed(session, text) == rows


def test_a_body_match_shows_its_snippet_with_every_typed_word_marked(session: Session, kb: None) -> None:
    assert typed(session, "submission tend") == ["Abnormally low tenders"]
    assert marked(session, ".dd-option__label") == ["tend"]
    snippet = session.page.locator("[data-section='preview'] .dd-option .dd-option__snippet").inner_text()
    assert "tender submission" in snippet
    assert marked(session, ".dd-option__snippet") == ["tend", "submission"]


def test_typing_on_past_a_match_and_backspacing(session: Session, kb: None) -> None:
    page = session.page
    # given: one word shows its items
    assert typed(session, "tender") == ["Abnormally low tenders"]
    # when: typing on with a word no item holds
    with page.expect_response(lambda r: "quokk" in r.url):
        page.keyboard.type(" quokka", delay=KEY_MS)
    page.wait_for_selector("[data-section='preview'] .dd-note")
    # then: the preview says so instead of keeping the older rows
    assert session.preview_options() == []
    assert "No matching items" in page.locator("[data-section='preview'] .dd-note").inner_text()
    # when: backspacing to "tender q" (a one-letter last word only narrows once complete)
    with page.expect_response(lambda r: "q=tender+q&" in r.url or "q=tender%20q&" in r.url):
        for _ in range(5):
            page.keyboard.press("Backspace", delay=KEY_MS)
    page.wait_for_selector("[data-section='preview'] .dd-option")
    # then: the rows of "tender" are back, and no older answer was shown over the newer one
    assert session.preview_options() == ["Abnormally low tenders"]


def test_rows_are_never_those_of_an_older_fragment(session: Session, kb: None) -> None:
    page = session.page
    page.goto("/browse")
    held: list[Any] = []
    # the answer for "bid" is held back, and then arrives after the answer for "bid pric" has rendered
    page.route(lambda url: "/api/search/preview" in url and "q=bid&" in url, lambda route: held.append(route))
    page.click("#kb-q")
    page.keyboard.type("bid", delay=KEY_MS)
    page.wait_for_timeout(400)
    with page.expect_response(lambda r: "q=bid+pric" in r.url or "q=bid%20pric" in r.url):
        page.keyboard.type(" pric", delay=KEY_MS)
    page.wait_for_selector("[data-section='preview'] .dd-option")
    stale = {"results": [{"id": 999, "title": "STALE ANSWER", "title_spans": [], "match": "title", "typo": False,
                          "snippet": "", "snippet_spans": [], "content_type": "guide", "primary_domain": "x",
                          "url": "/x"}], "count": 1}
    for route in held:
        try:
            route.fulfill(status=200, content_type="application/json", body=json.dumps(stale))
        except Exception:  # noqa: BLE001 - the page aborted it already, which is the point
            pass
    page.wait_for_timeout(300)
    assert session.preview_options() == ["Bid pricing guide"]
