"""Where a UTF-8 encoded text falls apart into segments that can be tokenized independently.

This is :mod:`bpestore.pretokenize.patterns`'s split rule, applied with array operations to the bytes of a
text: a segment starts at the text's start, at each space between two characters that are not
whitespace (for the split-safe patterns), and at each special token's start and end. Cutting at
fewer places than the rule allows is always correct (a longer segment is tokenized by the regex
as a whole), so where a byte alone cannot tell whether a neighbouring character is whitespace,
the character is decoded.
"""

from __future__ import annotations

import numpy as np

from ..pretokenize.patterns import REGEX_WHITESPACE

_SPACE = 0x20


def _byte_table(accepted) -> np.ndarray:
    return np.array([accepted(byte) for byte in range(256)], dtype=bool)


def _is_whitespace_lead(byte: int) -> bool:
    """Whether some whitespace character's UTF-8 encoding starts with ``byte``."""
    return any(char.encode("utf-8")[0] == byte for char in REGEX_WHITESPACE)


# After a space, these bytes start a character that is surely not whitespace: ASCII other than
# whitespace, and lead bytes that no whitespace character's encoding starts with. (Continuation
# bytes cannot follow a space in valid UTF-8.)
_SURELY_NOT_WHITESPACE = _byte_table(
    lambda byte: (byte < 0x80 and chr(byte) not in REGEX_WHITESPACE) or (byte >= 0xC2 and not _is_whitespace_lead(byte))
)
# Lead bytes shared by whitespace and other characters (0xC2: U+00A0; 0xE2: U+2000 and "—"...).
_AMBIGUOUS_LEAD = _byte_table(lambda byte: byte >= 0x80 and _is_whitespace_lead(byte))


def _is_whitespace_end(byte: int) -> bool:
    """Whether some multi-byte whitespace character's UTF-8 encoding ends with ``byte``."""
    return any(len(char.encode("utf-8")) > 1 and char.encode("utf-8")[-1] == byte for char in REGEX_WHITESPACE)


# Before a space, these bytes end a character that is surely not whitespace: ASCII other than
# whitespace, and continuation bytes that no whitespace character ends with. (A lead byte cannot
# come before a space in valid UTF-8.)
_SURELY_NOT_WHITESPACE_END = _byte_table(
    lambda byte: (byte < 0x80 and chr(byte) not in REGEX_WHITESPACE) or (0x80 <= byte < 0xC0 and not _is_whitespace_end(byte))
)
_AMBIGUOUS_END = _byte_table(lambda byte: 0x80 <= byte < 0xC0 and _is_whitespace_end(byte))
# Whitespace by code point, for the characters these lead bytes start (all below U+4000).
_IS_WHITESPACE_CODE = np.zeros(0x4000, dtype=bool)
_IS_WHITESPACE_CODE[[ord(char) for char in REGEX_WHITESPACE]] = True


def segment_bounds(
    raw: np.ndarray,
    length: int,
    split_safe: bool,
    specials: list[tuple[int, int]],
    specials_have_space: bool,
) -> np.ndarray:
    """The sorted offsets where segments of ``raw[:length]`` start, followed by ``length``.

    ``raw`` is the text's UTF-8 bytes followed by at least 3 spare bytes; ``specials`` are the
    byte spans of its special tokens, in order and not overlapping. A special token is a segment
    of its own.
    """
    is_bound = np.zeros(length + 1, dtype=bool)
    if split_safe and length > 1:
        spaces = np.flatnonzero(raw[1 : length - 1] == _SPACE) + 1  # at the ends it cuts nothing
        safe = _followed_by_non_whitespace(raw, spaces)
        safe[safe] = _preceded_by_non_whitespace(raw, spaces[safe])
        is_bound[spaces[safe]] = True
    if specials:
        starts, ends = np.array(specials, dtype=np.int64).T
        if split_safe:
            # A special token is cut out before pre-tokenization, so a space just before it ends a
            # piece of text: it is no boundary.
            before = starts[starts > 0] - 1
            is_bound[before[raw[before] == _SPACE]] = False
            if specials_have_space:
                depth = np.zeros(length + 2, dtype=np.int64)
                np.add.at(depth, starts + 1, 1)
                np.add.at(depth, ends, -1)
                is_bound[np.cumsum(depth)[: length + 1] > 0] = False
        is_bound[starts] = True
        is_bound[ends] = True
    is_bound[0] = is_bound[length] = True  # last: a space that starts the text may precede a special
    return np.flatnonzero(is_bound)


def joinable(raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Whether each segment ``raw[start:start+length]`` starts with a space followed by a
    character that is not whitespace, and ends with a character that is not whitespace. Such
    segments can be put side by side in any order: each meets the next at a safe cut."""
    ok = (raw[starts] == _SPACE) & (lengths > 1)
    ok[ok] = _followed_by_non_whitespace(raw, starts[ok])
    ok[ok] = _preceded_by_non_whitespace(raw, (starts + lengths)[ok])
    return ok


def _followed_by_non_whitespace(raw: np.ndarray, spaces: np.ndarray) -> np.ndarray:
    """Whether the character after each of ``spaces`` (which must not end the text) is not
    whitespace."""
    following = raw[spaces + 1]
    result = _SURELY_NOT_WHITESPACE[following]
    unsure = np.flatnonzero(_AMBIGUOUS_LEAD[following])
    if len(unsure):
        result[unsure] = ~_IS_WHITESPACE_CODE[_code_points_at(raw, spaces[unsure] + 1)]
    return result


def _preceded_by_non_whitespace(raw: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Whether the character that ends just before each of ``positions`` (none is 0) is not
    whitespace."""
    previous = raw[positions - 1]
    result = _SURELY_NOT_WHITESPACE_END[previous]
    unsure = np.flatnonzero(_AMBIGUOUS_END[previous])
    if len(unsure):
        last = positions[unsure] - 1
        # a 2-byte character starts one byte earlier, a 3-byte one two (4-byte ones are never
        # whitespace: whatever they decode to here below U+4000 errs towards no cut)
        first = np.maximum(np.where(raw[last - 1] >= 0xC0, last - 1, last - 2), 0)
        code = np.minimum(_code_points_at(raw, first), len(_IS_WHITESPACE_CODE) - 1)
        result[unsure] = ~_IS_WHITESPACE_CODE[code]
    return result


def gather_text(raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[str, np.ndarray]:
    """The segments ``raw[start:start+length]`` (whole characters each) joined and decoded, and
    the length of each in characters."""
    total = int(lengths.sum())
    offsets = np.cumsum(lengths) - lengths
    gathered = raw[np.repeat(starts - offsets, lengths) + np.arange(total)]
    continuation = (gathered & 0xC0) == 0x80
    return gathered.tobytes().decode("utf-8"), lengths - np.add.reduceat(continuation, offsets).astype(np.int64)


def _code_points_at(raw: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The code points of the 2- and 3-byte UTF-8 characters starting at ``positions``."""
    lead = raw[positions].astype(np.int64)
    second = raw[positions + 1].astype(np.int64) & 0x3F
    third = raw[positions + 2].astype(np.int64) & 0x3F
    two_bytes = ((lead & 0x1F) << 6) | second
    three_bytes = ((lead & 0x0F) << 12) | (second << 6) | third
    return np.where(lead < 0xE0, two_bytes, three_bytes)
