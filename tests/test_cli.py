"""Tests of the ``bpestore`` command line (``bpestore.cli.main``).

Every command is run through click's ``CliRunner`` against a store in a temporary directory; a few
tests run the installed ``bpestore`` executable in a subprocess (the README's quick start, progress
bars on a terminal). Expected values come from the Python API (``train_bpe``, ``Tokenizer.encode``,
``Store``) or are computed here, never from literals.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from bpestore import Tokenizer, train_bpe
from bpestore.cli import main
from bpestore import _engine
from bpestore.encode.files import DEFAULT_CHUNK_BYTES, encode_file_to_npy
from bpestore import Store
from conftest import shared_file

ENDOFTEXT = "<|endoftext|>"

# -- helpers ------------------------------------------------------------------------------------


def make_runner() -> CliRunner:
    """A runner that keeps stdout and stderr apart (click < 8.2 needs ``mix_stderr=False``)."""
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()


def invoke(*args, input=None, env=None):
    """Run ``bpestore ARGS``; BPESTORE_DEBUG is unset so that errors are reported as users see them."""
    environment = {"BPESTORE_DEBUG": None}
    environment.update(env or {})
    return make_runner().invoke(main, [str(arg) for arg in args], input=input, env=environment)


def ok(result) -> str:
    """The stdout of a command that must have succeeded, exactly (``result.stdout`` turns
    '\\r\\n' into '\\n')."""
    assert result.exit_code == 0, (
        f"exit code {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}\nexception: {result.exception!r}"
    )
    return result.stdout_bytes.decode("utf-8")


def assert_user_error(result, *needles: str) -> str:
    """A mistake by the user: status != 0, one line on stderr naming the problem, no traceback."""
    assert result.exit_code != 0, f"expected a failure, got exit code 0 and stdout {result.stdout!r}"
    assert isinstance(result.exception, SystemExit), f"uncaught {result.exception!r}"
    assert "Traceback" not in result.stdout + result.stderr
    message = result.stderr.strip()
    assert message, "nothing was printed on stderr"
    assert "\n" not in message, f"expected one line on stderr, got:\n{message}"
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    assert result.stdout == ""
    return message


def write_text(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))  # no newline translation
    return path


def read_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


def corpus_text(seed: int = 0, words: int = 12_000) -> str:
    """A small corpus with accented letters, CJK, emoji (so that tokens holding part of a UTF-8
    character are learned), digits, '\\r\\n', whitespace runs and special tokens."""
    rng = random.Random(seed)
    vocabulary = [
        "the", "cat", "sat", "on", "a", "mat", "and", "then", "ran", "away", "café", "naïve", "über",
        "Straße", "größer", "日本語", "中文", "😀", "👍🏽", "don't", "It's", "123", "4567", "—", "!",
    ]
    pieces = []
    for i in range(words):
        pieces.append(rng.choice(vocabulary))
        roll = rng.random()
        if roll < 0.02:
            pieces.append(ENDOFTEXT)
        elif roll < 0.05:
            pieces.append("\r\n" if rng.random() < 0.5 else "\n\n")
        elif roll < 0.07:
            pieces.append("   ")
        else:
            pieces.append(" ")
    return "".join(pieces)


def sample_text() -> str:
    """Text for encoding: everything the corpus has, plus characters it never saw."""
    return (
        "Hello wörld, the café's cat sat on the mat.\r\nDON'T 日本語 😀 👨‍👩‍👧 ٣৩ 12345\t\t  end"
        + ENDOFTEXT
        + " after\u2028the special\n\n\n"
    )


def load(db: Path, ref: str) -> Tokenizer:
    with Store(db) as store:
        return store.load(ref)


def infos(db: Path):
    with Store(db) as store:
        return store.list()


def ids_of(stdout: str) -> list[int]:
    return [int(word) for word in stdout.split()]


def find_executable() -> str:
    candidates = [Path(sys.executable).parent / "bpestore", shutil.which("bpestore")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    pytest.skip("the installed `bpestore` executable was not found next to the Python or on PATH")


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in {"BPESTORE_DB", "BPESTORE_DEBUG"}}
    env.update(extra)
    return env


# -- fixtures -------------------------------------------------------------------------------------

SIZES = (300, 400)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return write_text(tmp_path_factory.mktemp("corpus") / "corpus.txt", corpus_text())


@pytest.fixture(scope="module")
def other_corpus(tmp_path_factory) -> Path:
    text = corpus_text(seed=1, words=3000).replace("cat", "dog") + " zebra quagga zebra quagga" * 50
    return write_text(tmp_path_factory.mktemp("other") / "other.txt", text)


@pytest.fixture(scope="module")
def trained_db(tmp_path_factory, corpus, other_corpus) -> Path:
    """A store with ts@1 (vocab 300) and ts@2 (vocab 400) trained on ``corpus``, and other@1.

    Tests must not change it (use ``db`` for that)."""
    db = tmp_path_factory.mktemp("trained") / "store.db"
    args = ["train", corpus, "--name", "ts", "--special-token", ENDOFTEXT, "--quiet", "--db", db]
    for size in SIZES:
        args += ["--vocab-size", size]
    ok(invoke(*args))
    ok(invoke("train", other_corpus, "--name", "other", "--vocab-size", 350, "--special-token", ENDOFTEXT, "-q", "--db", db))
    return db


@pytest.fixture(scope="module")
def expected(corpus) -> dict[int, tuple[dict[int, bytes], list[tuple[bytes, bytes]]]]:
    """train_bpe's result for each vocab size of ``trained_db``."""
    return {size: train_bpe(corpus, size, [ENDOFTEXT]) for size in SIZES}


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "store.db"


# -- help -----------------------------------------------------------------------------------------


def all_command_paths(group=main, prefix=()) -> list[tuple[str, ...]]:
    """Every command, subcommands included, as click lists them (``import``'s come from the
    format registry)."""
    import click

    paths = [prefix]
    if isinstance(group, click.Group):
        context = click.Context(group)
        for name in sorted(group.list_commands(context)):
            paths += all_command_paths(group.get_command(context, name), (*prefix, name))
    return paths


EXPECTED_COMMANDS = [
    (), ("decode",), ("diff",), ("encode",), ("export",), ("import",), ("import", "gpt2"), ("import", "hf"),
    ("import", "tiktoken"), ("info",), ("list",), ("rm",), ("serve",), ("show",), ("train",), ("count",), ("count", "add"),
    ("count", "list"),
    ("eval",), ("trim",), ("remap",), ("add-tokens",), ("warm",), ("check",),
]


def test_the_commands_are_the_documented_ones():
    assert sorted(all_command_paths()) == sorted(EXPECTED_COMMANDS)


@pytest.mark.parametrize("path", EXPECTED_COMMANDS, ids=lambda path: " ".join(path) or "bpestore")
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_of_every_command_has_an_example(path, flag):
    result = invoke(*path, flag)
    out = ok(result)
    assert out.startswith("Usage:")
    assert "Example" in out, f"`bpestore {' '.join(path)} --help` shows no example:\n{out}"


def test_version():
    from importlib.metadata import version

    assert version("bpestore") in ok(invoke("--version"))


# -- train ----------------------------------------------------------------------------------------


def test_train_stores_one_version_per_vocab_size(trained_db, expected):
    for size, ref in zip(SIZES, ["ts@1", "ts@2"]):
        tokenizer = load(trained_db, ref)
        vocab, merges = expected[size]
        assert tokenizer.vocab == vocab
        assert tokenizer.merges == merges
        assert tokenizer.special_tokens == [ENDOFTEXT]


def test_train_prints_only_the_refs_on_stdout_and_a_summary_on_stderr(db, corpus):
    result = invoke("train", corpus, "--name", "ts", "--vocab-size", 300, "--vocab-size", 280, "--vocab-size", 500, "--db", db)
    stored = infos(db)
    assert [info.ref for info in stored] == ["ts@1", "ts@2", "ts@3"]
    # stdout: exactly the refs, one per line, usable as `ref=$(bpestore train ...)`
    assert ok(result) == "".join(f"{info.ref}\n" for info in stored)
    # stderr: a line per tokenizer stating its vocab size and merges as stored, and the wall time;
    # not a terminal, so no progress bar even without --quiet
    summary = result.stderr.splitlines()
    assert "%|" not in result.stderr
    for info in stored:
        line = next(line for line in summary if line.split()[:1] == [info.ref])
        assert f"vocab_size={info.vocab_size}" in line.split() and f"merges={info.num_merges}" in line.split()
    assert re.search(r"wall time\D*\d+(\.\d+)?\s*s", result.stderr), result.stderr


def test_train_quiet_prints_nothing_on_stderr(db, corpus):
    result = invoke("train", corpus, "--name", "q", "--vocab-size", 270, "-q", "--db", db)
    assert ok(result) == "q@1\n"
    assert result.stderr == ""


def test_train_json(db, corpus):
    result = invoke("train", corpus, "--name", "j", "--vocab-size", 300, "--vocab-size", 260, "--special-token", ENDOFTEXT, "--json", "--db", db)
    data = json.loads(ok(result))
    stored = {info.ref: info for info in infos(db)}
    assert [row["ref"] for row in data] == ["j@1", "j@2"] == sorted(stored)
    for row in data:
        info = stored[row["ref"]]
        assert (row["name"], row["version"], row["vocab_size"]) == (info.name, info.version, info.vocab_size)
        assert row["special_tokens"] == [ENDOFTEXT]
    # the same objects as `list --json` gives for them
    listed = {row["ref"]: row for row in json.loads(ok(invoke("list", "--json", "--db", db)))}
    assert data == [listed[row["ref"]] for row in data]


def test_training_again_adds_versions(db, corpus):
    ok(invoke("train", corpus, "--name", "ts", "--vocab-size", 300, "-q", "--db", db))
    out = ok(invoke("train", corpus, "--name", "ts", "--vocab-size", 300, "-q", "--db", db))
    assert out == "ts@2\n"
    assert load(db, "ts@1").merges == load(db, "ts@2").merges


@pytest.mark.parametrize("workers", [1, 2])
def test_train_with_workers(db, corpus, expected, workers):
    ok(invoke("train", corpus, "--name", "w", "--vocab-size", 400, "--special-token", ENDOFTEXT, "--workers", workers, "--quiet", "--db", db))
    vocab, merges = expected[400]
    tokenizer = load(db, "w")
    assert (tokenizer.vocab, tokenizer.merges) == (vocab, merges)


def test_train_with_several_special_tokens(db, corpus):
    specials = [ENDOFTEXT, "<|pad|>"]
    ok(invoke("train", corpus, "--name", "s", "--vocab-size", 300, "--special-token", specials[0], "--special-token", specials[1], "-q", "--db", db))
    tokenizer = load(db, "s")
    assert tokenizer.special_tokens == specials
    assert (tokenizer.vocab, tokenizer.merges) == train_bpe(corpus, 300, specials)


def test_db_from_environment_and_default(tmp_path, corpus, monkeypatch):
    env_db = tmp_path / "from_env.db"
    ok(invoke("train", corpus, "--name", "e", "--vocab-size", 260, "-q", env={"BPESTORE_DB": str(env_db)}))
    assert [info.ref for info in infos(env_db)] == ["e@1"]
    # --db wins over the environment
    other = tmp_path / "other.db"
    Store(other).close()
    ok(invoke("list", "--db", other, env={"BPESTORE_DB": str(env_db)}))
    assert "e@1" not in ok(invoke("list", "--json", "--db", other, env={"BPESTORE_DB": str(env_db)}))
    # default: ./bpestore.db
    directory = tmp_path / "cwd"
    directory.mkdir()
    monkeypatch.chdir(directory)
    ok(invoke("train", corpus, "--name", "d", "--vocab-size", 260, "-q", env={"BPESTORE_DB": None}))
    assert [info.ref for info in infos(directory / "bpestore.db")] == ["d@1"]


# -- list -----------------------------------------------------------------------------------------


def test_list_json(trained_db):
    data = json.loads(ok(invoke("list", "--json", "--db", trained_db)))
    stored = infos(trained_db)
    assert [(row["name"], row["version"]) for row in data] == [(info.name, info.version) for info in stored]
    for row, info in zip(data, stored):
        assert {"name", "version", "vocab_size", "special_tokens"} <= row.keys()
        assert row["vocab_size"] == info.vocab_size == len(load(trained_db, info.ref).vocab)
        assert row["special_tokens"] == [ENDOFTEXT]


def test_list_table(trained_db):
    lines = ok(invoke("list", "--db", trained_db)).splitlines()
    header = lines[0].split()
    assert header[:2] == ["NAME", "VERSION"]
    rows = [line.split() for line in lines if line.split()[:1] in (["ts"], ["other"])]
    assert [row[:2] for row in rows] == [[info.name, str(info.version)] for info in infos(trained_db)]
    for row, info in zip(rows, infos(trained_db)):
        assert str(info.vocab_size) in row
        assert ENDOFTEXT in row


def test_list_of_an_empty_store(db):
    Store(db).close()
    result = invoke("list", "--db", db)
    assert ok(result).strip() == ""
    assert "No tokenizers" in result.stderr or result.stderr == ""
    assert json.loads(ok(invoke("list", "--json", "--db", db))) == []


# -- show -----------------------------------------------------------------------------------------


def test_show_metadata_and_merges(trained_db, corpus):
    tokenizer = load(trained_db, "ts@2")
    out = ok(invoke("show", "ts", "--merges", 3, "--db", trained_db))
    assert "ts@2" in out
    assert str(tokenizer.vocab_size) in out
    assert str(len(tokenizer.merges)) in out
    assert ENDOFTEXT in out
    assert str(corpus.resolve()) in out or corpus.name in out
    # three first merges, three last merges, three longest tokens
    sections = re.split(r"\n\s*\n", out.strip())
    merge_sections = [s for s in sections if "merges:" in s.splitlines()[0]]
    assert len(merge_sections) == 2
    for section, ranks in zip(merge_sections, [range(3), range(len(tokenizer.merges) - 3, len(tokenizer.merges))]):
        body = section.splitlines()[1:]
        assert [int(line.split()[0]) for line in body] == list(ranks)
    longest = [s for s in sections if "longest" in s.splitlines()[0]][0].splitlines()[1:]
    assert len(longest) == 3
    lengths = sorted((len(token) for token in tokenizer.vocab.values()), reverse=True)[:3]
    assert [len(tokenizer.vocab[int(line.split()[0])]) for line in longest] == lengths
    assert [int(line.split()[1]) for line in longest] == lengths


def displayed_as(display: str, token: bytes) -> bool:
    """Whether ``display`` shows ``token`` (valid UTF-8): its text, possibly quoted."""
    text = token.decode("utf-8")
    return display in (text, repr(text), json.dumps(text))


def test_show_json(trained_db):
    tokenizer = load(trained_db, "ts@1")
    data = json.loads(ok(invoke("show", "ts@1", "--json", "--merges", 4, "--db", trained_db)))
    assert data["name"] == "ts" and data["version"] == 1
    assert data["vocab_size"] == tokenizer.vocab_size
    assert [m["rank"] for m in data["first_merges"]] == [0, 1, 2, 3]
    n = len(tokenizer.merges)
    assert [m["rank"] for m in data["last_merges"]] == list(range(n - 4, n))
    for entry in data["first_merges"] + data["last_merges"]:
        left, right = tokenizer.merges[entry["rank"]]
        for display, token in ((entry["left"], left), (entry["right"], right)):
            try:
                token.decode("utf-8")
            except UnicodeDecodeError:
                continue
            assert displayed_as(display, token), (display, token)
    lengths = sorted((len(token) for token in tokenizer.vocab.values()), reverse=True)[:4]
    assert [entry["bytes"] for entry in data["longest_tokens"]] == lengths
    for entry in data["longest_tokens"]:
        assert len(tokenizer.vocab[entry["id"]]) == entry["bytes"]


def test_show_merges_zero(trained_db):
    data = json.loads(ok(invoke("show", "ts@1", "--json", "--merges", 0, "--db", trained_db)))
    assert data["first_merges"] == data["last_merges"] == data["longest_tokens"] == []


def test_show_of_trained_partial_utf8_tokens_is_escaped(trained_db):
    """The corpus has 'é', 'ü', 'ß', CJK and emoji: the first merges join bytes of one character."""
    tokenizer = load(trained_db, "ts@2")
    invalid = [(rank, merge) for rank, merge in enumerate(tokenizer.merges) if not is_utf8(merge[0]) or not is_utf8(merge[1])]
    assert invalid, "expected merges of partial UTF-8 characters"
    out = ok(invoke("show", "ts@2", "--merges", len(tokenizer.merges), "--db", trained_db))
    assert "\ufffd" not in out
    for rank, (left, right) in invalid:
        line = next(line for line in out.splitlines() if line.split()[:1] == [str(rank)])
        for token in (left, right):
            try:
                token.decode("utf-8")
            except UnicodeDecodeError as error:
                assert f"\\x{token[error.start]:02x}" in line, line


def is_utf8(token: bytes) -> bool:
    try:
        token.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.fixture
def tricky_db(db) -> Path:
    """A hand-made tokenizer with tokens that are not UTF-8 (' \\xc3', '\\xe4\\xb8') next to ASCII
    tokens that spell the escape ('\\\\xc3': a backslash, 'x', 'c', '3')."""
    vocab = {b: bytes([b]) for b in range(256)}
    merges = [
        (b" ", b"\xc3"), (b"\xe4", b"\xb8"),
        (b"\\", b"x"), (b"\\x", b"c"), (b"\\xc", b"3"), (b" ", b"\\xc3"),
    ]
    for left, right in merges:
        vocab[len(vocab)] = left + right
    with Store(db) as store:
        store.save("tricky", Tokenizer(vocab, merges, [ENDOFTEXT]))
    return db


def test_show_escapes_bytes_that_are_not_utf8_unambiguously(tricky_db):
    tokenizer = load(tricky_db, "tricky")
    id_of = {token: token_id for token_id, token in tokenizer.vocab.items()}
    out = ok(invoke("show", "tricky", "--merges", 20, "--db", tricky_db))
    assert "\ufffd" not in out
    longest = {}
    section = out.split("longest")[1].splitlines()[1:]
    for line in section:
        if line.strip():
            token_id, rest = line.split(None, 1)
            longest[int(token_id)] = rest.split("bytes", 1)[1].strip()
    raw, spelled = longest[id_of[b" \xc3"]], longest[id_of[b" \\xc3"]]
    assert raw != spelled, f"token b' \\xc3' (2 bytes) and token b' \\\\xc3' (5 bytes) are both shown as {raw}"
    assert "\\xc3" in raw
    assert "\\xe4\\xb8" in longest[id_of[b"\xe4\xb8"]]

    data = json.loads(ok(invoke("show", "tricky", "--merges", 20, "--json", "--db", tricky_db)))
    shown = {entry["id"]: entry["token"] for entry in data["longest_tokens"]}
    assert "\ufffd" not in json.dumps(data, ensure_ascii=False)
    assert shown[id_of[b" \xc3"]] != shown[id_of[b" \\xc3"]], (
        f"token b' \\xc3' and token b' \\\\xc3' are both shown as {shown[id_of[b' ' + bytes([0xC3])]]!r} in --json"
    )
    assert "\\xc3" in shown[id_of[b" \xc3"]]


# -- diff -----------------------------------------------------------------------------------------


def independent_diff(a: Tokenizer, b: Tokenizer) -> dict:
    tokens_a, tokens_b = set(a.vocab.values()), set(b.vocab.values())
    prefix = 0
    while prefix < min(len(a.merges), len(b.merges)) and a.merges[prefix] == b.merges[prefix]:
        prefix += 1
    return {
        "shared_tokens": len(tokens_a & tokens_b),
        "only_a": sorted(i for i, t in a.vocab.items() if t not in tokens_b),
        "only_b": sorted(i for i, t in b.vocab.items() if t not in tokens_a),
        "common_merge_prefix": prefix,
    }


@pytest.mark.parametrize("refs", [("ts@1", "ts@2"), ("ts@2", "other@1"), ("other", "ts@1")])
def test_diff_json(trained_db, corpus, refs):
    a, b = load(trained_db, refs[0]), load(trained_db, refs[1])
    want = independent_diff(a, b)
    data = json.loads(ok(invoke("diff", *refs, "--json", "--db", trained_db)))
    assert data["shared_tokens"] == want["shared_tokens"]
    assert data["common_merge_prefix"] == want["common_merge_prefix"]
    assert [entry["id"] for entry in data["only_a"]] == want["only_a"]
    assert [entry["id"] for entry in data["only_b"]] == want["only_b"]
    for side, tokenizer in (("only_a", a), ("only_b", b)):
        for entry in data[side]:
            token = tokenizer.vocab[entry["id"]]
            if is_utf8(token):
                assert displayed_as(entry["token"], token)
    assert data.get("tokens_a") is None and data.get("tokens_b") is None
    with Store(trained_db) as store:
        assert data == json.loads(json.dumps(store.diff(*refs).to_dict(), default=str))

    with_corpus = json.loads(ok(invoke("diff", *refs, "--json", "--corpus", corpus, "--db", trained_db)))
    text = read_text(corpus)
    assert with_corpus["tokens_a"] == len(a.encode(text))
    assert with_corpus["tokens_b"] == len(b.encode(text))
    assert with_corpus["shared_tokens"] == want["shared_tokens"]


def test_diff_readable(trained_db, corpus):
    a, b = load(trained_db, "ts@2"), load(trained_db, "other@1")
    want = independent_diff(a, b)
    out = ok(invoke("diff", "ts@2", "other@1", "--corpus", corpus, "--db", trained_db))
    assert "ts@2" in out and "other@1" in out

    def line_with(label: str) -> str:
        return next(line for line in out.splitlines() if re.match(re.escape(label) + r"\s+\d", line.strip()))

    assert str(want["shared_tokens"]) in line_with("shared tokens").split()
    assert str(want["common_merge_prefix"]) in line_with("common merge prefix").split()
    text = read_text(corpus)
    # numbers thousands separated, as in every table of the CLI
    assert line_with("tokens").split()[-2:] == [f"{len(a.encode(text)):,}", f"{len(b.encode(text)):,}"]
    assert line_with("vocab size").split()[2:] == [f"{a.vocab_size:,}", f"{b.vocab_size:,}"]


# -- encode ---------------------------------------------------------------------------------------


def test_encode_from_stdin_by_default(trained_db):
    text = sample_text()
    tokenizer = load(trained_db, "ts")
    out = ok(invoke("encode", "ts", "--db", trained_db, input=text.encode("utf-8")))
    assert out.endswith("\n") and "  " not in out
    assert ids_of(out) == tokenizer.encode(text)
    assert out == " ".join(map(str, tokenizer.encode(text))) + "\n"


def test_encode_from_dash(trained_db):
    text = sample_text()
    out = ok(invoke("encode", "ts@1", "-", "--db", trained_db, input=text.encode("utf-8")))
    assert ids_of(out) == load(trained_db, "ts@1").encode(text)


def test_encode_a_file(trained_db, corpus):
    tokenizer = load(trained_db, "ts@2")
    out = ok(invoke("encode", "ts@2", corpus, "--db", trained_db))
    assert ids_of(out) == tokenizer.encode(read_text(corpus))


def test_encode_empty_input(trained_db):
    assert ok(invoke("encode", "ts", "--db", trained_db, input=b"")).strip() == ""


def test_encode_to_a_text_file(trained_db, tmp_path):
    text = sample_text()
    output = tmp_path / "ids.txt"
    result = invoke("encode", "ts", "--output", output, "--db", trained_db, input=text.encode("utf-8"))
    assert ok(result) == ""
    assert ids_of(output.read_text()) == load(trained_db, "ts").encode(text)


def test_encode_a_file_to_npy(trained_db, corpus, tmp_path):
    output = tmp_path / "ids.npy"
    result = invoke("encode", "ts", corpus, "--output", output, "--db", trained_db)
    ok(result)
    array = np.load(output)
    expected_ids = load(trained_db, "ts").encode(read_text(corpus))
    assert array.dtype == np.uint16 and array.ndim == 1
    assert array.tolist() == expected_ids
    assert not list(tmp_path.glob("*.partial"))


def test_encode_stdin_to_npy(trained_db, tmp_path):
    text = sample_text() * 50
    output = tmp_path / "ids.npy"
    ok(invoke("encode", "ts", "-", "--output", output, "--db", trained_db, input=text.encode("utf-8")))
    array = np.load(output)
    assert array.dtype == np.uint16
    assert array.tolist() == load(trained_db, "ts").encode(text)


def big_id_tokenizer(max_id: int) -> Tokenizer:
    """Bytes 0-255, a few merges, and special tokens whose largest id is ``max_id``."""
    vocab = {b: bytes([b]) for b in range(256)}
    merges = [(b"t", b"h"), (b"th", b"e"), (b" ", b"the")]
    for left, right in merges:
        vocab[len(vocab)] = left + right
    vocab[max_id - 1] = b"<|a|>"
    vocab[max_id] = b"<|big|>"
    return Tokenizer(vocab, merges, ["<|a|>", "<|big|>"])


@pytest.mark.parametrize(("max_id", "dtype"), [(65_535, np.uint16), (65_536, np.uint32), (100_276, np.uint32)])
@pytest.mark.parametrize("from_stdin", [False, True])
def test_npy_dtype_is_uint16_only_when_every_id_fits(db, tmp_path, max_id, dtype, from_stdin):
    tokenizer = big_id_tokenizer(max_id)
    with Store(db) as store:
        store.save("big", tokenizer)
    text = "the <|big|> cat<|a|> the the<|big|>\n" * 20
    path = write_text(tmp_path / "in.txt", text)
    output = tmp_path / "ids.npy"
    if from_stdin:
        ok(invoke("encode", "big", "--output", output, "--db", db, input=text.encode("utf-8")))
    else:
        ok(invoke("encode", "big", path, "--output", output, "--db", db))
    array = np.load(output)
    assert array.dtype == dtype
    assert array.tolist() == tokenizer.encode(text)
    assert max_id in array.tolist()


def awkward_text(rng: random.Random, size: int) -> str:
    """Mostly words (so chunks are cut at spaces), with special tokens, whitespace runs,
    non-ASCII letters, emoji and long runs without spaces."""
    words = ["the", "cat", "sat", "café", "日本語", "😀", "don't", "DON'T", "42", "—", "Straße"]
    odd = [ENDOFTEXT, "  " + ENDOFTEXT, "\r\n", "\n\n\n", "   ", "\t", "\u3000", "\xa0", " \u2028 ", "x" * 300, "٣৩"]
    pieces, length = [], 0
    while length < size:
        piece = " " + rng.choice(words) if rng.random() < 0.9 else rng.choice(odd)
        pieces.append(piece)
        length += len(piece)
    return "".join(pieces)


@pytest.fixture(scope="module")
def big_file(tmp_path_factory) -> Path:
    """A file bigger than one default chunk (DEFAULT_CHUNK_BYTES)."""
    rng = random.Random(7)
    text = awkward_text(rng, DEFAULT_CHUNK_BYTES + 300_000)
    path = write_text(tmp_path_factory.mktemp("big") / "big.txt", text)
    assert path.stat().st_size > DEFAULT_CHUNK_BYTES
    return path


@pytest.mark.parametrize("workers", [1, 2])
def test_encode_a_file_bigger_than_one_chunk_to_npy(trained_db, big_file, tmp_path, workers):
    tokenizer = load(trained_db, "ts@2")
    assert len(_engine.file_chunk_boundaries(big_file, tokenizer.pattern, tokenizer.special_tokens, DEFAULT_CHUNK_BYTES)) > 2, "expected several chunks"
    output = tmp_path / "big.npy"
    result = invoke("encode", "ts@2", big_file, "--output", output, "--workers", workers, "--db", trained_db)
    ok(result)
    array = np.load(output)
    want = tokenizer.encode(read_text(big_file))
    assert array.dtype == np.uint16
    assert len(array) == len(want)
    assert np.array_equal(array, np.array(want, dtype=np.uint16))
    assert f"{len(want):,}" in result.stderr  # "wrote N ids to ...", thousands separated


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("specials", [[ENDOFTEXT], [ENDOFTEXT, "<| sep |>"]], ids=["endoftext", "spaced-special"])
def test_encode_file_to_npy_with_small_chunks(trained_db, tmp_path, workers, specials):
    """Many small chunks: cuts at spaces, or only at special tokens when one holds a space."""
    base = load(trained_db, "ts@2")
    tokenizer = Tokenizer(base.vocab, base.merges, specials)
    rng = random.Random(workers)
    text = awkward_text(rng, 400_000).replace("   ", " <| sep |> ", 200)
    path = write_text(tmp_path / "in.txt", text)
    chunk_bytes = 1 << 15
    assert len(_engine.file_chunk_boundaries(path, tokenizer.pattern, specials, chunk_bytes)) > 5
    output = tmp_path / "out.npy"
    count = encode_file_to_npy(tokenizer, path, output, workers=workers, chunk_bytes=chunk_bytes)
    want = tokenizer.encode(text)
    array = np.load(output)
    assert count == len(want)
    assert array.tolist() == want


# -- decode ---------------------------------------------------------------------------------------


def test_decode_ids_from_arguments(trained_db):
    tokenizer = load(trained_db, "ts")
    ids = tokenizer.encode(sample_text())
    out = ok(invoke("decode", "ts", *ids, "--db", trained_db))
    assert out == tokenizer.decode(ids) == sample_text()


def test_decode_ids_from_stdin(trained_db):
    tokenizer = load(trained_db, "ts@1")
    ids = tokenizer.encode(sample_text())
    stdin = "\n".join(" ".join(map(str, ids[i : i + 7])) for i in range(0, len(ids), 7)) + "\n"
    assert ok(invoke("decode", "ts@1", "--db", trained_db, input=stdin)) == sample_text()


def test_decode_of_a_partial_character_writes_its_raw_bytes(trained_db):
    """Bytes that are not valid UTF-8 are written as they are (not U+FFFD): what a byte-exact
    round trip of any input, cut anywhere, needs."""
    tokenizer = load(trained_db, "ts")
    id_of = {token: token_id for token_id, token in tokenizer.vocab.items()}
    result = invoke("decode", "ts", id_of[b"\xc3"], "--db", trained_db)
    assert result.exit_code == 0 and result.stdout_bytes == b"\xc3"
    # the two halves of 'é' decoded separately, one after the other, give 'é' back
    halves = invoke("decode", "ts", id_of[b"h"], id_of[b"\xc3"], "--db", trained_db).stdout_bytes
    halves += invoke("decode", "ts", id_of[b"\xa9"], "--db", trained_db).stdout_bytes
    assert halves.decode("utf-8") == "h\u00e9"


def test_encode_decode_round_trip(trained_db, corpus):
    text = read_text(corpus)
    encoded = ok(invoke("encode", "ts@2", corpus, "--db", trained_db))
    assert ok(invoke("decode", "ts@2", "--db", trained_db, input=encoded)) == text


# -- rm -------------------------------------------------------------------------------------------


def test_rm(db, corpus):
    ok(invoke("train", corpus, "--name", "ts", "--vocab-size", 260, "--vocab-size", 270, "--vocab-size", 280, "-q", "--db", db))
    assert "ts@1" in ok(invoke("rm", "ts@1", "--db", db))
    assert [info.ref for info in infos(db)] == ["ts@2", "ts@3"]
    assert "ts@3" in ok(invoke("rm", "ts", "--db", db))  # the latest
    assert [info.ref for info in infos(db)] == ["ts@2"]
    assert_user_error(invoke("rm", "ts@1", "--db", db), "ts", "1", "2")
    ok(invoke("rm", "ts", "--db", db))
    assert infos(db) == []
    assert_user_error(invoke("rm", "ts", "--db", db), "ts")


# -- import / export ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt2_files():
    return shared_file("fixtures", "gpt2_vocab.json"), shared_file("fixtures", "gpt2_merges.txt")


@pytest.fixture(scope="module")
def gpt2_db(tmp_path_factory, gpt2_files) -> Path:
    db = tmp_path_factory.mktemp("gpt2") / "store.db"
    vocab_json, merges_txt = gpt2_files
    out = ok(invoke("import", "gpt2", vocab_json, merges_txt, "--name", "gpt2", "--special-token", ENDOFTEXT, "--db", db))
    assert out.startswith("gpt2@1")
    return db


def test_import_gpt2(gpt2_db, gpt2_files):
    from gpt2_tiktoken import gpt2_encoding, gpt2_vocab_and_merges

    vocab, merges = gpt2_vocab_and_merges()
    tokenizer = load(gpt2_db, "gpt2")
    assert tokenizer.vocab == vocab
    assert tokenizer.merges == merges
    assert tokenizer.special_ids == {ENDOFTEXT: 50256}
    text = read_text(shared_file("fixtures", "tinystories_sample.txt")) + sample_text()
    assert tokenizer.encode(text) == gpt2_encoding().encode(text, allowed_special="all")
    (info,) = infos(gpt2_db)
    assert "gpt2" in info.source


def same_tokenizer(a: Tokenizer, b: Tokenizer) -> None:
    assert a.vocab == b.vocab
    assert a.merges == b.merges
    assert a.special_ids == b.special_ids
    assert a.pattern == b.pattern


@pytest.mark.parametrize("export_format", ["gpt2", "hf"])
def test_export_and_import_again(trained_db, tmp_path, export_format):
    db = tmp_path / "again.db"
    original = load(trained_db, "ts@2")
    if export_format == "gpt2":
        directory = tmp_path / "gpt2-files"
        result = invoke("export", "ts@2", "--format", "gpt2", "--output", directory, "--db", trained_db)
        ok(result)
        assert (directory / "vocab.json").is_file() and (directory / "merges.txt").is_file()
        out = ok(invoke("import", "gpt2", directory / "vocab.json", directory / "merges.txt", "--name", "again", "--special-token", ENDOFTEXT, "--db", db))
    else:
        tokenizer_json = tmp_path / "tokenizer.json"
        result = invoke("export", "ts@2", "--format", "hf", "--output", tokenizer_json, "--db", trained_db)
        ok(result)
        out = ok(invoke("import", "hf", tokenizer_json, "--name", "again", "--db", db))
    assert result.stdout == ""
    assert out.startswith("again@1")
    same_tokenizer(load(db, "again"), original)
    text = sample_text()
    assert load(db, "again").encode(text) == original.encode(text)


@pytest.mark.slow  # (over 2 s here: the full suite's)
def test_export_to_tiktoken_and_import_again(gpt2_db, tmp_path):
    db = tmp_path / "again.db"
    original = load(gpt2_db, "gpt2")
    tiktoken_file = tmp_path / "gpt2.tiktoken"
    result = invoke("export", "gpt2", "--format", "tiktoken", "--output", tiktoken_file, "--db", gpt2_db)
    ok(result)
    assert "pat_str" in result.stderr  # says what tiktoken also needs
    result = invoke("import", "tiktoken", tiktoken_file, "--name", "again", "--pattern", "r50k_base", "--db", db)
    ok(result)
    assert re.search(r"\b0 tokens are not reached", result.stderr), result.stderr
    imported = load(db, "again")
    assert imported.vocab == original.vocab
    assert imported.merges == original.merges
    assert imported.special_ids == original.special_ids == {ENDOFTEXT: 50256}
    assert imported.merge_rule == "token"
    text = sample_text() + read_text(shared_file("fixtures", "german.txt"))
    assert imported.encode(text) == original.encode(text)


def test_import_tiktoken_with_explicit_special_tokens(trained_db, tmp_path):
    original = load(trained_db, "ts@2")
    special_id = original.special_ids[ENDOFTEXT]
    tiktoken_file = tmp_path / "ts.tiktoken"
    ok(invoke("export", "ts@2", "--format", "tiktoken", "--output", tiktoken_file, "--db", trained_db))
    db = tmp_path / "again.db"
    ok(invoke("import", "tiktoken", tiktoken_file, "--name", "none", "--pattern", "r50k_base", "--special-token", f"<|x|>={original.vocab_size}", "--db", db))
    ok(invoke("import", "tiktoken", tiktoken_file, "--name", "eot", "--pattern", "r50k_base", "--special-token", f"{ENDOFTEXT}={special_id}", "--db", db))
    assert load(db, "none").special_ids == {"<|x|>": original.vocab_size}  # replaces r50k_base's default
    imported = load(db, "eot")
    assert imported.special_ids == {ENDOFTEXT: special_id}
    assert imported.vocab == original.vocab
    # A special token given an id that the file uses for another token is refused.
    assert_user_error(
        invoke("import", "tiktoken", tiktoken_file, "--name", "clash", "--pattern", "r50k_base", "--special-token", f"{ENDOFTEXT}={special_id + 1}", "--db", db),
        "ts.tiktoken", ENDOFTEXT,
    )
    assert [info.ref for info in infos(db)] == ["eot@1", "none@1"]


def test_import_tiktoken_takes_token_or_token_eq_id_and_a_known_encodings_pattern_from_the_file_name(gpt2_db, tmp_path):
    """One --special-token syntax across imports: TOKEN (as import gpt2 takes it) or TOKEN=ID;
    a bare TOKEN is the known encoding's id for it, else the next id after the file's. A file
    named like a known encoding needs no --pattern."""
    from bpestore.pretokenize.patterns import GPT2_PATTERN

    db = tmp_path / "again.db"
    named = tmp_path / "r50k_base.tiktoken"
    ok(invoke("export", "gpt2", "--format", "tiktoken", "--output", named, "--db", gpt2_db))
    ok(invoke("import", "tiktoken", named, "--name", "inferred", "-q", "--db", db))
    inferred = load(db, "inferred")
    assert inferred.pattern == GPT2_PATTERN and inferred.special_ids == {ENDOFTEXT: 50256}
    ok(invoke("import", "tiktoken", named, "--name", "bare", "--special-token", ENDOFTEXT, "--special-token", "<|pad|>", "-q", "--db", db))
    assert load(db, "bare").special_ids == {ENDOFTEXT: 50256, "<|pad|>": 50257}  # r50k_base's id, then the next
    ok(invoke("import", "tiktoken", named, "--name", "mixed", "--special-token", "<|pad|>", "--special-token", f"{ENDOFTEXT}=50256", "-q", "--db", db))
    assert load(db, "mixed").special_ids == {"<|pad|>": 50257, ENDOFTEXT: 50256}
    assert load(db, "bare").encode("a<|pad|>b") == load(db, "mixed").encode("a<|pad|>b")
    # a file not named like a known encoding still needs --pattern, and is told so
    unnamed = shutil.copy(named, tmp_path / "mine.tiktoken")
    result = invoke("import", "tiktoken", unnamed, "--name", "x", "--db", db)
    assert_user_error(result, "mine.tiktoken", "give --pattern", "cl100k_base")
    assert result.exit_code == 1
    assert [info.ref for info in infos(db)] == ["bare@1", "inferred@1", "mixed@1"]


def test_failed_import_stores_nothing(db, tmp_path, gpt2_files):
    vocab_json, _ = gpt2_files
    merges = write_text(tmp_path / "merges.txt", "#version: 0.2\nĠ t\nĠt he extra\n")
    assert_user_error(invoke("import", "gpt2", vocab_json, merges, "--name", "bad", "--db", db), "merges.txt", "line 3")
    assert not db.exists() or infos(db) == []


# -- user errors ----------------------------------------------------------------------------------


def test_unknown_name_lists_the_names(trained_db):
    for command in (["show", "nope"], ["encode", "nope"], ["decode", "nope", "1"], ["diff", "ts", "nope"], ["rm", "nope"], ["export", "nope", "--format", "hf", "--output", "x.json"]):
        assert_user_error(invoke(*command, "--db", trained_db, input=""), "nope", "ts", "other")


def test_unknown_version_lists_the_versions(trained_db):
    assert_user_error(invoke("show", "ts@7", "--db", trained_db), "ts", "7", "1, 2")
    assert_user_error(invoke("encode", "other@2", "--db", trained_db, input="x"), "other", "2", "1")


@pytest.mark.parametrize("ref", ["ts@", "ts@0", "ts@x", "a@1@2", "ts@-1"])
def test_invalid_reference(trained_db, ref):
    assert_user_error(invoke("show", ref, "--db", trained_db), ref)


def test_missing_files(trained_db, tmp_path):
    missing = tmp_path / "missing.txt"
    assert_user_error(invoke("train", missing, "--name", "x", "--vocab-size", 300, "--db", trained_db), "missing.txt")
    assert_user_error(invoke("encode", "ts", missing, "--db", trained_db), "missing.txt")
    assert_user_error(invoke("encode", "ts", missing, "--output", tmp_path / "x.npy", "--db", trained_db), "missing.txt")
    assert_user_error(invoke("diff", "ts@1", "ts@2", "--corpus", missing, "--db", trained_db), "missing.txt")
    assert_user_error(invoke("import", "hf", missing, "--name", "x", "--db", trained_db), "missing.txt")
    assert_user_error(invoke("import", "gpt2", missing, missing, "--name", "x", "--db", trained_db), "missing.txt")
    assert_user_error(invoke("import", "tiktoken", missing, "--name", "x", "--pattern", "cl100k_base", "--db", trained_db), "missing.txt")
    assert_user_error(invoke("train", tmp_path, "--name", "x", "--vocab-size", 300, "--db", trained_db), str(tmp_path.name))
    assert_user_error(invoke("encode", "ts", "-", "--output", tmp_path / "no" / "x.npy", "--db", trained_db, input="hi"), "x.npy")
    assert_user_error(invoke("export", "ts", "--format", "hf", "--output", tmp_path / "no" / "x.json", "--db", trained_db), "x.json")
    assert [info.ref for info in infos(trained_db)] == ["other@1", "ts@1", "ts@2"]


def test_list_fits_in_100_columns_and_wide_shows_every_field_whole(db, gpt2_files, tmp_path):
    """cl100k's five special tokens and long file names made rows of 181 columns, which wrap on
    a 100-column terminal: the long fields are shortened with … (or "+N" more tokens)."""
    specials = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|endofprompt|>"]
    deep = tmp_path / ("a-folder-with-a-rather-long-name-" * 3)
    deep.mkdir()
    vocab, merges = (shutil.copy(path, deep / f"the-{path.name}-of-a-model-with-a-long-name") for path in gpt2_files)
    specials_options = [option for token in specials for option in ("--special-token", token)]
    ok(invoke("import", "gpt2", vocab, merges, "--name", "a-model-with-quite-a-long-name", *specials_options, "-q", "--db", db))
    ok(invoke("import", "gpt2", *gpt2_files, "--name", "gpt2", "--special-token", ENDOFTEXT, "-q", "--db", db))
    table = ok(invoke("list", "--db", db))
    lines = table.splitlines()
    assert len(lines) == 4 and max(len(line) for line in lines) <= 100, table
    long_row = next(line for line in lines if line.startswith("a-model-"))
    assert "…" in long_row and re.search(r" <\|endof\S* \+[1-4] ", long_row), long_row  # the first token(s), then how many more
    assert next(line for line in lines if line.startswith("gpt2 ")).split()[3] == ENDOFTEXT  # short fields stay whole
    wide = ok(invoke("list", "--wide", "--db", db))
    assert " ".join(specials) in wide and "a-model-with-quite-a-long-name" in wide and vocab.name in wide
    assert "…" not in wide and max(len(line) for line in wide.splitlines()) > 100


def test_a_missing_input_file_is_worded_the_same_by_every_command(trained_db, tmp_path):
    """One wording per situation: encode said "No such corpus file", import the system's words."""
    missing = tmp_path / "missing.txt"
    commands = [
        ("train", missing, "--name", "x", "--vocab-size", 300),
        ("encode", "ts", missing),
        ("encode", "ts", missing, "--output", tmp_path / "x.npy"),
        ("count", "add", "ts@1", missing),
        ("diff", "ts@1", "ts@2", "--corpus", missing),
        ("eval", "ts@1", "ts@2", "--corpus", missing),
        ("warm", "ts@1", missing),
        ("import", "gpt2", missing, missing, "--name", "x"),
        ("import", "tiktoken", missing, "--name", "x", "--pattern", "cl100k_base"),
    ]
    for command in commands:
        message = assert_user_error(invoke(*command, "--db", trained_db))
        assert message == f"Error: No such file or directory: {missing}", (command, message)


def test_every_output_is_reported_the_same_way(corpus, db, tmp_path):
    """encode (text and .npy), remap and export each say "wrote N THINGS to PATH" on stderr."""
    ok(invoke("train", corpus, "--name", "ts", "--vocab-size", 300, "-q", "--db", db))
    ok(invoke("trim", "ts", "--vocab-size", 280, "--map-out", tmp_path / "map", "--db", db))
    lines = {}
    for output, command in [
        ("ids.txt", ("encode", "ts@1", corpus)),
        ("ids.npy", ("encode", "ts@1", corpus)),
        ("remapped.npy", ("remap", tmp_path / "map.json", tmp_path / "ids.npy")),
        ("ts.json", ("export", "ts@1", "--format", "hf")),
        ("ts.tiktoken", ("export", "ts@1", "--format", "tiktoken")),
        ("ts-gpt2", ("export", "ts@1", "--format", "gpt2")),
    ]:
        db_option = () if command[0] == "remap" else ("--db", db)
        result = invoke(*command, "--output", tmp_path / output, *db_option)
        assert result.exit_code == 0, result.stderr
        lines[output] = result.stderr.strip().splitlines()[-1]
    count = len(np.load(tmp_path / "ids.npy"))
    assert lines["ids.txt"] == f"wrote {count:,} ids to {tmp_path / 'ids.txt'}"
    assert lines["ids.npy"] == f"wrote {count:,} ids to {tmp_path / 'ids.npy'}"
    assert re.fullmatch(rf"wrote [\d,]+ ids to {re.escape(str(tmp_path / 'remapped.npy'))} \(uint16\)", lines["remapped.npy"]), lines
    assert lines["ts.json"] == f"wrote 300 tokens to {tmp_path / 'ts.json'}"
    assert lines["ts.tiktoken"].startswith(f"wrote 300 tokens to {tmp_path / 'ts.tiktoken'}; tiktoken also needs")
    assert lines["ts-gpt2"] == f"wrote 300 tokens to {tmp_path / 'ts-gpt2' / 'vocab.json'} and 44 merges to {tmp_path / 'ts-gpt2' / 'merges.txt'}"


@pytest.mark.parametrize("word", ["abc", "1.5", "0x10", "12abc"])
def test_invalid_ids(trained_db, word):
    assert_user_error(invoke("decode", "ts", "1", word, "--db", trained_db), word)
    assert_user_error(invoke("decode", "ts", "--db", trained_db, input=f"1 2 {word} 3"), word)


@pytest.mark.parametrize("token_id", ["99999999", "402"])
def test_ids_outside_the_vocab(trained_db, token_id):
    # ts@1 has fewer than 403 tokens
    assert load(trained_db, "ts@1").vocab_size < 403
    assert_user_error(invoke("decode", "ts@1", "1", token_id, "--db", trained_db), token_id)
    assert_user_error(invoke("decode", "ts@1", "--db", trained_db, input=f"{token_id}\n"), token_id)


def test_negative_id(trained_db):
    assert_user_error(invoke("decode", "ts@1", "--db", trained_db, input="5 -1"), "-1")


def test_vocab_size_too_small(db, corpus):
    assert_user_error(invoke("train", corpus, "--name", "x", "--vocab-size", 100, "--db", db), "100", "256")
    assert_user_error(invoke("train", corpus, "--name", "x", "--vocab-size", 256, "--special-token", ENDOFTEXT, "--db", db), "257")
    assert_user_error(invoke("train", corpus, "--name", "x", "--vocab-size", 300, "--vocab-size", 10, "--db", db), "10")
    assert not db.exists() or infos(db) == []


def test_invalid_name_and_special_tokens(db, corpus):
    assert_user_error(invoke("train", corpus, "--name", "a@b", "--vocab-size", 300, "--db", db), "a@b")
    assert_user_error(invoke("train", corpus, "--name", "x", "--vocab-size", 300, "--special-token", "<s>", "--special-token", "<s>", "--db", db), "<s>")
    assert_user_error(invoke("train", corpus, "--name", "x", "--vocab-size", 300, "--special-token", "", "--db", db), "special")
    assert not db.exists() or infos(db) == []


def test_corpus_that_is_not_utf8(db, tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("hello wörld ".encode("utf-8") * 10 + "café".encode("latin-1"))
    offset = len("hello wörld ".encode("utf-8") * 10) + 3
    assert_user_error(invoke("train", path, "--name", "x", "--vocab-size", 300, "--db", db), "latin1.txt", str(offset))
    ok(invoke("train", write_text(tmp_path / "ok.txt", "hello hello"), "--name", "ok", "--vocab-size", 260, "--db", db))
    assert_user_error(invoke("encode", "ok", path, "--db", db), "latin1.txt", str(offset))
    assert_user_error(invoke("encode", "ok", path, "--output", tmp_path / "x.npy", "--db", db), "latin1.txt", str(offset))
    assert not (tmp_path / "x.npy").exists()
    assert_user_error(invoke("encode", "ok", "--db", db, input=path.read_bytes()), str(offset))
    assert [info.ref for info in infos(db)] == ["ok@1"]


@pytest.fixture(params=["random-bytes", "other-sqlite", "directory"])
def foreign_db(request, tmp_path) -> Path:
    path = tmp_path / "foreign.db"
    if request.param == "random-bytes":
        path.write_bytes(random.Random(0).randbytes(5000))
    elif request.param == "other-sqlite":
        connection = sqlite3.connect(path)
        connection.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        connection.execute("INSERT INTO customers (name) VALUES ('Ada')")
        connection.commit()
        connection.close()
    else:
        path.mkdir()
    return path


def snapshot(path: Path):
    return path.read_bytes() if path.is_file() else sorted(p.name for p in path.iterdir())


def test_foreign_database_is_refused_and_left_untouched(foreign_db, corpus):
    before = snapshot(foreign_db)
    siblings = sorted(p.name for p in foreign_db.parent.iterdir())
    commands = [
        ["list"], ["list", "--json"], ["show", "x"], ["rm", "x"],
        ["train", corpus, "--name", "x", "--vocab-size", 300, "-q"],
    ]
    for command in commands:
        assert_user_error(invoke(*command, "--db", foreign_db), "foreign.db")
    assert snapshot(foreign_db) == before
    assert sorted(p.name for p in foreign_db.parent.iterdir()) == siblings  # no -wal/-shm/journal files


def test_missing_directory_for_the_database(tmp_path):
    assert_user_error(invoke("list", "--db", tmp_path / "nowhere" / "x.db"), "nowhere")
    assert not (tmp_path / "nowhere").exists()


def test_usage_errors_exit_2_without_traceback(trained_db):
    for command in (["train"], ["encode"], ["export", "ts", "--format", "xml", "--output", "x"], ["show", "ts", "--merges", "-1"], ["train", "x", "--name", "x", "--vocab-size", "many"], ["frobnicate"],
                    # the three (README states status 2 for them, 1 for other mistakes, 70 for bugs)
                    ["train", "x", "--name", "x", "--vocab-sise", "1000"], ["train", "x", "--vocab-size", "300"], ["export", "ts", "--format", "hf"]):
        result = invoke(*command, "--db", trained_db)
        assert result.exit_code == 2, (command, result.exit_code, result.stderr)
        assert "Traceback" not in result.stdout + result.stderr
        assert result.stderr.strip().splitlines()[-1].startswith("Error")


# -- the installed executable ---------------------------------------------------------------------


def run_cli(executable: str, *args, cwd: Path, input: bytes | None = None, check: bool = True, **env):
    result = subprocess.run(
        [executable, *map(str, args)], cwd=cwd, input=input, capture_output=True, env=subprocess_env(**env), timeout=300
    )
    if check:
        assert result.returncode == 0, result.stderr.decode()
    return result


@pytest.mark.slow
def test_readme_quick_start_with_the_installed_executable(tmp_path):
    """The README's quick start (on a small generated corpus): train, list, encode from a pipe,
    decode, encode to .npy, diff, show; all in the default store ./bpestore.db."""
    bpestore = find_executable()
    write_text(tmp_path / "stdlib.txt", corpus_text(seed=3, words=6000))
    run = lambda *args, **kw: run_cli(bpestore, *args, cwd=tmp_path, **kw)  # noqa: E731

    out = run("train", "stdlib.txt", "--name", "stdlib", "--vocab-size", 300, "--vocab-size", 450, "--special-token", ENDOFTEXT).stdout.decode()
    assert out.splitlines() == ["stdlib@1", "stdlib@2"]
    assert (tmp_path / "bpestore.db").is_file()

    listing = run("list").stdout.decode()
    assert "stdlib" in listing and "450" in listing or str(load(tmp_path / "bpestore.db", "stdlib@2").vocab_size) in listing

    text = 'def hello(): return "world" — café 日本語 😀\n'
    tokenizer = load(tmp_path / "bpestore.db", "stdlib")
    encoded = run("encode", "stdlib", input=text.encode("utf-8")).stdout.decode()
    assert ids_of(encoded) == tokenizer.encode(text)
    decoded = run("decode", "stdlib", input=encoded.encode()).stdout.decode("utf-8")
    assert decoded == text
    assert run("decode", "stdlib", *ids_of(encoded)).stdout.decode("utf-8") == text

    # a real shell pipeline
    shell = shutil.which("sh")
    if shell:
        piped = subprocess.run(
            [shell, "-c", f'printf "%s" "$TEXT" | "{bpestore}" encode stdlib | "{bpestore}" decode stdlib'],
            cwd=tmp_path, capture_output=True, env=subprocess_env(TEXT=text), timeout=300,
        )
        assert piped.returncode == 0, piped.stderr.decode()
        assert piped.stdout.decode("utf-8") == text

    run("encode", "stdlib@1", "stdlib.txt", "--output", "stdlib.npy")
    assert np.load(tmp_path / "stdlib.npy").tolist() == load(tmp_path / "bpestore.db", "stdlib@1").encode(read_text(tmp_path / "stdlib.txt"))
    assert run("decode", "stdlib@1", "stdlib.npy").stdout == (tmp_path / "stdlib.txt").read_bytes()
    pieces = run("encode", "stdlib", "--tokens", input=text.encode("utf-8")).stdout.decode("utf-8").splitlines()
    assert [int(line.split("\t")[0]) for line in pieces] == tokenizer.encode(text)
    diff = run("diff", "stdlib@1", "stdlib@2", "--corpus", "stdlib.txt").stdout.decode()
    assert "stdlib@1" in diff and "stdlib@2" in diff
    show = run("show", "stdlib", "--merges", 5).stdout.decode("utf-8")
    assert "stdlib@2" in show

    # A mistake: one line, status 1, no traceback, also outside CliRunner.
    failed = run("show", "nope", check=False)
    assert failed.returncode == 1
    message = failed.stderr.decode().strip()
    assert "nope" in message and "stdlib" in message and "\n" not in message and "Traceback" not in message
    assert failed.stdout == b""


@pytest.mark.slow
def test_installed_executable_reads_bpestore_db(tmp_path):
    """``BPESTORE_DB`` also reaches the installed executable."""
    bpestore = find_executable()
    db = tmp_path / "env.db"
    write_text(tmp_path / "c.txt", corpus_text(seed=4, words=500))
    run_cli(bpestore, "train", "c.txt", "--name", "e", "--vocab-size", 270, "-q", cwd=tmp_path, BPESTORE_DB=str(db))
    assert [info.ref for info in infos(db)] == ["e@1"]
    assert not (tmp_path / "bpestore.db").exists()


def run_with_tty_stderr(argv: list[str], cwd: Path) -> tuple[int, bytes, bytes]:
    """Run with stderr on a pseudo-terminal (80 columns); returns (status, stdout, stderr)."""
    pty = pytest.importorskip("pty")
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    process = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, env=subprocess_env())
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not data:
            break
        chunks.append(data)
    stdout = process.stdout.read()
    process.stdout.close()
    status = process.wait(timeout=300)
    os.close(master)
    return status, stdout, b"".join(chunks)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_progress_bars_only_on_a_terminal_and_not_with_quiet(tmp_path):
    bpestore = find_executable()
    write_text(tmp_path / "c.txt", corpus_text(seed=5, words=3000))
    db = str(tmp_path / "p.db")

    status, stdout, stderr = run_with_tty_stderr([bpestore, "train", "c.txt", "--name", "p", "--vocab-size", "300", "--db", db], tmp_path)
    assert status == 0
    assert stdout.startswith(b"p@1")
    assert b"%|" in stderr, f"no progress bar on a terminal: {stderr!r}"

    status, stdout, stderr = run_with_tty_stderr([bpestore, "train", "c.txt", "--name", "p", "--vocab-size", "300", "--quiet", "--db", db], tmp_path)
    assert status == 0 and stdout.startswith(b"p@2")
    assert stderr == b""

    status, _, stderr = run_with_tty_stderr([bpestore, "encode", "p", "c.txt", "--output", "c.npy", "--db", db], tmp_path)
    assert status == 0 and b"%|" in stderr
    status, _, stderr = run_with_tty_stderr([bpestore, "encode", "p", "c.txt", "--output", "c.npy", "-q", "--db", db], tmp_path)
    assert status == 0 and b"%|" not in stderr

    status, _, stderr = run_with_tty_stderr([bpestore, "diff", "p@1", "p@2", "--corpus", "c.txt", "--db", db], tmp_path)
    assert status == 0 and b"%|" in stderr


def test_a_bug_is_reported_as_one_internal_error_line(trained_db, monkeypatch):
    """Anything but a user's mistake (here a KeyError from inside) is not passed off as one: one
    line says it is an internal error and how to see the traceback; BPESTORE_DEBUG=1 shows it."""
    import bpestore.workflow

    def broken(*args, **kwargs):
        raise KeyError("some internal key")

    monkeypatch.setattr(bpestore.workflow.Store, "load_model", broken)
    result = invoke("show", "ts", "--db", trained_db)
    assert result.exit_code == 70, (result.exit_code, result.stderr)
    message = result.stderr.strip()
    assert "\n" not in message and "Traceback" not in message
    assert message.startswith("Internal error") and "KeyError" in message and "BPESTORE_DEBUG=1" in message
    debug = invoke("show", "ts", "--db", trained_db, env={"BPESTORE_DEBUG": "1"})
    assert isinstance(debug.exception, KeyError), debug.exception


def test_a_missing_store_is_an_error_and_is_not_created(tmp_path):
    """Reading from a store that does not exist names it, and leaves no empty database behind."""
    missing = tmp_path / "nowhere.db"
    for command in (["encode", "ts"], ["decode", "ts", "1"], ["export", "ts", "--format", "hf", "--output", tmp_path / "x.json"]):
        assert_user_error(invoke(*command, "--db", missing, input="hello"), "nowhere.db")
    assert not missing.exists()
