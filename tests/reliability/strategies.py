"""Hypothesis strategies for hostile input: text, numbers, cursors, JSON bodies, filters.

Every surface's fuzz test draws from these, so "a lone surrogate in a filter value" or "a cursor whose
offset is Infinity" is tried against browse, GraphQL, MCP and the CLI alike.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st

# How many generated inputs each surface gets (the issue asks for at least 10,000 in CI).
FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "10000"))
# Inputs per Hypothesis example. Hypothesis spends a few milliseconds on each example whatever its size;
# ten inputs per example cut the generation cost per input about tenfold (measured: 8.7 ms -> 1.0 ms).
FUZZ_BATCH = int(os.environ.get("FUZZ_BATCH", "10"))


def batches(*strategies: st.SearchStrategy[Any]) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """``FUZZ_BATCH`` input tuples per example (a failing batch still shrinks to minimal values)."""
    return st.lists(st.tuples(*strategies), min_size=FUZZ_BATCH, max_size=FUZZ_BATCH)


def fuzz_settings(inputs: int = FUZZ_EXAMPLES) -> Any:
    """Enough batches for ``inputs`` inputs; no deadline (a search may take tens of ms under load), no
    example database, reproducible by default.

    ``FUZZ_SEED=<n>`` explores another part of the input space; without it the run is derandomized so
    that CI is stable (a failure prints the exact input).
    """
    fuzz_seed = os.environ.get("FUZZ_SEED")
    config = settings(
        max_examples=max(1, -(-inputs // FUZZ_BATCH)),
        deadline=None,
        database=None,
        derandomize=fuzz_seed is None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
        print_blob=True,
    )

    def apply(fn: Any) -> Any:
        fn = config(fn)
        return seed(int(fuzz_seed))(fn) if fuzz_seed is not None else fn

    return apply


# Words the fuzz corpora contain, so that generated queries also reach the ranking code, not only validation.
VOCABULARY = (
    "pricing",
    "tender",
    "invoice",
    "harbour",
    "safety",
    "checklist",
    "approval",
    "margin",
    "données",
    "protection",
    "تسعير",
    "العطاء",
    "zebra",
    "script",
    "alert",
    "mark",
    "onerror",
    "guide",
    "policy",
)

# Characters and fragments known to break parsers, SQL, tsquery syntax, JSON, HTML or terminals.
NASTY_FRAGMENTS = (
    "\x00",
    "\ud800",
    "\udfff",
    "\udc80x",
    "\u202e",
    "\u202d",
    "\u2066",
    "\u2069",
    "\u200b",
    "\u200f",
    "\ufeff",
    "\U000e0041",
    "\u0301" * 40,
    "\u0670" * 30,
    "\r\n",
    "\t",
    "\x1b[31m",
    "\x7f",
    "\x85",
    "\u2028",
    "'",
    '"',
    "\\",
    "%",
    "_",
    "&",
    "|",
    "!",
    ":*",
    "<->",
    "(",
    ")",
    "*",
    "--",
    ";",
    "/*",
    "*/",
    "$$",
    "' OR 1=1 --",
    "'); DROP TABLE search_chunk; --",
    "a:*",
    "!!",
    "&&",
    "||",
    "<2>",
    "\\x00",
    "<script>alert(1)</script>",
    "</mark><script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "&lt;script&gt;",
    "&#60;script&#62;",
    "{{7*7}}",
    "${7*7}",
    "%s%s%n",
    "%(x)s",
    "{0}",
    "ﷺ",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "İstanbul",
    "straße",
    "ﬁ",
    "Ǆ",
    "ǅ",
    "\U0001f600",
    "\U0001f469\u200d\U0001f4bb",
    "ا" * 3,
    "𒀱",
    "null",
    "None",
    "NaN",
    "-1",
    "1e309",
    "[]",
    "{}",
    "true",
)

# Unicode text including lone surrogates (st.characters() leaves them out by default).
any_characters = st.one_of(
    st.characters(), st.characters(categories=["Cs"]), st.sampled_from("\x00\u202e\u0301")
)


def _flood(base: str, char: str, count: int) -> str:
    return base + char * count


floods = st.builds(
    _flood,
    st.sampled_from(VOCABULARY + ("",)),
    st.sampled_from(
        ["\u0301", "\u202e", "\u200b", "\x00", " ", "ا", "\U000e0020", "%", "a", "\ud800", "\u0670"]
    ),
    st.integers(min_value=50, max_value=10_500),
)
long_queries = st.builds(
    lambda word, count: (word + " ") * count,
    st.sampled_from(VOCABULARY),
    st.integers(min_value=100, max_value=1500),
)
word_salads = st.lists(
    st.one_of(
        st.sampled_from(VOCABULARY), st.sampled_from(NASTY_FRAGMENTS), st.text(any_characters, max_size=8)
    ),
    min_size=1,
    max_size=12,
).flatmap(lambda parts: st.sampled_from([" ".join(parts), "".join(parts)]))

# Query text: plain words, salads of words and nasty fragments, arbitrary Unicode, floods, 10,000 characters.
query_text = st.one_of(
    st.sampled_from(VOCABULARY),
    word_salads,
    word_salads,
    st.text(any_characters, max_size=40),
    floods,
    long_queries,
    st.just("x" * 10_000),
    st.just(""),
)

# Short hostile strings for names, filter values, slugs, ids.
short_text = st.one_of(
    st.sampled_from(NASTY_FRAGMENTS),
    st.sampled_from(VOCABULARY),
    st.text(any_characters, max_size=20),
    st.builds(lambda n: "x" * n, st.integers(min_value=100, max_value=3000)),
)

huge_ints = st.one_of(
    st.sampled_from(
        [0, -1, 1, 2, 20, 30, 31, 100, 101, 365, 366, 3651, 2**31, 2**31 - 1, 2**63, -(2**63), 10**30]
    ),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.integers(min_value=-5, max_value=120),
)
odd_floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 0.35, 1.0000001, -1e-300, 1e308]),
)
# Leaves for JSON documents of the wrong shape.
json_leaves = st.one_of(st.none(), st.booleans(), huge_ints, odd_floats, short_text)
json_values = st.recursive(
    json_leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(any_characters, max_size=8), children, max_size=4),
    ),
    max_leaves=12,
)


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _cursor_json(data: Any) -> str:
    return b64(json.dumps(data, allow_nan=True).encode())


# Cursors: junk, base64 of junk, and well-formed cursors with bad offsets (negative, huge, Infinity, NaN).
cursors = st.one_of(
    st.none(),
    short_text,
    st.binary(max_size=60).map(b64),
    st.builds(
        _cursor_json,
        st.fixed_dictionaries(
            {"o": st.one_of(huge_ints, odd_floats, short_text, st.none()), "f": short_text, "s": short_text},
        ),
    ),
    json_values.map(_cursor_json),
    st.builds(lambda n: "A" * n, st.integers(min_value=400, max_value=5000)),
)

FILTER_KEYS = (
    "domain",
    "subtopic",
    "content_type",
    "platform",
    "author",
    "layer",
    "source",
    "language",
    "include_qa",
    "date_from",
    "date_to",
    "freshness",
    "overdue_review",
    "review_due_within_days",
    "unread_only",
    "include_superseded",
)
date_like = st.one_of(
    st.dates().map(str),
    st.sampled_from(
        ["0001-01-01", "9999-12-31", "2024-02-30", "2024-13-01", "-2024-01-01", "2024-1-1", "today"]
    ),
    short_text,
)
filter_values = st.one_of(
    short_text,
    st.lists(short_text, max_size=25),
    huge_ints,
    st.booleans(),
    date_like,
    json_values,
    st.builds(lambda n: ",".join(["pricing"] * n), st.integers(min_value=1, max_value=40)),
)
filter_objects = st.dictionaries(
    st.one_of(st.sampled_from(FILTER_KEYS), short_text), filter_values, max_size=5
)


def deep_json(depth: int, kind: str) -> str:
    """``[[[…]]]`` or ``{"a":{"a":…}}`` nested ``depth`` times (past Python's recursion limit when large)."""
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


deep_bodies = st.builds(
    deep_json, st.integers(min_value=50, max_value=60_000), st.sampled_from(["list", "dict"])
)


def dumps(value: Any) -> str:
    """JSON text for any generated value (lone surrogates escaped, NaN/Infinity written as Python does)."""
    return json.dumps(value, ensure_ascii=True, allow_nan=True)
