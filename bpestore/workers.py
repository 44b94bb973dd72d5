"""How many threads the engine's parallel work uses by default; decided here once for the package."""

from __future__ import annotations

import os


def default_workers() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
