"""Hugging Face's tie-break (issue 41, point 4): ``tie_break="huggingface"`` (``--tie-break
huggingface``) gives exactly the merges of HF ``tokenizers``' ``BpeTrainer`` (byte-level
pre-tokenizer, GPT-2's regex, every byte in its initial alphabet) for the same text, special tokens
and vocab size, HF being given the text cut at the special tokens (as CS336 cuts it: HF's trainer
does not cut at them itself, even when they are on the tokenizer). HF's oracle, on random corpora
in several scripts."""

from __future__ import annotations

import json
import random
import re
import tomllib

import pytest

from bpestore.engine import learn_merges
from bpestore.train.sources import count_strings
from bpestore.workflow import Store
from test_cli import assert_user_error, invoke, ok

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Tokenizer, models, pre_tokenizers, trainers  # noqa: E402

ENDOFTEXT = "<|endoftext|>"


def _byte_level_decoder() -> dict[str, int]:
    """GPT-2's bytes_to_unicode, reversed: HF's byte-level character -> its byte."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = {byte: byte for byte in kept}
    extra = 0
    for byte in range(256):
        if byte not in chars:
            chars[byte] = 256 + extra
            extra += 1
    return {chr(code): byte for byte, code in chars.items()}


BYTE_OF = _byte_level_decoder()


def hf_merges(texts: list[str], vocab_size: int, special_tokens: list[str]) -> list[tuple[bytes, bytes]]:
    """HF BpeTrainer's merges on ``texts`` cut at ``special_tokens``, as bytes."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.add_special_tokens(special_tokens)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=special_tokens, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    cut = re.compile("|".join(map(re.escape, special_tokens))) if special_tokens else None
    pieces = [piece for text in texts for piece in (cut.split(text) if cut else [text])]
    tokenizer.train_from_iterator(pieces, trainer)
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    as_pairs = (merge if isinstance(merge, list) else merge.split(" ") for merge in merges)
    return [(bytes(BYTE_OF[c] for c in left), bytes(BYTE_OF[c] for c in right)) for left, right in as_pairs]


def engine_merges(texts: list[str], vocab_size: int, special_tokens: list[str], tie_break: str = "huggingface") -> list[tuple[bytes, bytes]]:
    counts = count_strings(iter(texts), special_tokens)
    return learn_merges(counts, vocab_size - 256 - len(special_tokens), tie_break=tie_break)


# Few characters, so that counts tie often; bytes that byte-level maps out of order (controls,
# DEL, NBSP, soft hyphen), several scripts, whitespace runs, text that looks like a special token.
ALPHABETS = ["ab ", "abc  \n", "aé b", "xyz1 2.!", "ab<|e|>", "a\x00\x7f \t\u00ad\u00a0\u00ff", "ﬁé東 a\r\n", "ab'sll've ", "кот ёж  "]


@pytest.mark.parametrize("seed", range(6))
def test_the_merges_are_hf_bpetrainers_on_random_corpora(seed):
    rng = random.Random(seed)
    for _ in range(150):
        alphabet = rng.choice(ALPHABETS)
        texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80))) for _ in range(rng.randint(1, 6))]
        special_tokens = ["<|e|>"] if rng.random() < 0.5 else []
        vocab_size = 256 + len(special_tokens) + rng.randint(1, 60)
        expected = hf_merges(texts, vocab_size, special_tokens)
        assert engine_merges(texts, vocab_size, special_tokens) == expected, (texts, special_tokens, vocab_size)


def test_the_two_tie_breaks_differ_and_hf_is_deterministic():
    """The test can tell the tie-breaks apart: on this corpus CS336's merges are not HF's. HF's
    own merges are the same in five runs (its order of equal counts is total)."""
    texts = ["ab ba cd dc ab ba xy yx " * 3, "zz qq ab"]
    runs = [hf_merges(texts, 300, []) for _ in range(5)]
    assert all(run == runs[0] for run in runs)
    assert engine_merges(texts, 300, []) == runs[0]
    assert engine_merges(texts, 300, [], tie_break="cs336") != runs[0]


def test_train_tie_break_huggingface_through_the_store(tmp_path):
    """`bpestore train --tie-break huggingface`: HF's merges on the file; stored with its recipe;
    a CS336 training of the same counts is not taken as its merges (nor the other way round), and
    the recipe trains again to the same merges on an empty store."""
    text = ("the cat sat on the mat; a bat ate that hat" + ENDOFTEXT + "tab tat at ab ba ") * 7 + "ça va, café au lait"
    corpus = tmp_path / "c.txt"
    corpus.write_text(text, encoding="utf-8")
    db = tmp_path / "s.db"
    cs = ok(invoke("--db", db, "train", corpus, "--name", "cs", "--vocab-size", "320", "--special-token", ENDOFTEXT, "-q")).strip()
    hf = ok(invoke(
        "--db", db, "train", corpus, "--name", "hf", "--vocab-size", "320", "--special-token", ENDOFTEXT, "--tie-break", "huggingface", "-q",
    )).strip()
    expected = hf_merges([text], 320, [ENDOFTEXT])
    with Store(db) as store:
        assert store.load_model(hf).merges == expected
        assert store.load_model(cs).merges != expected
        assert store.info(hf).training_params["tie_break"] == "huggingface"
        assert "merges_of" not in store.info(hf).training_params
    again_cs = ok(invoke("--db", db, "train", corpus, "--name", "cs2", "--vocab-size", "320", "--special-token", ENDOFTEXT, "-q")).strip()
    with Store(db) as store:
        assert store.info(again_cs).training_params.get("merges_of") == cs  # reused, from the CS336 training only
    recipe = ok(invoke("--db", db, "show", hf, "--recipe"))
    assert tomllib.loads(recipe)["tie_break"] == "huggingface"
    path = tmp_path / "hf.toml"
    path.write_text(recipe, encoding="utf-8")
    other = tmp_path / "other.db"
    ref = ok(invoke("--db", other, "train", "--recipe", path, "--name", "x", "-q")).strip()
    with Store(other) as store:
        assert store.load_model(ref).merges == expected
    assert_user_error(invoke("--db", other, "train", "--recipe", path, "--name", "x", "--tie-break", "cs336"), "--tie-break contradicts")


def test_hf_tie_break_does_not_continue_a_base(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("ab ab ba " * 20, encoding="utf-8")
    db = tmp_path / "s.db"
    base = ok(invoke("--db", db, "train", corpus, "--name", "b", "--vocab-size", "258", "-q")).strip()
    result = invoke("--db", db, "train", corpus, "--from", base, "--name", "c", "--vocab-size", "262", "--tie-break", "huggingface")
    assert result.exit_code == 1
    assert_user_error(result, "trains from scratch: not with a base")
    with Store(db) as store:
        assert [info.ref for info in store.list()] == [base]
