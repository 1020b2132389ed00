"""Debian's headless Chromium under Playwright, shared by the browser tests of every surface.

``playwright install`` cannot download here, so the system browser is launched with the flags these
machines need. Playwright's sync API runs an event loop in the test thread, so Django's async-safety
guard is relaxed while the browser is open (the tests' own ORM calls are still plain synchronous code)
and restored afterwards: a later test (``check --deploy`` in a subprocess) must not inherit it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ASYNC_UNSAFE = "DJANGO_ALLOW_ASYNC_UNSAFE"

needs_chromium = pytest.mark.skipif(
    not shutil.which(CHROMIUM), reason=f"{CHROMIUM} is missing: apt-get install -y chromium"
)


@contextmanager
def launched_chromium() -> Iterator[Any]:
    """A Playwright ``Browser`` on the system Chromium; the environment is as before on exit."""
    from playwright.sync_api import sync_playwright

    previous = os.environ.get(ASYNC_UNSAFE)
    os.environ[ASYNC_UNSAFE] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            try:
                yield browser
            finally:
                browser.close()
    finally:
        if previous is None:
            os.environ.pop(ASYNC_UNSAFE, None)
        else:
            os.environ[ASYNC_UNSAFE] = previous
