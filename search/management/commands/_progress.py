"""A progress bar for long commands, written to the command's stderr so --json stdout stays clean."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tqdm import tqdm


@contextmanager
def progress_bar(command: Any, *, total: int | None, desc: str) -> Iterator[Any]:
    bar = tqdm(total=total, desc=desc, file=command.stderr._out, unit="it", dynamic_ncols=True, leave=True,
               disable=getattr(command, "quiet_progress", False))
    try:
        yield bar.update
    finally:
        bar.close()
