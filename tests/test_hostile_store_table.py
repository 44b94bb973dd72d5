"""The hostile-store table: every column of every table x {a value of the wrong type, NULL, JSON
of the wrong shape}, spoiled packed copies, revisions that do not match the tables, triggers that
refuse a write and a file with bytes flipped mid-file, each run through every command.

Each store is a copy of one template made once (two trained tokenizers, a warm table, an
evaluation), edited with plain ``sqlite3`` as a user at the ``sqlite3`` prompt would. On a store
whose tables are ordinary (written before revision 0013, or by another program) the edits go in,
and every command must then end with status 0 or 1, never 70 ("Internal error") nor a traceback;
a command that fails says so in one line naming the table and the column; ``bpestore check``
names every one of them. On a new (STRICT) store SQLite itself refuses the same edits.

The whole table is in the slow tier; the fast tier runs a sample of it.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from test_cli import invoke, ok
from test_damaged_rows import loosened

TEXT = "the cat sat on the mat, and then the cat ate the rat.\n" * 40

EN = "(SELECT id FROM tokenizers WHERE name = 'en')"
EN_CORPUS = "(SELECT corpus_id FROM tokenizers WHERE name = 'en')"
ROW_OF = {  # the row edited in each table: one of en's, or of its corpus
    "corpora": f"id = {EN_CORPUS}",
    "pretoken_counts": f"corpus_id = {EN_CORPUS} AND pretoken = (SELECT min(pretoken) FROM pretoken_counts WHERE corpus_id = {EN_CORPUS})",
    "packed_counts": f"corpus_id = {EN_CORPUS}",
    "corpus_files": f"corpus_id = {EN_CORPUS}",
    "tokenizers": "name = 'en'",
    "tokenizer_names": "name = 'en'",
    "vocab": f"tokenizer_id = {EN} AND token_id = 100",
    "merges": f"tokenizer_id = {EN} AND rank = 3",
    "packed_models": f"tokenizer_id = {EN}",
    "warm_caches": f"tokenizer_id = {EN}",
    "evaluations": f"tokenizer_id = {EN}",
}
JSON_SHAPES = {
    ("corpora", "special_tokens"): "array", ("tokenizers", "special_tokens"): "array", ("tokenizers", "added_tokens"): "array",
    ("tokenizers", "source_paths"): "array", ("tokenizers", "training_params"): "object", ("tokenizers", "pipeline"): "object",
}


def schema_columns() -> list[tuple[str, str, str, bool]]:
    """(table, column, declared type before 0013, NOT NULL) of every column of every table."""
    from bpestore.store import schema

    columns = []
    for table in schema.metadata.sorted_tables:
        assert table.name in ROW_OF, f"the table {table.name} has no row to edit here"
        for column in table.columns:
            columns.append((table.name, column.name, type(column.type).__name__.upper(), not column.nullable))
    return columns


def wrong_values(table: str, column: str, declared: str, not_null: bool) -> list[str]:
    """Values a STRICT table refuses in the column and an ordinary one keeps as they are (a number
    written into a TEXT column would become text there: it is not among them)."""
    if "INT" in declared:
        values = ["'x'"]
    elif "BINARY" in declared or "BLOB" in declared:
        values = ["'abc'", "7"]
    elif "FLOAT" in declared or "REAL" in declared:
        values = ["'slow'"]
    else:
        values = ["X'4142'"]
    if not_null:
        values.append("NULL")
    shape = JSON_SHAPES.get((table, column))
    if shape == "array":
        values += ["'{\"a\": 1}'", "'[1]'", "'[null]'", "'{'"]
    elif shape == "object":
        values += ["'[1,2]'", "'\"x\"'", "'{'"]
    elif "DATE" in declared or "MOMENT" in declared or column in ("created_at", "added_at"):
        values.append("'yesterday'")
    return values


ROW_CASES = [
    pytest.param(f'UPDATE {table} SET "{column}" = {value} WHERE {ROW_OF[table]}', f"{table}.{column}", id=f"{table}.{column}={value}")
    for table, column, declared, not_null in schema_columns()
    for value in wrong_values(table, column, declared, not_null)
]
SAMPLE = {  # the fast tier's share: one of each kind of column and damage
    "vocab.token='abc'", "vocab.token_id='x'", "merges.left=7", "tokenizers.created_at=X'4142'", "tokenizers.special_tokens='[null]'",
    "tokenizers.training_params='[1,2]'", "tokenizers.pattern=X'4142'", "tokenizers.version='x'", "tokenizer_names.last_version='x'",
    "warm_caches.data='abc'", "warm_caches.created_at=X'4142'", "pretoken_counts.count='x'", "evaluations.alpha='slow'", "vocab.token=NULL",
    "corpora.special_tokens='{'",
}
PACKED_CASES = [  # a packed model copy (magic, vocab count, merge count, then the u32 arrays)
    pytest.param(f"UPDATE packed_models SET data = substr(data, 1, 8) || X'FFFFFFFF' || substr(data, 13) WHERE tokenizer_id = {EN}",
                 id="packed vocab count 2**32-1"),
    pytest.param(f"UPDATE packed_models SET data = substr(data, 1, 8) || X'01000000' || X'00000000' || X'00000000' || X'FFFFFF7F' "
                 f"|| substr(data, 25) WHERE tokenizer_id = {EN}", id="packed token of length 2**31"),
    pytest.param(f"UPDATE packed_models SET data = substr(data, 1, length(data) / 2) || X'DEADBEEF' || substr(data, length(data) / 2 + 5) "
                 f"WHERE tokenizer_id = {EN}", id="packed bytes flipped"),
    pytest.param(f"UPDATE packed_models SET data = substr(data, 1, length(data) - 3) WHERE tokenizer_id = {EN}", id="packed cut short"),
    # (|| makes text of blobs: the same spoiled copies as blobs)
    pytest.param(f"UPDATE packed_models SET data = CAST(substr(data, 1, 8) || X'FFFFFFFF' || substr(data, 13) AS BLOB) WHERE tokenizer_id = {EN}",
                 id="packed vocab count 2**32-1, a blob"),
    pytest.param(f"UPDATE packed_models SET data = CAST(substr(data, 1, length(data) / 2) || X'DEADBEEF' || substr(data, length(data) / 2 + 5) "
                 f"AS BLOB) WHERE tokenizer_id = {EN}", id="packed bytes flipped, a blob"),
    pytest.param(f"UPDATE packed_counts SET data = substr(data, 1, 8) || X'FFFFFFFF' || substr(data, 13) WHERE corpus_id = {EN_CORPUS}",
                 id="packed counts count 2**32-1"),
]


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    """The template, strict and loosened, and what the commands read (a corpus, a tokenizer.json)."""
    folder = tmp_path_factory.mktemp("hostile")
    corpus, other = folder / "corpus.txt", folder / "other.txt"
    corpus.write_text(TEXT)
    other.write_text(TEXT.upper())
    strict = folder / "strict.db"
    ok(invoke("train", corpus, "--name", "en", "--vocab-size", "280", "--special-token", "<|endoftext|>", "--db", strict))
    ok(invoke("train", other, "--name", "other", "--vocab-size", "270", "--db", strict))
    ok(invoke("warm", "en", "--db", strict))
    ok(invoke("eval", "en", "--corpus", corpus, "-q", "--db", strict))
    ok(invoke("export", "other", "--format", "hf", "--output", folder / "tokenizer.json", "--db", strict))
    loose = folder / "loose.db"
    shutil.copy(strict, loose)
    loosened(loose)
    return {"strict": strict, "loose": loose, "corpus": corpus, "tokenizer.json": folder / "tokenizer.json"}


def edited(template: Path, tmp_path: Path, *statements: str) -> Path:
    db = tmp_path / "edited.db"
    shutil.copy(template, db)
    connection = sqlite3.connect(db)
    try:
        with connection:
            for statement in statements:
                connection.execute(statement)
    finally:
        connection.close()
    return db


def commands(stores: dict[str, Path], tmp_path: Path) -> list[tuple[str, ...]]:
    """Every command, readers first, then the writers (the last one deletes en)."""
    return [
        ("list",), ("list", "--json"), ("show", "en"), ("diff", "en", "other"), ("encode", "en", "-"), ("decode", "en", "1", "2"),
        ("export", "en", "--format", "hf", "--output", str(tmp_path / "out.json")),
        ("train", str(stores["corpus"]), "--name", "en", "--vocab-size", "275"),
        ("import", "hf", str(stores["tokenizer.json"]), "--name", "imported"), ("rm", "en"),
    ]


def assert_no_internal_error(result, command) -> str:
    text = result.stderr + result.stdout
    assert result.exit_code in (0, 1), f"{command}: exit {result.exit_code}: {text[:500]}"
    assert "Internal error" not in text and "Traceback" not in text, f"{command}: {text[:500]}"
    assert result.exception is None or isinstance(result.exception, SystemExit), f"{command}: {result.exception!r}"
    if result.exit_code == 1 and command[0] not in ("list", "check"):  # (check: one line per problem, on stdout)
        assert len(result.stderr.strip().splitlines()) == 1, f"{command}: {result.stderr}"
    return text


def run_row_case(stores, tmp_path, edit, column):
    try:
        db = edited(stores["loose"], tmp_path, edit)
    except sqlite3.IntegrityError as error:
        # NOT NULL and the CHECKs of known values were declared before 0013 too, and a rowid's
        # alias (an INTEGER PRIMARY KEY) holds only integers in any table: SQLite refuses these on every store
        table, name = column.split(".")
        assert (f"NOT NULL constraint failed: {column}" in str(error) or str(error) == "datatype mismatch"
                or str(error) == f"CHECK constraint failed: ck_{table}_{name}_known"), error
        return
    checked = invoke("check", "--json", "--db", db)
    assert checked.exit_code == 1 and column in checked.stdout, checked.stdout
    problems = json.loads(checked.stdout)
    assert all(set(problem) == {"where", "message"} for problem in problems)
    for command in commands(stores, tmp_path):
        result = invoke(*command, "--db", db, input="the cat\n")
        assert_no_internal_error(result, command)
        if result.exit_code == 1:
            message = result.stderr.strip()
            if command[0] == "list":  # the others are listed, the damaged one marked
                assert "DAMAGED" in message and column in message and "other" in result.stdout, message
            else:
                assert column in message and "edited.db" in message, f"{command}: {message}"


def test_the_sample_is_in_the_table():
    assert SAMPLE <= {case.id for case in ROW_CASES}


@pytest.mark.parametrize("edit, column", [case for case in ROW_CASES if case.id in SAMPLE])
def test_a_damaged_column_is_named_and_never_an_internal_error(stores, tmp_path, edit, column):
    run_row_case(stores, tmp_path, edit, column)


@pytest.mark.slow
@pytest.mark.parametrize("edit, column", [case for case in ROW_CASES if case.id not in SAMPLE])
def test_every_damaged_column_is_named_and_never_an_internal_error(stores, tmp_path, edit, column):
    run_row_case(stores, tmp_path, edit, column)


@pytest.mark.parametrize("edit, column", ROW_CASES)
def test_a_strict_store_refuses_the_same_edit_at_write_time(stores, tmp_path, edit, column):
    db = tmp_path / "strict.db"
    shutil.copy(stores["strict"], db)
    connection = sqlite3.connect(db)
    with pytest.raises(sqlite3.IntegrityError) as refused:
        with connection:
            connection.execute(edit)
    connection.close()
    # (SQLite's words: "cannot store TEXT value in BLOB column vocab.token", "NOT NULL constraint failed: ...",
    # "CHECK constraint failed: ...", a trigger's "... must be a JSON array of strings", "datatype mismatch" for a rowid)
    assert column in str(refused.value) or "constraint failed" in str(refused.value) or str(refused.value) == "datatype mismatch", refused.value


@pytest.mark.parametrize("edit", PACKED_CASES)
def test_a_spoiled_packed_copy_is_named_and_never_an_internal_error(stores, tmp_path, edit):
    db = edited(stores["loose"], tmp_path, edit)
    table = "packed_models" if "packed_models" in edit else "packed_counts"
    checked = invoke("check", "--db", db)
    assert checked.exit_code == 1, checked.stdout
    if table == "packed_models":
        assert "packed_models.data" in checked.stdout and "en@1" in checked.stdout, checked.stdout
    for command in commands(stores, tmp_path):
        result = invoke(*command, "--db", db, input="the cat\n")
        assert_no_internal_error(result, command)
        if result.exit_code == 1:
            assert f"{table}.data" in result.stderr or "packed" in result.stderr, f"{command}: {result.stderr}"


REVISION_CASES = [
    pytest.param(["UPDATE alembic_version SET version_num = '0003'"], "'0003'", id="older revision, newer tables"),
    pytest.param(["UPDATE alembic_version SET version_num = '0012'"], "STRICT", id="strict tables under the revision before them"),
    pytest.param(["UPDATE alembic_version SET version_num = '9999'"], "'9999'", id="newer than this bpestore"),
    pytest.param(["DROP TABLE warm_caches"], "warm_caches", id="a table missing"),
    pytest.param(["DROP TABLE warm_caches", "CREATE VIEW warm_caches AS SELECT 1"], "warm_caches", id="a view in a table's place"),
]


def tokenizer_rows(db: Path) -> list[tuple]:
    connection = sqlite3.connect(db)
    try:
        return [connection.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
                for table in ("tokenizers", "tokenizer_names", "vocab", "merges", "packed_models")]
    finally:
        connection.close()


def dump(db: Path) -> list[str]:
    connection = sqlite3.connect(db)
    try:
        return list(connection.iterdump())
    finally:
        connection.close()


@pytest.mark.parametrize("statements, named", REVISION_CASES)
def test_a_revision_that_does_not_match_the_tables_is_one_line_and_nothing_changes(stores, tmp_path, statements, named):
    db = edited(stores["strict"], tmp_path, *statements)
    before = dump(db)
    for command in [*commands(stores, tmp_path), ("check",)]:
        result = invoke(*command, "--db", db, input="the cat\n")
        text = assert_no_internal_error(result, command)
        assert result.exit_code == 1 and named in text, f"{command}: {text}"
        assert dump(db) == before, command  # nothing migrated, nothing half-applied


def test_check_names_a_store_at_head_whose_tables_are_not_strict(stores):
    result = invoke("check", "--db", stores["loose"])
    assert result.exit_code == 1
    assert result.stdout.count("\n") == 1 and result.stdout.startswith("store: ") and "STRICT" in result.stdout, result.stdout
    assert ok(invoke("check", "--json", "--db", stores["strict"])).strip() == "[]"


@pytest.mark.parametrize("trigger, message", [
    ("CREATE TRIGGER frozen BEFORE INSERT ON tokenizers BEGIN SELECT RAISE(ABORT, 'frozen store'); END", "frozen store"),
    ("CREATE TRIGGER no_vocab BEFORE INSERT ON vocab BEGIN SELECT RAISE(FAIL, 'no new vocab'); END", "no new vocab"),
])
@pytest.mark.parametrize("write", ["train", "import"])
def test_a_trigger_that_refuses_a_write_is_one_line_and_the_write_is_rolled_back(stores, tmp_path, trigger, message, write):
    db = edited(stores["strict"], tmp_path, trigger)
    before = dump(db)
    command = next(command for command in commands(stores, tmp_path) if command[0] == write)
    result = invoke(*command, "--db", db)
    assert_no_internal_error(result, command)
    assert result.exit_code == 1 and message in result.stderr and "rolled back" in result.stderr, result.stderr
    if write == "train":  # the corpus's counts are kept (a transaction of their own, for the next training to reuse), no tokenizer
        assert tokenizer_rows(db) == tokenizer_rows(stores["strict"])
    else:
        assert dump(db) == before


def test_a_file_with_bytes_flipped_mid_file_is_one_line_for_every_command(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"word{i} other{i * 7} thing{i % 13}\n" for i in range(20000)))
    db = tmp_path / "big.db"
    ok(invoke("train", corpus, "--name", "en", "--vocab-size", "400", "--db", db))
    (tmp_path / "other.txt").write_text(TEXT)
    ok(invoke("train", tmp_path / "other.txt", "--name", "other", "--vocab-size", "270", "--db", db))
    ok(invoke("export", "en", "--format", "hf", "--output", tmp_path / "tokenizer.json", "--db", db))
    size = db.stat().st_size
    with open(db, "r+b") as file:  # 4 bytes at the head of a page in the middle of the file (its b-tree header)
        file.seek((size // 2) // 4096 * 4096)
        file.write(b"\xde\xad\xbe\xef")
    connection = sqlite3.connect(db)
    sound = connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    connection.close()
    if sound:
        pytest.skip("the flipped bytes fell on a free page: SQLite sees no damage")
    stores = {"corpus": corpus, "tokenizer.json": tmp_path / "tokenizer.json"}
    failed = 0
    for command in [*commands(stores, tmp_path), ("check",)]:
        result = invoke(*command, "--db", db, input="the cat\n")
        text = assert_no_internal_error(result, command)
        if result.exit_code == 1:
            failed += 1
            assert "malformed" in text and "big.db" in text, f"{command}: {text}"
    assert failed  # (check, at least, reads every page)


@pytest.fixture(scope="module")
def old_store(stores, tmp_path_factory) -> Path:
    """The template as the previous schema (0012) made it: ordinary tables, recorded at 0012."""
    from alembic import command
    from alembic.config import Config

    from bpestore.store.migrate import migrations_dir

    db = tmp_path_factory.mktemp("old") / "old.db"
    shutil.copy(stores["strict"], db)
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", f"sqlite:///{db}")
    command.downgrade(config, "0012")
    return db


def test_check_reads_a_store_of_the_previous_schema_without_upgrading_it(old_store, tmp_path):
    db = edited(old_store, tmp_path, f"UPDATE vocab SET token = 'abc' WHERE {ROW_OF['vocab']}",
                "UPDATE merges SET \"left\" = 5 WHERE rank = 1 AND tokenizer_id = (SELECT id FROM tokenizers WHERE name = 'other')")
    before = dump(db)
    result = invoke("check", "--db", db)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    # every damaged row (the upgrade would name only the first), then what waits for the upgrade
    assert lines[0].startswith("en@1: ") and "vocab.token (tokenizer_id 1, token_id 100)" in lines[0], lines
    assert lines[1].startswith("other@1: ") and "merges.left" in lines[1], lines
    assert len(lines) == 3 and "'0012'" in lines[2] and "writes nothing" in lines[2], lines
    assert dump(db) == before
    # any other command upgrades it, and the upgrade refuses the first damaged row, changing nothing
    for command in [("list",), ("rm", "en")]:
        refused = invoke(*command, "--db", db)
        assert refused.exit_code == 1 and "table vocab, column token" in refused.stderr and "nothing was changed" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
        assert dump(db) == before


def test_a_sound_store_of_the_previous_schema_is_upgraded_by_the_first_command_and_then_checks_clean(old_store, tmp_path):
    db = edited(old_store, tmp_path)
    checked = invoke("check", "--json", "--db", db)
    assert checked.exit_code == 1 and ["store"] == [problem["where"] for problem in json.loads(checked.stdout)]
    assert [line.split()[0] for line in ok(invoke("list", "--db", db)).splitlines()[2:]] == ["en", "other"]
    assert json.loads(ok(invoke("check", "--json", "--db", db))) == []


def test_check_gives_each_problem_one_line(stores, tmp_path):
    db = edited(stores["loose"], tmp_path, f"UPDATE corpora SET path = X'00' WHERE {ROW_OF['corpora']}",
                f"UPDATE corpora SET total_pretokens = 3 WHERE {ROW_OF['corpora']}",
                "UPDATE tokenizers SET special_tokens = '[1]' WHERE name = 'other'")
    result = invoke("check", "--json", "--db", db)
    assert result.exit_code == 1
    found = [(problem["where"], problem["message"].split(": ", 1)[1]) for problem in json.loads(result.stdout)]
    connection = sqlite3.connect(db)
    en_corpus, other_id = (connection.execute(sql).fetchone()[0] for sql in (f"SELECT {EN_CORPUS}", "SELECT id FROM tokenizers WHERE name = 'other'"))
    distinct, total = connection.execute("SELECT count(*), sum(count) FROM pretoken_counts WHERE corpus_id = ?", (en_corpus,)).fetchone()
    connection.close()
    assert found[1:] == [  # (the first: the tables are not STRICT)
        (f"corpus {en_corpus}", f"damaged row: corpora.path (id {en_corpus}) holds a blob (b'\\x00'), not text"),
        ("other@1", f"other@1 is damaged: tokenizers.special_tokens (id {other_id}) holds JSON [1], not a JSON list of strings"),
        (f"corpus {en_corpus}", f"its row says {distinct} distinct pre-tokens and 3 in all, its stored counts hold {distinct} and {total}"),
    ], found


WEB_CASES = [
    pytest.param(f"UPDATE vocab SET token = 'abc' WHERE {ROW_OF['vocab']}", "vocab.token", ["/tokenizer?ref=en@1", "/vocab?ref=en@1&id=100"], id="vocab.token"),
    pytest.param(f"UPDATE merges SET \"left\" = 7 WHERE {ROW_OF['merges']}", "merges.left", ["/merges?ref=en@1"], id="merges.left"),
    pytest.param(f"UPDATE evaluations SET tokens = 'x' WHERE {ROW_OF['evaluations']}", "evaluations.tokens", ["/leaderboard"], id="evaluations.tokens"),
    pytest.param(f"UPDATE evaluations SET created_at = 5 WHERE {ROW_OF['evaluations']}", "evaluations.created_at", ["/leaderboard"], id="evaluations.created_at"),
    pytest.param(f"UPDATE pretoken_counts SET pretoken = 'abc' WHERE {ROW_OF['pretoken_counts']}", "pretoken_counts.pretoken",
                 ["/versions?name=en", "/diff?a=en@1&b=other@1"], id="pretoken_counts.pretoken"),
    pytest.param(PACKED_CASES[2].values[0], "packed_models.data", ["/versions?name=en", "/playground?t=en@1&text=the+cat", "/diff?a=en@1&b=other@1"],
                 id="packed bytes flipped"),
]


@pytest.mark.parametrize("edit, column, pages", WEB_CASES)
def test_the_explorer_names_a_damaged_row_on_its_page(stores, tmp_path, edit, column, pages):
    from bpestore.web import close_app, create_app

    db = edited(stores["loose"], tmp_path, edit)
    app = create_app(db, allowed_hosts=["localhost"])
    try:
        client = app.test_client()
        for page in ["/", "/tokenizer?ref=other@1", *pages]:
            response = client.get(page, headers={"Host": "localhost"})
            assert response.status_code < 500, (page, response.status_code)
            if page in pages:
                assert response.status_code == 404 and column in response.get_data(as_text=True), page
    finally:
        close_app(app)
