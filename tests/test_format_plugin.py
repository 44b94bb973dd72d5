"""A new format is one module (issue 11 section 6): registering a :class:`bpestore.formats.Format`
with an :class:`~bpestore.formats.ImportCommand` gives it ``bpestore import NAME`` — its files,
its options, converted as it says — with no command-line code of its own."""

from __future__ import annotations

import json

import pytest

from bpestore import BPEModel, Store, formats
from bpestore.formats import registry
from test_cli import invoke, ok


def read_letters(path, suffix, *, special_tokens=(), repeat=1):
    """A toy format: a file of letters, each merged with ``suffix`` into a token, ``repeat`` times."""
    letters = sorted(set(open(path, encoding="utf-8").read().split())) * repeat
    vocab = {b: bytes([b]) for b in range(256)}
    merges = []
    for letter in dict.fromkeys(letters):
        merges.append((letter.encode(), suffix.encode()))
        vocab[len(vocab)] = (letter + suffix).encode()
    return formats.Imported(BPEModel(vocab, merges, list(special_tokens)), "letters", registry.resolved(path), [f"{len(merges)} letters"])


def to_int(value: str) -> int:
    if not value.isdigit():
        raise ValueError(f"{value!r} is not a count")
    return int(value)


LETTERS = formats.Format(
    "letters",
    read_letters,
    lambda model, output: [],
    importer=formats.ImportCommand(
        help="A file of letters (a toy format of the tests).",
        files=("letters_txt",),
        options=(
            formats.ImportOption("--suffix", "suffix", "What each letter merges with.", required=True, positional=True),
            formats.ImportOption("--special-token", "special_tokens", "A special token (repeatable).", multiple=True),
            formats.ImportOption("--repeat", "repeat", "A count.", convert=lambda value: to_int(value or "1")),
        ),
    ),
)


@pytest.fixture
def letters_format(monkeypatch):
    monkeypatch.setitem(registry._FORMATS, "letters", LETTERS)
    return LETTERS


def test_a_registered_format_gets_its_import_command(letters_format, tmp_path):
    source = tmp_path / "letters.txt"
    source.write_text("a b c\nb", encoding="utf-8")
    db = tmp_path / "s.db"
    assert "letters" in ok(invoke("import", "--help")) and "--suffix" in ok(invoke("import", "letters", "--help"))
    result = invoke("import", "letters", source, "--suffix", "!", "--special-token", "<|x|>", "--name", "toy", "--db", db)
    out = ok(result)
    assert out.startswith("toy@1\t") and result.stderr.strip() == "3 letters"
    with Store(db) as store:
        model = store.load_model("toy")
        info = store.info("toy")
    assert model.merges == [(b"a", b"!"), (b"b", b"!"), (b"c", b"!")] and model.special_tokens == ["<|x|>"]
    assert (info.source_format, info.source_paths) == ("letters", [str(source.resolve())])
    # an option's conversion error is a usage error naming the option; a missing required one too
    bad = invoke("import", "letters", source, "--suffix", "!", "--repeat", "x", "--name", "toy", "--db", db)
    assert bad.exit_code == 2 and "--repeat" in bad.stderr and "'x' is not a count" in bad.stderr
    missing = invoke("import", "letters", source, "--name", "toy", "--db", db)
    assert missing.exit_code == 2 and "--suffix" in missing.stderr
    assert json.loads(ok(invoke("list", "--json", "--db", db)))[0]["source_format"] == "letters"


def test_every_registered_format_is_importable_from_the_command_line():
    assert set(formats.names()) >= {"gpt2", "hf", "tiktoken"}
    listed = ok(invoke("import", "--help"))
    for name in formats.names():
        assert formats.get(name).importer is not None, name
        assert f"  {name} " in listed, listed
