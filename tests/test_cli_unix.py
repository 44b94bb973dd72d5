"""The command line as a Unix tool: exact bytes through pipes, closed pipes, Ctrl-C, kill -9,
failed and interrupted writes, one-line errors.

Most tests run the installed ``bpestore`` executable in a subprocess, since signals, closed pipes
and exit statuses are only real there; the property tests use click's ``CliRunner`` with bytes.
Expected values come from the tokenizer's vocabulary or from the input itself, never from the
code under test.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpestore import Store, formats
from bpestore.train.trainer import VocabSizeNotReachedWarning
from strategies import texts
from test_cli import ENDOFTEXT, corpus_text, find_executable, invoke, load, subprocess_env, write_text
from tiers import examples

# The slow tier (python3 -m pytest -m 'not slow' leaves it out): commands run, killed and interrupted.
pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and pipes")]

INTERRUPTED = 130  # 128 + SIGINT
CLOSED_PIPE = 141  # 128 + SIGPIPE


@pytest.fixture(scope="module")
def bpestore() -> str:
    return find_executable()


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """ts@1 (vocab 400, with <|endoftext|>) trained on a small corpus with accents, CJK and emoji,
    so that some tokens hold part of a UTF-8 character."""
    directory = tmp_path_factory.mktemp("unix")
    corpus = write_text(directory / "corpus.txt", corpus_text(seed=11, words=8000))
    db = directory / "store.db"
    with Store(db) as opened, warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabSizeNotReachedWarning)  # (a small corpus: not the subject)
        assert opened.train(corpus, "ts", 400, [ENDOFTEXT]) == ["ts@1"]
    return db


@pytest.fixture(scope="module")
def big_input(tmp_path_factory) -> Path:
    """About 1 MB of text: its ids (as text) are several times a pipe's buffer."""
    return write_text(tmp_path_factory.mktemp("big") / "big.txt", corpus_text(seed=12, words=200_000))


def run(bpestore: str, *args, input: bytes | None = None, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([bpestore, *map(str, args)], input=input, capture_output=True, env=subprocess_env(), cwd=cwd, timeout=timeout)


def one_line_error(stderr: bytes, *needles: str) -> str:
    message = stderr.decode("utf-8", errors="replace").strip()
    assert message and "\n" not in message, f"expected one line on stderr, got:\n{message}"
    assert "Traceback" not in message and "Exception ignored" not in message
    for needle in needles:
        assert needle in message, (needle, message)
    return message


def entries(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


# -- decode writes exactly the bytes ------------------------------------------------------------


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts(max_pieces=20))
def test_encode_then_decode_gives_the_input_back_byte_for_byte(store, text):
    data = text.encode("utf-8")
    encoded = invoke("encode", "ts", "--db", store, input=data)
    assert encoded.exit_code == 0, encoded.stderr
    decoded = invoke("decode", "ts", "--db", store, input=encoded.stdout_bytes)
    assert decoded.exit_code == 0, decoded.stderr
    assert decoded.stdout_bytes == data


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_decode_writes_the_bytes_of_the_tokens_and_nothing_else(store, data):
    """Any ids, tokens holding part of a character included: their bytes joined, raw."""
    vocab = load(store, "ts").vocab
    ids = data.draw(st.lists(st.sampled_from(sorted(vocab)), max_size=30))
    want = b"".join(vocab[i] for i in ids)
    from_arguments = invoke("decode", "ts", *ids, "--db", store)
    from_stdin = invoke("decode", "ts", "--db", store, input=" ".join(map(str, ids)).encode())
    assert from_arguments.exit_code == from_stdin.exit_code == 0
    assert from_arguments.stdout_bytes == from_stdin.stdout_bytes == want


def test_round_trip_through_a_shell_pipeline(bpestore, store, tmp_path):
    shell = shutil.which("sh") or pytest.skip("no sh")
    data = "line one\r\nzwei: Straße 日本語 😀" + ENDOFTEXT + "\n\n  trailing spaces, no newline  "
    source = tmp_path / "in.txt"
    source.write_bytes(data.encode("utf-8"))
    script = f'"{bpestore}" encode ts --db "{store}" < in.txt | "{bpestore}" decode ts --db "{store}" > out.txt'
    result = subprocess.run([shell, "-c", script], cwd=tmp_path, capture_output=True, env=subprocess_env(), timeout=120)
    assert result.returncode == 0 and result.stderr == b"", result.stderr
    assert (tmp_path / "out.txt").read_bytes() == source.read_bytes()


# -- diff's header -------------------------------------------------------------------------------


def test_diff_header_keeps_long_refs_apart_and_above_their_columns(store, tmp_path):
    tokenizer = load(store, "ts")
    db = tmp_path / "d.db"
    names = ["a-rather-long-tokenizer-name", "another-long-tokenizer-name"]
    with Store(db) as opened:
        for name in names:
            opened.save(name, tokenizer)
    result = invoke("diff", names[0], names[1], "--db", db)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == [f"{names[0]}@1", f"{names[1]}@1"]
    row = next(line for line in lines if line.startswith("vocab size"))
    assert row.split()[2:] == [str(tokenizer.vocab_size)] * 2
    # right-aligned: each number ends where its ref ends
    assert lines[0].index(f"{names[0]}@1") + len(f"{names[0]}@1") == row.index(str(tokenizer.vocab_size)) + len(str(tokenizer.vocab_size))
    assert len(lines[0].rstrip()) == len(row.rstrip())


# -- output into a closed pipe ------------------------------------------------------------------


def closed_pipe_commands(store: Path, big_input: Path) -> dict[str, list]:
    return {
        "encode": ["encode", "ts", big_input, "--db", store],
        "encode-stdin": ["encode", "ts", "-", "--db", store],
        "decode": ["decode", "ts", "--db", store],
        "list": ["list", "--db", store],
        "show": ["show", "ts", "--merges", 100, "--db", store],
    }


@pytest.mark.parametrize(
    ("name", "reader"),
    [("encode", "reads-10-bytes"), ("encode-stdin", "closes-at-once"), ("decode", "reads-10-bytes"), ("list", "closes-at-once"), ("show", "closes-at-once")],
)
def test_output_into_a_closed_pipe_ends_quietly_with_status_141(bpestore, store, big_input, name, reader):
    """As `bpestore ... | head -c 10` (the reader takes 10 bytes, then goes) or `... | true` (it
    goes at once): no 'Broken pipe' error, no 'Exception ignored', status 141 (what the shell
    reports for a tool killed by SIGPIPE). Each output is bigger than a pipe's buffer."""
    args = closed_pipe_commands(store, big_input)[name]
    stdin = b""
    if name == "encode-stdin":
        stdin = big_input.read_bytes()
    elif name == "decode":
        stdin = (" ".join(map(str, range(256))) + " ").encode() * 400
    process = subprocess.Popen(
        [bpestore, *map(str, args)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env()
    )

    def feed() -> None:
        try:
            process.stdin.write(stdin)
            process.stdin.close()
        except BrokenPipeError:
            pass  # it ended before reading all of stdin

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        if reader == "reads-10-bytes":
            assert len(process.stdout.read(10)) == 10
        process.stdout.close()
        stderr = process.stderr.read()
    finally:
        feeder.join(timeout=120)
        if process.poll() is None:
            process.kill()
    status = process.wait(timeout=120)
    assert status == CLOSED_PIPE, (status, stderr)
    assert stderr == b"", stderr


def test_train_into_a_closed_pipe_still_stores_the_tokenizer(bpestore, tmp_path):
    corpus = write_text(tmp_path / "c.txt", corpus_text(seed=13, words=2000))
    db = tmp_path / "t.db"
    process = subprocess.Popen(
        [bpestore, "train", str(corpus), "--name", "p", "--vocab-size", "270", "--db", str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env(),
    )
    process.stdout.close()
    stderr = process.stderr.read()
    assert process.wait(timeout=120) == CLOSED_PIPE
    assert b"Traceback" not in stderr and b"Broken pipe" not in stderr and b"Exception ignored" not in stderr
    with Store(db) as opened:
        assert [info.ref for info in opened.list()] == ["p@1"]


# -- Ctrl-C ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def huge_input(tmp_path_factory) -> Path:
    """About 24 MB: encoding it takes long enough to be interrupted in the middle."""
    rng = random.Random(14)
    words = ["the", "cat", "sat", "on", "café", "Straße", "日本語", "😀", "don't", "42", "—", "\n", ENDOFTEXT]
    line = " ".join(rng.choice(words) for _ in range(400_000))
    path = tmp_path_factory.mktemp("huge") / "huge.txt"
    with open(path, "w", encoding="utf-8") as file:
        for _ in range(12):
            file.write(line)
    return path


def wait_for(condition, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, "the command ended before it could be interrupted"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


@pytest.mark.parametrize("output", ["ids.npy", "ids.txt", None])
def test_ctrl_c_during_encode_with_workers(bpestore, store, huge_input, tmp_path, output):
    """One line ('Interrupted ...'), status 130, no traceback, no worker noise, no output file
    and no temporary file left."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    args = [bpestore, "encode", "ts", huge_input, "--workers", "2", "--db", store]
    if output:
        args += ["--output", out_dir / output]
    process = subprocess.Popen(list(map(str, args)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env())
    try:
        if output:
            wait_for(lambda: any(out_dir.iterdir()), process)  # the (temporary) output exists: encoding
        else:
            assert process.stdout.read(1)  # ids are coming: encoding
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == INTERRUPTED, (process.returncode, stderr)
    assert one_line_error(stderr).startswith("Interrupted")
    if output:
        assert stdout == b""
    assert entries(out_dir) == []


def mapped(pid: int, needle: str) -> bool:
    try:
        return needle in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.parametrize("moment", ["/bpestore/_engine", "/sqlalchemy/"])
def test_ctrl_c_during_start_up(bpestore, store, moment):
    """SIGINT while bpestore starts (its imports: the engine's extension module, then those of
    SQLAlchemy, are being loaded): status 130 and at most one line on stderr, never a traceback."""
    if not Path("/proc/self/maps").is_file():
        pytest.skip("needs /proc to see how far start-up has got")
    import sqlalchemy

    if moment == "/sqlalchemy/" and not list(Path(sqlalchemy.__file__).parent.rglob("*.so")):
        pytest.skip("this SQLAlchemy has no compiled modules to see it loaded by")
    process = subprocess.Popen([bpestore, "list", "--db", str(store)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env())
    try:
        wait_for(lambda: mapped(process.pid, moment), process, timeout=30)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == INTERRUPTED, (process.returncode, stderr.decode())
    assert b"Traceback" not in stderr, stderr.decode()
    assert len(stderr.strip().splitlines()) <= 1, stderr.decode()
    assert stdout == b""


# -- kill -9 during training ----------------------------------------------------------------------


def store_state(db: Path):
    """What a reader sees: the tokenizers and the stored corpora (read with sqlite3, read-only)."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {table: connection.execute(f'SELECT * FROM "{table}"').fetchall() for table in tables if table != "alembic_version"}
    finally:
        connection.close()


# Run before the training: says on stdout when counting starts (the store is not written before
# counting ends), so that the kill lands in it however fast the machine is.
ANNOUNCE_COUNTING = """
import sys
from bpestore.train import trainer
counting = trainer.count_corpus
def announced(*args, **kwargs):
    print("counting", flush=True)
    return counting(*args, **kwargs)
trainer.count_corpus = announced
"""


@pytest.mark.parametrize("how", ["cli", "python"])
def test_kill_9_during_counting_leaves_no_process_and_the_store_unchanged(tmp_path, huge_input, how):
    """The process runs in its own process group: after kill -9 of it, a worker left behind would
    still be in that group (workers do not leave their parent's group). ``cli`` runs the command
    line's ``train`` (as the ``bpestore`` executable does), ``python`` calls ``Store.train``."""
    db = tmp_path / "k.db"
    small = write_text(tmp_path / "small.txt", corpus_text(seed=15, words=2000))
    with Store(db) as opened:
        opened.train(small, "before", 280)
    before = store_state(db)
    if how == "cli":
        run = "from bpestore.cli import main; main(['train', sys.argv[2], '--name', 'k', '--vocab-size', '300', '--workers', '2', '--db', sys.argv[1]])"
    else:
        run = "from bpestore import Store; Store(sys.argv[1]).train(sys.argv[2], 'k', 300, workers=2)"
    args = [sys.executable, "-c", ANNOUNCE_COUNTING + run, str(db), str(huge_input)]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env(), start_new_session=True)
    group = process.pid  # a new session: its process group id is its pid
    try:
        assert process.stdout.readline() == b"counting\n", process.stderr.read().decode()
        os.kill(process.pid, signal.SIGKILL)  # the process alone, as `kill -9 PID` does
        # wait(), not communicate(): a leftover worker would hold the pipes open
        assert process.wait(timeout=60) == -signal.SIGKILL
        deadline = time.monotonic() + 5
        while True:  # our child is reaped; anything else left in the group is an orphan
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                break
            assert time.monotonic() < deadline, "a process of the killed training is still alive"
            time.sleep(0.05)
    finally:
        try:
            os.killpg(group, signal.SIGKILL)  # whatever the assertions found: leave nothing behind
        except ProcessLookupError:
            pass
    assert process.stdout.read() == b"", "the training ended before it was killed"
    assert store_state(db) == before
    with Store(db) as opened:
        assert [info.ref for info in opened.list()] == ["before@1"]


# -- output files appear only complete ------------------------------------------------------------


def test_bad_utf8_late_in_the_input_leaves_no_text_output(bpestore, store, big_input, tmp_path):
    bad = tmp_path / "in" / "bad.txt"
    bad.parent.mkdir()
    bad.write_bytes(big_input.read_bytes() + b" caf\xe9 and more")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    args = ["encode", "ts", "--output", out_dir / "ids.txt", "--db", store]
    result = run(bpestore, *args, bad)
    assert result.returncode == 1
    one_line_error(result.stderr, "bad.txt", str(big_input.stat().st_size + 4))
    assert entries(out_dir) == []
    # From stdin, and over an existing file of that name: it is left as it was.
    (out_dir / "ids.txt").write_text("precious")
    result = run(bpestore, *args, input=bad.read_bytes())
    assert result.returncode == 1
    one_line_error(result.stderr, str(big_input.stat().st_size + 4))
    assert entries(out_dir) == ["ids.txt"] and (out_dir / "ids.txt").read_text() == "precious"


def test_text_output_replaces_an_existing_file_only_when_complete(bpestore, store, tmp_path):
    text = "Straße 日本語 😀 the cat" + ENDOFTEXT
    output = tmp_path / "ids.txt"
    output.write_text("old")
    assert run(bpestore, "encode", "ts", "-o", output, "--db", store, input=text.encode()).returncode == 0
    assert [int(word) for word in output.read_text().split()] == load(store, "ts").encode(text)
    assert entries(tmp_path) == ["ids.txt"]


@pytest.fixture
def full_disk(tmp_path) -> Path:
    """A directory on a tiny tmpfs that is full but for a few KB (needs root: mount)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a full file system needs a small tmpfs, which only root can mount")
    mount_point = tmp_path / "full"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        out_dir = mount_point / "out"
        out_dir.mkdir()
        stats = os.statvfs(mount_point)
        (mount_point / "filler").write_bytes(b"\0" * (stats.f_bavail * stats.f_frsize))  # every block
        yield out_dir
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def test_a_full_disk_leaves_no_partial_output(bpestore, store, big_input, full_disk):
    result = run(bpestore, "encode", "ts", big_input, "--output", full_disk / "ids.txt", "--db", store)
    assert result.returncode == 1
    one_line_error(result.stderr, "ids.txt", "No space left")
    assert entries(full_disk) == []

    for export_format, name in (("hf", "tokenizer.json"), ("tiktoken", "ts.tiktoken"), ("gpt2", "gpt2-files")):
        result = run(bpestore, "export", "ts", "--format", export_format, "--output", full_disk / name, "--db", store)
        assert result.returncode == 1, export_format
        one_line_error(result.stderr, name, "No space left")
        assert entries(full_disk) == [], export_format


def test_export_writes_complete_files_and_no_temporary_ones(bpestore, store, tmp_path):
    for export_format, name in (("hf", "tokenizer.json"), ("tiktoken", "ts.tiktoken"), ("gpt2", "gpt2-files")):
        result = run(bpestore, "export", "ts", "--format", export_format, "--output", tmp_path / name, "--db", store)
        assert result.returncode == 0, result.stderr
        assert b".partial" not in result.stderr  # notes name the real output
    assert entries(tmp_path) == ["gpt2-files", "tokenizer.json", "ts.tiktoken"]
    assert entries(tmp_path / "gpt2-files") == ["merges.txt", "vocab.json"]
    tokenizer = load(store, "ts")
    assert formats.read("hf", tmp_path / "tokenizer.json").model.vocab == tokenizer.vocab
    assert formats.read("tiktoken", tmp_path / "ts.tiktoken", "r50k_base").model.vocab.keys() >= set(tokenizer.vocab) - {0}
    imported = formats.read("gpt2", tmp_path / "gpt2-files" / "vocab.json", tmp_path / "gpt2-files" / "merges.txt", [ENDOFTEXT])
    assert imported.model.merges == tokenizer.merges
    # Exporting into an existing directory keeps what else is there.
    (tmp_path / "gpt2-files" / "README").write_text("mine")
    assert run(bpestore, "export", "ts", "--format", "gpt2", "--output", tmp_path / "gpt2-files", "--db", store).returncode == 0
    assert entries(tmp_path / "gpt2-files") == ["README", "merges.txt", "vocab.json"]
    assert entries(tmp_path) == ["gpt2-files", "tokenizer.json", "ts.tiktoken"]


# -- every error: one line -----------------------------------------------------------------------


def test_errors_of_the_installed_executable_are_one_line(bpestore, store, tmp_path):
    not_utf8 = tmp_path / "latin1.txt"
    not_utf8.write_bytes("café".encode("latin-1"))
    # (the CliRunner tests of test_cli.py cover the rest; these are the output files' errors)
    cases = [
        (["encode", "ts", not_utf8, "-o", tmp_path / "x.txt"], "latin1.txt"),
        (["encode", "ts", "-o", tmp_path / "no" / "x.txt"], "x.txt"),
        (["encode", "ts", "-o", tmp_path], str(tmp_path.name)),
        # (hf into a directory writes a model folder: test_model_folders.py)
        (["export", "ts", "--format", "tiktoken", "--output", tmp_path], str(tmp_path.name)),
    ]
    before = entries(tmp_path)
    for args, needle in cases:
        result = run(bpestore, *args, "--db", store, input=b"hello")
        assert result.returncode == 1, (args, result.returncode, result.stderr)
        one_line_error(result.stderr, needle)
        assert result.stdout == b"", args
    assert entries(tmp_path) == before


@pytest.mark.parametrize("delay", [0.6, 0.8, 1.0])
def test_ctrl_c_at_a_terminal_during_train_with_a_local_dask_cluster(bpestore, tmp_path, delay):
    """Ctrl-C at a terminal goes to the whole process group, Dask's worker processes included:
    still one line and status 130, whether it lands while the workers start, count or close,
    and no process of the group left running."""
    pytest.importorskip("distributed")
    corpus = write_text(tmp_path / "corpus.txt", corpus_text(seed=14, words=600_000))
    args = [bpestore, "train", corpus, "--name", "w", "--vocab-size", "600", "--dask", "local", "--db", tmp_path / "s.db"]
    process = subprocess.Popen(
        list(map(str, args)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env(), start_new_session=True
    )
    group = process.pid
    try:
        time.sleep(delay)
        if process.poll() is not None:
            pytest.skip(f"the training ended within {delay} s: nothing to interrupt")
        os.killpg(group, signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                break  # the group is empty
            time.sleep(0.1)
        else:
            pytest.fail("processes of the group still run 15 s after bpestore ended")
    finally:
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if process.returncode == 0:  # the work was done as the signal came: it changes nothing then
        assert b"Traceback" not in stderr and b"Interrupted" not in stderr, stderr
        pytest.skip(f"the training ended as the signal came, {delay} s in")
    assert process.returncode == INTERRUPTED, (process.returncode, stderr)
    assert one_line_error(stderr).startswith("Interrupted"), stderr
