"""The counts object (bpestore/train/counts.py): shard counting, adding up, refusals, flat arrays,
Parquet and TSV, and training from counts (train_bpe_from_counts, Store.train_from_counts,
``bpestore train --counts``). Counting on Dask is in tests/test_dask_count.py."""

from __future__ import annotations

import io
import json
import pickle
import pickletools
import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpestore import Store, train_bpe
from bpestore._engine import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN, PretokenCounts, count_texts
from bpestore.errors import CorpusDecodeError, EmptyCorpusError
from bpestore.train.counts import (
    Counts,
    CountsFileError,
    CountsMismatchError,
    count_shard,
    read_counts,
    read_parquet,
    read_tsv,
    train_bpe_from_counts,
)
from bpestore.train.trainer import count_corpus
from reference import pretokenize, reference_pretoken_counts, split_on_specials
from strategies import ENDOFTEXT, SPECIAL_TOKEN_SETS, texts
from test_cli import assert_user_error, invoke, ok
from test_engine_pretokenize import comparable

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402
from tiers import examples

TEXTS = texts(max_pieces=14, assigned_only=True).map(comparable)
SETTINGS = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def as_dict(counts) -> dict[bytes, int]:
    return dict(counts.items())


def reference_counts(text: str, specials: list[str]) -> dict[bytes, int]:
    return dict(reference_pretoken_counts(text, specials))


def ranges(size: int, cuts: list[int]) -> list[tuple[int, int | None]]:
    """Consecutive byte ranges covering [0, size): cut at ``cuts`` (any order, repeats)."""
    points = sorted({min(max(cut, 0), size) for cut in cuts})
    starts = [0, *points]
    ends: list[int | None] = [*points, None]
    return list(zip(starts, ends))


# -- counting shards ------------------------------------------------------------------------------


@SETTINGS
@given(text=TEXTS, specials=st.sampled_from(SPECIAL_TOKEN_SETS), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_shards_at_any_byte_sum_to_the_reference_counts(text, specials, cuts):
    """Byte ranges cut anywhere (inside characters, inside special tokens) move to safe cuts:
    their counts add up to the whole text's, as tests/reference.py counts them."""
    data = text.encode("utf-8")
    total = Counts(special_tokens=specials)
    for start, end in ranges(len(data), cuts):
        total.merge(count_shard(data, start, end, special_tokens=specials))
    assert as_dict(total) == reference_counts(text, specials)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=TEXTS,
    specials=st.sampled_from(SPECIAL_TOKEN_SETS),
    pattern=st.sampled_from([CL100K_PATTERN, O200K_PATTERN]),
    cuts=st.lists(st.integers(0, 400), max_size=6),
)
def test_shards_with_other_patterns_sum_to_the_reference_counts(text, specials, pattern, cuts):
    """Patterns for which a space is no safe cut: shards move to special tokens only."""
    data = text.encode("utf-8")
    total = Counts(pattern=pattern, special_tokens=specials)
    for start, end in ranges(len(data), cuts):
        total.merge(count_shard(data, start, end, pattern=pattern, special_tokens=specials))
    expected = Counter()
    for piece in split_on_specials(text, specials, keep=False):
        expected.update(pretokenize(piece, pattern))
    assert as_dict(total) == dict(expected)


def test_shards_of_a_file_sum_to_the_whole_file(tmp_path, fixture_path):
    """The same through a path and through a file object, with special tokens at shard edges."""
    text = fixture_path("tinystories_sample.txt").read_text(encoding="utf-8")
    pieces = text.split(" ")
    rng = random.Random(4)
    for i in rng.sample(range(len(pieces)), 40):
        pieces[i] = ENDOFTEXT
    text = " ".join(pieces)
    path = tmp_path / "corpus.txt"
    path.write_bytes(text.encode("utf-8"))
    expected = reference_counts(text, [ENDOFTEXT])
    size = path.stat().st_size
    # Every shard edge lands in or at a special token somewhere: cuts at each special's bytes.
    data = path.read_bytes()
    at = [i for i in range(size) if data[i : i + 2] == b"<|"][:10]
    cuts = sorted({*at, *(a + 5 for a in at), *rng.sample(range(size), 20)})
    whole = count_shard(path, special_tokens=[ENDOFTEXT])
    assert as_dict(whole) == expected
    by_path = Counts(special_tokens=[ENDOFTEXT])
    with open(path, "rb") as file:
        by_file = Counts(special_tokens=[ENDOFTEXT])
        for start, end in ranges(size, cuts):
            by_path.merge(count_shard(path, start, end, special_tokens=[ENDOFTEXT]))
            by_file.merge(count_shard(file, start, end, special_tokens=[ENDOFTEXT]))
    assert as_dict(by_path) == expected
    assert as_dict(by_file) == expected


def test_a_shard_past_the_end_is_empty_and_bad_ranges_are_refused(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("hello world")
    assert len(count_shard(path, 100, None)) == 0
    assert len(count_shard(path, 100, 200)) == 0
    with pytest.raises(ValueError, match="start <= end"):
        count_shard(path, 5, 2)
    with pytest.raises(ValueError, match="start <= end"):
        count_shard(path, -1, 2)
    with pytest.raises(FileNotFoundError):
        count_shard(tmp_path / "missing.txt")


def test_a_shard_names_the_offset_of_bad_utf8_in_the_file(tmp_path):
    data = b"hello world " * 50 + b"\xff" + b" more text" * 20
    path = tmp_path / "bad.txt"
    path.write_bytes(data)
    bad = data.index(b"\xff")
    with pytest.raises(CorpusDecodeError) as whole:
        count_shard(path)
    assert whole.value.offset == bad
    with pytest.raises(CorpusDecodeError) as ranged:
        count_shard(path, 300, 700)
    assert (ranged.value.offset, ranged.value.path) == (bad, str(path))
    count_shard(path, 0, 300)  # a range before the bad byte reads fine


def test_compressed_files_are_counted_whole(tmp_path):
    import gzip

    text = "a gz corpus<|endoftext|> with text " * 30
    path = tmp_path / "c.txt.gz"
    path.write_bytes(gzip.compress(text.encode()))
    assert as_dict(count_shard(path, special_tokens=[ENDOFTEXT])) == reference_counts(text, [ENDOFTEXT])
    with pytest.raises(ValueError, match="compressed"):
        count_shard(path, 10, 20)


# -- adding up and refusing ------------------------------------------------------------------------


@SETTINGS
@given(parts=st.lists(TEXTS, min_size=1, max_size=6), order=st.randoms(use_true_random=False))
def test_counts_add_up_in_any_order(parts, order):
    specials = [ENDOFTEXT]
    shards = [count_shard(part.encode(), special_tokens=specials) for part in parts]
    order.shuffle(shards)
    expected = Counter()
    for part in parts:
        expected.update(reference_pretoken_counts(part, specials))
    assert as_dict(Counts.sum(shards)) == dict(+expected)
    first, *rest = shards
    added = first
    for other in rest:
        added = added + other
    assert added == Counts.sum(shards)
    assert Counts.sum(shards).sha256() == Counts.sum(reversed(shards)).sha256()
    before = as_dict(first)
    copied = first.copy()
    copied.merge(first)  # a copy is its own: adding to it leaves the original as it was
    assert as_dict(first) == before and all(copied[word] == 2 * n for word, n in before.items())


def test_counts_of_another_pattern_or_other_specials_are_refused():
    gpt2 = count_shard(b"some text<a>here", special_tokens=["<a>"])
    with pytest.raises(CountsMismatchError, match="special tokens"):
        gpt2.merge(count_shard(b"some text<a>here", special_tokens=["<b>"]))
    with pytest.raises(CountsMismatchError, match="special tokens"):
        gpt2.merge(count_shard(b"some text", special_tokens=[]))
    with pytest.raises(CountsMismatchError, match="pattern"):
        gpt2.merge(count_shard(b"some text<a>here", special_tokens=["<a>"], pattern=CL100K_PATTERN))
    with pytest.raises(TypeError):
        gpt2.merge({b"x": 1})  # type: ignore[arg-type]
    before = as_dict(gpt2)
    gpt2.merge(count_shard(b" text", special_tokens=["<a>"]))  # same kind: fine
    assert gpt2[b" text"] == before[b" text"] + 1
    # the order of the special tokens does not change counting
    both = count_shard(b"x<a>y<b>z", special_tokens=["<a>", "<b>"])
    both.merge(count_shard(b"x<b>y", special_tokens=["<b>", "<a>"]))
    assert both[b"x"] == 2


def test_pruning_and_splitting():
    counts = count_shard(("the cat the dog the end a a a b " * 3).encode())
    pruned = counts.pruned(4)
    assert as_dict(pruned) == {word: n for word, n in as_dict(counts).items() if n >= 4}
    parts = counts.split(3)
    assert sum(len(part) for part in parts) == len(counts)
    assert Counts.sum(parts) == counts
    # the same pre-token lands in the same part, whatever counts it is in
    other = count_shard(b" the cat")
    for word in other:
        owner = [i for i, part in enumerate(parts) if word in part]
        assert [i for i, part in enumerate(other.split(3)) if word in part] == owner
    with pytest.raises(ValueError):
        counts.pruned(0)
    with pytest.raises(ValueError):
        counts.split(0)


# -- arrays, pickling, identity --------------------------------------------------------------------


def test_flat_arrays_round_trip_and_pickle_compactly():
    mapping = {b"": 3, b" hello": 2, b"\xe4\xb8\xad": 7, b"a" * 300: 1, bytes(range(256)): 2**40}
    counts = Counts(PretokenCounts.from_dict(mapping), special_tokens=[ENDOFTEXT])
    data, offsets, values = counts.to_arrays(sorted=True)
    keys = [data[offsets[i] : offsets[i + 1]] for i in range(len(values))]
    assert keys == sorted(mapping)
    assert [int(v) for v in values] == [mapping[key] for key in keys]
    back = Counts.from_arrays(data, offsets, values, special_tokens=[ENDOFTEXT])
    assert back == counts and as_dict(back) == mapping
    pickled = pickle.dumps(counts)
    assert pickle.loads(pickled) == counts
    # three flat buffers: the bytes themselves, 16 bytes a pre-token, and little else
    assert len(pickled) < len(data) + 16 * len(values) + 8 + 400
    # and a fixed number of pickle operations, however many pre-tokens: no object per pre-token
    big = Counts(count_texts([" ".join(f"w{i}" for i in range(20000))], GPT2_PATTERN, []))
    operations = list(pickletools.genops(pickle.dumps(big)))
    assert len(operations) < 30
    assert len(list(pickletools.genops(pickle.dumps(dict(big.items()))))) > 20000


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mapping=st.dictionaries(st.binary(max_size=40), st.integers(1, 2**57), max_size=60))
def test_any_counts_survive_parquet_pickle_and_arrays(tmp_path, mapping):
    """Any bytes (not UTF-8, empty, NUL) and huge counts, whatever order they came in."""
    counts = Counts(PretokenCounts.from_dict(mapping), special_tokens=[ENDOFTEXT])
    path = tmp_path / "any.parquet"
    counts.to_parquet(path)
    for back in (read_parquet(path), pickle.loads(pickle.dumps(counts)), Counts.from_arrow(counts.to_arrow())):
        assert as_dict(back) == mapping and back.special_tokens == (ENDOFTEXT,)
        assert back.sha256() == counts.sha256()
    reordered = Counts(PretokenCounts.from_dict(dict(reversed(list(mapping.items())))), special_tokens=[ENDOFTEXT])
    assert reordered.sha256() == counts.sha256()


def test_counts_that_would_wrap_around_are_refused():
    big = Counts(PretokenCounts.from_dict({b"a": 2**63}))
    with pytest.raises(ValueError, match="2\\*\\*64"):
        big.merge(Counts(PretokenCounts.from_dict({b"b": 2**63})))
    with pytest.raises(ValueError, match="2\\*\\*64"):
        Counts.from_arrays(b"ab", [0, 1, 2], [2**63, 2**63])
    assert big.total == 2**63


def test_from_arrays_sums_repeats_and_refuses_what_does_not_fit():
    counts = Counts.from_arrays(b"abab", [0, 2, 4], [1, 2])
    assert as_dict(counts) == {b"ab": 3}
    with pytest.raises(ValueError, match="negative"):
        Counts.from_arrays(b"ab", [0, 2], [-1])
    with pytest.raises(ValueError, match="offset"):
        Counts.from_arrays(b"ab", [0, 2], [1, 1])
    with pytest.raises(ValueError, match="spans"):
        Counts.from_arrays(b"ab", [0, 3], [1])


def test_identity_is_of_the_counts_not_of_how_they_were_made():
    a = count_shard(b"one two three two")
    b = Counts.sum([count_shard(b" three two"), count_shard(b"one two")])
    assert a.sha256() == b.sha256()
    assert a.sha256() != count_shard(b"one two three two two").sha256()
    assert a.text_bytes == len(b"one two three two")
    assert count_shard(b"ab<|endoftext|>cd", special_tokens=[ENDOFTEXT]).text_bytes == 4


# -- Parquet and TSV -------------------------------------------------------------------------------


def test_parquet_round_trip_keeps_pattern_and_special_tokens(tmp_path):
    counts = count_shard("héllo wörld<|endoftext|>\n\n  ok 12".encode(), special_tokens=[ENDOFTEXT])
    path = tmp_path / "c.parquet"
    counts.to_parquet(path)
    back = read_parquet(path)
    assert back == counts
    assert back.special_tokens == (ENDOFTEXT,) and back.pattern == GPT2_PATTERN
    assert back.source == str(path)
    table = pq.read_table(path)
    assert table.column_names == ["pretoken", "count"]
    assert sorted(table.column("pretoken").to_pylist()) == table.column("pretoken").to_pylist()
    with pytest.raises(CountsMismatchError):
        read_parquet(path, special_tokens=[])
    with pytest.raises(CountsMismatchError):
        read_parquet(path, pattern=CL100K_PATTERN)


def test_parquet_as_spark_writes_it(tmp_path):
    """A word (string) and count (int64) table in several row groups, and a directory of part
    files, without bpestore's metadata: the pattern and special tokens are the caller's."""
    words = {" the": 10, "cat": 3, " 日本": 2, "\n": 5}
    table = pa.table({"word": list(words), "count": pa.array(list(words.values()), type=pa.int64())})
    path = tmp_path / "words.parquet"
    pq.write_table(table, path, row_group_size=2)
    counts = read_counts(path, special_tokens=[ENDOFTEXT])
    assert {key.decode(): value for key, value in as_dict(counts).items()} == words
    assert counts.special_tokens == (ENDOFTEXT,)
    directory = tmp_path / "spark-out"
    directory.mkdir()
    pq.write_table(table.slice(0, 2), directory / "part-00000.parquet")
    pq.write_table(table.slice(2), directory / "part-00001.parquet")
    (directory / "_SUCCESS").write_bytes(b"")  # Spark's marker and checksums, not Parquet
    (directory / ".part-00000.parquet.crc").write_bytes(b"crc")
    assert read_counts(directory, special_tokens=[ENDOFTEXT]) == counts
    # an Arrow slice (offsets that do not start at 0)
    sliced = Counts.from_arrow(table.slice(1, 2))
    assert {key.decode() for key in sliced} == {"cat", " 日本"}


def test_parquet_as_ray_writes_it_in_a_directory_named_anything(tmp_path):
    """Ray's write_parquet fills the directory it is given (``s3://bucket/counts``, no .parquet in
    the name) with part files: read as Parquet from its path and from its URL, while a TSV file
    given as a URL is still read as TSV."""
    pytest.importorskip("fsspec")
    words = {" the": 10, "cat": 3, " 日本": 2, "\n\n": 5}
    table = pa.table({"word": list(words), "count": pa.array(list(words.values()), type=pa.int64())})
    directory = tmp_path / "counts"
    directory.mkdir()
    pq.write_table(table.slice(0, 3), directory / "0352gBsuzy_75a2c23f_000000-0.parquet")
    pq.write_table(table.slice(3), directory / "0352gBsuzy_75a2c23f_000001-0.parquet")
    expected = {word.encode(): count for word, count in words.items()}
    for where in (directory, directory.as_uri(), directory.as_uri() + "/"):
        counts = read_counts(where, special_tokens=[ENDOFTEXT])
        assert as_dict(counts) == expected, where
        assert counts.special_tokens == (ENDOFTEXT,)
    tsv = tmp_path / "words"
    tsv.write_text(" the\t10\ncat\t3\n")
    assert as_dict(read_counts(tsv.as_uri())) == {b" the": 10, b"cat": 3}


def test_parquet_refusals(tmp_path):
    def write(name, **columns):
        path = tmp_path / name
        pq.write_table(pa.table(columns), path)
        return path

    with pytest.raises(CountsFileError, match="negative") as negative:
        read_parquet(write("neg.parquet", word=["a", "b"], count=pa.array([1, -2], type=pa.int64())))
    assert "row 1" in str(negative.value)
    with pytest.raises(CountsFileError, match="column"):
        read_parquet(write("cols.parquet", text=["a"], n=[1]))
    with pytest.raises(CountsFileError, match="nulls"):
        read_parquet(write("nulls.parquet", word=["a", None], count=[1, 2]))
    with pytest.raises(CountsFileError, match="integers"):
        read_parquet(write("floats.parquet", word=["a"], count=[1.5]))
    not_parquet = tmp_path / "x.parquet"
    not_parquet.write_text("hello")
    with pytest.raises(CountsFileError, match="not a Parquet"):
        read_parquet(not_parquet)


def test_tsv_counts(tmp_path):
    path = tmp_path / "words.tsv"
    path.write_bytes("▁the\t10\nword with\ttab\t3\n\nnaïve\t 4\r\n▁the\t1\nzero\t0\n".encode())
    counts = read_tsv(path, special_tokens=[ENDOFTEXT])
    assert {k.decode(): v for k, v in as_dict(counts).items()} == {"▁the": 11, "word with\ttab": 3, "naïve": 4}
    assert counts.special_tokens == (ENDOFTEXT,)
    assert read_counts(path) == read_tsv(path)


@pytest.mark.parametrize(
    ("content", "line", "needle"),
    [
        (b"a\t1\nno tab here\n", 2, "no tab"),
        (b"a\t1\nb\t2\nc\t-3\n", 3, "negative"),
        (b"a\tmany\n", 1, "not an integer"),
        (b"a\t1.5\n", 1, "not an integer"),
    ],
)
def test_bad_tsv_lines_are_named_by_file_and_line(tmp_path, content, line, needle):
    path = tmp_path / "bad.tsv"
    path.write_bytes(content)
    with pytest.raises(CountsFileError, match=needle) as error:
        read_tsv(path)
    assert (error.value.path, error.value.line) == (str(path), line)
    assert f"{path}, line {line}: " in str(error.value)


def test_tsv_with_bad_utf8_names_the_offset(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_bytes(b"ok\t1\nb\xffad\t2\n")
    with pytest.raises(CorpusDecodeError) as error:
        read_tsv(path)
    assert error.value.offset == 6


# -- training from counts --------------------------------------------------------------------------


def test_training_from_shard_counts_gives_the_merges_of_train_bpe(tmp_path, fixture_path):
    corpus = fixture_path("corpus.en")
    size = corpus.stat().st_size
    shards = [count_shard(corpus, start, start + 20000 if start + 20000 < size else None, special_tokens=[ENDOFTEXT])
              for start in range(0, size, 20000)]
    counts = Counts.sum(shards)
    expected = train_bpe(corpus, 500, [ENDOFTEXT])
    assert train_bpe_from_counts(counts, 500) == expected
    path = tmp_path / "counts.parquet"
    counts.to_parquet(path)
    assert train_bpe_from_counts(path, 500) == expected
    with pytest.raises(CountsMismatchError):
        train_bpe_from_counts(counts, 500, special_tokens=["<other>"])
    with pytest.raises(EmptyCorpusError):
        train_bpe_from_counts(Counts(), 300)


def test_min_count_trains_on_the_pruned_counts(fixture_path):
    counts = count_shard(fixture_path("tinystories_sample.txt"))
    pruned_dict = {word: n for word, n in as_dict(counts).items() if n >= 3}
    assert train_bpe_from_counts(counts, 300, min_count=3) == train_bpe_from_counts(pruned_dict, 300)


def test_store_trains_from_counts_as_a_corpus(tmp_path, fixture_path):
    corpus = fixture_path("tinystories_sample.txt")
    counts = count_shard(corpus, special_tokens=[ENDOFTEXT])
    with Store(tmp_path / "s.db") as store:
        direct = store.load_model(store.train(corpus, "direct", 400, [ENDOFTEXT])[0])
        [ref] = store.train_from_counts(counts, "counted", 400)
        model = store.load_model(ref)
        assert (model.vocab, model.merges, model.special_tokens) == (direct.vocab, direct.merges, direct.special_tokens)
        info = store.info(ref)
        assert info.corpus_origin == "counts" and info.corpus_path == "counts given"
        assert info.corpus_sha256 == counts.sha256()
        assert info.corpus_bytes == counts.text_bytes
        # the same counts come back as the same corpus, even read from a file
        path = tmp_path / "counts.parquet"
        counts.to_parquet(path)
        [again] = store.train_from_counts(path, "counted", [300])
        assert store.info(again).corpus_sha256 == counts.sha256()
        assert json.loads(json.dumps(store.info(again).to_dict()))["training_params"]["reused_pretoken_counts"] is True
        with pytest.raises(CountsMismatchError):
            store.train_from_counts(counts, "bad", 400, special_tokens=[])


def test_cli_trains_from_parquet_and_tsv_counts(tmp_path, fixture_path):
    corpus = fixture_path("tinystories_sample.txt")
    counts = count_shard(corpus)
    parquet = tmp_path / "c.parquet"
    counts.to_parquet(parquet)
    tsv = tmp_path / "c.tsv"
    tsv.write_bytes(b"".join(word + b"\t" + str(n).encode() + b"\n" for word, n in as_dict(counts).items() if b"\n" not in word))
    db = tmp_path / "s.db"
    ok(invoke("train", corpus, "--name", "plain", "--vocab-size", 350, "-q", "--db", db))
    ok(invoke("train", "--counts", parquet, "--name", "pq", "--vocab-size", 350, "-q", "--db", db))
    ok(invoke("train", "--counts", tsv, "--name", "tsv", "--vocab-size", 350, "-q", "--db", db))
    ok(invoke("train", "--counts", parquet, "--min-count", 2, "--name", "pruned", "--vocab-size", 350, "-q", "--db", db))
    with Store(db) as store:
        assert store.info("pruned").corpus_path == f"{parquet} (min_count=2)"
        assert store.info("pruned").corpus_origin == store.info("pq").corpus_origin == "counts"
        assert store.info("plain").corpus_origin == "files"
        plain = store.load_model("plain")
        assert store.load_model("pq").merges == plain.merges
        without_newlines = {w: n for w, n in as_dict(counts).items() if b"\n" not in w}
        assert store.load_model("tsv").merges == train_bpe_from_counts(without_newlines, 350)[1]
        assert store.load_model("pruned").merges == train_bpe_from_counts(counts.pruned(2), 350)[1]
    assert_user_error(invoke("train", corpus, "--counts", parquet, "--name", "x", "--vocab-size", 300, "--db", db), "not both")
    assert_user_error(invoke("train", "--name", "x", "--vocab-size", 300, "--db", db), "CORPUS")
    # --min-count applies to a CORPUS too (since issue 26): its full counts are stored, the merges see the pruned ones.
    assert ok(invoke("train", corpus, "--min-count", 2, "--name", "x", "--vocab-size", 300, "-q", "--db", db)).strip() == "x@1"
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"a\t1\nb\n")
    assert_user_error(invoke("train", "--counts", bad, "--name", "x", "--vocab-size", 300, "--db", db), f"{bad}, line 2")


def test_counts_read_through_a_file_object_match_a_path(tmp_path):
    data = "one two<|endoftext|>three".encode()
    assert count_shard(io.BytesIO(data), 3, None, special_tokens=[ENDOFTEXT]) + count_shard(
        io.BytesIO(data), 0, 3, special_tokens=[ENDOFTEXT]
    ) == count_shard(data, special_tokens=[ENDOFTEXT])


def test_an_fsspec_open_file_and_url_count_as_the_path(tmp_path):
    fsspec = pytest.importorskip("fsspec")
    text = "fsspec text<|endoftext|> read in ranges " * 40
    path = tmp_path / "f.txt"
    path.write_text(text)
    expected = count_shard(path, special_tokens=[ENDOFTEXT])
    opened = fsspec.open(path.as_uri(), "rb")
    assert count_shard(opened, 0, 333, special_tokens=[ENDOFTEXT]) + count_shard(
        opened, 333, None, special_tokens=[ENDOFTEXT]
    ) == expected
    assert count_shard(path.as_uri(), 100, None, special_tokens=[ENDOFTEXT]) + count_shard(
        path.as_uri(), 0, 100, special_tokens=[ENDOFTEXT]
    ) == expected
    import bpestore

    assert bpestore.train_bpe_from_counts(expected, 270) == train_bpe(path, 270, [ENDOFTEXT])
    assert bpestore.Counts is Counts


def test_counting_a_whole_file_matches_count_corpus(fixture_path):
    path = fixture_path("corpus.en")
    assert as_dict(count_shard(path, special_tokens=[ENDOFTEXT])) == as_dict(count_corpus(path, [ENDOFTEXT]))


def test_paths_can_be_path_objects(tmp_path):
    path = Path(tmp_path / "x.txt")
    path.write_text("a b c")
    assert as_dict(count_shard(path, 1, 3)) == {b" b": 1}


def test_parquet_counts_appear_whole_or_not_at_all(tmp_path, monkeypatch):
    pyarrow = pytest.importorskip("pyarrow.parquet")
    counts = count_shard(b"the cat and the hat", special_tokens=[])
    target = tmp_path / "counts.parquet"
    original = pyarrow.write_table

    def fail_half_way(table, where, **options):
        original(table, where, **options)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pyarrow, "write_table", fail_half_way)
    with pytest.raises(OSError, match="counts.parquet"):
        counts.to_parquet(target)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    counts.to_parquet(target)
    assert read_counts(target) == counts
