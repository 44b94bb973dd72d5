"""``Tokenizer``: encode text to ids and back with a byte-level BPE vocabulary.

Encoding and decoding run in the Rust engine (``bpestore._engine.Encoder``, crates/encode): it
cuts the text at special tokens, pre-tokenizes it with a hand-written scanner for the known
patterns (a regex for others), and merges each distinct pre-token once, by either merge rule,
remembering the ids of the pre-tokens it has seen. It is thread-safe and releases the GIL.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np

from .._engine import Encoder
from ..model import BPEModel, MergeRule
from ..pretokenize.patterns import GPT2_PATTERN
from .engine import EncoderEngine

# Distinct pre-tokens remembered by each of the engine's caches (one per thread encoding at
# once); a cache that is full starts afresh.
DEFAULT_CACHE_SIZE = 1 << 19
# encode_blocks gathers about this many characters before encoding them.
_BLOCK_CHARS = 1 << 20


class Tokenizer:
    """A byte-level BPE tokenizer.

    Args:
        vocab: id -> token bytes; must hold all 256 single bytes.
        merges: the merges in rank order, each ``(left bytes, right bytes)``.
        special_tokens: strings always encoded as one token, matched longest first; one missing
            from the vocab gets the next free id.
        pattern: the pre-tokenizer regex (GPT-2's by default).
        merge_rule: ``"pair"`` (GPT-2, CS336, Hugging Face: lowest-ranked *merge* first) or
            ``"token"`` (tiktoken: lowest-ranked resulting *token* first, whole pre-token looked up
            first; ``merges`` is then unused and a token's rank is its id).
        cache_size: how many distinct pre-tokens each encoding thread remembers.

    A tokenizer may be used from several threads at once.
    """

    def __init__(
        self,
        vocab: Mapping[int, bytes],
        merges: Sequence[tuple[bytes, bytes]],
        special_tokens: Iterable[str] | None = None,
        *,
        pattern: str = GPT2_PATTERN,
        merge_rule: MergeRule = "pair",
        cache_size: int = DEFAULT_CACHE_SIZE,
    ):
        self._start(BPEModel(vocab, merges, special_tokens, pattern, merge_rule), cache_size)

    @classmethod
    def from_model(cls, model: BPEModel, *, cache_size: int = DEFAULT_CACHE_SIZE) -> Tokenizer:
        """A tokenizer that encodes with ``model`` (checked when it was made, not again).

        >>> from bpestore import BPEModel, Tokenizer
        >>> model = BPEModel({i: bytes([i]) for i in range(256)} | {256: b"hi"}, [(b"h", b"i")])
        >>> Tokenizer.from_model(model).encode("hi hi")
        [256, 32, 256]
        """
        tokenizer = cls.__new__(cls)
        tokenizer._start(model, cache_size)
        return tokenizer

    def _start(self, model: BPEModel, cache_size: int) -> None:
        self.model = model
        self.vocab: dict[int, bytes] = model.vocab
        self.merges: list[tuple[bytes, bytes]] = model.merges
        self.pattern = model.pattern
        self.merge_rule: MergeRule = model.merge_rule
        self.special_tokens: list[str] = model.special_tokens
        self.special_ids: dict[str, int] = model.special_ids
        # The model's vocab holds the special tokens too, at their ids. The engine may treat
        # them as ordinary tokens as well: every occurrence of one in the text is cut out before
        # BPE, so no pre-token ever holds its bytes.
        # The seam of the encoder's BPE (see bpestore.encode.engine for its contract).
        self._engine: EncoderEngine = Encoder(self.vocab, self.merges, self.special_ids, self.pattern, self.merge_rule, cache_size)

    def __reduce__(self):
        # The engine is rebuilt from the model (for pickling, e.g. into worker processes).
        return Tokenizer.from_model, (self.model,)

    # -- construction from files --------------------------------------------------------------

    @classmethod
    def from_files(
        cls,
        vocab_filepath: str | os.PathLike,
        merges_filepath: str | os.PathLike,
        special_tokens: Iterable[str] | None = None,
    ) -> Tokenizer:
        """A tokenizer from GPT-2's ``vocab.json`` and ``merges.txt`` (byte-to-unicode encoded)."""
        from ..formats import gpt2

        special_tokens = list(special_tokens or ())
        vocab = gpt2.read_vocab(vocab_filepath, literal_tokens=special_tokens)
        merges = gpt2.read_merges(merges_filepath)
        return cls(vocab, merges, special_tokens)

    @classmethod
    def from_db(cls, path_or_url: str | os.PathLike, name: str) -> Tokenizer:
        """The tokenizer stored as ``name`` (latest version) or ``name@N`` in a bpestore database."""
        from ..store.loader import load_model

        return cls.from_model(load_model(path_or_url, name))

    # -- encoding -------------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``; special tokens become their own ids."""
        return self._engine.encode(text)

    def encode_to_array(self, text: str) -> np.ndarray:
        """The ids of ``text`` as a NumPy array (uint32), skipping the list of Python ints."""
        return np.frombuffer(bytearray(self._engine.encode_to_bytes(text)), dtype="<u4").astype(np.uint32, copy=False)

    def encode_batch(self, texts: Iterable[str], num_threads: int | None = None) -> list[list[int]]:
        """The ids of each text, encoded on ``num_threads`` threads (default: the CPUs), in order."""
        return self._engine.encode_batch(texts, num_threads)

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """Lazily encode a stream of text (for example a file object, line by line).

        The result equals ``encode("".join(iterable))`` however the stream is cut. Memory stays
        small and constant: text is encoded a few kilobytes at a time, each time up to the last
        place where what follows cannot change the ids, with a small cache of its own (use
        :meth:`encode` or ``bpestore encode`` for speed on big files).
        """
        stream = self._engine.stream()
        for text in iterable:
            ids = stream.feed(text)
            if ids:
                yield from ids
        yield from stream.finish()

    def encode_blocks(self, iterable: Iterable[str], block_chars: int = _BLOCK_CHARS) -> Iterator[np.ndarray]:
        """Like :meth:`encode_iterable`, but yields the ids a block at a time as arrays (uint32):
        the fast way through big streams."""
        stream = self._engine.stream(block_bytes=block_chars)
        for text in iterable:
            ids = stream.feed(text)
            if ids:
                yield np.array(ids, dtype=np.uint32)
        yield np.array(stream.finish(), dtype=np.uint32)

    # -- decoding -------------------------------------------------------------------------------

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of ``ids`` joined; ValueError naming the first id outside the vocabulary."""
        return self._engine.decode_bytes(ids)

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``; bytes that are not valid UTF-8 become U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    # -- misc -----------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def __repr__(self) -> str:
        return (
            f"Tokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)}, "
            f"special_tokens={self.special_tokens!r}, merge_rule={self.merge_rule!r})"
        )
