"""Memory of the measuring process: ``ru_maxrss`` and a sampled peak PSS of its process tree.

``ru_maxrss`` of RUSAGE_CHILDREN is the peak of the *largest* waited-for child, not of the children
together; when a tool runs several workers at once, the sampled tree PSS (proportional set size,
so pages shared after fork are not counted twice) is the better measure of what it needed.
"""

from __future__ import annotations

import os
import resource
import threading
from pathlib import Path

MB = 1 << 20


def maxrss_mb() -> dict[str, float]:
    """Peak RSS (MiB) of this process, of its largest child, and the two added (Linux: KiB units)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"rss_self_mb": round(own, 1), "rss_children_mb": round(children, 1), "peak_rss_mb": round(own + children, 1)}


def cpu_seconds() -> float:
    """User + system CPU time of this process and its waited-for children."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def _children(pid: int) -> list[int]:
    found = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(child) for child in (task / "children").read_text().split()]
    except OSError:  # gone, or no such file on this kernel
        pass
    return found


def process_tree(pid: int) -> list[int]:
    tree, pending = [], [pid]
    while pending:
        current = pending.pop()
        tree.append(current)
        pending += _children(current)
    return tree


def pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as file:
            for line in file:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class TreePssSampler:
    """Samples the PSS of this process and all its descendants every ``interval`` seconds in a
    background thread, between ``start()`` and ``stop()``; ``peak_mb`` is the largest sum seen."""

    def __init__(self, interval: float = 0.1):
        self.interval = interval
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        self.peak_kb = max(self.peak_kb, sum(pss_kb(pid) for pid in process_tree(os.getpid())))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def start(self) -> TreePssSampler:
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> float | None:
        """Stop sampling; the peak in MiB, or None when /proc gave nothing."""
        self._stop.set()
        self._thread.join()
        self._sample()
        return round(self.peak_kb / 1024, 1) if self.peak_kb else None
