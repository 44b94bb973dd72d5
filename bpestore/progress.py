"""Progress bars: tqdm on stderr, only when asked for."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from collections.abc import Iterator

from tqdm import tqdm


class _Bar(tqdm):
    # No monitor thread: the trainer forks worker processes, and forking beside threads is unsafe.
    monitor_interval = 0


@contextmanager
def progress_bar(enabled: bool, total: int | None, description: str, unit: str = "it", **options) -> Iterator[tqdm]:
    """A tqdm bar on stderr, or a silent stand-in with the same interface when ``enabled`` is false."""
    bar = _Bar(
        total=total,
        desc=description,
        unit=unit,
        file=sys.stderr,
        disable=not enabled,
        dynamic_ncols=True,
        leave=True,
        **options,
    )
    try:
        yield bar
    finally:
        bar.close()
