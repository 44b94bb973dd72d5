"""The store where it is deployed and where it is attacked (issue 13, section 2 and the store's
points of section 4): read-only stores, URLs that cannot work, mistyped paths, reads that must not
write, damaged and foreign databases, references at the edge of SQLite's integers, wrong types,
a full disk, and `bpestore --db X` / `--verbose` / `info`.

Files are compared by their bytes and modification time ("unchanged") and by the list of files in
their directory (no -wal/-shm/-journal left behind).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore import Store, Tokenizer
from bpestore.cli import main
from bpestore.errors import (
    DamagedStoreError,
    InvalidReferenceError,
    NotABpestoreDatabaseError,
    ReadOnlyStoreError,
    StoreNotFoundError,
    StoreUnavailableError,
    TokenizerNotFoundError,
)
from bpestore.store.refs import MAX_VERSION, parse_ref
from tiers import examples

# The slow tier (python3 -m pytest -m 'not slow' leaves it out): commands run as a deployment would.
pytestmark = pytest.mark.slow

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def chain_tokenizer(num_merges: int, special_tokens=("<|endoftext|>",)) -> Tokenizer:
    """Merges A+a, B+a, ..., then (A+a)+b, ...: as many as asked, all distinct."""
    vocab = {b: bytes([b]) for b in range(256)}
    merges, last = [], [bytes([65 + c]) for c in range(26)]
    for i in range(num_merges):
        left, right = last[i % 26], bytes([97 + (i // 26) % 26])
        merges.append((left, right))
        vocab[len(vocab)] = last[i % 26] = left + right
    return Tokenizer(vocab, merges, list(special_tokens))


def invoke(*args, input=None, env=None):
    environment = {"BPESTORE_DEBUG": None, "BPESTORE_DB": None}
    environment.update(env or {})
    return CliRunner().invoke(main, [str(arg) for arg in args], input=input, env=environment)


def ok(result) -> str:
    assert result.exit_code == 0, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}\n{result.exception!r}"
    return result.stdout


def one_line_error(result, *needles: str) -> str:
    assert result.exit_code == 1, f"exit {result.exit_code}, stdout {result.stdout!r}, stderr {result.stderr!r}, {result.exception!r}"
    message = result.stderr.strip()
    assert message.startswith("Error: ") and "\n" not in message and "Traceback" not in message, message
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    return message


def snapshot(directory: Path) -> dict[str, tuple[str, int]]:
    """Each file in ``directory``: the sha256 of its bytes and its mtime in ns."""
    return {
        path.name: (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
        for path in sorted(directory.iterdir())
        if path.is_file()
    }


def make_store(path: Path, journal: str = "wal") -> Tokenizer:
    tokenizer = chain_tokenizer(300)
    with Store(path) as store:
        store.save("t", tokenizer)
        store.save("t", chain_tokenizer(40))
    if journal != "wal":
        connection = sqlite3.connect(path)
        connection.execute(f"PRAGMA journal_mode = {journal}")
        connection.close()
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    return tokenizer


# -- read-only stores ---------------------------------------------------------------------------


def _remount(directory: Path, options: str) -> bool:
    return subprocess.run(["mount", "-o", f"remount,{options}", str(directory)], capture_output=True).returncode == 0


@pytest.fixture(params=["file system", "directory and file", "file"])
def read_only_store(request, tmp_path):
    """A store (``t@1``, ``t@2``) that cannot be written, and its tokenizer t@1. As root, chmod
    stops nothing: there the read-only file system is a tmpfs mounted read-only, and the other
    kinds are skipped. Not as root, the file system kind is skipped (mounting needs root)."""
    kind = request.param
    journal = getattr(request, "node", None) and request.node.callspec.params.get("journal", "wal")
    directory = tmp_path / "ro"
    directory.mkdir()
    if kind == "file system":
        if not IS_ROOT:
            pytest.skip("a read-only file system needs mount, which needs root")
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(directory)], capture_output=True).returncode:
            pytest.skip("cannot mount a tmpfs here (no CAP_SYS_ADMIN?)")
        request.addfinalizer(lambda: subprocess.run(["umount", "-l", str(directory)], capture_output=True))
        tokenizer = make_store(directory / "s.db", journal)
        assert _remount(directory, "ro"), "could not remount the tmpfs read-only"
    else:
        if IS_ROOT:
            pytest.skip("root writes read-only files and directories anyway; the file system case covers root")
        tokenizer = make_store(directory / "s.db", journal)
        (directory / "s.db").chmod(0o444)
        if kind == "directory and file":
            directory.chmod(0o555)
            request.addfinalizer(lambda: directory.chmod(0o755))
    return directory / "s.db", tokenizer


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_a_read_only_store_can_be_listed_shown_and_loaded(read_only_store, journal):
    db, tokenizer = read_only_store
    before = snapshot(db.parent)
    assert [row["ref"] for row in json.loads(ok(invoke("list", "--json", "--db", db)))] == ["t@1", "t@2"]
    assert "t@1" in ok(invoke("show", "t@1", "--db", db))
    text = "AaBa the cat<|endoftext|>AabCa"
    assert [int(i) for i in ok(invoke("encode", "t@1", "--db", db, input=text)).split()] == tokenizer.encode(text)
    assert ok(invoke("decode", "t@1", *tokenizer.encode(text), "--db", db)).rstrip("\n") == text
    loaded = Tokenizer.from_db(db, "t@1")
    assert (loaded.vocab, loaded.merges, loaded.special_tokens) == (tokenizer.vocab, tokenizer.merges, tokenizer.special_tokens)
    with Store(db) as store:
        assert store.refs() == ["t@1", "t@2"]
        assert store.load("t@1").merges == tokenizer.merges
        assert store.read_only_reason
    assert snapshot(db.parent) == before


def test_writing_to_a_read_only_store_is_one_clear_line(read_only_store, tmp_path):
    db, _ = read_only_store
    before = snapshot(db.parent)
    with Store(db) as store:
        with pytest.raises(ReadOnlyStoreError, match="cannot write to"):
            store.save("u", chain_tokenizer(5))
        with pytest.raises(ReadOnlyStoreError):
            store.delete("t@1")
        corpus = tmp_path / "corpus.txt"
        corpus.write_text("the cat sat on the mat " * 50)
        with pytest.raises(ReadOnlyStoreError):
            store.train(corpus, "c", 260)
    one_line_error(invoke("rm", "t@1", "--db", db), "cannot write to", str(db))
    one_line_error(invoke("train", corpus, "--name", "c", "--vocab-size", 260, "-q", "--db", db), "cannot write to")
    assert snapshot(db.parent) == before


CHMOD_READ_ONLY = """
import hashlib, sys
from pathlib import Path
from click.testing import CliRunner
from bpestore import Store, Tokenizer
from bpestore.cli import main
from bpestore.errors import ReadOnlyStoreError
directory, kind = Path(sys.argv[1]), sys.argv[2]
db = directory / "s.db"
tokenizer = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")], ["<|x|>"])
with Store(db) as store:
    store.save("t", tokenizer)
db.chmod(0o444)
if kind == "directory and file":
    directory.chmod(0o555)
def state():
    return sorted(p.name for p in directory.iterdir()), hashlib.sha256(db.read_bytes()).hexdigest(), db.stat().st_mtime_ns
before = state()
assert Tokenizer.from_db(db, "t").encode("abab<|x|>") == tokenizer.encode("abab<|x|>")
with Store(db) as store:
    assert store.refs() == ["t@1"] and store.load("t").merges == tokenizer.merges
    try:
        store.save("u", tokenizer)
        raise SystemExit("saved into a read-only store")
    except ReadOnlyStoreError as error:
        assert "read-only" in str(error), error
listed = CliRunner().invoke(main, ["list", "--json", "--db", str(db)])
assert listed.exit_code == 0 and '"t@1"' in listed.output, listed.output
encoded = CliRunner().invoke(main, ["encode", "t", "--db", str(db)], input="abab")
assert encoded.exit_code == 0 and encoded.output.split() == ["256", "256"], encoded.output
assert state() == before, (before, state())
directory.chmod(0o755)
print("ok")
"""


@pytest.mark.parametrize("kind", ["file", "directory and file"])
def test_chmod_read_only_stores(tmp_path, kind):
    """A read-only file, and a read-only directory and file (a WAL store there has no -shm).
    Root writes through chmod: as root the check runs without the capabilities that allow it."""
    run_where_chmod_holds(CHMOD_READ_ONLY, str(tmp_path), kind)


def run_where_chmod_holds(script: str, *args: str) -> None:
    """Runs the Python ``script`` with ``args`` in a fresh interpreter where file permissions hold
    (as root: without the capabilities that write through them, or skips when that cannot be
    done), and asserts that it printed ``ok``."""
    command = [sys.executable, "-c", script, *args]
    if IS_ROOT:
        if shutil.which("setpriv") is None:
            pytest.skip("as root, chmod stops nothing, and setpriv (to drop root's capabilities) is missing")
        command = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", *command]
    env = {key: value for key, value in os.environ.items() if key not in {"BPESTORE_DB", "BPESTORE_DEBUG"}}
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    if IS_ROOT and "Operation not permitted" in result.stderr and "setpriv" in result.stderr:
        pytest.skip("setpriv cannot drop capabilities here")
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


# -- URLs that cannot work ----------------------------------------------------------------------


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@pytest.mark.parametrize(
    "url, module",
    [
        ("postgresql://user:secret@localhost/tokenizers", ("psycopg2", "psycopg")),
        ("postgresql+psycopg2://user@localhost/tokenizers", ("psycopg2",)),
        ("mysql://x", ("MySQLdb",)),
    ],
)
def test_a_url_whose_driver_is_missing_names_the_package(url, module):
    if any(_installed(name) for name in module):
        pytest.skip(f"{module} is installed here")
    message = one_line_error(invoke("list", "--db", url), "pip install", "not installed")
    assert any(name in message for name in module)
    assert "secret" not in message
    with pytest.raises(StoreUnavailableError, match="not installed"):
        Store(url)


@pytest.mark.parametrize(
    "url, needle, error",
    [
        ("nosuchdb://x/y", "nosuchdb", StoreUnavailableError),
        ("://x", "unusable store URL", StoreUnavailableError),
        ("sqlite:////proc/version", "not a bpestore database", NotABpestoreDatabaseError),
        ("sqlite:////dev/null", "not a regular file", NotABpestoreDatabaseError),
    ],
)
def test_unusable_urls_are_one_line(url, needle, error):
    if url.startswith("sqlite:////proc") and not Path("/proc/version").exists():
        pytest.skip("no /proc here")
    for command in (["list"], ["show", "t"], ["encode", "t"], ["info"]):
        one_line_error(invoke(*command, "--db", url, input="x"), needle)
    with pytest.raises(error):
        Store(url)
    with pytest.raises(error):
        Tokenizer.from_db(url, "t")


def test_an_unreadable_file_is_not_called_a_foreign_database():
    """/proc/self/mem says "Input/output error" when read at offset 0: an I/O error, which is
    the disk's problem, not 'not a bpestore database'."""
    if not Path("/proc/self/mem").exists():
        pytest.skip("no /proc here")
    with pytest.raises(StoreUnavailableError, match="Input/output error"):
        Store("/proc/self/mem")


# -- mistyped paths create nothing ----------------------------------------------------------------

READS = [
    ["list"],
    ["show", "t"],
    ["encode", "t"],
    ["decode", "t", "1"],
    ["diff", "t@1", "t@2"],
    ["export", "t", "--format", "hf", "--output", "{out}"],
    ["rm", "t@1"],
    ["info"],
]


@pytest.mark.parametrize("command", READS, ids=lambda c: c[0])
def test_a_read_of_a_mistyped_path_says_there_is_no_store(tmp_path, command):
    missing = tmp_path / "tokenizres.db"
    args = [arg.format(out=tmp_path / "out.json") for arg in command]
    one_line_error(invoke(*args, "--db", missing, input="hello"), "no store at", str(missing.name))
    assert list(tmp_path.iterdir()) == []


def test_python_reads_of_a_missing_or_empty_file_create_nothing(tmp_path):
    missing, empty = tmp_path / "missing.db", tmp_path / "empty.txt"
    empty.touch()
    before = snapshot(tmp_path)
    for path in (missing, empty):
        with pytest.raises(StoreNotFoundError, match="no store at"):
            Tokenizer.from_db(path, "t")
        with pytest.raises(FileNotFoundError):  # a StoreNotFoundError is one too
            Tokenizer.from_db(str(path), "t@1")
        with pytest.raises(StoreNotFoundError):
            Store(path, create=False)
        one_line_error(invoke("list", "--db", path), "no store at")
    assert snapshot(tmp_path) == before


def test_writes_create_the_store(tmp_path):
    vocab, merges = tmp_path / "vocab.json", tmp_path / "merges.txt"
    tokenizer = chain_tokenizer(30, special_tokens=())
    from bpestore import formats

    formats.export(tokenizer, "gpt2", tmp_path)
    assert vocab.exists() and merges.exists()
    ok(invoke("import", "gpt2", vocab, merges, "--name", "g", "--db", tmp_path / "new.db"))
    assert Tokenizer.from_db(tmp_path / "new.db", "g").merges == tokenizer.merges


# -- reads never change a file --------------------------------------------------------------------


def _database(path: Path, journal: str, statements: list[str]) -> None:
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA journal_mode = {journal}")
    for statement in statements:
        connection.execute(statement)
    connection.commit()
    connection.close()


FOREIGN = {
    "only-a-view": ["CREATE VIEW answer AS SELECT 42 AS value"],
    "only-an-index-and-a-table": ["CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)", "CREATE INDEX ix ON notes (text)"],
    "user-version-only": ["PRAGMA user_version = 7", "CREATE TABLE t (x)", "DROP TABLE t"],
}


@pytest.mark.parametrize("journal", ["delete", "wal"])
@pytest.mark.parametrize("name", sorted(FOREIGN))
def test_reads_of_a_foreign_database_change_nothing(tmp_path, name, journal):
    db = tmp_path / "foreign.db"
    _database(db, journal, FOREIGN[name])
    before = snapshot(tmp_path)
    for command in (["list"], ["show", "t"], ["info"]):
        result = invoke(*command, "--db", db)
        assert result.exit_code == 1 and "Traceback" not in result.stderr, result.stderr
    with pytest.raises((NotABpestoreDatabaseError, StoreNotFoundError)):
        Tokenizer.from_db(db, "t")
    assert snapshot(tmp_path) == before, "a read changed or created files"


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_reads_of_a_store_change_nothing(tmp_path, journal):
    db = tmp_path / "s.db"
    make_store(db, journal)
    before = snapshot(tmp_path)
    ok(invoke("list", "--db", db))
    ok(invoke("show", "t", "--db", db))
    ok(invoke("encode", "t", "--db", db, input="AaBa"))
    ok(invoke("-v", "info", "--db", db))
    Tokenizer.from_db(db, "t@1")
    assert snapshot(tmp_path) == before


# -- damaged and foreign databases ----------------------------------------------------------------

DAMAGE = {
    "tokenizers-is-a-recursive-view": (
        [
            "ALTER TABLE tokenizers RENAME TO old_tokenizers",
            "CREATE VIEW tokenizers AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
            "SELECT n AS id, 't' AS name, n AS version, 0 AS created_at, 256 AS vocab_size, '' AS pattern, '[]' AS special_tokens, "
            "'pair' AS merge_rule, NULL AS corpus_id, NULL AS training_params, NULL AS training_seconds, 'x' AS source, "
            "NULL AS source_format, NULL AS source_paths FROM r",
        ],
        DamagedStoreError,
        "tokenizers should be a table, not a view",
    ),
    "merges-dropped": (["DROP VIEW merges_readable", "DROP TABLE merges"], DamagedStoreError, "table merges is missing"),
    "empty-alembic-version": (["DELETE FROM alembic_version"], DamagedStoreError, "alembic_version is empty"),
    "two-revisions": (["INSERT INTO alembic_version VALUES ('0002')"], DamagedStoreError, "several schema revisions"),
    "a-column-dropped": (["DROP VIEW vocab_readable", "DROP VIEW merges_readable", "ALTER TABLE vocab DROP COLUMN text"], DamagedStoreError, "lacks column text"),
}


def _run_python(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """In a child process, so that a hang fails the test instead of stopping the suite."""
    env = {key: value for key, value in os.environ.items() if key not in {"BPESTORE_DB", "BPESTORE_DEBUG"}}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout, env=env)


OPEN_AND_REPORT = """
import sys
from bpestore import Store, Tokenizer
for attempt in (lambda: Tokenizer.from_db(sys.argv[1], "t"), lambda: Store(sys.argv[1]).list(), lambda: Store(sys.argv[1]).load("t")):
    try:
        attempt()
        print("no error")
    except Exception as error:
        print(type(error).__name__, error)
"""


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_store_is_refused_with_its_reason_and_left_untouched(tmp_path, damage):
    statements, error, needle = DAMAGE[damage]
    db = tmp_path / "s.db"
    make_store(db, "delete")
    _database(db, "delete", statements)
    before = snapshot(tmp_path)
    result = _run_python(OPEN_AND_REPORT, str(db))
    lines = result.stdout.splitlines()
    assert len(lines) == 3, result.stderr
    if damage == "a-column-dropped":  # from_db reads no such column, and gets the tokenizer right
        lines = lines[1:]
    for line in lines:
        assert line.startswith(error.__name__) and needle in line, line
    one_line_error(invoke("list", "--db", db), needle)
    assert snapshot(tmp_path) == before


ALEMBIC_VERSION = "CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)"


@pytest.mark.parametrize("revision", ["0001", "0003", "3fa2b1c0d9e8"])
def test_another_applications_alembic_database_is_not_called_a_bpestore_store(tmp_path, revision):
    """Alembic revisions such as '0001' are common: the revision alone does not make a database
    bpestore's."""
    db = tmp_path / "app.db"
    _database(db, "delete", [ALEMBIC_VERSION, f"INSERT INTO alembic_version VALUES ('{revision}')", "CREATE TABLE users (id INTEGER PRIMARY KEY)"])
    before = snapshot(tmp_path)
    with pytest.raises(NotABpestoreDatabaseError, match="another application's alembic database") as raised:
        Store(db)
    assert "older" not in str(raised.value) and "upgrade" not in str(raised.value)
    with pytest.raises(NotABpestoreDatabaseError):
        Tokenizer.from_db(db, "t")
    one_line_error(invoke("list", "--db", db), "another application's alembic database", "users")
    assert snapshot(tmp_path) == before


# -- references -----------------------------------------------------------------------------------


def test_versions_beyond_sqlites_integers(tmp_path):
    db = tmp_path / "s.db"
    make_store(db)
    for ref in ("t@99999999999999999999999", f"t@{MAX_VERSION + 1}", "t@" + "9" * 5000):
        with pytest.raises(InvalidReferenceError, match="VERSION from 1 to"):
            Tokenizer.from_db(db, ref)
        with Store(db) as store:
            with pytest.raises(InvalidReferenceError):
                store.load(ref)
        one_line_error(invoke("show", ref, "--db", db), "not a tokenizer reference")
    with pytest.raises(TokenizerNotFoundError, match="has no version"):
        Tokenizer.from_db(db, f"t@{MAX_VERSION}")
    assert Tokenizer.from_db(db, "t@0001").merges == chain_tokenizer(300).merges


@settings(max_examples=examples(150), deadline=None)
@given(st.text(st.characters(codec=None), max_size=30) | st.from_regex(r"[a-z]{1,3}@[0-9]{0,25}", fullmatch=True))
def test_any_text_is_a_reference_or_a_clear_error(ref):
    try:
        name, version = parse_ref(ref)
    except InvalidReferenceError:
        return
    assert ref == (name if version is None else f"{name}@{ref.partition('@')[2]}")
    assert version is None or 1 <= version <= MAX_VERSION
    name.encode("utf-8")  # storable


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("refs") / "s.db"
    make_store(db)
    return db


@settings(max_examples=examples(100), deadline=None)
@given(st.text(max_size=20) | st.from_regex(r"t@[0-9]{1,25}", fullmatch=True) | st.sampled_from(["t", "t@1", "t@2", "t\udc80", "t@\u0661"]))
def test_loading_any_reference_gives_a_tokenizer_or_a_clear_error(small_store, ref):
    for load in (lambda: Tokenizer.from_db(small_store, ref), lambda: Store(small_store, create=False).load(ref)):
        try:
            tokenizer = load()
        except (InvalidReferenceError, TokenizerNotFoundError):
            continue
        assert ref in ("t", "t@1", "t@2") or ref.lstrip("t@0") in ("1", "2")
        assert tokenizer.vocab_size > 256


def test_wrong_types_are_a_clear_type_error(small_store):
    with pytest.raises(TypeError, match="str.*not NoneType"):
        Tokenizer.from_db(small_store, None)
    with Store(small_store) as store:
        with pytest.raises(TypeError, match="not int"):
            store.load(5)
        with pytest.raises(TypeError):
            store.info(b"t")
    with pytest.raises(TypeError, match="not int"):
        Store(5)
    with pytest.raises(TypeError, match="not NoneType"):
        Tokenizer.from_db(None, "t")


# -- a full disk ------------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MB tmpfs (root only), removed afterwards."""
    if not IS_ROOT:
        pytest.skip("mounting a small tmpfs to fill needs root")
    directory = tmp_path / "small"
    directory.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(directory)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (no CAP_SYS_ADMIN?)")
    yield directory
    subprocess.run(["umount", "-l", str(directory)], capture_output=True)


def fill(directory: Path) -> None:
    status = os.statvfs(directory)
    with open(directory / "filler", "wb") as file:
        try:
            file.write(b"\0" * (status.f_bavail * status.f_frsize))
        except OSError:
            pass
    assert os.statvfs(directory).f_bavail == 0


def test_a_full_disk_during_a_save_or_an_import_is_one_line_and_stores_nothing(small_disk, tmp_path):
    db = small_disk / "s.db"
    make_store(db)
    big = chain_tokenizer(3_000, special_tokens=())
    from bpestore import formats

    formats.export(big, "hf", tmp_path / "big.json")
    store = Store(db)  # opened before the disk fills up, as a long-running program would have it
    fill(small_disk)
    with pytest.raises(StoreUnavailableError, match="the disk is full; nothing was written"):
        store.save("big", big)
    assert store.refs() == ["t@1", "t@2"]
    corpus = tmp_path / "corpus.txt"  # on the big disk: training reads it, the store's writes fail
    corpus.write_text(" ".join(f"w{i} w{i % 97}x w{i % 13}yz" for i in range(5_000)))
    with pytest.raises(StoreUnavailableError, match="the disk is full; nothing was written"):
        store.train(corpus, "c", [400, 600])
    assert store.refs() == ["t@1", "t@2"]
    store.close()
    one_line_error(invoke("import", "hf", tmp_path / "big.json", "--name", "big", "--db", db), "disk is full")
    one_line_error(invoke("train", corpus, "--name", "c", "--vocab-size", 400, "-q", "--db", db), "disk is full")
    (small_disk / "filler").unlink()
    with Store(db) as reopened:
        assert reopened.refs() == ["t@1", "t@2"]
        assert reopened.load("t@1").merges == chain_tokenizer(300).merges
    assert Tokenizer.from_db(db, "t@2").merges == chain_tokenizer(40).merges


# -- bpestore --db X CMD, --verbose, info ----------------------------------------------------------


def test_db_before_the_command_works_like_after(tmp_path):
    db, other, env_db = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "env.db"
    for path, name in ((db, "a"), (other, "b"), (env_db, "e")):
        with Store(path) as store:
            store.save(name, chain_tokenizer(3))
    names = lambda out: [row["name"] for row in json.loads(out)]  # noqa: E731
    assert names(ok(invoke("--db", db, "list", "--json"))) == ["a"]
    assert names(ok(invoke("list", "--json", "--db", db))) == ["a"]
    assert names(ok(invoke("list", "--json", env={"BPESTORE_DB": str(env_db)}))) == ["e"]
    assert names(ok(invoke("--db", db, "list", "--json", env={"BPESTORE_DB": str(env_db)}))) == ["a"]  # --db beats the environment
    assert names(ok(invoke("--db", db, "list", "--json", "--db", other))) == ["b"]  # the command's own --db wins
    assert ok(invoke("--db", db, "encode", "a", input="AaB")).split() == [str(i) for i in chain_tokenizer(3).encode("AaB")]
    ok(invoke("--db", tmp_path / "new.db", "import", "hf", _hf_file(tmp_path), "--name", "h"))
    assert Tokenizer.from_db(tmp_path / "new.db", "h").merges == chain_tokenizer(3).merges


def _hf_file(tmp_path: Path) -> Path:
    from bpestore import formats

    formats.export(chain_tokenizer(3), "hf", tmp_path / "tok.json")
    return tmp_path / "tok.json"


def test_verbose_and_info_say_which_store(tmp_path):
    db = tmp_path / "s.db"
    make_store(db)
    result = invoke("--verbose", "list", "--db", db)
    ok(result)
    line = result.stderr.strip()
    assert str(db) in line and "schema revision" in line and "2 tokenizers" in line and "writable" in line
    out = ok(invoke("--db", db, "info"))
    assert str(db) in out and "2 (1 names)" in out
    data = json.loads(ok(invoke("info", "--json", "--db", db)))
    assert data["location"] == str(db) and data["tokenizers"] == 2 and data["exists"] and data["read_only_reason"] is None
    revision = sqlite3.connect(db).execute("SELECT version_num FROM alembic_version").fetchone()[0]
    assert data["schema_revision"] == revision
    result = invoke("-v", "train", _hf_file(tmp_path), "--name", "x", "--vocab-size", 257, "-q", "--db", tmp_path / "fresh.db")
    assert "no store there yet" in result.stderr


# -- concurrency: creating one store from several processes at once --------------------------------

CREATOR = """
import sys, time
from pathlib import Path
from bpestore import Store, Tokenizer
db, me, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
directory = Path(db).parent / "barrier"
(directory / f"ready-{me}").touch()
while len(list(directory.glob("ready-*"))) < count:
    time.sleep(0.001)
with Store(db) as store:
    store.save("t", Tokenizer({b: bytes([b]) for b in range(256)}, []))
print("ok")
"""


def test_many_processes_create_one_new_store_at_once(tmp_path):
    """Before, switching the new file to WAL in every connection failed now and then with
    "database is locked" (the journal-mode switch does not wait on the busy timeout)."""
    directory = tmp_path
    (directory / "barrier").mkdir()
    db = directory / "s.db"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    processes = [
        subprocess.Popen([sys.executable, "-c", CREATOR, str(db), str(me), "4"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for me in range(4)
    ]
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0 and out.strip() == "ok", err[-1500:]
    with Store(db) as store:
        assert store.refs() == [f"t@{v}" for v in range(1, 5)]
    header = db.read_bytes()[:20]
    assert header[18] == 2, "the new store is not in WAL mode"
