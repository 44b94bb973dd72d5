"""``Tokenizer``: encode text to ids and back with a byte-level BPE vocabulary.

Encoding and decoding run in the Rust engine (``bpestore._engine.Encoder``, crates/encode): it
cuts the text at special tokens, pre-tokenizes it with a hand-written scanner for the known
patterns (a regex for others), and merges each distinct pre-token once, by either merge rule,
remembering the ids of the pre-tokens it has seen. It is thread-safe and releases the GIL.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Literal

import numpy as np

from .._engine import Encoder
from ..pretokenize.patterns import GPT2_PATTERN

MergeRule = Literal["pair", "token"]

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
        self.vocab: dict[int, bytes] = dict(vocab)
        self.merges: list[tuple[bytes, bytes]] = list(merges)
        self.pattern = pattern
        self.merge_rule: MergeRule = merge_rule
        self.special_tokens: list[str] = list(dict.fromkeys(special_tokens or ()))
        for token in self.special_tokens:
            if not isinstance(token, str) or not token:
                raise ValueError(f"special tokens must be non-empty strings, got {token!r}")
        if merge_rule not in ("pair", "token"):
            raise ValueError(f"merge_rule must be 'pair' or 'token', not {merge_rule!r}")

        # A special token that is a token of the vocab keeps its id; the others get the next ids.
        wanted = {token.encode("utf-8"): token for token in self.special_tokens}
        found: dict[str, int] = {}
        if wanted:
            for token_id, token in self.vocab.items():
                if token in wanted:
                    found.setdefault(wanted[token], token_id)
        self.special_ids: dict[str, int] = {}
        added: dict[int, bytes] = {}
        next_id = max(self.vocab, default=-1) + 1
        for token in self.special_tokens:
            token_id = found.get(token)
            if token_id is None:
                token_id, next_id = next_id, next_id + 1
                added[token_id] = token.encode("utf-8")
            self.special_ids[token] = token_id
        # The engine gets the vocabulary without the added special tokens: they are not tokens
        # that BPE may produce.
        self._engine = Encoder(self.vocab, self.merges, self.special_ids, pattern, merge_rule, cache_size)
        self.vocab.update(added)
        self._added_ids = frozenset(added)

    def __reduce__(self):
        # The engine is rebuilt from the parts (for pickling, e.g. into worker processes).
        vocab = {token_id: token for token_id, token in self.vocab.items() if token_id not in self._added_ids}
        return _rebuild, (vocab, self.merges, self.special_tokens, self.pattern, self.merge_rule)

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
        from ..store.loader import load_from_sqlite

        location = os.fspath(path_or_url)
        if "://" not in location and not os.path.exists(location):
            raise FileNotFoundError(errno.ENOENT, "No such tokenizer store", location)

        parts = load_from_sqlite(path_or_url, name)
        if parts is None:
            from ..store.database import ModelStore  # upgrades an older schema, or explains what is wrong

            with ModelStore(path_or_url) as store:
                parts = store.load_parts(name)
        vocab, merges, special_tokens, pattern, merge_rule = parts
        return cls(vocab, merges, special_tokens, pattern=pattern, merge_rule=merge_rule)

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


def _rebuild(vocab, merges, special_tokens, pattern, merge_rule) -> Tokenizer:
    return Tokenizer(vocab, merges, special_tokens, pattern=pattern, merge_rule=merge_rule)
