"""Encoding whole files into ``.npy`` arrays: a file on threads, or a stream block by block.

A file is encoded by the Rust engine (``Encoder.encode_file_to_npy``): chunks cut where the
encoding cannot change (before a special token, or before a space between two printable ASCII
characters), encoded on several threads with the GIL released and written in order, so the ids
are exactly ``Tokenizer.encode(whole text)`` and memory stays bounded.

Both paths write to a hidden temporary file beside the output, ``.NAME.PID-HEX.partial``, and
rename it once complete. Until its last write the file does not start as a ``.npy`` does, so
``numpy.load`` refuses one left by a killed process instead of reading an empty array; such a
file is removed by the next write to the same output once its process is gone
(:func:`bpestore.atomic.remove_stale_partials`, the rule for every output). A write that fails
(a full disk, a file over its size limit) is an :class:`~bpestore.errors.OutputError` naming the
output.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..atomic import atomic_path, remove_stale_partials
from ..errors import OutputError
from ..pretokenize.corpus import check_corpus_path
from ..progress import progress_bar
from ..workers import default_workers
from .tokenizer import Tokenizer

if TYPE_CHECKING:
    import numpy as np  # (imported where it runs: commands that do not encode, `train` among them, never load it)

# Chunks of text handed to the encoding threads.
DEFAULT_CHUNK_BYTES = 1 << 20
_NPY_HEADER_BYTES = 128


def id_dtype(tokenizer: Tokenizer) -> np.dtype:
    """uint16 when every id fits, else uint32."""
    import numpy as np
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
        try:
            return tokenizer._engine.encode_file_to_npy(
                input_path, output_path, threads=workers or default_workers(), progress=bar.update, chunk_bytes=chunk_bytes
            )
        except OSError as error:
            raise _named(error, input_path, output_path) from None


# What only a write can fail with: such an error of the engine's surely is the output's. Others
# (EIO, say) may be the input's as well: both files are named then.
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS})
# How the engine's errors (Rust's io::Error) end: "File too large (os error 27)", no errno set.
_ENGINE_OS_ERROR = re.compile(r"(?P<strerror>.*) \(os error (?P<errno>\d+)\)")


def _named(error: OSError, input_path: str | os.PathLike, output_path: Path) -> OSError:
    """The engine's OSError, which names no file, naming its file: an
    :class:`~bpestore.errors.OutputError` for a failed write."""
    if error.filename is not None:
        return error
    code, strerror = error.errno, error.strerror
    if code is None and len(error.args) == 1 and (match := _ENGINE_OS_ERROR.fullmatch(str(error.args[0]))):
        code, strerror = int(match["errno"]), match["strerror"]
    if code is None:
        return error
    if code in _WRITE_ERRNOS:
        return OutputError(code, strerror, str(output_path))
    return OSError(code, f"{strerror} (reading {os.fspath(input_path)} or writing it as {output_path})")


# The first bytes of an array being written (crates/encode/src/file.rs writes the same): not the
# ``\x93NUMPY`` a .npy starts with; the real header replaces them last.
PARTIAL_MARK = b"bpestore: an unfinished .npy"


def _partial_header() -> bytes:
    text = PARTIAL_MARK + b" (its writer was stopped, or is still writing)"
    return text.ljust(_NPY_HEADER_BYTES - 1) + b"\n"


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
    dtype = id_dtype(tokenizer)
    total = 0
    # atomic_path: stale temporary files go first; a failure removes this one and names the output
    with atomic_path(output_path) as partial, open(partial, "xb") as out:
        out.write(_partial_header())
        out.flush()
        for ids in tokenizer.encode_blocks(texts, **policy):
            out.write(ids.astype(dtype, copy=False).tobytes())
            total += len(ids)
        out.seek(0)
        out.write(_npy_header(dtype, total))
    return total
