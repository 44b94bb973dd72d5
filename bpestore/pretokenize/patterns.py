r"""The pre-tokenizer patterns and the whitespace they know.

The GPT-2 regex runs at about 10-20 MB/s in Python, while ``str.split(" ")`` runs at about
100 MB/s and natural text repeats its words endlessly. So text is cut with ``str.split(" ")`` into
*segments*, distinct segments are counted (or looked up in a cache), and the regex only ever runs on
distinct segments. This gives exactly the regex's result because of one property of the supported
patterns, checked for each of them by the property tests:

    A cut just before a space that is preceded and followed by characters that are not whitespace
    is a token boundary, and the tokens on either side of it are those of the two sides tokenized
    on their own.

(Every match that contains such a space starts with it, no match continues a whitespace run across
it, and the patterns have no look-behind. The character before the space matters to cl100k's
``\s++$``: "\n " alone ends with whitespace at the end of the text, "\n  a" does not.)
``text.split(" ")`` cuts before *every* space, so the parts after a space that is preceded or
followed by whitespace, or that ends the text, are glued back to the part before them: those few
stretches are "irregular segments" (``irregular_spans`` in tests/reference_cuts.py).

For patterns without the property (anything not listed in ``SPLIT_SAFE_PATTERNS``) the plain regex
is used on the whole text.
"""

from __future__ import annotations

import difflib
import re


GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
"""The GPT-2 pre-tokenizer pattern, as used by CS336 (r50k_base and p50k_base use the same)."""

CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

LLAMA3_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
"""Llama-3's pattern (OLMo-2's too), as Hugging Face's files write it: tiktoken's first spelling of
cl100k_base's, which gives the same pieces but for whitespace that ends the text after a newline
(``"\n  "`` at the end is two pieces here, one in cl100k_base)."""

QWEN2_PATTERN = LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")
"""Qwen2's pattern (Qwen2, Qwen2.5, Qwen3): Llama-3's with each number a piece of its own."""

SUPERBPE_THEIR_REGEX = r"""\p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r\n/]*| +(?!\S)"""
"""SuperBPE's stage-2 regex, as its repository writes it (``scripts/extend_tokenizer.sh`` of
github.com/PythonNut/superbpe): Hugging Face's ``Split`` cuts the text *around* its matches
(``behavior="isolated"``), so a match is a piece and so is each stretch between two matches; and
Hugging Face's trainer reads its files line by line, so no piece goes past a newline."""

SUPERBPE_PATTERN = (
    r"""\p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r/]*\n?| +(?!\S)"""
    r"""|(?:\p{L}|[^\S \n]| (?=\S)(?![^\s\p{L}\p{N}]{2})|(?!: )[^\s\p{L}\p{N}](?![^\s\p{L}\p{N}]))+(?::(?= )|\n)?"""
    r"""|:(?= )|\n"""
)
"""SuperBPE's stage-2 pre-tokenizer as its repository trains it (:data:`SUPERBPE_THEIR_REGEX`,
each line on its own, and no token holding ``": "``), written as a pattern whose matches are the
pieces, as bpestore's patterns are: the regex's three alternatives first (a digit group, a run of
two or more punctuation characters, spaces before whitespace), then the stretch up to the next
place one of them matches (letters, other whitespace, a space before a non-space character that
starts no punctuation run, a punctuation character alone), each piece ending at a newline (the
trainer reads its files line by line) and after a colon followed by a space (its trainer never
makes a token of ``": "``: the same tokens, as no earlier stage makes one either). Words join
across single spaces and single punctuation characters: the superwords. A test checks it
against that definition on every kind of character."""

GPT2_DIGITS_PATTERN = r"""\p{N}|'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?[^\s\p{L}\p{N}]+|\s+(?![^\s\p{N}])|\s+"""
r"""SmolLM's and StarCoder's pieces as one regex: Hugging Face's ``Digits(individual_digits=true)``
then ``ByteLevel`` with GPT-2's regex, which then runs on the stretches between numbers (each
number a piece; its ``\s+(?!\S)`` sees a number as the end of its stretch)."""

GPT2_DIGIT_RUNS_PATTERN = "\\p{N}+" + GPT2_DIGITS_PATTERN[len("\\p{N}"):]
"""The same with ``Digits(individual_digits=false)``: each run of numbers a piece."""

PATTERNS_BY_NAME: dict[str, str] = {
    "gpt2": GPT2_PATTERN,
    "r50k_base": GPT2_PATTERN,
    "p50k_base": GPT2_PATTERN,
    "cl100k_base": CL100K_PATTERN,
    "o200k_base": O200K_PATTERN,
    "llama3": LLAMA3_PATTERN,
    "qwen2": QWEN2_PATTERN,
    "superbpe": SUPERBPE_PATTERN,
}
"""The pre-tokenizers known by name: GPT-2's (``r50k_base`` and ``p50k_base`` use it too), GPT-4's
``cl100k_base``, GPT-4o's ``o200k_base``, Llama-3's (OLMo-2's too) and Qwen2's, which the engine
runs on hand-written scanners; and SuperBPE's stage-2 pre-tokenizer (``superbpe``), on one too
(its text is never cut at spaces: its pieces run across them)."""


def pattern_named(pattern: str) -> str:
    """A pre-tokenizer given by name (:data:`PATTERNS_BY_NAME`) -> its regex; any other string is
    taken as a regex and returned as it is (checked where it is compiled: see
    :func:`bpestore.model.check_pattern`). ValueError for a word of letters, digits and ``_``
    alone, which names no pattern: as a regex it would match that very word only, so it is a
    misspelt name (``cl100k``), which would otherwise drop the rest of every text.

    >>> pattern_named("cl100k_base") == CL100K_PATTERN
    True
    >>> pattern_named("cl100k")
    Traceback (most recent call last):
    ...
    ValueError: pattern 'cl100k' is not a known pre-tokenizer (gpt2, r50k_base, p50k_base, cl100k_base, o200k_base, llama3, qwen2, superbpe); did you mean cl100k_base?
    """
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a name or a regex string, not {type(pattern).__name__} ({pattern!r})")
    known = PATTERNS_BY_NAME.get(pattern)
    if known is not None:
        return known
    if re.fullmatch(r"\w+", pattern, re.ASCII):
        close = difflib.get_close_matches(pattern, PATTERNS_BY_NAME, n=1, cutoff=0.5)
        guess = f"; did you mean {close[0]}?" if close else ""
        raise ValueError(f"pattern {pattern!r} is not a known pre-tokenizer ({', '.join(PATTERNS_BY_NAME)}){guess}")
    return pattern


def name_of_pattern(pattern: str) -> str | None:
    """The name :func:`pattern_named` knows ``pattern`` by (``gpt2`` for GPT-2's), or None."""
    return next((name for name, known in PATTERNS_BY_NAME.items() if known == pattern), None)


# Patterns proven (by the property tests) to have the split property described above.
SPLIT_SAFE_PATTERNS = frozenset(
    {GPT2_PATTERN, CL100K_PATTERN, O200K_PATTERN, LLAMA3_PATTERN, QWEN2_PATTERN, GPT2_DIGITS_PATTERN, GPT2_DIGIT_RUNS_PATTERN}
)

# Exactly the characters that the `regex` module's \s matches (it excludes \x1c-\x1f, which
# Python's str.isspace() and the `re` module include). A test checks this against `regex`.
REGEX_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
