"""Training the tokenizers people train after CS336: another pre-tokenizer (``pattern``), the
special tokens after the merges (``special_tokens_at="end"``) and a ``min_count``.

Differential against tests/reference.py, which takes the same three options; then through the
store and the command line (the pattern is stored, shown and encoded with), and through the
formats other tools read (tiktoken and Hugging Face encode a cl100k-pattern tokenizer to the same
ids as bpestore).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpestore
from bpestore import Store, formats
from bpestore.pretokenize.patterns import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN
from bpestore.train.trainer import VocabSizeNotReachedWarning
from reference import reference_encode, reference_pretoken_counts, reference_train
from strategies import ENDOFTEXT, SPECIAL_TOKEN_SETS, texts
from test_cli import assert_user_error, invoke, ok
from tiers import examples

# A pattern of none of the engine's hand-written scanners: the general regex path.
WORDS_AND_REST = r"\p{L}+|\p{N}|[^\p{L}\p{N}]+"
PATTERNS = {"gpt2": GPT2_PATTERN, "cl100k_base": CL100K_PATTERN, "o200k_base": O200K_PATTERN, "custom": WORDS_AND_REST}


def write_corpus(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))  # bytes: "\r" reaches the trainer unchanged
    return path


@st.composite
def option_cases(draw):
    special_tokens = draw(st.sampled_from(SPECIAL_TOKEN_SETS))
    return (
        draw(texts(assigned_only=True)),  # (see test_training.py's UNICODE_NOTE)
        draw(st.sampled_from([256 + len(special_tokens), 300, 400])),
        special_tokens,
        draw(st.sampled_from(sorted(PATTERNS))),
        draw(st.sampled_from(["start", "end"])),
        draw(st.sampled_from([1, 2, 3])),
    )


@settings(max_examples=examples(100), deadline=None)
@given(option_cases())
def test_train_bpe_with_options_matches_the_reference(tmp_path_factory, case):
    text, vocab_size, special_tokens, name, special_tokens_at, min_count = case
    pattern = PATTERNS[name]
    path = write_corpus(tmp_path_factory.mktemp("corpus") / "text.txt", text)
    options = {"pattern": name if name != "custom" else pattern, "special_tokens_at": special_tokens_at, "min_count": min_count}
    counts = reference_pretoken_counts(text, special_tokens, pattern)
    if not any(count >= min_count for count in counts.values()):
        with pytest.raises(bpestore.EmptyCorpusError, match="nothing to train on"):
            bpestore.train_bpe(path, vocab_size, special_tokens, **options)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabSizeNotReachedWarning)
        got = bpestore.train_bpe(path, vocab_size, special_tokens, **options)
    expected = reference_train(
        text, vocab_size, special_tokens, pattern=pattern, special_tokens_at=special_tokens_at, min_count=min_count
    )
    assert got == expected


def test_special_tokens_at_the_end_take_the_last_ids(tmp_path):
    path = write_corpus(tmp_path / "c.txt", f"low lower lowest{ENDOFTEXT}newer newest\n" * 20)
    vocab, merges = bpestore.train_bpe(path, 268, [ENDOFTEXT, "<pad>"], special_tokens_at="end")
    assert [vocab[i] for i in range(256)] == [bytes([b]) for b in range(256)]
    assert [vocab[256 + i] for i in range(10)] == [left + right for left, right in merges]
    assert (vocab[266], vocab[267]) == (ENDOFTEXT.encode(), b"<pad>")
    assert len(vocab) == 268


def test_the_store_keeps_the_pattern_and_encodes_with_it(tmp_path):
    text = "Hello world's 12345 numbers\r\n  and   spaces\tDON'T stop " * 30
    path = write_corpus(tmp_path / "c.txt", text)
    with Store(tmp_path / "s.db") as store:
        [gpt2_ref] = store.train(path, "g", 290)
        [cl100k_ref] = store.train(path, "c", 290, [ENDOFTEXT], pattern="cl100k_base", special_tokens_at="end")
        info = store.info(cl100k_ref)
        assert info.pattern == CL100K_PATTERN
        assert info.training_params["special_tokens_at"] == "end"
        tokenizer = store.load(cl100k_ref)
        # Counted apart: counts are stored per pattern, and each tokenizer learned from its own.
        assert store.corpus_of(gpt2_ref).id != store.corpus_of(cl100k_ref).id
    vocab, merges = bpestore.train_bpe(path, 290, [ENDOFTEXT], pattern="cl100k_base", special_tokens_at="end")
    assert (tokenizer.vocab, tokenizer.merges, tokenizer.pattern) == (vocab, merges, CL100K_PATTERN)
    sample = "DON'T 12345678 stop\r\n\n  world" + ENDOFTEXT + "x"
    assert tokenizer.encode(sample) == reference_encode(sample, vocab, merges, [ENDOFTEXT], pattern=CL100K_PATTERN)


def test_min_count_trains_on_the_frequent_pretokens_and_keeps_all_counts(tmp_path):
    text = "common common common rare unusual common\n" * 3 + "once"
    path = write_corpus(tmp_path / "c.txt", text)
    with Store(tmp_path / "s.db") as store, warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabSizeNotReachedWarning)
        [pruned] = store.train(path, "p", 400, min_count=3)
        [full] = store.train(path, "f", 400)  # the same stored counts, not the pruned training's merges
        assert store.corpus_of(pruned).id == store.corpus_of(full).id
        assert store.info(pruned).training_params["min_count"] == 3
        assert store.load_model(pruned).merges == reference_train(text, 400, [], min_count=3)[1]
        assert store.load_model(full).merges == reference_train(text, 400, [])[1]
        [again] = store.train(path, "p", 400, min_count=3)  # reuses the pruned training's merges
        assert store.info(again).training_params.get("merges_of") == pruned


@pytest.mark.filterwarnings("ignore::bpestore.train.trainer.VocabSizeNotReachedWarning")
def test_asking_for_another_pattern_than_the_counts_or_the_base_is_refused(tmp_path):
    path = write_corpus(tmp_path / "c.txt", "some text to count, and more text\n" * 10)
    with Store(tmp_path / "s.db") as store:
        [base] = store.train(path, "b", 300, pattern="o200k_base")
        with pytest.raises(ValueError, match="as its base does, with o200k_base, not cl100k_base"):
            store.train(path, "c", 320, base=base, pattern="cl100k_base")
        [continued] = store.train(path, "c", 320, base=base)  # the base's pattern, by default
        assert store.info(continued).pattern == O200K_PATTERN
        corpus = store.corpus_of(base)
        with pytest.raises(ValueError, match=f"corpus {corpus.id} was counted with the pre-tokenizer o200k_base, not gpt2"):
            store.train(corpus, "d", 300, pattern="gpt2")


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("cl100k", "pattern 'cl100k' is not a known pre-tokenizer (gpt2, r50k_base, p50k_base, cl100k_base, o200k_base, llama3, qwen2, superbpe); did you mean cl100k_base?"),
        (r"(\w+)|\s+", "has 1 capture group"),
        (r"\w+", "does not cover all of the text"),
        (r"(?:a|aa)+(?=b)|.", "backtracks catastrophically"),
    ],
)
def test_a_bad_pattern_is_one_line_before_any_work(tmp_path, pattern, message):
    path = write_corpus(tmp_path / "c.txt", "text\n")
    with pytest.raises(ValueError, match=None) as raised:
        bpestore.train_bpe(path, 300, pattern=pattern)
    assert message in str(raised.value)
    result = invoke("train", path, "--name", "x", "--vocab-size", "300", "--pattern", pattern, "--db", tmp_path / "s.db")
    assert_user_error(result, message)
    assert not (tmp_path / "s.db").exists() or "x" not in ok(invoke("list", "--db", tmp_path / "s.db"))


@pytest.mark.parametrize(("argument", "value", "message"), [
    ("special_tokens_at", "middle", "special_tokens_at must be 'start' or 'end', not 'middle'"),
    ("min_count", 0, "min_count must be a positive integer, got 0"),
])
def test_bad_options_are_refused(tmp_path, argument, value, message):
    path = write_corpus(tmp_path / "c.txt", "text\n")
    with pytest.raises(ValueError, match=message):
        bpestore.train_bpe(path, 300, **{argument: value})


def test_the_command_line_trains_with_a_pattern_and_shows_it(tmp_path):
    path = write_corpus(tmp_path / "c.txt", "The cat's 2024 hats\r\nand DOGS'RE here  \n" * 40)
    db = tmp_path / "s.db"
    ref = ok(invoke(
        "train", path, "--name", "t", "--vocab-size", "330", "--pattern", "o200k_base", "--special-token", ENDOFTEXT,
        "--special-tokens-at", "end", "--min-count", "2", "-q", "--db", db,
    )).strip()
    shown = ok(invoke("show", ref, "--db", db))
    assert "o200k_base" in shown
    [listed] = json.loads(ok(invoke("list", "--json", "--db", db)))
    assert (listed["pattern"], listed["pattern_name"]) == (O200K_PATTERN, "o200k_base")
    assert listed["training_params"]["special_tokens_at"] == "end"
    vocab, merges = bpestore.train_bpe(path, 330, [ENDOFTEXT], pattern="o200k_base", special_tokens_at="end", min_count=2)
    text = "DOGS'RE 123456 cat's\r\n"
    ids = [int(word) for word in ok(invoke("encode", ref, "--db", db, input=text)).split()]
    assert ids == reference_encode(text, vocab, merges, [ENDOFTEXT], pattern=O200K_PATTERN)


def test_a_cl100k_tokenizer_encodes_alike_in_tiktoken_and_hugging_face(tmp_path):
    tiktoken = pytest.importorskip("tiktoken")
    hf_tokenizers = pytest.importorskip("tokenizers", reason="Hugging Face tokenizers is needed to check tokenizer.json exports")
    corpus = "\n".join(
        f"Line {i}: the QUICK brown fox's {i * 7919} jumps\r\n  over\tthe lazy dog's back; naïve café, 東京 {i % 13}"
        for i in range(300)
    )
    path = write_corpus(tmp_path / "c.txt", corpus)
    db = tmp_path / "s.db"
    with Store(db) as store:
        [ref] = store.train(path, "cl", 600, [ENDOFTEXT], pattern="cl100k_base", special_tokens_at="end")
        tokenizer = store.load(ref)
    ranks_path, json_path = tmp_path / "cl.tiktoken", tmp_path / "tokenizer.json"
    notes = formats.export(tokenizer, "tiktoken", ranks_path)
    assert not any("encode differently" in note for note in notes), notes
    formats.export(tokenizer, "hf", json_path)
    ranks = formats.tiktoken_bpe.read_ranks(ranks_path)
    encoding = tiktoken.Encoding("cl", pat_str=CL100K_PATTERN, mergeable_ranks=ranks, special_tokens={ENDOFTEXT: 599})
    loaded = hf_tokenizers.Tokenizer.from_file(str(json_path))

    @settings(max_examples=examples(100), deadline=None)
    @given(text=texts())
    def check(text):
        ids = tokenizer.encode(text)
        assert encoding.encode(text, allowed_special="all") == ids
        assert loaded.encode(text).ids == ids

    check()
