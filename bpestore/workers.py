"""Worker processes: how many by default, and how they start; decided here once for the package."""

from __future__ import annotations

import multiprocessing
import os
from multiprocessing.context import BaseContext


def default_workers() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def process_context() -> BaseContext:
    """fork where it exists: workers start at once and need no importable ``__main__`` (scripts
    without a main guard work); elsewhere spawn, the only choice."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")
