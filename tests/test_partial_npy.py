"""An encoding to ``.npy`` that is killed leaves nothing ``numpy.load`` reads as an array: its
temporary file is hidden, named after the output and the process, and not a ``.npy`` until its
last write; the next write to the same output removes it once its process is gone
(:func:`bpestore.atomic.remove_stale_partials`, the rule for every output).

The CLI runs in a subprocess (kill -9 is only real there); the ids expected come from
``Tokenizer.encode`` of the input.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bpestore import Store
from bpestore.encode.files import remove_stale_partials
from bpestore.engine import PARTIAL_NPY_MARK as PARTIAL_MARK
from test_cli import ENDOFTEXT, corpus_text, find_executable, subprocess_env, write_text

# The slow tier (python3 -m pytest -m 'not slow' leaves it out): commands killed mid-write.
pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("partial")
    corpus = write_text(directory / "corpus.txt", corpus_text(seed=21, words=4000))
    db = directory / "store.db"
    with Store(db) as opened:
        assert opened.train(corpus, "ts", 300, [ENDOFTEXT]) == ["ts@1"]
    return db


@pytest.fixture(scope="module")
def long_input(tmp_path_factory) -> Path:
    """About 24 MB: long enough to be killed in the middle of its encoding."""
    rng = random.Random(22)
    words = ["the", "cat", "sat", "on", "café", "Straße", "日本語", "😀", "don't", "42", "\n", ENDOFTEXT]
    line = " ".join(rng.choice(words) for _ in range(400_000))
    path = tmp_path_factory.mktemp("long") / "long.txt"
    path.write_text(line * 12, encoding="utf-8")
    return path


def partials(directory: Path, output: str) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.startswith(f".{output}.") and p.name.endswith(".partial"))


def wait_for(condition, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, "the encoding ended before it could be killed"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.002)


def assert_not_loadable(path: Path) -> None:
    with pytest.raises((ValueError, EOFError, OSError)):
        np.load(path)
    with pytest.raises(Exception):  # noqa: B017 - whatever numpy raises, it must not be an array
        np.load(path, allow_pickle=True)


@pytest.mark.parametrize("source", ["file", "stdin"])
def test_kill_9_during_an_npy_encoding_leaves_nothing_loadable_and_the_next_run_cleans_up(store, long_input, tmp_path, source):
    """``file``: the threaded path (the engine writes the array); ``stdin``: the stream path."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    output = out_dir / "ids.npy"
    command = [find_executable(), "encode", "ts", str(long_input) if source == "file" else "-", "--output", str(output), "--db", str(store)]
    process = subprocess.Popen(command, stdin=subprocess.PIPE if source == "stdin" else subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env())
    try:
        if source == "stdin":  # half the text, then nothing more: the encoding is under way
            data = long_input.read_bytes()
            process.stdin.write(data[: len(data) // 2])
            process.stdin.flush()
        # Killed once some ids are written past the header.
        wait_for(lambda: any(p.stat().st_size > 4096 for p in partials(out_dir, "ids.npy")), process)
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=60) == -signal.SIGKILL
    finally:
        process.kill()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream:
                stream.close()
    assert not output.exists()
    (left,) = partials(out_dir, "ids.npy")
    assert left.name.startswith(f".ids.npy.{process.pid}-")
    assert left.read_bytes().startswith(PARTIAL_MARK)
    assert_not_loadable(left)

    # The next encoding to the same output removes it (its process is gone) and writes the array.
    again = subprocess.run([find_executable(), "encode", "ts", str(long_input), "--output", str(output), "--db", str(store)],
                           capture_output=True, env=subprocess_env(), timeout=300)
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in out_dir.iterdir()) == ["ids.npy"]
    with Store(store) as opened:
        expected = opened.load("ts").encode(long_input.read_text(encoding="utf-8"))
    assert np.load(output).tolist() == expected


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux's /proc to see a zombie")
def test_a_killed_writer_not_yet_reaped_is_gone(tmp_path):
    """A writer killed but not yet reaped by its parent (a zombie, as a SIGKILLed Dask worker is
    until its nanny waits for it) still answers kill(pid, 0); its file is stale all the same (the
    shard it was writing can be rerun elsewhere before the reaping)."""
    output = tmp_path / "x.npy"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        partial = tmp_path / f".x.npy.{child.pid}-abcd1234.partial"
        partial.write_bytes(PARTIAL_MARK + b" ...")
        assert remove_stale_partials(output) == []  # alive: its writer's
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child.pid}/stat").read_bytes().rpartition(b")")[2].split()[0] != b"Z":
            assert time.monotonic() < deadline, "the child did not become a zombie"
            time.sleep(0.01)
        assert remove_stale_partials(output) == [partial]  # dead, though not reaped yet
    finally:
        child.kill()
        child.wait()


def test_only_surely_stale_temporary_files_are_removed(tmp_path):
    """The rule is the name and the process: whatever a dead writer left under its temporary name
    goes (marked unfinished, empty because it was killed before its first write, complete because
    it was killed just before its rename, a directory of an export); nothing else does."""
    output = tmp_path / "x.npy"
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = int(finished.stdout)  # a process that has ended
    unfinished = PARTIAL_MARK + b" ..."
    stale = {
        f".x.npy.{gone}-abcd1234.partial": unfinished,
        f".x.npy.{gone}-00000000.partial": b"",  # killed between creating it and its first write
        f".x.npy.{gone}-beef0000.partial": b"\x93NUMPY\x01\x00",  # killed between its last write and the rename
    }
    kept = {
        f".x.npy.{os.getpid()}-abcd1234.partial": unfinished,  # a running writer's (this one)
        f".x.npy.{gone}-0000ffff.partial.bak": unfinished,  # not our name
        f".y.npy.{gone}-abcd1234.partial": unfinished,  # another output's
        ".x.npy.notapid-abcd1234.partial": unfinished,
        f".x.npy.{gone}.partial": unfinished,  # no random part: not a temporary name
        "x.npy.partial": unfinished,
    }
    for name, data in {**stale, **kept}.items():
        (tmp_path / name).write_bytes(data)
    directory = tmp_path / f".x.npy.{gone}-d1d1d1d1.partial"  # an export's temporary directory
    directory.mkdir()
    (directory / "vocab.json").write_text("{")
    removed = remove_stale_partials(output)
    assert sorted(removed) == sorted([tmp_path / name for name in stale] + [directory])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)
    assert remove_stale_partials(tmp_path / "missing-dir" / "x.npy") == []


# -- the engine's writer, the layout's one owner -------------------------------------------------


@pytest.mark.parametrize("vocab_size", [300, 70_000])
def test_the_engines_npy_writer_writes_what_numpy_reads_and_refuses_what_it_cannot_hold(tmp_path, vocab_size):
    from bpestore import Tokenizer

    vocab = {i: bytes([i]) for i in range(256)} | {i: b"x%d" % i for i in range(256, vocab_size)}
    tokenizer = Tokenizer(vocab, [], [])
    writer = tokenizer._engine.npy_writer(tmp_path / "ids.npy")
    assert (tmp_path / "ids.npy").read_bytes().startswith(PARTIAL_MARK)  # no .npy until finished
    blocks = [np.array([0, 1, vocab_size - 1], dtype="<u4"), np.array([], dtype="<u4"), np.arange(200, dtype="<u4")]
    for block in blocks:
        writer.write(block.tobytes())
    with pytest.raises(ValueError, match=f"id {vocab_size} is past the vocabulary's last id, {vocab_size - 1}"):
        writer.write(np.array([vocab_size], dtype="<u4").tobytes())
    with pytest.raises(ValueError, match="not a whole number"):
        writer.write(b"\x00\x00\x00")
    assert writer.finish() == 203
    with pytest.raises(ValueError, match="finished"):
        writer.finish()
    array = np.load(tmp_path / "ids.npy")
    assert array.dtype == (np.uint16 if vocab_size <= 1 << 16 else np.uint32)
    assert array.tolist() == np.concatenate(blocks).tolist()
    with pytest.raises(FileExistsError):  # never over a file that exists
        tokenizer._engine.npy_writer(tmp_path / "ids.npy")
