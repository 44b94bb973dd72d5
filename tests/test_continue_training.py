"""Issue 15: continuing the training of a stored tokenizer (``Store.train(..., base=...)``,
``bpestore train --from``), against the reference implementation."""

from __future__ import annotations

import json
import random
import re
import tempfile
import warnings
from collections import Counter
from pathlib import Path

import pytest
import regex
import tiktoken
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bpestore import Store, Tokenizer
from bpestore.model import BPEModel
from bpestore.pretokenize.patterns import CL100K_PATTERN
from bpestore.train.trainer import VocabSizeNotReachedWarning
from reference import bpe, pretokenize, reference_merges, reference_pretoken_counts, reference_train, split_on_specials
from strategies import ENDOFTEXT, SPECIAL_TOKEN_SETS, random_text, texts
from test_cli import invoke, ok
from test_engine_pretokenize import comparable
from test_interop import bpe_openai_file, fixture_text, sample_text, tiktoken_encoding
from tiers import examples


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=texts(max_pieces=40, assigned_only=True).map(comparable),
    specials=st.sampled_from(SPECIAL_TOKEN_SETS),
    extra=st.integers(0, 40),
    fraction=st.floats(0, 1),
)
def test_continuing_from_the_first_k_merges_is_the_full_training(text, specials, extra, fraction):
    assume(reference_pretoken_counts(text, specials))  # nothing to train on is refused (test_training.py)
    vocab_size = 256 + len(specials) + extra
    full_vocab, full_merges = reference_train(text, vocab_size, specials)
    k = int(fraction * len(full_merges))
    base_vocab = {i: token for i, token in full_vocab.items() if i < 256 + len(specials) + k}
    with tempfile.TemporaryDirectory() as directory:
        corpus = Path(directory) / "corpus.txt"
        corpus.write_bytes(text.encode("utf-8"))
        with Store(Path(directory) / "store.db") as store:
            store.save("base", BPEModel(base_vocab, full_merges[:k], specials))
            with warnings.catch_warnings(record=True) as caught:  # (a random text may hold fewer merges than asked for)
                warnings.simplefilter("always")
                (ref,) = store.train(corpus, "more", vocab_size, specials, base="base@1")
            short = [w for w in caught if issubclass(w.category, VocabSizeNotReachedWarning)]
            assert len(short) == (1 if len(full_merges) < extra else 0), [str(w.message) for w in caught]
            model = store.load_model(ref)
            assert store.info(ref).training_params["base"] == "base@1"
    assert model.merges == full_merges
    assert model.vocab == full_vocab


def test_ids_kept_and_new_special_tokens_next(tmp_path):
    rng = random.Random(3)
    first = tmp_path / "first.txt"
    first.write_bytes(comparable(random_text(rng, 20_000, assigned_only=True)).encode())
    second = tmp_path / "second.txt"
    domain = "domain words: tokenizer, pretokenizer, detokenizer. " * 300 + "<|pad|>"
    second.write_bytes((domain + comparable(random_text(rng, 20_000, assigned_only=True))).encode())
    with Store(tmp_path / "s.db") as store:
        (base_ref,) = store.train(first, "base", 400, [ENDOFTEXT])
        base = store.load_model(base_ref)
        with pytest.raises(ValueError, match="at least 401"):
            store.train(second, "more", 400, [ENDOFTEXT, "<|pad|>"], base=base_ref)
        (ref,) = store.train(second, "more", 450, ["<|pad|>"], base="base")  # the latest version
        model = store.load_model(ref)
    assert len(model.vocab) == 450
    assert all(model.vocab[i] == token for i, token in base.vocab.items())
    assert model.special_tokens == [ENDOFTEXT, "<|pad|>"]
    assert model.special_ids == {ENDOFTEXT: base.special_ids[ENDOFTEXT], "<|pad|>": 400}
    assert model.merges[: len(base.merges)] == base.merges
    new = model.merges[len(base.merges):]
    assert new and all(model.vocab[401 + i] == left + right for i, (left, right) in enumerate(new))
    assert b"tokenizer" in {left + right for left, right in new} | set(base.vocab.values())


def test_cli_from(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(comparable(random_text(random.Random(4), 10_000, assigned_only=True)).encode())
    db = tmp_path / "cli.db"
    ok(invoke("train", corpus, "--name", "b", "--vocab-size", 300, "-q", "--db", db))
    ref = ok(invoke("train", corpus, "--name", "c", "--vocab-size", 340, "--from", "b@1", "-q", "--db", db)).strip()
    full = ok(invoke("train", corpus, "--name", "f", "--vocab-size", 340, "-q", "--db", db)).strip()
    with Store(db) as store:
        assert store.load_model(ref).merges == store.load_model(full).merges
        assert store.info(ref).training_params["base"] == "b@1"
    assert re.search(r"^continues +b@1$", ok(invoke("show", ref, "--db", db)), re.MULTILINE)
    # list shows the lineage: a column in the table, "base" in --json (None when not continued)
    listed = {row["ref"]: row["base"] for row in json.loads(ok(invoke("list", "--json", "--db", db)))}
    assert listed == {"b@1": None, ref: "b@1", full: None}
    lines = ok(invoke("list", "--db", db)).splitlines()
    assert lines[0].split()[-1] == "CONTINUES"
    rows = {tuple(line.split()[:2]): line.split()[-1] for line in lines[2:]}
    assert rows == {("b", "1"): "-", tuple(ref.split("@")): "b@1", tuple(full.split("@")): "-"}
    # a dry run counts the base's merges (replayed) and the new ones
    dry = json.loads(ok(invoke("train", corpus, "--name", "d", "--vocab-size", 340, "--from", "b@1", "--dry-run", "--json", "--db", db)))
    assert dry["merges"] == 340 - 256 and dry["reused_pretoken_counts"] is True


# -- bases with their own merge rule and pattern (tiktoken's files) --------------------------------


def _counts(text: str, specials: list[str], pattern: str) -> Counter[bytes]:
    """The reference's pre-token counts, with any pattern."""
    counts: Counter[bytes] = Counter()
    for piece in split_on_specials(text, specials, keep=False):
        counts.update(pretokenize(piece, pattern))
    return counts


def _ranks_encoding(model: BPEModel) -> tiktoken.Encoding:
    """tiktoken's Encoding of a token-rule model: ranks = ids, the special tokens at theirs."""
    specials = set(model.special_ids.values())
    ranks = {token: token_id for token_id, token in model.vocab.items() if token_id not in specials}
    return tiktoken.Encoding(name="t", pat_str=model.pattern, mergeable_ranks=ranks, special_tokens=dict(model.special_ids))


def _expected_new_merges(base: tiktoken.Encoding, text: str, specials: list[str], pattern: str, num_merges: int):
    """The reference's merges from the pre-tokens of ``text`` (``pattern``), each first split as
    tiktoken encodes it with the base."""
    words: Counter[tuple[bytes, ...]] = Counter()
    for pretoken, count in _counts(text, specials, pattern).items():
        words[tuple(base.decode_single_token_bytes(i) for i in base._encode_single_piece(pretoken))] += count
    return reference_merges(words, num_merges)


def _token_rule_base(text: str, merges: int, rng: random.Random) -> BPEModel:
    """A tiktoken-style base: the tokens a reference training on ``text`` learns, ranked in a
    shuffled order (so that the token rule splits words unlike replaying merges would), cl100k's
    pattern, and <|endoftext|> as a special token after them."""
    vocab, _ = reference_train(text, 256 + merges, [])
    learned = list(dict.fromkeys(vocab[i] for i in sorted(vocab) if i >= 256))
    rng.shuffle(learned)
    ranks = {i: bytes([i]) for i in range(256)} | {256 + i: token for i, token in enumerate(learned)}
    return BPEModel(ranks, [], [ENDOFTEXT], CL100K_PATTERN, "token")


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base_text=texts(max_pieces=30, assigned_only=True).map(comparable),
    text=texts(max_pieces=30, assigned_only=True).map(comparable),
    base_merges=st.integers(0, 40),
    extra=st.integers(0, 40),
    seed=st.integers(0, 2**32),
)
def test_continuing_a_token_rule_base(base_text, text, base_merges, extra, seed):
    """A tiktoken-style base (token rule, cl100k's pattern) continues with its own rule and
    pattern: the new merges are the reference's on the words as tiktoken splits them with the
    base; every base token keeps its id; the result is still a tiktoken vocabulary (ranks = ids)
    and encodes every pre-token that no new token can join exactly as the base does."""
    text = text + " 123456 DON'T don't"  # where cl100k's pattern and GPT-2's differ
    base = _token_rule_base(base_text, base_merges, random.Random(seed))
    base_encoding = _ranks_encoding(base)
    vocab_size = base.vocab_size + extra
    with tempfile.TemporaryDirectory() as directory:
        corpus = Path(directory) / "corpus.txt"
        corpus.write_bytes(text.encode("utf-8"))
        with Store(Path(directory) / "store.db") as store:
            store.save("tik", base)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", VocabSizeNotReachedWarning)
                (ref,) = store.train(corpus, "more", vocab_size, base="tik")
            model = store.load_model(ref)
    new_merges = model.merges[len(base.merges):]
    assert new_merges == _expected_new_merges(base_encoding, text, [ENDOFTEXT], CL100K_PATTERN, extra)
    assert model.merge_rule == "token" and model.pattern == CL100K_PATTERN
    assert model.special_ids == base.special_ids
    assert all(model.vocab[i] == token for i, token in base.vocab.items())
    new_tokens = {token for i, token in model.vocab.items() if i not in base.vocab}
    assert new_tokens <= {left + right for left, right in new_merges}
    assert min(set(model.vocab) - set(base.vocab), default=max(base.vocab) + 1) > max(base.vocab)
    tokenizer = Tokenizer.from_model(model)
    probe = text + ENDOFTEXT + base_text
    assert tokenizer.encode(probe) == _ranks_encoding(model).encode(probe, allowed_special="all")
    for piece in regex.findall(CL100K_PATTERN, base_text + " " + text):
        if not any(token in piece.encode("utf-8") for token in new_tokens):
            assert tokenizer.encode(piece) == base_encoding.encode_ordinary(piece), piece


def test_a_pair_rule_base_with_its_own_pattern_counts_with_it(tmp_path):
    """A pair-rule base with a pattern other than GPT-2's: the corpus is counted with its pattern."""
    pattern = r"\p{L}+|\p{N}|[^\p{L}\p{N}]+"
    text = "aaa bbb 12345 12345 aaa,bbb; hello hello world 999 " * 20
    vocab, merges = reference_train("aaa bbb", 256 + 2, [])
    corpus = tmp_path / "c.txt"
    corpus.write_text(text)
    with Store(tmp_path / "s.db") as store:
        store.save("b", BPEModel(vocab, merges, [], pattern))
        (ref,) = store.train(corpus, "c", 258 + 8, base="b")
        model = store.load_model(ref)
    words: Counter[tuple[bytes, ...]] = Counter()
    ranks = {merge: rank for rank, merge in enumerate(merges)}
    for pretoken, count in _counts(text, [], pattern).items():
        words[tuple(bpe(pretoken, ranks))] += count
    assert model.pattern == pattern
    assert model.merges == merges + reference_merges(words, 8)
    assert b"12" not in {left + right for left, right in model.merges}  # digits are single pre-tokens


@pytest.fixture(scope="module")
def cl100k(tmp_path_factory):
    """cl100k_base imported into a store, and tiktoken's Encoding of it."""
    path = bpe_openai_file("cl100k_base")
    directory = tmp_path_factory.mktemp("cl100k")
    db = directory / "store.db"
    ok(invoke("import", "tiktoken", path, "--name", "cl100k", "--pattern", "cl100k_base", "--db", db))
    return db, tiktoken_encoding("cl100k_base", path, directory)


@pytest.mark.slow  # (imports cl100k_base: ~9 s)
def test_continue_cl100k_on_domain_text(cl100k, tmp_path):
    """The issue's case: an imported tiktoken tokenizer (cl100k_base) continued on domain text
    through the command line; cl100k's ids are all kept, the new tokens follow its last id."""
    db, encoding = cl100k
    domain = "Quux-frobnication of zorblax kernels: zorblaxification, frobnicated zorblaxes. 4242 " * 40
    text = domain + fixture_text("german.txt")[:20_000]
    corpus = tmp_path / "domain.txt"
    corpus.write_text(text)
    size = len(encoding._mergeable_ranks) + len(encoding._special_tokens) + 30  # not n_vocab: cl100k skips id 100256
    ref = ok(invoke("train", corpus, "--name", "domain", "--vocab-size", size, "--from", "cl100k", "-q", "--db", db)).strip()
    with Store(db) as store:
        model = store.load_model(ref)
        base = store.load_model("cl100k@1")
        assert store.info(ref).training_params["base"] == "cl100k@1"
    assert model.merge_rule == "token" and model.pattern == encoding._pat_str
    assert model.special_ids == encoding._special_tokens
    specials = set(model.special_ids.values())
    assert all(model.vocab[rank] == token for token, rank in encoding._mergeable_ranks.items())
    new_ids = sorted(set(model.vocab) - set(encoding._mergeable_ranks.values()) - specials)
    assert new_ids == list(range(encoding.max_token_value + 1, encoding.max_token_value + 1 + len(new_ids)))
    assert len(model.vocab) == size
    new_merges = model.merges[len(base.merges):]
    assert model.merges[: len(base.merges)] == base.merges
    assert new_merges == _expected_new_merges(encoding, text, list(encoding._special_tokens), encoding._pat_str, 30)
    assert any(b"zorbl" in left + right for left, right in new_merges)
    tokenizer = Tokenizer.from_model(model)
    assert tokenizer.encode(text) != encoding.encode_ordinary(text)  # the new tokens are used
    plain = fixture_text("german.txt")[20_000:40_000] + sample_text(sorted(encoding._special_tokens))
    new_tokens = [model.vocab[i] for i in new_ids]
    for piece in regex.findall(encoding._pat_str, plain):
        if not any(token in piece.encode("utf-8") for token in new_tokens):
            assert tokenizer.encode(piece) == encoding.encode_ordinary(piece), piece


def test_a_special_token_the_base_holds_as_a_token_keeps_its_id(tmp_path):
    """GPT-2's files hold <|endoftext|> as an ordinary token (id 50256): made special when
    continuing, it keeps that id instead of getting a second one."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat<|x|>the hat " * 50)
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"<|x|>"}
    with Store(tmp_path / "s.db") as store:
        store.save("b", BPEModel(vocab, []))
        (ref,) = store.train(corpus, "c", 260, ["<|x|>"], base="b")
        model = store.load_model(ref)
    assert model.special_ids == {"<|x|>": 256}
    assert len(model.vocab) == 260 and len(model.merges) == 3
    assert model.merges == reference_train("the cat<|x|>the hat " * 50, 260, ["<|x|>"])[1][:3]


@pytest.mark.slow  # (over 2 s here: the full suite's)
def test_continue_the_real_gpt2_import_on_domain_text(tmp_path, fixture_path):
    """The issue's case with GPT-2 itself: its files imported (`bpestore import gpt2`), then
    continued on a little domain text through the command line, with a special token of its own.
    GPT-2's 50,257 ids and 50,000 merges stay as they are, <|endoftext|> keeps 50256, <|pad|> gets
    50257, and the new merges are the reference's on the words first split by GPT-2's merges."""
    from gpt2_tiktoken import ENDOFTEXT_ID, gpt2_encoding, gpt2_vocab_and_merges

    gpt2_vocab, gpt2_merges = gpt2_vocab_and_merges()  # skips without the fixtures
    db = tmp_path / "store.db"
    vocab_json, merges_txt = fixture_path("gpt2_vocab.json"), fixture_path("gpt2_merges.txt")
    ok(invoke("import", "gpt2", vocab_json, merges_txt, "--name", "gpt2", "--special-token", ENDOFTEXT, "-q", "--db", db))
    domain = "Quux-frobnication of zorblax kernels: zorblaxification, frobnicated zorblaxes.<|pad|> 4242\n" * 30
    text = domain + fixture_text("german.txt")[:6_000]
    corpus = tmp_path / "domain.txt"
    corpus.write_text(text, encoding="utf-8")
    new = 30
    size = len(gpt2_vocab) + 1 + new  # <|pad|>, then the new tokens
    args = ["train", corpus, "--name", "gpt2-domain", "--vocab-size", size, "--from", "gpt2", "--special-token", "<|pad|>", "-q", "--db", db]
    ref = ok(invoke(*args)).strip()
    with Store(db) as store:
        model = store.load_model(ref)
        assert store.info(ref).training_params["base"] == "gpt2@1"
    assert model.merge_rule == "pair" and len(model.vocab) == size
    assert all(model.vocab[i] == token for i, token in gpt2_vocab.items())
    assert model.special_ids == {ENDOFTEXT: ENDOFTEXT_ID, "<|pad|>": len(gpt2_vocab)}
    assert model.merges[: len(gpt2_merges)] == gpt2_merges
    new_merges = model.merges[len(gpt2_merges):]
    first_new_id = len(gpt2_vocab) + 1
    assert [model.vocab[first_new_id + i] for i in range(new)] == [left + right for left, right in new_merges]
    # the reference: GPT-2's pre-tokens of the text, each split as GPT-2's bpe() splits it
    ranks = {merge: rank for rank, merge in enumerate(gpt2_merges)}
    words: Counter[tuple[bytes, ...]] = Counter()
    for pretoken, count in reference_pretoken_counts(text, [ENDOFTEXT, "<|pad|>"]).items():
        words[tuple(bpe(pretoken, ranks))] += count
    assert new_merges == reference_merges(words, new)
    assert any(b"zorbl" in left + right for left, right in new_merges)
    # text none of whose pre-tokens a new token can join encodes to GPT-2's ids
    tokenizer, encoding = Tokenizer.from_model(model), gpt2_encoding()
    new_tokens = [left + right for left, right in new_merges]
    for piece in regex.findall(encoding._pat_str, fixture_text("german.txt")[6_000:12_000]):
        if not any(token in piece.encode("utf-8") for token in new_tokens):
            assert tokenizer.encode(piece) == encoding.encode_ordinary(piece), piece
