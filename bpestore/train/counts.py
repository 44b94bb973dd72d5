"""Pre-token counts as a value of their own: counted anywhere, added up in any order, stored.

Training is a map-reduce: counting the pre-tokens of a corpus splits into independent shards
(files, or byte ranges of files), whose counts add up to the corpus's; only the merge loop needs
one machine. This module is the part that does not depend on who runs the shards:

- :func:`count_shard`: the counts of one shard (a path or URL, a byte range of one, a file
  object, or bytes), a pure function of the shard, the pattern and the special tokens. Byte
  ranges move to safe cuts (where a cut changes no pre-token and no special token), so the
  counts of the ranges ``[0, a), [a, b), ..., [z, size)`` always sum to the whole file's.
- :class:`Counts`: the engine's counts with the pattern and special tokens they were made with.
  They add up (:meth:`Counts.merge`, in any order) only with counts made the same way, prune
  (:meth:`Counts.pruned`), split by hash for a reduce over several machines (:meth:`Counts.split`),
  and serialise as three flat arrays (pickling, Arrow, Parquet), never as millions of Python
  objects.
- Reading counts made elsewhere (Spark, Ray, sentencepiece's ``word<TAB>count`` files):
  :func:`read_counts`, :func:`read_parquet`, :func:`read_tsv`; training on them:
  :func:`train_bpe_from_counts` (and ``Store.train_from_counts``, ``bpestore train --counts``).

Arrow and Parquet need ``pyarrow``, URLs need ``fsspec`` (both in the ``dask`` extra).
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..engine import PretokenCounts, Pretokenizer
from ..atomic import atomic_path
from ..engine import count_file as engine_count_file
from ..engine import count_texts as engine_count_texts
from ..errors import BpestoreError, CorpusDecodeError
from ..pretokenize.corpus import check_corpus_path
from ..pretokenize.inputs import is_compressed, open_binary, text_pieces
from ..pretokenize.patterns import GPT2_PATTERN
from . import trainer

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy as np  # (imported where it runs: commands that do not encode, `train` among them, never load it)
    import pyarrow

__all__ = [
    "Counts", "CountsFileError", "CountsMismatchError", "count_shard", "read_counts", "read_parquet", "read_tsv",
    "safe_cut", "train_bpe_from_counts",
]

#: Schema metadata keys of a Parquet file written by :meth:`Counts.to_parquet`.
PATTERN_KEY = b"bpestore.pattern"
SPECIAL_TOKENS_KEY = b"bpestore.special_tokens"

#: Column names read as the pre-tokens (the first one present), then the counts.
PRETOKEN_COLUMNS = ("pretoken", "word", "token", "piece")
COUNT_COLUMN = "count"

# How much of a file is read at once when looking for a cut (as the engine's cut.rs does).
# How much of a shard is read and decoded at once.
_READ_BYTES = 1 << 20


class CountsMismatchError(BpestoreError, ValueError):
    """Counts made with another pattern or other special tokens than those they meet (adding them
    up, or training with other special tokens): their pre-tokens are not comparable."""


class CountsFileError(BpestoreError, ValueError):
    """A counts file (Parquet or TSV) that is not well formed; ``path`` and, for a text file,
    ``line`` (1-based) say where."""

    def __init__(self, path: str | os.PathLike[str], message: str, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.detail = message
        where = self.path if line is None else f"{self.path}, line {line}"
        super().__init__(f"{where}: {message}")

    def __reduce__(self) -> tuple[type[CountsFileError], tuple[str, str, int | None]]:  # so that it crosses process boundaries intact
        return type(self), (self.path, self.detail, self.line)


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401 - imported for pyarrow.parquet below
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("reading and writing Arrow or Parquet counts needs pyarrow: pip install 'bpestore[dask]'") from None
    return pyarrow


class Counts(Mapping[bytes, int]):
    """How often each pre-token occurs in some text (a shard, a corpus), with the pattern and the
    special tokens it was cut with. A read-only mapping of pre-token bytes to counts.

    ``table`` is the engine's :class:`~bpestore._engine.PretokenCounts`. Counts made with another
    pattern or other special tokens (compared as a set: their order does not change counting)
    never add up: :class:`CountsMismatchError`.

    >>> a = count_shard(b"the cat and the hat", special_tokens=[])
    >>> b = count_shard(b" the end", special_tokens=[])
    >>> a.merge(b)
    >>> a[b" the"], a.total
    (2, 7)
    """

    __slots__ = ("origin", "pattern", "source", "special_tokens", "table")

    def __init__(
        self,
        table: PretokenCounts | None = None,
        pattern: str = GPT2_PATTERN,
        special_tokens: Sequence[str] = (),
        source: str | None = None,
        origin: str = "counts",
    ) -> None:
        if isinstance(special_tokens, str):
            raise TypeError("special_tokens must be a list of strings, not one string")
        if table is not None and not isinstance(table, PretokenCounts):
            # A dict would seem to work until its first use (AttributeError deep inside).
            raise TypeError(
                f"Counts takes the engine's PretokenCounts, not {type(table).__name__}; "
                "for a mapping of pre-token bytes to counts use bpestore.train.counts.as_counts(mapping)"
            )
        self.table = PretokenCounts() if table is None else table
        self.pattern = pattern
        self.special_tokens: tuple[str, ...] = tuple(special_tokens)
        #: Where the counts came from (a counts file, a Dask count's inputs), for the store; None
        #: if unknown.
        self.source = source
        #: How they were made, for the store (``corpora.origin``): ``counts`` (given as counts:
        #: read from a file, made in Python) or ``dask`` (counted on a Dask cluster).
        self.origin = origin

    # -- a mapping ------------------------------------------------------------------------------

    def __getitem__(self, pretoken: bytes) -> int:
        return self.table[pretoken]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.table)

    def __len__(self) -> int:
        return len(self.table)

    def __contains__(self, pretoken: object) -> bool:
        return pretoken in self.table

    @property
    def total(self) -> int:
        """The number of pre-token occurrences (the sum of the counts)."""
        return self.table.total

    @property
    def text_bytes(self) -> int:
        """The bytes of text these counts cover (special tokens not included): the sum of each
        pre-token's length times its count."""
        import numpy as np
        _data, offsets, counts = self.to_arrays()
        return int(np.dot(np.diff(offsets).astype(np.uint64), counts)) if len(counts) else 0

    def __repr__(self) -> str:
        return f"<Counts: {len(self)} distinct pre-tokens, {self.total} in all, special tokens {list(self.special_tokens)}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Counts):
            return NotImplemented
        if not self.same_kind(other) or len(self) != len(other) or self.total != other.total:
            return False
        return self.table.to_arrays(sorted=True) == other.table.to_arrays(sorted=True)

    __hash__ = None  # type: ignore[assignment]  # mutable (merge)

    # -- adding up -----------------------------------------------------------------------------

    def same_kind(self, other: Counts) -> bool:
        """Whether ``other`` was made with the same pattern and special tokens (in any order)."""
        return self.pattern == other.pattern and set(self.special_tokens) == set(other.special_tokens)

    def check_same_kind(self, other: Counts) -> None:
        """:class:`CountsMismatchError` unless ``other`` :meth:`same_kind` as these."""
        if self.pattern != other.pattern:
            raise CountsMismatchError(
                f"cannot add up counts made with different pre-tokenizer patterns ({self.pattern!r} and {other.pattern!r})"
            )
        if set(self.special_tokens) != set(other.special_tokens):
            raise CountsMismatchError(
                "cannot add up counts made with different special tokens "
                f"({list(self.special_tokens)} and {list(other.special_tokens)})"
            )

    def merge(self, other: Counts) -> None:
        """Adds ``other``'s counts to these (in place); CountsMismatchError if it was made with
        another pattern or other special tokens."""
        if not isinstance(other, Counts):
            raise TypeError(f"can only add Counts to Counts, not {type(other).__name__}")
        self.check_same_kind(other)
        if self.total + other.total >= 1 << 64:  # the engine's 64-bit counts would wrap around
            raise ValueError("the counts add up to 2**64 or more, more than a count can hold")
        self.table.merge(other.table)

    def __add__(self, other: Counts) -> Counts:
        result = self.copy()
        result.merge(other)
        return result

    @classmethod
    def sum(cls, counts: Iterable[Counts]) -> Counts:
        """The sum of some counts, all of one kind (ValueError for none at all): the biggest is
        added to, the others into it."""
        items = list(counts)
        if not items:
            raise ValueError("no counts to add up")
        items.sort(key=len, reverse=True)
        result = items[0].copy()
        for other in items[1:]:
            result.merge(other)
        return result

    def copy(self) -> Counts:
        return Counts(self.table.copy(), self.pattern, self.special_tokens, self.source, self.origin)

    def pruned(self, min_count: int) -> Counts:
        """The pre-tokens counted at least ``min_count`` times (a rare pre-token hardly changes
        the merges, but the rare ones are most of them: pruning bounds memory)."""
        if not isinstance(min_count, int) or min_count < 1:
            raise ValueError(f"min_count must be a positive integer, got {min_count!r}")
        source = None if self.source is None else f"{self.source} (min_count={min_count})"
        return Counts(self.table.pruned(min_count), self.pattern, self.special_tokens, source, self.origin)

    def split(self, parts: int) -> list[Counts]:
        """These counts in ``parts`` disjoint pieces by a hash of each pre-token: a pre-token
        always lands in the same piece, so piece ``i`` of many counts can be added up apart from
        the other pieces (and pruned exactly)."""
        if not isinstance(parts, int) or parts < 1:
            raise ValueError(f"parts must be a positive integer, got {parts!r}")
        return [Counts(table, self.pattern, self.special_tokens) for table in self.table.split(parts)]

    # -- flat arrays, pickling, identity ---------------------------------------------------------

    def to_arrays(self, sorted: bool = False) -> tuple[bytes, np.ndarray, np.ndarray]:
        """``(data, offsets, counts)``: the pre-tokens' bytes end to end, ``len + 1`` int64
        offsets (pre-token ``i`` is ``data[offsets[i]:offsets[i + 1]]``) and the uint64 counts;
        ``sorted``: in byte order of the pre-tokens (canonical)."""
        import numpy as np
        data, offsets, counts = self.table.to_arrays(sorted=sorted)
        return data, np.frombuffer(offsets, dtype="<i8"), np.frombuffer(counts, dtype="<u8")

    @classmethod
    def from_arrays(
        cls,
        data: bytes | bytearray | memoryview,
        offsets: Any,
        counts: Any,
        *,
        pattern: str = GPT2_PATTERN,
        special_tokens: Sequence[str] = (),
    ) -> Counts:
        """Counts from :meth:`to_arrays`'s arrays (offsets and counts any integer arrays; a
        pre-token given twice gets the sum). ValueError for negative counts or offsets that do
        not fit the data."""
        import numpy as np
        offsets = np.asarray(offsets)
        counts = np.asarray(counts)
        if counts.size and counts.dtype.kind == "i" and counts.min() < 0:
            raise ValueError(f"counts must not be negative, got {int(counts.min())}")
        if counts.dtype.kind not in "iu" or offsets.dtype.kind not in "iu":
            raise ValueError(f"offsets and counts must be integers, got {offsets.dtype} and {counts.dtype}")
        if offsets.size and offsets.dtype.kind == "i" and offsets.min() < 0:
            raise ValueError("offsets must not be negative")
        table = PretokenCounts.from_arrays(
            bytes(data) if not isinstance(data, (bytes, bytearray)) else data,
            np.ascontiguousarray(offsets, dtype="<u8").tobytes(),
            np.ascontiguousarray(counts, dtype="<u8").tobytes(),
        )
        return cls(table, pattern, special_tokens)

    def __reduce__(self) -> tuple[Any, ...]:
        # Three bytes objects, never a dict: unpickling millions of Python objects is what makes
        # a plain dict slow to move between Dask workers.
        return _rebuild, (self.pattern, self.special_tokens, self.source, *self.table.to_arrays(), self.origin)

    def sha256(self) -> str:
        """The identity of the counts themselves (hex): a hash of the sorted pre-tokens and their
        counts; equal counts have it whatever order they were made in. (Pattern and special
        tokens are not part of it: the store keeps them beside it.)"""
        data, offsets, counts = self.table.to_arrays(sorted=True)
        digest = hashlib.sha256(b"bpestore pretoken counts v1\n")
        for part in (offsets, data, counts):
            digest.update(len(part).to_bytes(8, "little"))
            digest.update(part)
        return digest.hexdigest()

    # -- Arrow, Parquet, TSV -------------------------------------------------------------------

    def to_arrow(self, sorted: bool = False) -> pyarrow.Table:
        """A table of two columns, ``pretoken`` (large_binary) and ``count`` (uint64), built on
        the flat arrays without a Python object per row; the pattern and special tokens are in
        its schema's metadata."""
        pa = _pyarrow()
        data, offsets, counts = self.to_arrays(sorted=sorted)
        pretokens = pa.Array.from_buffers(pa.large_binary(), len(counts), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        metadata = {PATTERN_KEY: self.pattern.encode(), SPECIAL_TOKENS_KEY: json.dumps(list(self.special_tokens)).encode()}
        return pa.table({"pretoken": pretokens, COUNT_COLUMN: pa.array(counts, type=pa.uint64())}).replace_schema_metadata(metadata)

    def to_parquet(self, path: str | os.PathLike[str], **options: Any) -> None:
        """Writes the counts to a Parquet file (see :meth:`to_arrow`; sorted, which compresses
        better and makes equal counts give equal files). ``options`` go to
        ``pyarrow.parquet.write_table``. The file appears only once complete (written beside it
        and renamed): a failure part-way leaves no partial file."""
        pa = _pyarrow()
        with atomic_path(path) as temporary:
            pa.parquet.write_table(self.to_arrow(sorted=True), os.fspath(temporary), **options)

    @classmethod
    def from_arrow(
        cls,
        table: pyarrow.Table,
        *,
        pattern: str | None = None,
        special_tokens: Sequence[str] | None = None,
        source: str = "the table",
    ) -> Counts:
        """Counts from an Arrow table: a column of pre-tokens (``pretoken``, ``word``, ``token``
        or ``piece``; binary or string) and a ``count`` column of integers, as Spark, Ray or
        :meth:`to_arrow` write them. The pattern and special tokens come from the table's
        metadata when it has them (CountsMismatchError if ``pattern``/``special_tokens`` say
        otherwise), else from the arguments (default: GPT-2's pattern, no special tokens).
        CountsFileError for missing columns, nulls or negative counts."""
        import numpy as np
        pa = _pyarrow()
        metadata = table.schema.metadata or {}
        pattern, special_tokens = _kind_from_metadata(metadata, pattern, special_tokens, source)
        names = table.column_names
        pretoken_name = next((name for name in PRETOKEN_COLUMNS if name in names), None)
        if pretoken_name is None or COUNT_COLUMN not in names:
            raise CountsFileError(
                source, f"needs a pre-token column ({' or '.join(PRETOKEN_COLUMNS)}) and a {COUNT_COLUMN!r} column, has {names}"
            )
        pretokens = table.column(pretoken_name)
        counts = table.column(COUNT_COLUMN)
        if not (pa.types.is_binary(pretokens.type) or pa.types.is_large_binary(pretokens.type)
                or pa.types.is_string(pretokens.type) or pa.types.is_large_string(pretokens.type)):
            raise CountsFileError(source, f"column {pretoken_name!r} must hold strings or bytes, not {pretokens.type}")
        if not pa.types.is_integer(counts.type):
            raise CountsFileError(source, f"column {COUNT_COLUMN!r} must hold integers, not {counts.type}")
        if pretokens.null_count or counts.null_count:
            raise CountsFileError(source, f"columns {pretoken_name!r} and {COUNT_COLUMN!r} must not hold nulls")
        # string and binary share their layout: the cast reinterprets, it does not copy.
        pretokens = pretokens.cast(pa.large_binary()).combine_chunks()
        _validity, offsets_buffer, data_buffer = pretokens.buffers()
        offsets = np.frombuffer(offsets_buffer, dtype="<i8")[pretokens.offset : pretokens.offset + len(pretokens) + 1]
        data = data_buffer.to_pybytes() if data_buffer is not None else b""
        count_values = counts.combine_chunks().to_numpy(zero_copy_only=False)
        if count_values.size and count_values.dtype.kind == "i" and count_values.min() < 0:
            row = int(np.argmax(count_values < 0))
            raise CountsFileError(source, f"row {row}: a count must not be negative, got {int(count_values[row])}")
        return cls.from_arrays(data, offsets, count_values, pattern=pattern, special_tokens=special_tokens)


def _rebuild(
    pattern: str, special_tokens: Sequence[str], source: str | None, data: bytes, offsets: bytes, counts: bytes, origin: str = "counts"
) -> Counts:
    return Counts(PretokenCounts.from_arrays(data, offsets, counts), pattern, special_tokens, source, origin)


def _kind_from_metadata(
    metadata: Mapping[bytes, bytes], pattern: str | None, special_tokens: Sequence[str] | None, source: str
) -> tuple[str, list[str]]:
    stored_pattern = metadata.get(PATTERN_KEY)
    stored_specials = metadata.get(SPECIAL_TOKENS_KEY)
    if stored_pattern is not None:
        if pattern is not None and pattern != stored_pattern.decode():
            raise CountsMismatchError(f"{source}: the counts were made with the pattern {stored_pattern.decode()!r}, not {pattern!r}")
        pattern = stored_pattern.decode()
    if stored_specials is not None:
        stored = json.loads(stored_specials)
        if special_tokens is not None and set(special_tokens) != set(stored):
            raise CountsMismatchError(
                f"{source}: the counts were made with the special tokens {stored}, not {list(special_tokens)}"
            )
        special_tokens = stored if special_tokens is None else list(special_tokens)
    return pattern or GPT2_PATTERN, list(special_tokens or [])


def read_parquet(
    path: str | os.PathLike[str], *, pattern: str | None = None, special_tokens: Sequence[str] | None = None
) -> Counts:
    """Counts from a Parquet file (or a directory of them, as Spark writes; a URL through fsspec):
    see :meth:`Counts.from_arrow` for the columns and the pattern and special tokens."""
    pa = _pyarrow()
    try:
        table = pa.parquet.read_table(os.fspath(path))
    except (pa.ArrowInvalid, OSError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise CountsFileError(path, f"not a Parquet file of counts ({error})") from None
    counts = Counts.from_arrow(table, pattern=pattern, special_tokens=special_tokens, source=os.fspath(path))
    counts.source = _where(path)
    return counts


def read_tsv(
    path: str | os.PathLike[str], *, pattern: str = GPT2_PATTERN, special_tokens: Sequence[str] = ()
) -> Counts:
    """Counts from a UTF-8 text file of ``word<TAB>count`` lines (as sentencepiece and others
    write word counts): the word is everything before the line's last tab, taken as it is; empty
    lines are skipped; a word given twice gets the sum. CountsFileError names the file and line
    of a line without a tab or with a count that is not a non-negative integer;
    CorpusDecodeError the offset of bad UTF-8."""
    import numpy as np
    raw = Path(path).read_bytes() if "://" not in os.fspath(path) else _read_url(os.fspath(path))
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CorpusDecodeError(path, error.start, error.reason) from None
    words: list[bytes] = []
    counts: list[int] = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line:
            continue
        word, tab, count_text = line.rpartition(b"\t")
        if not tab:
            raise CountsFileError(path, "expected word<TAB>count, found no tab", line=number)
        text = count_text.strip()
        if not text.isdigit():
            what = "negative" if text.startswith(b"-") and text[1:].isdigit() else "not an integer"
            raise CountsFileError(path, f"the count {count_text.decode()!r} is {what}: expected a non-negative integer", line=number)
        words.append(word)
        counts.append(int(text))
    lengths = np.fromiter((len(word) for word in words), dtype=np.int64, count=len(words))
    offsets = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if any(count >= 1 << 64 for count in counts):
        raise CountsFileError(path, "a count is 2**64 or more")
    result = Counts.from_arrays(
        b"".join(words), offsets, np.array(counts, dtype=np.uint64), pattern=pattern, special_tokens=special_tokens
    )
    result.source = _where(path)
    return result


def read_counts(
    path: str | os.PathLike[str], *, pattern: str | None = None, special_tokens: Sequence[str] | None = None
) -> Counts:
    """Counts from a file: Parquet (``.parquet``/``.pq``, or a directory of Parquet files, a path
    or a URL), else a ``word<TAB>count`` text file (:func:`read_tsv`)."""
    text = os.fspath(path)
    if "://" not in text and not Path(text).exists():
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", text)
    if text.rstrip("/").lower().endswith((".parquet", ".pq")) or _is_directory(text):
        return read_parquet(path, pattern=pattern, special_tokens=special_tokens)
    return read_tsv(path, pattern=pattern or GPT2_PATTERN, special_tokens=special_tokens or ())


def _is_directory(text: str) -> bool:
    """Whether a path or an fsspec URL names a directory. Ray writes its Parquet parts into the
    directory it is given, whatever its name (``s3://bucket/counts``): by the name alone such a
    URL would be read as one TSV file."""
    if "://" not in text:
        return Path(text).is_dir()
    import fsspec

    filesystem, inner = fsspec.core.url_to_fs(text)
    is_directory: bool = filesystem.isdir(inner)  # (fsspec ships no types)
    return is_directory


def _where(path: str | os.PathLike[str]) -> str:
    """How the store names where counts were read from: a URL as given, a path made absolute."""
    text = os.fspath(path)
    return text if "://" in text else os.path.abspath(text)


def _read_url(url: str) -> bytes:
    import fsspec

    with fsspec.open(url, "rb", compression="infer") as file:
        data: bytes = file.read()  # (fsspec ships no types)
        return data


# -- counting one shard ---------------------------------------------------------------------------


def _read_exactly(file: IO[bytes], size: int) -> bytes:
    parts = []
    while size > 0:
        data = file.read(size)
        if not data:
            break
        parts.append(data)
        size -= len(data)
    return b"".join(parts)


def safe_cut(file: IO[bytes], size: int, target: int, cutter: Pretokenizer) -> int:
    """The first safe cut at or after byte ``target`` of a seekable file of ``size`` bytes
    (0 for a target at or before the start, ``size`` when there is no cut after it): the place
    a shard that starts or ends at ``target`` really starts or ends. The engine's rule
    (``Pretokenizer.find_cut``, the one its own chunks of a file are cut by), reading windows of
    about 64 KiB around the target through this file."""

    def read(start: int, end: int) -> bytes:
        file.seek(start)
        return _read_exactly(file, end - start)

    return cutter.find_cut(size, max(target, 0), read)


def _decoded(file: IO[bytes], name: str, base: int, length: int | None) -> Iterator[str]:
    """The text of ``length`` bytes of ``file`` (to its end if None), block by block;
    CorpusDecodeError names the offset of the first bad byte, ``base`` being that of the first."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = base
    left = length
    while True:
        data = file.read(_READ_BYTES if left is None else min(_READ_BYTES, left))
        try:
            text = decoder.decode(data, final=not data)
        except UnicodeDecodeError as error:
            held = len(error.object) - len(data)  # bytes the decoder kept from the block before
            raise CorpusDecodeError(name, offset - held + error.start, error.reason) from None
        if text:
            yield text
        if not data:
            return
        offset += len(data)
        if left is not None:
            left -= len(data)


def _open_source(source: str | os.PathLike[str]) -> IO[bytes]:
    text = os.fspath(source)
    if "://" in text:
        import fsspec

        opened: IO[bytes] = fsspec.open(text, "rb", compression="infer").open()  # (fsspec ships no types)
        return opened
    path = check_corpus_path(source)
    return open_binary(path) if is_compressed(path) else open(path, "rb")  # noqa: SIM115 (the caller closes it)


def _size_of(file: IO[bytes]) -> int:
    size = file.seek(0, io.SEEK_END)
    file.seek(0)
    return size


def count_shard(
    source: str | os.PathLike[str] | bytes | bytearray | memoryview | IO[bytes],
    start: int = 0,
    end: int | None = None,
    *,
    pattern: str = GPT2_PATTERN,
    special_tokens: Sequence[str] = (),
) -> Counts:
    """The pre-token counts of one shard of a corpus: the UTF-8 text of ``source`` (a path, an
    fsspec URL such as ``s3://bucket/part-0001.txt`` or an fsspec ``OpenFile``, a binary file
    object that can seek, or bytes), from byte ``start`` to byte ``end`` (None: the end), each moved to the first safe cut
    at or after it (:func:`safe_cut`). So the shards ``[0, a), [a, b), ..., [z, None)`` of a file
    count every pre-token exactly once, and their counts sum to the whole file's. Compressed files
    (``.gz``, ``.xz``, ``.zst``) cannot seek: they are counted whole (``start`` 0, ``end`` None).

    A pure function of its arguments: the same shard gives the same counts on any machine.
    Raises FileNotFoundError, CorpusDecodeError (the offset in the file), ValueError."""
    special_tokens = trainer.check_special_tokens(special_tokens)
    if not isinstance(start, int) or start < 0 or (end is not None and (not isinstance(end, int) or end < start)):
        raise ValueError(f"a shard is a byte range start <= end, got start={start!r}, end={end!r}")
    cutter = Pretokenizer(pattern, special_tokens)  # ValueError for a bad pattern, before reading
    counts = Counts(None, pattern, special_tokens)
    if isinstance(source, (bytes, bytearray, memoryview)):
        name = "<bytes>"
        file: IO[bytes] = io.BytesIO(bytes(source))
        owned = True
    elif isinstance(source, (str, os.PathLike)):
        name = os.fspath(source)
        local_plain = "://" not in name and not is_compressed(name)
        if local_plain and start == 0 and end is None:
            # The whole of a plain local file: the engine reads it itself (no decoding here).
            counts.table = engine_count_file(check_corpus_path(source), pattern, special_tokens, 1)
            return counts
        if (start or end is not None) and is_compressed(name):
            raise ValueError(f"{name}: a compressed file cannot be read from the middle; count it whole (start=0, end=None)")
        file = _open_source(source)
        owned = True
    elif not hasattr(source, "read") and hasattr(source, "open"):  # an fsspec OpenFile
        name = getattr(source, "path", "<fsspec file>")
        if (start or end is not None) and getattr(source, "compression", None):
            raise ValueError(f"{name}: a compressed file cannot be read from the middle; count it whole (start=0, end=None)")
        file = source.open()
        owned = True
    else:
        name = str(getattr(source, "path", None) or getattr(source, "name", "<stream>"))
        file = source
        owned = False
    try:
        if (isinstance(source, (str, os.PathLike)) and is_compressed(os.fspath(source))) or getattr(source, "compression", None):
            first, length = 0, None
        else:
            size = _size_of(file)
            first = safe_cut(file, size, start, cutter)
            last = size if end is None else safe_cut(file, size, end, cutter)
            length = max(last - first, 0)
            file.seek(first)
        pieces = text_pieces(_decoded(file, str(name), first, length), cutter.last_safe_cut)
        counts.table = engine_count_texts(pieces, pattern, special_tokens)
    finally:
        if owned:
            file.close()
    return counts


# -- training from counts -------------------------------------------------------------------------


def as_counts(
    counts: Counts | Mapping[bytes, int] | str | os.PathLike[str], *, special_tokens: Sequence[str] | None = None
) -> Counts:
    """:class:`Counts` from counts, a file of them (:func:`read_counts`), or a plain mapping of
    pre-token bytes to counts (taken to be GPT-2-pattern counts cut at ``special_tokens``)."""
    if isinstance(counts, Counts):
        return counts
    if isinstance(counts, (str, os.PathLike)):
        return read_counts(counts, special_tokens=special_tokens)
    if isinstance(counts, Mapping):
        table = counts if isinstance(counts, PretokenCounts) else PretokenCounts.from_dict(counts)
        return Counts(table, GPT2_PATTERN, special_tokens or ())
    raise TypeError(f"expected Counts, a mapping of bytes to counts or a counts file, got {type(counts).__name__}")


def check_training_specials(counts: Counts, special_tokens: Sequence[str] | None) -> list[str]:
    """The special tokens to train with: the counts' own when None, else ``special_tokens``,
    which must be the same set (CountsMismatchError: counts cut at other special tokens would
    hold pieces of them, or lack text they cut out)."""
    if special_tokens is None:
        return trainer.check_special_tokens(counts.special_tokens)
    special_tokens = trainer.check_special_tokens(special_tokens)
    if set(special_tokens) != set(counts.special_tokens):
        raise CountsMismatchError(
            f"the counts were made with the special tokens {list(counts.special_tokens)}, "
            f"not {special_tokens}: count again with these, or train with those"
        )
    return special_tokens


def train_bpe_from_counts(
    counts: Counts | Mapping[bytes, int] | str | os.PathLike[str],
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    *,
    min_count: int | None = None,
    progress: bool = False,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """:func:`~bpestore.train.trainer.train_bpe` from counts made anywhere (:class:`Counts`, a
    Parquet or ``word<TAB>count`` file, or a mapping): the same ``(vocab, merges)`` as training
    on the text they were counted from. ``special_tokens``: the counts' own by default (others
    are refused); ``min_count``: train on the pre-tokens counted at least that often.
    EmptyCorpusError for counts with nothing to train on."""
    counts = as_counts(counts, special_tokens=special_tokens)
    special_tokens = check_training_specials(counts, special_tokens)
    trainer.check_vocab_size(vocab_size, special_tokens)
    if min_count is not None:
        counts = counts.pruned(min_count)
    trainer.check_not_empty(counts, "the counts given")
    return trainer.train_from_counts(counts.table, vocab_size, special_tokens, progress=progress)
