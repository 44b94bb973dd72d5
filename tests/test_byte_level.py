"""Decoding tokens written in GPT-2's byte-to-unicode alphabet, many at once (the readers of
``vocab.json``, ``merges.txt`` and ``tokenizer.json`` take this way first), against the decoding of
one character at a time: the same bytes whenever every character is in the alphabet, and None (the
readers then go one token at a time and name the problem) whenever one is not."""

from __future__ import annotations

import gc
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bpestore import FormatError, formats
from bpestore.collector import collector_paused
from bpestore.engine import byte_level_vocab_json
from bpestore.formats.gpt2 import (
    byte_level_bytes, byte_level_many, byte_level_merges, byte_to_unicode, read_merges, read_vocab, text_to_token, token_to_text,
    unicode_to_byte,
)

ALPHABET = "".join(byte_to_unicode().values())
# characters near the alphabet's that are not in it: the ASCII and Latin-1 ones GPT-2 writes
# otherwise (space, controls, the soft hyphen), the first after its last (U+0144), and far ones
FOREIGN = "".join(chr(code) for code in [*range(0, 0x21), *range(0x7F, 0xA1), 0xAD]) + "\u0144\u2581\U0001f600\uffff"

tokens = st.binary(min_size=1, max_size=12)
foreign_texts = st.builds(
    lambda before, foreign, after: before + foreign + after,
    st.text(ALPHABET, max_size=6), st.sampled_from(FOREIGN), st.text(ALPHABET, max_size=6),
)


def one_at_a_time(text: str) -> bytes | None:
    """The reference: a character at a time through the alphabet's table."""
    table = unicode_to_byte()
    return bytes(table[c] for c in text) if all(c in table for c in text) else None


@given(st.lists(tokens, max_size=40))
def test_many_tokens_decode_as_one_at_a_time(spelt):
    texts = [token_to_text(token) for token in spelt]
    assert byte_level_many(texts) == spelt
    assert [byte_level_bytes(text) for text in texts] == [one_at_a_time(text) for text in texts] == spelt


@given(st.lists(st.text(ALPHABET, min_size=1, max_size=8), max_size=10), foreign_texts, st.integers(0, 10))
def test_one_foreign_character_anywhere_is_none(texts, foreign, at):
    texts.insert(min(at, len(texts)), foreign)
    assert one_at_a_time(foreign) is None
    assert byte_level_bytes(foreign) is None
    assert byte_level_many(texts) is None
    with pytest.raises(ValueError, match="is not in GPT-2's byte-to-unicode alphabet"):
        text_to_token(foreign)


@given(st.lists(st.tuples(tokens, tokens), max_size=30))
def test_merges_decode_as_one_at_a_time(merges):
    lines = [f"{token_to_text(left)} {token_to_text(right)}" for left, right in merges]
    assert byte_level_merges(lines) == merges
    assert byte_level_merges(iter(lines)) == merges  # (any iterable of strings)


@pytest.mark.parametrize("item", [None, b"ab", 1, ["a", "b"], "\ud800"])
def test_what_is_not_a_byte_level_string_is_none(item):
    assert byte_level_many(["Ġ", item]) is None
    assert byte_level_merges(["Ġ t", item]) is None


@pytest.mark.parametrize("line", ["ab", "a  b", "a b c", " ab", "ab ", "", "a\tb", "a b\r", "a \u2581"])
def test_a_line_that_is_not_one_merge_is_none(line):
    assert byte_level_merges(["Ġ t", line, "h e"]) is None


def write(path, text):
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.mark.parametrize("text, expected", [
    ("#version: 0.2\nĠ t\nh e\n", [(b" ", b"t"), (b"h", b"e")]),
    ("Ġ t\nh e", [(b" ", b"t"), (b"h", b"e")]),
    ("#version: 0.2\r\nĠ t\r\nh e\r\n", [(b" ", b"t"), (b"h", b"e")]),  # (the way one at a time)
    ("Ġ t\n\n  \nh e\n", [(b" ", b"t"), (b"h", b"e")]),
    ("", []),
])
def test_merges_files_read_the_same_either_way(tmp_path, text, expected):
    assert read_merges(write(tmp_path / "merges.txt", text)) == expected


def test_a_bad_merges_line_is_named_by_its_number(tmp_path):
    path = write(tmp_path / "merges.txt", "Ġ t\nh e\nx\u2581 y\n")
    with pytest.raises(ValueError, match=r"line 3: character '\u2581' in 'x\u2581' is not in GPT-2's"):
        read_merges(path)


def test_vocab_files_read_the_same_either_way(tmp_path):
    vocab = {token_to_text(bytes([b])): b for b in range(256)} | {"Ġt": 256, "<|endoftext|>": 257}
    path = write(tmp_path / "vocab.json", json.dumps(vocab))
    expected = {b: bytes([b]) for b in range(256)} | {256: b" t", 257: b"<|endoftext|>"}
    assert read_vocab(path) == expected
    # a special token in plain text (a space: not byte-level) goes the way one at a time
    path = write(tmp_path / "vocab.json", json.dumps({**vocab, "<| sep |>": 258}))
    assert read_vocab(path, literal_tokens=["<| sep |>"]) == expected | {258: b"<| sep |>"}
    with pytest.raises(ValueError, match="character ' ' in '<| sep |>' is not in GPT-2's"):
        read_vocab(path)
    path = write(tmp_path / "vocab.json", json.dumps({**vocab, "Ġa": 256}))
    with pytest.raises(ValueError, match="id 256 is given to two tokens"):
        read_vocab(path)


def vocab_one_at_a_time(data: bytes) -> dict[int, bytes] | None:
    """The reference for a whole vocab.json: Python's json, then each token and id checked and
    decoded a character at a time; None where the engine's reader must give way."""

    class Entries(list):  # (an object's entries, in order, repeated keys kept)
        pass

    try:
        entries = json.loads(data.decode("utf-8"), object_pairs_hook=Entries)
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(entries, Entries) or not entries:
        return None
    texts = [text for text, _ in entries]
    ids = [token_id for _, token_id in entries]
    if not all(type(token_id) is int and 0 <= token_id <= 2**31 - 1 for token_id in ids):
        return None
    if len(set(texts)) != len(texts) or len(set(ids)) != len(ids):
        return None
    tokens = [one_at_a_time(text) for text in texts]
    return None if None in tokens else dict(zip(ids, tokens))  # type: ignore[arg-type]


@given(st.lists(st.tuples(tokens, st.integers(0, 40) | st.integers(0, 2**31 - 1)), min_size=1, max_size=30), st.booleans(), st.booleans())
def test_a_vocab_file_reads_at_once_as_one_at_a_time(entries, ascii_only, spaced):
    """Whole files, written by json.dumps (escaped or not, spaced or not): the same {id: bytes},
    in the same order, or None exactly where a token or an id comes twice."""
    document = {token_to_text(token): token_id for token, token_id in entries}
    separators = (", ", ": ") if spaced else (",", ":")
    data = json.dumps(document, ensure_ascii=ascii_only, separators=separators).encode()
    expected = vocab_one_at_a_time(data)
    got = byte_level_vocab_json(data, 2**31 - 1)
    assert got == expected
    if got is not None:
        assert list(got) == list(document.values())


@pytest.mark.parametrize("data", [
    b"{}", b"[]", b"1", b"", b'{"a": 1, "a": 2}', b'{"a": 1, "b": 1}', b'{"a": -1}', b'{"a": 1.0}', b'{"a": 1e2}',
    b'{"a": "1"}', b'{"a": null}', b'{"a": 1} x', b'{"a": 1,}', b'{"a b": 1}', b'{"c": 1, "a b": 2}',
    b'{"c": 1, "a b": 2, "x": }', b'\xef\xbb\xbf{"a": 1}', b'{"\\ud800": 1}', b'{"a": 2147483648}', b'{"a": NaN}',
    b'{"\xff": 1}', b'{"a": 1}\xff', b'{"a": {"b": 1}}',
])
def test_what_is_not_exactly_a_byte_level_vocab_is_none(data):
    assert byte_level_vocab_json(data, 2**31 - 1) is None
    assert vocab_one_at_a_time(data) is None


def test_a_vocab_file_whose_reading_at_once_gives_way_is_read_as_before(tmp_path):
    """Files the engine's reader refuses: read_vocab then names the problem as it always did."""
    for data, problem in [
        (b'{"a": 1, "b": 1}', "id 1 is given to two tokens"),
        (b'{"a": 1.5}', "ids must be integers"),
        (b'{"a": 1', "not valid JSON"),
        (b'\xef\xbb\xbf{"a": 1}', "not valid JSON"),
        (b'{"a\xff": 1}', "not UTF-8"),
        (b'{"a b": 1}', "character ' ' in 'a b' is not in GPT-2's"),
        (b"[1, 2]", "expected a JSON object"),
    ]:
        path = tmp_path / "vocab.json"
        path.write_bytes(data)
        with pytest.raises(ValueError, match=problem):
            read_vocab(path)
    # a token given twice: Python's json keeps the last, as before
    path.write_bytes(b'{"a": 1, "b": 2, "a": 3}')
    assert read_vocab(path) == {3: b"a", 2: b"b"}


def test_hf_files_read_the_same_either_way(tmp_path):
    """A tokenizer.json whose merges are written both ways, and one whose merge names a part no
    token spells (decoded, not looked up), read as the same model."""
    vocab = {token_to_text(bytes([b])): b for b in range(256)} | {"Ġt": 256, "he": 257, "Ġthe": 258}
    document = {"model": {"type": "BPE", "vocab": vocab, "merges": ["Ġ t", "h e", "Ġt he"]},
                "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}}
    as_strings = formats.read("hf", write(tmp_path / "strings.json", json.dumps(document))).model
    document["model"]["merges"] = [merge.split(" ") for merge in document["model"]["merges"]]
    as_lists = formats.read("hf", write(tmp_path / "lists.json", json.dumps(document))).model
    assert as_strings.merges == as_lists.merges == [(b" ", b"t"), (b"h", b"e"), (b" t", b"he")]
    assert as_strings.vocab == as_lists.vocab
    document["model"]["merges"].append(["\u2581", "t"])
    with pytest.raises(FormatError, match=r"merge 3 \['\u2581', 't'\] is not byte-level"):
        formats.read("hf", write(tmp_path / "bad.json", json.dumps(document)))


def test_the_collector_is_paused_then_as_it_was():
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # (a caller that had turned it off keeps it off)
    finally:
        gc.enable()
    with pytest.raises(KeyError), collector_paused():
        raise KeyError("inside")
    assert gc.isenabled()


def test_readers_on_many_threads_leave_the_collector_on(tmp_path):
    """Eight threads reading GPT-2 files at once, each pausing the collector: every one reads the
    same model, and the collector is on again after."""
    vocab = {token_to_text(bytes([b])): b for b in range(256)} | {"Ġt": 256, "he": 257}
    vocab_path = write(tmp_path / "vocab.json", json.dumps(vocab))
    merges_path = write(tmp_path / "merges.txt", "#version: 0.2\nĠ t\nh e\n")

    def read(_):  # (formats.read pauses the collector while it reads)
        models = [formats.read("gpt2", vocab_path, merges_path).model for _ in range(20)]
        return [(model.vocab, model.merges) for model in models]

    expected = (read_vocab(vocab_path), read_merges(merges_path))
    with ThreadPoolExecutor(8) as pool:
        results = [model for models in pool.map(read, range(8)) for model in models]
    assert len(results) == 160 and all(model == expected for model in results)
    assert gc.isenabled()
