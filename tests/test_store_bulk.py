"""The store at the engine's speed (issue 23): counts written and read in bulk, their packed copy
never disagreeing with the rows, corpora grown by files, and writers that hold the store's lock only
for their final writes, waiting for it no longer than asked. Every store test runs on SQLite and on
PostgreSQL (``db`` fixture, tests/postgres.py)."""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func, select

import bpestore
from bpestore import Store, train_bpe
from bpestore._engine import PretokenCounts
from bpestore.errors import StoreError, StoreLockTimeoutError
from bpestore.pretokenize.patterns import GPT2_PATTERN
from bpestore.store import bulk
from bpestore.store.database import WRITE_LOCK_KEY
from bpestore.train.trainer import count_corpus
from postgres import PostgresDatabase, sqlite_or_postgresql_db as db  # noqa: F401 - the fixture
from reference import reference_pretoken_counts, reference_train
from test_store import query
from test_training_inputs import FILE_CUT, some_text

ENDOFTEXT = "<|endoftext|>"


def execute(db, statement: str, params: tuple = ()) -> None:
    if isinstance(db, PostgresDatabase):
        db.execute(statement.replace("?", "%s"), params or None)
        return
    connection = sqlite3.connect(db)
    try:
        with connection:
            connection.execute(statement, params)
    finally:
        connection.close()


def as_dict(counts) -> dict[bytes, int]:
    return dict(counts.items())


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.fixture
def corpus(tmp_path) -> Path:
    rng = random.Random(23)
    return write(tmp_path / "corpus.txt", ENDOFTEXT.join(some_text(rng, 4000) for _ in range(3)))


def stored_counts(db, corpus_id: int) -> dict[bytes, int]:
    return {bytes(p): c for p, c in query(db, "SELECT pretoken, count FROM pretoken_counts WHERE corpus_id = ?", (corpus_id,))}


# -- bulk writes and reads, and the packed copy --------------------------------------------------------


def test_counts_are_stored_as_rows_and_a_packed_copy_and_read_back(db, corpus):
    expected = dict(reference_pretoken_counts(corpus.read_bytes().decode("utf-8"), [ENDOFTEXT]))
    with Store(db) as store:
        counted = store.count(corpus, [ENDOFTEXT], workers=2)
        assert not counted.reused
        assert stored_counts(db, counted.corpus_id) == expected  # plain SQL reads the rows
        assert query(db, "SELECT count(*) FROM packed_counts WHERE corpus_id = ?", (counted.corpus_id,)) == [(1,)]
        back = store.pretoken_counts(counted.corpus_id)
        assert isinstance(back, PretokenCounts) and as_dict(back) == expected
        again = store.count(corpus, [ENDOFTEXT])
        assert again.reused and again.corpus_id == counted.corpus_id and as_dict(again.counts) == expected


@pytest.mark.parametrize(
    "change",
    [
        "UPDATE pretoken_counts SET count = count + 1 WHERE corpus_id = {id} AND pretoken = {one}",
        "DELETE FROM pretoken_counts WHERE corpus_id = {id} AND pretoken = {one}",
        "INSERT INTO pretoken_counts (corpus_id, pretoken, count) VALUES ({id}, {new}, 5)",
        "UPDATE pretoken_counts SET pretoken = {new} WHERE corpus_id = {id} AND pretoken = {one}",
    ],
)
def test_any_change_to_the_rows_drops_the_packed_copy_and_the_rows_are_read(db, corpus, change):
    """The rows are the truth: ad-hoc SQL that changes them (insert, update, delete) drops the
    corpus's packed copy in the same statement, and the store reads the rows from then on."""
    with Store(db) as store:
        corpus_id = store.count(corpus, [ENDOFTEXT]).corpus_id
    one = min(stored_counts(db, corpus_id))
    literal = (lambda b: f"'\\x{b.hex()}'::bytea") if isinstance(db, PostgresDatabase) else (lambda b: f"x'{b.hex()}'")
    execute(db, change.format(id=corpus_id, one=literal(one), new=literal(b"\xff never a pre-token")))
    assert query(db, "SELECT count(*) FROM packed_counts WHERE corpus_id = ?", (corpus_id,)) == [(0,)]
    # The corpus row still says how many there were: reading must follow the rows, not it.
    with Store(db) as store:
        assert as_dict(store.pretoken_counts(corpus_id)) == stored_counts(db, corpus_id)


def test_insert_or_replace_drops_the_packed_copy_too(tmp_path, corpus):
    """SQLite's REPLACE deletes the old row without a DELETE trigger: the INSERT trigger catches it."""
    db = tmp_path / "store.db"
    with Store(db) as store:
        corpus_id = store.count(corpus, [ENDOFTEXT]).corpus_id
    one = min(stored_counts(db, corpus_id))
    execute(db, "INSERT OR REPLACE INTO pretoken_counts (corpus_id, pretoken, count) VALUES (?, ?, 123456)", (corpus_id, one))
    assert query(db, "SELECT count(*) FROM packed_counts") == [(0,)]
    with Store(db) as store:
        assert store.pretoken_counts(corpus_id)[one] == 123456


def test_a_damaged_packed_copy_is_not_read(db, corpus):
    with Store(db) as store:
        corpus_id = store.count(corpus, [ENDOFTEXT]).corpus_id
        expected = stored_counts(db, corpus_id)
        (packed,) = query(db, "SELECT data FROM packed_counts WHERE corpus_id = ?", (corpus_id,))[0]
        damaged = bytearray(bytes(packed))
        damaged[len(damaged) // 2] ^= 0x40
        # (a statement on packed_counts alone: the triggers are on the rows)
        with store._transaction(write=True) as connection:
            connection.execute(bulk.schema.packed_counts.update().values(data=bytes(damaged)))
        assert as_dict(store.pretoken_counts(corpus_id)) == expected


def test_big_counts_are_written_in_batches_and_packed_in_parts(db, corpus, monkeypatch):
    monkeypatch.setattr(bulk, "ROWS_PER_BATCH", 97)
    monkeypatch.setattr(bulk, "BYTES_PER_PACKED_PART", 500)
    with Store(db) as store:
        counted = store.count(corpus, [ENDOFTEXT])
        corpus_id = counted.corpus_id
        parts = query(db, "SELECT part FROM packed_counts WHERE corpus_id = ? ORDER BY part", (corpus_id,))
        assert [part for (part,) in parts] == list(range(len(parts))) and len(parts) > 3
        expected = stored_counts(db, corpus_id)
        assert len(expected) == len(counted.counts) > 3 * bulk.ROWS_PER_BATCH  # several batches
        assert as_dict(store.pretoken_counts(corpus_id)) == expected
        # A part missing (a copy only partly there) is never read as the counts.
        with store._transaction(write=True) as connection:
            connection.execute(bulk.schema.packed_counts.delete().where(bulk.schema.packed_counts.c.part == 1))
        assert as_dict(store.pretoken_counts(corpus_id)) == expected


def test_a_write_that_fails_leaves_nothing_and_the_trigger_in_place(db, corpus, monkeypatch):
    """A failure once the first rows are in (on SQLite, copied from the staged ones, with the
    insert trigger dropped for the write): everything is rolled back, the trigger too."""

    class Boom(Exception):
        pass

    original = bulk.write_counts

    def fail_after_the_first_rows(connection, corpus_id, staged, on_rows=None):
        def boom(rows):
            if connection.dialect.name == "sqlite":  # (PostgreSQL is in the middle of the COPY: no query)
                assert query_rows(connection, corpus_id) > 0  # the rows are in: this is mid-write
            raise Boom

        original(connection, corpus_id, staged, on_rows=boom)

    monkeypatch.setattr(bulk, "write_counts", fail_after_the_first_rows)
    with Store(db) as store, pytest.raises(Boom):
        store.count(corpus, [ENDOFTEXT])
    monkeypatch.undo()
    assert query(db, "SELECT count(*) FROM pretoken_counts") == [(0,)]
    assert query(db, "SELECT count(*) FROM corpora") == [(0,)]
    if not isinstance(db, PostgresDatabase):
        names = {name for (name,) in query(db, "SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        assert {"pretoken_counts_insert_unpacks", "pretoken_counts_update_unpacks", "pretoken_counts_delete_unpacks"} <= names
    with Store(db) as store:  # and the next write works, with its copy
        corpus_id = store.count(corpus, [ENDOFTEXT]).corpus_id
    assert query(db, "SELECT count(*) FROM packed_counts WHERE corpus_id = ?", (corpus_id,)) == [(1,)]


def query_rows(connection, corpus_id) -> int:
    table = bulk.schema.pretoken_counts
    return connection.execute(select(func.count()).select_from(table).where(table.c.corpus_id == corpus_id)).scalar_one()


def test_a_write_that_fails_while_staging_leaves_nothing(tmp_path, corpus):
    """SQLite stages the rows before taking the write lock: a failure there (a full disk for the
    temporary tables, say) stores nothing, and the next write of the same counts works."""
    db = tmp_path / "s.db"

    class Boom(Exception):
        pass

    def boom(rows):
        raise Boom

    counts = count_corpus(corpus, [ENDOFTEXT])
    with Store(db) as store:
        with pytest.raises(Boom):
            store._store_corpus(str(corpus), 1, "ab" * 32, GPT2_PATTERN, "[]", counts, False, on_rows=boom)
        assert query(db, "SELECT count(*) FROM corpora") == [(0,)]
        corpus_id = store._store_corpus(str(corpus), 1, "ab" * 32, GPT2_PATTERN, "[]", counts, False)
        assert store.pretoken_counts(corpus_id) == counts


def test_sqlite_counts_are_staged_before_the_write_lock_is_taken(tmp_path, corpus):
    """The slow part of writing counts' rows on SQLite (Python values made and bound, a row at
    a time) runs before the write lock is taken: while it runs, another process may write (it
    does not wait at all here: timeout 0); only the copy of the staged rows holds the lock."""
    db = tmp_path / "s.db"
    Store(db).close()
    calls = []

    def another_writer_while_writing(rows):
        other = sqlite3.connect(db, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
            calls.append("written")
        except sqlite3.OperationalError as error:  # database is locked
            calls.append(str(error))
        finally:
            other.close()

    counts = count_corpus(corpus, [ENDOFTEXT])
    assert len(counts) < bulk.ROWS_PER_BATCH  # one batch staged, then one slice copied
    with Store(db) as store:
        corpus_id = store._store_corpus(str(corpus), 1, "ab" * 32, GPT2_PATTERN, "[]", counts, False, on_rows=another_writer_while_writing)
        assert store.pretoken_counts(corpus_id) == counts
    assert calls == ["written", "database is locked"]  # staging: free; copying: the lock is held


def test_deleting_the_last_tokenizer_deletes_its_counts_and_their_copy(db, corpus):
    with Store(db) as store:
        (ref,) = store.train(corpus, "t", [300], [ENDOFTEXT])
        store.delete(ref)
    for table in ("corpora", "pretoken_counts", "packed_counts", "corpus_files"):
        assert query(db, f"SELECT count(*) FROM {table}") == [(0,)], table


def test_engine_counts_refuse_bad_rows_and_copies():
    with pytest.raises(ValueError, match="damaged packed counts"):
        PretokenCounts.unpack(b"BPECNT1\n" + bytes(40))
    with pytest.raises(ValueError, match="row 1"):
        PretokenCounts.from_rows([(b"a", 1), ("b", 2)])
    with pytest.raises(ValueError, match="row 0"):
        PretokenCounts.from_rows([(b"a", -1)])
    counts = PretokenCounts.from_rows([(b"a", 1), (b"b", 2), (b"a", 3)])
    assert as_dict(counts) == {b"a": 4, b"b": 2}
    rows = counts.sorted_rows()
    counts.merge(PretokenCounts.from_rows([(b"c", 1)]))
    with pytest.raises(ValueError, match="changed"):
        rows.flat_rows(0, 1)


# -- growing a corpus ---------------------------------------------------------------------------------


def test_a_corpus_grown_by_files_trains_as_all_the_files_together(db, tmp_path):
    rng = random.Random(5)
    texts = [some_text(rng, 2500) + "\n" for _ in range(4)]
    files = [write(tmp_path / f"{i}.txt", text) for i, text in enumerate(texts)]
    vocab_size = 256 + 1 + 50
    with Store(db) as store:
        (first,) = store.train(files[:2], "t", [vocab_size], [ENDOFTEXT])
        grown = store.add_to_corpus(first, files[2:])
        assert grown.files == 4 and first in store.corpus_of(first).tokenizers
        assert grown.distinct_pretokens == len(store.pretoken_counts(grown.id))
        expected = Counter()
        for text in texts:
            expected.update(reference_pretoken_counts(text, [ENDOFTEXT]))
        assert as_dict(store.pretoken_counts(grown.id)) == dict(expected)
        (retrained,) = store.train(store.corpus_of(grown.id), "t", [vocab_size], [ENDOFTEXT])
        assert store.info(retrained).training_params["reused_pretoken_counts"] is True
        merges = store.load(retrained).merges
        _, reference = reference_train(FILE_CUT.join(texts), vocab_size + 1, [ENDOFTEXT, FILE_CUT])
        assert merges == reference
        assert merges == train_bpe(files, vocab_size, [ENDOFTEXT])[1]
        # Training on all the files finds the grown corpus: nothing is counted again.
        (direct,) = store.train(files, "direct", [vocab_size], [ENDOFTEXT])
        assert store.info(direct).training_params["reused_pretoken_counts"] is True
        assert store.info(direct).corpus_sha256 == grown.sha256
        listed = store.corpus_files(grown.id)
        assert [Path(file.path) for file in listed] == [path.resolve() for path in files]
        # The corpus t@1 was trained on is as it was: a tokenizer's corpus never changes.
        assert store.corpus_of(first).files == 2


def test_adding_a_file_twice_is_refused_and_an_unused_corpus_is_replaced(db, tmp_path):
    a, b, c = (write(tmp_path / f"{name}.txt", f"the {name} file, some words {name} more words\n") for name in "abc")
    with Store(db) as store:
        first = store.count([a], [ENDOFTEXT]).corpus_id  # counted, no tokenizer trained on it
        with pytest.raises(ValueError, match="holds this content already"):
            store.add_to_corpus(first, [b, a])
        copy = write(tmp_path / "copy-of-b.txt", b.read_bytes().decode())
        with pytest.raises(ValueError, match="same content"):
            store.add_to_corpus(first, [b, copy])
        grown = store.add_to_corpus(first, [b])
        assert [corpus.id for corpus in store.corpora()] == [grown.id]  # the unused one is gone
        with pytest.raises(ValueError, match="holds this content already"):
            store.add_to_corpus(grown.id, [c, b])
        with pytest.raises(StoreError, match="no corpus 999"):
            store.add_to_corpus(999, [c])
    assert query(db, "SELECT count(*) FROM corpus_files") == [(2,)]


def test_cli_count_list_add_and_train_on_a_stored_corpus(tmp_path):
    from test_cli import invoke

    a, b = (write(tmp_path / f"{name}.txt", f"the {name} words and more {name} words\n" * 20) for name in "ab")
    db = tmp_path / "store.db"
    assert invoke("train", a, "--name", "t", "--vocab-size", "270", "--db", db, "-q").exit_code == 0
    added = invoke("count", "add", "t", b, "--db", db, "-q")
    assert added.exit_code == 0, added.output
    new_id = added.stdout.strip()
    listed = json.loads(invoke("count", "list", "--json", "--db", db).stdout)
    assert [corpus["id"] for corpus in listed] == [1, int(new_id)]
    assert listed[1]["files"] == 2 and listed[0]["tokenizers"] == ["t@1"]
    trained = invoke("train", "--stored-corpus", new_id, "--name", "all", "--vocab-size", "270", "--db", db, "-q")
    assert trained.exit_code == 0, trained.output
    with Store(db) as store:
        assert store.load("all").merges == train_bpe([a, b], 270)[1]
    again = invoke("count", "add", new_id, a, "--db", db)
    assert again.exit_code == 1 and "holds this content already" in again.stderr and len(again.stderr.splitlines()) == 1
    both = invoke("train", a, "--stored-corpus", "1", "--name", "x", "--vocab-size", "270", "--db", db)
    assert both.exit_code == 1 and "--stored-corpus" in both.stderr


# -- the write lock --------------------------------------------------------------------------------


class HeldLock:
    """Another writer holding the store's write lock (SQLite: an open BEGIN IMMEDIATE; PostgreSQL:
    the advisory lock the store's writers take) until :meth:`release`."""

    def __init__(self, db) -> None:
        self.db = db
        if isinstance(db, PostgresDatabase):
            import psycopg
            from postgres import _conninfo

            self.connection = psycopg.connect(_conninfo(db), autocommit=True)
            self.connection.execute("SELECT pg_advisory_lock(%s)", (WRITE_LOCK_KEY,))
        else:
            self.connection = sqlite3.connect(db, isolation_level=None)
            self.connection.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        if isinstance(self.db, PostgresDatabase):
            self.connection.execute("SELECT pg_advisory_unlock(%s)", (WRITE_LOCK_KEY,))
        else:
            self.connection.execute("ROLLBACK")
        self.connection.close()


def small_model():
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab"}
    return bpestore.BPEModel(vocab, [(b"a", b"b")])


def test_a_writer_waits_for_the_lock_no_longer_than_its_timeout(db):
    with Store(db) as store:
        store.save("first", small_model())
    held = HeldLock(db)
    try:
        with Store(db, lock_timeout=0.5) as store:
            started = time.monotonic()
            with pytest.raises(StoreLockTimeoutError, match=r"another writer holds the store .*waited 0\.[5-9] s") as raised:
                store.save("second", small_model())
            assert 0.5 <= time.monotonic() - started < 5
            assert 0.5 <= raised.value.waited < 5
            assert store.refs() == ["first@1"]  # readers never wait
    finally:
        held.release()
    with Store(db, lock_timeout=0.5) as store:
        assert store.save("second", small_model()) == "second@1"


def test_the_lock_timeout_comes_from_the_environment_and_is_checked(db, monkeypatch):
    monkeypatch.setenv("BPESTORE_LOCK_TIMEOUT", "0.25")
    with Store(db) as store:
        assert store.lock_timeout == 0.25
    assert Store(db, lock_timeout=3).lock_timeout == 3
    monkeypatch.setenv("BPESTORE_LOCK_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="BPESTORE_LOCK_TIMEOUT must be a number of seconds"):
        Store(db)
    monkeypatch.delenv("BPESTORE_LOCK_TIMEOUT")
    for bad in (-1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="lock_timeout"):
            Store(db, lock_timeout=bad)
    with pytest.raises(TypeError, match="lock_timeout"):
        Store(db, lock_timeout="1")


@pytest.mark.slow
def test_cli_lock_timeout_is_one_line(tmp_path):
    db = tmp_path / "store.db"
    corpus = write(tmp_path / "c.txt", "some words and more words\n" * 50)
    with Store(db) as store:
        store.save("first", small_model())
    held = HeldLock(db)
    try:
        for command in (["train", corpus, "--name", "t", "--vocab-size", "260"], ["rm", "first"]):
            result = subprocess.run(
                [sys.executable, "-m", "bpestore.cli", *map(str, command), "--db", str(db), "--lock-timeout", "0.3"],
                capture_output=True, text=True, timeout=120,
            )
            assert result.returncode == 1, result.stderr
            assert result.stderr.count("\n") == 1 and "another writer holds the store" in result.stderr, result.stderr
            assert "--lock-timeout" in result.stderr
        result = subprocess.run(
            [sys.executable, "-m", "bpestore.cli", "rm", "first", "--db", str(db)],
            capture_output=True, text=True, timeout=120, env={**__import__("os").environ, "BPESTORE_LOCK_TIMEOUT": "0.2"},
        )
        assert result.returncode == 1 and "waited 0.2 s" in result.stderr, result.stderr
    finally:
        held.release()


@pytest.mark.slow  # (over 2 s here: the full suite's)
def test_counting_and_merging_hold_no_lock_and_training_time_excludes_waiting(db, corpus, tmp_path):
    """A training waits for the lock only at its writes; its stored training time is its own.

    Relative to this machine, not a wall-clock threshold: the same training with no lock held
    (in a store of its own, so that the counts are written too) takes ``alone`` seconds, and the
    lock is then held far longer than that (20 times, 2 s at least). A stored time that included
    the wait would be about the hold; its own is about ``alone``, so under half the hold even on
    a machine that runs this test ten times slower than the baseline."""
    with Store(tmp_path / "baseline.db") as store:
        started = time.monotonic()
        store.train(corpus, "t", [300], [ENDOFTEXT], workers=1)
        alone = time.monotonic() - started
    hold = max(2.0, 20 * alone)
    with Store(db) as store:
        store.save("first", small_model())
    taken = threading.Event()

    def hold_the_lock() -> None:  # (a SQLite connection stays in the thread that made it)
        held = HeldLock(db)
        taken.set()
        time.sleep(hold)
        held.release()

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    taken.wait(30)
    try:
        with Store(db, lock_timeout=60 + hold) as store:
            started = time.monotonic()
            (ref,) = store.train(corpus, "t", [300], [ENDOFTEXT], workers=1)
            assert time.monotonic() - started >= 0.9 * hold  # it did wait, for the counts' write
            assert store.info(ref).training_seconds < hold / 2
            assert store.info(ref).training_params["pretokenize_seconds"] < hold / 2
    finally:
        holder.join()


# -- a new vocab size from stored counts -------------------------------------------------------------


def test_a_smaller_vocab_from_stored_counts_takes_the_stored_training_s_merges(db, corpus):
    """The merges of a training of the same counts are the first ones of any bigger training of
    them: a smaller vocab size (or any, once a training ran out of pairs) needs no merge loop."""
    with Store(db) as store:
        (big,) = store.train(corpus, "t", [420], [ENDOFTEXT])
        (small,) = store.train(corpus, "t", [330], [ENDOFTEXT])
        (bigger,) = store.train(corpus, "t", [450], [ENDOFTEXT])
        assert store.info(small).training_params["merges_of"] == big
        assert "merges_of" not in store.info(bigger).training_params  # more merges: the loop ran
        for ref, size in ((big, 420), (small, 330), (bigger, 450)):
            assert store.info(ref).training_params["reused_pretoken_counts"] is (ref != big)
            assert store.load(ref).merges == train_bpe(corpus, size, [ENDOFTEXT])[1], ref
        # Other special tokens are another corpus; a continued training is never a donor.
        (other,) = store.train(corpus, "o", [300], [ENDOFTEXT, "<|pad|>"])
        assert "merges_of" not in store.info(other).training_params


def test_a_training_that_ran_out_of_pairs_serves_any_bigger_size(db, tmp_path):
    corpus = write(tmp_path / "tiny.txt", "abab cdcd abab")
    with Store(db) as store:
        with pytest.warns(bpestore.train.trainer.VocabSizeNotReachedWarning):
            (first,) = store.train(corpus, "t", [300], [])
        with pytest.warns(bpestore.train.trainer.VocabSizeNotReachedWarning):
            (second,) = store.train(corpus, "t", [400], [])
        assert store.info(second).training_params["merges_of"] == first
        with pytest.warns(bpestore.train.trainer.VocabSizeNotReachedWarning):  # (the library's, out of pairs too)
            expected = train_bpe(corpus, 400)[1]
        assert store.load(second).merges == store.load(first).merges == expected


def test_a_store_held_by_a_rollback_journal_writer_is_a_lock_timeout_at_open(tmp_path):
    """A store someone switched to rollback-journal mode blocks even readers while written: opening
    it waits up to the lock timeout, then says so (SQLITE_BUSY at open was "Internal error")."""
    db = tmp_path / "store.db"
    Store(db).close()
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("PRAGMA journal_mode=DELETE")
        holder.execute("BEGIN EXCLUSIVE")
        started = time.monotonic()
        with pytest.raises(StoreLockTimeoutError, match="another writer holds the store"):
            Store(db, lock_timeout=0.3)
        assert 0.3 <= time.monotonic() - started < 10
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with Store(db) as store:
        assert store.refs() == []


def test_the_progress_of_saving_counts_counts_pre_tokens(tmp_path, capsys):
    """The bar says how many pre-tokens are saved (307k of them, not the 614k rows that SQLite
    writes for them, staged and then copied)."""
    from bpestore import Store
    from test_cli import corpus_text, write_text

    corpus = write_text(tmp_path / "corpus.txt", corpus_text(seed=21, words=4000))
    with Store(tmp_path / "store.db") as store:
        counted = store.count(corpus, progress=True)
        distinct = counted.distinct if hasattr(counted, "distinct") else len(store.pretoken_counts(counted.corpus_id))
    bars = [line for line in capsys.readouterr().err.replace("\r", "\n").splitlines() if "saving pre-token counts" in line]
    assert bars, "no bar for saving the counts"
    import re

    done, total = map(float, re.search(r"([\d.]+)k?/([\d.]+)k? \[", bars[-1]).groups())
    assert done == total == distinct and "pre-tokens" in bars[-1], (distinct, bars[-1])
