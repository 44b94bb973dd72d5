"""A corpus made of many inputs: paths, directories and globs, plain or compressed files.

Training counts such a corpus as one (:func:`bpestore.train.sources.count_inputs`): every file is
read as UTF-8 text, and **a file boundary is a cut, like a special token**: no pre-token spans two
files, so the counts are the sum of each file's counts, whatever order the files come in. Counting
``a.txt`` and ``b.txt`` therefore gives the counts of their concatenation with a special token
between them (never the counts of ``cat a.txt b.txt``, where the last word of ``a`` could run into
the first of ``b``).

Compressed files (``.gz``, ``.xz``, ``.zst``) are decompressed as they are read, never whole in
memory. A corpus's identity is the sha256 of its decompressed content for one file, and for
several the sha256 of their sorted content hashes (:func:`corpus_identity`): the same files in
another order, or a file and its compressed copy, are the same corpus.
"""

from __future__ import annotations

import errno
import io
import glob
import gzip
import hashlib
import json
import lzma
import os
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, cast

from .corpus import _decode_blocks, check_corpus_path
from ..errors import CompressedInputError

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = [
    "COMPRESSED_SUFFIXES",
    "CorpusFiles",
    "corpus_identity",
    "expand_inputs",
    "is_compressed",
    "open_binary",
    "short_corpus_path",
    "stored_corpus_paths",
    "text_pieces",
]

COMPRESSED_SUFFIXES = (".gz", ".xz", ".zst")
_GLOB_CHARACTERS = frozenset("*?[")
_READ_BYTES = 1 << 20


def is_compressed(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is read through a decompressor (by its suffix)."""
    return Path(path).suffix.lower() in COMPRESSED_SUFFIXES


def expand_inputs(sources: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The files of a corpus, in the order given: each source is a file, a directory (every
    regular file below it, recursively, by sorted path, hidden files and directories left out)
    or a glob (``**`` matches directories at any depth), its matches sorted. A file met twice
    (a directory and a glob that overlap) is counted once. FileNotFoundError for a source that
    names nothing (a glob matching no file), ValueError for no sources at all."""
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    files: list[Path] = []
    seen: set[Path] = set()

    def add(path: Path) -> None:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            files.append(path)

    given = 0
    for source in sources:
        given += 1
        text = os.fspath(source)
        path = Path(text)
        if path.is_dir():
            below = sorted(
                found for found in path.rglob("*")
                if found.is_file() and not any(part.startswith(".") for part in found.relative_to(path).parts)
            )
            if not below:
                raise FileNotFoundError(errno.ENOENT, "No corpus file in this directory", text)
            for found in below:
                add(found)
        elif not path.exists() and _GLOB_CHARACTERS & set(text):
            matches = sorted(Path(match) for match in glob.glob(text, recursive=True) if Path(match).is_file())
            if not matches:
                raise FileNotFoundError(errno.ENOENT, "No corpus file matches this pattern", text)
            for match in matches:
                add(match)
        else:
            add(check_corpus_path(path))
    if not given:
        raise ValueError("give at least one corpus file")
    return files


class _ReadsLikeAFile:
    """What a binary file read from start to end has besides read/readinto: readable, close (of
    the file it wraps, ``_closer``), closed, and use as a context manager."""

    _closer: _ReadsLikeAFile | io.BufferedIOBase | BinaryIO

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._closer.close()

    @property
    def closed(self) -> bool:
        return bool(self._closer.closed)

    def __enter__(self) -> _ReadsLikeAFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _CountingReader(_ReadsLikeAFile):
    """A binary file that reports the bytes read from it (the compressed bytes, for the progress
    bar, whose total is the files' sizes on disk)."""

    def __init__(self, file: io.BufferedIOBase, on_bytes: Callable[[int], None] | None) -> None:
        self._file = self._closer = file
        self._on_bytes = on_bytes
        self.position = 0  # bytes read so far: where a decompressor that gives up had got to

    def read(self, size: int = -1) -> bytes:
        data = self._file.read(size)
        self.position += len(data)
        if data and self._on_bytes is not None:
            self._on_bytes(len(data))
        return data

    def readinto(self, buffer: WriteableBuffer) -> int:
        count = self._file.readinto(buffer)
        self.position += count or 0
        if count and self._on_bytes is not None:
            self._on_bytes(count)
        return count


class _ClosesItsFile:
    """For a decompressor given a file object (``GzipFile(fileobj=...)``, ``LZMAFile(file)``),
    which leaves that file open when closed: close it too (else a file handle per compressed
    input stays open until the garbage collector finds it)."""

    _raw: _CountingReader

    def close(self) -> None:
        try:
            super().close()  # type: ignore[misc]
        finally:
            self._raw.close()


class _OwningGzipFile(_ClosesItsFile, gzip.GzipFile):
    def __init__(self, raw: _CountingReader) -> None:
        self._raw = raw
        super().__init__(fileobj=raw, mode="rb")  # type: ignore[call-overload]  # (raw reads as a file does)


class _OwningLZMAFile(_ClosesItsFile, lzma.LZMAFile):
    def __init__(self, raw: _CountingReader) -> None:
        self._raw = raw
        super().__init__(raw, mode="rb")  # type: ignore[arg-type]


class _ZstdReader(_ReadsLikeAFile):
    """A ``.zst`` file's decompressed bytes, frame after frame. zstandard's stream reader ends
    quietly at a frame cut short (a truncated download reads as a shorter corpus); this reader
    says so."""

    def __init__(self, raw: _CountingReader) -> None:
        import zstandard

        self._raw = self._closer = raw
        self._new = zstandard.ZstdDecompressor().decompressobj
        self._frame = self._new()
        self._pending = b""
        self._started = False  # a frame has begun: input ending now is a frame cut short

    def read(self, size: int = -1) -> bytes:
        while not self._pending:
            chunk = self._raw.read(_READ_BYTES)
            if not chunk:
                if self._started:
                    raise EOFError("the file ends inside a zstd frame (cut short?)")
                return b""
            while chunk:
                self._started = True
                self._pending += self._frame.decompress(chunk)
                chunk = b""
                if self._frame.eof:  # a frame ended: what follows is the next frame, if any
                    chunk = self._frame.unused_data
                    self._frame = self._new()
                    self._started = False
        if size < 0 or size >= len(self._pending):
            data, self._pending = self._pending, b""
        else:
            data, self._pending = self._pending[:size], self._pending[size:]
        return data

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)


class _Decompressing(_ReadsLikeAFile):
    """A decompressor's output whose errors (not data of its kind, damaged, cut short) are one
    :class:`CompressedInputError` naming the file and how far into it reading had got."""

    def __init__(self, file: BinaryIO | _ZstdReader, raw: _CountingReader, path: str) -> None:
        self._file = self._closer = file
        self._raw = raw
        self._path = path

    def _failed(self, error: BaseException) -> CompressedInputError:
        reason = str(error) or type(error).__name__
        return CompressedInputError(self._path, self._raw.position, reason)

    def read(self, size: int = -1) -> bytes:
        try:
            return self._file.read(size)
        except _DECOMPRESSION_ERRORS as error:
            raise self._failed(error) from None

    def readinto(self, buffer: WriteableBuffer) -> int:
        try:
            return cast(int, self._file.readinto(buffer))  # type: ignore[union-attr]
        except _DECOMPRESSION_ERRORS as error:
            raise self._failed(error) from None


def _zstd_errors() -> tuple[type[BaseException], ...]:
    try:
        import zstandard
    except ImportError:
        return ()
    return (zstandard.ZstdError,)


# What the decompressors raise for input that is not theirs, damaged or cut short (BadGzipFile is
# an OSError: a disk's own errors are not caught here, only the decompressors' kinds).
_DECOMPRESSION_ERRORS: tuple[type[BaseException], ...] = (gzip.BadGzipFile, zlib.error, EOFError, lzma.LZMAError, *_zstd_errors())


def open_binary(path: str | os.PathLike[str], on_disk_bytes: Callable[[int], None] | None = None) -> BinaryIO:
    """``path`` opened for reading its (decompressed) bytes; ``on_disk_bytes(n)`` hears of the
    bytes read from the disk. ``.zst`` needs the ``zstandard`` package. A compressed file that
    cannot be decompressed raises CompressedInputError as it is read."""
    raw = _CountingReader(open(path, "rb"), on_disk_bytes)  # noqa: SIM115 (the caller closes it)
    suffix = Path(path).suffix.lower()
    name = os.fspath(path)
    try:
        if suffix == ".gz":
            return cast(BinaryIO, _Decompressing(cast(BinaryIO, _OwningGzipFile(raw)), raw, name))
        if suffix == ".xz":
            return cast(BinaryIO, _Decompressing(cast(BinaryIO, _OwningLZMAFile(raw)), raw, name))
        if suffix == ".zst":
            try:
                import zstandard  # noqa: F401
            except ImportError:
                raise ImportError(f"{path}: reading .zst files needs the zstandard package (pip install zstandard)") from None
            return cast(BinaryIO, _Decompressing(_ZstdReader(raw), raw, name))
    except BaseException:
        raw.close()
        raise
    return raw  # type: ignore[return-value]


def iter_file_text(path: str | os.PathLike[str], on_disk_bytes: Callable[[int], None] | None = None) -> Iterator[str]:
    """The decompressed text of ``path`` in blocks; CorpusDecodeError names the path and the
    offset of the first bad byte in the decompressed text. A damaged compressed file raises its
    decompressor's error (``gzip.BadGzipFile``, ``lzma.LZMAError``, ``zstandard.ZstdError``)."""
    with open_binary(path, on_disk_bytes) as file:
        yield from _decode_blocks(file, os.fspath(path), _READ_BYTES, None)


def text_pieces(blocks: Iterable[str], last_safe_cut: Callable[[str], int]) -> Iterator[str]:
    """The text of ``blocks`` (one document cut anywhere) as pieces cut only where a cut changes
    no pre-token (``last_safe_cut``, the engine's ``Pretokenizer.last_safe_cut``): counting the
    pieces one by one gives the counts of the whole text."""
    held = ""
    for block in blocks:
        held += block
        cut = last_safe_cut(held)
        if cut:
            yield held[:cut]
            held = held[cut:]
    if held:
        yield held


def content_sha256(path: str | os.PathLike[str]) -> tuple[str, int]:
    """The sha256 (hex) of the decompressed content of ``path``, and its length in bytes."""
    digest = hashlib.sha256()
    size = 0
    with open_binary(path) as file:
        while block := file.read(1 << 22):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def corpus_identity(hashes: Sequence[str]) -> str:
    """A corpus's identity from its files' content hashes: the one hash for one file (so a file
    keeps the identity it always had), else the sha256 of the sorted hashes, one per line."""
    if len(hashes) == 1:
        return hashes[0]
    return hashlib.sha256(("bpestore corpus of files\n" + "\n".join(sorted(hashes))).encode()).hexdigest()


class CorpusFiles:
    """The files of a corpus (see :func:`expand_inputs`) with their identity and sizes."""

    def __init__(self, sources: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> None:
        self.paths = expand_inputs(sources)
        self._hashed: list[tuple[Path, str, int]] | None = None

    @property
    def disk_bytes(self) -> int:
        """The files' sizes on disk (compressed where they are): the progress bar's total."""
        return sum(path.stat().st_size for path in self.paths)

    def hashed(self) -> list[tuple[Path, str, int]]:
        """Each file with the sha256 (hex) of its (decompressed) content and that content's
        length: :func:`content_sha256`, each file read once, then remembered."""
        if self._hashed is None:
            self._hashed = [(path, *content_sha256(path)) for path in self.paths]
        return self._hashed

    def identity(self) -> tuple[str, int]:
        """:func:`corpus_identity` of the files' contents and their total (decompressed) length
        in bytes (see :meth:`hashed`)."""
        hashed = self.hashed()
        return corpus_identity([digest for _, digest, _ in hashed]), sum(size for _, _, size in hashed)

    def describe(self) -> str:
        """Where the corpus was read from: the resolved path of one file, else a JSON list of them."""
        if len(self.paths) == 1:
            return str(self.paths[0].resolve())
        return json.dumps([str(path.resolve()) for path in self.paths], ensure_ascii=False)


# Where a list of Dask inputs (``PATH PATH ...``, absolute paths or URLs) starts each item.
_NEXT_DASK_INPUT = re.compile(r" (?=/|[A-Za-z][A-Za-z0-9+.-]*://)")

# How a table marks counts made elsewhere, by the corpus's origin (``corpora.origin``).
_ORIGIN_MARKERS = {"files": "", "counts": "counts: ", "dask": "counts: dask: "}


def stored_corpus_paths(stored: str, origin: str | None = "files") -> tuple[str, list[str]]:
    """A stored corpus path (the ``corpora.path`` column) taken apart: the marker that says, by
    its ``origin`` (``corpora.origin``), the counts were made elsewhere (``counts: ``,
    ``counts: dask: ``, or ``""``) and the files or URLs, one for a single file, several for
    :meth:`CorpusFiles.describe`'s JSON list or the space-separated inputs of a Dask count."""
    kind = _ORIGIN_MARKERS.get(origin or "files", f"{origin}: ")
    if stored.startswith("["):
        try:
            listed = json.loads(stored)
        except ValueError:
            listed = None
        if isinstance(listed, list) and listed and all(isinstance(path, str) for path in listed):
            return kind, listed
    elif origin == "dask":
        return kind, _NEXT_DASK_INPUT.split(stored)
    return kind, [stored]


def short_corpus_path(stored: str, origin: str | None = "files") -> str:
    """A stored corpus path shortened for a table: the file name, ``a.txt +2 files`` for several
    (see :func:`stored_corpus_paths`), marked ``counts: `` or ``counts: dask: `` by its ``origin``."""
    kind, paths = stored_corpus_paths(stored, origin)
    name = paths[0].rstrip("/").rsplit("/", 1)[-1] or paths[0]
    more = len(paths) - 1
    return kind + name + (f" +{more} file{'s' if more != 1 else ''}" if more else "")
