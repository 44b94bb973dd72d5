"""Seeing and judging tokenizers from the command line (issue 27, point 1): ``encode --tokens``,
``--compact`` and ``--count``, ``decode`` of a ``.npy``, ``diff`` of more than two tokenizers,
numbers with thousands separators, progress bars in words, the GPT-2 import's hint about special
tokens.

Expected values come from the Python API (``Tokenizer.encode``, ``Store``) or are computed here.
"""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore import Store
from bpestore.progress import progress_bar, progress_step, rate_text
from conftest import shared_file
from test_cli import (
    ENDOFTEXT, assert_user_error, corpus_text, find_executable, invoke, load, ok, read_text, run_with_tty_stderr, sample_text,
    write_text,
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return write_text(tmp_path_factory.mktemp("corpus") / "corpus.txt", corpus_text(seed=3, words=6000))


@pytest.fixture(scope="module")
def trained_db(tmp_path_factory, corpus) -> Path:
    """v@1, v@2, v@3 (vocab 290, 320, 350) trained on ``corpus``; tests must not change it."""
    db = tmp_path_factory.mktemp("view") / "store.db"
    with Store(db) as store:
        assert store.train(corpus, "v", [290, 320, 350], [ENDOFTEXT]) == ["v@1", "v@2", "v@3"]
    return db


# -- progress bars in words ---------------------------------------------------------------------


def test_rates_are_whole_units_with_thousands_separators():
    assert rate_text(139743.96, "merges") == "139,744 merges/s"
    assert rate_text(12_345_678, "B", unit_scale=True) == "12.3 MB/s"
    assert rate_text(512, "B", unit_scale=True) == "512 B/s"
    assert rate_text(1_350_000, "rows", unit_scale=True) == "1.35M rows/s"
    assert rate_text(None, "merges") == "? merges/s"


def test_a_bar_shows_counts_and_rate_in_words(monkeypatch):
    """The bar tqdm draws (on stderr, here a StringIO) says ``139,744/1,000,000`` and about
    ``139,744 merges/s``, never tqdm's ``139743.96merge/s``."""
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with progress_bar(True, 1_000_000, "merges", unit="merges") as bar:
        bar.start_t -= 1.0  # one second ago: the rate is about the count
        bar.update(139_744)
        line = str(bar)
    assert "139,744/1,000,000" in line, line
    rate = re.search(r"\[.*, ([\d,]+) merges/s\]$", line)
    assert rate, line
    assert 100_000 < int(rate.group(1).replace(",", "")) <= 139_744, line
    with progress_bar(True, 50_000_000, "encoding", unit="B", unit_scale=True) as bar:
        bar.start_t -= 1.0
        bar.update(12_345_678)
        line = str(bar)
    assert "12.3MB/50.0MB" in line and re.search(r"\d+\.\d MB/s\]$", line), line


def test_the_bar_of_saved_counts_counts_pre_tokens_not_row_writes(monkeypatch, tmp_path):
    """1,234 distinct pre-tokens are saved as "1.23k/1.23k pre-tokens", where the bar said
    "2.47k rows" (SQLite writes each row twice: staged, then copied)."""
    words = [" " + "".join("abcdefghijklmnopqrstuvwxyz"[i // 26 ** k % 26] for k in range(3)) for i in range(1234)]
    corpus = write_text(tmp_path / "c.txt", "".join(words))  # 1,234 distinct pre-tokens (" aaa", " baa", ...)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with Store("sqlite://") as store:  # (in memory: the counts are saved before the merges, with their bar)
        store.train(corpus, "p", 300, progress=True)
    frames = [frame for frame in re.split(r"[\r\n]", err.getvalue()) if frame.startswith("saving pre-token counts")]
    assert frames and re.search(r"\| 1\.23k/1\.23k \[.*pre-tokens/s\]", frames[-1]), frames
    assert "rows" not in err.getvalue()


def test_a_step_line_says_what_runs_and_then_done(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with progress_step(True, "reading and checking vocab.json") as bar:
        assert str(bar).startswith("reading and checking vocab.json [00:00]")
    assert err.getvalue().rstrip().endswith("done")
    with progress_step(False, "nothing shown"):
        pass
    assert "nothing shown" not in err.getvalue()


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_train_of_several_sizes_and_import_say_what_they_do_on_a_terminal(tmp_path):
    bpestore = find_executable()
    write_text(tmp_path / "c.txt", corpus_text(seed=5, words=3000))
    db = str(tmp_path / "p.db")
    argv = [bpestore, "train", "c.txt", "--name", "p", "--vocab-size", "300", "--vocab-size", "350", "--db", db]
    status, stdout, stderr = run_with_tty_stderr(argv, tmp_path)
    assert status == 0 and stdout.split() == [b"p@1", b"p@2"]
    text = stderr.decode()
    assert re.search(r"[\d,]+ merges/s", text) and "merge/s" not in text, text
    assert "saving 2 tokenizers: 2/2" in text and "done" in text, text
    vocab_json, merges_txt = shared_file("fixtures", "gpt2_vocab.json"), shared_file("fixtures", "gpt2_merges.txt")
    argv = [bpestore, "import", "gpt2", str(vocab_json), str(merges_txt), "--name", "g", "--special-token", ENDOFTEXT, "--db", db]
    status, _, stderr = run_with_tty_stderr(argv, tmp_path)
    assert status == 0
    assert "reading and checking gpt2_vocab.json, gpt2_merges.txt" in stderr.decode(), stderr
    status, _, stderr = run_with_tty_stderr([*argv[:-2], "-q", "--db", db], tmp_path)
    assert status == 0 and b"reading and checking" not in stderr


# -- the GPT-2 import's hint about special tokens -----------------------------------------------


def write_small_gpt2(directory: Path, extra_tokens: list[str]) -> tuple[Path, Path]:
    """A GPT-2 vocab.json + merges.txt: the 256 bytes, 'ab' made by one merge, and ``extra_tokens``
    (made by no merge), written as GPT-2 writes them."""
    from bpestore.formats.gpt2 import token_to_text

    vocab = {token_to_text(bytes([b])): b for b in range(256)}
    vocab[token_to_text(b"ab")] = 256
    for token in extra_tokens:
        vocab[token] = len(vocab)
    vocab_json, merges_txt = directory / "vocab.json", directory / "merges.txt"
    vocab_json.write_text(json.dumps(vocab), encoding="utf-8")
    merges_txt.write_text("#version: 0.2\na b\n", encoding="utf-8")
    return vocab_json, merges_txt


def test_an_unmerged_special_looking_token_is_named_with_the_flag_to_pass(tmp_path):
    paths = write_small_gpt2(tmp_path, [ENDOFTEXT])
    db = tmp_path / "s.db"
    result = invoke("import", "gpt2", *paths, "--name", "g", "--db", db)
    ok(result)
    (warning,) = [line for line in result.stderr.splitlines() if line.startswith("warning")]
    assert ENDOFTEXT in warning and f"--special-token '{ENDOFTEXT}'" in warning, warning
    assert "empty or truncated" not in warning, warning
    assert len(load(db, "g").encode(ENDOFTEXT)) > 1  # what the warning warns about
    # Following the hint: no warning, and the special token is one token.
    result = invoke("import", "gpt2", *paths, "--name", "g", "--special-token", ENDOFTEXT, "--db", db)
    ok(result)
    assert "warning" not in result.stderr
    assert load(db, "g@2").encode(ENDOFTEXT) == [257]


def test_special_looking_and_ordinary_unmerged_tokens_get_a_warning_each(tmp_path):
    from bpestore import formats

    paths = write_small_gpt2(tmp_path, ["<s>", "</s>", "cd"])
    special, truncated = formats.read("gpt2", *paths).notes
    assert "<s>, </s> are in the vocab" in special and "--special-token '<s>' --special-token '</s>'" in special, special
    assert "1 of the vocab's 260 tokens" in truncated and "empty or truncated" in truncated, truncated
    assert formats.read("gpt2", *paths, special_tokens=["<s>", "</s>"]).notes == [truncated]


# -- numbers --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_db(tmp_path_factory, trained_db) -> Path:
    """A copy of ``trained_db`` plus big@1: the 256 bytes and 1,000 two-byte tokens, each made by
    one merge (a vocab over a thousand, whose numbers need a separator)."""
    from bpestore import BPEModel

    db = tmp_path_factory.mktemp("big") / "store.db"
    db.write_bytes(trained_db.read_bytes())
    merges = [(bytes([a]), bytes([b])) for a in range(97, 123) for b in range(32, 127)][:1000]
    vocab = {i: bytes([i]) for i in range(256)} | {256 + rank: a + b for rank, (a, b) in enumerate(merges)}
    with Store(db) as store:
        store.save("big", BPEModel(vocab, merges))
    return db


def test_list_show_diff_and_info_separate_thousands(big_db, corpus):
    listed = ok(invoke("list", "--db", big_db))
    assert re.search(r"^big +1 +1,256 ", listed, re.MULTILINE), listed
    shown = ok(invoke("show", "big", "--db", big_db))
    assert re.search(r"^vocab size +1,256$", shown, re.MULTILINE) and re.search(r"^merges +1,000$", shown, re.MULTILINE), shown
    diffed = ok(invoke("diff", "big", "v@1", "--corpus", corpus, "--db", big_db))
    assert re.search(r"^vocab size +1,256 +290$", diffed, re.MULTILINE), diffed
    size = corpus.stat().st_size
    assert f"({size:,} bytes)" in diffed and size >= 1000
    assert re.search(r"^size +[\d,]+ bytes$", ok(invoke("info", "--db", big_db)), re.MULTILINE)


# -- encode --tokens, --compact, --count ------------------------------------------------------------

MARKS = {"\u00b7": b" ", "\u21b5": b"\n", "\u2192": b"\t"}


def read_back(shown: str, separator: str | None = None) -> list[bytes]:
    """The bytes of the tokens a --tokens text shows, undoing its escapes independently of the
    CLI's code; ``separator``: --compact's '|', which splits tokens where it is not escaped."""
    tokens, current, i = [], bytearray(), 0
    while i < len(shown):
        char = shown[i]
        if char == "\\":
            kind = shown[i + 1]
            if kind == "x":
                current.append(int(shown[i + 2 : i + 4], 16))
                i += 4
            elif kind in "uU":
                width = 4 if kind == "u" else 8
                current += chr(int(shown[i + 2 : i + 2 + width], 16)).encode("utf-8")
                i += 2 + width
            else:
                current += kind.encode("utf-8")  # \\ and \|
                i += 2
            continue
        if char == separator:
            tokens.append(bytes(current))
            current = bytearray()
        else:
            current += MARKS.get(char, char.encode("utf-8"))
        i += 1
    if separator is not None or current:
        tokens.append(bytes(current))
    return tokens


def tokens_view(db: Path, ref: str, text: str, *options: str) -> list[tuple[int, bytes]]:
    out = ok(invoke("encode", ref, "--tokens", *options, "--db", db, input=text.encode("utf-8")))
    rows = []
    for line in out.splitlines(keepends=True):
        assert line.endswith("\n")
        token_id, shown = line[:-1].split("\t")
        (token,) = read_back(shown)
        rows.append((int(token_id), token))
    return rows


awkward_texts = st.lists(
    st.one_of(
        st.text(max_size=12),
        st.sampled_from([ENDOFTEXT, "\u00b7", "\u21b5", "\u2192", "\\", "\\x41", "|", "\r\n", " \t", "\u2028", "\x00", "😀", "日本語"]),
    ),
    max_size=8,
).map("".join)


@settings(max_examples=25, deadline=None)
@given(text=awkward_texts)
def test_tokens_read_back_to_the_input_and_its_ids(trained_db, text):
    """One token a line, id then text: the ids are encode's, and the texts, read back, are the
    tokens' bytes: joined, the input (a token that splits a character shows its bytes)."""
    tokenizer = load(trained_db, "v@3")
    rows = tokens_view(trained_db, "v@3", text)
    assert [token_id for token_id, _ in rows] == tokenizer.encode(text)
    assert [token for _, token in rows] == [tokenizer.vocab[token_id] for token_id in tokenizer.encode(text)]
    assert b"".join(token for _, token in rows) == text.encode("utf-8")
    compact = ok(invoke("encode", "v@3", "--compact", "--db", trained_db, input=text.encode("utf-8")))
    assert compact.endswith("\n") and "\n" not in compact[:-1]
    shown = read_back(compact[:-1], "|")
    assert shown == ([token for _, token in rows] if rows else [b""])


def test_tokens_make_whitespace_visible_and_split_characters_show_their_bytes(trained_db, big_db):
    """A space is ·, a newline ↵, a tab →; a token holding part of a character shows its bytes."""
    tokenizer = load(trained_db, "v@3")
    out = ok(invoke("encode", "v@3", "--tokens", "--db", trained_db, input="a b\n\tc\r".encode()))
    shown = "".join(line.split("\t", 1)[1] for line in out.splitlines())
    assert shown == "a\u00b7b\u21b5\u2192c\\x0d", out
    # big@1 has no token for any character above ASCII: each of its bytes is shown as \xNN
    out = ok(invoke("encode", "big", "--compact", "--db", big_db, input="é".encode()))
    assert out == "\\xc3|\\xa9\n"
    assert tokenizer.encode(ENDOFTEXT) == [int(ok(invoke("encode", "v@3", "--tokens", "--db", trained_db, input=ENDOFTEXT)).split("\t")[0])]


def test_tokens_alternate_in_colour_only_on_a_terminal_and_without_no_color(trained_db, monkeypatch):
    import bpestore.cli

    text = "the cat sat on the mat"
    plain = ok(invoke("encode", "v@3", "--compact", "--db", trained_db, input=text))
    assert "\x1b[" not in plain  # not a terminal
    monkeypatch.setattr(bpestore.cli, "_is_terminal", lambda stream: True)
    coloured = ok(invoke("encode", "v@3", "--compact", "--db", trained_db, input=text))
    assert "\x1b[36m" in coloured and "\x1b[33m" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain
    assert "\x1b[" in ok(invoke("encode", "v@3", "--tokens", "--db", trained_db, input=text))
    assert ok(invoke("encode", "v@3", "--compact", "--db", trained_db, input=text, env={"NO_COLOR": "1"})) == plain


def test_count_gives_tokens_characters_bytes_and_bytes_per_token(trained_db, corpus):
    tokenizer = load(trained_db, "v@2")
    text = read_text(corpus) + sample_text()
    path = write_text(corpus.parent / "count-me.txt", text)
    data = json.loads(ok(invoke("encode", "v@2", path, "--count", "--json", "--db", trained_db)))
    tokens, size = len(tokenizer.encode(text)), len(text.encode("utf-8"))
    assert data == {"tokens": tokens, "characters": len(text), "bytes": size, "bytes_per_token": size / tokens}
    out = ok(invoke("encode", "v@2", "--count", "--db", trained_db, input=text.encode("utf-8")))
    assert re.search(rf"^tokens +{tokens:,}$", out, re.MULTILINE) and re.search(rf"^bytes +{size:,}$", out, re.MULTILINE), out
    assert re.search(rf"^characters +{len(text):,}$", out, re.MULTILINE)
    assert re.search(rf"^bytes/token +{size / tokens:.3f}$", out, re.MULTILINE), out
    # the special-token policy applies: as ordinary text, <|endoftext|> is several tokens
    ordinary = json.loads(ok(invoke("encode", "v@2", "--count", "--json", "--ordinary", "--db", trained_db, input=ENDOFTEXT)))
    assert ordinary["tokens"] == len(tokenizer.encode_ordinary(ENDOFTEXT)) > 1
    assert json.loads(ok(invoke("encode", "v@2", "--count", "--json", "--db", trained_db, input="")))["bytes_per_token"] is None


@pytest.mark.parametrize(
    "options",
    [["--count", "--tokens"], ["--count", "--compact"], ["--tokens", "--output", "x.npy"], ["--count", "--output-dir", "d"], ["--json"],
     ["--tokens", "--json"]],
)
def test_views_that_do_not_go_together_are_usage_errors(trained_db, options):
    result = invoke("encode", "v@1", *options, "--db", trained_db, input="text")
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert "Traceback" not in result.stderr and result.stderr.strip().splitlines()[-1].startswith("Error")


# -- decode of a .npy -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def encoded(trained_db, tmp_path_factory) -> tuple[Path, bytes]:
    """An ``encode --output x.npy`` of a text that ends in half a character, and that text's bytes."""
    directory = tmp_path_factory.mktemp("npy")
    text = sample_text() + corpus_text(seed=9, words=300)
    source = write_text(directory / "in.txt", text)
    ok(invoke("encode", "v@3", source, "--output", directory / "x.npy", "--db", trained_db))
    return directory / "x.npy", text.encode("utf-8")


def test_decode_of_an_encoded_npy_gives_the_input_back(trained_db, encoded):
    npy, data = encoded
    assert np.load(npy).dtype == np.uint16  # what encode wrote, read by NumPy
    assert invoke("decode", "v@3", npy, "--db", trained_db).stdout_bytes == data
    # on stdin, as '-' or as nothing: read as a .npy from its first bytes
    assert invoke("decode", "v@3", "-", "--db", trained_db, input=npy.read_bytes()).stdout_bytes == data
    assert invoke("decode", "v@3", "--db", trained_db, input=npy.read_bytes()).stdout_bytes == data
    # ids as text, in a file or on stdin, as before
    ids_txt = npy.with_name("ids.txt")
    ok(invoke("encode", "v@3", "--output", ids_txt, "--db", trained_db, input=data))
    assert invoke("decode", "v@3", ids_txt, "--db", trained_db).stdout_bytes == data
    assert invoke("decode", "v@3", "-", "--db", trained_db, input=ids_txt.read_bytes()).stdout_bytes == data


def test_decode_of_a_uint32_npy_and_of_a_half_character(trained_db, tmp_path):
    tokenizer = load(trained_db, "v@3")
    id_of = {token: token_id for token_id, token in tokenizer.vocab.items()}
    ids = np.array([id_of[b"h"], id_of[b"\xc3"]], dtype=np.uint32)
    np.save(tmp_path / "half.npy", ids)
    assert invoke("decode", "v@3", tmp_path / "half.npy", "--db", trained_db).stdout_bytes == b"h\xc3"


def npy_cut_short(encoded, tmp_path, keep: int) -> Path:
    npy, _ = encoded
    cut = tmp_path / f"cut-{keep}.npy"
    cut.write_bytes(npy.read_bytes()[:keep])
    return cut


@pytest.mark.parametrize("keep", [4, 40, -3])
def test_a_npy_cut_short_is_refused_in_one_line_naming_it(trained_db, encoded, tmp_path, keep):
    """Cut in its magic, its header or its data: one line naming the file, status 1, no output."""
    cut = npy_cut_short(encoded, tmp_path, keep)
    message = assert_user_error(invoke("decode", "v@3", cut, "--db", trained_db), cut.name)
    assert ".npy" in message
    assert_user_error(invoke("decode", "v@3", "-", "--db", trained_db, input=cut.read_bytes()), "standard input")


@pytest.mark.parametrize("version", [(1, 0), (2, 0)])
def test_a_npy_whose_header_claims_a_huge_array_is_refused_before_it_is_allocated(trained_db, tmp_path, version):
    """A hostile header (a shape of 10**12 ids over ten bytes of data) once had NumPy try to
    allocate 1.8 TiB; the header is now checked against the bytes the file has."""
    from numpy.lib import format as npy_format

    header = {"descr": "<u2", "fortran_order": False, "shape": (10**12,)}
    with open(tmp_path / "huge.npy", "wb") as file:
        (npy_format.write_array_header_1_0 if version == (1, 0) else npy_format.write_array_header_2_0)(file, header)
        file.write(b"\x01\x00" * 5)
    data = (tmp_path / "huge.npy").read_bytes()
    assert_user_error(invoke("decode", "v@3", tmp_path / "huge.npy", "--db", trained_db), "huge.npy", "header says")
    assert_user_error(invoke("decode", "v@3", "-", "--db", trained_db, input=data), "standard input", "header says")


def test_an_unfinished_npy_is_refused_as_such(trained_db, encoded, tmp_path):
    """What a killed ``encode --output`` leaves (its temporary file starts with the engine's
    PARTIAL_NPY_MARK) is said to be unfinished."""
    from bpestore.engine import PARTIAL_NPY_MARK

    partial = tmp_path / ".x.npy.123-abcd.partial"
    partial.write_bytes(PARTIAL_NPY_MARK + encoded[0].read_bytes()[len(PARTIAL_NPY_MARK):])
    assert_user_error(invoke("decode", "v@3", partial, "--db", trained_db), partial.name, "unfinished")


def test_a_npy_of_anything_but_ids_is_refused(trained_db, tmp_path):
    np.save(tmp_path / "floats.npy", np.arange(3.0))
    assert_user_error(invoke("decode", "v@3", tmp_path / "floats.npy", "--db", trained_db), "floats.npy", "float64")
    np.save(tmp_path / "square.npy", np.zeros((2, 2), dtype=np.uint16))
    assert_user_error(invoke("decode", "v@3", tmp_path / "square.npy", "--db", trained_db), "square.npy", "1-D")
    write_text(tmp_path / "text.npy", "1 2 3")
    assert_user_error(invoke("decode", "v@3", tmp_path / "text.npy", "--db", trained_db), "text.npy", "not a .npy")
    np.save(tmp_path / "far.npy", np.array([1, 10**6], dtype=np.uint32))
    assert_user_error(invoke("decode", "v@3", tmp_path / "far.npy", "--db", trained_db), str(10**6))
    assert_user_error(invoke("decode", "v@3", tmp_path / "missing.npy", "--db", trained_db), "missing.npy")


# -- diff of more than two tokenizers ---------------------------------------------------------------


def table_rows(out: str, first_header: str) -> tuple[list[str], list[list[str]]]:
    """The header and rows of the table whose header starts with ``first_header`` (columns are
    two or more spaces apart)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first_header))
    header = re.split(r"\s{2,}", lines[start].strip())
    rows = []
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return header, rows


def test_diff_of_several_tokenizers_is_one_table_against_the_first(big_db, corpus, tmp_path):
    refs = ["v@1", "v@2", "v@3", "big@1"]
    tokenizers = [load(big_db, ref) for ref in refs]
    other = write_text(tmp_path / "other.txt", sample_text())
    out = ok(invoke("diff", *refs, "--corpus", corpus, other, "--db", big_db))
    header, rows = table_rows(out, "TOKENIZER")
    assert header[:4] == ["TOKENIZER", "VOCAB", "MERGES", "SHARED WITH v@1"]
    assert [row[0] for row in rows] == refs
    base = set(tokenizers[0].vocab.values())
    texts = [read_text(corpus), sample_text()]
    for row, tokenizer in zip(rows, tokenizers):
        cells = dict(zip(header, row))
        assert cells["VOCAB"] == f"{tokenizer.vocab_size:,}" and cells["MERGES"] == f"{len(tokenizer.merges):,}"
        shared = len(set(tokenizer.vocab.values()) & base)
        assert cells["SHARED WITH v@1"] == f"{shared:,} ({shared / tokenizer.vocab_size:.1%})"
        tokens = sum(len(tokenizer.encode(text)) for text in texts)
        size = sum(len(text.encode("utf-8")) for text in texts)
        assert cells["TOKENS"] == f"{tokens:,}" and cells["BYTES/TOKEN"] == f"{size / tokens:.3f}"
    assert "special tokens differ: <|endoftext|> (v@1, v@2, v@3); none (big@1)" in out
    # several files: a row per file and tokenizer too
    header, rows = table_rows(out, "FILE")
    assert [(row[0], row[1]) for row in rows] == [(name, ref) for name in (corpus.name, other.name) for ref in refs]

    data = json.loads(ok(invoke("diff", *refs, "--corpus", corpus, "--json", "--db", big_db)))
    assert data["base"] == "v@1" and [row["ref"] for row in data["tokenizers"]] == refs
    for row, tokenizer in zip(data["tokenizers"], tokenizers):
        assert row["shared_tokens"] == len(set(tokenizer.vocab.values()) & base)
        assert row["total"]["tokens"] == len(tokenizer.encode(texts[0]))
    assert data["tokenizers"][1]["common_merge_prefix"] == len(tokenizers[0].merges)  # v@1's merges start v@2's


def test_diff_refs_come_before_corpus_and_two_refs_keep_their_report(trained_db, corpus):
    two = ok(invoke("diff", "v@1", "v@2", "--db", trained_db))
    assert two.splitlines()[0].split() == ["v@1", "v@2"] and "shared tokens" in two  # the two-way report
    three = ok(invoke("diff", "v@1", "v@2", "v@3", "--db", trained_db))
    assert [row[0] for row in table_rows(three, "TOKENIZER")[1]] == ["v@1", "v@2", "v@3"]
    # every word after --corpus up to the next option is a file; the refs are the words before
    with_files = ok(invoke("diff", "v@1", "v@2", "v@3", "--corpus", corpus, corpus, "-q", "--db", trained_db))
    assert "on 2 files" in with_files
    misplaced = invoke("diff", "v@1", "--corpus", corpus, "v@2", "--db", trained_db)  # v@2 is taken for a file
    assert misplaced.exit_code == 2 and "before --corpus" in misplaced.stderr.splitlines()[-1]
    result = invoke("diff", "v@1", "--db", trained_db)
    assert result.exit_code == 2 and "at least two" in result.stderr


def test_a_file_given_as_a_ref_is_said_to_belong_after_corpus(trained_db, corpus):
    for refs in (["v@1", "v@2", str(corpus)], ["v@1", str(corpus)]):
        result = invoke("diff", *refs, "--db", trained_db)
        assert result.exit_code == 2 and "follow --corpus" in result.stderr.splitlines()[-1], result.stderr
