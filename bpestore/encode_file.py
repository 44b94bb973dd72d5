"""Encoding whole files: streamed block by block, or in parallel over chunks into a ``.npy`` file.

Chunks are cut where the encoding cannot change (before a special token, or before a space that is
followed by a printable ASCII character), so the ids are exactly ``Tokenizer.encode(whole text)``.
Workers each hold one chunk's text and ids; the parent writes each chunk's ids as soon as it comes,
in order, so no process ever holds the ids of the whole file.
"""

from __future__ import annotations

import codecs
import multiprocessing
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from .corpus import CorpusDecodeError, check_corpus_path, chunk_boundaries, default_workers, read_chunk
from .pretokenize import SPLIT_SAFE_PATTERNS
from .progress import progress_bar
from .tokenizer import Tokenizer

DEFAULT_CHUNK_BYTES = 1 << 22
_READ_BYTES = 1 << 20
_NPY_HEADER_BYTES = 128


def iter_text_blocks(
    path: str | os.PathLike, *, block_bytes: int = _READ_BYTES, on_bytes: Callable[[int], None] | None = None
) -> Iterator[str]:
    """The text of a UTF-8 file in blocks; CorpusDecodeError names the offset of a bad byte."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    with open(check_corpus_path(path), "rb") as file:
        while True:
            data = file.read(block_bytes)
            try:
                text = decoder.decode(data, final=not data)
            except UnicodeDecodeError as error:
                # error.start counts from the bytes the decoder held back plus this block
                held = len(error.object) - len(data)
                raise CorpusDecodeError(path, offset - held + error.start, error.reason) from None
            if text:
                yield text
            if on_bytes is not None and data:
                on_bytes(len(data))
            if not data:
                return
            offset += len(data)


def id_dtype(tokenizer: Tokenizer) -> np.dtype:
    """uint16 when every id fits, else uint32."""
    return np.dtype(np.uint16 if max(tokenizer.vocab) < 1 << 16 else np.uint32)


_worker_tokenizer: Tokenizer | None = None


def _init_worker(tokenizer: Tokenizer) -> None:
    global _worker_tokenizer
    _worker_tokenizer = tokenizer


def _encode_chunk(task: tuple[str, int, int, str]) -> tuple[int, bytes]:
    path, start, end, dtype = task
    ids = _worker_tokenizer.encode(read_chunk(path, start, end))
    return end - start, np.array(ids, dtype=dtype).tobytes()


def encode_file_chunks(
    tokenizer: Tokenizer,
    path: str | os.PathLike,
    *,
    workers: int | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    on_bytes: Callable[[int], None] | None = None,
) -> Iterator[np.ndarray]:
    """The ids of a file as arrays, chunk by chunk and in order, encoded by ``workers`` processes."""
    path = check_corpus_path(path)
    dtype = id_dtype(tokenizer)
    space_cuts = tokenizer.pattern in SPLIT_SAFE_PATTERNS
    bounds = chunk_boundaries(path, tokenizer.special_tokens, chunk_bytes, space_cuts=space_cuts)
    tasks = [(str(path), start, end, dtype.str) for start, end in zip(bounds, bounds[1:])]
    workers = min(workers or default_workers(), len(tasks))
    on_bytes = on_bytes or (lambda n: None)
    if workers <= 1:
        _init_worker(tokenizer)
        results = map(_encode_chunk, tasks)
        for size, data in results:
            on_bytes(size)
            yield np.frombuffer(data, dtype=dtype)
        return
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with context.Pool(workers, initializer=_init_worker, initargs=(tokenizer,)) as pool:
        # imap keeps the order; a small chunksize keeps the progress bar moving
        for size, data in pool.imap(_encode_chunk, tasks, chunksize=1):
            on_bytes(size)
            yield np.frombuffer(data, dtype=dtype)


def _npy_header(dtype: np.dtype, length: int) -> bytes:
    header = {"descr": dtype.str, "fortran_order": False, "shape": (length,)}
    text = "\x93NUMPY\x01\x00"
    body = repr(header)
    padding = _NPY_HEADER_BYTES - len(text) - 2 - len(body) - 1
    if padding < 0:
        raise ValueError("npy header does not fit")
    body = body + " " * padding + "\n"
    return text.encode("latin-1") + len(body).to_bytes(2, "little") + body.encode("latin-1")


def encode_file_to_npy(
    tokenizer: Tokenizer,
    input_path: str | os.PathLike,
    output_path: str | os.PathLike,
    *,
    workers: int | None = None,
    progress: bool = False,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> int:
    """Encode a text file into a 1-D ``.npy`` array of ids; returns the number of ids.

    The file is written to ``output_path`` + ``.partial`` and renamed when complete, so a failure
    never leaves a truncated array under the requested name.
    """
    dtype = id_dtype(tokenizer)
    output_path = Path(output_path)
    partial = output_path.with_name(output_path.name + ".partial")
    total = 0
    try:
        with open(partial, "wb") as out, progress_bar(
            progress, os.path.getsize(check_corpus_path(input_path)), "encoding", unit="B", unit_scale=True
        ) as bar:
            out.write(_npy_header(dtype, 0))
            for ids in encode_file_chunks(tokenizer, input_path, workers=workers, chunk_bytes=chunk_bytes, on_bytes=bar.update):
                out.write(ids.tobytes())
                total += len(ids)
            out.seek(0)
            out.write(_npy_header(dtype, total))
        os.replace(partial, output_path)
    finally:
        if partial.exists():
            partial.unlink()
    return total
