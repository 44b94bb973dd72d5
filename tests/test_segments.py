"""The split rule that cutting text into independently pre-tokenized parts relies on, and the
segment counting of training (in the engine) that is built on it.

(The engine's own cut rule and pre-token cache are tested in crates/pretokenize, crates/encode and
tests/test_engine_*.py.)
"""

from __future__ import annotations

from collections import Counter

import regex
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bpestore.pretokenize import SPLIT_SAFE_PATTERNS
from bpestore import _engine
from strategies import REGEX_WHITESPACE, texts
from tiers import examples


@settings(max_examples=examples(300), deadline=None)
@example(text="\n  a")  # cl100k's \s++$: "\n " alone ends the text, in "\n  a" it does not
@example(text=" a\n  b")
@example(text="x\n\t a")
@given(text=texts(special_pieces=False))
def test_split_rule_holds_for_each_split_safe_pattern(text):
    """A cut before a space between two non-whitespace characters changes no pre-token."""
    cuts = [i for i in range(1, len(text) - 1)
            if text[i] == " " and text[i + 1] not in REGEX_WHITESPACE and text[i - 1] not in REGEX_WHITESPACE]
    for pattern in SPLIT_SAFE_PATTERNS:
        compiled = regex.compile(pattern)
        whole = compiled.findall(text)
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        assert [t for piece in pieces for t in compiled.findall(piece)] == whole, pattern
        # and segments that end with non-whitespace can be joined in any order
        joined = [p for p in pieces if p[:1] == " " and len(p) > 1 and p[1] not in REGEX_WHITESPACE and p[-1] not in REGEX_WHITESPACE]
        joined.reverse()
        assert compiled.findall("".join(joined)) == [t for p in joined for t in compiled.findall(p)], pattern


@settings(max_examples=examples(200), deadline=None)
@example(texts_=["\n  a", "x\n\t", " b c\n"])
@given(texts_=st.lists(texts(special_pieces=False, assigned_only=True), max_size=4))
def test_engine_counts_like_the_regex(texts_):
    """Training's counter (the engine cuts at safe spaces and pre-tokenizes distinct segments)
    against plain findall, each pattern. (Assigned code points only: the `regex` module's Unicode
    tables are newer than the engine's, see tests/test_training.py.)"""
    for pattern in SPLIT_SAFE_PATTERNS:
        counts = _engine.count_texts(texts_, pattern, [])
        expected = Counter(token.encode("utf-8") for text in texts_ for token in regex.findall(pattern, text))
        assert Counter(counts.to_dict()) == expected, pattern
