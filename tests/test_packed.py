"""The packed copy of a stored tokenizer (bpestore/store/packed.py, migration 0004): its layout, that
every loader reads it, that it never goes stale, that a damaged one is one clear error, and the
upgrade from a store made at 0003 (backfilled) and the downgrade back.

The layout is read here by a small reader of its own (``read_layout``), not by the engine's.
"""

from __future__ import annotations

import pickle
import sqlite3
import struct
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore import BPEModel, Store, Tokenizer
from bpestore._engine import unpack_model, unpack_vocab
from bpestore.errors import StoreError
from bpestore.store.loader import load_model
from bpestore.store.migrate import migrations_dir
from bpestore.store.packed import pack
from tiers import examples

TRIGGERS = {f"{table}_{event}_unpacks" for table in ("vocab", "merges") for event in ("insert", "update", "delete")}


def read_layout(data: bytes) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """The layout as packed.py's docstring gives it, read with struct."""
    assert data[:8] == b"BPEPACK\x01"
    n_vocab, n_merges = struct.unpack_from("<II", data, 8)
    at = 16
    ids = struct.unpack_from(f"<{n_vocab}I", data, at)
    at += 4 * n_vocab
    lengths = struct.unpack_from(f"<{n_vocab}I", data, at)
    at += 4 * n_vocab
    merge_lengths = struct.unpack_from(f"<{2 * n_merges}I", data, at)
    at += 8 * n_merges
    vocab = {}
    for token_id, length in zip(ids, lengths):
        vocab[token_id] = data[at:at + length]
        at += length
    parts = []
    for length in merge_lengths:
        parts.append(data[at:at + length])
        at += length
    assert at == len(data)
    return vocab, list(zip(parts[::2], parts[1::2]))


def sample_model(extra: list[bytes] = ()) -> BPEModel:
    vocab = {b: bytes([b]) for b in range(256)}
    merges = [(b"t", b"h"), (b"th", b"e"), (b" ", b"the"), (b"\x00", b"\xff")]
    for left, right in merges:
        vocab[len(vocab)] = left + right
    for token in extra:
        vocab[len(vocab) + 5] = token  # sparse ids too
    return BPEModel(vocab, merges, ["<|endoftext|>", "<pad>"])


def sample_token_model() -> BPEModel:
    """:func:`sample_model`'s tokens, merged by their ranks (tiktoken's rule)."""
    model = sample_model()
    return BPEModel(model.vocab, model.merges, model.special_tokens, merge_rule="token")


def as_tuple(model: BPEModel) -> tuple:
    return model.vocab, model.merges, model.special_tokens, model.special_ids, model.pattern, model.merge_rule


def packed_rows(db: Path) -> list[tuple]:
    connection = sqlite3.connect(db)
    try:
        return connection.execute("SELECT tokenizer_id, length(data) FROM packed_models ORDER BY tokenizer_id").fetchall()
    finally:
        connection.close()


def execute(db: Path, *statements: str) -> None:
    connection = sqlite3.connect(db)
    try:
        for statement in statements:
            connection.execute(statement)
        connection.commit()
    finally:
        connection.close()


# -- the layout ------------------------------------------------------------------------------------

tokens = st.binary(min_size=0, max_size=12)


@settings(max_examples=examples(60), deadline=None)
@given(st.dictionaries(st.integers(0, 2**32 - 1), tokens, max_size=30), st.lists(st.tuples(tokens, tokens), max_size=30))
def test_the_engine_reads_what_pack_writes_as_the_layout_says(vocab, merges):
    data = pack(vocab, merges)
    assert read_layout(data) == (vocab, merges)
    assert unpack_model(data) == (vocab, merges)
    assert unpack_vocab(data) == vocab


def test_packing_refuses_what_the_layout_cannot_hold_with_one_error():
    with pytest.raises(ValueError, match="token id 4294967296 does not fit"):
        pack({2**32: b"a"}, [])
    with pytest.raises(ValueError, match="does not fit"):
        pack({-1: b"a"}, [])
    with pytest.raises(TypeError):
        pack({0: "a"}, [])  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        pack({0: b"a"}, [(b"a", "b")])  # type: ignore[list-item]


def test_the_engine_refuses_every_damaged_or_cut_copy():
    data = pack(sample_model().vocab, sample_model().merges)
    twice = bytearray(pack({1: b"a", 2: b"b"}, []))
    twice[20:24] = struct.pack("<I", 1)  # the second id becomes 1 too
    # (the vocab alone is read from a copy checked whole: a cut in its merges is refused too)
    for unpack in (unpack_model, unpack_vocab):
        for end in range(0, len(data), 7):
            with pytest.raises(ValueError, match="damaged packed data"):
                unpack(data[:end])
        with pytest.raises(ValueError, match="damaged packed data"):
            unpack(data + b"\x00")
        with pytest.raises(ValueError, match="more than one token"):
            unpack(bytes(twice))


# -- saving and loading -----------------------------------------------------------------------------


def test_every_loader_reads_the_packed_copy_and_it_equals_the_rows(tmp_path):
    db = tmp_path / "s.db"
    model = sample_model([b"\xe2\x82", b"zz"])
    with Store(db) as store:
        store.save("t", model)
    (tokenizer_id, size), = packed_rows(db)
    assert size == len(pack(model.vocab, model.merges))
    # Change the rows behind the copy's back (no triggers): every loader still gives the packed
    # model, which shows that none of them read the rows.
    execute(db, *(f"DROP TRIGGER {name}" for name in TRIGGERS), "UPDATE vocab SET token = X'7a7a7a' WHERE token = X'7a7a'")
    with Store(db) as store:
        loaded = [load_model(db, "t"), Tokenizer.from_db(db, "t").model, store.load("t").model, store.load_model("t@1")]
    for model_loaded in loaded:
        assert as_tuple(model_loaded) == as_tuple(model)
    # Without the copy, the rows are read (and now say zzz).
    execute(db, "DELETE FROM packed_models")
    assert load_model(db, "t").vocab[max(model.vocab) - 2] == b"zzz"


def test_a_token_rule_model_reads_its_merges_from_the_copy_when_first_asked(tmp_path):
    db = tmp_path / "s.db"
    model = sample_token_model()
    with Store(db) as store:
        store.save("t", model)
        loaded = [load_model(db, "t"), Tokenizer.from_db(db, "t").model, store.load("t").model, store.load_model("t@1")]
    for model_loaded in loaded:
        assert model_loaded._merges is None  # not made while loading: the token rule encodes without them
        assert as_tuple(model_loaded) == as_tuple(model)  # (reads them)
    tokenizer = Tokenizer.from_db(db, "t")
    again = pickle.loads(pickle.dumps(tokenizer))  # (a worker's copy: the deferred read pickles)
    assert again.merges == model.merges and again.encode("the th") == tokenizer.encode("the th") == [257, 32, 256]



def test_a_pair_rule_tokenizer_from_a_store_encodes_with_the_merges_in_its_copy(tmp_path):
    """Its encoder reads the merges in the packed copy; its model makes their list only when
    asked for it; both give what the model saved gives."""
    db = tmp_path / "s.db"
    model = sample_model([b"\xe2\x82", b"zz"])
    with Store(db) as store:
        store.save("p", model)
    text = "the then\x00\xff thee the"
    loaded = Tokenizer.from_db(db, "p")
    assert loaded.model._merges is None
    assert loaded.encode(text) == Tokenizer.from_model(model).encode(text)
    assert len(loaded.encode(text)) < len(text.encode())  # (merged)
    assert loaded.model._merges is None  # (encoding never made them)
    assert loaded.merges == model.merges and pickle.loads(pickle.dumps(loaded)).encode(text) == loaded.encode(text)
    # The engine refuses a damaged copy given for merges, as the loaders do.
    from bpestore.engine import Encoder

    data = pack(model.vocab, model.merges)
    with pytest.raises(ValueError, match="damaged packed data"):
        Encoder(model.vocab, data[:-1], {}, model.pattern)
    assert Encoder(model.vocab, data, {}, model.pattern).encode("the then", "all") == Encoder(model.vocab, model.merges, {}, model.pattern).encode("the then", "all")


def test_a_change_to_the_rows_deletes_the_packed_copy(tmp_path):
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.save("t", sample_model())
        store.save("u", sample_model([b"uu"]))
    assert [row[0] for row in packed_rows(db)] == [1, 2]
    execute(db, "UPDATE vocab SET text = 'x' WHERE tokenizer_id = 1 AND token_id = 256")
    assert [row[0] for row in packed_rows(db)] == [2]
    execute(db, "DELETE FROM merges WHERE tokenizer_id = 2 AND rank = 3")
    assert packed_rows(db) == []
    model = load_model(db, "u")
    assert model.merges == sample_model().merges[:3]
    with Store(db) as store:
        store.save("v", sample_model())
        assert [row[0] for row in packed_rows(db)] == [3]
        store.delete("v")
    assert packed_rows(db) == []


@pytest.mark.parametrize(
    "damage, reason",
    [
        ("UPDATE packed_models SET data = substr(data, 1, 100)", "damaged packed data"),
        ("UPDATE packed_models SET data = X'00'", "damaged packed data"),
        ("UPDATE tokenizers SET vocab_size = vocab_size + 1", "it holds 262 tokens, the tokenizer has 263"),
    ],
)
@pytest.mark.parametrize("rule", ["pair", "token"])
def test_a_damaged_packed_copy_is_one_clear_store_error(tmp_path, damage, reason, rule):
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.save("t", sample_model() if rule == "pair" else sample_token_model())
    execute(db, damage)
    for load in (lambda: Tokenizer.from_db(db, "t"), lambda: Store(db).load("t")):
        with pytest.raises(StoreError, match="the packed copy of t@1.s vocab and merges, cannot be used") as raised:
            load()
        assert reason in str(raised.value) and "packed_models" in str(raised.value)


# -- migration 0004 --------------------------------------------------------------------------------


def alembic_config(db: Path) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", f"sqlite:///{db}")
    return config


def schema_objects(db: Path) -> set[tuple[str, str]]:
    connection = sqlite3.connect(db)
    try:
        return set(connection.execute("SELECT type, name FROM sqlite_master"))
    finally:
        connection.close()


def test_upgrading_from_0003_packs_every_stored_tokenizer_and_downgrading_removes_the_copies(tmp_path):
    db = tmp_path / "old.db"
    models = {"t": sample_model(), "u": sample_model([b"\x80\x81", b"long token"])}
    with Store(db) as store:
        for name, model in models.items():
            store.save(name, model)
    command.downgrade(alembic_config(db), "0003")
    objects = schema_objects(db)
    assert ("table", "packed_models") not in objects and not {name for _, name in objects} & TRIGGERS
    for name, model in models.items():  # a store at 0003 is read from its rows (after the upgrade)
        assert as_tuple(load_model(db, name)) == as_tuple(model)
    assert [row[0] for row in packed_rows(db)] == [1, 2]  # loading upgraded it, packing both
    connection = sqlite3.connect(db)
    try:
        for tokenizer_id, (name, model) in enumerate(models.items(), 1):
            data = connection.execute("SELECT data FROM packed_models WHERE tokenizer_id = ?", (tokenizer_id,)).fetchone()[0]
            assert read_layout(data) == (model.vocab, model.merges)
    finally:
        connection.close()
    assert {("trigger", name) for name in TRIGGERS} <= schema_objects(db)
    command.downgrade(alembic_config(db), "0003")
    command.upgrade(alembic_config(db), "head")
    for name, model in models.items():
        assert as_tuple(load_model(db, name)) == as_tuple(model)
