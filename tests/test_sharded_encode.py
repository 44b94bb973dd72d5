"""Encoding a dataset into shards (bpestore/encode/shards.py) here and on Dask
(bpestore/distributed/encode.py): the ids, the manifest, and reruns after a kill.

"Single-process encode" of a dataset here means each file encoded on its own with
``Tokenizer.encode`` (the oracle: the Python encoder of tests/reference.py for the small tokenizer)
and the ids concatenated; where every file ends at a safe cut (``<|endoftext|>``) that equals the
encoding of all the text joined, which is tested too. The Dask tests share one ``LocalCluster``
(2 single-threaded worker processes) per module.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpestore import Tokenizer, train_bpe
from bpestore.encode.shards import (
    MANIFEST_NAME,
    ShardManifestError,
    encode_shards,
    load_shards,
    plan_shards,
    read_manifest,
    shard_paths,
)
from conftest import REPO_ROOT, shared_file
from reference import reference_encode
from strategies import texts
from tiers import examples

# The slow tier (python3 -m pytest -m 'not slow' leaves it out): Dask clusters.
pytestmark = pytest.mark.slow

ENDOFTEXT = "<|endoftext|>"
SEP = "<|sep|>"

pytest.importorskip("distributed")


# -- tokenizers and data ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    return Tokenizer.from_files(
        shared_file("fixtures", "gpt2_vocab.json"), shared_file("fixtures", "gpt2_merges.txt"), [ENDOFTEXT]
    )


@pytest.fixture(scope="module")
def small() -> Tokenizer:
    """A tokenizer trained here (300 ids, two special tokens), checked against the Python oracle."""
    vocab, merges = train_bpe(shared_file("fixtures", "tinystories_sample.txt"), 300, [ENDOFTEXT, SEP])
    return Tokenizer(vocab, merges, [ENDOFTEXT, SEP])


def oracle(tokenizer: Tokenizer, text: str) -> list[int]:
    """The ids of ``text`` by the Python reference encoder (tests/reference.py)."""
    return reference_encode(text, tokenizer.vocab, tokenizer.merges, tokenizer.special_tokens)


def write_files(directory: Path, texts_: list[str]) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, text in enumerate(texts_):
        path = directory / f"part-{index:03d}.txt"
        path.write_bytes(text.encode("utf-8"))
        paths.append(path)
    return paths


def awkward_files() -> list[str]:
    """A dataset cut badly: mid-word and mid-document, an empty file, non-ASCII, special tokens
    at the very start and end of files, one cut inside a special token's string."""
    stories = shared_file("fixtures", "tinystories_sample.txt").read_text(encoding="utf-8")
    german = shared_file("fixtures", "german.txt").read_text(encoding="utf-8")
    address = shared_file("fixtures", "address.txt").read_text(encoding="utf-8")
    return [
        stories[:1000],  # ends mid-document (and mid-word)
        stories[1000:2600],
        "",
        german,
        ENDOFTEXT + " Привет мир 😀 中文\n" + ENDOFTEXT,
        address + "<|endof",  # a special token's string cut by the file boundary
        "text|>" + SEP + " naïve  \n\n",
        stories[2600:],
    ]


def per_file_ids(tokenizer: Tokenizer, files: list[str]) -> np.ndarray:
    return np.array([token for text in files for token in tokenizer.encode(text)], dtype=np.int64)


def check_manifest(output_dir: Path, files: list[str], dtype: str) -> None:
    """Every entry's claims hold: the source, the number of ids, the file's bytes and SHA-256."""
    header, entries = read_manifest(output_dir)
    assert header["shards"] == len(files) and header["dtype"] == dtype
    assert sorted(entries) == list(range(len(files)))
    for index, entry in entries.items():
        path = output_dir / entry["file"]
        array = np.load(path)
        assert array.dtype == np.dtype(dtype)
        assert entry["tokens"] == len(array)
        assert entry["bytes"] == path.stat().st_size
        assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert Path(entry["source"]).read_bytes() == files[index].encode("utf-8")
    assert not [name for name in os.listdir(output_dir) if name.endswith(".partial")]


# -- a Dask cluster per module ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dask_cluster():
    """A client of a local cluster of 2 single-threaded worker processes (about 2.5 s to start)."""
    from bpestore.distributed.cluster import dask_client

    with dask_client("local", n_workers=2) as client:
        yield client


# -- the ids -------------------------------------------------------------------------------------------------


def test_plan_sorts_each_glob_keeps_argument_order_and_refuses_repeats(tmp_path):
    paths = write_files(tmp_path / "data", ["a", "b", "c"])
    extra = write_files(tmp_path / "extra", ["d"])
    shards = plan_shards([str(extra[0]), str(tmp_path / "data" / "*.txt")])
    assert [shard.source for shard in shards] == [str(extra[0])] + [str(path) for path in paths]
    assert [shard.index for shard in shards] == [0, 1, 2, 3]
    assert [shard.file_name for shard in shards][:2] == ["shard-00000.npy", "shard-00001.npy"]
    with pytest.raises(ValueError, match="named twice"):
        plan_shards([str(paths[0]), str(tmp_path / "data" / "*.txt")])
    with pytest.raises(FileNotFoundError, match="no file matches"):
        plan_shards([str(tmp_path / "nothing" / "*.txt")])
    with pytest.raises(FileNotFoundError):
        plan_shards([str(tmp_path / "missing.txt")])


@pytest.mark.parametrize("name", ["gpt2", "small"])
def test_local_shards_equal_per_file_encoding(name, request, tmp_path):
    tokenizer = request.getfixturevalue(name)
    files = awkward_files()
    write_files(tmp_path / "data", files)
    result = encode_shards(tokenizer, [str(tmp_path / "data" / "*.txt")], tmp_path / "out", ref=name, workers=2)
    assert result.encoded == list(range(len(files))) and result.skipped == []
    expected = per_file_ids(tokenizer, files)
    if name == "small":  # the engine itself against the Python oracle
        assert expected.tolist() == [token for text in files for token in oracle(tokenizer, text)]
    assert np.array_equal(load_shards(tmp_path / "out"), expected)
    assert result.tokens == len(expected)
    for index, path in enumerate(shard_paths(tmp_path / "out")):
        assert np.load(path).tolist() == tokenizer.encode(files[index])
    check_manifest(tmp_path / "out", files, "uint16")


@pytest.mark.parametrize("name", ["gpt2", "small"])
def test_dask_shards_equal_per_file_encoding(name, request, tmp_path, dask_cluster):
    from bpestore.distributed.encode import encode_shards_on_dask

    tokenizer = request.getfixturevalue(name)
    files = awkward_files()
    write_files(tmp_path / "data", files)
    result = encode_shards_on_dask(dask_cluster, tokenizer, [str(tmp_path / "data" / "*.txt")], tmp_path / "out", ref=name)
    assert result.encoded == list(range(len(files)))
    assert np.array_equal(load_shards(tmp_path / "out"), per_file_ids(tokenizer, files))
    check_manifest(tmp_path / "out", files, "uint16")


def test_files_cut_at_document_ends_equal_the_whole_text(gpt2, tmp_path):
    """Files that each end with <|endoftext|> (a safe cut) encode as the text joined; a file that
    ends mid-word does not (the documented meaning: each file on its own)."""
    stories = shared_file("fixtures", "tinystories_sample.txt").read_text(encoding="utf-8")
    documents = [part + ENDOFTEXT for part in stories.split(ENDOFTEXT) if part.strip()]
    files = ["".join(documents[start:start + 3]) for start in range(0, len(documents), 3)]
    assert len(files) >= 2
    write_files(tmp_path / "data", files)
    encode_shards(gpt2, [str(tmp_path / "data" / "*.txt")], tmp_path / "out")
    assert load_shards(tmp_path / "out").tolist() == gpt2.encode("".join(files))

    cut = ["Once upon a ti", "me there was"]
    write_files(tmp_path / "cut", cut)
    encode_shards(gpt2, [str(tmp_path / "cut" / "*.txt")], tmp_path / "cut-out")
    ids = load_shards(tmp_path / "cut-out").tolist()
    assert ids == gpt2.encode(cut[0]) + gpt2.encode(cut[1])
    assert ids != gpt2.encode("".join(cut))


def test_a_vocab_past_uint16_writes_uint32(tmp_path):
    vocab = {i: bytes([i]) for i in range(256)} | {70_000: b"ab"}
    tokenizer = Tokenizer(vocab, [(b"a", b"b")], [ENDOFTEXT])
    files = ["abab" + ENDOFTEXT, "", "xab"]
    write_files(tmp_path / "data", files)
    encode_shards(tokenizer, [str(tmp_path / "data" / "*.txt")], tmp_path / "out")
    ids = load_shards(tmp_path / "out")
    assert ids.dtype == np.uint32
    assert ids.tolist() == [70_000, 70_000, 70_001, ord("x"), 70_000]
    check_manifest(tmp_path / "out", files, "uint32")


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(texts(max_pieces=12), min_size=1, max_size=4))
def test_property_shards_equal_each_file_encoded_on_its_own(small, tmp_path_factory, pieces):
    directory = tmp_path_factory.mktemp("prop")
    write_files(directory / "data", pieces)
    encode_shards(small, [str(directory / "data" / "*.txt")], directory / "out", workers=1)
    assert load_shards(directory / "out").tolist() == [token for text in pieces for token in oracle(small, text)]


def test_fsspec_urls_and_another_special_policy(small, tmp_path):
    """Inputs named by fsspec URLs (an in-memory file system; file://) are read as streams; a
    policy other than the default (here: special tokens as ordinary text) holds for every shard."""
    import fsspec

    files = awkward_files()[3:7]
    memory = fsspec.filesystem("memory")
    root = f"/dencode-{os.getpid()}-{time.monotonic_ns()}"
    for index, text in enumerate(files):
        memory.pipe(f"{root}/part-{index}.txt", text.encode("utf-8"))
    try:
        result = encode_shards(small, [f"memory://{root}/*.txt"], tmp_path / "mem")
        assert [entry["source"] for entry in result.entries] == [f"memory://{root}/part-{i}.txt" for i in range(len(files))]
        assert np.array_equal(load_shards(tmp_path / "mem"), per_file_ids(small, files))
        assert encode_shards(small, [f"memory://{root}/*.txt"], tmp_path / "mem").encoded == []
    finally:
        memory.rm(root, recursive=True)

    write_files(tmp_path / "data", files)
    ordinary = encode_shards(
        small, [f"file://{tmp_path}/data/*.txt"], tmp_path / "ordinary", allowed_special=set(), disallowed_special=()
    )
    assert ordinary.tokens == sum(len(small.encode_ordinary(text)) for text in files) != sum(len(small.encode(text)) for text in files)
    assert load_shards(tmp_path / "ordinary").tolist() == [token for text in files for token in small.encode_ordinary(text)]
    assert read_manifest(tmp_path / "ordinary")[0]["special_policy"] == {"allowed_special": [], "disallowed_special": []}


def test_fsspec_output_directory(small, tmp_path):
    """Shards and manifest written through fsspec (an in-memory file system), rerun skipping them."""
    import fsspec

    files = awkward_files()[:4]
    write_files(tmp_path / "data", files)
    memory = fsspec.filesystem("memory")
    out = f"memory:///dencode-out-{os.getpid()}-{time.monotonic_ns()}"
    try:
        first = encode_shards(small, [str(tmp_path / "data" / "*.txt")], out, ref="small")
        assert first.encoded == [0, 1, 2, 3]
        assert np.array_equal(load_shards(out), per_file_ids(small, files))
        header, entries = read_manifest(out)
        assert header["shards"] == 4 and header["tokenizer"] == "small"
        for entry in entries.values():
            data = memory.cat_file(out[len("memory://"):] + "/" + entry["file"])
            assert hashlib.sha256(data).hexdigest() == entry["sha256"] and len(data) == entry["bytes"]
        assert not [name for name in memory.ls(out[len("memory://"):], detail=False) if name.endswith(".partial")]
        assert encode_shards(small, [str(tmp_path / "data" / "*.txt")], out).skipped == [0, 1, 2, 3]
        assert shard_paths(out)[0] == out + "/shard-00000.npy"
    finally:
        memory.rm(out[len("memory://"):], recursive=True)


# -- the tokenizer travels compactly --------------------------------------------------------------------------


def test_tokenizer_pickles_as_its_model_without_caches(gpt2):
    before = pickle.dumps(gpt2)
    gpt2.encode(" ".join(f"word{i} more{i * 7}" for i in range(20_000)))  # fill the cache
    after = pickle.dumps(gpt2)
    assert len(after) == len(before) <= len(pickle.dumps(gpt2.model)) + 1000  # the model and a small wrapper
    copy = pickle.loads(after)
    text = "Hello wörld" + ENDOFTEXT + " 123"
    assert copy.encode(text) == gpt2.encode(text) and copy.special_tokens == gpt2.special_tokens


# -- reruns ------------------------------------------------------------------------------------------------------


def mtimes(output_dir: Path) -> dict[str, int]:
    return {path.name: path.stat().st_mtime_ns for path in output_dir.glob("shard-*.npy")}


def test_rerun_skips_finished_shards_and_redoes_changed_ones(small, tmp_path):
    files = awkward_files()
    paths = write_files(tmp_path / "data", files)
    out = tmp_path / "out"
    encode_shards(small, [str(tmp_path / "data" / "*.txt")], out)
    before = mtimes(out)
    again = encode_shards(small, [str(tmp_path / "data" / "*.txt")], out)
    assert again.encoded == [] and again.skipped == list(range(len(files)))
    assert mtimes(out) == before

    files[3] = files[3] + " more"  # a source changed: that shard alone is encoded again
    paths[3].write_bytes(files[3].encode("utf-8"))
    (out / "shard-00005.npy").unlink()  # an output lost: that one too
    third = encode_shards(small, [str(tmp_path / "data" / "*.txt")], out)
    assert third.encoded == [3, 5]
    assert {name: time_ for name, time_ in mtimes(out).items() if name not in ("shard-00003.npy", "shard-00005.npy")} == {
        name: time_ for name, time_ in before.items() if name not in ("shard-00003.npy", "shard-00005.npy")
    }
    assert np.array_equal(load_shards(out), per_file_ids(small, files))
    check_manifest(out, files, "uint16")

    fewer = encode_shards(small, [str(path) for path in paths[:2]], out)  # fewer inputs: stale shards go
    assert fewer.skipped == [0, 1] and sorted(mtimes(out)) == ["shard-00000.npy", "shard-00001.npy"]
    assert np.array_equal(load_shards(out), per_file_ids(small, files[:2]))


def test_rerun_with_another_tokenizer_or_policy_is_refused(gpt2, small, tmp_path):
    write_files(tmp_path / "data", ["hello", "world"])
    inputs = [str(tmp_path / "data" / "*.txt")]
    encode_shards(small, inputs, tmp_path / "out", ref="small")
    manifest = (tmp_path / "out" / MANIFEST_NAME).read_bytes()
    with pytest.raises(ShardManifestError, match="another tokenizer"):
        encode_shards(gpt2, inputs, tmp_path / "out", ref="gpt2")
    with pytest.raises(ShardManifestError, match="another special-token policy"):
        encode_shards(small, inputs, tmp_path / "out", ref="small", allowed_special=set(), disallowed_special=())
    assert (tmp_path / "out" / MANIFEST_NAME).read_bytes() == manifest


def test_unfinished_encoding_cannot_be_loaded(small, tmp_path):
    write_files(tmp_path / "data", ["hello", "bad \xff", "world"])
    (tmp_path / "data" / "part-001.txt").write_bytes(b"bad \xff")
    from bpestore.errors import CorpusDecodeError

    with pytest.raises(CorpusDecodeError):
        encode_shards(small, [str(tmp_path / "data" / "*.txt")], tmp_path / "out")
    header, entries = read_manifest(tmp_path / "out")
    assert sorted(entries) == [0] and header["shards"] == 3
    with pytest.raises(ShardManifestError, match="not done"):
        load_shards(tmp_path / "out")


KILLED_RUN = textwrap.dedent(
    """
    import pickle, sys
    from distributed import Client
    from bpestore.distributed.encode import encode_shards_on_dask

    address, tokenizer_path, data, out = sys.argv[1:]
    with open(tokenizer_path, "rb") as file:
        tokenizer = pickle.load(file)
    with Client(address) as client:
        encode_shards_on_dask(client, tokenizer, [data], out, ref="gpt2")
    """
)


def random_words(seed: int, size: int) -> str:
    """``size`` characters of made-up lowercase words: nearly every pre-token new, so that the
    encoder's cache does not help and a shard takes a while (~0.1 s per MB for GPT-2)."""
    letters = np.random.default_rng(seed).integers(ord("a"), ord("z") + 1, size=size, dtype=np.uint8)
    letters[np.random.default_rng(seed + 1).random(size) < 0.13] = ord(" ")
    return letters.tobytes().decode("ascii")


def test_client_killed_mid_run_then_rerun_completes_without_redoing_shards(gpt2, tmp_path, dask_cluster):
    from bpestore.distributed.encode import encode_shards_on_dask

    files = [random_words(seed, 800_000) for seed in range(8)]  # 8 shards, ~0.1 s each on one core
    write_files(tmp_path / "data", files)
    out = tmp_path / "out"
    tokenizer_path = tmp_path / "gpt2.pickle"
    tokenizer_path.write_bytes(pickle.dumps(gpt2))
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, dask_cluster.scheduler_info()["address"], str(tokenizer_path),
         str(tmp_path / "data" / "*.txt"), str(out)],
        env=environment, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    try:
        while True:
            manifest = out / MANIFEST_NAME
            if manifest.exists() and len(manifest.read_text().splitlines()) >= 2:
                break
            assert process.poll() is None, process.stderr.read().decode()
            assert time.monotonic() < deadline, "no shard was finished within 60 s"
            time.sleep(0.005)
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.wait()
    _, done_at_kill = read_manifest(out)
    assert 1 <= len(done_at_kill) < len(files), "the run was not killed part-way; make the shards bigger"
    finished = {entry["file"]: (out / entry["file"]).stat().st_mtime_ns for entry in done_at_kill.values()}

    result = encode_shards_on_dask(dask_cluster, gpt2, [str(tmp_path / "data" / "*.txt")], out, ref="gpt2")
    assert set(result.skipped) >= set(done_at_kill)
    assert not set(result.encoded) & set(done_at_kill)
    assert set(result.skipped) | set(result.encoded) == set(range(len(files)))
    assert {name: (out / name).stat().st_mtime_ns for name in finished} == finished
    expected = np.concatenate([np.array(ids, dtype=np.int64) for ids in gpt2.encode_batch(files)])
    assert np.array_equal(load_shards(out), expected)
    check_manifest(out, files, "uint16")


def test_worker_killed_mid_run_its_shard_is_redone_elsewhere(gpt2, tmp_path, dask_cluster):
    """A worker SIGKILLed mid-run (after the first shard is recorded): Dask reruns its task on the
    other worker (its nanny restarts it); the result is complete and equal, and no unfinished file
    is left."""
    import threading

    from bpestore.distributed.encode import encode_shards_on_dask

    files = [random_words(100 + seed, 800_000) for seed in range(8)]
    write_files(tmp_path / "data", files)
    out = tmp_path / "out"
    pids = dask_cluster.run(os.getpid)
    victim = pids[sorted(pids)[0]]
    killed = threading.Event()

    def kill_after_first_shard() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            manifest = out / MANIFEST_NAME
            if manifest.exists() and len(manifest.read_text().splitlines()) >= 2:
                os.kill(victim, signal.SIGKILL)
                killed.set()
                return
            time.sleep(0.005)

    killer = threading.Thread(target=kill_after_first_shard)
    killer.start()
    try:
        result = encode_shards_on_dask(dask_cluster, gpt2, [str(tmp_path / "data" / "*.txt")], out)
    finally:
        killer.join()
    assert killed.is_set()
    assert result.encoded == list(range(len(files)))
    expected = np.concatenate([np.array(ids, dtype=np.int64) for ids in gpt2.encode_batch(files)])
    assert np.array_equal(load_shards(out), expected)
    check_manifest(out, files, "uint16")


# -- the command line ------------------------------------------------------------------------------------------------


def test_cli_output_dir_locally_and_on_dask(small, tmp_path, dask_cluster):
    from click.testing import CliRunner

    from bpestore import Store
    from bpestore.cli import main

    db = tmp_path / "store.db"
    with Store(db) as store:
        store.save("g", small.model)
    files = awkward_files()
    write_files(tmp_path / "data", files)
    runner = CliRunner()
    pattern = str(tmp_path / "data" / "*.txt")
    local = runner.invoke(main, ["encode", "g", pattern, "--output-dir", str(tmp_path / "a"), "--db", str(db), "-q"])
    assert local.exit_code == 0, local.output
    assert f"in {len(files)} shards" in local.output
    on_dask = runner.invoke(
        main, ["encode", "g", pattern, "--output-dir", str(tmp_path / "b"), "--dask", dask_cluster.scheduler_info()["address"], "--db", str(db), "-q"]
    )
    assert on_dask.exit_code == 0, on_dask.output
    expected = per_file_ids(small, files)
    assert np.array_equal(load_shards(tmp_path / "a"), expected) and np.array_equal(load_shards(tmp_path / "b"), expected)
    assert read_manifest(tmp_path / "a")[0]["tokenizer"] == "g"
    again = runner.invoke(main, ["encode", "g", pattern, "--output-dir", str(tmp_path / "a"), "--db", str(db), "-q"])
    assert again.exit_code == 0 and f"0 encoded now, {len(files)} already done" in again.output

    urls = runner.invoke(  # URLs keep their "//" (file:// is local)
        main, ["encode", "g", f"file://{tmp_path}/data/*.txt", "--output-dir", f"file://{tmp_path}/c", "--db", str(db), "-q"]
    )
    assert urls.exit_code == 0, urls.output
    assert np.array_equal(load_shards(tmp_path / "c"), expected)

    several = runner.invoke(main, ["encode", "g", *map(str, sorted((tmp_path / "data").iterdir())[:2]), "--db", str(db)])
    assert several.exit_code != 0 and "--output-dir" in several.output


def test_cli_dask_hands_the_workers_absolute_paths(small, tmp_path, dask_cluster, monkeypatch):
    """Relative INPUTs and --output-dir mean what they mean where the command runs, not where the
    workers run (here: the directory the tests started in); the manifest names the sources as a
    local run does, so a local rerun finds every shard done."""
    from click.testing import CliRunner

    from bpestore import Store
    from bpestore.cli import main

    workers_directories = set(dask_cluster.run(os.getcwd).values())
    monkeypatch.chdir(tmp_path)
    assert workers_directories.isdisjoint({str(tmp_path), os.path.realpath(tmp_path)})
    with Store("store.db") as store:
        store.save("g", small.model)
    files = awkward_files()
    write_files(tmp_path / "data", files)
    runner = CliRunner()
    arguments = ["encode", "g", "data/*.txt", "--output-dir", "out", "--db", "store.db", "-q"]
    on_dask = runner.invoke(main, [*arguments, "--dask", dask_cluster.scheduler_info()["address"]])
    assert on_dask.exit_code == 0, on_dask.output
    assert np.array_equal(load_shards(tmp_path / "out"), per_file_ids(small, files))
    assert read_manifest(tmp_path / "out")[1][0]["source"] == os.path.join("data", "part-000.txt")
    assert not any(os.path.exists(os.path.join(directory, "out")) for directory in workers_directories)
    again = runner.invoke(main, arguments)
    assert again.exit_code == 0 and f"0 encoded now, {len(files)} already done" in again.output
