"""Bad input to the formats, to ``BPEModel`` and to pre-tokenizer patterns (issue 13, section 4).

Each file here is a small valid tokenizer written by bpestore's own exporters, then spoiled in one
way; the test names the way. Every refusal must be a FormatError (or, for a BPEModel built in
Python, a ValueError) whose one-line message names the file and what is wrong; every acceptance
must give a tokenizer that encodes like bpestore's reference. The random mutations are in
test_formats_fuzz.py.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from bpestore import BPEModel, Store, Tokenizer, formats
from bpestore.errors import FormatError
from bpestore.formats.gpt2 import token_to_text
from bpestore.pretokenize import GPT2_PATTERN
from gpt2_tiktoken import ENDOFTEXT
from reference import reference_encode

BYTES = {i: bytes([i]) for i in range(256)}
MERGES = [(b"a", b"b"), (b"ab", b"c"), (b" ", b"t"), (b"h", b"e"), (b" t", b"he")]
TEXT = f"the abc  then{ENDOFTEXT} abcab\n"


def small_model(pattern: str = GPT2_PATTERN) -> BPEModel:
    vocab = dict(BYTES)
    for left, right in MERGES:
        vocab[len(vocab)] = left + right
    return BPEModel(vocab, MERGES, [ENDOFTEXT], pattern=pattern)


def assert_encodes_like_reference(model: BPEModel, text: str = TEXT) -> None:
    tokenizer = Tokenizer.from_model(model)
    expected = reference_encode(text, model.vocab, model.merges, model.special_tokens, model.pattern)
    assert tokenizer.encode(text) == expected
    assert tokenizer.decode(expected) == text


# -- writing valid files, then spoiling them ------------------------------------------------------


def _hf_json() -> dict:
    from bpestore.formats.hf import tokenizer_json

    model = small_model()
    return tokenizer_json(model.vocab, model.merges, model.special_ids, model.pattern)


def write_hf(tmp_path: Path, document: dict) -> Path:
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def read_hf(tmp_path: Path, document: dict):
    return formats.read("hf", write_hf(tmp_path, document))


def write_gpt2(tmp_path: Path, vocab: dict | bytes, merges: str | bytes) -> tuple[Path, Path]:
    vocab_path, merges_path = tmp_path / "vocab.json", tmp_path / "merges.txt"
    vocab_path.write_bytes(vocab if isinstance(vocab, bytes) else json.dumps(vocab, ensure_ascii=False).encode())
    merges_path.write_bytes(merges if isinstance(merges, bytes) else merges.encode())
    return vocab_path, merges_path


def gpt2_vocab() -> dict[str, int]:
    return {token_to_text(token) if token != ENDOFTEXT.encode() else ENDOFTEXT: token_id for token_id, token in small_model().vocab.items()}


def gpt2_merges(merges=MERGES) -> str:
    return "#version: 0.2\n" + "".join(f"{token_to_text(a)} {token_to_text(b)}\n" for a, b in merges)


def tiktoken_lines(ranks: dict[bytes, int]) -> bytes:
    return b"".join(base64.b64encode(token) + b" " + str(rank).encode() + b"\n" for token, rank in ranks.items())


def tiktoken_ranks() -> dict[bytes, int]:
    model = small_model()
    return {token: token_id for token_id, token in model.vocab.items() if token_id not in model.special_ids.values()}


def assert_refused(call, *names: str) -> str:
    """``call()`` raises a FormatError whose one-line message has each of ``names``."""
    with pytest.raises(FormatError) as error:
        call()
    message = str(error.value)
    assert "\n" not in message
    for name in names:
        assert name in message, (name, message)
    return message


# -- ids out of range -----------------------------------------------------------------------------


@pytest.mark.parametrize("bad_id", [2**31, 2**32, 2**32 + 5, 2**64, -1, -7])
def test_ids_out_of_range_in_tokenizer_json(tmp_path, bad_id):
    document = _hf_json()
    document["model"]["vocab"][token_to_text(b" the")] = bad_id
    path = write_hf(tmp_path, document)
    assert_refused(lambda: formats.read("hf", path), str(path), str(bad_id), "Ġthe")


@pytest.mark.parametrize("bad_id", [2**31, 2**40])
def test_ids_out_of_range_in_added_tokens(tmp_path, bad_id):
    document = _hf_json()
    document["added_tokens"][0]["id"] = bad_id
    document["model"]["vocab"][ENDOFTEXT] = bad_id
    path = write_hf(tmp_path, document)
    assert_refused(lambda: formats.read("hf", path), str(path), str(bad_id))


@pytest.mark.parametrize("bad_id", [2**31, 2**33, -3])
def test_ids_out_of_range_in_gpt2_vocab(tmp_path, bad_id):
    paths = write_gpt2(tmp_path, gpt2_vocab() | {"abc": bad_id}, gpt2_merges())
    assert_refused(lambda: formats.read("gpt2", *paths, special_tokens=[ENDOFTEXT]), str(paths[0]), str(bad_id))


@pytest.mark.parametrize("bad_rank", [2**31, 2**70])
def test_ranks_out_of_range_in_tiktoken_file(tmp_path, bad_rank):
    path = tmp_path / "x.tiktoken"
    path.write_bytes(tiktoken_lines(tiktoken_ranks() | {b"abc": bad_rank}))
    assert_refused(lambda: formats.read("tiktoken", path, "gpt2"), str(path), str(bad_rank))


def test_special_token_id_out_of_range_for_tiktoken(tmp_path):
    path = tmp_path / "x.tiktoken"
    path.write_bytes(tiktoken_lines(tiktoken_ranks()))
    assert_refused(lambda: formats.read("tiktoken", path, "gpt2", {ENDOFTEXT: 2**31}), str(path), str(2**31))


def test_bpemodel_refuses_ids_from_two_to_the_31():
    with pytest.raises(ValueError, match=str(2**31)):
        BPEModel(BYTES | {2**31: b"ab"}, [])
    # The largest id allowed works, and a special token after it has no id left.
    model = BPEModel(BYTES | {2**31 - 1: b"ab"}, [(b"a", b"b")])
    assert Tokenizer.from_model(model).encode("ab") == [2**31 - 1]
    with pytest.raises(ValueError, match="no id is left"):
        BPEModel(BYTES | {2**31 - 1: b"ab"}, [(b"a", b"b")], [ENDOFTEXT])


@pytest.mark.parametrize("big_id", [0x110000, 0x10FFFF + 12345, 2**31 - 1])
def test_ids_beyond_unicode_round_trip_through_the_store(tmp_path, big_id):
    # ids are numbers, not characters: ids past 0x10FFFF import, store, load, encode and decode.
    vocab = gpt2_vocab()
    vocab["abc"] = big_id
    paths = write_gpt2(tmp_path, vocab, gpt2_merges())
    imported = formats.read("gpt2", *paths, special_tokens=[ENDOFTEXT])
    with Store(tmp_path / "store.db") as store:
        ref = store.save("big", imported.model)
        tokenizer = store.load(ref)
    ids = tokenizer.encode("xabc abc")
    assert big_id in ids and tokenizer.decode(ids) == "xabc abc"
    assert ids == reference_encode("xabc abc", imported.model.vocab, imported.model.merges, [ENDOFTEXT])


# -- malformed tokenizer.json ---------------------------------------------------------------------


def _set(path: tuple, value):
    def mutate(document):
        target = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


def _delete(path: tuple):
    def mutate(document):
        target = document
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return mutate


MALFORMED_HF = {
    "normalizer is a string": (_set(("normalizer",), "NFC"), "NFC"),
    "normalizer of an unknown type": (_set(("normalizer",), {"type": "NFKCX"}), "NFKCX"),
    "normalizer without a type": (_set(("normalizer",), {"form": "NFKC"}), "normalizer"),
    "vocab is null": (_set(("model", "vocab"), None), "vocab"),
    "vocab is an array": (_set(("model", "vocab"), [["a", 1]]), "vocab"),
    "merges is null": (_set(("model", "merges"), None), "merges"),
    "merges is an object": (_set(("model", "merges"), {"a": "b"}), "merges"),
    "added token id is null": (_set(("added_tokens", 0, "id"), None), "id"),
    "added token id is missing": (_delete(("added_tokens", 0, "id")), "id"),
    "added token id is a string": (_set(("added_tokens", 0, "id"), "261"), "id"),
    "added token id is a float": (_set(("added_tokens", 0, "id"), 261.0), "id"),
    "added token content is null": (_set(("added_tokens", 0, "content"), None), "content"),
    "added token content is missing": (_delete(("added_tokens", 0, "content")), "content"),
    "added token content is empty": (_set(("added_tokens", 0, "content"), ""), "content"),
    "added token is a string": (_set(("added_tokens", 0), ENDOFTEXT), "added token 0"),
    "added_tokens is an object": (_set(("added_tokens",), {"id": 1}), "added_tokens"),
    "vocab id is a boolean": (_set(("model", "vocab", "a"), True), "true"),
    "vocab id is a float": (_set(("model", "vocab", "a"), 97.0), "97.0"),
    "vocab id is negative": (_set(("model", "vocab", "Ġt"), -7), "-7"),
    "pre_tokenizer is a string": (_set(("pre_tokenizer",), "ByteLevel"), "pre_tokenizer"),
    "Split pattern is a string": (
        _set(("pre_tokenizer",), {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": "x"}, {"type": "ByteLevel"}]}),
        "Split",
    ),
    "pretokenizers holds null": (_set(("pre_tokenizer",), {"type": "Sequence", "pretokenizers": [None]}), "pretokenizers"),
    "model is an array": (_set(("model",), []), "model"),
    "two tokens share an id": (_set(("model", "vocab", "Ġt"), 97), "97"),
}


@pytest.mark.parametrize("case", MALFORMED_HF, ids=list(MALFORMED_HF))
def test_malformed_tokenizer_json(tmp_path, case):
    mutate, named = MALFORMED_HF[case]
    document = _hf_json()
    mutate(document)
    path = write_hf(tmp_path, document)
    assert_refused(lambda: formats.read("hf", path), str(path), named)


def test_negative_id_does_not_decode_as_another_token(tmp_path):
    # Once accepted, "Ġt": -7 decoded as the token at -7 from the end (<|endoftext|>).
    document = _hf_json()
    document["model"]["vocab"]["Ġt"] = -7
    assert_refused(lambda: read_hf(tmp_path, document), "-7")


def test_a_boolean_is_no_token_id():
    """True is an int to Python, not a token id: decode refuses it as decode_single_token_bytes
    does (it decoded as id 1), while NumPy's integers stay ids."""
    import numpy as np

    tokenizer = Tokenizer.from_model(small_model())
    for ids in ([True], [0, False], (1, True)):
        with pytest.raises(TypeError, match="token ids must be integers, got (True|False)"):
            tokenizer.decode_bytes(list(ids))
    with pytest.raises(TypeError):
        tokenizer.decode_single_token_bytes(True)  # type: ignore[arg-type]
    h, i = tokenizer.encode("h") + tokenizer.encode("i")
    assert tokenizer.decode_bytes([np.int64(h), np.uint16(i), h]) == b"hih"


# -- merges ---------------------------------------------------------------------------------------


def test_duplicate_merges_are_refused(tmp_path):
    # GPT-2's encoder.py and Hugging Face (tokenizers 0.23) silently rank a repeated merge by its
    # last place; bpestore ranked it by its first. Neither is what the file's author meant: refused.
    repeated = MERGES[:3] + [MERGES[0]] + MERGES[3:]
    paths = write_gpt2(tmp_path, gpt2_vocab(), gpt2_merges(repeated))
    assert_refused(lambda: formats.read("gpt2", *paths, special_tokens=[ENDOFTEXT]), str(paths[1]), "merge 3", "merge 0")
    document = _hf_json()
    document["model"]["merges"].append(document["model"]["merges"][1])
    assert_refused(lambda: read_hf(tmp_path, document), "merge 5", "merge 1")
    with pytest.raises(ValueError, match="repeats merge 0"):
        BPEModel(small_model().vocab, repeated)


@pytest.mark.parametrize("kept", [0, 2])
def test_empty_or_truncated_merges_say_how_many_tokens_no_merge_reaches(tmp_path, kept):
    paths = write_gpt2(tmp_path, gpt2_vocab(), gpt2_merges(MERGES[:kept]) if kept else "")
    imported = formats.read("gpt2", *paths, special_tokens=[ENDOFTEXT])
    unreached = len(MERGES) - kept
    assert [note for note in imported.notes if f"{unreached} of the vocab's" in note and str(paths[1]) in note]
    assert_encodes_like_reference(imported.model)
    complete = formats.read("gpt2", *write_gpt2(tmp_path, gpt2_vocab(), gpt2_merges()), special_tokens=[ENDOFTEXT])
    assert complete.notes == []


def test_cli_import_of_truncated_merges_warns(tmp_path):
    from click.testing import CliRunner

    from bpestore.cli import main

    paths = write_gpt2(tmp_path, gpt2_vocab(), gpt2_merges(MERGES[:1]))
    args = ["import", "gpt2", *map(str, paths), "--name", "cut", "--special-token", ENDOFTEXT, "--db", str(tmp_path / "s.db")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0
    assert f"{len(MERGES) - 1} of the vocab's" in result.output


# -- text encodings ---------------------------------------------------------------------------------


def test_invalid_utf8_in_gpt2_files_names_the_file(tmp_path):
    vocab_bytes = json.dumps(gpt2_vocab(), ensure_ascii=False).encode()
    spoiled = vocab_bytes[:100] + b"\xff" + vocab_bytes[100:]
    paths = write_gpt2(tmp_path, spoiled, gpt2_merges())
    assert_refused(lambda: formats.read("gpt2", *paths, special_tokens=[ENDOFTEXT]), str(paths[0]), "not UTF-8", "offset 100")
    merges_bytes = gpt2_merges().encode()
    paths = write_gpt2(tmp_path, gpt2_vocab(), merges_bytes + b"\xc3\n")
    assert_refused(lambda: formats.read("gpt2", *paths, special_tokens=[ENDOFTEXT]), str(paths[1]), "not UTF-8", f"line {len(MERGES) + 2}")


def test_invalid_utf8_in_tokenizer_json_names_the_file(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(json.dumps(_hf_json()).encode()[:50] + b"\xe2\x82")
    assert_refused(lambda: formats.read("hf", path), str(path), "UTF-8")


# -- special tokens that are already tokens -----------------------------------------------------------


def test_special_token_that_is_already_a_token_takes_its_id(tmp_path):
    # Decided: one token, one id. Hugging Face agrees for "!" and "ab" (its vocab spells them the
    # same way) and adds new ids for " " and "\n" (spelled "Ġ", "Ċ" there); bpestore reuses them too.
    vocab = small_model().vocab
    model = BPEModel(vocab, MERGES, ["!", " ", "\n", "ab"])
    ab_id = next(token_id for token_id, token in vocab.items() if token == b"ab")
    assert model.special_ids == {"!": 33, " ": 32, "\n": 10, "ab": ab_id}
    assert model.vocab == vocab  # no id added
    text = "x!y abc\nab"
    assert_encodes_like_reference(model, text)
    tokenizers = pytest.importorskip("tokenizers")
    formats.export(model, "hf", tmp_path / "t.json")
    loaded = tokenizers.Tokenizer.from_file(str(tmp_path / "t.json"))
    assert loaded.encode(text).ids == Tokenizer.from_model(model).encode(text)
    assert loaded.decode(loaded.encode(text).ids, skip_special_tokens=False) == text
    again = formats.read("hf", tmp_path / "t.json").model
    assert (again.vocab, again.merges, again.special_ids) == (model.vocab, model.merges, model.special_ids)


# -- patterns -----------------------------------------------------------------------------------------

CAPTURING = [r"(\w+)|\s+|.", r"(?:a)(b)|\s|.", r"(?P<w>\p{L}+)| ?\p{N}+|\s+|."]
CATASTROPHIC = [r"(?:a|a)+(?=$)|\s+|.", r"(?:\w+\s?)+(?=\.)|\s+|.", r"(?:a|aa)+(?=b)|."]


@pytest.mark.parametrize("pattern", CAPTURING)
def test_capture_groups_are_refused_everywhere(tmp_path, pattern):
    # Decided: refused, at construction and at a tiktoken import. (With groups, regex.findall keeps
    # only the groups: one group silently dropped text; tiktoken and tokenizers take whole matches.)
    with pytest.raises(ValueError, match="capture group.*\\(\\?:\\.\\.\\.\\)"):
        small_model(pattern)
    with pytest.raises(ValueError, match="capture group"):
        Tokenizer(small_model().vocab, MERGES, [ENDOFTEXT], pattern=pattern)
    document = _hf_json()
    document["pre_tokenizer"] = {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ],
    }
    # A tokenizer.json's Split has one meaning whatever its groups: Hugging Face takes whole
    # matches, and so does bpestore, running such a Split as it is.
    tokenizers = pytest.importorskip("tokenizers")
    imported = read_hf(tmp_path, document)
    assert imported.model.pre_tokenizer is not None
    try:
        reference = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    except Exception:  # (Oniguruma has no Python-style named groups: HF cannot read this file)
        return
    for text in ["low lower newest", "a  b\n\tc", "x,y;z"]:
        assert Tokenizer.from_model(imported.model).encode(text) == reference.encode(text, add_special_tokens=False).ids
    path = tmp_path / "x.tiktoken"
    path.write_bytes(tiktoken_lines(tiktoken_ranks()))
    assert_refused(lambda: formats.read("tiktoken", path, pattern), "capture group")


def test_the_same_patterns_without_groups_work():
    for pattern in CAPTURING:
        plain = pattern.replace("(?P<w>", "(?:").replace("(\\w", "(?:\\w").replace("(b)", "(?:b)")
        assert_encodes_like_reference(small_model(plain))


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_patterns_are_refused_at_construction(tmp_path, pattern):
    # Once accepted: each encode of a long enough word backtracked for seconds, then panicked.
    with pytest.raises(ValueError, match="backtracks catastrophically"):
        small_model(pattern)
    with pytest.raises(ValueError, match="backtracks catastrophically"):
        Tokenizer(small_model().vocab, MERGES, [ENDOFTEXT], pattern=pattern)
    path = tmp_path / "x.tiktoken"
    path.write_bytes(tiktoken_lines(tiktoken_ranks()))
    assert_refused(lambda: formats.read("tiktoken", path, pattern), str(path), "backtracks catastrophically")


def test_nothing_is_stored_when_an_import_is_refused(tmp_path):
    db = tmp_path / "store.db"
    with Store(db) as store:
        store.save("keep", small_model())
    before = db.read_bytes()
    document = _hf_json()
    document["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": CAPTURING[0]}, "behavior": "Sideways", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False},
    ]}
    from bpestore.workflow import import_into_store

    with pytest.raises(FormatError):
        import_into_store(db, "bad", "hf", write_hf(tmp_path, document))
    assert db.read_bytes() == before


# -- a pattern whose matches do not cover all of the text: refused, never silent loss -------------

# Each leaves some character to no match (text, punctuation, digits, a zero-width match is no
# pre-token): once accepted, encoding silently dropped those characters.
NOT_TILING = ["", "(?=a)", r"\w+", r"[a-z]+|\s+"]


@pytest.mark.parametrize("pattern", NOT_TILING)
def test_patterns_that_leave_characters_out_are_refused_where_they_would_lose_text(tmp_path, pattern):
    message = "does not cover all of the text (no match covers "
    with pytest.raises(ValueError, match=re.escape(f"pre-tokenizer pattern {json.dumps(pattern)} {message}")):
        small_model(pattern)
    with pytest.raises(ValueError, match=re.escape(message)):
        Tokenizer(small_model().vocab, MERGES, [ENDOFTEXT], pattern=pattern)
    document = _hf_json()
    document["pre_tokenizer"] = {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ],
    }
    # In a tokenizer.json the Split has Hugging Face's meaning: the stretches no match covers are
    # pieces of their own, and bpestore runs the Split so (nothing is lost).
    tokenizers = pytest.importorskip("tokenizers")
    imported = read_hf(tmp_path, document)
    reference = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for text in ["low lower newest", "a  b\n\tc", "x,y;z"]:
        ids = Tokenizer.from_model(imported.model).encode(text)
        assert ids == reference.encode(text, add_special_tokens=False).ids
        assert Tokenizer.from_model(imported.model).decode(ids) == text
    path = tmp_path / "x.tiktoken"
    path.write_bytes(tiktoken_lines(tiktoken_ranks()))
    assert_refused(lambda: formats.read("tiktoken", path, pattern), str(path), message)


def test_a_stored_pattern_that_leaves_characters_out_is_one_line_from_the_command_line(tmp_path):
    """A store whose pattern was changed behind bpestore's back (raw SQL) is not used to drop
    text: encoding from the command line fails with one line naming the pattern and a character
    it leaves out (one the probes find when the tokenizer is loaded, or one they do not, found at
    its byte offset while encoding), and writes nothing."""
    import sqlite3

    from test_cli import assert_user_error, invoke

    db = tmp_path / "s.db"
    with Store(db) as store:
        store.save("t", BPEModel(BYTES, [], [ENDOFTEXT], pattern=r"\S+|\s+"))
    corpus = tmp_path / "c.txt"
    corpus.write_text("abc 123 \u2801\n", encoding="utf-8")
    found = {
        r"[a-z]+|\s+": ["does not cover all of the text (no match covers 'H' (U+0048) in \"Hello, World!"] * 2,
        r"[^\s\p{Braille}]+|\s": [
            f"does not cover all of the text (no match covers '\u2801' (U+2801) at byte 8 of the {where})"
            for where in ("stream", "file")
        ],
    }
    for pattern, messages in found.items():
        with sqlite3.connect(db) as connection:  # the tokenizers row only: the packed copy stays valid
            connection.execute("UPDATE tokenizers SET pattern = ? WHERE name = 't'", (pattern,))
        connection.close()
        for output, message in zip(("ids.txt", "ids.npy"), messages):
            result = invoke("encode", "t", corpus, "--output", tmp_path / output, "--db", db)
            said = assert_user_error(result, f"pre-tokenizer pattern {json.dumps(pattern)} {message}")
            if "Hello" in message:  # refused as the tokenizer is loaded: which one is named
                assert said.startswith(f"Error: {db}: t@1 is damaged: tokenizers.pattern (its row) cannot be used: "), said
        assert sorted(path.name for path in tmp_path.iterdir()) == ["c.txt", "s.db"]


def test_a_pattern_too_big_to_compile_is_refused_at_once(tmp_path):
    """``a{99999999}``: once, ``bpestore import tiktoken --pattern`` compiled it with Python's
    ``regex`` module, which did not return within a minute. Now the engine refuses it at once.

    The command runs first, in a process of its own with a hang timeout (60 s, the old hang's
    length: a guard against hanging, not a speed threshold); the library calls run after it."""
    import subprocess
    import sys

    pattern = "a{99999999}"
    too_big = f"pre-tokenizer pattern {json.dumps(pattern)} is too big to compile (over 10 MB)"
    path = tmp_path / "x.tiktoken"
    path.write_bytes(tiktoken_lines(tiktoken_ranks()))
    result = subprocess.run(
        [sys.executable, "-m", "bpestore.cli", "import", "tiktoken", str(path), "--name", "x", "--pattern", pattern, "-q", "--db", str(tmp_path / "s.db")],
        capture_output=True, text=True, timeout=60,
    )
    said = result.stderr.strip()
    assert result.returncode == 1 and "\n" not in said and result.stdout == "", result
    for needle in (str(path), f"--pattern {pattern!r} is not a known", too_big):
        assert needle in said, (needle, said)
    with pytest.raises(ValueError, match=re.escape(too_big)):
        small_model(pattern)
    assert_refused(lambda: formats.read("tiktoken", path, pattern), str(path), too_big)


# -- a custom pattern that passes the probes but fails on some text: PatternError everywhere -------


@dataclass(frozen=True)
class Failing:
    """A custom pattern that passes the probes at construction, a text on which it fails at byte 2,
    and what the PatternError says of that failure (``{offset}``, ``{where}`` to fill in)."""

    name: str
    pattern: str
    text: str
    says: str

    def at(self, offset: int, where: str) -> str:
        return self.says.format(offset=offset, where=where)


FAILING = [
    # Exponential on a run of "ab" that no "c" ends, yet fine on the construction probes (runs of
    # one character); the look-ahead keeps it on the backtracking engine. A hit costs 10^8 steps.
    Failing(
        "backtracking",
        r"(?:a(?=b)b|a(?=b)b)+c|[\s\S]",
        "xy" + "ab" * 26 + "d",
        "backtracks catastrophically (it gave up on the match at byte {offset} of {where})",
    ),
    # Covers every probe (they hold no Braille, and the pattern names none), not U+2801: before,
    # encoding dropped it.
    Failing(
        "uncovered",
        r"[^\s\p{Braille}]+|\s",
        "xy\u2801d",
        "does not cover all of the text (no match covers '\u2801' (U+2801) at byte {offset} of {where})",
    ),
]
# Each case once per test; the backtracking one is slow (it runs the regex engine to its limit,
# 10-30 s a test here): it is left to the full suite.
FAILING_CASES = [pytest.param(failing, id=failing.name, marks=[pytest.mark.slow] if failing.name == "backtracking" else []) for failing in FAILING]


@pytest.mark.slow  # (the backtracking pattern run to its limit)
def test_the_failing_patterns_pass_the_probes_and_fail_only_on_their_text():
    from bpestore import _engine
    from bpestore.errors import PatternError

    for failing in FAILING:
        pretokenizer = _engine.Pretokenizer(failing.pattern, [ENDOFTEXT])
        assert "".join(pretokenizer.pretokenize("ab c\n" + ENDOFTEXT + "d")) == "ab c\n" + ENDOFTEXT + "d"
        with pytest.raises(PatternError, match=re.escape(failing.at(2, f"a text of {len(failing.text.encode())} bytes"))):
            pretokenizer.pretokenize(failing.text)


@pytest.mark.parametrize("failing", FAILING_CASES)
def test_counting_with_a_pattern_that_fails_on_the_text_is_a_pattern_error(tmp_path, failing):
    """Counting (continued training from a base with such a pattern, or a file counted by the
    engine) ends in one PatternError naming the pattern and the byte offset in the file, never a
    PanicException nor counts without the text; nothing is stored."""
    from bpestore import _engine
    from bpestore.errors import PatternError

    with pytest.raises(PatternError, match=re.escape("text 1: pre-tokenizer pattern ")) as raised:
        _engine.count_texts(["fine", failing.text], failing.pattern, [])
    assert failing.at(2, f"a text of {len(failing.text.encode())} bytes") in str(raised.value)
    corpus = tmp_path / "c.txt"
    corpus.write_text("abc " * 100 + ENDOFTEXT + failing.text)
    offset = 400 + len(ENDOFTEXT) + 2
    with Store(tmp_path / "s.db") as store:
        store.save("b", BPEModel(BYTES, [], [ENDOFTEXT], pattern=failing.pattern))
        with pytest.raises(PatternError) as raised:
            store.train(corpus, "c", 300, base="b")
        assert store.refs() == ["b@1"]
    assert str(raised.value).startswith(f"{corpus}: pre-tokenizer pattern {json.dumps(failing.pattern)}")
    assert failing.at(offset, "the corpus") in str(raised.value)
    with pytest.raises(PatternError, match=re.escape(f"{corpus}: pre-tokenizer pattern {json.dumps(failing.pattern)}")) as raised:
        _engine.count_file(corpus, failing.pattern, [ENDOFTEXT], 2, chunk_bytes=64)
    assert failing.at(offset, "the corpus") in str(raised.value)


@pytest.mark.parametrize("failing", FAILING_CASES)
def test_encoding_with_a_pattern_that_fails_on_the_text_is_a_pattern_error(failing):
    """Every way of encoding ends in one PatternError naming the pattern and the byte offset of the
    failure (where the match that gave up started, or the character no match covers), in what was
    given (the text, text I of a batch, the stream), never a PanicException nor ids without that
    text; the tokenizer still works afterwards. (Backtracking: ten hits of the limit, seconds.)"""
    from bpestore.errors import PatternError

    tokenizer = Tokenizer.from_model(BPEModel(BYTES, [], [ENDOFTEXT], pattern=failing.pattern))
    text = "abc" + ENDOFTEXT + failing.text
    offset = text.index("xy") + 2  # in bytes: the text before it is ASCII
    size = len(text.encode())
    in_text = failing.at(offset, f"a text of {size} bytes")
    with pytest.raises(PatternError) as raised:
        tokenizer.encode(text)
    assert str(raised.value).startswith(f"pre-tokenizer pattern {json.dumps(failing.pattern)} ")
    assert in_text in str(raised.value) and "\n" not in str(raised.value)
    for encode in (tokenizer.encode_with_offsets, tokenizer.encode_to_array):
        with pytest.raises(PatternError, match=re.escape(in_text)):
            encode(text)
    with pytest.raises(PatternError, match=re.escape(failing.at(offset - len(ENDOFTEXT), f"a text of {size - len(ENDOFTEXT)} bytes"))):
        tokenizer.encode_ordinary(text.replace(ENDOFTEXT, ""))
    # On two threads, the bad text not the first: the message names it.
    batch = ["fine", "abc " * 50, text, "more"]
    with pytest.raises(PatternError, match=re.escape(f"text 2: pre-tokenizer pattern {json.dumps(failing.pattern)}")) as raised:
        tokenizer.encode_batch(batch, num_threads=2)
    assert in_text in str(raised.value)
    # A stream fed in pieces: the offset in the whole stream.
    head = ("abc " * 30 + ENDOFTEXT) * 100
    pieces = [head[i : i + 7] for i in range(0, len(head), 7)] + [text, "abc"]
    in_stream = failing.at(len(head) + offset, "the stream")
    with pytest.raises(PatternError, match=re.escape(in_stream)):
        list(tokenizer.encode_iterable(pieces))
    with pytest.raises(PatternError, match=re.escape(in_stream)):
        list(tokenizer.encode_blocks(pieces, 64))
    assert tokenizer.encode("abcd" + ENDOFTEXT) == [97, 98, 99, 100, 256]
    assert tokenizer.encode_batch(batch[:2] + batch[3:], num_threads=2) == [tokenizer.encode(t) for t in batch[:2] + batch[3:]]


@pytest.mark.parametrize("failing", FAILING_CASES)
def test_encoding_a_file_with_a_pattern_that_fails_on_the_text_leaves_nothing(tmp_path, failing):
    """A file encoded on two threads, the bad text far past the first chunk: one PatternError
    naming the file and the byte offset in it, and no output, partial or whole; the command line
    prints one line for it. Then a good file is encoded as the text is."""
    from bpestore.errors import PatternError
    from bpestore.workflow import encode_to
    from test_cli import assert_user_error, invoke

    tokenizer = Tokenizer.from_model(BPEModel(BYTES, [], [ENDOFTEXT], pattern=failing.pattern))
    head = ("abc " * 30 + ENDOFTEXT) * 3000  # 400 kB, cut into chunks at the special tokens
    corpus = tmp_path / "c.txt"
    corpus.write_text(head + failing.text + ENDOFTEXT + "abc", encoding="utf-8")
    offset = len(head) + 2
    with pytest.raises(PatternError) as raised:
        encode_to(tokenizer, corpus, tmp_path / "ids.npy", workers=2)
    assert str(raised.value).startswith(f"{corpus}: pre-tokenizer pattern {json.dumps(failing.pattern)} ")
    assert failing.at(offset, "the file") in str(raised.value)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["c.txt"]
    # The command line, writing text ids (a stream, then an atomic rename): one line, no file.
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.save("b", tokenizer.model)
    result = invoke("encode", "b", corpus, "--output", tmp_path / "ids.txt", "--db", db)
    message = assert_user_error(result, failing.at(offset, "the stream"))
    assert message.startswith(f"Error: {corpus}: pre-tokenizer pattern ")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["c.txt", "s.db"]
    good = tmp_path / "good.txt"
    good.write_text(head, encoding="utf-8")
    assert encode_to(tokenizer, good, tmp_path / "ids.npy", workers=2) == len(tokenizer.encode(head))
    assert np.load(tmp_path / "ids.npy").tolist() == tokenizer.encode(head)
