"""Issue 22's hostile cases, one table each: every write checked (stdout and stderr that cannot
be written, files that cannot grow), Ctrl-C and kill -9 at random moments, bad arguments to the
command line and to the Python API. Each row is a case and what must come of it.

The command line runs as the installed ``bpestore`` executable in a subprocess wherever file
descriptors, signals or exit statuses are involved (/dev/full as stdout, a file size limit, a
signal); the other rows use click's ``CliRunner``. Failed writes are made honestly, without root:
stdout or stderr is ``/dev/full`` (every write: ENOSPC), or the process may not grow a file past a
size (``RLIMIT_FSIZE``, with SIGXFSZ ignored: EFBIG), which SQLite's own files stay below.
"""

from __future__ import annotations

import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bpestore import BPEModel, Counts, Store, Tokenizer, formats, train_bpe, train_bpe_from_counts
from test_cli import ENDOFTEXT, corpus_text, find_executable, subprocess_env, write_text

# The slow tier (python3 -m pytest -m 'not slow' leaves it out): commands run, killed and interrupted.
pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="POSIX file descriptors, signals and limits")]

NO_SPACE = os.strerror(28)  # ENOSPC: "No space left on device"
TOO_LARGE = os.strerror(27)  # EFBIG: "File too large"


@pytest.fixture(scope="module")
def bpestore() -> str:
    return find_executable()


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """A directory with: ``store.db`` holding ``ts`` (vocab 350, <|endoftext|>, trained) and
    ``wide`` (3,000 long tokens, whose exports are hundreds of KB); ``text.txt`` (a few KB) and
    ``big.txt`` (about 3 MB) to encode; ``wide-gpt2/``, ``ts.json`` and ``ts.tiktoken`` (exports)
    to import."""
    directory = tmp_path_factory.mktemp("hostile")
    write_text(directory / "text.txt", corpus_text(seed=31, words=600))
    write_text(directory / "big.txt", corpus_text(seed=32, words=500_000))
    db = directory / "store.db"
    with Store(db) as store:
        assert store.train(directory / "text.txt", "ts", 350, [ENDOFTEXT]) == ["ts@1"]  # (a size this text reaches)
        store.save("wide", wide_model())
        tokenizer = store.load("ts")
        wide = store.load("wide")
    wide.export("gpt2", directory / "wide-gpt2")
    tokenizer.export("hf", directory / "ts.json")
    tokenizer.export("tiktoken", directory / "ts.tiktoken")
    return directory


def wide_model(merges: int = 4000, seed: int = 33) -> BPEModel:
    """A valid model of long tokens (up to 40 bytes): each merge appends a random byte to one of the
    latest tokens (or, once that is long, to a random byte)."""
    rng = random.Random(seed)
    vocab = {i: bytes([i]) for i in range(256)}
    tokens = list(vocab.values())
    known = set(tokens)
    pairs = []
    while len(pairs) < merges:
        left, right = tokens[-1 - rng.randrange(min(50, len(tokens)))], tokens[rng.randrange(256)]
        if len(left) >= 40:
            left = tokens[rng.randrange(256)]
        if left + right in known:
            continue
        pairs.append((left, right))
        vocab[len(vocab)] = left + right
        tokens.append(left + right)
        known.add(left + right)
    return BPEModel(vocab, pairs, [])


def run(bpestore: str, args: list, *, cwd: Path, input: bytes | None = None, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, preexec_fn=None, timeout: float = 120, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [bpestore, *map(str, args)], input=input, stdout=stdout, stderr=stderr, env={**subprocess_env(), **(env or {})}, cwd=cwd,
        preexec_fn=preexec_fn, timeout=timeout,
    )


def one_line(stderr: bytes) -> str:
    """stderr, which must be exactly one line and no traceback."""
    text = stderr.decode("utf-8", errors="replace")
    assert text.endswith("\n") and text.count("\n") == 1, f"expected one line on stderr, got:\n{text}"
    assert "Traceback" not in text and "Exception ignored" not in text, text
    return text.strip()


def store_copy(data: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "store.db"
    shutil.copyfile(data / "store.db", copy)
    return copy


def refs(db: Path) -> list[str]:
    with Store(db) as store:
        return [info.ref for info in store.list()]


# -- every write checked: stdout ------------------------------------------------------------------

# (case, arguments, stdin, what the command did although its report was lost: None, or the refs
# the store holds afterwards). {data} is the data directory; every command writes to stdout.
STDOUT_WRITERS = [
    ("list", ["list"], None, None),
    ("list --json", ["list", "--json"], None, None),
    ("--help", ["--help"], None, None),
    ("--version", ["--version"], None, None),
    ("list --help", ["list", "--help"], None, None),
    ("import --help", ["import", "--help"], None, None),
    ("show", ["show", "ts"], None, None),
    ("show --json", ["show", "ts", "--json"], None, None),
    ("info", ["info"], None, None),
    ("info --json", ["info", "--json"], None, None),
    ("diff", ["diff", "ts", "wide"], None, None),
    ("diff --json", ["diff", "ts", "wide", "--json"], None, None),
    ("encode from stdin", ["encode", "ts"], b"hello world", None),
    ("encode a file", ["encode", "ts", "{data}/text.txt"], None, None),
    ("decode ids", ["decode", "ts", "100", "101"], None, None),
    ("decode from stdin", ["decode", "ts"], b"100 101 102", None),
    ("train", ["train", "{data}/text.txt", "--name", "new", "--vocab-size", "300", "-q"], None, ["new@1", "ts@1", "wide@1"]),
    ("train --json", ["train", "{data}/text.txt", "--name", "new", "--vocab-size", "300", "-q", "--json"], None, ["new@1", "ts@1", "wide@1"]),
    ("train --dry-run", ["train", "{data}/text.txt", "--name", "new", "--vocab-size", "300", "--dry-run"], None, ["ts@1", "wide@1"]),
    ("import gpt2", ["import", "gpt2", "{data}/wide-gpt2/vocab.json", "{data}/wide-gpt2/merges.txt", "--name", "imp", "-q"], None,
     ["imp@1", "ts@1", "wide@1"]),
    ("import hf", ["import", "hf", "{data}/ts.json", "--name", "imp", "-q"], None, ["imp@1", "ts@1", "wide@1"]),
    ("rm", ["rm", "wide"], None, ["ts@1"]),
]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("case, args, stdin, stored", STDOUT_WRITERS, ids=[row[0] for row in STDOUT_WRITERS])
def test_stdout_that_cannot_be_written_is_one_line_and_status_1(bpestore, data, tmp_path, case, args, stdin, stored):
    """Output lost is never success: one line saying what could not be written, status 1. What
    the command did is kept (a tokenizer trained, imported or deleted); only its report is lost."""
    db = store_copy(data, tmp_path)
    with open("/dev/full", "wb") as full:
        result = run(bpestore, ["--db", db, *(arg.format(data=data) for arg in args)], cwd=tmp_path, input=stdin, stdout=full)
    assert result.returncode == 1, (case, result.returncode, result.stderr.decode())
    assert one_line(result.stderr) == f"Error: cannot write to standard output: {NO_SPACE}"
    if stored is not None:
        assert refs(db) == stored


# -- every write checked: stderr ------------------------------------------------------------------

# (case, arguments, the status wanted): a full stderr cannot be told anywhere, so only the status
# says that something was not written; the command's work and its stdout are kept.
STDERR_WRITERS = [
    ("encode --output (its summary)", ["encode", "ts", "{data}/text.txt", "--output", "{tmp}/ids.npy"], 1),
    ("train (a warning and the summary)", ["train", "{data}/text.txt", "--name", "new", "--vocab-size", "5000"], 1),
    ("export (its notes)", ["export", "ts", "--format", "tiktoken", "--output", "{tmp}/ts.tiktoken"], 1),
    ("import (its notes)", ["import", "tiktoken", "{data}/ts.tiktoken", "--pattern", "r50k_base", "--name", "imp"], 1),
    ("an error", ["show", "nosuch"], 1),
    ("a usage error", ["show"], 2),
    ("nothing on stderr", ["list"], 0),
]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("case, args, status", STDERR_WRITERS, ids=[row[0] for row in STDERR_WRITERS])
def test_stderr_that_cannot_be_written_ends_the_command_with_a_failure_status(bpestore, data, tmp_path, case, args, status):
    db = store_copy(data, tmp_path)
    with open("/dev/full", "wb") as full:
        result = run(bpestore, [arg.format(data=data, tmp=tmp_path) for arg in args] + ["--db", db], cwd=tmp_path, stderr=full, timeout=60)
    assert result.returncode == status, (case, result.returncode)
    if case.startswith("train"):
        assert result.stdout == b"new@1\n" and refs(db) == ["new@1", "ts@1", "wide@1"]  # the training is kept
    if case.startswith(("encode", "export")):
        assert sorted(path.suffix for path in tmp_path.iterdir()) == [".db", Path(args[-1]).suffix]


def test_stdout_and_stderr_both_full(bpestore, data, tmp_path):
    with open("/dev/full", "wb") as full:
        result = run(bpestore, ["list", "--db", data / "store.db"], cwd=tmp_path, stdout=full, stderr=full, timeout=60)
    assert result.returncode == 1


# -- every write checked: files -------------------------------------------------------------------

FILE_SIZE_LIMIT = 128 << 10  # more than SQLite's shared-memory file (32 KB), less than any output here


def limit_file_size() -> None:
    """In the child: files may not grow past FILE_SIZE_LIMIT (a write past it fails with EFBIG,
    as on a full disk, instead of killing the process with SIGXFSZ)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))


# (case, arguments, stdin from big.txt, the output named in the error): each output is bigger than
# the limit. {out} is an empty directory, which must stay empty.
FILE_WRITERS = [
    ("encode --output ids.txt", ["encode", "ts", "{data}/big.txt", "--output", "{out}/ids.txt"], False, "ids.txt"),
    ("encode --output ids.txt from stdin", ["encode", "ts", "--output", "{out}/ids.txt"], True, "ids.txt"),
    ("encode --output ids.npy (the engine's threads)", ["encode", "ts", "{data}/big.txt", "--output", "{out}/ids.npy"], False, "ids.npy"),
    ("encode --output ids.npy from stdin", ["encode", "ts", "-", "--output", "{out}/ids.npy"], True, "ids.npy"),
    ("encode --output ids.npy --ordinary (a stream)", ["encode", "ts", "{data}/big.txt", "--output", "{out}/ids.npy", "--ordinary"], False,
     "ids.npy"),
    ("encode --output-dir", ["encode", "ts", "{data}/big.txt", "--output-dir", "{out}/shards"], False, "shard-00000.npy"),
    ("export hf", ["export", "wide", "--format", "hf", "--output", "{out}/wide.json"], False, "wide.json"),
    ("export gpt2 (a directory)", ["export", "wide", "--format", "gpt2", "--output", "{out}/wide-gpt2"], False, "wide-gpt2"),
    ("export tiktoken", ["export", "wide", "--format", "tiktoken", "--output", "{out}/wide.tiktoken"], False, "wide.tiktoken"),
]


@pytest.mark.parametrize("case, args, from_stdin, name", FILE_WRITERS, ids=[row[0] for row in FILE_WRITERS])
def test_a_file_that_cannot_be_written_is_one_line_naming_it_and_nothing_is_left(bpestore, data, tmp_path, case, args, from_stdin, name):
    out = tmp_path / "out"
    out.mkdir()
    stdin = (data / "big.txt").read_bytes() if from_stdin else None
    command = ["--db", data / "store.db", *(arg.format(data=data, out=out) for arg in args)]
    result = run(bpestore, command, cwd=tmp_path, input=stdin, preexec_fn=limit_file_size)
    assert result.returncode == 1, (case, result.returncode, result.stderr.decode())
    message = one_line(result.stderr)
    assert re.fullmatch(rf"Error: cannot write \S*{re.escape(name)}: {TOO_LARGE}", message), message
    assert ".partial" not in message
    leftovers = [path.relative_to(out) for path in out.rglob("*") if path.name != "manifest.jsonl" and not path.is_dir()]
    assert leftovers == [], case


def test_sqlite_temporary_files_that_cannot_grow_are_named_and_the_store_is_left_alone(bpestore, tmp_path):
    """New counts too big to stage in memory are staged in SQLite's temporary files before the
    store is written: when those cannot grow (a full disk there; here a file size limit of 1 MB,
    which the store itself stays below), the one line names that directory and how to move it,
    not the store, and the store holds no corpus. (The command line is run with every count
    staged in files: 128 MB of pre-tokens would make a slow test.) Small counts, staged in
    memory, meet such a limit only in the store."""
    corpus = tmp_path / "distinct.txt"
    corpus.write_text(" ".join(f"w{i}" for i in range(300_000)), encoding="utf-8")  # 300,000 distinct pre-tokens
    temporary = tmp_path / "sqlite-tmp"
    temporary.mkdir()
    store = tmp_path / "store.db"
    Store(store).close()  # made first, under no limit

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    staged_in_files = "import bpestore.store.bulk as bulk; bulk.STAGED_IN_MEMORY_BYTES = -1; from bpestore.cli import main; main(prog_name='bpestore')"
    result = subprocess.run(
        [sys.executable, "-c", staged_in_files, "--db", str(store), "train", str(corpus), "--name", "t", "--vocab-size", "300", "-q"],
        capture_output=True, cwd=tmp_path, preexec_fn=limited, env={**subprocess_env(), "SQLITE_TMPDIR": str(temporary)}, timeout=120,
    )
    assert result.returncode == 1, result.stderr.decode()
    message = one_line(result.stderr)
    assert f"cannot stage the counts in SQLite's temporary files in {temporary}" in message, message
    assert "SQLITE_TMPDIR" in message and "nothing was written to the store" in message, message
    with Store(store) as opened:
        assert opened.corpora() == [] and opened.list() == []
    # The same counts staged in memory, under the same limit: staged, they meet it in the store
    # itself, which the one line names; and nothing was written there.
    result = run(bpestore, ["--db", store, "train", corpus, "--name", "t", "--vocab-size", "300", "-q"], cwd=tmp_path,
                 preexec_fn=limited, env={"SQLITE_TMPDIR": str(temporary)})
    assert result.returncode == 1, result.stderr.decode()
    message = one_line(result.stderr)
    assert f"cannot use {store}" in message and "temporary files" not in message and "nothing was written" in message, message
    with Store(store) as opened:
        assert opened.corpora() == [] and opened.list() == []


# -- Ctrl-C at any moment -------------------------------------------------------------------------

# (case, arguments, the file it writes in {out}, or None for the store {out}/store.db): each is
# interrupted at moments spread over its whole run, its very end included.
INTERRUPTED = [
    ("encode --output ids.txt", ["encode", "ts", "{data}/mid.txt", "--output", "{out}/ids.txt", "--db", "{data}/store.db"], "ids.txt"),
    ("encode --output ids.npy", ["encode", "ts", "{data}/mid.txt", "--output", "{out}/ids.npy", "--db", "{data}/store.db"], "ids.npy"),
    ("train", ["train", "{data}/mid.txt", "--name", "new", "--vocab-size", "400", "-q", "--db", "{out}/store.db"], None),
    ("import gpt2", ["import", "gpt2", "{data}/wide-gpt2/vocab.json", "{data}/wide-gpt2/merges.txt", "--name", "new", "-q",
                     "--db", "{out}/store.db"], None),
]
SPREAD = 6  # moments per case spread over the run, and two more just after its output appears
AFTER_OUTPUT = (0.02, 0.06)  # seconds: in the interpreter's own exit, where Ctrl-C used to kill it


@pytest.fixture(scope="module")
def mid_input(data) -> Path:
    """About 1 MB: half a second or so of encoding or counting."""
    path = data / "mid.txt"
    if not path.exists():
        path.write_bytes((data / "big.txt").read_bytes()[: 1 << 20].rpartition(b" ")[0])
    return path


def engine_loaded(pid: int) -> bool:
    """Whether the process has got as far as loading bpestore's compiled engine (which the CLI
    loads after setting its Ctrl-C handler): its Python has started, and bpestore's own code runs
    (a Ctrl-C during Python's start-up is Python's, out of reach). (Not NumPy: most commands
    never load it.)"""
    try:
        return re.search(r"/bpestore/_engine\.[^/\n]*so", Path(f"/proc/{pid}/maps").read_text()) is not None
    except OSError:
        return False


def interrupted_run(bpestore: str, command: list[str], cwd: Path, *, delay: float | None = None,
                    after_output: float | None = None, output: Path | None = None) -> tuple[int, bytes, float]:
    """Runs ``command`` and sends SIGINT ``delay`` seconds after bpestore's code starts, or
    ``after_output`` seconds after its output appears (the file ``output`` exists, or else a line
    on stdout), or never. Returns the exit status, stderr, and how long the run lasted from that
    start."""
    process = subprocess.Popen([bpestore, *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env(), cwd=cwd)
    try:
        while not engine_loaded(process.pid) and process.poll() is None:
            time.sleep(0.002)
        started = time.monotonic()
        if delay is not None:
            try:
                process.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGINT)
        elif after_output is not None:
            if output is not None:
                while not output.exists() and process.poll() is None:
                    time.sleep(0.001)
            else:
                assert process.stdout is not None
                process.stdout.readline()
            time.sleep(after_output)
            process.send_signal(signal.SIGINT)  # (a process that has ended is not signalled)
        _, stderr = process.communicate(timeout=120)
        return process.returncode, stderr, time.monotonic() - started
    finally:
        process.kill()


@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="needs /proc to see when bpestore's code runs")
@pytest.mark.parametrize("case, args, written", INTERRUPTED, ids=[row[0] for row in INTERRUPTED])
def test_ctrl_c_at_any_moment_is_one_line_and_status_130(bpestore, data, mid_input, tmp_path, case, args, written):
    """SIGINT at moments spread over the run: either the command had finished (status 0, its
    output complete, as without the signal) or it ends with status 130 and one line, its output
    absent (or complete, if the signal came after it was), and never a temporary file, a
    traceback or death by SIGINT (which a Ctrl-C in CPython's own exit used to be)."""
    reference_out = tmp_path / "reference"
    reference_out.mkdir()
    status, reference_stderr, duration = interrupted_run(bpestore, [a.format(data=data, out=reference_out) for a in args], tmp_path)
    assert status == 0, reference_stderr.decode()
    complete = None if written is None else (reference_out / written).read_bytes()
    rng = random.Random(case)
    moments = [{"delay": duration * (moment + rng.random()) / SPREAD} for moment in range(SPREAD)]
    moments += [{"after_output": after} for after in AFTER_OUTPUT]
    outcomes = []
    for number, moment in enumerate(moments):
        out = tmp_path / f"out{number}"
        out.mkdir()
        command = [a.format(data=data, out=out) for a in args]
        status, stderr, _ = interrupted_run(bpestore, command, tmp_path, output=written and out / written, **moment)
        outcomes.append(status)
        when = f"{moment['delay']:.3f} s of {duration:.3f} s" if "delay" in moment else f"{moment['after_output']} s after its output"
        where = f"{case}, SIGINT after {when}: status {status}, stderr {stderr.decode()!r}"
        assert status in (0, 130), where
        said = stderr.replace(bytes(out), bytes(reference_out)).decode()
        assert "Traceback" not in said and "Exception ignored" not in said, where
        if status == 130:  # one line, after what was said before it (a warning)
            *before, last = said.splitlines()
            assert last.startswith("Interrupted") and said.endswith("\n"), where
            assert all(line in reference_stderr.decode().splitlines() for line in before), where
        else:
            assert said == reference_stderr.decode(), where
        if written is not None:
            left = sorted(path.name for path in out.iterdir())
            assert left in ([], [written]) if status == 130 else left == [written], (where, left)
            if left:
                assert (out / written).read_bytes() == complete, where
        else:
            assert not [path for path in out.iterdir() if path.name.endswith(".partial")], where
            stored = refs(out / "store.db") if (out / "store.db").exists() else []
            assert stored in ([], ["new@1"]) if status == 130 else stored == ["new@1"], (where, stored)
    assert 130 in outcomes, f"{case}: no moment interrupted it ({outcomes})"


# A Ctrl-C that CPython drops: raised in a weak reference's callback (as its import machinery runs
# one when a module's import lock is freed), it cannot propagate, and CPython used to print
# "Exception ignored ... KeyboardInterrupt" and run the command on to status 0. The command here
# is ``list``; the signal comes while the store opens, from inside such a callback.
DROPPED_CTRL_C = """
import os, signal, sys, weakref
import bpestore.cli as cli
import bpestore.workflow as workflow

opened = workflow.Store.__init__

class Dropped:
    pass

def open_with_ctrl_c_in_a_callback(self, *args, **kwargs):
    def callback(reference):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10_000):  # the handler runs between these bytecodes, inside the callback
            pass
        sys.stderr.write("the callback went on after the signal\\n")
    thing = Dropped()
    kept = weakref.ref(thing, callback)
    del thing  # the callback runs here; what it raises, CPython drops
    opened(self, *args, **kwargs)

workflow.Store.__init__ = open_with_ctrl_c_in_a_callback
sys.argv = ["bpestore", "list", "--db", sys.argv[1]]
cli.main()
"""


def test_ctrl_c_dropped_by_cpython_still_ends_the_command(data, tmp_path):
    """A Ctrl-C raised where CPython cannot propagate it is not lost: one line, status 130, no
    "Exception ignored" report. The same script with the callback's signal replaced by nothing
    lists the store (status 0), so the 130 is the signal's."""
    script = tmp_path / "dropped.py"
    script.write_text(DROPPED_CTRL_C)
    run = subprocess.run([sys.executable, str(script), str(data / "store.db")], capture_output=True, env=subprocess_env(), timeout=120)
    said = run.stderr.decode()
    assert run.returncode == 130, (run.returncode, said)
    assert said.splitlines() == ["Interrupted; nothing half-written was kept."], said
    script.write_text(DROPPED_CTRL_C.replace("os.kill(os.getpid(), signal.SIGINT)", "pass"))
    quiet = subprocess.run([sys.executable, str(script), str(data / "store.db")], capture_output=True, env=subprocess_env(), timeout=120)
    assert quiet.returncode == 0 and b"ts" in quiet.stdout, quiet.stderr.decode()


# -- kill -9 at any moment: the next write cleans up ------------------------------------------------

# (case, arguments, the output in {out}): each is killed while it writes (its temporary file is
# there), at random moments; the same command run again leaves exactly the output. (A file
# written at once, such as an hf export, is rarely caught: the rule is the same, see
# tests/test_partial_npy.py.)
KILLED = [
    ("encode --output ids.txt", ["encode", "ts", "{data}/mid.txt", "--output", "{out}/ids.txt", "--db", "{data}/store.db"], "ids.txt"),
    ("encode --output ids.npy", ["encode", "ts", "{data}/mid.txt", "--output", "{out}/ids.npy", "--db", "{data}/store.db"], "ids.npy"),
    ("encode --output ids.npy from stdin", ["encode", "ts", "-", "--output", "{out}/ids.npy", "--db", "{data}/store.db"], "ids.npy"),
    ("export gpt2 (a directory)", ["export", "wide", "--format", "gpt2", "--output", "{out}/wide-gpt2", "--db", "{data}/store.db"],
     "wide-gpt2"),
]
KILLS = 2  # per case: kills that land while the command writes
ATTEMPTS = 16  # per case at most: a kill after the write has finished leaves nothing to clean up


def partials_in(directory: Path) -> list[Path]:
    return [path for path in directory.iterdir() if path.name.endswith(".partial")]


@pytest.mark.parametrize("case, args, written", KILLED, ids=[row[0] for row in KILLED])
def test_kill_9_while_writing_then_the_next_write_leaves_exactly_the_output(bpestore, data, mid_input, tmp_path, case, args, written):
    rng = random.Random(case)
    out = tmp_path / "out"
    out.mkdir()
    command = [a.format(data=data, out=out) for a in args]
    landed = 0
    stdin = mid_input.read_bytes() if "-" in command else None
    # (A fast machine writes 1 MB's ids in a few milliseconds, so a kill at a random moment may
    # come after the write: such an attempt is not counted, and another is made.)
    for _ in range(ATTEMPTS):
        if landed == KILLS:
            break
        # (an earlier kill's temporary file may still be there: this process's is another name)
        before = set(partials_in(out))
        process = subprocess.Popen([bpestore, *command], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env=subprocess_env())
        try:
            if stdin is not None:  # half the text, and more to come: the encoding is under way
                process.stdin.write(stdin[: len(stdin) // 2])
                process.stdin.flush()
            while not set(partials_in(out)) - before and process.poll() is None:
                time.sleep(0.0005)
            time.sleep(rng.uniform(0, 0.02))
            process.kill()  # SIGKILL: nothing can clean up
            process.wait(timeout=60)
        finally:
            process.kill()
            process.stdin.close()
        partials = set(partials_in(out)) - before
        landed += bool(partials)
        if (out / written).is_dir():
            shutil.rmtree(out / written)
        (out / written).unlink(missing_ok=True)
    assert landed == KILLS, f"{case}: {landed} of {ATTEMPTS} kills landed while it wrote"
    again = run(bpestore, command, cwd=tmp_path, input=stdin)
    assert again.returncode == 0, again.stderr.decode()
    assert sorted(path.name for path in out.iterdir()) == [written], case


# -- bad arguments: the command line ----------------------------------------------------------------

MAX_ID = 2**31 - 1

# (case, arguments, status, words of the one error line). Refused before any work: nothing is
# created, trained or stored. Status 2 is click's usage error (its line is the last of its usage).
CLI_BAD_ARGUMENTS = [
    ("--db ''", ["list", "--db", ""], 1, ["store is empty"]),
    ("bpestore --db '' COMMAND", ["--db", "", "list"], 1, ["store is empty"]),
    ("--db sqlite", ["train", "{data}/text.txt", "--name", "x", "--vocab-size", "300", "--db", "sqlite"], 1, ["'sqlite'", "without its '://'"]),
    ("--db sqlite:", ["list", "--db", "sqlite:"], 1, ["'sqlite:'", "without its '://'"]),
    ("--db postgresql:", ["list", "--db", "postgresql:"], 1, ["'postgresql:'", "without its '://'"]),
    ("--db postgresql+psycopg", ["info", "--db", "postgresql+psycopg"], 1, ["without its '://'"]),
    ("--db sqlite:// (a write)", ["train", "{data}/text.txt", "--name", "x", "--vocab-size", "300", "--db", "sqlite://"], 1, ["in memory"]),
    ("--db sqlite:// (a read)", ["list", "--db", "sqlite://"], 1, ["in memory"]),
    ("--vocab-size 2147483648", ["train", "{data}/text.txt", "--name", "x", "--vocab-size", str(MAX_ID + 1)], 2, ["--vocab-size", f"x<={MAX_ID}"]),
    ("--vocab-size 10**30", ["train", "{data}/text.txt", "--name", "x", "--vocab-size", str(10**30)], 2, ["--vocab-size", f"x<={MAX_ID}"]),
    ("--vocab-size 1e30", ["train", "{data}/text.txt", "--name", "x", "--vocab-size", "1e30"], 2, ["--vocab-size", "'1e30'"]),
    ("import tiktoken --pattern cl100k (a misspelt encoding)", ["import", "tiktoken", "{data}/ts.tiktoken", "--name", "x", "--pattern", "cl100k"],
     1, ["'cl100k' is not a known pre-tokenizer", "cl100k_base?"]),
    ("import tiktoken: a special token twice", ["import", "tiktoken", "{data}/ts.tiktoken", "--name", "x", "--pattern", "r50k_base",
                                                "--special-token", "<|a|>=500", "--special-token", "<|a|>=501"], 2, ["'<|a|>' is given twice"]),
    ("import tiktoken: two special tokens, one id", ["import", "tiktoken", "{data}/ts.tiktoken", "--name", "x", "--pattern", "r50k_base",
                                                     "--special-token", "<|a|>=500", "--special-token", "<|b|>=500"], 1,
     ["'<|a|>' and '<|b|>'", "id 500"]),
    ("import tiktoken: an id in other digits", ["import", "tiktoken", "{data}/ts.tiktoken", "--name", "x", "--pattern", "r50k_base",
                                                "--special-token", "<|a|>=٣٠٠٠"], 2, ["expected TOKEN=ID"]),
]


@pytest.mark.parametrize("case, args, status, words", CLI_BAD_ARGUMENTS, ids=[row[0] for row in CLI_BAD_ARGUMENTS])
def test_bad_arguments_to_the_command_line_are_refused_with_one_line(data, tmp_path, monkeypatch, case, args, status, words):
    from test_cli import invoke

    monkeypatch.chdir(tmp_path)  # where a bare --db would create its file
    db = tmp_path / "store.db"
    command = [arg.format(data=data) for arg in args]
    if "--db" not in command:
        command += ["--db", db]
    result = invoke(*command)
    assert result.exit_code == status, (case, result.exit_code, result.stderr, result.exception)
    lines = result.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("Error: ") and "Traceback" not in result.stderr, result.stderr
    if status == 1:
        assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[-1], (word, lines[-1])
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == [], f"{case}: something was created"


# -- bad arguments: the Python API ------------------------------------------------------------------

BYTES = {i: bytes([i]) for i in range(256)}


def a_model() -> BPEModel:
    return BPEModel(BYTES | {256: b"ab"}, [(b"a", b"b")], ["<|endoftext|>"])


def in_memory_store() -> Store:
    return Store("sqlite://")


# (case, the call given the corpus path, the exception, words of its message): wrong types are
# TypeErrors saying what was expected, bad values ValueErrors; all before any work.
API_BAD_ARGUMENTS = [
    ("Store.save(name, None)", lambda corpus: in_memory_store().save("x", None), TypeError, ["BPEModel or a Tokenizer", "NoneType"]),
    ("Store.save(name, 'a str')", lambda corpus: in_memory_store().save("x", "tok"), TypeError, ["BPEModel or a Tokenizer", "str"]),
    ("Store.save(1, model)", lambda corpus: in_memory_store().save(1, a_model()), TypeError, ["name is a str", "int"]),
    ("Store.train(corpus, None, ...)", lambda corpus: in_memory_store().train(corpus, None, 300), TypeError, ["name is a str"]),
    ("Store('')", lambda corpus: Store(""), ValueError, ["empty"]),
    ("Store('sqlite')", lambda corpus: Store("sqlite"), ValueError, ["without its '://'"]),
    ("train_bpe(path, '1000')", lambda corpus: train_bpe(corpus, "1000"), TypeError, ["vocab_size must be an int", "str"]),
    ("train_bpe(path, True)", lambda corpus: train_bpe(corpus, True), TypeError, ["vocab_size must be an int", "bool"]),
    ("train_bpe(path, 1000.0)", lambda corpus: train_bpe(corpus, 1000.0), TypeError, ["vocab_size must be an int", "float"]),
    ("train_bpe(path, 2**31)", lambda corpus: train_bpe(corpus, 2**31), ValueError, [f"at most {MAX_ID}"]),
    ("train_bpe(path, 10**30)", lambda corpus: train_bpe(corpus, 10**30), ValueError, [f"at most {MAX_ID}"]),
    ("train_bpe(special_tokens=[None])", lambda corpus: train_bpe(corpus, 300, [None]), TypeError, ["special tokens must be strings"]),
    ("train_bpe(special_tokens=5)", lambda corpus: train_bpe(corpus, 300, 5), TypeError, ["list of strings", "int"]),
    ("train_bpe(special_tokens=[''])", lambda corpus: train_bpe(corpus, 300, [""]), ValueError, ["non-empty"]),
    ("train_bpe(None, 300)", lambda corpus: train_bpe(None, 300), TypeError, ["corpus must be a path", "NoneType"]),
    ("train_bpe(workers=0)", lambda corpus: train_bpe(corpus, 300, workers=0), ValueError, ["workers must be at least 1"]),
    ("train_bpe(workers='2')", lambda corpus: train_bpe(corpus, 300, workers="2"), TypeError, ["workers must be an int"]),
    ("train_bpe_from_counts(counts, '300')", lambda corpus: train_bpe_from_counts({b"ab": 3}, "300"), TypeError,
     ["vocab_size must be an int"]),
    ("Store.train(corpus, name, '300')", lambda corpus: in_memory_store().train(corpus, "x", "300"), TypeError, ["int or a list of ints"]),
    ("Store.train(corpus, name, ['300'])", lambda corpus: in_memory_store().train(corpus, "x", ["300"]), TypeError, ["vocab_size must be an int"]),
    ("Store.train(corpus, name, 2**31)", lambda corpus: in_memory_store().train(corpus, "x", 2**31), ValueError, [f"at most {MAX_ID}"]),
    ("Store.train(special_tokens=[None])", lambda corpus: in_memory_store().train(corpus, "x", 300, [None]), TypeError,
     ["special tokens must be strings"]),
    ("Store.estimate_training(corpus, '300')", lambda corpus: in_memory_store().estimate_training(corpus, "300"), TypeError,
     ["vocab_size must be an int"]),
    ("Tokenizer(None, None)", lambda corpus: Tokenizer(None, None), TypeError, ["vocab must be a mapping"]),
    ("Tokenizer(a list, merges)", lambda corpus: Tokenizer(list(BYTES.values()), []), TypeError, ["vocab must be a mapping", "list"]),
    ("BPEModel(vocab, None)", lambda corpus: BPEModel(BYTES, None), TypeError, ["merges must be a list"]),
    ("BPEModel(special_tokens=[None])", lambda corpus: BPEModel(BYTES, [], [None]), TypeError, ["special tokens must be strings"]),
    ("BPEModel(pattern=5)", lambda corpus: BPEModel(BYTES, [], [], 5), TypeError, ["pattern must be a regex string", "int"]),
    ("BPEModel(merge_rule=5)", lambda corpus: BPEModel(BYTES, [], [], merge_rule=5), TypeError, ["merge_rule", "int"]),
    ("BPEModel(merge_rule='both')", lambda corpus: BPEModel(BYTES, [], [], merge_rule="both"), ValueError, ["merge_rule", "'both'"]),
    ("BPEModel: str tokens", lambda corpus: BPEModel({i: chr(i) for i in range(256)}, []), TypeError, ["must be bytes"]),
    ("BPEModel: str ids", lambda corpus: BPEModel({str(i): t for i, t in BYTES.items()}, []), TypeError, ["token ids must be integers"]),
    ("BPEModel: a merge of str", lambda corpus: BPEModel(BYTES, [("a", "b")]), TypeError, ["merge 0 must be a pair of bytes"]),
    ("formats.read(None, ...)", lambda corpus: formats.read(None, corpus), TypeError, ["format is named by a str"]),
    ("Counts(a dict)", lambda corpus: Counts({b"ab": 1}), TypeError, ["PretokenCounts", "dict", "as_counts"]),
]


@pytest.mark.parametrize("case, call, error, words", API_BAD_ARGUMENTS, ids=[row[0] for row in API_BAD_ARGUMENTS])
def test_bad_arguments_to_the_api_raise_type_or_value_errors_that_say_what_was_expected(data, tmp_path, monkeypatch, case, call, error, words):
    monkeypatch.chdir(tmp_path)  # where Store("sqlite") would create its file
    with pytest.raises(Exception) as raised:
        call(data / "text.txt")
    other = {TypeError: ValueError, ValueError: TypeError}[error]
    assert isinstance(raised.value, error) and not isinstance(raised.value, other), (case, repr(raised.value))
    for word in words:
        assert word in str(raised.value), (case, word, str(raised.value))
    assert list(tmp_path.iterdir()) == [], f"{case}: something was created"


def test_a_ctrl_c_that_sqlalchemy_logs_adds_no_traceback():
    """A Ctrl-C landing while SQLAlchemy's pool closes a connection: the pool logs it with a
    traceback ("Exception closing connection ...") and raises it again. Under the command line
    that record is dropped (the Ctrl-C is reported in one line); another error it logs still
    shows. (In a subprocess: pytest's own logging handlers would hide what a CLI run prints.)"""
    script = (
        "import logging, sys\n"
        "from bpestore.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"  # any command readies the command line's logging
        "except SystemExit:\n"
        "    pass\n"
        "log = logging.getLogger('sqlalchemy.pool.impl.QueuePool')\n"
        "for error in (KeyboardInterrupt(), OSError('disk gone')):\n"
        "    try:\n"
        "        raise error\n"
        "    except BaseException:\n"
        "        log.error('Exception closing connection', exc_info=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "KeyboardInterrupt" not in done.stderr
    assert "OSError: disk gone" in done.stderr and done.stderr.count("Exception closing connection") == 1


def test_ctrl_c_while_the_command_line_loads_ends_the_process_even_where_errors_are_dropped():
    """The handler of a Ctrl-C while bpestore.cli loads ends the process itself: a SystemExit
    raised from it could land in Python code that C code calls and whose errors it drops, and
    loading then went on to run the command (seen once: the line, then the output, status 0)."""
    code = (
        "import bpestore.cli as cli\n"
        "try:\n"
        "    cli._interrupted_while_loading(2, None)\n"
        "except BaseException:\n"  # (as C code that drops errors would)
        "    pass\n"
        "print('went on')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "Interrupted; nothing half-written was kept.\n")


ENGINE_IN_LITTLE_ADDRESS_SPACE = r"""
import resource, sys
# (room for the engine's library and its first allocations, less than the block of 32 MB the
# engine asks glibc for at import, to be freed at once: that ask must be one it can go without)
size = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (size + (24 << 20), resource.RLIM_INFINITY))
import bpestore._engine
print("imported")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="an address-space limit as Linux sets one")
def test_the_engine_imports_where_address_space_is_short():
    result = subprocess.run([sys.executable, "-c", ENGINE_IN_LITTLE_ADDRESS_SPACE], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "imported"
