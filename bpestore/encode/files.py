"""Encoding whole files into ``.npy`` arrays: a file on threads, or a stream block by block.

A file is encoded by the Rust engine (``Encoder.encode_file_to_npy``): chunks cut where the
encoding cannot change (before a special token, or before a space between two printable ASCII
characters), encoded on several threads with the GIL released and written in order, so the ids
are exactly ``Tokenizer.encode(whole text)`` and memory stays bounded. Both paths write to
``OUTPUT.partial`` and rename it once complete.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..pretokenize.corpus import check_corpus_path
from ..progress import progress_bar
from ..workers import default_workers
from .tokenizer import Tokenizer

# Chunks of text handed to the encoding threads.
DEFAULT_CHUNK_BYTES = 1 << 20
_NPY_HEADER_BYTES = 128


def id_dtype(tokenizer: Tokenizer) -> np.dtype:
    """uint16 when every id fits, else uint32."""
    return np.dtype(np.uint16 if max(tokenizer.vocab) < 1 << 16 else np.uint32)


def _check_output_dir(output_path: Path) -> None:
    if not output_path.parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, f"cannot write the output, no directory {output_path.parent}", str(output_path))


def encode_file_to_npy(
    tokenizer: Tokenizer,
    input_path: str | os.PathLike,
    output_path: str | os.PathLike,
    *,
    workers: int | None = None,
    progress: bool = False,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> int:
    """Encode a UTF-8 file into a 1-D ``.npy`` array of ids on ``workers`` threads (default: the
    CPUs); returns the number of ids. Invalid UTF-8 raises CorpusDecodeError naming the first bad
    byte, and leaves no output."""
    input_path = check_corpus_path(input_path)
    output_path = Path(output_path)
    _check_output_dir(output_path)
    size = os.path.getsize(input_path)
    with progress_bar(progress, size, "encoding", unit="B", unit_scale=True) as bar:
        return tokenizer._engine.encode_file_to_npy(
            input_path, output_path, threads=workers or default_workers(), progress=bar.update, chunk_bytes=chunk_bytes
        )


def _npy_header(dtype: np.dtype, length: int) -> bytes:
    """A fixed-size ``.npy`` (version 1.0) header, so that it can be rewritten once the length is known."""
    magic = b"\x93NUMPY\x01\x00"
    body = repr({"descr": dtype.str, "fortran_order": False, "shape": (length,)})
    padding = _NPY_HEADER_BYTES - len(magic) - 2 - len(body) - 1
    if padding < 0:
        raise ValueError("npy header does not fit")
    body = body + " " * padding + "\n"
    return magic + len(body).to_bytes(2, "little") + body.encode("latin-1")


def write_npy_stream(tokenizer: Tokenizer, texts: Iterable[str], output_path: str | os.PathLike, **policy) -> int:
    """Encode a stream of text (such as stdin) into a 1-D ``.npy`` array; returns the number of ids.
    ``policy``: ``allowed_special`` and ``disallowed_special``, as for :meth:`Tokenizer.encode`.

    The file is written to ``output_path`` + ``.partial`` and renamed when complete, so a failure
    never leaves a truncated array under the requested name.
    """
    output_path = Path(output_path)
    _check_output_dir(output_path)
    dtype = id_dtype(tokenizer)
    partial = output_path.with_name(output_path.name + ".partial")
    total = 0
    try:
        with open(partial, "wb") as out:
            out.write(_npy_header(dtype, 0))
            for ids in tokenizer.encode_blocks(texts, **policy):
                out.write(ids.astype(dtype, copy=False).tobytes())
                total += len(ids)
            out.seek(0)
            out.write(_npy_header(dtype, total))
        os.replace(partial, output_path)
    finally:
        if partial.exists():
            partial.unlink()
    return total
