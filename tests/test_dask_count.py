"""Counting on Dask (bpestore/distributed/count.py), on a LocalCluster of 2 workers started once
for this module: the counts equal single-process counting and tests/reference.py's, whatever the
shards, partitions and fan-in; training from them gives train_bpe's merges; errors of a shard
come back to the caller."""

from __future__ import annotations

import gzip
import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("distributed")
pytest.importorskip("pyarrow")

from bpestore import Store, train_bpe  # noqa: E402
from bpestore.distributed.cluster import MALLOC_TRIM_VARIABLE, dask_client  # noqa: E402
from bpestore.distributed import count as dask_count  # noqa: E402
from bpestore.distributed.count import (  # noqa: E402
    DEFAULT_SHARD_BYTES, DaskCounting, count_on_dask, plan_shards, reduce_graph, split_level,
)
from bpestore.train.backends import CountingBackend, InProcessCounting  # noqa: E402
from bpestore.errors import CorpusDecodeError  # noqa: E402
from bpestore._engine import PretokenCounts  # noqa: E402
from bpestore.train import counts as counts_module  # noqa: E402
from bpestore.train.counts import Counts, train_bpe_from_counts  # noqa: E402
from bpestore.train.trainer import count_corpus  # noqa: E402
from conftest import REPO_ROOT  # noqa: E402
from reference import reference_pretoken_counts  # noqa: E402
from strategies import ENDOFTEXT, SPACED_SPECIAL, SPECIAL_TOKEN_SETS, texts  # noqa: E402
from test_cli import assert_user_error, invoke, ok  # noqa: E402
from test_engine_pretokenize import comparable  # noqa: E402
from tiers import examples

# The slow tier (python3 -m pytest -m 'not slow' leaves it out): Dask clusters.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client():
    with dask_client("local", n_workers=2) as client:
        yield client


def as_dict(counts) -> dict[bytes, int]:
    return dict(counts.items())


def test_workers_run_without_dasks_malloc_trim(client):
    assert set(client.run(lambda: os.environ.get(MALLOC_TRIM_VARIABLE)).values()) == {None}


def test_shards_cover_every_file(tmp_path):
    a = tmp_path / "a.txt"
    a.write_bytes(b"x" * 1000)
    b = tmp_path / "b.txt.gz"
    b.write_bytes(gzip.compress(b"y" * 5000))
    shards = plan_shards([a, b], 300)
    assert [(s.start, s.end) for s in shards if s.source == str(a)] == [(0, 300), (300, 600), (600, 900), (900, None)]
    assert [(s.start, s.end) for s in shards if s.source == str(b)] == [(0, None)]  # compressed: whole


@pytest.mark.parametrize(("partitions", "fan_in", "shard_bytes"), [(1, 2, 5000), (3, 3, 20000), (None, 8, 1 << 20)])
def test_dask_counts_equal_single_process_counts(client, fixture_path, partitions, fan_in, shard_bytes):
    corpus = fixture_path("corpus.en")
    counts = count_on_dask(
        client, [corpus], [ENDOFTEXT], shard_bytes=shard_bytes, partitions=partitions, fan_in=fan_in
    )
    assert isinstance(counts, Counts) and counts.special_tokens == (ENDOFTEXT,)
    assert as_dict(counts) == as_dict(count_corpus(corpus, [ENDOFTEXT]))
    assert counts.source == str(corpus) and counts.origin == "dask"


def test_several_files_urls_and_compressed_files(client, tmp_path, fixture_path):
    """Files are documents of their own (no pre-token spans two), as in single-process counting."""
    story = fixture_path("tinystories_sample.txt").read_text(encoding="utf-8")
    first, second = story[:1500], story[1500:]
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "one.txt").write_text(first, encoding="utf-8")
    (tmp_path / "two.txt.gz").write_bytes(gzip.compress(second.encode()))
    url = (tmp_path / "dir" / "one.txt").as_uri()  # file://... read through fsspec
    expected = Counter(reference_pretoken_counts(first, [])) + Counter(reference_pretoken_counts(second, []))
    assert as_dict(count_on_dask(client, [str(tmp_path / "dir"), tmp_path / "two.txt.gz"], shard_bytes=100)) == dict(expected)
    assert as_dict(count_on_dask(client, [url, str(tmp_path / "*.gz")], shard_bytes=100, partitions=2)) == dict(expected)


# The Dask client's threads use the `random` module while hypothesis draws an example, which
# hypothesis takes for a strategy using it and warns about; the examples do not depend on it.
@pytest.mark.filterwarnings("ignore:Do not use the `random` module:hypothesis.errors.HypothesisDeprecationWarning")
@settings(max_examples=examples(10), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    text=texts(max_pieces=16, assigned_only=True).map(comparable),
    specials=st.sampled_from([s for s in SPECIAL_TOKEN_SETS if s] + [[SPACED_SPECIAL]]),
    shard_bytes=st.integers(5, 60),
    rng=st.randoms(use_true_random=False),
)
def test_dask_counts_equal_the_reference_on_awkward_text(client, tmp_path_factory, text, specials, shard_bytes, rng):
    """Tiny shards: shard edges fall inside characters, pre-tokens and special tokens."""
    pieces = text.split(" ")
    for _ in range(3):  # special tokens wherever a shard edge may fall
        pieces.insert(rng.randrange(len(pieces) + 1), rng.choice(specials))
    text = " ".join(pieces)
    path = tmp_path_factory.mktemp("awkward") / "corpus.txt"
    path.write_bytes(text.encode("utf-8"))
    counts = count_on_dask(client, [path], specials, shard_bytes=shard_bytes, partitions=2, fan_in=3)
    assert as_dict(counts) == dict(reference_pretoken_counts(text, specials))


def reduce_of(shards: int, partitions: int, fan_in: int, min_count: int | None) -> tuple[dict, list]:
    """The graph of :func:`reduce_graph` over ``shards`` stand-ins for the shards' counts, and its roots."""
    import dask

    stand_in = dask.delayed(int, pure=True)
    maps = [stand_in(index, dask_key_name=("map", index)) for index in range(shards)]
    roots = reduce_graph(maps, partitions, fan_in, min_count, "run")
    graph: dict = {}
    for root in roots:
        graph.update(dict(root.__dask_graph__()))
    return graph, [root.key for root in roots]


@pytest.mark.parametrize("fan_in", [4, 8])
@pytest.mark.parametrize("partitions", [1, 2, 4, 8, 9, 64])
@pytest.mark.parametrize("shards", [1, 7, 40, 300])
def test_the_reduce_has_a_task_per_shard_not_per_shard_and_part(shards, partitions, fan_in):
    """O(shards + partitions) tasks; every task adds up at most fan_in inputs; each shard's
    counts reach the root of each part by one path only (exact: counted once), and only through
    the getitems of that part; below the split a task adds up at most fan_in ** split_level <
    fan_in * partitions shards (its memory bound, whatever the corpus's size)."""
    import dask.core

    graph, roots = reduce_of(shards, partitions, fan_in, min_count=2)
    maps = [key for key in graph if key[0] == "map"]
    tasks = len(graph) - len(maps)
    assert tasks <= shards * (1 + 3 / (fan_in - 1)) + partitions * (2 + math.log(shards + 1, fan_in)) + 1
    if shards >= 40 and partitions >= 4:
        assert tasks < shards * partitions / 2  # splitting each shard made shards * partitions getitems
    dependencies = {key: dask.core.get_dependencies(graph, key) for key in graph}
    assert max(len(inputs) for inputs in dependencies.values()) <= fan_in
    below: dict = {key: {key} for key in maps}  # the shards each key adds up
    paths: dict = {key: {key: 1} for key in maps}  # in how many ways each of them reaches it
    parts: dict = {key: set() for key in maps}  # the parts of the getitems it is made of
    for key in dask.core.toposort(graph, dependencies=dependencies):
        if key in below:
            continue
        inputs = dependencies[key]
        below[key] = set().union(*(below[input] for input in inputs))
        parts[key] = set().union(*(parts[input] for input in inputs)) | ({key[-1]} if "part" in key[0] else set())
        paths[key] = {}
        for input in inputs:
            for shard, ways in paths[input].items():
                paths[key][shard] = paths[key].get(shard, 0) + ways
    for part, root in enumerate(roots):
        assert paths[root] == {shard: 1 for shard in maps}
        assert parts[root] == ({part} if partitions > 1 else set())
    if partitions > 1:
        covered = max(len(below[key]) for key in graph if "split" in key[0])
        assert covered <= fan_in ** split_level(partitions, fan_in) < fan_in * partitions


def test_40_shards_in_4_parts_run_69_tasks_on_the_cluster(client, fixture_path):
    """What the scheduler runs (its task stream): 40 counts, 5 sums split in 4 parts, 20 getitems
    and 4 totals (pruned), where a getitem per shard and part made 40 + 160 + 4 * 6 = 224."""
    import distributed

    corpus = fixture_path("corpus.en")
    shard_bytes = corpus.stat().st_size // 40 + 1
    assert len(plan_shards([corpus], shard_bytes)) == 40
    with distributed.get_task_stream(client) as stream:
        counts = count_on_dask(client, [corpus], shard_bytes=shard_bytes, partitions=4, min_count=2)
    assert as_dict(counts) == {word: n for word, n in as_dict(count_corpus(corpus, [])).items() if n >= 2}
    assert len(stream.data) == 69, Counter(str(record["key"]).split(",")[0] for record in stream.data)


def test_min_count_prunes_the_totals_exactly(client, fixture_path):
    corpus = fixture_path("corpus.en")
    full = as_dict(count_corpus(corpus, []))
    pruned = count_on_dask(client, [corpus], shard_bytes=8000, partitions=3, min_count=5)
    assert as_dict(pruned) == {word: n for word, n in full.items() if n >= 5}



def test_min_count_keeps_a_word_rare_in_every_shard(client, tmp_path):
    """Pruning shard by shard would lose a word that is frequent only in the whole corpus."""
    block = "filler words here and there " * 20 + "zebra "
    path = tmp_path / "c.txt"
    path.write_text(block * 6)
    counts = count_on_dask(client, [path], shard_bytes=len(block), partitions=2, min_count=6)
    assert len(plan_shards([path], len(block))) == 6
    assert counts[b" zebra"] == 6 and b" filler" in counts and len(counts) == 6


def test_training_from_dask_counts_gives_the_merges_of_train_bpe(client, fixture_path, tmp_path):
    corpus = fixture_path("corpus.en")
    counts = count_on_dask(client, [corpus], [ENDOFTEXT], shard_bytes=10000)
    expected = train_bpe(corpus, 500, [ENDOFTEXT])
    assert train_bpe_from_counts(counts, 500) == expected
    with Store(tmp_path / "s.db") as store:
        [ref] = store.train_from_counts(counts, "dask", 500)
        assert store.load_model(ref).merges == expected[1]
        assert (store.info(ref).corpus_path, store.info(ref).corpus_origin) == (str(corpus), "dask")


def test_the_dask_backend_counts_what_the_in_process_one_does_and_trains_alike(client, fixture_path, tmp_path):
    """The two backends of the counting seam: identical counts; Store.train with either gives the same merges."""
    corpus = fixture_path("corpus.en")
    dask = DaskCounting(client, shard_bytes=10000, partitions=3)
    assert isinstance(dask, CountingBackend)
    counts = dask.count([corpus], [ENDOFTEXT])
    assert as_dict(counts) == as_dict(InProcessCounting().count(corpus, [ENDOFTEXT]))
    with Store(tmp_path / "s.db") as store:
        [on_dask] = store.train([corpus], "d", 400, [ENDOFTEXT], counting=dask)
        [here] = store.train(corpus, "h", 400, [ENDOFTEXT])
        assert store.load_model(on_dask).merges == store.load_model(here).merges
        assert (store.info(on_dask).corpus_path, store.info(on_dask).corpus_origin) == (str(corpus), "dask")
        assert store.info(here).corpus_origin == "files"


def test_a_shards_error_reaches_the_caller(client, tmp_path):
    data = b"fine text " * 300 + b"\xc3\x28" + b" more" * 100
    path = tmp_path / "bad.txt"
    path.write_bytes(data)
    with pytest.raises(CorpusDecodeError) as error:
        count_on_dask(client, [path], shard_bytes=500)
    assert error.value.offset == data.index(b"\xc3\x28")
    assert error.value.path == str(path)
    with pytest.raises(FileNotFoundError):
        count_on_dask(client, [tmp_path / "missing.txt"])


def test_cli_trains_with_dask_local(tmp_path, fixture_path, monkeypatch):
    """``--dask local`` starts (and stops) a cluster of its own; --shard-size and --partitions
    reach the count."""
    calls: list[dict] = []

    def recording(client, inputs, special_tokens=(), **options):
        calls.append(options)
        return count_on_dask(client, inputs, special_tokens, **options)

    monkeypatch.setattr(dask_count, "count_on_dask", recording)
    corpus = fixture_path("tinystories_sample.txt")
    db = tmp_path / "s.db"
    [ref] = ok(invoke("train", corpus, "--dask", "local", "--workers", 2, "--name", "d", "--vocab-size", 320, "-q", "--db", db)).split()
    ok(invoke(
        "train", corpus, "--dask", "local", "--workers", 2, "--min-count", 3, "--shard-size", "1.5K", "--partitions", 3,
        "--name", "p", "--vocab-size", 320, "-q", "--db", db,
    ))
    assert [(call["shard_bytes"], call["partitions"]) for call in calls] == [(DEFAULT_SHARD_BYTES, None), (1536, 3)]
    with Store(db) as store:
        assert store.load_model(ref).merges == train_bpe(corpus, 320)[1]
        assert Path(store.info(ref).corpus_path) == corpus and store.info(ref).corpus_origin == "dask"
        pruned = {word: n for word, n in count_corpus(corpus, []).items() if n >= 3}
        assert store.load_model("p").merges == train_bpe_from_counts(pruned, 320)[1]
        assert store.info("p").corpus_path == f"{corpus} (min_count=3)"
    assert f"counts: dask: {corpus.name} (min_count=3)" in ok(invoke("list", "--wide", "--db", db))


def test_the_client_receives_the_parts_as_engine_counts_and_makes_no_dict_of_them(client, fixture_path, tmp_path, monkeypatch):
    """``train --dask``: the client receives one engine Counts per part (unpickled from flat
    arrays, each a fraction of the whole), and nothing on the way into the store makes a dict
    of the counts (or walks them in Python): every such method raises while the command runs."""
    corpus = fixture_path("corpus.en")
    received: list[int] = []
    rebuild = counts_module._rebuild  # what unpickles Counts here: the parts as they arrive

    def recording(*args):
        counts = rebuild(*args)
        received.append(len(counts))
        return counts

    def no_dict(*args, **kwargs):
        raise AssertionError("the client walked or made a dict of the counts")

    with monkeypatch.context() as patched:
        patched.setattr(counts_module, "_rebuild", recording)
        for name in ("to_dict", "items", "keys", "values", "__iter__"):
            patched.setattr(PretokenCounts, name, no_dict)
        for name in ("__iter__", "items", "keys", "values"):
            patched.setattr(Counts, name, no_dict)
        result = invoke(
            "train", corpus, "--dask", client.scheduler.address, "--shard-size", "8K", "--partitions", 3, "--min-count", 2,
            "--name", "t", "--vocab-size", 400, "-q", "--db", tmp_path / "s.db", env={"BPESTORE_DEBUG": "1"},
        )
    ok(result)
    expected = {word: n for word, n in as_dict(count_corpus(corpus, [])).items() if n >= 2}
    assert len(received) == 3 and sum(received) == len(expected) and max(received) < len(expected) / 2
    with Store(tmp_path / "s.db") as store:
        assert store.load_model("t").merges == train_bpe_from_counts(expected, 400)[1]
        assert store.pretoken_counts(store.corpus_of("t").id).to_dict() == expected


def test_cli_shard_size_and_partitions_need_dask_and_a_size(tmp_path, fixture_path):
    corpus = fixture_path("tinystories_sample.txt")
    train = ("train", corpus, "--name", "t", "--vocab-size", 300, "--db", tmp_path / "s.db")
    for option in (("--shard-size", "64M"), ("--partitions", 4)):
        assert_user_error(invoke(*train, *option), option[0], "--dask")
    for size in ("12Q", "0", "-1M"):
        assert_user_error(invoke(*train, "--dask", "local", "--shard-size", size), "--shard-size", repr(size))
    assert invoke(*train, "--dask", "local", "--partitions", 0).exit_code == 2  # click's usage error
    assert not (tmp_path / "s.db").exists()  # refused before the store is opened (or a cluster started)


# -- a worker killed (the command in a process of its own, so that what Dask's processes print is
# seen as a user sees it) ----------------------------------------------------------------------------


def bpestore_process(*args, cwd: Path, env: dict | None = None) -> subprocess.Popen:
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]), **(env or {}))
    environment.pop("BPESTORE_DEBUG", None)
    return subprocess.Popen(
        [sys.executable, "-m", "bpestore.cli", *map(str, args)], cwd=cwd, env=environment,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def some_words(seed: int, size: int) -> str:
    """About ``size`` characters of words drawn from 2,000 made-up ones: text the engine counts at a
    steady pace, with few distinct pre-tokens (training on it is quick)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    vocabulary = ["".join(chr(ord("a") + letter) for letter in rng.integers(0, 26, size=rng.integers(2, 9))) for _ in range(2000)]
    return " ".join(vocabulary[index] for index in rng.integers(0, len(vocabulary), size=size // 6))


def test_quiet_keeps_a_killed_workers_logs_off_stderr(tmp_path):
    """``train --dask local -q`` with a worker SIGKILLed while it counts a shard: its shards are
    counted again elsewhere, the tokenizer is right, and no log of Dask's reaches stderr: no
    warning of the scheduler or the nanny, no traceback of a peer whose transfer broke."""
    psutil = pytest.importorskip("psutil")
    files = []
    for index in range(8):
        files.append(tmp_path / f"part-{index}.txt")
        files[-1].write_text(some_words(index, 1_000_000))
    process = bpestore_process(
        "train", *files, "--dask", "local", "--workers", 2, "--name", "k", "--vocab-size", 300, "-q", "--db", tmp_path / "s.db",
        cwd=tmp_path,
    )
    counted = {str(path) for path in files}
    killed = None
    deadline = time.monotonic() + 120
    try:
        while killed is None and process.poll() is None and time.monotonic() < deadline:
            for child in psutil.Process(process.pid).children():
                try:
                    if counted & {file.path for file in child.open_files()}:  # a worker counting a shard
                        child.send_signal(signal.SIGKILL)
                        killed = child.pid
                        break
                except psutil.Error:
                    pass  # gone meanwhile, or not ours to look at
            time.sleep(0.002)
        stdout, stderr = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        process.kill()
    assert killed is not None, "no worker was seen counting: the run ended first?"
    assert process.returncode == 0, stderr
    # nothing of Dask's logging (a Python warning of Dask's, "Creating scratch directories is
    # taking a surprisingly long time" under load, is not logging: -q leaves warnings alone)
    assert "Traceback" not in stderr and "distributed" not in stderr and " - WARNING - " not in stderr, stderr
    with Store(tmp_path / "s.db") as store:
        [here] = store.train(files, "here", 300)
        assert store.load_model(stdout.strip()).merges == store.load_model(here).merges


def test_a_worker_killed_while_the_local_cluster_starts_is_one_line(tmp_path):
    """Each worker process kills itself as it starts (a preload script): one line that says so,
    status 1, not an internal error (Dask's RuntimeError: Nanny failed to start)."""
    preload = tmp_path / "die.py"
    preload.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    corpus = tmp_path / "c.txt"
    corpus.write_text("some text to count " * 100)
    process = bpestore_process(
        "train", corpus, "--dask", "local", "--workers", 2, "--name", "k", "--vocab-size", 300, "--db", tmp_path / "s.db",
        cwd=tmp_path, env={"DASK_DISTRIBUTED__WORKER__PRELOAD": f'["{preload}"]'},
    )
    try:
        stdout, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert (process.returncode, stdout) == (1, "")
    assert stderr.startswith("Error: the local Dask cluster could not start: a worker process died (Worker process "), stderr
    assert stderr.count("\n") == 1 and "killed by signal 9" in stderr



def test_why_a_local_cluster_did_not_start():
    """The one line's reason: a worker's own error (re-raised by Dask) before a nanny's note of
    its death, Dask's "failed to start" RuntimeErrors and state assertions left out."""
    import logging

    from bpestore.distributed.cluster import _why_not_started

    def chain(*errors: BaseException) -> BaseException:
        for outer, inner in zip(errors, errors[1:]):
            outer.__cause__ = inner
        return errors[0]

    death = logging.LogRecord("distributed.nanny", logging.INFO, "", 0, "Worker process %d was killed by signal %d", (12, 9), None)
    killed = chain(RuntimeError("Nanny failed to start."), AssertionError("Status.starting"), RuntimeError("\n\n"))
    assert _why_not_started(killed, [death]) == "a worker process died (Worker process 12 was killed by signal 9)"
    assert _why_not_started(killed, []) == "a worker process died or failed while starting"
    failed = chain(RuntimeError("Cluster failed to start: Nanny failed to start."), ImportError("no module named x"))
    assert _why_not_started(failed, [death]) == "a worker process failed to start (ImportError: no module named x)"
    assert _why_not_started(OSError(98, "Address already in use"), []) == "OSError: [Errno 98] Address already in use"
