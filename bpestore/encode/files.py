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

import contextlib
import errno
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from ..atomic import apply_mode, atomic_path, check_output_target, mode_of, remove_stale_partials, through_links
from ..engine import PARTIAL_NPY_MARK
from ..errors import OutputError
from ..pretokenize.corpus import check_corpus_path
from ..progress import progress_bar
from ..workers import default_workers
from .tokenizer import Tokenizer

if TYPE_CHECKING:
    import numpy as np  # (imported where it runs: commands that do not encode never load it)

# Chunks of text handed to the encoding threads.
DEFAULT_CHUNK_BYTES = 1 << 20


def id_dtype(tokenizer: Tokenizer) -> str:
    """The ``.npy`` element type of ``tokenizer``'s ids, as the engine writes them: ``"uint16"``
    when every id fits, else ``"uint32"``."""
    return tokenizer._engine.npy_dtype


def _check_output_dir(output_path: Path) -> None:
    if not output_path.parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, f"cannot write the output, no directory {output_path.parent}", str(output_path))


def encode_file_to_npy(
    tokenizer: Tokenizer,
    input_path: str | os.PathLike[str],
    output_path: str | os.PathLike[str],
    *,
    workers: int | None = None,
    progress: bool = False,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    dropout: float | None = None,
    seed: int = 0,
) -> int:
    """Encode a UTF-8 file into a 1-D ``.npy`` array of ids on ``workers`` threads (default: the
    CPUs); returns the number of ids. Invalid UTF-8 raises CorpusDecodeError naming the first bad
    byte, and leaves no output. ``dropout``, ``seed``: BPE-dropout (see
    :meth:`Tokenizer.encode`; each pre-token seeded by its offset in the file, so the ids do not
    depend on ``workers``)."""
    input_path = check_corpus_path(input_path)
    output_path = through_links(Path(output_path))  # a symbolic link is written through
    check_output_target(output_path)  # (the engine, too, writes beside it and renames)
    _check_output_dir(output_path)
    size = os.path.getsize(input_path)
    remove_stale_partials(output_path)
    replaced = mode_of(output_path)  # the file replaced: its mode (0600, say) is kept
    with progress_bar(progress, size, "encoding", unit="B", unit_scale=True) as bar:
        try:
            count = tokenizer._engine.encode_file_to_npy(
                input_path, output_path, threads=workers or default_workers(), progress=bar.update, chunk_bytes=chunk_bytes,
                dropout=dropout, seed=seed,
            )
        except OSError as error:
            raise _named(error, input_path, output_path) from None
    apply_mode(replaced, output_path)
    return count


# What only a write can fail with: such an error of the engine's surely is the output's. Others
# (EIO, say) may be the input's as well: both files are named then.
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS})


def _named(error: OSError, input_path: str | os.PathLike[str], output_path: Path) -> OSError:
    """The engine's OSError, which names no file, naming its file: an
    :class:`~bpestore.errors.OutputError` for a failed write."""
    if error.filename is not None:
        return error
    code, strerror = error.errno, error.strerror  # (the engine's errors carry them, as OSError(errno, strerror))
    if code is None:
        return error
    if code in _WRITE_ERRNOS:
        return OutputError(code, strerror, str(output_path))
    return OSError(code, f"{strerror} (reading {os.fspath(input_path)} or writing it as {output_path})")


def write_npy_stream(tokenizer: Tokenizer, texts: Iterable[str], output_path: str | os.PathLike[str], **policy: Any) -> int:
    """Encode a stream of text (such as stdin) into a 1-D ``.npy`` array; returns the number of ids.
    ``policy``: ``allowed_special``, ``disallowed_special``, ``dropout`` and ``seed``, as for
    :meth:`Tokenizer.encode_blocks`.

    The file is written to a temporary file beside it (see the module's docstring) and renamed
    when complete, so a failure never leaves a truncated array under the requested name.
    """
    # atomic_path: stale temporary files go first; a failure removes this one and names the output
    # (the engine's write errors name no file: atomic_path names the output)
    with atomic_path(output_path) as partial:
        writer = tokenizer._engine.npy_writer(partial)  # the engine writes the layout
        for ids in tokenizer.encode_blocks(texts, **policy):
            writer.write(ids.tobytes())
        return writer.finish()


NPY_MAGIC = b"\x93NUMPY"
"""The first bytes of every ``.npy`` file."""


def is_npy(head: bytes) -> bool:
    """Whether data starting with ``head`` is meant as a ``.npy``: it starts as one does (even if
    cut short within the magic; text never starts with byte 0x93), or it is one its writer never
    finished (:data:`~bpestore.engine.PARTIAL_NPY_MARK`)."""
    return head[:1] == NPY_MAGIC[:1] or head.startswith(PARTIAL_NPY_MARK)


def _check_npy_size(source: str | os.PathLike[str] | BinaryIO) -> None:
    """ValueError unless the ``.npy`` at ``source`` (a path, or a stream at its start, left
    there) holds as many bytes of data as its header says: a damaged or hostile header claiming
    a huge shape would otherwise have NumPy allocate it (terabytes) before finding the file short."""
    import numpy as np
    from numpy.lib import format as npy_format

    with contextlib.ExitStack() as stack:
        if isinstance(source, (str, os.PathLike)):
            stream: BinaryIO = stack.enter_context(open(source, "rb"))
        else:
            stream = source
            stack.callback(stream.seek, stream.tell())
        version = npy_format.read_magic(stream)
        if version == (1, 0):
            shape, _, dtype = npy_format.read_array_header_1_0(stream)
        else:
            shape, _, dtype = npy_format.read_array_header_2_0(stream)
        data_start = stream.tell()
        available = stream.seek(0, os.SEEK_END) - data_start
        needed = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if needed > available:
            raise ValueError(f"its header says {needed:,} bytes of data, the file has {available:,}")


def read_npy_ids(source: str | os.PathLike[str] | bytes, name: str | None = None) -> np.ndarray:
    """The ids of a 1-D ``.npy`` array of integers (what ``encode --output x.npy`` writes), from
    a file path or the bytes of a file. Anything else is a ValueError in one line naming the file
    (``name``, by default the path): a file whose writer was stopped before the end (it starts
    with :data:`~bpestore.engine.PARTIAL_NPY_MARK`), one that is not a ``.npy``, a truncated
    one, an array of more dimensions or of values that are not integers."""
    import io

    import numpy as np

    where: BinaryIO | str | os.PathLike[str]  # what NumPy reads: the bytes as a stream, or the path
    if isinstance(source, bytes):
        label = name or "<bytes>"
        head, where = source[: len(PARTIAL_NPY_MARK)], io.BytesIO(source)
    else:
        label = name or os.fspath(source)
        with open(source, "rb") as file:
            head = file.read(len(PARTIAL_NPY_MARK))
        where = source
    if head.startswith(PARTIAL_NPY_MARK):
        raise ValueError(f"{label}: an unfinished .npy (its encoding was stopped before the end); encode it again")
    if not head.startswith(NPY_MAGIC):
        raise ValueError(f"{label}: not a .npy file, or one cut short (it does not start with {NPY_MAGIC!r})")
    try:
        _check_npy_size(where)
        array = np.load(where, allow_pickle=False)
    except (ValueError, EOFError) as error:
        raise ValueError(f"{label}: not a complete .npy file ({error})") from None
    if not isinstance(array, np.ndarray) or array.ndim != 1:
        raise ValueError(f"{label}: holds an array of shape {getattr(array, 'shape', '?')}; token ids are a 1-D array")
    if array.dtype.kind not in "iu":
        raise ValueError(f"{label}: holds {array.dtype} values, not integer token ids")
    return array
