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


def count_text(n: int | float) -> str:
    """A count with thousands separators: ``139,744``; a fraction keeps one decimal (``2.5``)."""
    return f"{int(n):,}" if float(n).is_integer() else f"{n:,.1f}"


def rate_text(rate: float | None, unit: str, unit_scale: bool = False, unit_divisor: int = 1000) -> str:
    """A bar's rate in words: ``139,744 merges/s`` (whole numbers, thousands separated; one or two
    decimals below 100), ``12.3 MB/s`` or ``1.35M rows/s`` for a scaled unit, ``? merges/s`` before
    there is one.

    >>> rate_text(139743.96, "merges")
    '139,744 merges/s'
    >>> rate_text(12_345_678, "B", unit_scale=True)
    '12.3 MB/s'
    >>> rate_text(1_350_000, "rows", unit_scale=True)
    '1.35M rows/s'
    >>> rate_text(2.5, "tokenizers")
    '2.50 tokenizers/s'
    """
    if not rate:
        return f"? {unit}/s"
    if unit_scale:
        from tqdm import tqdm

        scaled: str = tqdm.format_sizeof(rate, divisor=unit_divisor)  # "512", "12.3M"
        number, prefix = (scaled, "") if scaled[-1].isdigit() else (scaled[:-1], scaled[-1])
        # Bytes read as a size (12.3 MB/s), anything else as a number of them (1.35M rows/s).
        return f"{number} {prefix}B/s" if unit == "B" else f"{number}{prefix} {unit}/s"
    return f"{rate:,.0f} {unit}/s" if rate >= 100 else f"{rate:.2f} {unit}/s"


@contextmanager
def progress_bar(enabled: bool, total: int | None, description: str, unit: str = "it", **options: Any) -> Iterator[ProgressBar]:
    """A tqdm bar on stderr, or a silent stand-in with the same interface when ``enabled`` is false.

    ``unit`` is plural (``"merges"``, ``"rows"``; ``"B"`` for bytes, with ``unit_scale=True``): the
    bar reads ``merges:  45%|████      | 4,500/10,000 [00:01<00:01, 4,497 merges/s]``, counts with
    thousands separators and rates in whole units (see :func:`rate_text`), not tqdm's
    ``4497.21merge/s``."""
    if not enabled:
        yield _SilentBar(total)
        return
    from tqdm import tqdm

    class _Bar(tqdm):  # type: ignore[misc]  # tqdm ships no types: mypy reads it as Any
        # No monitor thread: a thread that wakes up on its own has no business in a library call.
        monitor_interval = 0

        @property
        def format_dict(self) -> dict[str, Any]:
            values: dict[str, Any] = super().format_dict
            if values.get("bar_format") is not None:  # a caller's own format (progress_step's)
                return values
            n, total, elapsed = values["n"], values["total"], values["elapsed"]
            rate = values["rate"] if values["rate"] is not None else (n / elapsed if elapsed else None)
            scale, divisor = values["unit_scale"], values["unit_divisor"]
            if scale:
                n_text = tqdm.format_sizeof(n, divisor=divisor)
                total_text = "?" if total is None else tqdm.format_sizeof(total, divisor=divisor)
                if values["unit"] == "B":  # 12.3MB/50.0MB
                    n_text, total_text = n_text + "B", total_text + ("B" if total is not None else "")
            else:
                n_text, total_text = count_text(n), ("?" if total is None else count_text(total))
            values["rate_text"] = rate_text(rate, values["unit"], scale, divisor)
            values["n_text"], values["total_text"] = n_text, total_text
            if total:
                values["bar_format"] = "{l_bar}{bar}| {n_text}/{total_text} [{elapsed}<{remaining}, {rate_text}{postfix}]"
            else:
                desc = "{desc}: " if values["prefix"] else ""
                values["bar_format"] = desc + "{n_text} {unit} [{elapsed}, {rate_text}{postfix}]"
            return values

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


@contextmanager
def progress_step(enabled: bool, description: str) -> Iterator[ProgressBar]:
    """One line on stderr for a step that has no measure of its own (reading and checking a
    model, writing several tokenizers): shown as the step starts, so that a few silent seconds
    say what they are, and ended with the time it took (``reading gpt2 files [00:02] done``).
    The bar yielded takes :meth:`~ProgressBar.set_postfix_str` to say which part is under way.
    Nothing when ``enabled`` is false."""
    with progress_bar(enabled, 1, description, unit="steps", bar_format="{desc} [{elapsed}]{postfix}") as bar:
        yield bar
        bar.set_postfix_str("done", refresh=False)
        bar.update(1)
