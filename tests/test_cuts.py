"""The cut rule, once per representation: one property run over each of them.

Where a representation says a text may be cut, cutting it there and pre-tokenizing both sides on
their own gives exactly the pre-tokens (and special tokens) of the whole text, as the reference
pre-tokenizer of tests/reference.py finds them. The representations: text (``str``, for segments
and streams), bytes of a file window, and the compiled engine.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore import _engine
from bpestore.pretokenize.patterns import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN
from reference import pretokenize, split_on_specials
from reference_cuts import SpecialSplitter, covered_by_other_special, find_safe_space, last_safe_cut, next_safe_space
from strategies import SPECIAL_TOKEN_SETS, texts

PATTERNS = [GPT2_PATTERN, CL100K_PATTERN, O200K_PATTERN]


def pieces(text: str, special_tokens: list[str], pattern: str) -> list[bytes]:
    """The reference's pieces: special tokens as pieces of their own, pre-tokens between them."""
    result: list[bytes] = []
    for index, part in enumerate(split_on_specials(text, special_tokens, keep=True)):
        result += [part.encode("utf-8")] if index % 2 else pretokenize(part, pattern)
    return result


def char_index(data: bytes, offset: int) -> int:
    return len(data[:offset].decode("utf-8"))


def str_next_safe_space(text: str, special_tokens: list[str], pattern: str) -> list[int]:
    # Segments are cut inside a text between special tokens: cuts of the first such text.
    first = split_on_specials(text, special_tokens, keep=False)[0]
    cuts, position = [], 1
    while (position := next_safe_space(first, position)) < len(first):
        cuts.append(position)
        position += 1
    return cuts


def str_last_safe_cut(text: str, special_tokens: list[str], pattern: str) -> list[int]:
    # A stream's prefixes: each cut must hold whatever follows, so it is checked on the whole text.
    splitter = SpecialSplitter(special_tokens)
    return [last_safe_cut(text[:end], splitter, True) for end in range(0, len(text) + 1, 7)]


def bytes_file_window(text: str, special_tokens: list[str], pattern: str) -> list[int]:
    data = text.encode("utf-8")
    specials = [token.encode("utf-8") for token in special_tokens]
    if any(b" " in token for token in specials):
        return []  # chunking takes no space cuts then (reference_cuts)
    cuts, begin = [], 0
    while (found := find_safe_space(data, begin, specials)) >= 0:
        cuts.append(char_index(data, found))
        begin = found + 1
    for token in specials:  # special-token starts that no other special token covers
        found = data.find(token)
        while found >= 0:
            if not covered_by_other_special(data, found, specials):
                cuts.append(char_index(data, found))
            found = data.find(token, found + 1)
    return cuts


def engine_last_safe_cut(text: str, special_tokens: list[str], pattern: str) -> list[int]:
    pretokenizer = _engine.Pretokenizer(pattern, special_tokens)
    return [pretokenizer.last_safe_cut(text[:end]) for end in range(0, len(text) + 1, 7)]


def engine_next_safe_cut(text: str, special_tokens: list[str], pattern: str) -> list[int]:
    pretokenizer = _engine.Pretokenizer(pattern, special_tokens)
    data = text.encode("utf-8")
    cuts, start = [], 0
    while (found := pretokenizer.next_safe_cut(data, start)) is not None:
        cuts.append(char_index(data, found))
        start = found + 1
    return cuts


REPRESENTATIONS = [
    str_next_safe_space, str_last_safe_cut, bytes_file_window, engine_last_safe_cut, engine_next_safe_cut,
]


@pytest.mark.parametrize("cuts_of", REPRESENTATIONS, ids=lambda function: function.__name__)
@settings(max_examples=150, deadline=None)
@given(text=texts(), special_tokens=st.sampled_from(SPECIAL_TOKEN_SETS), pattern=st.sampled_from(PATTERNS))
def test_a_cut_changes_no_piece(cuts_of, text, special_tokens, pattern):
    if cuts_of is str_next_safe_space:
        text = split_on_specials(text, special_tokens, keep=False)[0]  # a text between special tokens
    whole = pieces(text, special_tokens, pattern)
    for cut in sorted(set(cuts_of(text, special_tokens, pattern))):
        assert 0 <= cut <= len(text)
        assert pieces(text[:cut], special_tokens, pattern) + pieces(text[cut:], special_tokens, pattern) == whole, (
            cuts_of.__name__, cut, text[max(cut - 10, 0) : cut + 10],
        )
