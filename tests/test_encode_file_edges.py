"""``encode_file_to_npy`` with GPT-2 (the fixture files, ids as ``uint16``) where chunks meet:
the file's ids are ``Tokenizer.encode``'s of its whole text, and tiktoken's, on 1 and 2 workers,
with ``<|endoftext|>``, multi-byte characters and whitespace runs at every distance from a chunk's
edge; and files with nothing to cut (empty, only special tokens, one long word).

Small ``chunk_bytes`` make many chunks: a chunk is cut at the first safe place after that many
bytes, so pieces of every length between the special tokens put them at every offset around a
cut. (benchmarks/big_encode.py times this path on a large corpus; these tests hold its ids.)
"""

from __future__ import annotations

import numpy as np
import pytest

from bpestore.encode.files import encode_file_to_npy
from gpt2_tiktoken import ENDOFTEXT, gpt2_encoding
from test_tokenizer import gpt2_tokenizer_from_files

WORDS = ["the", " quick", " brown", "\n", " fox", "  ", "é", " 日本語", " 🙂", "'s", " 12345", "\n\n", " \t", "!!"]


def edge_text(pieces: int = 1500) -> str:
    """Words, then ``<|endoftext|>``, then more words: the stretches between special tokens run
    through every length from 0 to 96 bytes or so, so that the tokens, and the multi-byte
    characters and whitespace runs among the words, fall at every distance from a cut."""
    parts = []
    for index in range(pieces):
        parts.extend(WORDS[(index + k) % len(WORDS)] for k in range(index % 11))
        parts.append(ENDOFTEXT if index % 3 else ENDOFTEXT + ENDOFTEXT)
    return "".join(parts)


def encoded(tmp_path, text: str, workers: int, chunk_bytes: int) -> np.ndarray:
    source = tmp_path / "text.txt"
    source.write_bytes(text.encode("utf-8"))
    output = tmp_path / f"ids-{workers}-{chunk_bytes}.npy"
    count = encode_file_to_npy(gpt2_tokenizer_from_files(True), source, output, workers=workers, chunk_bytes=chunk_bytes)
    array = np.load(output)
    assert array.dtype == np.uint16 and array.ndim == 1 and count == array.size
    return array


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("chunk_bytes", [1, 64, 1000])
def test_file_ids_equal_encode_and_tiktoken_around_chunk_edges(tmp_path, workers, chunk_bytes):
    text = edge_text()
    want = gpt2_tokenizer_from_files(True).encode(text)
    assert want == gpt2_encoding().encode(text, allowed_special="all")
    assert encoded(tmp_path, text, workers, chunk_bytes).tolist() == want


@pytest.mark.parametrize("workers", [1, 2])
def test_an_empty_file_is_an_empty_array(tmp_path, workers):
    assert encoded(tmp_path, "", workers, 64).size == 0


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    "text",
    [ENDOFTEXT * 500, "x" * 5000, " " * 5000, ENDOFTEXT + "y" * 3000 + ENDOFTEXT + "\n" * 3000],
    ids=["only-special-tokens", "one-long-word", "one-whitespace-run", "long-runs-between-specials"],
)
def test_files_with_few_or_no_safe_cuts(tmp_path, workers, text):
    """A chunk runs on past ``chunk_bytes`` until a safe cut (or the end): the ids are still the
    whole text's."""
    want = gpt2_encoding().encode(text, allowed_special="all")
    assert encoded(tmp_path, text, workers, 64).tolist() == want


def test_the_big_encode_benchmark_runs(tmp_path):
    """benchmarks/big_encode.py on a small file, one round: every row ran, and every output it
    checked holds the same ids (gigatoken's rows only where gigatoken is installed)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from conftest import shared_file

    corpus = tmp_path / "small.txt"
    corpus.write_bytes(shared_file("corpora", "tinystories_800K.txt").read_bytes()[:100_000].decode("utf-8", "ignore").encode())
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "big_encode.py"
    report = tmp_path / "report.json"
    subprocess.run(
        [sys.executable, str(script), "--corpus", str(corpus), "--repeat", "1", "--threads", "1,2",
         "--gigatoken-paths", "encode", "--json", str(report)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    results = json.loads(report.read_text())
    assert {"bpestore 1t", "bpestore 2t"} <= set(results["results"])
    assert all(row["status"] in ("ok", "skipped") for row in results["results"].values()), results["results"]
    assert results["results"]["bpestore 1t"]["status"] == "ok"
    assert results["ids"]["bpestore 2t"] == "identical"
    assert all(found.startswith("identical") for found in results["ids"].values()), results["ids"]  # (tiktoken's: "identical (N ids)")
