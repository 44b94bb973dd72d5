"""The merge loop's expected peak memory, known before it starts.

After counting, training knows the number of distinct pre-tokens and their total length in bytes
``L`` (each distinct pre-token once, however often it occurs), and how many merges ``M`` it is
asked for. The merge loop's memory (crates/train/src/merge.rs: each word's symbols, the pair table
with the words each pair occurs in, the heap of pairs, the new tokens) grows with both: the first
count of pairs is the peak for few merges, the pairs and tokens that new merges create add to it.
The formula below was fitted to the peak resident memory that the merge loop adds over what the
process held before it (``VmHWM`` after resetting it, Linux), measured on the four corpora of
/work/shared/corpora at 2,000 to 50,000 merges (benchmarks/memory_estimate.py prints the table):

    estimate = BYTES_PER_PRETOKEN_BYTE * L + BYTES_PER_MERGE * M + FIXED_BYTES

Measured, it is within :data:`MARGIN` of the peak, give or take :data:`SLACK_BYTES` (the
allocator's noise, which dominates small corpora): from -19% (wiki_en_57M, 20,000 merges: 62.9 MiB
estimated, 78.0 MiB measured) to +23% (reuters_17M, 8,000 merges: 18.5 MiB estimated, 15.0 MiB
measured) on those corpora, +57% only on reuters_17M at 2,000 merges, where the slack dominates
(15.9 MiB estimated, 10.1 MiB measured); and within the margin on generated text shaped like a
natural language's (tests/test_training_inputs.py's). The peak depends on the allocator's state
as well: glibc raises its threshold for serving a request from mmap to the size of the largest
such block freed, and above it the merge loop's growing vectors are copied within the heap
instead of remapped. Counting once compiled the pattern's regex even for a known pattern, whose
freed caches raised that threshold: sotu_11M at 50,000 merges then peaked at 33.8 MiB, against
22.3 with the threshold fixed (``MALLOC_MMAP_THRESHOLD_=131072``) and 23.7-26.3 since counting no
longer compiles it. (Refitted then: it had been 600 bytes a merge; and 26 bytes a pre-token byte
and 660 a merge before the pair table shrank to 16-byte buckets with the word lists in a slab,
crates/train/src/pairs.rs.) tests/test_training_inputs.py checks the margin on generated text and
on sotu_11M, reuters_17M and wiki_en_57M (when ../shared/corpora is there). A corpus that runs out of pairs
before ``M`` merges is overestimated (tinystories_800K: 11.3 MiB estimated for 20,000 merges, 5.2
MiB measured). The number of distinct pre-tokens adds nothing measurable beyond their length on
such text, but is reported. Text unlike any language (random letters, whose pairs are far more
varied) can need up to twice the estimate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..engine import PretokenCounts

__all__ = ["MemoryEstimate", "MemoryLimitError", "estimate_merge_memory", "format_bytes", "parse_bytes"]

BYTES_PER_PRETOKEN_BYTE = 22
BYTES_PER_MERGE = 450
FIXED_BYTES = 2 << 20
MARGIN = 0.3
"""The estimate is within this fraction of the measured peak (above or below)..."""
SLACK_BYTES = 4 << 20
"""...give or take this many bytes (the allocator's noise, which dominates small corpora)."""


class MemoryLimitError(ValueError):
    """The merge loop's estimated memory is above the limit asked for (``--max-memory``)."""


@dataclass(frozen=True)
class MemoryEstimate:
    """What the merge loop is expected to need, from the counts of a corpus."""

    distinct_pretokens: int
    pretoken_bytes: int
    """The total length of the distinct pre-tokens, in bytes."""
    merges: int
    """The merges asked for, or the most there can be (see :func:`estimate_merge_memory`)."""

    @property
    def peak_bytes(self) -> int:
        """The expected peak memory the merge loop adds, in bytes."""
        return BYTES_PER_PRETOKEN_BYTE * self.pretoken_bytes + BYTES_PER_MERGE * self.merges + FIXED_BYTES

    def describe(self) -> str:
        """One line for people."""
        return (
            f"{self.distinct_pretokens:,} distinct pre-tokens, {format_bytes(self.pretoken_bytes)} of them: "
            f"{self.merges:,} merges need about {format_bytes(self.peak_bytes)} (±{MARGIN:.0%})"
        )

    def check(self, max_memory: int | None) -> None:
        """MemoryLimitError when the estimate is above ``max_memory`` bytes (None: no limit)."""
        if max_memory is not None and self.peak_bytes > max_memory:
            raise MemoryLimitError(
                f"the merge loop would need about {format_bytes(self.peak_bytes)} (±{MARGIN:.0%}) for "
                f"{self.distinct_pretokens:,} distinct pre-tokens, more than --max-memory {format_bytes(max_memory)}; "
                "nothing was merged (the pre-token counts are kept in the store)"
            )


def estimate_merge_memory(counts: Mapping[bytes, int], merges: int) -> MemoryEstimate:
    """The :class:`MemoryEstimate` of a merge loop of up to ``merges`` merges over ``counts``.
    A merge shortens at least one distinct pre-token by a symbol, so there are at most
    ``L - D`` of them; a corpus that runs out of pairs sooner is overestimated."""
    # The engine's counts know their length; a mapping's keys are walked.
    length = counts.pretoken_bytes if isinstance(counts, PretokenCounts) else sum(map(len, counts.keys()))
    distinct = len(counts)
    return MemoryEstimate(distinct, length, min(merges, length - distinct))


_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20, "MIB": 1 << 20,
          "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30, "T": 1 << 40, "TB": 1 << 40, "TIB": 1 << 40}


def parse_bytes(text: str) -> int:
    """A size such as ``800M``, ``2G``, ``1.5GiB`` or ``123456`` (bytes) as bytes; units are
    powers of 1024. ValueError otherwise."""
    stripped = text.strip().upper().replace(" ", "")
    number = stripped.rstrip("KMGTIB")
    unit = stripped[len(number):]
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _UNITS or not value >= 0:
        raise ValueError(f"not a memory size: {text!r} (try 800M, 2G or 1.5GiB)")
    return int(value * _UNITS[unit])


def format_bytes(size: int) -> str:
    """``size`` bytes for people, in powers of 1024."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024  # type: ignore[assignment]
    raise AssertionError("unreachable")
