"""benchmarks/ab_engine.py, the side-by-side timing of two engine builds in one process: it runs
in every mode, and a build that encodes differently is an error, never a ratio."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import bpestore.engine

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "ab_engine.py"
BUILD = bpestore.engine.Encoder.__module__  # (the engine's module; its file is the build)


def build_file() -> str:
    return str(sys.modules[BUILD].__file__)


def small_corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Hello world, 123 times. Grüße aus Köln! 你好，世界。\n" * 400, encoding="utf-8")
    return corpus


@pytest.mark.parametrize("mode", ["warm", "cold", "list", "file"])
def test_one_build_against_itself_runs_in_every_mode(tmp_path, mode):
    corpus = small_corpus(tmp_path)
    result = subprocess.run(
        [sys.executable, str(SCRIPT), build_file(), build_file(), "--encoding", "cl100k_base",
         "--corpus", str(corpus), "--mode", mode, "--rounds", "2", "--mb", "0.01"],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert f"cl100k_base {mode} (" in result.stdout and "B's speed-up" in result.stdout, result.stdout


def test_a_missing_build_is_named(tmp_path):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), build_file(), "--corpus", str(small_corpus(tmp_path))],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode != 0
    assert f"no engine build in {tmp_path} (none of _engine." in result.stderr


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_a_build_that_encodes_differently_is_an_error(tmp_path, monkeypatch, capsys, mode):
    spec = importlib.util.spec_from_file_location("ab_engine", SCRIPT)
    assert spec is not None and spec.loader is not None
    ab_engine = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ab_engine)
    engine = sys.modules[BUILD]

    class OffByOne:
        """The real encoder, but its last id one higher: what a broken build would give."""

        def __init__(self, *args: object) -> None:
            self.encoder = engine.Encoder(*args)

        def encode_to_buffer(self, text: str) -> bytes:
            ids = bytearray(self.encoder.encode_to_buffer(text))
            ids[-1] ^= 1
            return bytes(ids)

    builds = {"build_a": engine, "build_b": SimpleNamespace(Encoder=OffByOne)}
    monkeypatch.setattr(ab_engine, "load_build", lambda path, tag: builds[tag])
    status = ab_engine.main(["a", "b", "--encoding", "cl100k_base", "--corpus", str(small_corpus(tmp_path)),
                             "--mb", "0.01", "--rounds", "2", "--mode", mode])
    assert status == 1
    assert "error: build B encoded differently" in capsys.readouterr().err
