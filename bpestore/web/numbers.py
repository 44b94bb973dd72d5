"""The explorer's one way of writing a number (the ``number`` template filter, and the charts'
labels): thousands separated by commas, a fixed number of decimals for fractions, ``–`` for none."""

from __future__ import annotations

__all__ = ["number"]


def number(value: float | None, digits: int | None = None) -> str:
    """``12,345``; ``4.385`` (``digits`` decimals: by default none for whole numbers, 3 for
    others); ``–`` for None."""
    if value is None:
        return "–"
    if digits is None:
        if isinstance(value, int) or float(value).is_integer():
            return f"{int(value):,}"
        digits = 3
    return f"{value:,.{digits}f}"
