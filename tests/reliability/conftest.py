"""Fixtures shared by the reliability suite (fuzzing, permission matrix, XSS, rate limits, faults)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accounts import limits

WORDS_TABLE = Path(__file__).resolve().parent.parent / "fixtures" / "confidence_words.json"


@pytest.fixture(autouse=True)
def _words_decide(settings: Any) -> None:
    """The oracles here say which items hold a word; so does this confidence table (a hit is kept exactly when
    it holds every query word), so the permission checks compare access, not the toy calibration's judgement
    of an artificial corpus in which every title holds the same word."""
    settings.SEARCH = {**settings.SEARCH, "CONFIDENCE_TABLE": str(WORDS_TABLE)}


@pytest.fixture
def unlimited(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Rate limits out of the way (fuzzing and the matrix send thousands of requests from one address)."""
    for group in list(limits.RATES):
        monkeypatch.setitem(limits.RATES, group, "100000000/m")
    yield
