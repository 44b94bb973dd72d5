"""The cut rule in plain Python: the reference that the engine's rule is tested against.

The package cuts text in one place, the engine (``crates/pretokenize/src/cut.rs``: ``last_safe_cut``
for streams, ``next_safe_cut`` for chunks of a file). This module keeps the rule as the Python code
had it, so that ``tests/test_cuts.py`` can run one property over every representation: cutting
where a representation says changes no pre-token.

For a split-safe pattern (:data:`~bpestore.pretokenize.patterns.SPLIT_SAFE_PATTERNS`) a space
between two characters that are not whitespace (``regex``'s ``\\s``) is a pre-token boundary (see
:mod:`bpestore.pretokenize.patterns` for why). Special tokens add two conditions: the space must not
be followed by a special token (the token is cut out before pre-tokenization, so the space would
end its piece of text and join the whitespace run before it), and must not lie inside one. The
start of a special token is a safe cut for any pattern. (The engine's rule also cuts after a
newline between non-whitespace, and beside non-ASCII neighbours in a file window: a superset, held
to the same property.)

The representations here: text (``str``): :func:`is_safe_space`, :func:`next_safe_space` and
:func:`last_safe_cut`; bytes of a file window: :func:`find_safe_space` and
:func:`covered_by_other_special` (only a space between two *printable ASCII* bytes, a subset of the
rule that needs no decoding of a window that may start or end inside a character).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence

from bpestore.pretokenize.patterns import REGEX_WHITESPACE


# A space that does not start a regular segment: preceded or followed by whitespace, or ending the text.
_IRREGULAR_SPACE = re.compile(
    "(?<=[" + re.escape(REGEX_WHITESPACE) + "]) | (?=[" + re.escape(REGEX_WHITESPACE) + r"]|\Z)"
)



class SpecialSplitter:
    """Cuts text at special tokens, longest first (so a special token that contains another wins)."""

    def __init__(self, special_tokens: Sequence[str]):
        self.special_tokens = tuple(special_tokens)
        ordered = sorted(set(self.special_tokens), key=len, reverse=True)
        self._single = ordered[0] if len(ordered) == 1 else None
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        self._byte_pattern = re.compile(b"|".join(re.escape(token.encode("utf-8")) for token in ordered)) if ordered else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def split(self, text: str) -> list[str]:
        """The pieces of text between special tokens (the tokens themselves dropped)."""
        if self._single is not None:
            return text.split(self._single)
        if self._pattern is None:
            return [text]
        return self._pattern.split(text)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        """The special tokens in ``text``, left to right."""
        return self._pattern.finditer(text) if self._pattern is not None else iter(())

    def byte_spans(self, data: bytes) -> list[tuple[int, int]]:
        """The byte spans of the special tokens in UTF-8 encoded text, left to right."""
        if self._byte_pattern is None:
            return []
        return [match.span() for match in self._byte_pattern.finditer(data)]


def irregular_spans(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` that ``text.split(" ")`` would cut where the regex does not.

    Each span runs from a safe cut (the start of the text, or a space between non-whitespace) to
    the next safe cut and contains at least one space that is preceded or followed by whitespace or
    ends the text. Outside these spans every part of ``text.split(" ")`` is one self-contained
    segment.
    """
    spans: list[tuple[int, int]] = []
    end = -1
    for match in _IRREGULAR_SPACE.finditer(text):
        position = match.start()
        if position < end:
            continue  # inside the span already found
        # The space before it is safe (an irregular one would have put us inside its span).
        start = max(text.rfind(" ", 0, position), 0)
        end = next_safe_space(text, position + 1)
        spans.append((start, end))
    return spans


def is_safe_space(text: str, position: int) -> bool:
    """Whether ``text[position]`` is a space between two characters that are not whitespace."""
    return (
        0 < position < len(text) - 1
        and text[position] == " "
        and text[position + 1] not in REGEX_WHITESPACE
        and text[position - 1] not in REGEX_WHITESPACE
    )


def next_safe_space(text: str, position: int) -> int:
    """Index of the first space at or after ``position`` (> 0) between non-whitespace, else len."""
    length = len(text)
    while True:
        position = text.find(" ", position)
        if position < 0:
            return length
        if (
            position + 1 < length
            and text[position + 1] not in REGEX_WHITESPACE
            and text[position - 1] not in REGEX_WHITESPACE
        ):
            return position
        position += 1


def last_safe_cut(text: str, specials: SpecialSplitter, split_safe: bool) -> int:
    """The last index where ``text``, a prefix of a longer stream, can be cut without changing its
    pre-tokens and special tokens, whatever follows; 0 if there is none.

    That is a safe space (for a split-safe pattern; else only the start of a special token) far
    enough from the end that no special token still being received can reach back over it, not
    followed by a special token and not inside one.
    """
    tokens = specials.special_tokens
    end = len(text) - max(max(map(len, tokens), default=0), 1)
    if not split_safe:  # only special tokens are known boundaries
        starts = [m.start() for m in specials.finditer(text) if m.end() <= end]
        return starts[-1] if starts else 0
    # Special tokens found from the start of the text (a place no special token covers), so
    # that overlapping ones pair up as they do when encoding; one that ends after `end` may
    # still grow into a longer one, but cannot cover a cut before `end`.
    spans = [match.span() for match in specials.finditer(text)] if any(" " in token for token in tokens) else []
    span_starts = [start for start, _ in spans]
    while end > 0:
        cut = text.rfind(" ", 0, end)
        if cut <= 0:
            return 0
        if (
            text[cut + 1] not in REGEX_WHITESPACE
            and text[cut - 1] not in REGEX_WHITESPACE
            and not any(text.startswith(token, cut + 1) for token in tokens)
            and not _strictly_inside(spans, span_starts, cut)
        ):
            return cut
        end = cut
    return 0


def _strictly_inside(spans: list[tuple[int, int]], span_starts: list[int], position: int) -> bool:
    """Whether one of ``spans`` (in order, not overlapping) has ``position`` strictly inside."""
    index = bisect_right(span_starts, position) - 1
    return index >= 0 and spans[index][0] < position < spans[index][1]


def find_safe_space(window: bytes, begin: int, specials: list[bytes]) -> int:
    """The first space at or after ``begin`` in a window of a file's bytes that lies between two
    printable ASCII characters and does not start a special token; -1 if none."""
    found = window.find(b" ", begin)
    while found >= 0:
        if (
            0 < found < len(window) - 1
            and 0x21 <= window[found + 1] <= 0x7E
            and 0x21 <= window[found - 1] <= 0x7E
            and not any(window.startswith(token, found + 1) for token in specials)
        ):
            return found
        found = window.find(b" ", found + 1)
    return -1


def covered_by_other_special(window: bytes, found: int, specials: list[bytes]) -> bool:
    """Whether an occurrence of some special token starts before ``found`` and covers it."""
    for token in specials:
        for begin in range(max(found - len(token) + 1, 0), found):
            if window.startswith(token, begin):
                return True
    return False
