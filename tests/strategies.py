"""Hypothesis strategies and generators for the awkward texts that BPE code gets wrong.

Texts are built from fragments aimed at the edges of the GPT-2 pre-tokenizer and of special-token
handling: every character the `regex` module treats as whitespace (and \\x1c-\\x1f, which it does
not, although ``str.isspace()`` does), runs of spaces before newlines, contractions, letters and
digits of other scripts, combining marks, emoji, and special tokens (whole, doubled, or cut short)
next to all of these. Arbitrary Unicode is mixed in, as are runs over a two-letter alphabet, which
make pair counts tie and pairs overlap ("aaa").
"""

from __future__ import annotations

import operator
import random
import unicodedata

from hypothesis import strategies as st

# Whitespace for `regex`'s \s, followed by four separators that are not \s there.
REGEX_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
)
NOT_REGEX_WHITESPACE = "\x1c\x1d\x1e\x1f"
WHITESPACE = REGEX_WHITESPACE + NOT_REGEX_WHITESPACE

ENDOFTEXT = "<|endoftext|>"
SPACED_SPECIAL = "<| sep |>"  # a special token with spaces: chunks can then only be cut at specials
SPECIAL_TOKEN_SETS = [[], [ENDOFTEXT], [ENDOFTEXT, ENDOFTEXT + ENDOFTEXT], ["<a>", "<b>"], [SPACED_SPECIAL, ENDOFTEXT]]

# Special tokens (of any of the sets above) and near misses, which must stay ordinary text.
SPECIAL_PIECES = [
    ENDOFTEXT, ENDOFTEXT + ENDOFTEXT, "<a>", "<b>", "<a><b>", SPACED_SPECIAL,
    # after a run of whitespace: the run then ends its piece of text, which changes how it splits
    "  " + ENDOFTEXT, "\n " + ENDOFTEXT, " \t <a>", "\n\n <b>", "   " + SPACED_SPECIAL,
    "<|endoftext", "|>", "<|", "<", ">", "<a", "<| sep", " |>",
]

FRAGMENTS = [
    # contractions, with and without a letter before, in other cases, and near misses
    "don't", "we'll", "'s", "'S", "'t", "'re", "'ve", "'m", "'ll", "'d", "''s", "' s", "’s", "I'M", "it's.",
    # words, other scripts, combining marks, emoji (some of them several code points)
    "hello", " world", "Straße", "naïve", "e\u0301", "\u0301", "a\u0308\u0301", "中文", " 日本語", "한국어",
    "Привет", "مرحبا", "😀", " 👍🏽", "👨‍👩‍👧", "🇩🇪", "\u200d", "\ufeff",
    # digits: ASCII, Arabic-Indic, Bengali, superscript, Roman numeral, fullwidth
    "123", " 42", "٣", "৩", "٣৩1", "²", "Ⅻ", "１２",
    # punctuation
    "!", "...", " —", "“quoted”", "$", " (", "\\", "\x00",
    # spaces and newlines in the combinations the regex splits differently
    " ", "  ", "   ", " \n", "  \n", "\n ", "\n\n", "\r\n", " \t ", "\t", " \u3000 ", "\xa0 ", " \x1c ",
]


def texts(*, max_pieces: int = 30, special_pieces: bool = True, assigned_only: bool = False) -> st.SearchStrategy[str]:
    """Texts made of the fragments above, whitespace runs, arbitrary Unicode and special tokens.

    ``assigned_only`` keeps to code points assigned in Python's Unicode database (14.0 for Python
    3.11): texts to compare with tiktoken need it. The `regex` module has newer Unicode tables than
    tiktoken's Rust regex, and so classes some newer code points as letters where tiktoken does not
    (U+3DDB7 before "'ll" is split differently, for one); neither is wrong about GPT-2.
    """
    any_char = st.characters(exclude_categories=("Cs", "Cn") if assigned_only else ("Cs",))
    pieces = [
        st.sampled_from(FRAGMENTS),
        st.text(st.sampled_from(WHITESPACE), min_size=1, max_size=4),
        st.text(st.sampled_from("ab "), min_size=1, max_size=8),
        st.text(any_char, max_size=6),
        # long pre-tokens: past the length where encoders switch to another algorithm
        st.builds(operator.mul, st.sampled_from(["a", "ab", "中", "7", " ", "\n", "😀", "!?"]), st.integers(30, 120)),
    ]
    if special_pieces:
        pieces.append(st.sampled_from(SPECIAL_PIECES))
    return st.lists(st.one_of(pieces), max_size=max_pieces).map("".join)


def random_text(rng: random.Random, size: int, *, special_pieces: bool = True, assigned_only: bool = False) -> str:
    """A text of about ``size`` characters drawn like :func:`texts`, for corpora too big for
    hypothesis to build; mostly plain words, so that chunks are cut at spaces as well."""

    def any_char() -> str:
        while True:
            c = chr(rng.choice([rng.randint(0x20, 0x7E), rng.randint(0xA0, 0xD7FF), rng.randint(0xE000, 0x10FFFF)]))
            if not assigned_only or unicodedata.category(c) != "Cn":
                return c

    words = ["the", "cat", "sat", "on", "a", "mat", "and", "then", "it", "ran"]
    pieces: list[str] = []
    length = 0
    while length < size:
        roll = rng.random()
        if roll < 0.6:
            piece = " " + rng.choice(words)
        elif roll < 0.8:
            piece = rng.choice(FRAGMENTS)
        elif roll < 0.9:
            piece = "".join(rng.choice(WHITESPACE) for _ in range(rng.randint(1, 4)))
        elif roll < 0.95 and special_pieces:
            piece = rng.choice(SPECIAL_PIECES)
        else:
            piece = "".join(any_char() for _ in range(rng.randint(1, 3)))
        pieces.append(piece)
        length += len(piece)
    return "".join(pieces)
