"""Reading a corpus file: checked, and decoded block by block with the offset of a bad byte.

Cutting a corpus into chunks is the engine's job (``crates/pretokenize/src/cut.rs``): training
counts a corpus's pre-tokens there (:func:`bpestore.train.trainer.count_corpus`), and files are
encoded there (:mod:`bpestore.encode.files`).
"""

from __future__ import annotations

import codecs
import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from ..errors import CorpusDecodeError

_READ_BYTES = 1 << 20

def iter_text_blocks(
    source: str | os.PathLike[str] | BinaryIO,
    *,
    block_bytes: int = _READ_BYTES,
    on_bytes: Callable[[int], None] | None = None,
) -> Iterator[str]:
    """The text of a UTF-8 file (a path or a binary file object such as ``sys.stdin.buffer``) in
    blocks; CorpusDecodeError names the offset of the first bad byte."""
    if isinstance(source, (str, os.PathLike)):
        with open(check_corpus_path(source, streams=True), "rb") as file:
            yield from _decode_blocks(file, os.fspath(source), block_bytes, on_bytes)
    else:
        yield from _decode_blocks(source, getattr(source, "name", "<stream>"), block_bytes, on_bytes)


def _decode_blocks(file: BinaryIO, name: str, block_bytes: int, on_bytes: Callable[[int], None] | None) -> Iterator[str]:
    """The text of ``file`` (named ``name`` in errors) read in blocks of ``block_bytes``;
    ``on_bytes(n)`` told of each n bytes read."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    while True:
        data = file.read(block_bytes)
        try:
            text = decoder.decode(data, final=not data)
        except UnicodeDecodeError as error:
            # error.object is what the decoder held back from the last block plus this one
            held = len(error.object) - len(data)
            raise CorpusDecodeError(name, offset - held + error.start, error.reason) from None
        if text:
            yield text
        if on_bytes is not None and data:
            on_bytes(len(data))
        if not data:
            return
        offset += len(data)


def check_corpus_path(path: str | os.PathLike[str], *, streams: bool = False) -> Path:
    """The path as a Path, or FileNotFoundError naming it when it is missing or not a file.
    ``streams``: a pipe, a named pipe or a character device (``<(zcat x.gz)``, ``/dev/null``) is
    read too, once, from start to end (what encoding does; training reads its files by size)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
    if path.is_dir():
        raise FileNotFoundError(errno.EISDIR, "Not a file (a directory), cannot read a corpus", str(path))
    if not path.is_file() and not streams:
        raise FileNotFoundError(errno.EINVAL, "Not a regular file (a pipe or a device?), cannot read a corpus", str(path))
    return path


def is_stream_path(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names something read as a stream: it exists and is neither a regular file
    nor a directory (a pipe, a FIFO, a character device)."""
    target = Path(path)
    return target.exists() and not target.is_file() and not target.is_dir()
