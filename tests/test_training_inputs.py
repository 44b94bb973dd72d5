"""Issue 15: training on many inputs (files, directories, globs, compressed files, iterables of
strings), the merge loop's memory estimate (--dry-run, --max-memory), and Ctrl-C after counting.

The rule under test: a file boundary (or the boundary between two strings of an iterable) is a
cut like a special token. So the counts of several files are the reference counts of their
concatenation with a special token between them, and so are the merges. For files of whole lines
(README states the condition) that is also the literal concatenation's counts.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import lzma
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from pathlib import Path

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpestore import Store, train_bpe
from bpestore._engine import GPT2_PATTERN, Pretokenizer, count_texts
from bpestore.pretokenize.inputs import expand_inputs, text_pieces
from bpestore.train import memory
from bpestore.train.trainer import count_any
from bpestore.workflow import MemoryLimitError, TrainingInterrupted
from reference import reference_pretoken_counts, reference_train
from strategies import ENDOFTEXT, SPECIAL_TOKEN_SETS, random_text, texts
from test_cli import invoke, ok, subprocess_env
from test_engine_pretokenize import comparable
from tiers import examples

try:
    import zstandard
except ImportError:  # pragma: no cover - a dependency, but keep the rest of the tests running
    zstandard = None

FILE_CUT = "<|file boundary|>"  # a special token no generated text holds


def some_text(rng: random.Random, size: int, **options) -> str:
    """Random awkward text on which the engine and the `regex` module's newer Unicode tables agree
    (see tests/strategies.py: assigned code points, minus those whose category changed)."""
    return comparable(random_text(rng, size, assigned_only=True, **options))


TEXTS = texts(max_pieces=12, assigned_only=True).map(comparable)
COMPRESSIONS = ["", ".gz", ".xz"] + ([".zst"] if zstandard else [])


def write(path: Path, text: str) -> Path:
    """``text`` as UTF-8 at ``path``, compressed as its suffix says."""
    data = text.encode("utf-8")
    if path.suffix == ".gz":
        data = gzip.compress(data)
    elif path.suffix == ".xz":
        data = lzma.compress(data)
    elif path.suffix == ".zst":
        data = zstandard.ZstdCompressor().compress(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def counts_of_files_rule(parts: list[str], specials: list[str]) -> Counter:
    """The reference counts of several files: their concatenation, cut between files."""
    return reference_pretoken_counts(FILE_CUT.join(parts), [*specials, FILE_CUT])


# -- many inputs: counts --------------------------------------------------------------------------


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(TEXTS, min_size=1, max_size=4),
    specials=st.sampled_from(SPECIAL_TOKEN_SETS),
    data=st.data(),
)
def test_files_count_as_their_concatenation_cut_between_files(parts, specials, data):
    assert all(FILE_CUT not in part for part in parts)
    suffixes = data.draw(st.lists(st.sampled_from(COMPRESSIONS), min_size=len(parts), max_size=len(parts)))
    with tempfile.TemporaryDirectory() as directory:
        paths = [write(Path(directory) / f"part{i}.txt{suffix}", part) for i, (part, suffix) in enumerate(zip(parts, suffixes))]
        counted = count_any(paths, specials, workers=2).to_dict()
    assert counted == dict(counts_of_files_rule(parts, specials))


LEADING_WHITESPACE = regex.compile(r"\A\s+")  # \s as the GPT-2 pattern means it (tests/reference.py)
TRAILING_WHITESPACE = regex.compile(r"\s+\Z")


def as_shard(text: str, *, first: bool, last: bool) -> str:
    """``text`` in the shape README names for files whose counts are the concatenation's: every
    file but the first starts with a non-whitespace character; every file but the last ends with
    a single "\n" after a non-whitespace character."""
    if not first:
        text = LEADING_WHITESPACE.sub("", text) or "x"
    if not last:
        text = (TRAILING_WHITESPACE.sub("", text) or "x") + "\n"
    return text


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts_=st.lists(TEXTS, min_size=1, max_size=4),
    specials=st.sampled_from(SPECIAL_TOKEN_SETS),
    data=st.data(),
)
def test_files_shaped_as_lines_count_as_their_literal_concatenation(texts_, specials, data):
    """Issue 15's "equal to the concatenated file's counts", where it holds: files of whole lines
    (each ends with one "\n" after a non-whitespace character, the next starts with one) count,
    given as files, a directory or a glob, plain or compressed, exactly as `cat` of them does."""
    parts = [as_shard(text, first=i == 0, last=i == len(texts_) - 1) for i, text in enumerate(texts_)]
    suffixes = data.draw(st.lists(st.sampled_from(COMPRESSIONS), min_size=len(parts), max_size=len(parts)))
    concatenated = "".join(parts)
    expected = dict(reference_pretoken_counts(concatenated, specials))
    with tempfile.TemporaryDirectory() as directory:
        shards = Path(directory) / "shards"
        paths = [write(shards / f"{i:02d}.txt{suffix}", part) for i, (part, suffix) in enumerate(zip(parts, suffixes))]
        cat = write(Path(directory) / "cat.txt", concatenated)
        assert count_any(cat, specials).to_dict() == expected
        assert count_any(paths, specials, workers=2).to_dict() == expected
        assert count_any(shards, specials).to_dict() == expected
        assert count_any(str(shards / "*"), specials).to_dict() == expected


@pytest.mark.parametrize(
    "parts",
    [
        ["a blank line\n\n", "at the end\n"],  # "\n\n" alone is one pre-token, before a word two
        ["spaces after the last line  \n", "next\n"],
        ["a last line of spaces\n  \n", "next\n"],
        ["CRLF\r\n", "next\n"],
        ["a line\n", "  indented\n"],  # "\n " then " indented" in the concatenation
        ["no newline at the end", "joins the next word\n"],
    ],
)
def test_files_not_shaped_as_lines_can_count_otherwise_than_their_concatenation(parts, tmp_path):
    """Why README's condition is needed: at these boundaries the files' counts (cut between files)
    differ from the literal concatenation's."""
    paths = [write(tmp_path / f"{i}.txt", part) for i, part in enumerate(parts)]
    cat = write(tmp_path / "cat" / "cat.txt", "".join(parts))
    counted = count_any(paths, []).to_dict()
    assert counted == dict(counts_of_files_rule(parts, []))
    assert counted != count_any(cat, []).to_dict() == dict(reference_pretoken_counts("".join(parts), []))


@settings(max_examples=examples(60), deadline=None)
@given(text=texts(max_pieces=40, assigned_only=True).map(comparable), specials=st.sampled_from(SPECIAL_TOKEN_SETS), seed=st.integers(0, 2**32 - 1))
def test_streamed_pieces_count_as_the_whole_text(text, specials, seed):
    """A compressed file is decompressed in blocks cut anywhere (mid-word, mid-special-token);
    the pieces handed to the counter are cut only where nothing changes."""
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(0, 12))))
    blocks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    cutter = Pretokenizer(GPT2_PATTERN, specials)
    pieces = list(text_pieces(blocks, cutter.last_safe_cut))
    assert "".join(pieces) == text
    assert count_texts(pieces, GPT2_PATTERN, specials).to_dict() == dict(reference_pretoken_counts(text, specials))


@pytest.mark.slow  # (over 2 s here: the full suite's)
def test_big_compressed_file_streams_in_pieces(tmp_path):
    """Over 1 MiB of decompressed text, so that it is read in several blocks."""
    text = some_text(random.Random(15), 1_500_000)
    counted = count_any(write(tmp_path / "big.txt.gz", text), [ENDOFTEXT]).to_dict()
    assert counted == dict(reference_pretoken_counts(text, [ENDOFTEXT]))


@pytest.mark.parametrize("suffix", [".txt", ".txt.gz", ".txt.xz"] + ([".txt.zst"] if zstandard else []))
def test_a_compressed_input_closes_its_file(tmp_path, suffix):
    """Closing what open_binary returns closes the file on disk too (GzipFile and LZMAFile given
    a file object leave it open: a file handle per input until the garbage collector, and a
    ResourceWarning)."""
    import gc
    import warnings

    from bpestore.pretokenize.inputs import open_binary

    path = write(tmp_path / f"t{suffix}", "some text\n" * 100)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with open_binary(path) as file:
            assert file.read() == b"some text\n" * 100
        del file
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


@pytest.fixture
def shards(tmp_path):
    """Texts spread over a tree of plain and compressed files, with a hidden file and directory
    (left out of a directory's files) and their concatenation cut between files, in path order."""
    rng = random.Random(1515)
    root = tmp_path / "shards"
    layout = ["a/1.txt", "a/2.txt.gz", "b/c/3.txt.xz", "b/4.txt", "5.txt" + (".zst" if zstandard else "")]
    parts = [some_text(rng, 3000) for _ in layout]
    for name, part in zip(layout, parts):
        write(root / name, part)
    write(root / ".hidden.txt", "never counted")
    write(root / ".git" / "objects.txt", "never counted")
    in_path_order = [part for _, part in sorted(zip([root / name for name in layout], parts))]
    return root, layout, in_path_order


def test_directories_and_globs_name_the_same_files(shards):
    root, layout, _ = shards
    expected = sorted(root / name for name in layout)
    assert expand_inputs(root) == expected
    assert expand_inputs(str(root / "**" / "*.*")) == expected  # a hidden name never matches "*"
    # overlapping sources: each file once, in the order first met
    assert expand_inputs([root / "b" / "4.txt", root]) == [root / "b" / "4.txt"] + [p for p in expected if p.name != "4.txt"]
    with pytest.raises(FileNotFoundError, match="matches"):
        expand_inputs(str(root / "*.nothing"))
    with pytest.raises(FileNotFoundError):
        expand_inputs(root / "missing.txt")
    with pytest.raises(ValueError):
        expand_inputs([])


def test_directory_merges_equal_the_reference_on_the_concatenation(shards, tmp_path):
    root, _, parts = shards
    concatenated = FILE_CUT.join(parts)
    specials = [ENDOFTEXT]
    vocab_size = 256 + len(specials) + 60
    merges = train_bpe(root, vocab_size, specials)[1]
    _, reference_merges = reference_train(concatenated, vocab_size + 1, [*specials, FILE_CUT])
    assert merges == reference_merges
    # the same as the concatenated file, with the cut a special token of its own
    (tmp_path / "all.txt").write_bytes(concatenated.encode())
    assert train_bpe(tmp_path / "all.txt", vocab_size + 1, [*specials, FILE_CUT])[1] == merges
    assert train_bpe(str(root / "**" / "*.*"), vocab_size, specials)[1] == merges


def test_an_iterable_of_strings_is_documents_cut_apart():
    rng = random.Random(7)
    documents = [some_text(rng, 800, special_pieces=False) for _ in range(6)]
    merges = train_bpe((document for document in documents), 256 + 40)[1]
    assert merges == reference_train(FILE_CUT.join(documents), 257 + 40, [FILE_CUT])[1]
    with pytest.raises(TypeError, match="item 1 is bytes"):
        train_bpe(iter(["text", b"bytes"]), 300)
    # a list of strings names files (there is no such file)
    with pytest.raises(FileNotFoundError):
        train_bpe(["not a file, a document"], 300)


# -- many inputs in the store: one corpus, identified by its sorted content hashes ----------------


def test_store_identity_is_the_sorted_content_hashes(shards, tmp_path):
    root, layout, parts = shards
    with Store(tmp_path / "store.db") as store:
        (first,) = store.train(root, "s", 300, [ENDOFTEXT])
        # the same files in another order, one decompressed: the same corpus, counts reused
        plain = tmp_path / "plain" / "2.txt"
        plain.parent.mkdir()
        plain.write_bytes(gzip.decompress((root / "a" / "2.txt.gz").read_bytes()))
        others = [root / name for name in layout if name != "a/2.txt.gz"]
        (again,) = store.train([*reversed(others), plain], "s", 300, [ENDOFTEXT])
        # their concatenation is another corpus (no cut between the files)
        (tmp_path / "cat.txt").write_bytes("".join(parts).encode())
        (other,) = store.train(tmp_path / "cat.txt", "s", 300, [ENDOFTEXT])
        infos = [store.info(ref) for ref in (first, again, other)]
    assert infos[1].training_params["reused_pretoken_counts"] is True
    assert infos[0].corpus_sha256 == infos[1].corpus_sha256 != infos[2].corpus_sha256
    assert infos[0].corpus_bytes == sum(len(part.encode()) for part in parts)
    assert json.loads(infos[0].corpus_path) == [str(path) for path in sorted(root / name for name in layout)]
    assert infos[2].training_params["reused_pretoken_counts"] is False


def test_cli_trains_on_several_inputs(shards, tmp_path):
    root, layout, parts = shards
    db = tmp_path / "cli.db"
    first, rest = root / layout[0], [root / name for name in layout[1:]]
    ref = ok(invoke("train", first, *rest, "--name", "c", "--vocab-size", 300, "--special-token", ENDOFTEXT, "-q", "--db", db)).strip()
    with Store(db) as store:
        assert store.load(ref).merges == train_bpe(root, 300, [ENDOFTEXT])[1]


# -- the memory estimate ----------------------------------------------------------------------------

MEASURE = textwrap.dedent(
    """
    import ctypes, json, random, sys
    from bpestore._engine import GPT2_PATTERN, count_texts, learn_merges
    from bpestore.train.memory import estimate_merge_memory

    words, length, merges, seed = map(int, sys.argv[1:])
    rng = random.Random(seed)
    # Text shaped like a natural language's (the kind of corpus the formula is for): words of
    # syllables, their frequencies Zipf's law.
    syllables = [c + v for c in "bcdfghklmnprstvwz" for v in ["a", "e", "i", "o", "u", "ou", "ea"]] + ["th", "ing", "ed", "er"]
    vocabulary = sorted({"".join(rng.choices(syllables, k=rng.randint(1, length))) for _ in range(words)})
    rng.shuffle(vocabulary)
    weights = [1 / (rank + 10) for rank in range(len(vocabulary))]
    text = " ".join(rng.choices(vocabulary, weights, k=8 * words))
    counts = count_texts([text], GPT2_PATTERN, [])
    del text, vocabulary
    # The text's memory, freed, back to the system (glibc keeps it otherwise): the merge loop
    # would reuse it, and its peak would seem smaller by however much it reused (up to half).
    libc = ctypes.CDLL(None)
    if hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
    estimate = estimate_merge_memory(counts, merges)

    def status(key):
        with open("/proc/self/status") as file:
            return next(int(line.split()[1]) * 1024 for line in file if line.startswith(key))

    with open("/proc/self/clear_refs", "w") as file:
        file.write("5")  # resets VmHWM, the peak resident memory, to the current
    before = status("VmRSS:")
    learn_merges(counts, merges)
    print(json.dumps({"estimate": estimate.peak_bytes, "measured": status("VmHWM:") - before}))
    """
)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="measures the peak with /proc/self/clear_refs")
@pytest.mark.parametrize(("words", "length", "merges"), [(200_000, 5, 3000), (400_000, 5, 20_000)])
def test_estimate_within_its_margin_of_the_measured_peak(words, length, merges):
    try:
        with open("/proc/self/clear_refs", "w") as file:
            file.write("5")
    except OSError as error:
        pytest.skip(f"cannot reset the peak memory here: {error}")
    result = subprocess.run(
        [sys.executable, "-c", MEASURE, str(words), str(length), str(merges), "15"],
        capture_output=True, text=True, check=True, env=subprocess_env(), timeout=120,
    )
    sizes = json.loads(result.stdout)
    estimate, measured = sizes["estimate"], sizes["measured"]
    assert measured > 8 * memory.SLACK_BYTES  # big enough for the margin to mean something
    assert abs(estimate - measured) <= memory.MARGIN * measured + memory.SLACK_BYTES, sizes


def load_memory_benchmark():
    """benchmarks/memory_estimate.py, whose child process measures a corpus's merge loop: the
    test measures exactly as the benchmark that fitted the formula does."""
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "memory_estimate.py"
    spec = importlib.util.spec_from_file_location("memory_estimate_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="measures the peak with /proc/self/clear_refs")
@pytest.mark.parametrize(
    ("corpus", "merges"),
    # merges well short of where each corpus runs out of pairs (the estimate's stated exception),
    # and peaks big enough (over 20 MiB) that the margin, not the slack, is what is tested
    [("sotu_11M.txt", 50_000), ("reuters_17M.txt", 50_000), ("wiki_en_57M.txt", 20_000)],
)
@pytest.mark.slow
def test_estimate_within_its_margin_on_real_corpora(corpus_path, corpus, merges):
    """Issue 15: the estimate within its stated margin (memory.MARGIN, memory.SLACK_BYTES) of the
    merge loop's measured peak on real corpora (each in about 1 to 4 s)."""
    path = corpus_path(corpus)
    try:
        with open("/proc/self/clear_refs", "w") as file:
            file.write("5")
    except OSError as error:
        pytest.skip(f"cannot reset the peak memory here: {error}")
    result = subprocess.run(
        [sys.executable, "-c", load_memory_benchmark().CHILD, str(path), str(merges)],
        capture_output=True, text=True, check=True, env=subprocess_env(), timeout=120,
    )
    sizes = json.loads(result.stdout)
    estimate, measured = sizes["estimate"], sizes["measured"]
    assert measured > 5 * memory.SLACK_BYTES, sizes
    assert abs(estimate - measured) <= memory.MARGIN * measured + memory.SLACK_BYTES, sizes


def test_parse_bytes():
    assert memory.parse_bytes("800M") == 800 << 20
    assert memory.parse_bytes("1.5GiB") == 3 << 29
    assert memory.parse_bytes("123") == 123
    for bad in ("", "M", "-1G", "3 apples", "1.2.3G"):
        with pytest.raises(ValueError, match="not a memory size"):
            memory.parse_bytes(bad)


def test_dry_run_counts_and_estimates_without_merging(shards, tmp_path):
    root, _, _ = shards
    db = tmp_path / "dry.db"
    args = ["train", root, "--name", "d", "--vocab-size", 400, "-q", "--db", db]
    first = json.loads(ok(invoke(*args, "--dry-run", "--json")))
    second = json.loads(ok(invoke(*args, "--dry-run", "--json")))
    assert (first["reused_pretoken_counts"], second["reused_pretoken_counts"]) == (False, True)
    counts = count_any(root, [])
    expected = memory.estimate_merge_memory(counts, 400 - 256)
    assert first["estimated_peak_bytes"] == second["estimated_peak_bytes"] == expected.peak_bytes
    assert first["distinct_pretokens"] == len(counts)
    with Store(db) as store:
        assert store.refs() == []
    text = ok(invoke(*args, "--dry-run"))
    assert "memory estimate" in text and "reused from the store" in text


def test_max_memory_refuses_before_merging(shards, tmp_path):
    root, _, _ = shards
    db = tmp_path / "limit.db"
    result = invoke("train", root, "--name", "m", "--vocab-size", 400, "--max-memory", "1M", "-q", "--db", db)
    assert result.exit_code == 1
    assert "--max-memory 1.0 MiB" in result.stderr and "nothing was merged" in result.stderr
    with Store(db) as store:
        assert store.refs() == []
        with pytest.raises(MemoryLimitError):
            store.train(root, "m", 400, max_memory=1 << 20)
        assert store.train(root, "m", 400, max_memory=1 << 30) == ["m@1"]
        assert store.info("m@1").training_params["reused_pretoken_counts"] is True


# -- Ctrl-C after counting ----------------------------------------------------------------------------


# The command line, in a process of its own, with Store.train told to say when the counts are at
# hand (on_counted) and then wait: a signal then arrives at a known moment.
_CLI_PAUSING_AFTER_COUNTING = """
import sys, time
from bpestore import workflow

train = workflow.Store.train

def pausing_after_counting(self, *args, **kwargs):
    def counted():
        print("bpestore-test: counted", file=sys.stderr, flush=True)
        time.sleep(60)

    return train(self, *args, on_counted=counted, **kwargs)

workflow.Store.train = pausing_after_counting
from bpestore.cli import main
main()
"""


@pytest.mark.slow
def test_ctrl_c_after_counting_keeps_the_counts(shards, tmp_path):
    root, _, parts = shards
    db = tmp_path / "interrupted.db"
    args = [
        sys.executable, "-c", _CLI_PAUSING_AFTER_COUNTING,
        "train", str(root), "--name", "i", "--vocab-size", "400", "--special-token", ENDOFTEXT, "-q", "--db", str(db),
    ]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env())
    try:
        assert process.stderr.readline() == b"bpestore-test: counted\n"
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    lines = stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Interrupted after counting: no tokenizer was stored"), stderr
    assert f"the pre-token counts of {root} are kept in the store" in lines[0]
    assert "run the same command again to reuse them" in lines[0]
    assert stdout == b""
    connection = sqlite3.connect(db)
    try:
        assert connection.execute("SELECT count(*) FROM tokenizers").fetchone() == (0,)
        stored = dict(connection.execute("SELECT pretoken, count FROM pretoken_counts").fetchall())
    finally:
        connection.close()
    assert stored == dict(counts_of_files_rule(parts, [ENDOFTEXT]))
    # the next run reuses them, and trains what an uninterrupted run trains
    with Store(db) as store:
        assert store.train(root, "i", 400, [ENDOFTEXT]) == ["i@1"]
        assert store.info("i@1").training_params["reused_pretoken_counts"] is True
        assert store.load("i@1").merges == train_bpe(root, 400, [ENDOFTEXT])[1]


def test_interrupt_in_the_merge_loop_is_training_interrupted(shards, tmp_path, monkeypatch):
    root, _, _ = shards
    import bpestore.train.trainer

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(bpestore.train.trainer, "engine_learn_merges", interrupted)
    with Store(tmp_path / "s.db") as store:
        with pytest.raises(TrainingInterrupted) as caught:
            store.train(root, "x", 400)
        assert isinstance(caught.value, KeyboardInterrupt)
        assert store.refs() == []
        monkeypatch.undo()
        store.train(root, "x", 400)
        assert store.info("x@1").training_params["reused_pretoken_counts"] is True


def test_interrupt_while_the_tokenizers_are_written_keeps_only_the_counts(shards, tmp_path, monkeypatch):
    """Ctrl-C after merging, while the new tokenizers are written (seconds for a big vocab): the
    write's transaction rolls back, half a write included, and the saved counts are reused."""
    root, _, parts = shards
    db = tmp_path / "w.db"
    real_insert = Store._insert_tokenizer
    written = []

    def insert_then_interrupt(self, *args, **kwargs):
        written.append(real_insert(self, *args, **kwargs))
        if len(written) % 2 == 0:  # the second of the two sizes is written, then Ctrl-C
            raise KeyboardInterrupt

    monkeypatch.setattr(Store, "_insert_tokenizer", insert_then_interrupt)
    args = ["train", root, "--name", "w", "--vocab-size", 300, "--vocab-size", 400, "--special-token", ENDOFTEXT, "-q", "--db", db]
    result = invoke(*args)
    assert result.exit_code == 130, (result.stderr, result.exception)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Interrupted after counting: no tokenizer was stored, but the pre-token counts of {root} are kept")
    assert lines[0].endswith("run the same command again to reuse them.")
    with Store(db) as store:
        with pytest.raises(TrainingInterrupted) as caught:  # the API says the same
            store.train(root, "w", [300, 400], [ENDOFTEXT])
        assert isinstance(caught.value, KeyboardInterrupt)
        assert f"(corpus {caught.value.corpus_id})" in lines[0]
        assert store.refs() == []
    assert len(written) == 4  # both sizes were written, twice, and rolled back
    connection = sqlite3.connect(db)
    try:
        for table in ("tokenizers", "vocab", "merges"):
            assert connection.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,), table
        stored = dict(connection.execute("SELECT pretoken, count FROM pretoken_counts").fetchall())
    finally:
        connection.close()
    assert stored == dict(counts_of_files_rule(parts, [ENDOFTEXT]))
    monkeypatch.undo()
    refs = ok(invoke(*args)).split()
    assert refs == ["w@1", "w@2"]
    with Store(db) as store:
        assert all(store.info(ref).training_params["reused_pretoken_counts"] is True for ref in refs)
        assert store.load("w@2").merges == train_bpe(root, 400, [ENDOFTEXT])[1]


