"""Tests of ``bpestore.Tokenizer`` against tiktoken's GPT-2 and the naive reference encoder.

Expected ids always come from tiktoken (GPT-2, built from the fixture files) or from
``reference_encode`` (a vocabulary trained by ``reference_train``), never from literals.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import textwrap
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from bpestore import Tokenizer
from bpestore.pretokenize import CL100K_PATTERN, SPLIT_SAFE_PATTERNS
from conftest import shared_file
from gpt2_tiktoken import ENDOFTEXT, ENDOFTEXT_ID, gpt2_encoding, gpt2_vocab_and_merges
from reference import reference_encode, reference_train
from strategies import SPACED_SPECIAL, SPECIAL_TOKEN_SETS, random_text, texts
from tiers import examples

FIXTURE_TEXTS = ["address.txt", "german.txt", "tinystories_sample.txt", "corpus.en"]
CORPORA = ["wiki_en_57M.txt", "reuters_17M.txt", "sotu_11M.txt", "tinystories_800K.txt"]
PREFIX_BYTES = 5_000_000


def read_text(path: Path, limit: int | None = None) -> str:
    """The file's text exactly (no newline translation), cut to at most ``limit`` bytes at the
    end of a character."""
    data = path.read_bytes()
    if limit is not None and len(data) > limit:
        end = limit
        while data[end] & 0xC0 == 0x80:  # continuation byte: the cut would split a character
            end -= 1
        data = data[:end]
    return data.decode("utf-8")


def tiktoken_ids(text: str, with_special: bool) -> list[int]:
    if with_special:
        return gpt2_encoding().encode(text, allowed_special="all")
    return gpt2_encoding().encode(text, disallowed_special=())  # "<|endoftext|>" as plain text


@lru_cache(maxsize=None)
def gpt2_tokenizer(with_special: bool) -> Tokenizer:
    vocab, merges = gpt2_vocab_and_merges()
    # Copies: the tokenizer must not be able to change the shared vocab of other tests.
    return Tokenizer(dict(vocab), list(merges), [ENDOFTEXT] if with_special else None)


@lru_cache(maxsize=None)
def gpt2_tokenizer_from_files(with_special: bool) -> Tokenizer:
    return Tokenizer.from_files(
        shared_file("fixtures", "gpt2_vocab.json"),
        shared_file("fixtures", "gpt2_merges.txt"),
        [ENDOFTEXT] if with_special else None,
    )


@lru_cache(maxsize=1)
def small_vocab() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """A 600-token vocabulary from the reference trainer on awkward text (``<|endoftext|>`` is 0):
    a copy of its own for each caller."""
    vocab, merges = _small_vocab()
    return dict(vocab), list(merges)


@lru_cache(maxsize=1)
def _small_vocab() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    # (the reference trainer takes a second or so: once per session)
    text = read_text(shared_file("fixtures", "tinystories_sample.txt")) + random_text(random.Random(5), 8000)
    return reference_train(text, 600, [ENDOFTEXT])


@lru_cache(maxsize=None)
def small_tokenizer(special_tokens: tuple[str, ...]) -> Tokenizer:
    vocab, merges = small_vocab()
    return Tokenizer(dict(vocab), list(merges), list(special_tokens))


# -- GPT-2: identical ids to tiktoken ---------------------------------------------------------------


@pytest.mark.parametrize("with_special", [True, False], ids=["special", "literal"])
@pytest.mark.parametrize("name", FIXTURE_TEXTS)
def test_gpt2_fixture_texts_match_tiktoken(name, with_special):
    text = read_text(shared_file("fixtures", name))
    expected = tiktoken_ids(text, with_special)
    assert gpt2_tokenizer(with_special).encode(text) == expected
    assert gpt2_tokenizer_from_files(with_special).encode(text) == expected


@pytest.mark.parametrize("with_special", [True, False], ids=["special", "literal"])
@pytest.mark.parametrize("name", CORPORA)
def test_gpt2_corpus_prefixes_match_tiktoken(name, with_special):
    text = read_text(shared_file("corpora", name), PREFIX_BYTES)
    expected = tiktoken_ids(text, with_special)
    ids = gpt2_tokenizer(with_special).encode(text)
    if ids != expected:  # say where, rather than comparing two million-element lists
        first = next((i for i, (a, b) in enumerate(zip(ids, expected)) if a != b), min(len(ids), len(expected)))
        context = gpt2_encoding().decode(expected[max(first - 5, 0) : first + 5])
        pytest.fail(f"ids differ at index {first} (near {context!r}): {ids[first:first + 5]}, tiktoken {expected[first:first + 5]}")


def test_gpt2_corpus_lines_through_encode_iterable():
    path = shared_file("corpora", "wiki_en_57M.txt")
    text = read_text(path, PREFIX_BYTES)
    lines = text.splitlines(keepends=True)
    assert list(gpt2_tokenizer(True).encode_iterable(lines)) == tiktoken_ids(text, True)


@settings(max_examples=examples(150), deadline=None)
@given(texts(assigned_only=True))
def test_gpt2_generated_text_matches_tiktoken(text):
    assert gpt2_tokenizer(True).encode(text) == tiktoken_ids(text, True)
    assert gpt2_tokenizer(False).encode(text) == tiktoken_ids(text, False)


@pytest.mark.parametrize(
    "text", [" " + ENDOFTEXT, "  " + ENDOFTEXT + " x", ENDOFTEXT + " ", " \n" + ENDOFTEXT, "a " + ENDOFTEXT + " " + ENDOFTEXT]
)
def test_gpt2_space_before_special_at_text_start(text):
    """A space before a special token is no segment boundary, not even when it starts the text."""
    assert gpt2_tokenizer(True).encode(text) == tiktoken_ids(text, True)


def test_empty_special_token_is_refused():
    vocab, merges = small_vocab()
    with pytest.raises(ValueError, match="non-empty"):
        Tokenizer(dict(vocab), list(merges), [""])


@pytest.mark.parametrize("cache_size", [1, 50, 5000])
def test_gpt2_small_caches_are_emptied_and_refilled_exactly(cache_size):
    """Caches far smaller than the text's vocabulary are emptied in the middle of blocks, many times."""
    vocab, merges = gpt2_vocab_and_merges()
    tokenizer = Tokenizer(dict(vocab), list(merges), [ENDOFTEXT], cache_size=cache_size)
    text = read_text(shared_file("fixtures", "tinystories_sample.txt")) + random_text(random.Random(7), 20_000, assigned_only=True)
    text += " " + "x" * 40 + " " + "y" * 40  # segments too long for the table's keys
    expected = tiktoken_ids(text, True)
    assert tokenizer.encode(text) == expected
    assert tokenizer.encode(text) == expected  # with whatever the caches hold now


@pytest.mark.parametrize("cache_size", [1, 50, 5000])
def test_gpt2_small_caches_shared_by_threads_are_emptied_and_refilled_exactly(cache_size, tmp_path):
    """Threads encoding one batch or one file share caches (a lock-free table of short pieces, a
    locked cache of the others) that fill up and start afresh many times: the ids stay
    tiktoken's."""
    from bpestore.encode.files import encode_file_to_npy

    np = pytest.importorskip("numpy")
    vocab, merges = gpt2_vocab_and_merges()
    tokenizer = Tokenizer(dict(vocab), list(merges), [ENDOFTEXT], cache_size=cache_size)
    text = read_text(shared_file("fixtures", "tinystories_sample.txt")) + random_text(random.Random(8), 20_000, assigned_only=True)
    text += " " + "x" * 20 + " " + "y" * 40  # a medium piece, and one too long for the tables' keys
    lines = text.splitlines(keepends=True)
    expected = [tiktoken_ids(line, True) for line in lines]
    assert tokenizer.encode_batch(lines, num_threads=2) == expected
    assert tokenizer.encode_batch(lines, num_threads=2) == expected  # with whatever they hold now
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(text.encode("utf-8"))
    count = encode_file_to_npy(tokenizer, corpus, tmp_path / "ids.npy", workers=2, chunk_bytes=1 << 12)
    whole = tiktoken_ids(text, True)
    assert count == len(whole)
    assert np.load(tmp_path / "ids.npy").tolist() == whole


# -- a small trained vocabulary: identical ids to the reference encoder --------------------------------


@settings(max_examples=examples(150), deadline=None)
@given(text=texts(), special_tokens=st.sampled_from(SPECIAL_TOKEN_SETS))
def test_small_vocab_generated_text_matches_reference(text, special_tokens):
    vocab, merges = small_vocab()
    expected = reference_encode(text, vocab, merges, special_tokens)
    assert small_tokenizer(tuple(special_tokens)).encode(text) == expected


@settings(max_examples=examples(150), deadline=None)
@example(text="\n  a", special_tokens=[], pattern=CL100K_PATTERN)  # cl100k's \\s++$ (see pretokenize)
@example(text=" a\n  b", special_tokens=[], pattern=CL100K_PATTERN)
@given(text=texts(), special_tokens=st.sampled_from(SPECIAL_TOKEN_SETS), pattern=st.sampled_from(sorted(SPLIT_SAFE_PATTERNS)))
def test_small_vocab_split_safe_patterns_match_reference(text, special_tokens, pattern):
    vocab, merges = small_vocab()
    tokenizer = Tokenizer(dict(vocab), list(merges), special_tokens, pattern=pattern)
    expected = reference_encode(text, vocab, merges, special_tokens, pattern)
    assert tokenizer.encode(text) == expected
    assert tokenizer.encode(text) == expected  # with its segments cached


# Patterns without the split property: the text is cut only at special tokens, and pieces longer
# than the segment table's keys go through its dict of long segments. (Each tiles any text, as a
# pattern must: one that leaves characters out is refused, see test_bad_input.py.)
OTHER_PATTERNS = [r"\S+|\s+", r"\w+|\W+", r" ?[a-z]+|\s+|.", r"\S+|\s", r"[a-z]+|[^a-z]"]


@settings(max_examples=examples(200), deadline=None)
@example(text="x<|endoftext|>\n", special_tokens=[ENDOFTEXT], pattern=r"\S+|\s")
@example(text="ab<|endoftext|>12<|endoftext|>cd", special_tokens=[ENDOFTEXT], pattern="[a-z]+|[^a-z]")
@given(text=texts(), special_tokens=st.sampled_from(SPECIAL_TOKEN_SETS), pattern=st.sampled_from(OTHER_PATTERNS))
def test_small_vocab_other_patterns_match_reference(text, special_tokens, pattern):
    vocab, merges = small_vocab()
    tokenizer = Tokenizer(dict(vocab), list(merges), special_tokens, pattern=pattern)
    assert tokenizer.encode(text) == reference_encode(text, vocab, merges, special_tokens, pattern)


# -- any pattern the engine accepts loses no text -----------------------------------------------

# Patterns from a small grammar: an alternation of classes under quantifiers (greedy, possessive,
# lazy), some with a leading optional space or a look-ahead, often (not always) ending in a
# catch-all. Many leave some character uncovered: the probes refuse most of those at construction;
# the others (the classes that leave out a script the probes do not hold) must fail with
# PatternError on a text they do not cover, which the texts below sometimes are.
PATTERN_CLASSES = [
    r"\p{L}", r"\p{Lu}", r"\p{N}", r"\d", r"\s", r"\S", r"\w", r"\W", r".", r"(?s:.)", r"[\s\S]",
    r"[^\s]", r"[a-z]", r"[^\p{L}\p{N}\s]", r"\p{P}", r"\p{M}", r"\p{So}", r"[\r\n]", "a", " ", "'", r"\n",
    r"[^\p{Braille}]", r"[^\s\p{Runic}]", r"\P{Ogham}",
]
RARE_SCRIPTS = ["\u2801", "\u16a0", "\u1681"]  # Braille, Runic, Ogham: in no probe
QUANTIFIERS = ["", "+", "*", "?", "++", "*+", "+?", "*?", "{1,3}", "{2}", "{1,3}+"]
pattern_atoms = st.builds(
    lambda space, cls, quantifier, look: space + cls + quantifier + look,
    st.sampled_from(["", " ?"]),
    st.sampled_from(PATTERN_CLASSES),
    st.sampled_from(QUANTIFIERS),
    st.sampled_from(["", "", "", r"(?!\S)", r"(?=\s)"]),
)
patterns = st.builds(
    lambda atoms, catch_all: "|".join(atoms + catch_all),
    st.lists(pattern_atoms, min_size=1, max_size=5),
    st.sampled_from([[], [r"(?s:.)"], [r"\s"], [r"\S+"]]),
)


@settings(max_examples=examples(300), deadline=None)
@example(pattern=r"\w+", text="ab, c")  # once accepted: the comma and the space were dropped
@example(pattern=r"[a-z]+|\s+", text="ab 12 cd")
@example(pattern=r"\S+|(?s:.)", text="ab c")
@example(pattern=r"[^\p{Braille}]+", text="ab \u2801 c")  # accepted; PatternError at byte 3
@given(
    pattern=patterns,
    text=st.lists(st.one_of(texts(max_pieces=10), st.sampled_from(RARE_SCRIPTS)), max_size=4).map("".join),
)
def test_any_accepted_pattern_loses_no_text(pattern, text):
    """For any pattern a BPEModel accepts, encoding gives ids whose bytes are the text's, or
    raises PatternError (naming the first byte no match covers, with the character there): never
    ids that silently leave text out."""
    from bpestore import BPEModel
    from bpestore.errors import PatternError

    try:
        model = BPEModel({i: bytes([i]) for i in range(256)}, [], [ENDOFTEXT], pattern=pattern)
    except ValueError as error:
        assert "pre-tokenizer pattern" in str(error) and "\n" not in str(error)
        event("refused at construction")
        return
    tokenizer = Tokenizer.from_model(model)
    try:
        ids = tokenizer.encode(text)
    except PatternError as error:
        match = re.search(r"no match covers .* \(U\+([0-9A-F]{4,6})\) at byte (\d+) of", str(error))
        assert match, str(error)
        offset = int(match.group(2))
        assert text.encode()[offset:].decode().startswith(chr(int(match.group(1), 16))), str(error)
        event("PatternError while encoding")
        return
    event("encoded")
    assert tokenizer.decode_bytes(ids) == text.encode()
    half = len(text) // 2
    assert list(tokenizer.encode_iterable([text[:half], text[half:]])) == ids


@pytest.mark.parametrize("name", ["address.txt", "german.txt", "tinystories_sample.txt"])
def test_small_vocab_fixture_texts_match_reference(name):
    text = read_text(shared_file("fixtures", name))
    vocab, merges = small_vocab()
    special_tokens = [ENDOFTEXT, "<new>"]
    assert small_tokenizer(tuple(special_tokens)).encode(text) == reference_encode(text, vocab, merges, special_tokens)


# -- special tokens ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "special_tokens", [[ENDOFTEXT, ENDOFTEXT * 2], [ENDOFTEXT * 2, ENDOFTEXT]], ids=["single-first", "double-first"]
)
def test_special_tokens_longest_first(special_tokens):
    vocab, merges = gpt2_vocab_and_merges()
    tokenizer = Tokenizer(dict(vocab), list(merges), special_tokens)
    double_id = tokenizer.encode(ENDOFTEXT * 2)
    assert len(double_id) == 1 and double_id[0] not in vocab  # one new id, not 50256 twice
    text = f"a{ENDOFTEXT * 3} b{ENDOFTEXT}{ENDOFTEXT}\n{ENDOFTEXT}"
    ids = tokenizer.encode(text)
    assert ids == reference_encode(text, vocab, merges, special_tokens)
    assert ids.count(double_id[0]) == 2 and ids.count(ENDOFTEXT_ID) == 2
    assert tokenizer.decode(ids) == text


def test_special_tokens_missing_from_vocab_get_the_next_ids():
    vocab, merges = small_vocab()
    tokenizer = Tokenizer(dict(vocab), list(merges), ["<x>", ENDOFTEXT, "<y>"])
    base = max(vocab) + 1
    assert tokenizer.encode("<y><x><|endoftext|>") == [base + 1, base, 0]
    assert tokenizer.decode([base, base + 1]) == "<x><y>"


# -- encode_iterable ---------------------------------------------------------------------------------

# Tokenizers for the round-trip properties, by name (hypothesis reports the name).
TOKENIZERS = {
    "gpt2": lambda: gpt2_tokenizer(True),
    "small": lambda: small_tokenizer(()),
    "small, nested specials": lambda: small_tokenizer((ENDOFTEXT, ENDOFTEXT * 2)),
    "small, spaced special": lambda: small_tokenizer((SPACED_SPECIAL, ENDOFTEXT)),
}


def cut(text: str, points: list[int]) -> list[str]:
    points = sorted(points)
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]


# encode_iterable holds text back until it has a block of it (64K characters in bpestore today),
# and only then looks for a place to cut. To make it cut where a test wants, the chunk that ends
# there is glued to a filler longer than a block. test_encode_iterable_cuts_after_one_filler checks
# that this keeps working, so that the tests below never pass by never cutting.
FILLER = "the cat sat on the mat, " * 3000  # 72,000 characters


def test_encode_iterable_self_overlapping_special_token_with_spaces():
    """Blocks must not be cut inside a special token, even one that overlaps itself: the special
    tokens are found from the start of the text, as encoding finds them."""
    vocab, merges = small_vocab()
    tokenizer = Tokenizer(dict(vocab), list(merges), ["  "])
    text = " w" * 10_000 + "x      bcd"
    expected = reference_encode(text, vocab, merges, ["  "])
    assert list(tokenizer.encode_iterable([text])) == expected
    assert tokenizer.encode(text) == expected


def test_encode_iterable_cuts_after_one_filler():
    consumed = []

    def chunks():
        for i in range(4):
            consumed.append(i)
            yield FILLER

    ids = TOKENIZERS["gpt2"]().encode_iterable(chunks())
    next(ids)
    assert consumed == [0], "no ids after one FILLER: make FILLER longer than encode_iterable's block"


@st.composite
def streams(draw, text_strategy=texts(max_pieces=20)):
    """Pieces of awkward text, each as a list of chunks: the first chunk ends at an arbitrary point
    (inside a special token, a word, a run of spaces...), where the tokenizer will look for a safe
    cut once :func:`glue_fillers` has put a FILLER before it; the rest of the piece follows in small
    chunks (empty ones included) that it must gather."""
    groups = []
    for piece in draw(st.lists(text_strategy, min_size=1, max_size=3)):
        # Often at or next to the edge of something that looks like a special token.
        edges = [i + d for i, c in enumerate(piece) for d in (0, 1) if c in "<>"]
        point = draw(st.sampled_from(edges) if edges and draw(st.booleans()) else st.integers(0, len(piece)))
        rest = piece[point:]
        groups.append([piece[:point], *cut(rest, draw(st.lists(st.integers(0, len(rest)), max_size=4)))])
    return groups


def glue_fillers(groups: list[list[str]]) -> list[str]:
    return [chunk for first, *rest in groups for chunk in (FILLER + first, *rest)]


@settings(max_examples=examples(100), deadline=None)
@given(groups=streams(), tokenizer_name=st.sampled_from(list(TOKENIZERS)))
def test_encode_iterable_any_cutting(groups, tokenizer_name):
    tokenizer = TOKENIZERS[tokenizer_name]()
    chunks = glue_fillers(groups)
    assert list(tokenizer.encode_iterable(iter(chunks))) == tokenizer.encode("".join(chunks))


@settings(max_examples=examples(50), deadline=None)
@given(groups=streams(st.text(st.sampled_from("x y\n"), max_size=40)))
def test_encode_iterable_self_overlapping_special_tokens(groups):
    """Special tokens with spaces that overlap themselves ("x x x" in "x x x x x"): whether a space
    lies inside one depends on where matching started, so a cut needs the whole text's matches."""
    vocab, merges = small_vocab()
    special_tokens = ["x x x", "y x"]
    tokenizer = small_tokenizer(tuple(special_tokens))
    chunks = glue_fillers(groups)
    text = "".join(chunks)
    tail = text[-200:]  # the reference is slow; the fillers hold nothing special anyway
    assert tokenizer.encode(tail) == reference_encode(tail, vocab, merges, special_tokens)
    assert list(tokenizer.encode_iterable(iter(chunks))) == tokenizer.encode(text)


@pytest.mark.parametrize("tokenizer_name", ["small, nested specials", "small, spaced special"])
@pytest.mark.parametrize("whitespace", ["  ", "\n ", "\t ", " \u3000 ", "\n\n  "])
def test_encode_iterable_whitespace_before_a_special_token(tokenizer_name, whitespace):
    """A run of whitespace right before a special token ends its piece of text, and so is one
    pre-token however it ends: a space in it is no place to cut, although a non-space follows."""
    tokenizer = TOKENIZERS[tokenizer_name]()
    for special in tokenizer.special_tokens:
        for after in range(len(max(tokenizer.special_tokens, key=len)) + 2):
            chunks = [FILLER + "a" + whitespace + special + "b" * after, " and more"]
            expected = tokenizer.encode("".join(chunks))
            assert list(tokenizer.encode_iterable(chunks)) == expected, (special, after)


@pytest.fixture(scope="module")
def long_text() -> str:
    """About 300K characters of awkward text: longer than encode_iterable's own blocks."""
    return random_text(random.Random(11), 300_000, assigned_only=True)  # tiktoken checks it too


@pytest.mark.parametrize("tokenizer_name", list(TOKENIZERS))
def test_encode_iterable_long_text(long_text, tokenizer_name):
    tokenizer = TOKENIZERS[tokenizer_name]()
    expected = tokenizer.encode(long_text)
    rng = random.Random(tokenizer_name)
    cuttings = {
        "characters": list(long_text),
        "lines": long_text.splitlines(keepends=True),
        "random": cut(long_text, [rng.randrange(len(long_text)) for _ in range(500)]),
        "large": cut(long_text, [rng.randrange(len(long_text)) for _ in range(3)]),
    }
    for name, chunks in cuttings.items():
        assert list(tokenizer.encode_iterable(chunks)) == expected, name


def test_encode_iterable_lines_of_a_file(tmp_path, long_text):
    text = read_text(shared_file("fixtures", "tinystories_sample.txt")) + long_text + "\r\nlast line, no newline"
    path = tmp_path / "text.txt"
    path.write_bytes(text.encode("utf-8"))
    with open(path, encoding="utf-8", newline="") as file:  # newline="": lines exactly as stored
        ids = list(gpt2_tokenizer(True).encode_iterable(file))
    assert ids == tiktoken_ids(text, True)


# -- memory --------------------------------------------------------------------------------------

MEMORY_SCRIPT = textwrap.dedent(
    """
    import json, resource, sys
    from bpestore import Tokenizer

    vocab_path, merges_path, text_path, mode = sys.argv[1:]

    def address_space():
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024

    tokenizer = Tokenizer.from_files(vocab_path, merges_path, ["<|endoftext|>"])
    file = open(text_path, encoding="utf-8", newline="")
    before = address_space()
    resource.setrlimit(resource.RLIMIT_AS, (before + 1_000_000, resource.getrlimit(resource.RLIMIT_AS)[1]))
    count = 0
    try:
        if mode == "iterable":
            for _ in tokenizer.encode_iterable(file):
                count += 1
        else:  # the whole file at once: must not fit, or the limit proves nothing
            count = len(tokenizer.encode(file.read()))
    except MemoryError:
        print(json.dumps({"memory_error": True, "count": count, "before": before}))
    else:
        print(json.dumps({"memory_error": False, "count": count, "before": before, "after": address_space()}))
    """
)


def run_under_memory_limit(path: Path, mode: str) -> dict:
    result = subprocess.run(
        [
            sys.executable, "-c", MEMORY_SCRIPT,
            str(shared_file("fixtures", "gpt2_vocab.json")), str(shared_file("fixtures", "gpt2_merges.txt")), str(path), mode,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def five_megabytes_of(source: Path, target: Path) -> str:
    """Repeat ``source`` to 5 MB, cut after a newline, into ``target``; returns the text."""
    data = source.read_bytes()
    data = (data * (PREFIX_BYTES // len(data) + 1))[:PREFIX_BYTES]
    data = data[: data.rfind(b"\n") + 1]
    target.write_bytes(data)
    return data.decode("utf-8")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs RLIMIT_AS and /proc")
@pytest.mark.parametrize(
    "source", [("fixtures", "tinystories_sample.txt"), ("fixtures", "corpus.en"), ("corpora", "tinystories_800K.txt")], ids=lambda s: s[1]
)
@pytest.mark.slow
def test_encode_iterable_memory(tmp_path, source):
    """CS336's check: encoding a 5 MB file line by line takes at most 1 MB more address space."""
    path = tmp_path / "five_megabytes.txt"
    text = five_megabytes_of(shared_file(*source), path)
    expected_count = len(tiktoken_ids(text, True))
    control = run_under_memory_limit(path, "whole")
    assert control["memory_error"], f"encoding the whole 5 MB at once fit in the limit: it is not tight ({control})"
    result = run_under_memory_limit(path, "iterable")
    assert not result["memory_error"], f"out of memory after {result['count']} of {expected_count} ids"
    assert result["count"] == expected_count


# -- decoding --------------------------------------------------------------------------------------


@settings(max_examples=examples(100), deadline=None)
@given(text=texts(), tokenizer_name=st.sampled_from(list(TOKENIZERS)))
def test_decode_inverts_encode(text, tokenizer_name):
    tokenizer = TOKENIZERS[tokenizer_name]()
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_decode_fixture_texts():
    for name in FIXTURE_TEXTS:
        text = read_text(shared_file("fixtures", name))
        assert gpt2_tokenizer(True).decode(tiktoken_ids(text, True)) == text, name


@pytest.mark.parametrize("bad_id", [50257, 10**9, -1])
def test_decode_unknown_id(bad_id):
    tokenizer = gpt2_tokenizer(True)
    valid = tiktoken_ids("hello world", True)
    with pytest.raises(ValueError, match=rf"(?<![\d-]){bad_id}(?!\d)"):
        tokenizer.decode([*valid, bad_id, *valid])


def test_decode_split_multibyte_character():
    """Bytes that do not form UTF-8 decode as Python's errors="replace" does, to U+FFFD."""
    vocab, _ = gpt2_vocab_and_merges()
    byte_id = {token: token_id for token_id, token in vocab.items() if len(token) == 1}
    tokenizer = gpt2_tokenizer(True)
    for char in ["é", "中", "😀"]:
        ids = [byte_id[bytes([b])] for b in char.encode("utf-8")]
        assert tokenizer.decode(ids) == char
        for part in [ids[:-1], ids[1:], [*tiktoken_ids("ab", True), ids[0], *tiktoken_ids(" cd", True)]]:
            expected = b"".join(vocab[i] for i in part).decode("utf-8", errors="replace")
            assert "\ufffd" in expected
            assert tokenizer.decode(part) == expected


@settings(max_examples=examples(60), deadline=None)
@given(
    size=st.sampled_from([3, 40, 5000]),
    wanted=st.lists(st.integers(0, 4999), max_size=24),
    absent=st.integers(0, 2),
    twice=st.integers(0, 3),
    seed=st.integers(0, 2**32 - 1),
)
def test_special_tokens_are_found_in_the_vocab_wherever_they_are(size, wanted, absent, twice, seed):
    """``ids_of`` (the ids of a model's special and added tokens, found by the engine) gives, for
    tokens anywhere in the vocab and ids in any order, the first id the dict holds each under
    (a token may be there twice in a file being read, which its reader then refuses)."""
    from bpestore.model import ids_of

    shuffled = random.Random(seed)
    ids = shuffled.sample(range(10 * size), size + twice)  # (sparse ids, in no order)
    positions = list(range(size)) + [shuffled.randrange(size) for _ in range(twice)]
    vocab = {token_id: f"<t{position}>".encode() for position, token_id in zip(positions, ids)}
    vocab[ids[0]] = b"<" + b"long" * 100 + b">"  # (longer than 255 bytes)
    tokens = [f"<t{position % size}>".encode() for position in wanted] + [f"<absent{n}>".encode() for n in range(absent)]
    tokens += [b"<" + b"long" * 100 + b">"]
    shuffled.shuffle(tokens)
    first: dict[bytes, int] = {}
    for token_id, token in vocab.items():
        first.setdefault(token, token_id)
    assert ids_of(vocab, tokens) == {token: first[token] for token in tokens if token in first}
