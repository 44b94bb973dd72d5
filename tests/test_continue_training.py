"""Issue 15: continuing the training of a stored tokenizer (``Store.train(..., base=...)``,
``bpestore train --from``), against the reference implementation."""

from __future__ import annotations

import json
import random
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bpestore import Store
from bpestore.model import BPEModel
from reference import reference_pretoken_counts, reference_train
from strategies import ENDOFTEXT, SPECIAL_TOKEN_SETS, random_text, texts
from test_cli import invoke, ok
from test_engine_pretokenize import comparable


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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
            (ref,) = store.train(corpus, "more", vocab_size, specials, base="base@1")
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
    # a dry run counts the base's merges (replayed) and the new ones
    dry = json.loads(ok(invoke("train", corpus, "--name", "d", "--vocab-size", 340, "--from", "b@1", "--dry-run", "--json", "--db", db)))
    assert dry["merges"] == 340 - 256 and dry["reused_pretoken_counts"] is True


def test_token_rule_base_is_refused(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world")
    vocab = {i: bytes([i]) for i in range(256)}
    with Store(tmp_path / "s.db") as store:
        store.save("tik", BPEModel(vocab, [], [], merge_rule="token"))
        with pytest.raises(ValueError, match="merge rule"):
            store.train(corpus, "x", 300, base="tik")
        assert store.refs() == ["tik@1"]


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
