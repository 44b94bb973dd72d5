"""The Rust encoder (``bpestore._engine.Encoder``) against the reference and against tiktoken.

* differential property tests against ``tests/reference.py``'s ``reference_encode`` (GPT-2's
  ``bpe()``, the pair rule) on vocabularies trained by ``reference_train`` at several sizes, with
  random Unicode from every script and special tokens anywhere;
* the token rule against tiktoken (its rule by definition) on the same vocabularies, and both rules
  on generated vocabularies where they disagree;
* streams: the same ids however the text is cut, special tokens split across pieces;
* tiktoken parity with GPT-2, cl100k_base and o200k_base on every fixture and a sample of each
  corpus;
* files to ``.npy`` on several threads, batches, decoding and its errors.
"""

from __future__ import annotations

import base64
import gzip
import os
import random
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpestore import _engine
from bpestore.errors import CorpusDecodeError
from gpt2_tiktoken import ENDOFTEXT, ENDOFTEXT_ID, R50K_PATTERN, gpt2_encoding, gpt2_vocab_and_merges
from reference import GPT2_PATTERN, reference_encode, reference_train
from strategies import SPECIAL_TOKEN_SETS, random_text, texts

tiktoken = pytest.importorskip("tiktoken")

from bpestore import Tokenizer
from bpestore.pretokenize import CL100K_PATTERN, O200K_PATTERN
from tiers import examples

SHARED = Path(os.environ.get("BPESTORE_SHARED", Path(__file__).resolve().parent.parent.parent / "shared"))
VOCAB_SIZES = [300, 420, 600]
TRAINING_SPECIALS = ["<|endoftext|>", "<| sep |>"]

PROPERTY = settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------- vocabularies


@lru_cache(maxsize=None)
def trained(vocab_size: int) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """A vocabulary trained by the reference on generated text (special tokens at ids 0, 1)."""
    text = random_text(random.Random(vocab_size), 6000)
    return reference_train(text, vocab_size, TRAINING_SPECIALS)


def special_ids(vocab: dict[int, bytes], specials: list[str]) -> dict[str, int]:
    """The ids the Tokenizer gives: a special token's id in the vocab, else the next free ids."""
    by_bytes = {token: token_id for token_id, token in sorted(vocab.items(), reverse=True)}
    ids, next_id = {}, max(vocab) + 1
    for token in dict.fromkeys(specials):
        if token.encode() in by_bytes:
            ids[token] = by_bytes[token.encode()]
        else:
            ids[token], next_id = next_id, next_id + 1
    return ids


def engine(vocab, merges, specials, rule="pair", pattern=GPT2_PATTERN, **options) -> _engine.Encoder:
    return _engine.Encoder(vocab, merges, special_ids(vocab, specials), pattern, rule, **options)


def tiktoken_of(vocab: dict[int, bytes], specials: list[str], pattern: str = R50K_PATTERN, name="t"):
    """tiktoken over ``vocab`` (rank = id); special tokens that are in the vocab are kept out of
    the mergeable ranks (their pieces never reach BPE whole with these patterns)."""
    ids = special_ids(vocab, specials)
    ranks = {token: token_id for token_id, token in vocab.items() if token_id not in ids.values()}
    return tiktoken.Encoding(name=name, pat_str=pattern, mergeable_ranks=ranks, special_tokens=ids)


def disagreeing_vocab(seed: int) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Merges over "abc " listed in random order and ids shuffled: the pair and token rules then
    disagree on many pieces."""
    rng = random.Random(seed)
    tokens = [bytes([b]) for b in range(256)] + [b" a", b" b"]  # (tokens no merge makes)
    pool = [b"a", b"b", b"c", b" a", b" b"]
    known = set(tokens)
    merges = []
    for _ in range(60):
        left, right = rng.choice(pool), rng.choice(pool)
        if len(left + right) > 8 or (left, right) in merges:  # (each merge once, as a model has them)
            continue
        if left + right not in known:
            known.add(left + right)
            tokens.append(left + right)
            pool.append(left + right)
        merges.append((left, right))
    rng.shuffle(merges)
    ids = list(range(len(tokens)))
    rng.shuffle(ids)
    return dict(zip(ids, tokens)), merges


# ---------------------------------------------------------------- differential: the reference


@pytest.mark.parametrize("vocab_size", VOCAB_SIZES)
@PROPERTY
@given(text=texts(), specials=st.sampled_from(SPECIAL_TOKEN_SETS))
def test_pair_rule_equals_the_reference(vocab_size, text, specials):
    vocab, merges = trained(vocab_size)
    expected = reference_encode(text, vocab, merges, specials)
    encoder = engine(vocab, merges, specials)
    assert encoder.encode(text) == expected
    assert encoder.encode(text) == expected  # again, from the cache
    assert np.frombuffer(encoder.encode_to_buffer(text), dtype=np.uint32).tolist() == expected
    assert encoder.decode_bytes(expected) == text.encode("utf-8")


@pytest.mark.parametrize("vocab_size", VOCAB_SIZES)
@PROPERTY
@given(text=texts(assigned_only=True), specials=st.sampled_from(SPECIAL_TOKEN_SETS))
def test_token_rule_equals_tiktoken(vocab_size, text, specials):
    vocab, merges = trained(vocab_size)
    expected = tiktoken_of(vocab, specials).encode(text, allowed_special="all")
    assert engine(vocab, merges, specials, rule="token").encode(text) == expected


@pytest.mark.parametrize("seed", range(6))
@settings(max_examples=examples(60), deadline=None)
@given(text=st.text(st.sampled_from("abc  \n"), max_size=80))
def test_both_rules_where_they_disagree(seed, text):
    vocab, merges = disagreeing_vocab(seed)
    assert engine(vocab, merges, []).encode(text) == reference_encode(text, vocab, merges, [])
    assert engine(vocab, merges, [], rule="token").encode(text) == tiktoken_of(vocab, []).encode(text)


def test_the_generated_vocabularies_make_the_rules_disagree():
    text = " ".join("".join(random.Random(i).choices("abc", k=12)) for i in range(200))
    differ = 0
    for seed in range(6):
        vocab, merges = disagreeing_vocab(seed)
        differ += engine(vocab, merges, []).encode(text) != engine(vocab, merges, [], rule="token").encode(text)
    assert differ >= 4


@PROPERTY
@given(text=texts(), specials=st.sampled_from(SPECIAL_TOKEN_SETS), data=st.data())
def test_allowed_special_encodes_the_others_as_text(text, specials, data):
    vocab, merges = trained(VOCAB_SIZES[0])
    allowed = data.draw(st.sets(st.sampled_from(specials))) if specials else set()
    expected = reference_encode(text, vocab, merges, sorted(allowed, key=specials.index))
    # The reference numbers the special tokens missing from the vocab among the allowed ones
    # only; the encoder's ids are those of all its special tokens.
    ids, reference_ids = special_ids(vocab, specials), special_ids(vocab, sorted(allowed, key=specials.index))
    relabel = {reference_ids[t]: ids[t] for t in allowed}
    expected = [relabel.get(i, i) if i > max(vocab) else i for i in expected]
    encoder = engine(vocab, merges, specials)
    assert encoder.encode(text, allowed_special=allowed) == expected
    if not allowed:
        assert encoder.encode(text, allowed_special=set()) == reference_encode(text, vocab, merges, [])
    assert encoder.encode(text, allowed_special="all") == encoder.encode(text)


# ---------------------------------------------------------------- streams


def feed_all(encoder, pieces, block_bytes):
    stream = encoder.stream(block_bytes=block_bytes)
    ids = []
    for piece in pieces:
        ids.extend(stream.feed(piece))
    ids.extend(stream.finish())
    return ids


@PROPERTY
@given(text=texts(), specials=st.sampled_from(SPECIAL_TOKEN_SETS), data=st.data())
def test_a_stream_gives_the_ids_of_the_whole_text_however_cut(text, specials, data):
    vocab, merges = trained(VOCAB_SIZES[1])
    encoder = engine(vocab, merges, specials)
    whole = encoder.encode(text)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=12)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    block = data.draw(st.integers(1, 64))
    assert feed_all(encoder, pieces, block) == whole


@settings(max_examples=examples(25), deadline=None)
@given(text=texts(max_pieces=12), specials=st.sampled_from(SPECIAL_TOKEN_SETS))
def test_a_stream_cut_at_every_position(text, specials):
    vocab, merges = trained(VOCAB_SIZES[0])
    encoder = engine(vocab, merges, specials)
    whole = encoder.encode(text)
    for cut in range(len(text) + 1):
        assert feed_all(encoder, [text[:cut], text[cut:]], 1) == whole
    assert feed_all(encoder, list(text), 1) == whole  # one character at a time


# ---------------------------------------------------------------- tiktoken parity


def shared_texts() -> list[Path]:
    fixtures = sorted(p for p in (SHARED / "fixtures").glob("*") if p.suffix in (".txt", ".en"))
    corpora = sorted((SHARED / "corpora").glob("*.txt"))
    return fixtures + corpora


def sample(path: Path, limit: int = 400_000) -> str:
    with open(path, "rb") as file:
        return file.read(limit).decode("utf-8", errors="ignore")


@lru_cache(maxsize=None)
def tiktoken_file_ranks(name: str) -> dict[bytes, int]:
    bpe_openai = pytest.importorskip("bpe_openai")
    path = Path(bpe_openai.__file__).parent / "data" / f"{name}.tiktoken.gz"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    ranks = {}
    with gzip.open(path, "rt") as file:
        for line in file:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


@lru_cache(maxsize=None)
def openai_pair(name: str):
    """tiktoken's Encoding and the engine for cl100k_base or o200k_base (token rule)."""
    ranks = tiktoken_file_ranks(name)
    pattern = {"cl100k_base": CL100K_PATTERN, "o200k_base": O200K_PATTERN}[name]
    special = {ENDOFTEXT: max(ranks.values()) + 1}
    encoding = tiktoken.Encoding(name=name, pat_str=pattern, mergeable_ranks=ranks, special_tokens=special)
    encoder = _engine.Encoder({i: t for t, i in ranks.items()}, [], special, pattern, "token")
    return encoding, encoder


@pytest.mark.parametrize("path", shared_texts(), ids=lambda p: p.name)
def test_gpt2_ids_equal_tiktokens_on_the_shared_texts(path):
    vocab, merges = gpt2_vocab_and_merges()
    text = sample(path)
    expected = gpt2_encoding().encode(text, allowed_special="all")
    assert gpt2_engine().encode(text) == expected
    # the token rule on GPT-2 (a consistent vocabulary) gives the same
    assert gpt2_engine("token").encode(text) == expected


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("path", shared_texts(), ids=lambda p: p.name)
def test_openai_vocabularies_equal_tiktoken_on_the_shared_texts(name, path):
    encoding, encoder = openai_pair(name)
    text = sample(path, 150_000)
    assert encoder.encode(text) == encoding.encode(text, allowed_special="all")


# Letters of many scripts (code point ranges), for words that are mostly not whole tokens: the
# token rule then merges them from their bytes (one to four per character).
SCRIPT_LETTERS = [
    (0x61, 0x7A), (0xE0, 0xFF), (0x100, 0x17F), (0x3B1, 0x3C9), (0x430, 0x44F), (0x531, 0x556),
    (0x5D0, 0x5EA), (0x627, 0x64A), (0x915, 0x939), (0x995, 0x9B9), (0xB95, 0xBB9), (0xE01, 0xE2E),
    (0x10D0, 0x10F0), (0x1200, 0x1248), (0x3041, 0x3096), (0x30A1, 0x30FA), (0x4E00, 0x9FFF),
    (0xAC00, 0xD7A3), (0x1F600, 0x1F64F),
]


@st.composite
def script_words(draw: st.DrawFn) -> str:
    """Words of one to thirty letters of one script, a sentence of them; some words repeat a
    letter or two (runs, where the leftmost of equal merges matters) and some are long enough
    for the heap path (over 48 bytes)."""
    words = []
    for _ in range(draw(st.integers(1, 12))):
        low, high = draw(st.sampled_from(SCRIPT_LETTERS))
        letters = st.integers(low, high).map(chr)
        if draw(st.booleans()):
            word = "".join(draw(st.lists(letters, min_size=1, max_size=30)))
        else:
            unit = "".join(draw(st.lists(letters, min_size=1, max_size=2)))
            word = unit * draw(st.integers(1, 30))
        words.append(word)
    separators = st.sampled_from([" ", "  ", ", ", ". ", "\n", "", "'s ", " 42 "])
    return "".join(word + draw(separators) for word in words)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_openai_vocabularies_equal_tiktoken_on_words_of_every_script(name):
    """The token rule's merge of pieces that are not tokens (the cold path: first merges from an
    array of byte pairs, joins looked up as slices of the piece) against tiktoken, on an encoder
    whose cache holds one piece (almost every piece merged afresh) and on one whose cache holds
    earlier examples."""
    encoding, encoder = openai_pair(name)
    ranks = tiktoken_file_ranks(name)
    uncached = _engine.Encoder({i: t for t, i in ranks.items()}, [], {ENDOFTEXT: max(ranks.values()) + 1},
                               encoding._pat_str, "token", 1)

    @settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(text=script_words())
    def check(text):
        expected = encoding.encode(text, allowed_special="all")
        assert uncached.encode(text) == expected
        assert encoder.encode(text) == expected

    check()


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_megabytes_of_new_words_equal_tiktoken(name):
    """A text long enough that a fresh encoder makes room in its cache before it (a megabyte or
    more), of more distinct words than the room it makes, so that its tables also grow past it:
    words of letters from every script of tests/data/multilingual_scripts.txt, each new or drawn
    again from those before, as words recur in running text; then encoded again, from the
    cache."""
    encoding, _ = openai_pair(name)
    ranks = tiktoken_file_ranks(name)
    fresh = _engine.Encoder({i: t for t, i in ranks.items()}, [], {ENDOFTEXT: max(ranks.values()) + 1},
                            encoding._pat_str, "token")
    sample_text = (Path(__file__).parent / "data" / "multilingual_scripts.txt").read_text(encoding="utf-8")
    letters = sorted({c for c in sample_text if not c.isspace()})
    rng = random.Random(42)
    words: list[str] = []
    parts: list[str] = []
    size = 0
    while size < 2_500_000:
        if words and rng.random() < 0.3:
            word = rng.choice(words)
        else:
            word = "".join(rng.choices(letters, k=rng.randint(1, 8)))
            words.append(word)
        parts.append(word + rng.choice(" \n, .  "))
        size += len(parts[-1].encode())
    text = "".join(parts)
    assert len(text.encode()) > 2 * 2**20 and len(words) > 100_000
    expected = encoding.encode(text, allowed_special="all")
    assert fresh.encode(text) == expected
    # Again, every piece from the cache: most with more ids than a slot holds, between others
    # with theirs in the slot, in the same batches.
    assert fresh.encode(text) == expected
    assert np.frombuffer(fresh.encode_to_buffer(text), dtype=np.uint32).tolist() == expected


@settings(max_examples=examples(150), deadline=None)
@given(text=texts(assigned_only=True, max_pieces=40))
def test_gpt2_equals_tiktoken_on_nasty_text(text):
    assert gpt2_engine().encode(text) == gpt2_encoding().encode(text, allowed_special="all")


def test_pathological_pieces_equal_tiktoken():
    text = "a" * 20_000 + " " + "".join(random.Random(0).choices([chr(c) for c in range(33, 127)], k=20_000))
    assert gpt2_engine().encode(text) == gpt2_encoding().encode(text)
    assert gpt2_engine("token").encode(text) == gpt2_encoding().encode(text)


@lru_cache(maxsize=None)
def gpt2_engine(rule: str = "pair") -> _engine.Encoder:
    vocab, merges = gpt2_vocab_and_merges()
    ordinary = {i: t for i, t in vocab.items() if i != ENDOFTEXT_ID}
    return _engine.Encoder(ordinary, merges, {ENDOFTEXT: ENDOFTEXT_ID}, GPT2_PATTERN, rule)


# ---------------------------------------------------------------- batches, files, decoding, errors


def test_a_batch_on_several_threads_equals_one_by_one():
    text = sample(SHARED / "fixtures" / "corpus.en", 200_000)
    docs = text.split("<|endoftext|>")
    one_by_one = [gpt2_engine().encode(doc) for doc in docs]
    for threads in (None, 1, 2, 5):
        assert gpt2_engine().encode_batch(docs, num_threads=threads) == one_by_one
    assert gpt2_engine().encode_batch([]) == []
    with pytest.raises(ValueError):
        gpt2_engine().encode_batch(docs, num_threads=0)


@lru_cache(maxsize=1)
def big_text() -> str:
    """Text of a few chunks of the file encoder (chunks are about 1 MB)."""
    return random_text(random.Random(2), 1_600_000)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_file_becomes_the_npy_of_its_ids(tmp_path, threads):
    text = big_text()
    source = tmp_path / "corpus.txt"
    source.write_text(text, encoding="utf-8")
    output = tmp_path / "ids.npy"
    done = []
    vocab, merges = trained(VOCAB_SIZES[2])
    encoder = engine(vocab, merges, ["<|endoftext|>"])
    count = encoder.encode_file_to_npy(str(source), str(output), threads=threads, progress=done.append)
    ids = np.load(output)
    assert ids.dtype == np.uint16 and count == len(ids)
    assert ids.tolist() == encoder.encode(text)
    assert sum(done) == source.stat().st_size
    assert not list(tmp_path.glob(".ids.npy.*.partial"))


def test_invalid_utf8_in_a_file_names_the_first_bad_byte(tmp_path):
    data = bytearray(big_text().encode("utf-8"))
    first = len(data) - 300_000  # in the second chunk or later
    while data[first] >= 0x80:  # a byte that starts a character, so the error is exactly there
        first += 1
    data[first] = 0xFF
    data[first + 200_000] = 0xC3
    source = tmp_path / "bad.txt"
    source.write_bytes(bytes(data))
    output = tmp_path / "ids.npy"
    with pytest.raises(CorpusDecodeError) as error:
        gpt2_engine().encode_file_to_npy(source, output, threads=2)
    expected = None
    try:
        bytes(data).decode("utf-8")
    except UnicodeDecodeError as decode_error:
        expected = (decode_error.start, decode_error.reason)
    assert (error.value.offset, error.value.reason) == expected
    assert error.value.path == str(source)
    assert not output.exists() and not list(tmp_path.glob(".ids.npy.*.partial"))


def test_decode_bytes_names_the_first_id_outside_the_vocabulary():
    encoder = gpt2_engine()
    assert encoder.decode_bytes(np.array([31373, 50256], dtype=np.uint32)) == b"hello<|endoftext|>"
    for bad in ([15496, 50257, 7], [-1], [2**40]):
        with pytest.raises(ValueError) as error:
            encoder.decode_bytes(bad)
        first_bad = next(i for i in bad if not (isinstance(i, int) and 0 <= i <= 50256))
        assert str(error.value) == f"id {first_bad!r} is not in the vocabulary (ids go up to 50256)"
    # Something that is no integer at all is a mistake of type, not an unknown id.
    for bad in (["x"], [7, 1.0]):
        with pytest.raises(TypeError) as error:
            encoder.decode_bytes(bad)
        assert str(error.value) == f"token ids must be integers, got {bad[-1]!r}"


def test_bad_vocabularies_and_arguments_are_value_errors():
    with pytest.raises(ValueError, match="single-byte tokens"):
        _engine.Encoder({0: b"a"}, [], {}, GPT2_PATTERN, "pair")
    bytes_vocab = {b: bytes([b]) for b in range(256)}
    with pytest.raises(ValueError, match=r"merge 0 \(b'a', b'b'\): b'ab' is not in the vocab"):
        _engine.Encoder(bytes_vocab, [(b"a", b"b")], {}, GPT2_PATTERN, "pair")
    with pytest.raises(ValueError, match="merge_rule must be 'pair' or 'token', not 'both'"):
        _engine.Encoder(bytes_vocab, [], {}, GPT2_PATTERN, "both")
    with pytest.raises(ValueError):
        _engine.Encoder(bytes_vocab, [], {}, "(unclosed", "pair")
    with pytest.raises(ValueError):
        _engine.Encoder(bytes_vocab, [], {}, GPT2_PATTERN, "pair").encode("x", allowed_special="none")


# ---------------------------------------------------------------- the cache


# Pieces that the cache packs alike unless it keeps their lengths: "a" and "a\0", runs of NUL.
PACKED_ALIKE = ["a", "a\0", "\0", "\0\0", "\0a", "a" * 15, "a" * 16, "a" * 15 + "\0", "é", "é\0"]


@pytest.mark.parametrize("cache_entries", [1, 3, 1000])
@settings(max_examples=examples(80), deadline=None)
@given(words=st.lists(st.sampled_from(PACKED_ALIKE) | texts(max_pieces=3), max_size=40))
def test_the_cache_keeps_pieces_apart_and_forgets_exactly(cache_entries, words):
    """A tiny cache starts afresh many times within one text; every answer must still be exact."""
    vocab, merges = trained(VOCAB_SIZES[1])
    text = " ".join(words)
    encoder = engine(vocab, merges, ["<|endoftext|>"], cache_entries=cache_entries)
    expected = reference_encode(text, vocab, merges, ["<|endoftext|>"])
    assert encoder.encode(text) == expected
    assert encoder.encode(text) == expected


# ---------------------------------------------------------------- the Tokenizer over the engine


def test_tokenizer_encode_batch_and_pickling():
    import pickle

    vocab, merges = trained(VOCAB_SIZES[1])
    tokenizer = Tokenizer(vocab, merges, ["<|endoftext|>", "<new>"])
    docs = [random_text(random.Random(i), 2000) + "<new>" for i in range(12)]
    expected = [reference_encode(doc, vocab, merges, ["<|endoftext|>", "<new>"]) for doc in docs]
    assert tokenizer.encode_batch(docs) == expected
    assert tokenizer.encode_batch(docs, num_threads=2) == expected
    copy = pickle.loads(pickle.dumps(tokenizer))
    assert copy.vocab == tokenizer.vocab and copy.special_ids == tokenizer.special_ids
    assert copy.encode_batch(docs, num_threads=1) == expected
    assert tokenizer.encode_to_array(docs[0]).tolist() == expected[0]
