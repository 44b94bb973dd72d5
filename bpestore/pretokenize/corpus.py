"""Reading a corpus file: checked, decoded block by block, or cut into chunks at safe places.

Chunks are cut where the cut cannot change the result: at the start of a special token (the corpus is
split there anyway), or else just before a space between two printable ASCII characters (a safe
cut for the pre-tokenizer, see :mod:`bpestore.pretokenize.patterns`). Training counts a corpus's
pre-tokens in the engine (:func:`bpestore.train.trainer.count_corpus`), which cuts it by the same rule.
"""

from __future__ import annotations

import codecs
import errno
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from ..errors import CorpusDecodeError
from .cuts import covered_by_other_special, find_safe_space

DEFAULT_CHUNK_BYTES = 1 << 20
_WINDOW_BYTES = 64 << 10
_READ_BYTES = 1 << 20

ProgressCallback = Callable[[int], None]


def iter_text_blocks(
    source: str | os.PathLike | BinaryIO,
    *,
    block_bytes: int = _READ_BYTES,
    on_bytes: Callable[[int], None] | None = None,
) -> Iterator[str]:
    """The text of a UTF-8 file (a path or a binary file object such as ``sys.stdin.buffer``) in
    blocks; CorpusDecodeError names the offset of the first bad byte."""
    if isinstance(source, (str, os.PathLike)):
        with open(check_corpus_path(source), "rb") as file:
            yield from _decode_blocks(file, os.fspath(source), block_bytes, on_bytes)
    else:
        yield from _decode_blocks(source, getattr(source, "name", "<stream>"), block_bytes, on_bytes)


def _decode_blocks(file: BinaryIO, name: str, block_bytes: int, on_bytes, end: int | None = None) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    while True:
        data = file.read(block_bytes if end is None else min(block_bytes, end - offset))
        try:
            text = decoder.decode(data, final=not data and end is None)
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


def check_corpus_path(path: str | os.PathLike) -> Path:
    """The path as a Path, or FileNotFoundError naming it when it is missing or not a file."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(errno.ENOENT, "No such corpus file", str(path))
    if not path.is_file():
        raise FileNotFoundError(errno.EISDIR, "Not a file (a directory?), cannot read a corpus", str(path))
    return path


def chunk_boundaries(
    path: str | os.PathLike,
    special_tokens: Sequence[str],
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    *,
    space_cuts: bool = True,
) -> list[int]:
    """Offsets 0 = b0 < b1 < ... < bn = file size; each bi is a safe place to cut the file.

    ``space_cuts=False`` allows cuts only before special tokens (for pre-tokenizer patterns that
    lack the split property of :mod:`bpestore.pretokenize.patterns`).
    """
    size = os.path.getsize(path)
    specials = [token.encode("utf-8") for token in special_tokens]
    spaces_allowed = space_cuts and not any(b" " in token for token in specials)
    boundaries = [0]
    with open(path, "rb") as file:
        target = chunk_bytes
        while target < size:
            cut = _find_cut(file, target, size, specials, spaces_allowed)
            if cut >= size:
                break
            boundaries.append(cut)
            target = max(cut + 1, target + chunk_bytes)
    boundaries.append(size)
    return boundaries


def _find_cut(file, target: int, size: int, specials: list[bytes], spaces_allowed: bool) -> int:
    """The first safe cut at or after ``target`` (``size`` if there is none)."""
    longest = max((len(token) for token in specials), default=1)
    position = target
    while position < size:
        start = max(position - longest, 0)
        file.seek(start)
        window = file.read(_WINDOW_BYTES + (position - start) + longest)
        candidates = []
        for token in specials:
            found = window.find(token, position - start)
            while found >= 0 and covered_by_other_special(window, found, specials):
                found = window.find(token, found + 1)
            if found >= 0:
                candidates.append(found)
        if spaces_allowed:
            found = find_safe_space(window, position - start, specials)
            if found >= 0:
                candidates.append(found)
        if candidates:
            return start + min(candidates)
        position += _WINDOW_BYTES
    return size


def read_chunk(path: str | os.PathLike, start: int, end: int) -> str:
    with open(path, "rb") as file:
        file.seek(start)
        data = file.read(end - start)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CorpusDecodeError(path, start + error.start, error.reason) from None
