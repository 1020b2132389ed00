"""Options several management commands share."""

from __future__ import annotations

from typing import Any


def item_ids_option(parser: Any, *, help: str) -> None:  # noqa: A002 - argparse's own word
    """``--item ID`` (repeatable), read back as ``opts["item_ids"]`` (None when not given)."""
    parser.add_argument("--item", type=int, action="append", dest="item_ids", metavar="ID", help=help)
