"""Tests of bpestore.metrics (bytes per token, fertility, Rényi efficiency, vocab used) and of
``diff --corpus`` over several files.

Expected numbers are worked out here by hand from tiny distributions (whose entropies have closed
forms) or counted directly from ``Tokenizer.encode``'s ids, never taken from the code under test.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore import BPEModel, Store, Tokenizer
from bpestore.metrics import (
    Measurement,
    bytes_per_token,
    count_words,
    fertility,
    measure_counts,
    measure_file,
    measure_text,
    renyi_efficiency,
    renyi_entropy,
    vocab_used,
)
from reference import reference_pretoken_counts, split_on_specials
from strategies import texts
from tiers import examples

ENDOFTEXT = "<|endoftext|>"


def tiny_tokenizer() -> Tokenizer:
    """256 bytes, the merge h+i -> 256 and the special token 257."""
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"hi"}
    return Tokenizer.from_model(BPEModel(vocab, [(b"h", b"i")], [ENDOFTEXT]))


# -- the formulas, on distributions worked out by hand -------------------------------------------


def test_renyi_entropy_of_a_uniform_distribution_is_log_n_for_every_order():
    for alpha in (0.5, 1, 2, 2.5, 7):
        assert renyi_entropy([5, 5], alpha) == pytest.approx(math.log(2))
        assert renyi_entropy([1, 1, 1, 1], alpha) == pytest.approx(math.log(4))


def test_renyi_entropy_of_three_to_one():
    # p = (3/4, 1/4). Order 2 is minus the log of the collision probability 9/16 + 1/16 = 10/16.
    assert renyi_entropy([3, 1], 2) == pytest.approx(math.log(16 / 10))
    # Order 1 is Shannon's: -(3/4 ln 3/4 + 1/4 ln 1/4) = ln 4 - (3/4) ln 3.
    assert renyi_entropy([3, 1], 1) == pytest.approx(math.log(4) - 0.75 * math.log(3))
    # Order 2.5: (3/4)^2.5 = 9 sqrt(3) / 32 and (1/4)^2.5 = 1/32.
    assert renyi_entropy([3, 1], 2.5) == pytest.approx(math.log((9 * math.sqrt(3) + 1) / 32) / -1.5)
    # Rényi entropy falls as the order grows, and is continuous at order 1
    assert renyi_entropy([3, 1], 0.5) > renyi_entropy([3, 1], 1) > renyi_entropy([3, 1], 2) > renyi_entropy([3, 1], 2.5)
    assert renyi_entropy([3, 1], 1 + 1e-7) == pytest.approx(renyi_entropy([3, 1], 1), rel=1e-5)


def test_renyi_entropy_edges():
    assert renyi_entropy([0, 0, 7, 0]) == pytest.approx(0.0)  # one outcome: no uncertainty
    assert renyi_entropy([3, 0, 1]) == pytest.approx(renyi_entropy([3, 1]))  # zeros do not count
    assert renyi_entropy([]) is None and renyi_entropy([0, 0]) is None
    with pytest.raises(ValueError, match="alpha"):
        renyi_entropy([1, 2], 0)


def test_renyi_efficiency_is_entropy_over_log_vocab_size():
    # two of four tokens used equally often: ln 2 / ln 4 = 1/2 whatever the order
    assert renyi_efficiency([1, 1, 0, 0], 4) == pytest.approx(0.5)
    # every token of the vocabulary used equally often: 1
    assert renyi_efficiency([2, 2, 2], 3) == pytest.approx(1.0)
    assert renyi_efficiency([3, 1], 2, alpha=2) == pytest.approx(math.log(1.6) / math.log(2))
    assert renyi_efficiency([], 10) is None and renyi_efficiency([5], 1) is None


def test_simple_ratios():
    assert bytes_per_token(10, 4) == 2.5 and bytes_per_token(10, 0) is None
    assert fertility(6, 4) == 1.5 and fertility(3, 0) is None
    assert vocab_used([0, 3, 0, 1, 0], 10) == pytest.approx(0.2)


@settings(max_examples=examples(150), deadline=None)
@given(texts(), st.lists(st.integers(min_value=0, max_value=400), max_size=6))
def test_words_are_counted_once_however_the_text_is_cut(text, cuts):
    points = sorted({min(cut, len(text)) for cut in cuts})
    pieces = [text[i:j] for i, j in zip([0, *points], [*points, len(text)])]
    assert count_words(pieces) == len(text.split())


# -- measuring texts and files ---------------------------------------------------------------------


def test_measure_text_by_hand():
    # "hi hi ho": pre-tokens "hi", " hi", " ho" -> hi | ' ' hi | ' ' h o: 6 tokens for 8 bytes, 3 words
    measured = measure_text(tiny_tokenizer(), "hi hi ho")
    assert (measured.bytes, measured.words, measured.tokens) == (8, 3, 6)
    assert measured.bytes_per_token == pytest.approx(8 / 6)
    assert measured.fertility == pytest.approx(2.0)
    assert measured.distinct_tokens == 4  # 'hi', ' ', 'h', 'o'
    assert measured.vocab_used == pytest.approx(4 / 258)
    # counts 2, 2, 1, 1: p = (1/3, 1/3, 1/6, 1/6); order 2: -ln(1/9 + 1/9 + 1/36 + 1/36) = ln(18/5)
    assert measured.renyi_efficiency(2) == pytest.approx(math.log(18 / 5) / math.log(258))
    data = json.loads(json.dumps(measured.to_dict()))
    assert data["tokens"] == 6 and data["renyi_alpha"] == 2.5


def test_measure_text_counts_special_tokens_and_multibyte_characters():
    tokenizer = tiny_tokenizer()
    text = f"hi{ENDOFTEXT}é 中"
    measured = measure_text(tokenizer, text)
    ids = tokenizer.encode(text)
    assert measured.tokens == len(ids) and measured.bytes == len(text.encode())
    assert {i: int(c) for i, c in enumerate(measured.token_counts) if c} == dict(Counter(ids))
    assert measured.words == 2


def test_measure_file_equals_measure_text_across_read_blocks(tmp_path):
    tokenizer = tiny_tokenizer()
    # more than one 1 MiB read block, with words and multi-byte characters across the block edges
    text = ("hi there, 中文 hello\tworld\n" * 50_000)[: (1 << 20) + 12345]
    path = tmp_path / "big.txt"
    path.write_bytes(text.encode())
    from_file, from_text = measure_file(tokenizer, path), measure_text(tokenizer, text)
    assert (from_file.bytes, from_file.words, from_file.tokens) == (from_text.bytes, from_text.words, from_text.tokens)
    assert from_file.words == len(text.split())
    assert (from_file.token_counts == from_text.token_counts).all()


def test_combine_is_the_measurement_of_the_texts_together():
    tokenizer = tiny_tokenizer()
    parts = [measure_text(tokenizer, "hi hi "), measure_text(tokenizer, "ho\n")]
    together = Measurement.combine(parts)
    whole = measure_text(tokenizer, "hi hi ho\n")
    assert (together.bytes, together.words, together.tokens) == (whole.bytes, whole.words, whole.tokens)
    assert together.renyi_efficiency() == pytest.approx(whole.renyi_efficiency())


def test_measure_counts_by_hand():
    # "hi" x3 -> hi (1 token each); " ho" x2 -> ' ' h o (3 tokens each): 12 bytes, 9 tokens
    measured = measure_counts(tiny_tokenizer(), {b"hi": 3, b" ho": 2})
    assert (measured.bytes, measured.tokens, measured.words) == (12, 9, 0)
    assert {i: int(c) for i, c in enumerate(measured.token_counts) if c} == {256: 3, ord(" "): 2, ord("h"): 2, ord("o"): 2}
    assert measured.bytes_per_token == pytest.approx(12 / 9)
    assert measured.fertility is None  # the counts hold no words
    # pairs in any iterable, and nothing at all
    assert measure_counts(tiny_tokenizer(), [(b"hi", 3), (b" ho", 2)]).tokens == 9
    empty = measure_counts(tiny_tokenizer(), {})
    assert (empty.bytes, empty.tokens, empty.bytes_per_token, empty.renyi_efficiency()) == (0, 0, None, None)
    with pytest.raises(ValueError, match="not valid UTF-8"):
        measure_counts(tiny_tokenizer(), {b"\xff": 1})
    with pytest.raises(ValueError, match="negative"):
        measure_counts(tiny_tokenizer(), {b"hi": -1})


@settings(max_examples=examples(60), deadline=None)
@given(text=texts())
def test_measure_counts_equals_measure_text_on_the_text_without_special_tokens(gpt2_tokenizer, text):
    """A corpus measured from its pre-token counts (the reference's, special tokens left out) is
    the text measured piece by piece between its special tokens: the same bytes, tokens and count
    of every id."""
    from_counts = measure_counts(gpt2_tokenizer, reference_pretoken_counts(text, [ENDOFTEXT]))
    pieces = [piece for piece in split_on_specials(text, [ENDOFTEXT], keep=False) if piece]
    if pieces:
        from_text = Measurement.combine([measure_text(gpt2_tokenizer, piece) for piece in pieces])
        assert (from_counts.bytes, from_counts.tokens) == (from_text.bytes, from_text.tokens)
        assert (from_counts.token_counts == from_text.token_counts).all()
        assert from_counts.renyi_efficiency() == pytest.approx(from_text.renyi_efficiency())
    else:
        assert (from_counts.bytes, from_counts.tokens, int(from_counts.token_counts.sum())) == (0, 0, 0)


# -- diff on several files ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_tokenizers(tmp_path_factory):
    folder = tmp_path_factory.mktemp("metrics")
    english = folder / "en.txt"
    english.write_text("the cat sat on the mat. " * 300 + "hello world " * 100, encoding="utf-8")
    german = folder / "de.txt"
    german.write_text("Die Katze saß auf der Matte. Grüße aus München! " * 200, encoding="utf-8")
    db = folder / "store.db"
    with Store(db) as store:
        # (this text has 21 merges in it, 278 tokens with the special one: sizes it reaches)
        small, large = store.train(english, "en", [270, 278], [ENDOFTEXT], workers=1)
    return db, small, large, english, german


@pytest.fixture(scope="module")
def gpt2_tokenizer() -> Tokenizer:
    """GPT-2's 50,000 merges (from the shared fixtures; skips without them) and <|endoftext|>."""
    from conftest import shared_file

    return Tokenizer.from_files(shared_file("fixtures", "gpt2_vocab.json"), shared_file("fixtures", "gpt2_merges.txt"), [ENDOFTEXT])


def test_store_diff_measures_each_file(two_tokenizers):
    db, small, large, english, german = two_tokenizers
    with Store(db) as store:
        result = store.diff(small, large, [english, german])
        tok_a, tok_b = store.load(small), store.load(large)
    assert [row.path for row in result.files] == [str(english), str(german)]
    for row, path in zip(result.files, (english, german)):
        text = path.read_text(encoding="utf-8")
        for measured, tokenizer in ((row.a, tok_a), (row.b, tok_b)):
            ids = tokenizer.encode(text)
            assert measured.tokens == len(ids)
            assert measured.bytes == path.stat().st_size
            assert measured.words == len(text.split())
            assert measured.distinct_tokens == len(set(ids))
            assert measured.vocab_used == pytest.approx(len(set(ids)) / tokenizer.vocab_size)
    assert result.tokens_a == sum(row.a.tokens for row in result.files)
    assert result.corpus_bytes == english.stat().st_size + german.stat().st_size
    assert result.corpus == "2 files"
    data = json.loads(json.dumps(result.to_dict()))
    assert [row["a"]["tokens"] for row in data["files"]] == [row.a.tokens for row in result.files]


def test_cli_diff_takes_several_files_after_corpus(two_tokenizers):
    from test_cli import invoke, ok

    db, small, large, english, german = two_tokenizers
    data = json.loads(ok(invoke("diff", small, large, "--corpus", english, german, "--json", "--db", db)))
    with Store(db) as store:
        tok_a, tok_b = store.load(small), store.load(large)
    for row, path in zip(data["files"], (english, german)):
        text = path.read_text(encoding="utf-8")
        assert Path(row["path"]) == path
        assert row["a"]["tokens"] == len(tok_a.encode(text)) and row["b"]["tokens"] == len(tok_b.encode(text))
        assert row["a"]["fertility"] == pytest.approx(len(tok_a.encode(text)) / len(text.split()))
    # repeated --corpus is the same; the text output has a row per file and tokenizer plus totals
    again = json.loads(ok(invoke("diff", small, large, "--corpus", english, "--corpus", german, "--json", "--db", db)))
    assert again["files"] == data["files"]
    out = ok(invoke("diff", small, large, "--corpus", english, german, "--db", db))
    rows = [line.split() for line in out.splitlines() if line.startswith(("en.txt", "de.txt", "(all files)"))]
    assert [(row[0], row[1]) for row in rows[:4]] == [("en.txt", small), ("en.txt", large), ("de.txt", small), ("de.txt", large)]
    assert rows[0][4] == f"{data['files'][0]['a']['tokens']:,}"  # thousands separated, as in every table
    assert [row[2] for row in rows[4:]] == [small, large]  # "(all files)" is two words
    # files without --corpus are a usage error
    result = invoke("diff", small, large, english, "--db", db)
    assert result.exit_code == 2 and "--corpus" in result.stderr


def test_diff_totals_are_the_measurement_of_the_files_together(two_tokenizers, tmp_path):
    """The "(all files)" totals of ``diff --corpus`` come from the library (TokenizerDiff, --json),
    and equal measuring the concatenated files (which end in a newline, so that no pre-token or
    word spans two of them)."""
    from test_cli import invoke, ok

    db, small, large, english, german = two_tokenizers
    texts = ["The cat sat on the mat.\nA dog ran  away!\n" * 40, "Grüße aus München, 123 Katzen.\n" * 30, "日本語 😀 x\n"]
    paths = []
    for index, text in enumerate(texts):
        paths.append(tmp_path / f"{index}.txt")
        paths[-1].write_bytes(text.encode("utf-8"))
    data = json.loads(ok(invoke("diff", small, large, "--corpus", *paths, "--json", "--db", db)))
    with Store(db) as store:
        together = {ref: measure_text(store.load(ref), "".join(texts)).to_dict() for ref in (small, large)}
    assert data["total"]["a"] == together[small] and data["total"]["b"] == together[large]
    assert data["total"]["bytes"] == sum(path.stat().st_size for path in paths) == data["corpus_bytes"]
    assert data["total"]["words"] == len("".join(texts).split())
    # the text output prints the same totals
    out = ok(invoke("diff", small, large, "--corpus", *paths, "--db", db))
    rows = [line.split() for line in out.splitlines() if line.startswith("(all files)")]
    assert [row[5] for row in rows] == [f"{together[small]['tokens']:,}", f"{together[large]['tokens']:,}"]  # thousands separated
    assert [row[8] for row in rows] == [f"{together[ref]['renyi_efficiency']:.3f}" for ref in (small, large)]
