"""The seam of the encoder: what a :class:`~bpestore.Tokenizer` needs from its BPE engine.

Today the engine is the compiled ``bpestore._engine.Encoder`` (crates/encode, typed in
``bpestore/_engine.pyi``); any other implementation of :class:`EncoderEngine` plugs in the same way.

The contract: built from a :class:`~bpestore.BPEModel`'s vocab, merges, special token ids, pattern
and merge rule, an engine gives exactly the ids of ``reference_encode`` in tests/reference.py (and
of tiktoken, for the ``"token"`` rule): special tokens found longest first are their own ids, the
text between them is pre-tokenized by the pattern and each pre-token merged by the merge rule.
It is safe to use from several threads at once. ``stream()`` returns ids that equal the whole
text's however the text is cut into pieces; ``decode_bytes`` raises ValueError naming the first id
not in the vocabulary; invalid UTF-8 in a file raises ``CorpusDecodeError`` with its offset. A
pattern that fails on the text (it gives up on a match at a regex engine's backtracking limit, or
its matches leave some text uncovered) raises ``PatternError`` naming the byte offset (in the text, in text I of a batch as ``"text I: ..."``, in the stream, or
in the file as ``"PATH: ..."``), from every method, never anything else, and leaves no output file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol


class StreamEngine(Protocol):
    def feed(self, text: str) -> list[int]:
        """The ids of the text fed so far, up to the last place what follows cannot change."""

    def finish(self) -> list[int]:
        """The ids of the rest."""


class NpyWriter(Protocol):
    def write(self, ids: bytes) -> None:
        """Appends ids given as the bytes of little-endian uint32s."""

    def finish(self) -> int:
        """Writes the ``.npy`` header and puts the file on disk; returns the number of ids."""


class EncoderEngine(Protocol):
    def encode(self, text: str, allowed_special: str | Iterable[str] | None = None) -> list[int]: ...

    def encode_dropout(
        self, text: str, dropout: float, seed: int, allowed_special: str | Iterable[str] | None = None, text_index: int = 0
    ) -> list[int]:
        """The ids with BPE-dropout (the rule of crates/encode/src/dropout.rs and tests/reference.py's
        ``reference_encode_dropout``): ValueError for ``dropout`` outside [0, 1) or ``seed``
        outside [0, 2**64), TypeError for a ``seed`` that is no int."""

    def encode_batch_dropout(
        self,
        texts: Iterable[str],
        dropout: float,
        seed: int,
        num_threads: int | None = None,
        allowed_special: str | Iterable[str] | None = None,
    ) -> list[list[int]]:
        """``encode_dropout`` of each text, its index in ``texts`` as ``text_index``."""

    def encode_to_buffer(self, text: str, allowed_special: str | Iterable[str] | None = None) -> memoryview:
        """The ids as native uint32s, in a writable view NumPy may take over without a copy."""

    def encode_batch(
        self, texts: Iterable[str], num_threads: int | None = None, allowed_special: str | Iterable[str] | None = None
    ) -> list[list[int]]: ...

    def encode_with_offsets(
        self, text: str, allowed_special: str | Iterable[str] | None = None, trim_offsets: bool | None = None
    ) -> tuple[list[int], list[tuple[int, int]]]:
        """The ids and each token's ``(start, end)`` character span (see Tokenizer.encode_with_offsets)."""

    @property
    def max_id(self) -> int: ...

    @property
    def npy_dtype(self) -> str:
        """The ``.npy`` element type of the ids: ``"uint16"`` when every id fits, else ``"uint32"``."""

    def decode_bytes(self, ids: Iterable[int]) -> bytes: ...

    def pack_warm(self, pieces: list[bytes], limit: int) -> tuple[bytes, int]:
        """The packed warm table of ``pieces`` (most useful first, the first ``limit`` of 2 to 64
        bytes kept, each once), each merged as in a text (see bpestore/encode/warm.py); and how
        many pieces it holds."""

    def load_warm(self, data: bytes) -> int:
        """Takes a warm table made by ``pack_warm`` of the same model; returns its pieces.
        ValueError saying what is wrong with it."""

    @property
    def warm_len(self) -> int:
        """How many pieces the warm table holds (0 without one)."""

    @property
    def fingerprint(self) -> str:
        """The fingerprint of the model (what a piece's ids depend on) that a warm table carries."""

    def stream(
        self, block_bytes: int = ..., allowed_special: str | Iterable[str] | None = None, dropout: float | None = None,
        seed: int | None = None,
    ) -> StreamEngine: ...

    def iter_ids(
        self, iterable: Iterable[str], block_bytes: int = ..., allowed_special: str | Iterable[str] | None = None,
        dropout: float | None = None, seed: int | None = None,
    ) -> Iterator[int]:
        """The ids of the pieces' concatenation one by one, reading pieces as ids are used."""

    def npy_writer(self, path: str | os.PathLike[str]) -> NpyWriter:
        """A new ``.npy`` file at ``path`` for this vocabulary's ids, written a block at a time."""

    def encode_file_to_npy(
        self,
        path: str | os.PathLike[str],
        output: str | os.PathLike[str],
        threads: int | None = None,
        progress: Callable[[int], object] | None = None,
        chunk_bytes: int = ...,
        dropout: float | None = None,
        seed: int | None = None,
    ) -> int:
        """A UTF-8 file's ids into a 1-D ``.npy`` file; returns the number of ids."""
