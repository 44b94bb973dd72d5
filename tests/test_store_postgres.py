"""The store on PostgreSQL (issue 14, section 1): what differs from SQLite and what once failed there.

NUL bytes in tokens, counts and sizes above 2^31, pre-tokens and tokens longer than a B-tree entry
(2704 bytes), the migrations up and down on a server, the packed copy kept fresh by triggers, the
schema as the models say, and one-line errors for a missing driver or an unreachable server. The
rest of the store suite (tests/test_store.py) runs on PostgreSQL too, through its ``db`` fixture.

Tests that need no server but are about bigger values or longer keys run on SQLite too. Expected
values come from the tokenizers themselves and from ``bpestore.train_bpe`` (which
test_training.py checks against the reference trainer); the database is read with plain psycopg.
"""

from __future__ import annotations

import json
import re
import sys

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from click.testing import CliRunner
from sqlalchemy import create_engine

from bpestore import Store, Tokenizer, train_bpe
from bpestore.cli import main
from bpestore.errors import StoreUnavailableError
from bpestore.store import schema
from bpestore.store.migrate import migrations_dir
from conftest import shared_file
from postgres import PostgresDatabase, fresh_database, sqlite_or_postgresql_db  # noqa: F401 (the db fixture)
from reference import reference_pretoken_counts

# A database on a PostgreSQL server for each test: the full suite's, not the fast tier's.
pytestmark = pytest.mark.slow


@pytest.fixture
def pg():
    with fresh_database() as url:
        yield url


def nul_tokenizer() -> Tokenizer:
    """Byte 0x00 merged into longer tokens, and a special token with NUL in it."""
    vocab = {b: bytes([b]) for b in range(256)}
    merges = [(b"\x00", b"\x00"), (b"a", b"\x00"), (b"a\x00", b"\x00\x00"), (b"\xff", b"\x00")]
    for left, right in merges:
        vocab[len(vocab)] = left + right
    return Tokenizer(vocab, merges, ["<nul\x00>"])


def test_nul_bytes_are_saved_loaded_and_readable(pg):
    tokenizer = nul_tokenizer()
    with Store(pg) as store:
        ref = store.save("nul", tokenizer)
        loaded = store.load(ref)
        store.delete(store.save("nul", tokenizer))  # and a second copy deleted again
    for got in (loaded, Tokenizer.from_db(pg, "nul")):
        assert (got.vocab, got.merges, got.special_tokens) == (tokenizer.vocab, tokenizer.merges, tokenizer.special_tokens)
    text = "a\x00\x00\x00 \x00<nul\x00>\xff"
    assert loaded.encode(text) == tokenizer.encode(text)
    # The bytes are exact; the readable text has U+FFFD where the token has NUL.
    rows = dict(((i, (t, h)) for i, t, h in pg.query("SELECT id, token, token_hex FROM vocab_readable WHERE name = 'nul'")))
    for token_id, token in tokenizer.vocab.items():
        text_column, hex_column = rows[token_id]
        assert hex_column == token.hex().upper()
        assert text_column == token.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
    assert rows[256][0] == "\ufffd\ufffd"


def test_training_on_text_with_nul_bytes(pg, tmp_path):
    corpus = tmp_path / "nul.txt"
    corpus.write_bytes(("a\x00b a\x00b \x00\x00\x00 x\x00y " * 50 + "plain words here ").encode() * 4)
    with Store(pg) as store:
        (ref,) = store.train(corpus, "nul", 270, workers=1)
        loaded = store.load(ref)
        counts = dict(pg.query("SELECT pretoken, count FROM pretoken_counts"))
    assert (loaded.vocab, loaded.merges) == train_bpe(corpus, 270, [], workers=1)
    assert counts == reference_pretoken_counts(corpus.read_text(), [])


def test_sizes_and_counts_above_2_to_the_31(db):
    """A corpus over 2 GiB, with a pre-token seen more than 2^31 times (32-bit columns said
    "integer out of range" on PostgreSQL): stored and read back exactly."""
    counts = {b"the": 2**31 + 7, b" and": 2**40 + 1, b"x": 1}
    with Store(db) as store, store._staged_corpus("big.txt", counts, False, None) as (connection, staged, _), store._transaction(
        write=True, on=connection
    ):
        corpus_id = store._insert_corpus(connection, "big.txt", 5 * 2**30, "ab" * 32, "p", "[]", staged)
        store._insert_tokenizer(
            connection, "big", nul_tokenizer().model, corpus_id=corpus_id, source="trained", training_params=None, training_seconds=1.0
        )
    with Store(db) as store:
        assert store.pretoken_counts(corpus_id) == counts
        info = store.info("big")
        assert info.corpus_bytes == 5 * 2**30
    if isinstance(db, PostgresDatabase):
        assert db.query("SELECT size_bytes, distinct_pretokens, total_pretokens FROM corpora") == [(5 * 2**30, 3, sum(counts.values()))]


def test_pretokens_and_tokens_of_6_kb(db, tmp_path):
    """A pre-token of 6,000 bytes (a line of '='), and training long enough that tokens of more
    than 2704 bytes (a B-tree entry's limit on PostgreSQL) are merged and stored."""
    corpus = tmp_path / "long.txt"
    corpus.write_text(("=" * 6000 + "\n" + "-" * 3000 + "\nsome words\n") * 3, encoding="utf-8")
    with Store(db) as store:
        (ref,) = store.train(corpus, "long", 299, workers=1)
        loaded = store.load(ref)
        expected = train_bpe(corpus, 299, [], workers=1)
        assert (loaded.vocab, loaded.merges) == expected
        assert max(len(token) for token in loaded.vocab.values()) == 6000
        stored = store.count(corpus)  # the stored counts, read back
        assert stored.reused and stored.counts == reference_pretoken_counts(corpus.read_text(), [])
        store.delete(ref)
        assert store.refs() == []


def test_the_packed_copy_is_dropped_when_the_rows_change(pg):
    """Triggers (migration 0006) do on PostgreSQL what 0004's do on SQLite."""
    with Store(pg) as store:
        store.save("t", nul_tokenizer())
        store.save("u", nul_tokenizer())
    packed = lambda: [row[0] for row in pg.query("SELECT tokenizer_id FROM packed_models ORDER BY tokenizer_id")]  # noqa: E731
    assert packed() == [1, 2]
    pg.execute("UPDATE vocab SET text = 'x' WHERE tokenizer_id = 1 AND token_id = 259")
    assert packed() == [2]
    assert Tokenizer.from_db(pg, "t@1").vocab == nul_tokenizer().vocab  # read from the rows
    pg.execute("DELETE FROM merges WHERE tokenizer_id = 2 AND rank = 3")
    assert packed() == []
    assert Tokenizer.from_db(pg, "u").merges == nul_tokenizer().merges[:3]
    with Store(pg) as store:
        store.save("v", nul_tokenizer())
        assert packed() == [3]
        pg.execute("INSERT INTO vocab (tokenizer_id, token_id, token, kind, text) VALUES (3, 999, %s, 'other', 'zz')", (b"zz",))
        assert packed() == []


def test_rm_uses_an_index_for_the_merges_that_point_at_a_token(pg):
    """Deleting a tokenizer deletes its vocab rows, each of which looks up the merges whose result
    it is: that lookup must use an index (without one, rm of GPT-2 took 247 s)."""
    Store(pg).close()
    (definition,) = pg.query("SELECT indexdef FROM pg_indexes WHERE tablename = 'merges' AND indexname = 'ix_merges_tokenizer_id_result_id'")
    assert definition[0].endswith("(tokenizer_id, result_id)")
    (definition,) = pg.query("SELECT indexdef FROM pg_indexes WHERE tablename = 'tokenizers' AND indexname = 'ix_tokenizers_corpus_id'")
    assert definition[0].endswith("(corpus_id)")


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", url)
    return config


def test_models_and_migrations_agree_on_postgresql(pg):
    command.upgrade(alembic_config(pg), "head")
    engine = create_engine(pg)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            differences = compare_metadata(context, schema.metadata)
    finally:
        engine.dispose()
    # The intended differences (0006): on PostgreSQL the keys on pre-tokens and tokens are unique
    # indexes on their sha256, which alembic sees as indexes the models lack and, for vocab, a
    # unique constraint the database lacks (pretoken_counts's primary key it does not compare);
    # and (0008) pretoken_counts's foreign key is statement triggers, which alembic does not see.
    assert sorted((d[0], getattr(d[1], "name", None)) for d in differences) == [
        ("add_constraint", "uq_vocab_tokenizer_id"),
        ("add_fk", "fk_pretoken_counts_corpus_id_corpora"),
        ("remove_index", "uq_pretoken_counts_pretoken_sha256"),
        ("remove_index", "uq_vocab_token_sha256"),
    ], differences


def test_every_migration_goes_down_and_up_with_the_data_on_postgresql(pg):
    """From head down to base one revision at a time and back, with a tokenizer stored at each
    revision on the way up: the data survives every step."""
    with Store(pg) as store:
        store.save("t", nul_tokenizer())
    config = alembic_config(pg)
    revisions = ["0005", "0004", "0003", "0002", "0001"]
    for revision in revisions:
        command.downgrade(config, revision)
        assert pg.query("SELECT version_num FROM alembic_version") == [(revision,)]
    for revision in reversed(revisions[:-1]):
        command.upgrade(config, revision)
    command.upgrade(config, "head")
    with Store(pg) as store:
        got = store.load("t")
        assert (got.vocab, got.merges) == (nul_tokenizer().vocab, nul_tokenizer().merges)
        assert store.save("t", nul_tokenizer()) == "t@2"
    command.downgrade(config, "base")
    assert pg.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'alembic_version'") == []
    with Store(pg) as store:  # a database downgraded to base is a new store again
        assert store.refs() == []


def test_an_unreachable_server_is_one_clear_line():
    url = "postgresql://postgres:secret@127.0.0.1:1/nowhere"
    with pytest.raises(StoreUnavailableError) as error:
        Store(url)
    message = str(error.value)
    assert "\n" not in message and "secret" not in message and "127.0.0.1" in message
    result = CliRunner().invoke(main, ["list", "--db", url])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot use the store" in lines[0], result.output


def test_serve_on_an_unreachable_server_is_one_clear_line():
    """`bpestore serve` opens the store as every command does: one line, no password, no trace."""
    pytest.importorskip("flask", reason="the web extra is not installed (pip install -e '.[web]')")
    result = CliRunner().invoke(main, ["serve", "--port", "0", "--db", "postgresql://postgres:secret@127.0.0.1:1/nowhere"], env={"BPESTORE_DEBUG": None})
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: cannot use the store postgresql+psycopg://postgres:***@127.0.0.1:1/nowhere"), result.output
    assert "secret" not in result.output


def test_the_explorer_reads_a_postgresql_store_and_cannot_write_it(pg, tmp_path):
    """Every kind of page answers on a PostgreSQL store, with what the store holds; the server
    itself refuses a write through the explorer's engine (its transactions are read-only), and
    the store's writing methods refuse before reaching it."""
    pytest.importorskip("flask", reason="the web extra is not installed (pip install -e '.[web]')")
    import re

    from sqlalchemy.exc import DBAPIError

    from bpestore.errors import ReadOnlyStoreError
    from bpestore.web import close_app, create_app

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat, héllo wörld <|endoftext|> " * 200, encoding="utf-8")
    with Store(pg) as store:
        store.train(corpus, "cats", [270, 275], ["<|endoftext|>"], workers=1)
        store.train(corpus, "more", [278], ["<|endoftext|>"], base="cats@1")
        tokenizer = store.load("cats@2")
    count_rows = "SELECT (SELECT count(*) FROM tokenizers), (SELECT count(*) FROM vocab), (SELECT count(*) FROM pretoken_counts)"
    before = pg.query(count_rows)
    app = create_app(pg, allowed_hosts=["localhost"])
    try:
        client = app.test_client()

        def get(url: str) -> str:
            response = client.get(url, headers={"Host": "localhost"})
            assert response.status_code == 200, (url, response.data[:500])
            return response.data.decode()

        for url in (
            "/", "/tokenizer?ref=cats@2", "/vocab?ref=cats@2&q=at", "/vocab?ref=cats@2&hex=c3", "/merges?ref=cats@2&q=at",
            "/versions?name=cats", "/playground?t=cats@2&text=the+cat", "/diff?a=cats@1&b=more@1",
        ):
            get(url)
        assert re.search(r'continues <a href="/tokenizer\?ref=cats@1">cats@1</a>', get("/tokenizer?ref=more"))
        found = int(re.search(r'class="pager">([\d,]+) found', get("/vocab?ref=cats@2&q=at")).group(1))
        assert found == sum("at" in token.decode("utf-8", errors="replace") for token in tokenizer.vocab.values())
        explorer = app.extensions["bpestore_explorer"]
        with pytest.raises(DBAPIError, match="read-only transaction"):
            with explorer.store.engine.begin() as connection:
                connection.exec_driver_sql("CREATE TABLE intruder (a integer)")
        with pytest.raises(DBAPIError, match="read-only transaction"):
            with explorer.store.engine.begin() as connection:
                connection.exec_driver_sql("DELETE FROM tokenizers")
        with pytest.raises(ReadOnlyStoreError):
            explorer.store.delete("cats@1")
    finally:
        close_app(app)
    assert pg.query(count_rows) == before
    assert pg.query("SELECT count(*) FROM pg_tables WHERE tablename = 'intruder'") == [(0,)]


def test_a_missing_driver_is_one_clear_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now fails, as if not installed
    with pytest.raises(StoreUnavailableError, match=r"psycopg.*not installed.*pip install 'psycopg\[binary\]'.*bpestore\[postgres\]"):
        Store("postgresql://postgres@127.0.0.1/x")


def test_the_command_line_on_a_postgresql_store(pg, tmp_path):
    """train, import, list, show, info, encode, decode and rm with --db URL, as on a file."""
    runner = CliRunner()

    def run(*args: str, input: str | None = None) -> str:
        result = runner.invoke(main, [*args, "--db", pg], input=input, env={"BPESTORE_DEBUG": None, "BPESTORE_DB": None})
        assert result.exit_code == 0, (args, result.output, result.exception)
        return result.stdout

    corpus = tmp_path / "corpus.txt"
    english = shared_file("fixtures", "corpus.en").read_bytes().decode("utf-8")
    corpus.write_text(english + "low lower lowest newer wider \x00nul\x00 " * 40, encoding="utf-8")
    assert run("train", str(corpus), "--name", "c", "--vocab-size", "280", "-q") == "c@1\n"
    run("import", "gpt2", str(shared_file("fixtures", "gpt2_vocab.json")), str(shared_file("fixtures", "gpt2_merges.txt")), "--name", "gpt2")
    listed = {row["ref"]: row for row in json.loads(run("list", "--json"))}
    assert "c@1" in listed and listed["c@1"]["vocab_size"] == 280
    assert "c@1" in run("show", "c")
    info = json.loads(run("info", "--json"))
    assert info["kind"] == "postgresql" and info["exists"] and info["tokenizers"] == len(listed)
    expected = train_bpe(corpus, 280, [], workers=1)
    tokenizer = Tokenizer(*expected, [])
    text = "lowest \x00nul\x00 newer"
    ids = [int(word) for word in run("encode", "c", input=text).split()]
    assert ids == tokenizer.encode(text)
    assert run("decode", "c", *map(str, ids)) == text
    run("rm", "c@1")
    assert "c@1" not in {row["ref"] for row in json.loads(run("list", "--json"))}


# -- roles: a user who may only read (issue 23, section 5) -------------------------------------------


@pytest.fixture
def reader(pg):
    """(the store's URL as its owner, the same database as a user granted SELECT only), with a
    tokenizer trained into it."""
    import secrets

    from sqlalchemy.engine import make_url

    with Store(pg) as store:
        store.train_from_counts({b" the": 9, b" cat": 4, b" hat": 3, b"s": 2}, "t", [262])
    role = f"bpestore_reader_{secrets.token_hex(4)}"
    database = make_url(pg).database
    pg.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        pg.execute(f'GRANT CONNECT ON DATABASE "{database}" TO "{role}"')
        pg.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
        pg.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
        yield pg, make_url(pg).set(username=role).render_as_string(hide_password=False), role
    finally:
        pg.execute(f'DROP OWNED BY "{role}"')
        pg.execute(f'DROP ROLE "{role}"')


def test_a_read_only_user_reads_everything_and_is_refused_writes_in_one_line(reader, tmp_path):
    from bpestore.errors import ReadOnlyStoreError

    owner, url, role = reader
    with Store(url) as store:
        assert store.refs() == ["t@1"]
        assert store.load("t").encode(" the cat") == Store(owner).load("t").encode(" the cat")
        assert store.read_only_reason is not None and role in store.read_only_reason
        with pytest.raises(ReadOnlyStoreError, match=f"the user '{role}' may not write this store"):
            store.save("x", Tokenizer.from_db(owner, "t"))
    assert Tokenizer.from_db(url, "t").encode(" the hat") == Tokenizer.from_db(owner, "t").encode(" the hat")
    runner = CliRunner()
    info = runner.invoke(main, ["info", "--db", url])
    assert info.exit_code == 0 and f"no: the user '{role}' may not write this store" in info.stdout, info.output
    assert re.search(r"^writable +yes$", runner.invoke(main, ["info", "--db", owner]).stdout, re.M)
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat\n" * 100, encoding="utf-8")
    for command_line in (
        ["train", str(corpus), "--name", "x", "--vocab-size", "270"],
        ["rm", "t"],
        ["count", "add", "t", str(corpus)],
    ):
        result = runner.invoke(main, [*command_line, "--db", url], env={"BPESTORE_DEBUG": None})
        assert result.exit_code == 1, (command_line, result.output)
        assert result.stderr.startswith("Error: cannot write to") and role in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr
    with Store(owner) as store:
        assert store.refs() == ["t@1"]  # nothing was written


def test_a_write_refused_by_the_server_is_one_line_too(reader):
    """Privileges revoked after the store was opened: the server's refusal itself is one line."""
    from bpestore.errors import ReadOnlyStoreError

    owner, url, role = reader
    with Store(url) as store:
        store.read_only_reason = None  # as if the user could write when the store was opened
        with pytest.raises(ReadOnlyStoreError, match="permission denied"):
            store.save("x", Tokenizer.from_db(owner, "t"))


def test_a_count_total_that_does_not_fit_is_one_line(db, tmp_path):
    """Counts are 64-bit in the store: counts whose sum does not fit are refused before any write."""
    with Store(db) as store:
        with pytest.raises(ValueError, match="more than the store's 64-bit counts hold"):
            store.train_from_counts({b" a": 2**62, b" b": 2**62, b"c": 5}, "big", [258])
        assert store.refs() == [] and store.corpora() == []
    counts = tmp_path / "counts.tsv"
    counts.write_text(f" a\t{2**63}\n b\t1\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["train", "--counts", str(counts), "--name", "big", "--vocab-size", "258", "--db", str(db)], env={"BPESTORE_DEBUG": None})
    assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1 and "64-bit" in result.stderr, result.output


def test_counts_keep_their_corpus_without_a_foreign_key(pg):
    """On PostgreSQL the reference from pretoken_counts to corpora is statement triggers (0008):
    rows must name a corpus, deleting a corpus deletes its counts, a corpus with counts keeps its
    id, as the foreign key they replace did."""
    import psycopg

    with Store(pg) as store:
        (ref,) = store.train_from_counts({b" the": 9, b" cat": 4, b" hat": 3}, "t", [258])
        corpus_id = store.corpus_of(ref).id
    with pytest.raises(psycopg.errors.ForeignKeyViolation, match="corpus 999"):
        pg.execute("INSERT INTO pretoken_counts (corpus_id, pretoken, count) VALUES (999, '\\x61'::bytea, 1)")
    with pytest.raises(psycopg.errors.ForeignKeyViolation, match="corpus 999"):
        pg.execute("UPDATE pretoken_counts SET corpus_id = 999")
    with Store(pg) as store:  # a corpus no tokenizer refers to (the tokenizers' key would refuse first)
        from bpestore._engine import PretokenCounts
        from bpestore.train.counts import Counts

        alone = store.count(Counts(PretokenCounts.from_rows([(b" dog", 2), (b" log", 1)]))).corpus_id
    pg.execute(f"DELETE FROM packed_counts WHERE corpus_id = {alone}")  # (its own foreign key would refuse first)
    with pytest.raises(psycopg.errors.ForeignKeyViolation, match="without their corpus"):
        pg.execute(f"UPDATE corpora SET id = 999 WHERE id = {alone}")
    assert pg.query("SELECT count(*) FROM pretoken_counts WHERE corpus_id = ?", (corpus_id,)) == [(3,)]
    with Store(pg) as store:
        store.delete(ref)  # its corpus goes, and the corpus's counts with it
    assert pg.query("SELECT corpus_id, count(*) FROM pretoken_counts GROUP BY corpus_id") == [(alone, 2)]
    assert pg.query("SELECT id FROM corpora") == [(alone,)]
    pg.execute(f"DELETE FROM corpora WHERE id = {alone}")  # by hand too
    assert pg.query("SELECT count(*) FROM pretoken_counts") == [(0,)]


@pytest.mark.parametrize(
    "edit,constraint",
    [
        ("UPDATE tokenizers SET training_params = '[1, 2]'", "ck_tokenizers_training_params_json_object"),
        ("UPDATE tokenizers SET special_tokens = '{\"a\": 1}'", "ck_tokenizers_special_tokens_json_array"),
        ("UPDATE tokenizers SET added_tokens = '\"x\"'", "ck_tokenizers_added_tokens_json_array"),
        ("UPDATE tokenizers SET source_paths = '7'", "ck_tokenizers_source_paths_json_array"),
        ("UPDATE corpora SET special_tokens = '{}'", "ck_corpora_special_tokens_json_array"),
        ("UPDATE tokenizers SET special_tokens = '[1, 2]'", "ck_tokenizers_special_tokens_json_array"),
        ("UPDATE tokenizers SET added_tokens = '[null]'", "ck_tokenizers_added_tokens_json_array"),
        ("UPDATE tokenizers SET training_params = '{'", "invalid input syntax for type json"),
    ],
)
def test_json_of_the_wrong_shape_written_by_hand_is_refused_by_postgresql(pg, tmp_path, edit, constraint):
    """Migration 0013's checks, as SQLite's STRICT tables have them (tests/test_strict_store.py)."""
    import psycopg

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("low lower lowest newer wider " * 40)
    with Store(pg) as store:
        store.train(corpus, "t", 270, ["<|endoftext|>"], workers=1)
    with pytest.raises(psycopg.Error, match=re.escape(constraint)):
        pg.execute(edit)
    assert pg.query("SELECT count(*) FROM tokenizers WHERE training_params LIKE '{%'") == [(1,)]


def test_a_row_the_checks_would_refuse_stops_the_upgrade_in_one_line_on_postgresql(pg):
    with Store(pg) as store:
        store.save("t", nul_tokenizer())
    command.downgrade(alembic_config(pg), "0012")
    pg.execute("UPDATE tokenizers SET training_params = '[1, 2]'")
    result = CliRunner().invoke(main, ["show", "t", "--db", pg], env={"BPESTORE_DEBUG": None})
    assert result.exit_code == 1, result.output
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and "row (id=1) of table tokenizers, column training_params" in message, message
    assert "nothing was changed" in message and "JSON object" in message
    assert pg.query("SELECT version_num FROM alembic_version") == [("0012",)]
    assert pg.query("SELECT count(*) FROM pg_constraint WHERE conname LIKE '%json%'") == [(0,)]
    pg.execute("UPDATE tokenizers SET training_params = NULL, special_tokens = '[1]'")
    result = CliRunner().invoke(main, ["show", "t", "--db", pg], env={"BPESTORE_DEBUG": None})
    assert result.exit_code == 1 and "column special_tokens, holds text '[1]', not a JSON array of strings" in result.stderr, result.stderr
    pg.execute("""UPDATE tokenizers SET special_tokens = '["<nul\\u0000>"]'""")  # (a NUL, as a special token may hold)
    assert "t@1" in CliRunner().invoke(main, ["show", "t", "--db", pg], env={"BPESTORE_DEBUG": None}).stdout
    assert pg.query("SELECT version_num FROM alembic_version") == [("0013",)]
