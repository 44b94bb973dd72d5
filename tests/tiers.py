"""The suite's two tiers.

- Everything: README's test command (``python3 -m pytest``), which CI runs.
- The fast tier, for a developer between edits: ``python3 -m pytest -m "not slow"``. It leaves
  out the tests marked ``slow`` (subprocesses, signals, Dask, the browser, the wheel, memory,
  PostgreSQL, timing-bound patterns, the big tiktoken files, and any single test that takes
  more than about 2 s on the project's 2-core machine) and runs each property test on a tenth of
  its examples (at least 5): the same properties, checked less widely. CI never runs it.

``conftest.py`` says which tier runs (before any test module is imported, so that the
``@settings(max_examples=examples(N))`` of each property test reads it).
"""

from __future__ import annotations

FAST_SHARE = 10  # the fast tier runs 1/FAST_SHARE of each property test's examples
fast = False


def examples(count: int) -> int:
    """A property test's number of examples in the tier that runs: ``count``, or a tenth of it
    (at least 5) in the fast tier."""
    return max(5, count // FAST_SHARE) if fast else count
