"""Progress bars: tqdm on stderr, only when asked for.

tqdm is imported only when a bar is shown: importing it costs about 80 ms (its version lookup
reads package metadata), which every library call and CLI command with progress off would pay.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol


class ProgressBar(Protocol):
    """What bpestore's code uses of a tqdm bar."""

    n: int | float
    total: int | float | None

    def update(self, n: int | float = 1) -> Any: ...

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None: ...


class _SilentBar:
    """A bar that shows nothing, with the part of tqdm's interface bpestore uses (counting still
    happens, so code that reads ``n`` behaves as with a real bar)."""

    def __init__(self, total: int | float | None) -> None:
        self.n: int | float = 0
        self.total = total

    def update(self, n: int | float = 1) -> None:
        self.n += n

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        pass


@contextmanager
def progress_bar(enabled: bool, total: int | None, description: str, unit: str = "it", **options: Any) -> Iterator[ProgressBar]:
    """A tqdm bar on stderr, or a silent stand-in with the same interface when ``enabled`` is false."""
    if not enabled:
        yield _SilentBar(total)
        return
    from tqdm import tqdm

    class _Bar(tqdm):  # type: ignore[misc]  # tqdm ships no types: mypy reads it as Any
        # No monitor thread: a thread that wakes up on its own has no business in a library call.
        monitor_interval = 0

    bar = _Bar(
        total=total,
        desc=description,
        unit=unit,
        file=sys.stderr,
        dynamic_ncols=True,
        leave=True,
        **options,
    )
    try:
        yield bar
    finally:
        bar.close()
