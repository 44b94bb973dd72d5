"""How many threads the engine's parallel work uses by default; decided here once for the package."""

from __future__ import annotations

import os


def default_workers() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def check_workers(workers: object) -> None:
    """TypeError unless ``workers`` is None (the default) or an int (a bool is not); ValueError
    below 1. Checked before any work: 0 used to mean the default without a word."""
    if workers is None:
        return
    if isinstance(workers, bool) or not isinstance(workers, int):
        raise TypeError(f"workers must be an int (or None for one per CPU), not {type(workers).__name__} ({workers!r})")
    if workers < 1:
        raise ValueError(f"workers must be at least 1 (or None for one per CPU), got {workers}")
