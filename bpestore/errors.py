"""Exceptions that carry a message meant for the user (the CLI prints them without a traceback).

The Rust engine raises these same classes (it looks them up here), with the same messages.
"""

from __future__ import annotations

import os


class BpestoreError(Exception):
    """Base class of bpestore's own errors."""


class OutputError(BpestoreError, OSError):
    """An output could not be written: a full disk (ENOSPC), an I/O error (EIO), a file over its
    size limit (EFBIG), a read-only file system... ``filename`` is the output as the caller named
    it (never the temporary file it was being written to, which is removed), ``errno`` and
    ``strerror`` say why: ``cannot write ids.txt: No space left on device``."""

    def __init__(self, errno: int | None, strerror: str | None, output: str) -> None:
        super().__init__(errno, strerror, output)

    def __str__(self) -> str:
        return f"cannot write {self.filename}: {self.strerror}"


class StoreError(BpestoreError):
    """A problem with the tokenizer store."""


class NotABpestoreDatabaseError(StoreError):
    """The file or database exists but is not a bpestore store; it was left untouched."""


class DatabaseTooNewError(StoreError):
    """The database's schema revision is newer than this version of bpestore knows."""


class StoreNotFoundError(StoreError, FileNotFoundError):
    """No store at that path: a read never creates one (only writes such as training or importing do)."""


class DamagedStoreError(StoreError):
    """A bpestore database with parts of its schema missing or replaced (a table dropped, a view in
    a table's place, no schema revision); it was left untouched."""


class ReadOnlyStoreError(StoreError):
    """The store can be read but not written (a read-only file, directory or file system)."""


class StoreUnavailableError(StoreError):
    """The store cannot be used at all: its database driver is not installed, its URL is unusable,
    the disk failed or is full. The message says which."""


class StoreLockTimeoutError(StoreError):
    """Another writer held the store's write lock for longer than the lock timeout
    (``--lock-timeout``, ``BPESTORE_LOCK_TIMEOUT``, ``Store(lock_timeout=)``); nothing was
    written. ``waited``: how long this writer waited, in seconds."""

    def __init__(self, message: str, waited: float) -> None:
        super().__init__(message)
        self.waited = waited

    def __reduce__(self) -> tuple[type[StoreLockTimeoutError], tuple[str, float]]:  # so that it crosses process boundaries intact
        return type(self), (str(self), self.waited)


class TokenizerNotFoundError(StoreError, LookupError):
    """No tokenizer with that name or version."""


class InvalidReferenceError(StoreError, ValueError):
    """A tokenizer reference that is not ``name`` or ``name@N``."""


class FormatError(BpestoreError, ValueError):
    """A tokenizer file that cannot be imported (malformed or unsupported); nothing was stored."""


class EmptyCorpusError(BpestoreError, ValueError):
    """A corpus to train on that is empty or holds only special tokens: there is nothing to learn."""


class CorpusDecodeError(BpestoreError, ValueError):
    """The corpus is not valid UTF-8; ``offset`` is the first bad byte's offset in the file."""

    def __init__(self, path: str | os.PathLike[str], offset: int, reason: str) -> None:
        self.path = str(path)
        self.offset = offset
        self.reason = reason
        super().__init__(f"{self.path}: invalid UTF-8 at byte offset {offset} ({reason})")

    def __reduce__(self) -> tuple[type[CorpusDecodeError], tuple[str, int, str]]:  # so that it crosses process boundaries intact
        return type(self), (self.path, self.offset, self.reason)


class CompressedInputError(BpestoreError, ValueError):
    """A compressed input (``.gz``, ``.xz``, ``.zst``) that cannot be decompressed: not data of
    that kind, damaged, or cut short. ``offset`` is how far into the compressed file reading had
    got when the decompressor gave up."""

    def __init__(self, path: str | os.PathLike[str], offset: int, reason: str) -> None:
        self.path = str(path)
        self.offset = offset
        self.reason = reason
        super().__init__(f"{self.path}: cannot decompress it at byte {offset} of the compressed file ({reason})")

    def __reduce__(self) -> tuple[type[CompressedInputError], tuple[str, int, str]]:  # so that it crosses process boundaries intact
        return type(self), (self.path, self.offset, self.reason)


class PatternError(BpestoreError, ValueError):
    """A custom pre-tokenizer pattern failed on some text in a way that the probes at construction
    did not catch: it hit the regex engine's backtracking limit (catastrophic backtracking), or its
    matches do not cover all of the text (encoding would drop what they leave: a pattern's matches
    must tile any text). The message names the pattern and a byte offset in the text, stream or
    file: where the match that gave up started, or the first byte that no match covers (and that
    character)."""


class DisallowedSpecialTokenError(BpestoreError, ValueError):
    """Text to encode holds a special token's string that the call disallowed (tiktoken's check);
    ``token`` is that string and ``position`` its character index in the text."""

    def __init__(self, token: str, position: int) -> None:
        self.token = token
        self.position = position
        super().__init__(
            f"Encountered text corresponding to disallowed special token {token!r} at character {position}: "
            f"to encode it as that special token, allow it (allowed_special={{{token!r}, ...}}); "
            "to encode it as ordinary text, leave it out of disallowed_special "
            "(disallowed_special=() checks nothing; encode_ordinary() recognises no special token)."
        )

    # so that it crosses process boundaries intact
    def __reduce__(self) -> tuple[type[DisallowedSpecialTokenError], tuple[str, int]]:
        return DisallowedSpecialTokenError, (self.token, self.position)


class RecipeError(BpestoreError, ValueError):
    """A training recipe (:mod:`bpestore.train.recipe`) that cannot be trained as written: TOML
    that does not parse, an unknown key, a value of the wrong type, an input file whose content
    is not the one the recipe names (its sha256), or an option that contradicts it."""
