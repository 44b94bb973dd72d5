"""Tests of ``bpestore eval`` (issue 27.2): the metrics it adds (characters per token, the
single-token-word rate, parity) on cases worked out by hand, the Rényi efficiency against the
``tokenization-scorer`` package on the same tokens, the stored evaluations (kept, reused,
recomputed, deleted with their tokenizer, on SQLite and PostgreSQL), the command's table, JSON and
CSV, and its one-line errors.

The multilingual corpus is tests/data/parallel/: five sentences written for these tests, the same
in ten languages.
"""

from __future__ import annotations

import csv
import json
import math
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from bpestore import BPEModel, Store, Tokenizer
from bpestore.metrics import (
    characters_per_token,
    gini,
    measure_file,
    measure_text,
    parity,
    renyi_entropy,
    single_token_word_rate,
)
from postgres import sqlite_or_postgresql_db as db  # noqa: F401 - the fixture
from test_cli import assert_user_error, invoke, ok

PARALLEL = Path(__file__).resolve().parent / "data" / "parallel"
LANGUAGES = ["en", "de", "fr", "es", "ru", "zh", "ja", "ar", "hi", "ko"]


def byte_tokenizer(*merges: tuple[bytes, bytes]) -> Tokenizer:
    """The 256 bytes and the merges given, in order."""
    vocab = {i: bytes([i]) for i in range(256)}
    for left, right in merges:
        vocab[len(vocab)] = left + right
    return Tokenizer.from_model(BPEModel(vocab, list(merges), []))


# -- the metrics, by hand ---------------------------------------------------------------------------


def test_the_formulas():
    assert characters_per_token(10, 4) == 2.5 and characters_per_token(10, 0) is None and characters_per_token(None, 3) is None
    assert single_token_word_rate(3, 4) == 0.75 and single_token_word_rate(0, 0) is None and single_token_word_rate(None, 2) is None
    assert parity(30, 20) == 1.5 and parity(5, 0) is None


def test_single_token_words_by_hand():
    tokenizer = byte_tokenizer((b"h", b"i"), (b" ", b"hi"))
    # "hi hi ho": hi | ' hi' | ' ' h o -- 'hi' is one token, ' hi' holds the second word whole
    # (the space before it is not part of the word), 'ho' is cut between h and o.
    measured = measure_text(tokenizer, "hi hi ho")
    assert (measured.tokens, measured.words, measured.single_token_words) == (5, 3, 2)
    assert measured.single_token_word_rate == pytest.approx(2 / 3)
    assert measured.characters == 8 and measured.characters_per_token == pytest.approx(8 / 5)
    # punctuation is a pre-token of its own: 'hi.' is cut; blank runs of any Unicode whitespace
    # (U+3000, NBSP) separate words as str.split() does
    assert measure_text(tokenizer, "hi.").single_token_words == 0
    spaced = measure_text(tokenizer, "hi\u3000hi\u00a0x\n\n")
    assert (spaced.words, spaced.single_token_words) == (3, 3)


def test_characters_are_code_points_and_multibyte_words_are_cut():
    tokenizer = byte_tokenizer((b"h", b"i"))
    text = "é 中文 hi"  # é: 2 bytes, 中文: 6 bytes, each byte a token here
    measured = measure_text(tokenizer, text)
    assert (measured.bytes, measured.characters, measured.tokens) == (12, 7, 11)  # é(2) ' 中文'(7) ' ' hi
    assert measured.characters_per_token == pytest.approx(7 / 11)
    assert (measured.words, measured.single_token_words) == (3, 1)  # only 'hi'
    # a tokenizer that has 中 whole: the word 中文 is still two tokens, 中 and 文
    zh = "中".encode()
    whole = byte_tokenizer((zh[:1], zh[1:2]), (zh[:2], zh[2:3]))
    assert measure_text(whole, "中").single_token_words == 1
    assert measure_text(whole, "中文").single_token_words == 0


def test_single_token_words_across_read_blocks(tmp_path):
    """A file is read in 1 MiB blocks, its ids come in other pieces: the same count as the text."""
    tokenizer = byte_tokenizer((b"h", b"i"), (b" ", b"hi"), (b"t", b"h"), (b"th", b"e"), (b" ", b"the"))
    text = ("hi the 中文 hi\tthe there hi.\n" * 40_000)[: (1 << 20) + 777]
    path = tmp_path / "big.txt"
    path.write_bytes(text.encode())
    from_file, from_text = measure_file(tokenizer, path), measure_text(tokenizer, text)
    assert from_file.words == from_text.words == len(text.split())
    assert from_file.single_token_words == from_text.single_token_words > 0
    assert from_file.characters == from_text.characters == len(text)
    # counted directly: a word is whole when one of the text's tokens holds all of its bytes
    ids = tokenizer.encode(text)
    ends, position = set(), 0
    for token_id in ids:
        position += len(tokenizer.vocab[token_id])
        ends.add(position)
    encoded, offsets, position = text.encode(), [], 0
    for word in text.split():
        start = encoded.index(word.encode(), position)
        position = start + len(word.encode())
        offsets.append((start, position))
    assert from_text.single_token_words == sum(1 for start, end in offsets if not any(b in ends for b in range(start + 1, end)))


# -- Rényi efficiency against tokenization-scorer ------------------------------------------------------


@pytest.fixture(scope="module")
def parallel_store(tmp_path_factory):
    """A store with two tokenizers trained on the parallel corpus (a small and a larger vocab)."""
    folder = tmp_path_factory.mktemp("eval")
    db_path = folder / "store.db"
    with Store(db_path) as store:
        small, large = store.train(sorted(PARALLEL.glob("*.txt")), "par", [300, 600], workers=1)
    return db_path, small, large


def test_renyi_efficiency_equals_tokenization_scorers(parallel_store):
    scorer = pytest.importorskip(
        "tokenization_scorer", reason="tokenization-scorer is not installed (pip install tokenization-scorer, in the test extra)"
    )
    db_path, small, large = parallel_store
    with Store(db_path) as store:
        for ref in (small, large):
            tokenizer = store.load(ref)
            for language in ("en", "zh", "hi"):
                text = (PARALLEL / f"{language}.txt").read_text(encoding="utf-8")
                ids = tokenizer.encode(text)
                units = " ".join(f"t{token_id}" for token_id in ids)  # one unit a token, as the package reads text
                measured = measure_text(tokenizer, text)
                # its efficiency over a vocabulary given (vocab=) is bpestore's: over the tokenizer's
                expected = scorer.score(units, metric="renyi", power=2.5, vocab=tokenizer.vocab_size)
                assert measured.renyi_efficiency(2.5) == pytest.approx(expected, rel=1e-12)
                # by default it divides by the log of the tokens that occur instead
                observed = scorer.score(units, metric="renyi", power=2.5)
                assert renyi_entropy(Counter(ids).values(), 2.5) / math.log(len(set(ids))) == pytest.approx(observed, rel=1e-12)


# -- stored evaluations ---------------------------------------------------------------------------------


def evaluation_rows(db_path) -> list[tuple]:
    connection = sqlite3.connect(db_path)
    try:
        return connection.execute("SELECT tokenizer_id, label, alpha, tokens FROM evaluations ORDER BY id").fetchall()
    finally:
        connection.close()


def test_the_parallel_corpus_is_parallel():
    files = sorted(PARALLEL.glob("*.txt"))
    assert sorted(path.stem for path in files) == sorted(LANGUAGES)
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert len(text.splitlines()) == 5 and text.endswith("\n"), path
    scripts = {"ru": "\u0400", "zh": "\u4e00", "ar": "\u0600", "hi": "\u0900", "ko": "\uac00", "ja": "\u3040"}
    for language, start in scripts.items():
        text = (PARALLEL / f"{language}.txt").read_text(encoding="utf-8")
        assert any(ord(start) <= ord(char) < ord(start) + 0x2000 for char in text), language


def test_evaluate_measures_every_file_with_every_tokenizer(parallel_store, tmp_path):
    db_path, small, large = parallel_store
    store_path = tmp_path / "copy.db"
    store_path.write_bytes(db_path.read_bytes())
    files = [PARALLEL / f"{language}.txt" for language in LANGUAGES]
    with Store(store_path) as store:
        result = store.evaluate([small, large], files, reference=PARALLEL / "en.txt")
        tokenizers = {ref: store.load(ref) for ref in (small, large)}
    assert result.reference == "en.txt" and result.reused == 0 and result.stored
    assert [(row.evaluation.label, row.evaluation.ref) for row in result.rows] == [(f"{l}.txt", r) for l in LANGUAGES for r in (small, large)]
    for row in result.rows:
        text = (PARALLEL / row.evaluation.label).read_text(encoding="utf-8")
        tokenizer = tokenizers[row.evaluation.ref]
        ids = tokenizer.encode(text)
        e = row.evaluation
        assert (e.bytes, e.characters, e.words, e.tokens) == (len(text.encode()), len(text), len(text.split()), len(ids))
        assert e.distinct_tokens == len(set(ids)) and e.vocab_used == pytest.approx(len(set(ids)) / tokenizer.vocab_size)
        assert e.fertility == pytest.approx(len(ids) / len(text.split()))
        english = len(tokenizer.encode((PARALLEL / "en.txt").read_text(encoding="utf-8")))
        assert row.parity == pytest.approx(len(ids) / english)
    assert result.row(small, "en.txt").parity == 1.0
    # the table's numbers are the stored ones
    assert len(evaluation_rows(store_path)) == 2 * len(LANGUAGES)
    with Store(store_path) as store:
        assert [e.to_dict() for e in store.evaluations(small)] == sorted(
            (row.evaluation.to_dict() for row in result.rows if row.evaluation.ref == small), key=lambda data: data["label"]
        )


def test_stored_evaluations_are_reused_recomputed_and_deleted_with_their_tokenizer(db, tmp_path):
    english, german = PARALLEL / "en.txt", PARALLEL / "de.txt"
    with Store(db) as store:
        [ref] = store.train([english, german], "t", [280], workers=1)
        [other] = store.train([english], "u", [270], workers=1)
        first = store.evaluate([ref, other], [english, german])
        assert first.reused == 0 and len(store.evaluations()) == 4
        again = store.evaluate([ref, other], [german, english], reference="en.txt")
        assert again.reused == 4
        assert again.row(ref, "de.txt").evaluation == first.row(ref, "de.txt").evaluation  # read back exactly
        assert again.row(ref, "de.txt").parity == first.row(ref, "de.txt").parity  # still against en.txt
        # the same content under another name is the same file; another alpha is another row
        renamed = tmp_path / "english.txt"
        renamed.write_bytes(english.read_bytes())
        copy = store.evaluate(ref, renamed)
        assert copy.reused == 1 and copy.rows[0].evaluation.label == "english.txt"
        assert copy.rows[0].evaluation.tokens == first.row(ref, "en.txt").evaluation.tokens
        assert store.evaluate(ref, english, alpha=2).reused == 0 and len(store.evaluations(ref)) == 3
        # recompute: measured again, still one row per tokenizer, content and alpha
        recomputed = store.evaluate(ref, english, recompute=True)
        assert recomputed.reused == 0 and len(store.evaluations(ref)) == 3
        assert recomputed.rows[0].evaluation.created_at > first.row(ref, "en.txt").evaluation.created_at
        # deleting a tokenizer deletes its evaluations, and only its
        store.delete(ref)
        assert {e.ref for e in store.evaluations()} == {other} and len(store.evaluations()) == 2


def test_nothing_is_encoded_before_every_input_is_checked(parallel_store, tmp_path):
    from bpestore.errors import TokenizerNotFoundError

    db_path, small, _ = parallel_store
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with Store(db_path) as store:
        before = len(store.evaluations())
        with pytest.raises(TokenizerNotFoundError):
            store.evaluate([small, "nope"], [PARALLEL / "en.txt"])
        with pytest.raises(FileNotFoundError):
            store.evaluate(small, [PARALLEL / "fr.txt", tmp_path / "missing.txt"])
        with pytest.raises(ValueError, match="empty"):
            store.evaluate(small, [PARALLEL / "fr.txt", empty])
        with pytest.raises(ValueError, match="reference"):
            store.evaluate(small, [PARALLEL / "fr.txt"], reference="es.txt")
        with pytest.raises(ValueError, match="alpha"):
            store.evaluate(small, [PARALLEL / "fr.txt"], alpha=-1)
        assert len(store.evaluations()) == before


# -- the command ------------------------------------------------------------------------------------------


def test_cli_eval_table_json_and_csv(parallel_store, tmp_path):
    db_path, small, large = parallel_store
    store_path = tmp_path / "copy.db"
    store_path.write_bytes(db_path.read_bytes())
    big = tmp_path / "big.txt"
    big.write_text((PARALLEL / "en.txt").read_text(encoding="utf-8") * 10, encoding="utf-8")
    files = [PARALLEL / "en.txt", PARALLEL / "zh.txt", big]
    table_run = invoke("eval", small, large, "--corpus", *files, "--csv", tmp_path / "out.csv", "--db", store_path)
    table = ok(table_run)
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["FILE", "TOKENIZER", "BYTES", "CHARS"] and "PARITY" in lines[0]
    assert len(lines) == 2 + 3 * 2 and set(lines[1]) == {"-", " "}
    assert [line.split()[:2] for line in lines[2:4]] == [["en.txt", small], ["en.txt", large]]
    assert lines[6].split()[2] == f"{big.stat().st_size:,}" and "," in lines[6].split()[2]  # thousands separators
    assert len({len(line) for line in lines[:2]}) == 1  # aligned: the header as wide as its rule
    assert "parity against en.txt" in table_run.stderr
    data = json.loads(ok(invoke("eval", small, large, "--corpus", *files, "--json", "--db", store_path)))
    assert data["reference"] == "en.txt" and data["alpha"] == 2.5 and len(data["rows"]) == 6
    assert all(row["reused"] for row in data["rows"])  # stored by the first run
    assert [row["tokens"] for row in data["rows"]] == [int(line.split()[5].replace(",", "")) for line in lines[2:]]
    with open(tmp_path / "out.csv", newline="", encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    assert [(row["tokenizer"], row["file"], int(row["tokens"])) for row in rows] == [(r["tokenizer"], r["file"], r["tokens"]) for r in data["rows"]]
    assert float(rows[2]["parity"]) == pytest.approx(data["rows"][2]["parity"]) and rows[0]["reference"] == "en.txt"
    assert not [path.name for path in tmp_path.iterdir() if path.name.endswith(".partial")]
    # reuse is said on stderr; --recompute measures again; --reference by name
    reused = invoke("eval", small, "--corpus", PARALLEL / "en.txt", PARALLEL / "zh.txt", "--reference", "zh.txt", "--db", store_path)
    assert "reused 2 of 2" in ok(reused) + reused.stderr
    assert ok(reused).splitlines()[3].split()[-1] == "1.000"  # zh against itself
    recomputed = invoke("eval", small, "--corpus", PARALLEL / "en.txt", "--recompute", "--db", store_path)
    assert "reused" not in ok(recomputed) + recomputed.stderr


def test_eval_sums_parity_up_per_tokenizer(parallel_store, tmp_path):
    """With several files: each tokenizer's lowest and highest parity (and their files) and the
    Gini coefficient of its token counts, in the JSON and on stderr."""
    db_path, small, large = parallel_store
    copy = tmp_path / "copy.db"  # (the evaluations stored here stay here)
    copy.write_bytes(db_path.read_bytes())
    db_path = copy
    files = sorted(PARALLEL.glob("*.txt"))
    result = invoke("eval", small, large, "--corpus", *files, "--reference", "en.txt", "--json", "--db", db_path)
    data = json.loads(ok(result))
    assert [summary["tokenizer"] for summary in data["parity_summary"]] == [small, large]
    for summary in data["parity_summary"]:
        rows = [row for row in data["rows"] if row["tokenizer"] == summary["tokenizer"]]
        counts = [row["tokens"] for row in rows]
        highest = max(rows, key=lambda row: row["parity"])
        lowest = min(rows, key=lambda row: row["parity"])
        assert (summary["highest_parity"], summary["highest_parity_file"]) == (highest["parity"], highest["file"])
        assert (summary["lowest_parity"], summary["lowest_parity_file"]) == (lowest["parity"], lowest["file"])
        mean = sum(counts) / len(counts)
        assert summary["gini"] == pytest.approx(sum(abs(a - b) for a in counts for b in counts) / (2 * len(counts) ** 2 * mean))
        assert summary["files"] == len(files)
        assert f"{summary['tokenizer']}: parity from {lowest['parity']:.3f} ({lowest['file']}) to {highest['parity']:.3f} ({highest['file']})" in result.stderr
    one = invoke("eval", small, "--corpus", files[0], "--db", db_path)
    assert "Gini" not in ok(one) + one.stderr  # one file: nothing to sum up


def test_gini():
    assert gini([5, 5, 5, 5]) == 0.0
    assert gini([0, 0, 0, 12]) == pytest.approx(3 / 4)
    assert gini([1]) is None and gini([0, 0]) is None
    values = [3, 1, 4, 1, 5, 9, 2, 6]
    assert gini(values) == pytest.approx(sum(abs(a - b) for a in values for b in values) / (2 * len(values) * sum(values)))
    with pytest.raises(ValueError):
        gini([1, -1])


def test_cli_eval_bad_input_is_one_line(parallel_store, tmp_path):
    db_path, small, _ = parallel_store
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    english = PARALLEL / "en.txt"
    assert_user_error(invoke("eval", small, "--corpus", tmp_path / "missing.txt", "--db", db_path), "missing.txt")
    assert_user_error(invoke("eval", "nope@3", "--corpus", english, "--db", db_path), "nope")
    assert_user_error(invoke("eval", small, "--corpus", english, empty, "--db", db_path), "empty.txt is empty")
    assert_user_error(invoke("eval", small, "--corpus", english, "--reference", "xx.txt", "--db", db_path), "xx.txt")
    assert_user_error(invoke("eval", small, "--corpus", english, "--db", tmp_path / "none.db"), "no store")
    assert invoke("eval", small, "--db", db_path).exit_code == 2  # no --corpus: a usage error


def test_a_store_that_cannot_be_written_still_evaluates_and_keeps_nothing(parallel_store, tmp_path):
    db_path, small, _ = parallel_store
    store_path = tmp_path / "copy.db"
    store_path.write_bytes(db_path.read_bytes())
    with Store(store_path) as store:
        store.read_only_reason = "a read-only mount, say"  # what opening a read-only file sets
        result = store.evaluate(small, PARALLEL / "ko.txt")
        assert not result.stored and result.rows[0].evaluation.tokens > 0
        assert store.evaluations(small, sha256=result.files[0].sha256) == []
