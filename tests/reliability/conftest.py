"""Fixtures shared by the reliability suite (fuzzing, permission matrix, XSS, rate limits, faults)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from accounts import limits


@pytest.fixture
def unlimited(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Rate limits out of the way (fuzzing and the matrix send thousands of requests from one address)."""
    for group in list(limits.RATES):
        monkeypatch.setitem(limits.RATES, group, "100000000/m")
    yield
