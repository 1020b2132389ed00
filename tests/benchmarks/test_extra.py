"""The benchmark tools say how to install their libraries when the [bench] extra is missing."""

import pytest

from benchmarks import require
from search.errors import SearchError


def test_a_missing_bench_library_is_one_line_that_says_what_to_install() -> None:
    with pytest.raises(SearchError) as caught:
        require("bm25s_not_installed_anywhere")
    assert "bm25s_not_installed_anywhere is part of the [bench] extra" in str(caught.value)
    assert "pip install -e '.[bench]'" in str(caught.value)


def test_an_installed_library_is_returned() -> None:
    assert require("json").dumps([1]) == "[1]"  # type: ignore[attr-defined]
