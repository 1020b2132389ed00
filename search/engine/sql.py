"""SQL pieces that carry their own parameters, so a statement built from parts keeps its placeholders and
their values in step without anyone counting them.

A ``Fragment`` is SQL text with ``%s`` placeholders and the values for them, in order. ``param`` makes one
value a fragment (``param(0.7, "float8")`` is ``%s::float8`` with 0.7), ``join`` strings fragments together
and ``compose`` fills a template's ``{name}`` slots with fragments: the parameters follow in the order the
slots occur, so no list of parameters is kept by hand beside the text.

Django's psycopg backend binds parameters client-side: the statement PostgreSQL receives has each value
written as a literal (a float as its ``repr``). A number that must stay a ``float8`` says so with a cast
(``param(x, "float8")``), exactly as a pasted ``{x!r}::float8`` did; a bare ``%s`` is written as a numeric
literal, and with server-side binding it would take whatever type PostgreSQL infers.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# A placeholder, or an escaped percent sign (``%%``, which holds none).
_PERCENT = re.compile(r"%%|%s")


def placeholder_count(sql: str) -> int:
    """How many ``%s`` placeholders ``sql`` holds (``%%`` is a literal percent sign, not one)."""
    return sum(1 for m in _PERCENT.findall(sql) if m == "%s")


@dataclass(frozen=True)
class Fragment:
    """SQL text and the values of its ``%s`` placeholders, in order. Checked when built: as many values as
    placeholders, or ``ValueError``."""

    sql: str
    params: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))
        found = placeholder_count(self.sql)
        if found != len(self.params):
            raise ValueError(
                f"SQL fragment has {found} placeholder(s) but {len(self.params)} parameter(s); give one value per "
                f"%s (write a literal percent sign as %%): {self.sql[:80]!r}"
            )

    def __add__(self, other: Fragment | str) -> Fragment:
        other = as_fragment(other)
        return Fragment(self.sql + other.sql, self.params + other.params)


def as_fragment(part: Fragment | str) -> Fragment:
    """``part`` as a fragment: a ``str`` is SQL text written by the code itself, without parameters."""
    return part if isinstance(part, Fragment) else Fragment(part)


def param(value: Any, cast: str = "") -> Fragment:
    """One value as a placeholder, cast to ``cast`` when given: ``param(x, "float8")`` is ``%s::float8``."""
    return Fragment(f"%s::{cast}" if cast else "%s", (value,))


def join(parts: Iterable[Fragment | str], separator: str = ", ") -> Fragment:
    """The parts one after another, ``separator`` between them; their parameters in the same order."""
    fragments = [as_fragment(p) for p in parts]
    return Fragment(separator.join(f.sql for f in fragments), tuple(v for f in fragments for v in f.params))


def compose(template: str, /, **parts: Fragment | str) -> Fragment:
    """``template`` with each ``{name}`` replaced by ``parts[name]`` (``{{`` and ``}}`` are literal braces).

    The parameters follow in the order the slots occur in the template; a slot used twice contributes its
    parameters twice. The template holds no placeholder of its own (a value goes in as a ``param`` part), and
    every part is used: either mistake raises ``ValueError``."""
    texts: list[str] = []
    params: list[Any] = []
    used: set[str] = set()
    for literal, name, spec, conversion in string.Formatter().parse(template):
        if placeholder_count(literal):
            raise ValueError(f"a template holds no %s of its own; pass the value as a param(...) part: {literal!r}")
        texts.append(literal)
        if name is None:
            continue
        if spec or conversion or name not in parts:
            raise ValueError(f"template slot {{{name}}} is not one of the parts given ({', '.join(parts)})")
        part = as_fragment(parts[name])
        texts.append(part.sql)
        params.extend(part.params)
        used.add(name)
    if unused := sorted(set(parts) - used):
        raise ValueError(f"parts given but not used in the template: {', '.join(unused)}")
    return Fragment("".join(texts), tuple(params))


def execute(cursor: Any, statement: Fragment | str) -> None:
    """Send ``statement`` on ``cursor`` with its own parameters: the one way the engine's SQL reaches the
    database (``make lint`` finds any other ``.execute(`` in ``search/engine``). The parameters are always
    passed, even none, so a ``%%`` in the text is a percent sign whichever way it was built."""
    statement = as_fragment(statement)
    cursor.execute(statement.sql, list(statement.params))
