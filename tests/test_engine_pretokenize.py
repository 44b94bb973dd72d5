"""The Rust pre-tokenizer (``bpestore._engine.Pretokenizer``) against Python's ``regex`` and ``re``.

Pieces must equal ``regex.findall(pattern, text)`` (as tests/reference.py computes them) for the
three known patterns, which run on hand-written scanners, and for any other pattern, which runs on
fancy_regex; special tokens must split text as Python's longest-first ``re`` alternation does; and
every cut the engine calls safe must be safe, whatever text follows.

Unicode versions: the ``regex`` module (2026.x) has Unicode 17.0 tables, the engine has Unicode
16.0 (regex-syntax 0.8's tables, which the scanners share), Python 3.11's ``unicodedata`` has 14.0.
Code points assigned in Unicode 17 only are letters to ``regex`` and unassigned to the engine, so
the differential tests draw characters assigned in Python's Unicode 14.0 (``assigned_only``). One
older character changed category in Unicode 17: U+0295 (LATIN LETTER PHARYNGEAL VOICED FRICATIVE)
went from Ll to Lo, which changes o200k's pieces ("\u0295Ab" is one piece to ``regex``, two to the
engine and to tiktoken), so the differential tests leave it out.
``test_unicode_tables_differ_only_on_newly_assigned_code_points`` checks that nothing else differs.
"""

from __future__ import annotations

import functools
import random
import unicodedata

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpestore import _engine
from bpestore.pretokenize import CL100K_PATTERN, GPT2_PATTERN, LLAMA3_PATTERN, O200K_PATTERN, QWEN2_PATTERN
from bpestore.pretokenize.patterns import GPT2_DIGIT_RUNS_PATTERN, GPT2_DIGITS_PATTERN
from reference import split_on_specials
from strategies import SPECIAL_TOKEN_SETS, random_text, texts
from tiers import examples

# Patterns outside the three known ones run on fancy_regex: one like GPT-2's but with possessive
# quantifiers and digits one at a time, and one with look-ahead and bounded repeats. (Both tile
# any text, as a pattern must: see test_bad_input.py.)
OTHER_PATTERNS = [
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    r"""(?i:'s|'t)|[\p{Lu}\p{Lt}]?[\p{Ll}\p{M}]+|\p{N}{1,2}|\s*[\r\n]+|\s+(?=\s)|\S|\s""",
]
KNOWN_PATTERNS = [GPT2_PATTERN, CL100K_PATTERN, O200K_PATTERN, LLAMA3_PATTERN, QWEN2_PATTERN, GPT2_DIGITS_PATTERN, GPT2_DIGIT_RUNS_PATTERN]
ALL_PATTERNS = KNOWN_PATTERNS + OTHER_PATTERNS
PATTERN_IDS = ["gpt2", "cl100k", "o200k", "llama3", "qwen2", "gpt2-digits", "gpt2-digit-runs", "other1", "other2"]

# Characters whose general category differs between Unicode 16 (engine) and 17 (`regex`).
CATEGORY_CHANGED = {"\u0295": ("Ll", "Lo")}


def comparable(text: str) -> str:
    """``text`` without the characters on whose category the two Unicode versions disagree."""
    for char in CATEGORY_CHANGED:
        text = text.replace(char, "x")
    return text


FAST = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference_pieces(text: str, pattern: str, special_tokens: list[str]) -> list[str]:
    """Python's answer: cut at special tokens (longest first), ``regex.findall`` between them."""
    parts = split_on_specials(text, special_tokens, keep=True) if special_tokens else [text]
    pieces: list[str] = []
    for index, part in enumerate(parts):
        if index % 2:
            pieces.append(part)  # a special token
        else:
            pieces.extend(regex.findall(pattern, part))
    return pieces


def test_known_patterns_are_pythons_byte_for_byte():
    assert _engine.GPT2_PATTERN == GPT2_PATTERN
    assert _engine.CL100K_PATTERN == CL100K_PATTERN
    assert _engine.O200K_PATTERN == O200K_PATTERN
    assert _engine.LLAMA3_PATTERN == LLAMA3_PATTERN
    assert _engine.QWEN2_PATTERN == QWEN2_PATTERN
    assert _engine.GPT2_DIGITS_PATTERN == GPT2_DIGITS_PATTERN
    assert _engine.GPT2_DIGIT_RUNS_PATTERN == GPT2_DIGIT_RUNS_PATTERN
    for pattern in KNOWN_PATTERNS:
        assert _engine.Pretokenizer(pattern, []).split_safe
        assert _engine.Pretokenizer(pattern, []).uses_scanner
        assert not _engine.Pretokenizer(pattern, [], regex_engine=True).uses_scanner
    for pattern in OTHER_PATTERNS:
        assert not _engine.Pretokenizer(pattern, []).split_safe
        assert not _engine.Pretokenizer(pattern, []).uses_scanner


@pytest.mark.parametrize("pattern", ALL_PATTERNS, ids=PATTERN_IDS)
@FAST
@given(text=texts(assigned_only=True).map(comparable))
def test_pieces_equal_regex_findall(pattern, text):
    engine = _engine.Pretokenizer(pattern, [])
    assert engine.pretokenize(text) == regex.findall(pattern, text)
    assert engine.piece_count(text) == len(engine.pretokenize(text))


@pytest.mark.parametrize("pattern", KNOWN_PATTERNS, ids=PATTERN_IDS[:7])
def test_pieces_equal_regex_findall_on_long_random_text(pattern):
    rng = random.Random(12)
    text = comparable(random_text(rng, 200_000, assigned_only=True))
    assert _engine.Pretokenizer(pattern, []).pretokenize(text) == regex.findall(pattern, text)


@functools.cache
def every_assigned_character_in_context() -> str:
    """Every code point assigned in Python's Unicode (bar U+0295), each followed by a character
    or two drawn from letters, digits, marks, apostrophes and whitespace."""
    rng = random.Random(7)
    context = ["a", "A", "ǅ", "1", "٣", "\u0301", "'", "'s", "'LL", " ", "  ", "\n", "\r", "\t", "\xa0", "!", "/"]
    return "".join(
        chr(c) + rng.choice(context)
        for c in range(0x110000)
        if unicodedata.category(chr(c)) not in ("Cn", "Cs") and chr(c) not in CATEGORY_CHANGED
    )


@pytest.mark.parametrize("pattern", KNOWN_PATTERNS, ids=PATTERN_IDS[:7])
def test_pieces_equal_regex_findall_for_every_character(pattern):
    text = every_assigned_character_in_context()
    expected = regex.findall(pattern, text)
    assert _engine.Pretokenizer(pattern, []).pretokenize(text) == expected
    # The regex engine path too: it is what other patterns run on.
    assert _engine.Pretokenizer(pattern, [], regex_engine=True).pretokenize(text) == expected


@pytest.mark.slow  # (every code point through two regex engines: ~6 s)
def test_unicode_tables_differ_only_on_newly_assigned_code_points():
    characters = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    everything = "".join(characters)
    marked = "\x01".join(characters)  # each character of the class is a piece with the \x01 after it
    for name in ["L", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "N", "s"]:
        pattern = r"\s" if name == "s" else rf"\p{{{name}}}"
        # (A pattern must tile the text: the engine runs one that takes every other character too.)
        pieces = _engine.Pretokenizer(rf"{pattern}\x01|(?s:.)", []).pretokenize(marked)
        engine = {piece[0] for piece in pieces if len(piece) == 2}
        python = set(regex.findall(pattern, everything))
        differing = sorted((engine ^ python) - set(CATEGORY_CHANGED))
        assert all(unicodedata.category(c) == "Cn" for c in differing), (name, [hex(ord(c)) for c in differing[:20]])
        for char, (old, new) in CATEGORY_CHANGED.items():
            assert (char in engine, char in python) == (name in (old, old[0]), name in (new, new[0])), (name, char)
        # The engine's tables are older than `regex`'s, not newer: it never knows more.
        assert engine - python - set(CATEGORY_CHANGED) == set(), name


@pytest.mark.parametrize("pattern", ALL_PATTERNS, ids=PATTERN_IDS)
@settings(max_examples=examples(150), deadline=None)
@given(text=texts(assigned_only=True).map(comparable), special_tokens=st.sampled_from(SPECIAL_TOKEN_SETS))
def test_special_tokens_split_like_longest_first_re(pattern, special_tokens, text):
    engine = _engine.Pretokenizer(pattern, special_tokens)
    assert engine.pretokenize(text) == reference_pieces(text, pattern, special_tokens)


def test_special_tokens_overlapping_and_with_spaces():
    tokens = ["<|endoftext|>", "<|endoftext|><|endoftext|>", "<| sep |>"]
    engine = _engine.Pretokenizer(GPT2_PATTERN, tokens)
    text = "a<|endoftext|><|endoftext|><|endoftext|> b <| sep |><| sep |>  <|endoftext|"
    assert engine.pretokenize(text) == reference_pieces(text, GPT2_PATTERN, tokens)
    assert engine.pretokenize(text)[1:3] == ["<|endoftext|><|endoftext|>", "<|endoftext|>"]


def assert_safe_cut(text: str, cut: int, pattern: str, special_tokens: list[str]) -> None:
    whole = reference_pieces(text, pattern, special_tokens)
    parts = reference_pieces(text[:cut], pattern, special_tokens) + reference_pieces(text[cut:], pattern, special_tokens)
    assert parts == whole, (text, cut)


@pytest.mark.parametrize("pattern", ALL_PATTERNS, ids=PATTERN_IDS)
@settings(max_examples=examples(150), deadline=None)
@given(
    text=texts(assigned_only=True).map(comparable),
    continuation=texts(max_pieces=4, assigned_only=True).map(comparable),
    special_tokens=st.sampled_from(SPECIAL_TOKEN_SETS),
)
def test_last_safe_cut_is_safe_whatever_follows(pattern, special_tokens, text, continuation):
    cut = _engine.Pretokenizer(pattern, special_tokens).last_safe_cut(text)
    assert 0 <= cut < max(len(text), 1)
    if cut:
        assert_safe_cut(text + continuation, cut, pattern, special_tokens)


@pytest.mark.parametrize("special_tokens", SPECIAL_TOKEN_SETS, ids=str)
@pytest.mark.parametrize("pattern", KNOWN_PATTERNS, ids=PATTERN_IDS[:7])
def test_last_safe_cut_finds_cuts_and_they_are_safe(pattern, special_tokens):
    """Many prefixes of one random text: cuts are found (near the end) and all are safe."""
    rng = random.Random(5)
    text = comparable(random_text(rng, 4_000, assigned_only=True))
    engine = _engine.Pretokenizer(pattern, special_tokens)
    found = 0
    for _ in range(80):
        end = rng.randrange(len(text))
        cut = engine.last_safe_cut(text[:end])
        if cut:
            found += 1
            # Only characters of the last special token's length may be left uncut after it.
            assert end - cut < 200
            assert_safe_cut(text[: end + rng.randrange(20)], cut, pattern, special_tokens)
    assert found > 50


def test_last_safe_cut_examples():
    gpt2 = _engine.Pretokenizer(GPT2_PATTERN, ["<|endoftext|>"])
    assert gpt2.last_safe_cut("héllo wörld and a long enough tail") == 17
    # "hi <|endof" may become "hi <|endoftext|>": the space before "<" is no cut yet.
    assert gpt2.last_safe_cut("ab hi <|endof") == 0
    # Whitespace runs and the separators \x1c-\x1f, which are not \s to `regex`.
    assert _engine.Pretokenizer(GPT2_PATTERN, []).last_safe_cut("a  b\u3000 c") == 0
    assert _engine.Pretokenizer(GPT2_PATTERN, []).last_safe_cut("a \x1c b") == 3
    # cl100k: "\n " at the end is one piece (\s++$), but only at the very end.
    cl100k = _engine.Pretokenizer(CL100K_PATTERN, [])
    assert cl100k.pretokenize("a\n ") == regex.findall(CL100K_PATTERN, "a\n ") == ["a", "\n "]
    assert cl100k.last_safe_cut("x\n y z") == 4


@pytest.mark.parametrize("special_tokens", SPECIAL_TOKEN_SETS, ids=str)
@pytest.mark.parametrize("pattern", KNOWN_PATTERNS + OTHER_PATTERNS[:1], ids=PATTERN_IDS[:8])
def test_next_safe_cut_is_safe(pattern, special_tokens):
    rng = random.Random(9)
    text = comparable(random_text(rng, 3_000, assigned_only=True))
    data = text.encode("utf-8")
    engine = _engine.Pretokenizer(pattern, special_tokens)
    found = 0
    for _ in range(60):
        # The window starts 30 bytes before the search (past the longest special token), so
        # that an occurrence covering another is seen.
        start = rng.randrange(len(data) - 600)
        end = start + rng.randrange(40, 600)
        begin = rng.randrange(start + 30, end)
        cut = engine.next_safe_cut(data[start:end], begin - start)
        if cut is None:
            continue
        found += 1
        assert begin <= start + cut < end
        # A cut is a character boundary in the whole text, and safe there.
        prefix = data[: start + cut].decode("utf-8")
        assert_safe_cut(text, len(prefix), pattern, special_tokens)
    if special_tokens or pattern in KNOWN_PATTERNS:
        assert found > 10
    else:  # no known boundary at all
        assert found == 0


def python_utf8_error(data: bytes):
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        return error.start, error.reason
    return None


@settings(max_examples=examples(500), deadline=None)
@given(
    data=st.lists(
        st.one_of(st.binary(max_size=4), st.text(max_size=4).map(lambda s: s.encode("utf-8", "surrogatepass"))), max_size=8
    ).map(b"".join)
)
def test_utf8_errors_like_python(data):
    assert _engine.utf8_error(data) == python_utf8_error(data)


def test_bad_arguments():
    with pytest.raises(ValueError, match="pattern"):
        _engine.Pretokenizer("(unclosed", [])
    with pytest.raises(ValueError, match="empty"):
        _engine.Pretokenizer(GPT2_PATTERN, [""])
    engine = _engine.Pretokenizer(GPT2_PATTERN, ["<a>", "<b>"])
    assert (engine.pattern, engine.special_tokens) == (GPT2_PATTERN, ["<a>", "<b>"])


def test_the_category_change_that_is_left_out():
    """U+0295 is Ll to the engine (Unicode 16, as to tiktoken) and Lo to `regex` (Unicode 17)."""
    text = "\u0295Ab"
    assert regex.findall(O200K_PATTERN, text) == [text]
    assert _engine.Pretokenizer(O200K_PATTERN, []).pretokenize(text) == ["\u0295", "Ab"]
    # tiktoken splits it as the engine does: with "Ab" and the whole text in the vocabulary, one
    # piece would be one token, two pieces are the bytes of U+0295 and "Ab".
    tiktoken = pytest.importorskip("tiktoken")
    ranks = {bytes([byte]): byte for byte in range(256)} | {text.encode(): 256, b"Ab": 257}
    encoding = tiktoken.Encoding("o200k-pieces", pat_str=O200K_PATTERN, mergeable_ranks=ranks, special_tokens={})
    assert encoding.encode_ordinary(text) == [*"\u0295".encode(), 257]
