"""Hostile input to the commands that reshape a tokenizer and carry ids over (trim, add-tokens,
remap), count into a stored corpus (count add) and evaluate (eval): every case is one line, exit 1
(usage errors: 2), and never a tokenizer stored without its id map, a map overwritten by its own
output, or a result that is not a number.
"""

from __future__ import annotations

import gzip
import json
import lzma
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bpestore import Store
from test_cli import ENDOFTEXT, corpus_text, invoke, ok, write_text


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """``store.db`` with ``ts`` (vocab 340, trained on ``text.txt``), and ``ids.npy``: ids of ``ts``."""
    directory = tmp_path_factory.mktemp("reshape-hostile")
    write_text(directory / "text.txt", corpus_text(seed=41, words=3000))
    with Store(directory / "store.db") as store:
        assert store.train(directory / "text.txt", "ts", 340, [ENDOFTEXT]) == ["ts@1"]
    ok(invoke("encode", "ts", directory / "text.txt", "--output", directory / "ids.npy", "--db", directory / "store.db"))
    return directory


@pytest.fixture
def db(data, tmp_path) -> Path:
    copy = tmp_path / "store.db"
    copy.write_bytes((data / "store.db").read_bytes())
    return copy


def refs(db: Path) -> list[str]:
    with Store(db, create=False) as store:
        return store.refs()


def one_error_line(result, status: int = 1) -> str:
    assert result.exit_code == status, (result.exit_code, result.stdout, result.stderr, result.exception)
    lines = result.stderr.strip().splitlines()
    assert lines and "Traceback" not in result.stderr and "Internal error" not in result.stderr, result.stderr
    if status == 1:
        assert len(lines) == 1, result.stderr
    return lines[-1]


# -- the version and its id map: both or neither -------------------------------------------------------

def _directory_in_place(tmp_path: Path, suffix: str) -> str:
    (tmp_path / f"m{suffix}").mkdir()
    return str(tmp_path / "m")


def _device_in_place(tmp_path: Path, suffix: str) -> str:
    (tmp_path / f"m{suffix}").symlink_to("/dev/null")  # a character device behind the name
    return str(tmp_path / "m")


def _name_too_long(tmp_path: Path, suffix: str) -> str:
    return str(tmp_path / ("x" * 300))


MAP_TARGETS = [
    ("a directory named PREFIX.npy", _directory_in_place, ".npy", "Is a directory"),
    ("a directory named PREFIX.json", _directory_in_place, ".json", "Is a directory"),
    ("a device behind PREFIX.npy", _device_in_place, ".npy", "not a regular file"),
    ("a 300-character prefix", _name_too_long, "", "too long"),
]
RESHAPES = [("trim", ["trim", "ts@1", "--vocab-size", "320"]), ("add-tokens", ["add-tokens", "ts@1", "hello world"])]


@pytest.mark.parametrize("command, args", RESHAPES, ids=[row[0] for row in RESHAPES])
@pytest.mark.parametrize("case, make, suffix, words", MAP_TARGETS, ids=[row[0] for row in MAP_TARGETS])
def test_a_map_that_cannot_be_written_stores_no_version(db, tmp_path, command, args, case, make, suffix, words):
    prefix = make(tmp_path, suffix)
    before = sorted(os.listdir(tmp_path))
    line = one_error_line(invoke(*args, "--map-out", prefix, "--db", db))
    assert words in line and "nothing was stored" in line, line
    assert refs(db) == ["ts@1"]
    assert sorted(os.listdir(tmp_path)) == before  # no map file, no partial file left


@pytest.mark.parametrize("command, args", RESHAPES, ids=[row[0] for row in RESHAPES])
def test_a_version_and_its_map_appear_together(db, tmp_path, command, args):
    result = invoke(*args, "--map-out", tmp_path / "m", "--db", db)
    ok(result)
    assert refs(db) == ["ts@1", "ts@2"]
    stored = json.loads((tmp_path / "m.json").read_text())
    assert stored["from"] == "ts@1" and stored["to"] == "ts@2"
    assert np.load(tmp_path / "m.npy").dtype == np.int64


def test_a_megabyte_long_added_token_is_added_and_named_shortly(db, tmp_path):
    # Building the special-token automaton was quadratic in a repetitive token's length (16 KB:
    # seconds; this one: hours): the child's timeout is a hang guard, not a speed threshold.
    script = (
        "import sys\nfrom bpestore import Store\n"
        "with Store(sys.argv[1]) as store:\n"
        "    print(store.add_tokens('ts@1', ['ab' * 500_000], 'long')[0])\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(db)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "long@1", done.stderr
    token = "ab" * 60_000
    line = one_error_line(invoke("add-tokens", "ts@1", token, token, "--db", db))
    assert "given twice" in line and "(120,000 characters)" in line and len(line) < 200, line


# -- remap: maps that are not what they claim, outputs that are inputs ----------------------------

@pytest.fixture
def id_map(db, tmp_path) -> Path:
    ok(invoke("trim", "ts@1", "--vocab-size", "330", "--map-out", tmp_path / "m", "--db", db))
    return tmp_path / "m"


def _edit_json(path: Path, change) -> Path:
    data = json.loads(path.read_text())
    change(data)
    edited = path.with_name("edited.json")
    edited.write_text(json.dumps(data))
    return edited


def _first_key(data: dict) -> str:
    return next(iter(data["map"]))


BAD_MAPS = [
    ("a .npy with an id past 2**32", lambda m: _npy_big(m), "above the largest token id"),
    ("a .npy of floats", lambda m: _npy_save(m.with_name("bad.npy"), np.load(m.with_suffix(".npy")).astype(np.float64)), "not integer"),
    ("a .npy edited beside its .json", lambda m: _npy_swapped(m), "checksum"),
    ("a .json value 1.5 (checksum removed)", lambda m: _edit_json(m.with_suffix(".json"), lambda d: (d.pop("sha256"), d["map"].__setitem__(_first_key(d), 1.5))),
     "1.5 is not an integer id"),
    ("a .json value edited", lambda m: _edit_json(m.with_suffix(".json"), lambda d: d["map"].__setitem__(_first_key(d), d["map"][_first_key(d)] + 1)),
     "checksum"),
    ("a .json with Infinity", lambda m: _text(m, m.with_suffix(".json").read_text().replace('": ', '": Infinity, "x": ', 1)), "Infinity"),
    ("a .json nested 100,000 deep", lambda m: _text(m, "[" * 100_000), "nested too deeply"),
]


def _npy_save(path: Path, array) -> Path:
    np.save(path, array)
    return path


def _npy_big(prefix: Path) -> Path:
    array = np.load(prefix.with_suffix(".npy")).astype(np.uint64)
    array[0] = 2**32 + 69  # wrapped into uint32, this was id 69
    return _npy_save(prefix.with_name("bad.npy"), array)


def _npy_swapped(prefix: Path) -> Path:
    """The map's own .npy with two entries swapped: its .json beside it holds the checksum."""
    array = np.load(prefix.with_suffix(".npy"))
    array[[1, 2]] = array[[2, 1]]
    return _npy_save(prefix.with_suffix(".npy"), array)


def _text(prefix: Path, text: str) -> Path:
    target = prefix.with_name("bad.json")
    target.write_text(text)
    return target


@pytest.mark.parametrize("case, make, words", BAD_MAPS, ids=[row[0] for row in BAD_MAPS])
def test_a_map_that_is_not_what_it_claims_is_refused_in_one_line(data, id_map, tmp_path, case, make, words):
    bad = make(id_map)
    line = one_error_line(invoke("remap", bad, data / "ids.npy", "-o", tmp_path / "out.npy"))
    assert words in line and str(bad.name) in line, line
    assert not (tmp_path / "out.npy").exists()


@pytest.mark.parametrize("output", ["m.json", "m.npy", "ids.npy"])
def test_remap_never_writes_over_one_of_its_inputs(data, id_map, tmp_path, output):
    ids = tmp_path / "ids.npy"
    ids.write_bytes((data / "ids.npy").read_bytes())
    before = {name: (tmp_path / name).read_bytes() for name in ("m.json", "m.npy", "ids.npy")}
    line = one_error_line(invoke("remap", id_map.with_suffix(".json"), ids, "-o", tmp_path / output))
    assert "may not be one of the inputs" in line
    assert {name: (tmp_path / name).read_bytes() for name in before} == before


def test_remap_to_dash_writes_the_npy_to_stdout(data, id_map, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("remap", id_map.with_suffix(".json"), data / "ids.npy", "-o", "-")
    assert result.exit_code == 0, result.stderr
    import io

    remapped = np.load(io.BytesIO(result.stdout_bytes))
    assert len(remapped) >= len(np.load(data / "ids.npy"))
    assert not (tmp_path / "-").exists()


# -- count add, train: inputs that cannot be read, numbers that do not fit --------------------------

def _truncated(tmp_path: Path, suffix: str, compress) -> Path:
    path = tmp_path / f"cut{suffix}"
    whole = compress(("word " * 20_000).encode())
    path.write_bytes(whole[: len(whole) // 2])
    return path


def _zstd(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(data)


COMPRESSED = [
    ("not gzip data", lambda t: _bytes(t / "bad.txt.gz", b"not gzip data at all"), "bad.txt.gz"),
    ("a truncated .gz", lambda t: _truncated(t, ".txt.gz", gzip.compress), "cut.txt.gz"),
    ("a truncated .xz", lambda t: _truncated(t, ".txt.xz", lzma.compress), "cut.txt.xz"),
    ("a truncated .zst", lambda t: _truncated(t, ".txt.zst", _zstd), "cut.txt.zst"),
    ("not zstd data", lambda t: _bytes(t / "bad.txt.zst", b"garbage!!"), "bad.txt.zst"),
]


def _bytes(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


@pytest.mark.parametrize("case, make, name", COMPRESSED, ids=[row[0] for row in COMPRESSED])
@pytest.mark.parametrize("command", ["count add", "train"])
def test_a_compressed_input_that_cannot_be_decompressed_is_named_with_its_offset(db, tmp_path, case, make, name, command):
    path = make(tmp_path)
    args = ["count", "add", "ts@1", path] if command == "count add" else ["train", path, "--name", "z", "--vocab-size", "300"]
    line = one_error_line(invoke(*args, "--db", db))
    assert name in line and "cannot decompress it at byte" in line, line
    assert refs(db) == ["ts@1"]


def test_numbers_past_64_bits_are_refused_not_overflowed(db, data):
    line = one_error_line(invoke("count", "add", str(2**64), data / "text.txt", "--db", db))
    assert f"no corpus {2**64}" in line
    line = one_error_line(invoke("train", data / "text.txt", "--name", "x", "--vocab-size", "300", "--min-count", str(2**64), "--db", db), 2)
    assert "--min-count" in line


# -- eval: finite results, outputs checked before anything is stored ------------------------------

def test_eval_with_a_huge_alpha_gives_a_finite_efficiency(db, data):
    result = invoke("eval", "ts@1", "--corpus", data / "text.txt", "--alpha", "1e308", "--json", "--db", db)
    rows = json.loads(ok(result))["rows"]
    efficiency = rows[0]["renyi_efficiency"]
    assert efficiency is not None and np.isfinite(efficiency) and 0 < efficiency <= 1
    assert "RuntimeWarning" not in result.stderr


@pytest.mark.parametrize("make", [lambda t: (t / "d.csv").mkdir() or t / "d.csv", lambda t: t / "no-such-dir" / "x.csv"], ids=["a directory", "no directory"])
def test_eval_with_a_csv_that_cannot_be_written_stores_nothing(db, data, tmp_path, make):
    csv = make(tmp_path)
    one_error_line(invoke("eval", "ts@1", "--corpus", data / "text.txt", "--csv", csv, "--db", db))
    with Store(db, create=False) as store:
        assert store.evaluations("ts@1") == []


# -- inputs that are pipes, outputs that were private or links --------------------------------------

def test_encode_reads_a_named_pipe_and_dev_null(data, tmp_path):
    import threading

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    text = (data / "text.txt").read_bytes()

    def feed() -> None:
        with open(fifo, "wb") as pipe:
            pipe.write(text)

    writer = threading.Thread(target=feed)
    writer.start()
    from_pipe = invoke("encode", "ts", fifo, "--output", tmp_path / "pipe.npy", "--db", data / "store.db")
    writer.join(timeout=30)
    ok(from_pipe)
    assert np.array_equal(np.load(tmp_path / "pipe.npy"), np.load(data / "ids.npy"))
    ok(invoke("encode", "ts", "/dev/null", "--output", tmp_path / "null.npy", "--db", data / "store.db"))
    assert len(np.load(tmp_path / "null.npy")) == 0
    assert ok(invoke("encode", "ts", "/dev/null", "--db", data / "store.db")).strip() == ""


@pytest.mark.parametrize("name", ["o.ids", "o.npy"])
def test_an_output_replaced_keeps_its_mode_and_a_link_is_written_through(data, tmp_path, name):
    output = tmp_path / name
    output.write_text("old")
    output.chmod(0o600)
    ok(invoke("encode", "ts", data / "text.txt", "--output", output, "--db", data / "store.db"))
    assert (output.stat().st_mode & 0o777) == 0o600
    link = tmp_path / f"link-{name}"
    link.symlink_to(output.name)
    ok(invoke("encode", "ts", data / "text.txt", "--output", link, "--db", data / "store.db"))
    assert link.is_symlink() and (output.stat().st_mode & 0o777) == 0o600


# -- one way to say each thing ------------------------------------------------------------------------

def test_every_output_reports_the_same_way(data, tmp_path):
    for name in ("ids.txt", "ids.npy"):
        result = invoke("encode", "ts", data / "text.txt", "--output", tmp_path / name, "--db", data / "store.db")
        assert result.exit_code == 0
        count = len(np.load(data / "ids.npy"))
        assert result.stderr.strip() == f"wrote {count:,} ids to {tmp_path / name}"


def test_help_shows_no_markup_and_a_missing_store_has_one_wording(tmp_path):
    from test_cli import EXPECTED_COMMANDS

    for path in EXPECTED_COMMANDS:
        assert "``" not in ok(invoke(*path, "--help")), path
    missing = tmp_path / "missing.db"
    listed = invoke("list", "--db", missing)
    assert listed.exit_code == 1 and f"no store at {missing}" in listed.stderr
    pytest.importorskip("flask")
    from bpestore.errors import StoreNotFoundError
    from bpestore.web.data import ReadOnlyStore

    with pytest.raises(StoreNotFoundError, match=f"^no store at {missing}"):  # what `serve` says
        ReadOnlyStore(str(missing))


def test_a_training_that_reproduces_a_stored_version_says_so(data, tmp_path):
    db = tmp_path / "t.db"
    args = ["train", data / "text.txt", "--name", "t", "--vocab-size", "300", "--db", db]
    first = invoke(*args)
    assert first.exit_code == 0 and "identical" not in first.stderr
    again = invoke(*args)
    assert again.exit_code == 0 and "note: t@2 is identical to t@1" in again.stderr, again.stderr
    other = invoke("train", data / "text.txt", "--name", "t", "--vocab-size", "310", "--db", db)
    assert "identical" not in other.stderr


@pytest.mark.slow
def test_ctrl_c_at_any_moment_of_a_trim_leaves_both_or_neither(data, tmp_path):
    """SIGINT at random moments of `trim --map-out`: after each run, either the new version and
    both map files exist, or none of them (and no partial file): never a version without its map.
    Repeated until at least two runs were interrupted (status 130)."""
    import random
    import signal
    import time

    from test_cli import find_executable, subprocess_env

    executable = find_executable()
    rng = random.Random(7)
    interrupted = 0
    for attempt in range(40):
        folder = tmp_path / f"run{attempt}"
        folder.mkdir()
        db = folder / "store.db"
        db.write_bytes((data / "store.db").read_bytes())
        process = subprocess.Popen([executable, "trim", "ts@1", "--vocab-size", "320", "--map-out", str(folder / "m"), "--db", str(db)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env())
        time.sleep(rng.uniform(0.2, 1.2))
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode in (0, 130), (process.returncode, stderr.decode())
        assert b"Traceback" not in stderr, stderr.decode()
        stored = refs(db) == ["ts@1", "ts@2"]
        maps = [(folder / "m.npy").exists(), (folder / "m.json").exists()]
        assert maps == [stored, stored], (attempt, process.returncode, stored, maps, stderr.decode())
        assert not [name for name in os.listdir(folder) if name.endswith(".partial")]
        interrupted += process.returncode == 130
        if interrupted >= 2 and attempt >= 5:
            break
    assert interrupted >= 2, f"only {interrupted} of {attempt + 1} runs were interrupted"


def test_what_a_killed_map_writer_left_is_removed_by_the_next(db, tmp_path):
    """SIGKILL can be neither caught nor undone: a trim killed while it wrote its id map leaves
    its hidden .partial files. The next map written there removes those whose process is gone
    (and keeps one of a writer still running)."""
    killed = subprocess.Popen([sys.executable, "-c", "pass"])
    killed.wait()  # (a process id that no longer runs)
    stale = [tmp_path / f".idmap{suffix}.{killed.pid}-00c0ffee.partial" for suffix in (".npy", ".json")]
    running = tmp_path / f".idmap.npy.{os.getpid()}-0badcafe.partial"
    for path in [*stale, running]:
        path.write_bytes(b"half")
    ok(invoke("trim", "ts@1", "--vocab-size", "300", "--map-out", tmp_path / "map", "--db", db))
    assert (tmp_path / "map.npy").is_file() and (tmp_path / "map.json").is_file()
    assert not any(path.exists() for path in stale)
    assert running.exists()
