"""Encoding whole files: streamed block by block, or in parallel over chunks into a ``.npy`` file.

Chunks are cut where the encoding cannot change (before a special token, or before a space between
two printable ASCII characters), so the ids are exactly ``Tokenizer.encode(whole text)``.
Workers each hold one chunk's text and ids; the parent writes each chunk's ids as soon as it comes,
in order, so no process ever holds the ids of the whole file.
"""

from __future__ import annotations

import errno
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from ..pretokenize.corpus import check_corpus_path, chunk_boundaries, default_workers, read_chunk
from ..pretokenize.patterns import SPLIT_SAFE_PATTERNS
from ..progress import progress_bar
from .tokenizer import Tokenizer

DEFAULT_CHUNK_BYTES = 1 << 22
# The parent encodes the first this many bytes alone before the workers start (see below).
WARM_UP_BYTES = 1 << 21
_NPY_HEADER_BYTES = 128


def id_dtype(tokenizer: Tokenizer) -> np.dtype:
    """uint16 when every id fits, else uint32."""
    return np.dtype(np.uint16 if max(tokenizer.vocab) < 1 << 16 else np.uint32)


_worker_tokenizer: Tokenizer | None = None


def _init_worker(tokenizer: Tokenizer) -> None:
    global _worker_tokenizer
    _worker_tokenizer = tokenizer


def _encode_chunk(task: tuple[str, int, int, str]) -> tuple[int, bytes]:
    path, start, end, dtype = task
    ids = _worker_tokenizer.encode_to_array(read_chunk(path, start, end))
    return end - start, ids.astype(dtype).tobytes()


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
    # Pieces of WARM_UP_BYTES: the first is a task of its own (see below), the rest are grouped
    # into chunks of about chunk_bytes.
    warm_up = min(WARM_UP_BYTES, chunk_bytes)
    bounds = chunk_boundaries(path, tokenizer.special_tokens, warm_up, space_cuts=space_cuts)
    if len(bounds) > 2:
        bounds = [bounds[0], *bounds[1:-1:max(chunk_bytes // warm_up, 1)], bounds[-1]]
    tasks = [(str(path), start, end, dtype.str) for start, end in zip(bounds, bounds[1:])]
    workers = min(workers or default_workers(), len(tasks))
    on_bytes = on_bytes or (lambda n: None)
    _init_worker(tokenizer)
    # The first piece is encoded here, before any worker starts: forked workers then begin with
    # the caches it filled (the commonest words) instead of each learning them again. It is small,
    # because the other core waits meanwhile.
    first = 1 if workers > 1 else len(tasks)
    for size, data in map(_encode_chunk, tasks[:first]):
        on_bytes(size)
        yield np.frombuffer(data, dtype=dtype)
    if first == len(tasks):
        return
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with context.Pool(workers, initializer=_init_worker, initargs=(tokenizer,)) as pool:
        # In order, and at most a few chunks ahead of the one being written, so that the ids
        # waiting in memory stay bounded however fast the workers are.
        pending: deque = deque()
        for task in tasks[first:]:
            pending.append(pool.apply_async(_encode_chunk, (task,)))
            if len(pending) >= 2 * workers:
                size, data = pending.popleft().get()
                on_bytes(size)
                yield np.frombuffer(data, dtype=dtype)
        while pending:
            size, data = pending.popleft().get()
            on_bytes(size)
            yield np.frombuffer(data, dtype=dtype)


def _npy_header(dtype: np.dtype, length: int) -> bytes:
    """A fixed-size ``.npy`` (version 1.0) header, so that it can be rewritten once the length is known."""
    magic = b"\x93NUMPY\x01\x00"
    body = repr({"descr": dtype.str, "fortran_order": False, "shape": (length,)})
    padding = _NPY_HEADER_BYTES - len(magic) - 2 - len(body) - 1
    if padding < 0:
        raise ValueError("npy header does not fit")
    body = body + " " * padding + "\n"
    return magic + len(body).to_bytes(2, "little") + body.encode("latin-1")


def _write_npy(arrays: Iterable[np.ndarray], dtype: np.dtype, output_path: str | os.PathLike) -> int:
    """Write arrays one after another as one 1-D ``.npy`` file; returns the number of elements.

    The file is written to ``output_path`` + ``.partial`` and renamed when complete, so a failure
    never leaves a truncated array under the requested name.
    """
    output_path = Path(output_path)
    if not output_path.parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, f"cannot write the output, no directory {output_path.parent}", str(output_path))
    partial = output_path.with_name(output_path.name + ".partial")
    total = 0
    try:
        with open(partial, "wb") as out:
            out.write(_npy_header(dtype, 0))
            for array in arrays:
                out.write(array.astype(dtype, copy=False).tobytes())
                total += len(array)
            out.seek(0)
            out.write(_npy_header(dtype, total))
        os.replace(partial, output_path)
    finally:
        if partial.exists():
            partial.unlink()
    return total


def encode_file_to_npy(
    tokenizer: Tokenizer,
    input_path: str | os.PathLike,
    output_path: str | os.PathLike,
    *,
    workers: int | None = None,
    progress: bool = False,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> int:
    """Encode a text file into a 1-D ``.npy`` array of ids, in parallel; returns the number of ids."""
    size = os.path.getsize(check_corpus_path(input_path))
    with progress_bar(progress, size, "encoding", unit="B", unit_scale=True) as bar:
        chunks = encode_file_chunks(tokenizer, input_path, workers=workers, chunk_bytes=chunk_bytes, on_bytes=bar.update)
        return _write_npy(chunks, id_dtype(tokenizer), output_path)


def write_npy_stream(tokenizer: Tokenizer, texts: Iterable[str], output_path: str | os.PathLike) -> int:
    """Encode a stream of text (in this process) into a 1-D ``.npy`` array; returns the number of ids."""
    dtype = id_dtype(tokenizer)
    arrays = (ids.astype(dtype) for ids in tokenizer.encode_blocks(texts))
    return _write_npy(arrays, dtype, output_path)
