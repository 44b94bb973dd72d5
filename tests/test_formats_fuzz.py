"""Fuzzing the importers: valid GPT-2, Hugging Face and tiktoken files, spoiled at random.

Each example starts from a small valid tokenizer written by bpestore's exporters, applies a few
random mutations (wrong JSON types, nulls, missing keys, huge or negative ids, repeated entries,
bad base64, invalid UTF-8, truncation, lines dropped, repeated or swapped) and imports the result
into a store. The property, for every input:

* either the import succeeds, and the stored tokenizer loads again equal to what was read and
  encodes exactly as the reference does (tests/reference.py for the pair rule, tiktoken itself
  for the token rule);
* or it raises FormatError with a one-line message naming one of the files, and the store is
  byte for byte what it was.

A sample of the same inputs goes through the command line: exit status 1, one line on stderr, no
traceback. A few hundred examples per format; about 20 s in all.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpestore import BPEModel, Store
from bpestore.cli import main
from bpestore.errors import FormatError
from bpestore.formats.hf import tokenizer_json
from bpestore.formats.gpt2 import token_to_text
from bpestore.pretokenize import GPT2_PATTERN
from bpestore.workflow import import_into_store
from gpt2_tiktoken import ENDOFTEXT
from reference import reference_encode
from tiers import examples

FUZZ = settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CLI_SAMPLE = settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])

MERGES = [(b"a", b"b"), (b"ab", b"c"), (b" ", b"t"), (b"h", b"e"), (b" t", b"he"), (b"\n", b"\n"), (b"\xc3", b"\xa9")]
SAMPLE = f"the abc  then{ENDOFTEXT} abcab\n\n caf\u00e9 {ENDOFTEXT}x"


def valid_model() -> BPEModel:
    vocab = {i: bytes([i]) for i in range(256)}
    for left, right in MERGES:
        vocab[len(vocab)] = left + right
    return BPEModel(vocab, MERGES, [ENDOFTEXT])


# -- what is allowed to happen ----------------------------------------------------------------------


class Outcome:
    accepted = 0
    refused = 0


def import_and_check(db: Path, format: str, paths: list[Path], **options) -> None:
    """The property: a correct import, or one clear FormatError and an unchanged store."""
    before = db.read_bytes()
    try:
        ref, imported = import_into_store(db, "fuzz", format, *paths, **options)
    except FormatError as error:
        message = str(error)
        assert message and "\n" not in message, message
        assert any(str(path) in message for path in paths), message
        assert db.read_bytes() == before
        Outcome.refused += 1
        return
    Outcome.accepted += 1
    model = imported.model
    with Store(db) as store:
        loaded = store.load_model(ref)
        tokenizer = store.load(ref)
    assert (loaded.vocab, loaded.merges, loaded.special_ids, loaded.pattern, loaded.merge_rule, loaded.aliases) == (
        model.vocab, model.merges, model.special_ids, model.pattern, model.merge_rule, model.aliases
    )
    ids = tokenizer.encode(SAMPLE)
    assert ids == expected_ids(model, SAMPLE)


def expected_ids(model: BPEModel, text: str) -> list[int]:
    if model.merge_rule == "pair":
        return reference_encode(text, model.vocab, model.merges, model.special_tokens, model.pattern, model.dropped_bytes)
    import tiktoken

    specials = model.special_ids
    ranks = {token: token_id for token_id, token in model.vocab.items() if token_id not in specials.values()}
    encoding = tiktoken.Encoding("fuzz", pat_str=model.pattern, mergeable_ranks=ranks, special_tokens=specials)
    return encoding.encode(text, allowed_special="all")


@pytest.fixture(scope="module")
def store_db(tmp_path_factory) -> Path:
    """A store holding one tokenizer already (so that "unchanged" means something)."""
    db = tmp_path_factory.mktemp("fuzz_store") / "store.db"
    with Store(db) as store:
        store.save("existing", valid_model())
    return db


# -- mutations ----------------------------------------------------------------------------------------

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([-1, -7, 0, 1, 255, 256, 2**31 - 1, 2**31, 2**32, 2**63, 2**64, 0x110000, 10**30]),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "a", "Ġt", "NFC", "BPE", "ByteLevel", "Sequence", "Split", "<|endoftext|>", "\ud7ff", "(x)", "(?:a|a)+(?=$)|.", "\x00"]),
    st.text(max_size=6),
)
JSON_VALUES = st.one_of(JSON_SCALARS, st.lists(JSON_SCALARS, max_size=3), st.dictionaries(st.text(max_size=4), JSON_SCALARS, max_size=3))


def json_paths(value, prefix=()):
    """Every path (tuple of keys and indexes) into a JSON document, the root excluded."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, child in items:
        yield prefix + (key,)
        yield from json_paths(child, prefix + (key,))


def _parent(document, path):
    for key in path[:-1]:
        document = document[key]
    return document


@st.composite
def json_mutation(draw, document):
    """``document`` (changed in place) after one random structural change."""
    # Mostly where it matters: ids in the vocab and added tokens, merges, the pre-tokenizer.
    paths = list(json_paths(document))
    path = draw(st.sampled_from(paths))
    parent, key = _parent(document, path), path[-1]
    action = draw(st.sampled_from(["replace", "replace", "replace", "delete", "duplicate", "rename"]))
    if action == "replace":
        parent[key] = draw(JSON_VALUES)
    elif action == "delete":
        del parent[key]
    elif action == "duplicate":
        if isinstance(parent, list):
            parent.append(parent[key])
        else:
            parent[draw(st.sampled_from(["Ġt", "a", "ab", "<|endoftext|>", "zz", "Ã©"]))] = parent[key]
    else:  # rename a key, or swap two list items
        if isinstance(parent, list):
            other = draw(st.integers(0, len(parent) - 1))
            parent[key], parent[other] = parent[other], parent[key]
        else:
            parent[draw(st.text(max_size=3))] = parent.pop(key)
    return document


def focused_json_paths(document) -> list[tuple]:
    return list(json_paths(document))


@st.composite
def byte_mutation(draw, data: bytes) -> bytes:
    """``data`` truncated, or with invalid UTF-8 or random bytes put in, or a byte changed."""
    action = draw(st.sampled_from(["truncate", "insert", "flip", "none", "none"]))
    if action == "none" or not data:
        return data
    at = draw(st.integers(0, len(data) - 1))
    if action == "truncate":
        return data[:at]
    if action == "insert":
        junk = draw(st.sampled_from([b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\x00", b"\r", b"\n", b" ", b"="]) | st.binary(min_size=1, max_size=4))
        return data[:at] + junk + data[at:]
    return data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]


@st.composite
def line_mutation(draw, lines: list[bytes], field_values) -> list[bytes]:
    """``lines`` with one dropped, repeated, swapped, or a field replaced."""
    lines = list(lines)
    if not lines:
        return lines
    at = draw(st.integers(0, len(lines) - 1))
    action = draw(st.sampled_from(["drop", "repeat", "swap", "field", "field", "field"]))
    if action == "drop":
        del lines[at]
    elif action == "repeat":
        lines.insert(draw(st.integers(0, len(lines))), lines[at])
    elif action == "swap":
        other = draw(st.integers(0, len(lines) - 1))
        lines[at], lines[other] = lines[other], lines[at]
    else:
        fields = lines[at].split(b" ")
        index = draw(st.integers(0, len(fields) - 1))
        fields[index] = draw(field_values)
        lines[at] = b" ".join(fields)
    return lines


# -- the three formats --------------------------------------------------------------------------------


def hf_document() -> dict:
    model = valid_model()
    return tokenizer_json(model.vocab, model.merges, model.special_ids, model.pattern)


@st.composite
def hf_inputs(draw) -> bytes:
    document = hf_document()
    for _ in range(draw(st.integers(1, 3))):
        document = draw(json_mutation(document))
    data = json.dumps(document, ensure_ascii=draw(st.booleans())).encode("utf-8")
    return draw(byte_mutation(data))


GPT2_FIELDS = st.sampled_from([b"", b"a", "Ġ".encode(), b"\xc3", b"\xff", b"ab", "Ġt".encode(), b"x y", b"#version", "é".encode(), b"\x00"]) | st.binary(max_size=3)


def gpt2_files() -> tuple[dict, list[bytes]]:
    model = valid_model()
    vocab = {(token.decode() if token_id in model.special_ids.values() else token_to_text(token)): token_id for token_id, token in model.vocab.items()}
    merges = [b"#version: 0.2"] + [f"{token_to_text(a)} {token_to_text(b)}".encode() for a, b in model.merges]
    return vocab, merges


@st.composite
def gpt2_inputs(draw) -> tuple[bytes, bytes]:
    vocab, merges = gpt2_files()
    vocab_data = json.dumps(vocab, ensure_ascii=False).encode()
    target = draw(st.sampled_from(["vocab", "merges", "both"]))
    if target in ("vocab", "both"):
        if draw(st.booleans()):
            vocab_data = json.dumps(draw(json_mutation(vocab)), ensure_ascii=False).encode()
        vocab_data = draw(byte_mutation(vocab_data))
    if target in ("merges", "both"):
        merges = draw(line_mutation(merges, GPT2_FIELDS))
    merges_data = draw(byte_mutation(b"\n".join(merges) + b"\n")) if target != "vocab" else b"\n".join(merges) + b"\n"
    return vocab_data, merges_data


TIKTOKEN_FIELDS = st.one_of(
    st.sampled_from([b"", b"-1", b"+5", b"2147483648", b"4294967296", b"99999999999999999999999", b"1_0", b"\xef\xbc\x95", b"0", b"256"]),
    st.sampled_from([b"YQ==", b"YWI=", b"YQ", b"Y Q==", b"!!!!", b"====", b"YWJj", b"w6k="]),
    st.integers(0, 300).map(lambda n: str(n).encode()),
    st.binary(max_size=6).map(base64.b64encode),
)


def tiktoken_lines() -> list[bytes]:
    model = valid_model()
    specials = set(model.special_ids.values())
    return [base64.b64encode(token) + b" " + str(token_id).encode() for token_id, token in model.vocab.items() if token_id not in specials]


@st.composite
def tiktoken_inputs(draw) -> bytes:
    lines = tiktoken_lines()
    for _ in range(draw(st.integers(1, 2))):
        lines = draw(line_mutation(lines, TIKTOKEN_FIELDS))
    return draw(byte_mutation(b"\n".join(lines) + b"\n"))


# -- the tests ----------------------------------------------------------------------------------------


def test_the_unspoiled_files_import(store_db, tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps(hf_document()))
    vocab, merges = gpt2_files()
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "merges.txt").write_bytes(b"\n".join(merges) + b"\n")
    (tmp_path / "x.tiktoken").write_bytes(b"\n".join(tiktoken_lines()) + b"\n")
    refused = Outcome.refused
    import_and_check(store_db, "hf", [tmp_path / "tokenizer.json"])
    import_and_check(store_db, "gpt2", [tmp_path / "vocab.json", tmp_path / "merges.txt"], special_tokens=[ENDOFTEXT])
    import_and_check(store_db, "tiktoken", [tmp_path / "x.tiktoken"], pattern=GPT2_PATTERN, special_tokens={ENDOFTEXT: 300})
    assert Outcome.refused == refused


@FUZZ
@given(data=hf_inputs())
def test_fuzzed_tokenizer_json(store_db, tmp_path_factory, data):
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    path.write_bytes(data)
    import_and_check(store_db, "hf", [path])


@FUZZ
@given(files=gpt2_inputs())
def test_fuzzed_gpt2_files(store_db, tmp_path_factory, files):
    directory = tmp_path_factory.mktemp("gpt2")
    paths = [directory / "vocab.json", directory / "merges.txt"]
    for path, data in zip(paths, files):
        path.write_bytes(data)
    import_and_check(store_db, "gpt2", paths, special_tokens=[ENDOFTEXT])


@FUZZ
@given(data=tiktoken_inputs(), special_id=st.sampled_from([300, 263, 2**31 - 1, 2**31]))
def test_fuzzed_tiktoken_file(store_db, tmp_path_factory, data, special_id):
    path = tmp_path_factory.mktemp("tiktoken") / "x.tiktoken"
    path.write_bytes(data)
    import_and_check(store_db, "tiktoken", [path], pattern=GPT2_PATTERN, special_tokens={ENDOFTEXT: special_id})


def cli_import(db: Path, format: str, paths: list[Path], *options: str):
    runner = CliRunner(mix_stderr=False) if "mix_stderr" in CliRunner.__init__.__code__.co_varnames else CliRunner()
    args = ["import", format, *map(str, paths), "--name", "fuzz", "--db", str(db), *options]
    return runner.invoke(main, args, env={"BPESTORE_DEBUG": None})


def assert_cli_outcome(result, db: Path, before: bytes) -> None:
    """Exit 0, or exit 1 with one line on stderr, no traceback, and the store unchanged."""
    if result.exit_code == 0:
        return
    stderr = result.stderr
    assert result.exit_code == 1, (result.exit_code, stderr, result.exception)
    assert stderr.startswith("Error: ") and stderr.count("\n") == 1, stderr
    assert "Traceback" not in stderr and "Internal error" not in stderr
    assert db.read_bytes() == before


@CLI_SAMPLE
@given(hf=hf_inputs(), gpt2=gpt2_inputs(), tiktoken=tiktoken_inputs())
def test_fuzzed_files_through_the_command_line(store_db, tmp_path_factory, hf, gpt2, tiktoken):
    directory = tmp_path_factory.mktemp("cli")
    db = directory / "store.db"
    shutil.copyfile(store_db, db)
    (directory / "tokenizer.json").write_bytes(hf)
    (directory / "vocab.json").write_bytes(gpt2[0])
    (directory / "merges.txt").write_bytes(gpt2[1])
    (directory / "x.tiktoken").write_bytes(tiktoken)
    for format, paths, options in [
        ("hf", [directory / "tokenizer.json"], []),
        ("gpt2", [directory / "vocab.json", directory / "merges.txt"], ["--special-token", ENDOFTEXT]),
        ("tiktoken", [directory / "x.tiktoken"], ["--pattern", "gpt2", "--quiet"]),
    ]:
        before = db.read_bytes()
        assert_cli_outcome(cli_import(db, format, paths, *options), db, before)


def test_the_fuzz_both_accepts_and_refuses():
    # Run last in this module: a fuzz that only ever refused (or only accepted) tests little.
    if Outcome.accepted + Outcome.refused < 100:
        pytest.skip("the fuzz tests did not run in this session")
    assert Outcome.accepted >= 10 and Outcome.refused >= 100, (Outcome.accepted, Outcome.refused)


def read_both(data: bytes) -> tuple[dict[int, bytes] | str, dict[int, bytes] | str]:
    """The engine's reading of a .tiktoken file's contents and the line-by-line reference's: the
    ranks (in order) or the message of the error."""
    from bpestore.engine import read_tiktoken
    from reference import reference_read_tiktoken

    results: list[dict[int, bytes] | str] = []
    for read in (read_tiktoken, lambda data, source: reference_read_tiktoken(source, data)):
        try:
            results.append(read(data, "x.tiktoken"))
        except ValueError as error:
            results.append(str(error))
    return results[0], results[1]


@FUZZ
@given(data=tiktoken_inputs())
def test_the_engine_reads_a_tiktoken_file_as_the_line_by_line_reference(data):
    """The engine's one-pass reading of a .tiktoken file gives exactly the line-by-line
    reference's ranks, in the file's order, and refuses every file it refuses with its message
    (the first line that breaks a rule, and the rule)."""
    engine, reference = read_both(data)
    assert engine == reference
    if isinstance(engine, dict):
        assert list(engine) == list(reference)


TIKTOKEN_BYTES = b"YQWIab019+/=-\n\r\t \x0b\x0c\x1c\x85\xef"
# The 256 single bytes at ranks of their own, before a file's own lines (without them every
# file would be refused for lacking them).
ALL_BYTES = b"".join(base64.b64encode(bytes([byte])) + b" %d\n" % (1000 + byte) for byte in range(256))


@FUZZ
@given(
    data=st.binary(max_size=40) | st.lists(st.sampled_from(TIKTOKEN_BYTES), max_size=40).map(bytes),
    all_bytes=st.booleans(),
)
def test_short_byte_strings_read_as_the_line_by_line_reference(data, all_bytes):
    """Base64's corners (padding, lengths, other characters) and every kind of line break and
    space, in few bytes: the same tokens or the same message."""
    engine, reference = read_both(ALL_BYTES + data if all_bytes else data)
    assert engine == reference
    if isinstance(engine, dict):
        assert list(engine) == list(reference)


@pytest.mark.parametrize(
    "data",
    [
        b"YQ== 0\nYQ== 1\n",  # a token twice
        b"YWI= 0\n",  # (accepted, with all the bytes)
        b"YQ== 0\nYg== 0\n",  # a rank twice
        b"YQ== 0\nYQ== 0\n!! 1\n",  # a token twice before a malformed line
        b"YQ== 0\n!! 1\nYQ== 2\n",  # a malformed line before a token twice
        b"YQ== -0\n", b"YQ== -007\n", b"YQ== 0002147483648\n", b"YQ== 99999999999999999999999\n",
        b"YQ== 1_0\n", b"YQ== \xef\xbc\x95\n", b"YWJj= 1\n", b"YQ=a 1\n", b"YQ===YQ 1\n", b"=YQ= 1\n",
        b"\n \t\n", b"", b"YQ== 1 2\n", b"YQ==\n", b"YQ== 1\r\nYg== 2\rYw== 3\n", b"YQ==\x0b1\x0c\n",
        b"YQ==\x1c1\n", b"YQ==\x851\n",
    ],
)
def test_tiktoken_corners_read_as_the_line_by_line_reference(data):
    for whole in (data, ALL_BYTES + data):
        engine, reference = read_both(whole)
        assert engine == reference
