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


def test_an_output_that_is_a_device_or_a_pipe_is_refused_not_replaced(tmp_path):
    """Writing beside an output and renaming onto it once replaced the node itself: as root,
    ``remap ... -o /dev/full`` and ``eval --csv /dev/full`` turned /dev/full into a regular file
    and exited 0. Every output (exports, .npy, text, CSV, remapped ids) is now refused in one line
    naming it, and the node is left as it was. (A named pipe stands in for the device here.)"""
    import os
    import stat

    import numpy as np

    from bpestore import Store
    from test_cli import assert_user_error, invoke, ok, write_text

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    npy_pipe = tmp_path / "pipe.npy"
    os.mkfifo(npy_pipe)
    with pytest.raises(OSError, match="not a regular file"):
        formats.export(MODEL, "hf", pipe)
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.save("t", MODEL)
    text = write_text(tmp_path / "in.txt", "ab ab ba\n")
    np.save(tmp_path / "ids.npy", np.array([97, 256], dtype=np.uint16))
    ok(invoke("trim", "t", "--vocab-size", 257, "--map-out", tmp_path / "m", "--db", db))
    for args in (
        ("encode", "t", text, "--output", pipe),
        ("encode", "t", text, "--output", npy_pipe),
        ("remap", tmp_path / "m.json", tmp_path / "ids.npy", "-o", pipe),
        ("eval", "t", "--corpus", text, "--csv", pipe),
        ("export", "t", "--format", "hf", "--output", pipe),
    ):
        assert_user_error(invoke(*args, "--db", db) if args[0] != "remap" else invoke(*args), "not a regular file")
    assert stat.S_ISFIFO(os.stat(pipe).st_mode) and stat.S_ISFIFO(os.stat(npy_pipe).st_mode)
