"""Exports are atomic and refuse what is not a tokenizer (issue 13 leftovers): a failure part-way
through ``bpestore.formats.export`` / ``Tokenizer.export`` leaves no partial file, no temporary
file, and an existing output as it was."""

from __future__ import annotations

import pytest

from bpestore import BPEModel, Tokenizer, formats
from bpestore.formats import gpt2, hf

MODEL = BPEModel({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")], ["<|endoftext|>"])


class DiskFull(OSError):
    pass


def test_export_of_something_that_is_not_a_tokenizer_is_a_type_error(tmp_path):
    with pytest.raises(TypeError, match="Tokenizer or a BPEModel, not str"):
        formats.export("not a tokenizer", "hf", tmp_path / "t.json")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("through", ["formats.export", "Tokenizer.export"])
def test_a_failed_file_export_leaves_no_partial_file(tmp_path, monkeypatch, through):
    output = tmp_path / "tokenizer.json"
    output.write_text("the previous export")

    def half_written(path, document):
        with open(path, "w") as file:
            file.write('{"version": ')
        raise DiskFull(28, "No space left on device")

    monkeypatch.setattr(hf, "write_tokenizer_json", half_written)
    with pytest.raises(OSError, match="No space left on device"):
        if through == "formats.export":
            formats.export(MODEL, "hf", output)
        else:
            Tokenizer.from_model(MODEL).export("hf", output)
    assert output.read_text() == "the previous export"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tokenizer.json"]


def test_a_failed_directory_export_leaves_no_partial_file(tmp_path, monkeypatch):
    output = tmp_path / "gpt2"

    def fail(path, merges):
        raise DiskFull(28, "No space left on device")

    monkeypatch.setattr(gpt2, "write_merges", fail)  # vocab.json is written first
    with pytest.raises(OSError, match="No space left on device"):
        formats.export(MODEL, "gpt2", output)
    assert list(tmp_path.iterdir()) == []


def test_a_complete_export_reads_back_and_names_the_real_output(tmp_path):
    notes = formats.export(MODEL, "gpt2", tmp_path / "gpt2")
    assert any(str(tmp_path / "gpt2" / "vocab.json") in note for note in notes), notes
    assert ".partial" not in " ".join(notes)
    formats.export(Tokenizer.from_model(MODEL), "hf", tmp_path / "t.json")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["gpt2", "t.json"]
    assert formats.read("hf", tmp_path / "t.json").model.vocab == MODEL.vocab
    assert formats.read("gpt2", tmp_path / "gpt2" / "vocab.json", tmp_path / "gpt2" / "merges.txt", ["<|endoftext|>"]).model.vocab == MODEL.vocab
