"""Warm tables (bpestore/encode/warm.py, crates/encode/src/warm.rs, migration 0011): a stored
tokenizer's pre-tokens whose ids were worked out when it was stored.

What must hold: a tokenizer loaded with its table gives exactly the ids of one loaded without (and
tiktoken's, for an imported cl100k_base), on any text and any number of threads; training and
imports store a table (a tiktoken-style one only from text), ``bpestore warm`` remakes or removes one; a table made for another model is
left unused and ``show`` says so; a damaged one is one clear error naming the tokenizer and how to
remove it, never used; and the engine's ``most_common`` is exactly a sort of the counts.
"""

from __future__ import annotations

import random
import sqlite3
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore import Store, Tokenizer
from bpestore.encode import warm as warming
from bpestore.engine import PretokenCounts, count_texts
from bpestore.errors import StoreError
from bpestore.pretokenize.patterns import GPT2_PATTERN
from strategies import ENDOFTEXT, random_text, texts
from test_cli import invoke, ok
from test_interop import bpe_openai_file, tiktoken_encoding
from tiers import examples

WORDS = ["the", "cat", "sat", "on", "a", "mat", "naïve", "café", "日本語", "слово", "مرحبا", "don't", "12345", "  ", "\n"]


def corpus_text(seed: int, words: int = 4000) -> str:
    rng = random.Random(seed)
    parts = []
    for i in range(words):
        word = rng.choice(WORDS)
        parts.append(word + rng.choice(["", "s", "ed", "ing"]) if word.isalpha() else word)
        parts.append(ENDOFTEXT if i % 500 == 499 else rng.choice([" ", " ", ", ", ". ", "\n"]))
    return "".join(parts)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    """A store with a tokenizer trained on a small multi-script corpus (and that corpus)."""
    directory = tmp_path_factory.mktemp("warm")
    corpus = directory / "corpus.txt"
    corpus.write_text(corpus_text(1), encoding="utf-8")
    db = directory / "store.db"
    with Store(db) as store:
        store.train(corpus, "ts", 400, [ENDOFTEXT])
    return db, corpus


def test_training_stores_the_corpus_most_frequent_pieces(trained):
    db, corpus = trained
    counts = count_texts([corpus.read_text(encoding="utf-8")], GPT2_PATTERN, [ENDOFTEXT])
    # (pre-tokens seen once are left out: this corpus has many)
    expected = counts.most_common(warming.DEFAULT_WARM_ENTRIES, 2, warming.MAX_WARM_PIECE, 2)
    assert len(expected) < len(counts.most_common(warming.DEFAULT_WARM_ENTRIES, 2, warming.MAX_WARM_PIECE))
    with Store(db) as store:
        stored = store.warm_of("ts")
    assert stored is not None and stored.source == "the training corpus's counts"
    assert stored.entries == len(expected) > 50
    tokenizer = Tokenizer.from_db(db, "ts")
    assert tokenizer.warm_entries == stored.entries
    assert stored.fingerprint == tokenizer.fingerprint
    assert Tokenizer.from_db(db, "ts", warm=False).warm_entries == 0


@settings(max_examples=examples(150), deadline=None)
@given(text=texts(), seed=st.integers(0, 3))
def test_a_warm_tokenizer_encodes_as_a_cold_one(trained, text, seed):
    db, _ = trained
    warm, cold = Tokenizer.from_db(db, "ts"), Tokenizer.from_db(db, "ts", warm=False)
    assert warm.warm_entries > 0
    text = corpus_text(seed, 50) + text  # pieces the table holds, and others
    assert warm.encode(text) == cold.encode(text)
    assert warm.encode_ordinary(text) == cold.encode_ordinary(text)
    lines = text.splitlines(keepends=True)
    assert warm.encode_batch(lines, num_threads=3) == cold.encode_batch(lines, num_threads=1)
    assert list(warm.encode_iterable(lines)) == cold.encode(text)


def test_a_pickled_tokenizer_keeps_its_table(trained):
    """Worker processes get a pickled tokenizer: it starts warm too, and encodes alike."""
    import pickle

    db, corpus = trained
    warm = Tokenizer.from_db(db, "ts")
    copy = pickle.loads(pickle.dumps(warm))
    assert copy.warm_entries == warm.warm_entries > 0
    assert pickle.loads(pickle.dumps(Tokenizer.from_db(db, "ts", warm=False))).warm_entries == 0
    text = corpus.read_text(encoding="utf-8")
    assert copy.encode(text) == Tokenizer.from_db(db, "ts", warm=False).encode(text)


def test_threads_share_one_warm_tokenizer(trained):
    """A burst of threads encoding with the same warm tokenizer at once: the same ids as one
    thread, cold."""
    db, corpus = trained
    warm = Tokenizer.from_db(db, "ts")
    cold = Tokenizer.from_db(db, "ts", warm=False)
    rng = random.Random(5)
    inputs = [corpus_text(i, 300) + random_text(rng, 200) for i in range(16)]
    expected = [cold.encode(text) for text in inputs]
    results: dict[int, list[int]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(16)

    def work(i: int) -> None:
        try:
            start.wait()
            for _ in range(5):
                results[i] = warm.encode(inputs[i])
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert [results[i] for i in range(16)] == expected


def test_an_import_is_warm_from_its_vocabulary_and_warm_remakes_from_files(tmp_path, fixture_path):
    db = tmp_path / "store.db"
    ok(invoke("import", "gpt2", fixture_path("gpt2_vocab.json"), fixture_path("gpt2_merges.txt"), "--name", "gpt2",
              "--special-token", ENDOFTEXT, "--db", db))
    with Store(db) as store:
        stored = store.warm_of("gpt2")
        model = store.load_model("gpt2")
    assert stored is not None and stored.source == "the vocabulary's whole pre-tokens"
    assert stored.entries == len(warming.from_vocab(model, 10**9).pieces) > 40_000
    assert " the".encode() in warming.from_vocab(model, 10**9).pieces
    shown = ok(invoke("show", "gpt2", "--merges", "0", "--db", db))
    assert f"warm table      {stored.entries:,} pre-tokens from the vocabulary's whole pre-tokens" in shown

    text_file = tmp_path / "text.txt"
    text_file.write_text(corpus_text(2), encoding="utf-8")
    line = ok(invoke("warm", "gpt2", text_file, "--entries", "100", "--db", db)).strip()
    assert line.startswith("gpt2@1: warm table of 100 pre-tokens from the files ") and str(text_file) in line
    text = text_file.read_text(encoding="utf-8")
    warm = Tokenizer.from_db(db, "gpt2")
    assert warm.warm_entries == 100
    assert warm.encode(text) == Tokenizer.from_db(db, "gpt2", warm=False).encode(text)

    assert ok(invoke("warm", "gpt2", "--remove", "--db", db)).strip() == "gpt2@1: warm table removed"
    assert Tokenizer.from_db(db, "gpt2").warm_entries == 0
    assert "warm table      none" in ok(invoke("show", "gpt2", "--db", db))
    # Without files, an imported tokenizer's table is its vocabulary's again.
    ok(invoke("warm", "gpt2", "--db", db))
    assert Tokenizer.from_db(db, "gpt2").warm_entries == stored.entries


def test_a_reshaped_tokenizer_is_warm_from_its_origin_corpus(tmp_path, trained):
    db, corpus = trained
    copy = tmp_path / "store.db"
    copy.write_bytes(db.read_bytes())
    text = corpus.read_text(encoding="utf-8")
    with Store(copy) as store:
        trimmed, _ = store.trim("ts", 350)
        added, _ = store.add_tokens("ts", ["<x>"])
        for ref in (trimmed, added):
            stored = store.warm_of(ref)
            assert stored is not None and stored.source == "the training corpus's counts" and stored.entries > 50, ref
            warm, cold = Tokenizer.from_db(copy, ref), Tokenizer.from_db(copy, ref, warm=False)
            assert warm.warm_entries == stored.entries
            assert warm.encode(text + "<x>") == cold.encode(text + "<x>")


def test_no_table_when_asked_for_none(tmp_path, trained):
    _, corpus = trained
    db = tmp_path / "store.db"
    ok(invoke("train", corpus, "--name", "ts", "--vocab-size", "300", "--warm-entries", "0", "--db", db, "-q"))
    with Store(db) as store:
        assert store.warm_of("ts") is None
        store.train(corpus, "ts", 300, warm_entries=7)
        assert store.warm_of("ts@2").entries == 7
        with pytest.raises(ValueError, match="warm entries must be in"):
            store.train(corpus, "ts", 300, warm_entries=-1)
        assert store.warm("ts@2", entries=0) == ("ts@2", None)
        assert store.warm_of("ts@2") is None
    assert "--warm-entries" in ok(invoke("train", "--help"))


def test_a_table_made_for_another_model_is_unused_and_shown_stale(tmp_path, trained):
    db, _ = trained
    copy = tmp_path / "store.db"
    copy.write_bytes(db.read_bytes())
    with sqlite3.connect(copy) as connection:
        connection.execute("UPDATE warm_caches SET fingerprint = '0123456789abcdef'")
    assert Tokenizer.from_db(copy, "ts").warm_entries == 0
    assert "(stale: made for another model" in ok(invoke("show", "ts", "--db", copy))
    assert ok(invoke("show", "ts", "--json", "--db", copy)).count('"stale": true') == 1


def spoiled_store(tmp_path: Path, db: Path, change) -> Path:
    copy = tmp_path / "spoiled.db"
    copy.write_bytes(db.read_bytes())
    with sqlite3.connect(copy) as connection:
        (data,) = connection.execute("SELECT data FROM warm_caches").fetchone()
        connection.execute("UPDATE warm_caches SET data = ?", (change(bytes(data)),))
    return copy


def test_a_damaged_table_is_one_clear_error_and_can_be_removed(tmp_path, trained):
    db, corpus = trained
    copy = spoiled_store(tmp_path, db, lambda data: data[:-3])
    with pytest.raises(StoreError, match=r"the warm table of ts cannot be used \(it ends at byte .*bpestore warm ts --remove"):
        Tokenizer.from_db(copy, "ts")
    result = invoke("encode", "ts", corpus, "--db", copy)
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and "warm table of ts cannot be used" in result.stderr
    assert "Traceback" not in result.stderr
    ok(invoke("warm", "ts", "--remove", "--db", copy))
    assert Tokenizer.from_db(copy, "ts").encode("the cat") == Tokenizer.from_db(db, "ts").encode("the cat")


@settings(max_examples=examples(200), deadline=None)
@given(data=st.data())
def test_spoiled_tables_are_refused_or_harmless(tmp_path_factory, trained, data):
    """Bytes of a stored table changed anywhere: loading refuses it in one StoreError, or (if it
    is still well formed and its ids still spell their pieces) every text still decodes to itself."""
    db, corpus = trained
    with Store(db) as store:
        blob = store.warm_of("ts").data
    at = data.draw(st.integers(0, len(blob) - 1))
    value = data.draw(st.integers(0, 255))
    copy = spoiled_store(tmp_path_factory.mktemp("spoiled"), db, lambda old: old[:at] + bytes([value]) + old[at + 1:])
    try:
        tokenizer = Tokenizer.from_db(copy, "ts")
    except StoreError as error:
        assert "\n" not in str(error) and "warm table of ts" in str(error)
        return
    text = corpus.read_text(encoding="utf-8")[:3000]
    assert tokenizer.decode(tokenizer.encode(text)) == text


@pytest.mark.slow  # (cl100k_base: building the table from 100,000 tokens takes a few seconds)
def test_an_imported_cl100k_is_warm_only_from_files_and_still_tiktoken(tmp_path):
    """A tiktoken-style tokenizer finds a pre-token that is a token in one lookup of its
    vocabulary: a table of those tokens only adds a lookup to each piece (a second pass 25-40%
    slower, measured), so an import stores none, and one stored so before is left unused (and
    shown so). A table from text is used, and the ids stay tiktoken's."""
    path = bpe_openai_file("cl100k_base")
    db = tmp_path / "store.db"
    ok(invoke("import", "tiktoken", path, "--name", "cl100k", "--pattern", "cl100k_base", "--db", db))
    encoding = tiktoken_encoding("cl100k_base", path, tmp_path)
    assert Tokenizer.from_db(db, "cl100k").warm_entries == 0
    assert "warm table      none (bpestore warm REF FILE... makes one)" in ok(invoke("show", "cl100k", "--merges", "0", "--db", db))
    assert ok(invoke("warm", "cl100k", "--db", db)).strip() == (
        "cl100k@1: no warm table (a table of its vocabulary would not speed this tokenizer: give FILES)"
    )
    text_file = tmp_path / "text.txt"
    text_file.write_text(corpus_text(5), encoding="utf-8")
    ok(invoke("warm", "cl100k", text_file, "--db", db))
    warm = Tokenizer.from_db(db, "cl100k")
    assert warm.warm_entries > 20
    rng = random.Random(3)
    for _ in range(20):
        text = corpus_text(rng.randrange(100), 200) + random_text(rng, 300, special_pieces=False)
        assert warm.encode(text, allowed_special=set(), disallowed_special=()) == encoding.encode(text, disallowed_special=())
    # A vocabulary table as an older bpestore stored it: unused.
    with Store(db) as store:
        model = store.load_model("cl100k")
        pieces = [token for token_id, token in sorted(model.vocab.items())[:5000] if len(token) > 1]
        store.save_warm("cl100k", warming.make(Tokenizer.from_model(model), warming.WarmSource(pieces, warming.VOCAB_SOURCE)))
    assert Tokenizer.from_db(db, "cl100k").warm_entries == 0
    assert "(unused: this tokenizer finds its whole tokens in one lookup" in ok(invoke("show", "cl100k", "--merges", "0", "--db", db))


@settings(max_examples=examples(100), deadline=None)
@given(counts=st.dictionaries(st.binary(min_size=0, max_size=70), st.integers(1, 5), max_size=60), n=st.integers(0, 70),
       lengths=st.tuples(st.integers(0, 3), st.integers(0, 70)), min_count=st.integers(1, 6))
def test_most_common_is_a_sort_of_the_counts(counts, n, lengths, min_count):
    min_len, max_len = lengths
    engine_counts = PretokenCounts.from_dict({k: v for k, v in counts.items() if k})
    eligible = [(k, v) for k, v in counts.items() if k and min_len <= len(k) <= max_len and v >= min_count]
    expected = [k for k, _ in sorted(eligible, key=lambda kv: (-kv[1], kv[0]))][:n]
    assert engine_counts.most_common(n, min_len, max_len, min_count) == expected


def test_the_command_lines_warm_table_size_is_the_librarys():
    """The command line spells its default out (reading it from the library would load the engine
    at every command's start): it must not drift from the library's."""
    from bpestore.cli import main

    defaults = {
        (name, param.name): param.default
        for name, command in main.commands.items()
        for param in command.params
        if param.name in ("warm_entries", "entries")
    }
    assert set(defaults) == {("train", "warm_entries"), ("warm", "entries")}
    assert set(defaults.values()) == {warming.DEFAULT_WARM_ENTRIES}
