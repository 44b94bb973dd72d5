"""Encoding whole files into ``.npy`` arrays: a file on threads, or a stream block by block.

A file is encoded by the Rust engine (``Encoder.encode_file_to_npy``): chunks cut where the
encoding cannot change (before a special token, or before a space between two printable ASCII
characters), encoded on several threads with the GIL released and written in order, so the ids
are exactly ``Tokenizer.encode(whole text)`` and memory stays bounded.

Both paths write to a hidden temporary file beside the output, ``.NAME.PID-HEX.partial``, and
rename it once complete. Until its last write the file does not start as a ``.npy`` does, so
``numpy.load`` refuses one left by a killed process instead of reading an empty array; such a
file is removed by the next encoding to the same output once its process is gone.
"""

from __future__ import annotations

import errno
import os
import secrets
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
    remove_stale_partials(output_path)
    with progress_bar(progress, size, "encoding", unit="B", unit_scale=True) as bar:
        return tokenizer._engine.encode_file_to_npy(
            input_path, output_path, threads=workers or default_workers(), progress=bar.update, chunk_bytes=chunk_bytes
        )


# The first bytes of an array being written (crates/encode/src/file.rs writes the same): not the
# ``\x93NUMPY`` a .npy starts with; the real header replaces them last.
PARTIAL_MARK = b"bpestore: an unfinished .npy"


def _partial_header() -> bytes:
    text = PARTIAL_MARK + b" (its writer was stopped, or is still writing)"
    return text.ljust(_NPY_HEADER_BYTES - 1) + b"\n"


def _partial_path(output_path: Path) -> Path:
    """This process's temporary file for ``output_path`` (the engine names its own alike)."""
    return output_path.with_name(f".{output_path.name}.{os.getpid()}-{secrets.token_hex(4)}.partial")


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, OverflowError):
        return True  # someone else's, or cannot tell: leave its file alone
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """Whether ``pid`` has died but is not yet reaped by its parent (Linux: state Z or X in
    /proc/PID/stat). Such a process still answers ``kill(pid, 0)``, yet writes nothing ever again:
    a killed Dask worker stays a zombie until its nanny reaps it, and the shard it was writing may
    be rerun elsewhere before then. False where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return False
    # "PID (COMMAND) STATE ...": the command may hold spaces and parentheses, so split after the last ')'.
    fields = stat.rpartition(b")")[2].split()
    return bool(fields) and fields[0] in (b"Z", b"X")


def remove_stale_partials(output_path: str | os.PathLike) -> list[Path]:
    """Removes the temporary arrays a killed encoding left beside ``output_path``; returns them.

    Only a file that is surely stale goes: named as an encoding to this very output names its
    temporary file (``.NAME.PID-HEX.partial``), still marked unfinished, and whose process no
    longer exists on this machine (an encoding running meanwhile keeps its file).
    """
    output_path = Path(output_path)
    prefix, suffix = f".{output_path.name}.", ".partial"
    removed = []
    try:
        candidates = list(output_path.parent.iterdir())
    except OSError:
        return removed
    for candidate in candidates:
        name = candidate.name
        if not (name.startswith(prefix) and name.endswith(suffix)):
            continue
        pid, dash, hex_part = name[len(prefix):-len(suffix)].partition("-")
        if not (pid.isdigit() and dash and hex_part) or _process_exists(int(pid)):
            continue
        try:
            with open(candidate, "rb") as file:
                if file.read(len(PARTIAL_MARK)) != PARTIAL_MARK:
                    continue
            candidate.unlink()
        except OSError:
            continue
        removed.append(candidate)
    return removed


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

    The file is written to a temporary file beside it (see the module's docstring) and renamed
    when complete, so a failure never leaves a truncated array under the requested name.
    """
    output_path = Path(output_path)
    _check_output_dir(output_path)
    remove_stale_partials(output_path)
    dtype = id_dtype(tokenizer)
    partial = _partial_path(output_path)
    total = 0
    try:
        with open(partial, "xb") as out:
            out.write(_partial_header())
            out.flush()
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
