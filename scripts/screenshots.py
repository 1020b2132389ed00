"""Screenshots of the browse surface for the docs: browse, live preview, results, item page.

Start the product first (it loads the demo knowledge base on first start), then run this script:

    EMBEDDING_PROVIDER=hash PORT=8123 .venv/bin/python manage.py up --no-worker &
    .venv/bin/python scripts/screenshots.py --base-url http://127.0.0.1:8123

It drives Debian's Chromium (``apt-get install chromium``) through Playwright and writes PNG files
into ``docs/screenshots/``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
OUT = Path(__file__).resolve().parent.parent / "docs" / "screenshots"


def shoot(page: Page, name: str, *, full_page: bool = False) -> None:
    path = OUT / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    sys.stdout.write(f"wrote {path}\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", default="http://127.0.0.1:8123")
    parser.add_argument("--query", default="social value", help="the query shown in the results screenshot")
    parser.add_argument("--preview", default="pric", help="the text typed for the live-preview screenshot")
    args = parser.parse_args()
    base = args.base_url.rstrip("/")
    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900}, device_scale_factor=1)
        page = context.new_page()

        page.goto(f"{base}/browse")
        page.wait_for_selector(".cards .card")
        shoot(page, "browse")

        page.fill("#kb-q", "")
        page.click("#kb-q")
        page.keyboard.type(args.preview, delay=60)
        page.wait_for_selector("[data-section='preview']:not([hidden]) .dd-option")
        page.keyboard.press("ArrowDown")
        shoot(page, "preview")

        page.goto(f"{base}/browse?q={args.query.replace(' ', '+')}")
        page.wait_for_selector(".cards .card mark")
        shoot(page, "results")

        first = page.locator(".cards .card__title a").first.get_attribute("href")
        page.goto(f"{base}{first}")
        page.wait_for_selector(".item__title")
        shoot(page, "item")

        context.close()

        # /search as a browser without JavaScript sees it.
        context = browser.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=False)
        page = context.new_page()
        page.goto(f"{base}/search?q={args.query.replace(' ', '+')}")
        shoot(page, "search-no-js")
        context.close()

        # A phone-sized viewport.
        context = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=1)
        page = context.new_page()
        page.goto(f"{base}/browse?q={args.query.replace(' ', '+')}")
        page.wait_for_selector(".cards .card")
        shoot(page, "results-mobile")
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
