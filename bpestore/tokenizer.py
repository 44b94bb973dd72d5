"""``Tokenizer``: encode text to ids and back with a byte-level BPE vocabulary.

Encoding cuts the text at special tokens, then into segments with ``str.split(" ")`` (see
:mod:`bpestore.pretokenize`); each distinct segment is pre-tokenized and merged once and then served
from a cache, so the per-byte work on natural text is a split and dictionary lookups done in C.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain, compress, repeat
from operator import not_
from typing import Literal

import numpy as np
import regex

from .bpe import PairRankMerger, TokenAlphabet, TokenRankMerger, id_string_to_array
from .pretokenize import (
    GPT2_PATTERN,
    LETTER_RUN_PATTERNS,
    REGEX_WHITESPACE,
    SPLIT_SAFE_PATTERNS,
    SpecialSplitter,
    iter_segments,
)

MergeRule = Literal["pair", "token"]

# Distinct segments and pre-tokens remembered; each cache is emptied when it outgrows this.
DEFAULT_CACHE_SIZE = 1 << 20
# encode_iterable gathers about this many characters before encoding them, and its caches hold
# this many entries at most: together they keep its memory within about a megabyte.
_STREAM_BLOCK = 1 << 14
STREAM_CACHE_SIZE = 1 << 12
# encode works through long texts in blocks of about this many characters.
_BLOCK_CHARS = 1 << 20


class _Caches:
    """The ids of distinct parts p (standing for the segment " " + p, see bpestore.pretokenize)
    and of distinct pre-tokens; each dict is emptied when it would outgrow ``size``. ``batch``
    lets new pre-tokens be merged together with NumPy (fast, but with sizeable arrays).

    Ids are kept as *id strings*, one character ``chr(id)`` per id: joining them is the fastest
    way Python has to concatenate, and one conversion at the end gives a list or an array."""

    __slots__ = ("parts", "pretokens", "size", "batch")

    def __init__(self, size: int, batch: bool):
        self.parts: dict[str, str] = {}
        self.pretokens: dict[str, str] = {}
        self.size = size
        self.batch = batch


def _holes(ids: list[str | None]) -> list[int]:
    """Where ``ids`` has None (a cache miss)."""
    return list(compress(range(len(ids)), map(not_, ids)))


def _fill(ids: list[str | None], holes: list[int], keys: list[str], cache: dict[str, str]) -> None:
    for at in holes:
        ids[at] = cache[keys[at]]


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
        cache_size: how many distinct segments and pre-tokens to remember.
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
        self._alphabet = TokenAlphabet(self.vocab)
        self.special_ids: dict[str, int] = {}
        next_id = max(self.vocab, default=-1) + 1
        for token in self.special_tokens:
            token_id = self._alphabet.id_of_bytes.get(token.encode("utf-8"))
            if token_id is None:
                token_id, next_id = next_id, next_id + 1
                self.vocab[token_id] = token.encode("utf-8")
            self.special_ids[token] = token_id
        if merge_rule == "pair":
            self._merge = PairRankMerger(self._alphabet, self.merges)
        elif merge_rule == "token":
            self._merge = TokenRankMerger(self._alphabet)
        else:
            raise ValueError(f"merge_rule must be 'pair' or 'token', not {merge_rule!r}")
        self._regex = regex.compile(pattern)
        self._split_safe = pattern in SPLIT_SAFE_PATTERNS
        self._letter_runs = pattern in LETTER_RUN_PATTERNS
        self._specials = SpecialSplitter(self.special_tokens)
        self._longest_special = max(map(len, self.special_tokens), default=0)
        self._specials_have_space = any(" " in token for token in self.special_tokens)
        self._caches = _Caches(cache_size, batch=True)

    # -- construction from files --------------------------------------------------------------

    @classmethod
    def from_files(
        cls,
        vocab_filepath: str | os.PathLike,
        merges_filepath: str | os.PathLike,
        special_tokens: Iterable[str] | None = None,
    ) -> Tokenizer:
        """A tokenizer from GPT-2's ``vocab.json`` and ``merges.txt`` (byte-to-unicode encoded)."""
        from .formats import gpt2

        special_tokens = list(special_tokens or ())
        vocab = gpt2.read_vocab(vocab_filepath, literal_tokens=special_tokens)
        merges = gpt2.read_merges(merges_filepath)
        return cls(vocab, merges, special_tokens)

    @classmethod
    def from_db(cls, path_or_url: str | os.PathLike, name: str) -> Tokenizer:
        """The tokenizer stored as ``name`` (latest version) or ``name@N`` in a bpestore database."""
        from .fastload import load_from_sqlite

        location = os.fspath(path_or_url)
        if "://" not in location and not os.path.exists(location):
            raise FileNotFoundError(errno.ENOENT, "No such tokenizer store", location)

        tokenizer = load_from_sqlite(path_or_url, name)
        if tokenizer is not None:
            return tokenizer
        from .store import Store  # upgrades an older schema, or explains what is wrong

        with Store(path_or_url) as store:
            return store.load(name)

    # -- encoding -------------------------------------------------------------------------------

    def _learn_pretokens(self, caches: _Caches, pretokens: set[str]) -> None:
        """Merge every pre-token not in the cache yet, all in one batch; afterwards all of
        ``pretokens`` are in the cache."""
        cache = caches.pretokens
        missing = pretokens.difference(cache)
        if not missing:
            return
        if len(cache) + len(missing) > caches.size:
            cache.clear()
            missing = pretokens
        missing_list = list(missing)
        words = [pretoken.encode("utf-8").decode("latin-1") for pretoken in missing_list]
        if caches.batch:
            cache.update(zip(missing_list, self._merge.encode_many(words)))
        else:
            cache.update(zip(missing_list, map(self._alphabet.id_string, map(self._merge, words))))

    def _learn(self, caches: _Caches, parts: set[str], pretokens: set[str]) -> None:
        """Put the ids of the segments " " + p of ``parts`` and of ``pretokens`` in the caches,
        pre-tokenizing and merging everything new in one batch."""
        if self._letter_runs:  # then " " + ASCII letters is one pre-token
            letters = [part for part in parts if part.isascii() and part.isalpha()]
        else:
            letters = []
        others = list(parts.difference(letters))
        spaced_letters = [" " + part for part in letters]
        # One regex pass over all the other segments; each segment's first pre-token starts with
        # its space, and no later one can, so the spaces mark where each segment's pre-tokens begin.
        tokens = self._regex.findall(" " + " ".join(others)) if others else []
        starts = list(compress(range(len(tokens)), map(str.startswith, tokens, repeat(" "))))
        if len(starts) != len(others):
            raise AssertionError("segment grouping went wrong: the pattern is not split-safe")
        self._learn_pretokens(caches, pretokens.union(spaced_letters, tokens))
        pretoken_ids = caches.pretokens
        cache = caches.parts
        cache.update(zip(letters, map(pretoken_ids.__getitem__, spaced_letters)))
        token_ids = list(map(pretoken_ids.__getitem__, tokens))
        ends = starts[1:] + [len(tokens)]
        cache.update(zip(others, map("".join, map(token_ids.__getitem__, map(slice, starts, ends)))))

    def _encode_block(self, text: str, caches: _Caches) -> str:
        """The id string of a text of moderate size, with one batch for everything not cached yet."""
        spaced, pretoken_ids, findall = caches.parts, caches.pretokens, self._regex.findall
        runs: list[list[str | None]] = []  # the ids of each run, in order
        regular_misses: list[tuple[int, list[str]]] = []  # (run index, parts) of runs with misses
        verbatim_misses: list[tuple[int, list[str]]] = []  # (run index, pre-tokens)
        pieces = self._specials.split_keep(text) if self._specials else [text]
        for i, piece in enumerate(pieces):
            if i % 2:
                runs.append([chr(self.special_ids[piece])])
                continue
            for regular, value in iter_segments(piece, self._split_safe) if piece else ():
                if regular:
                    ids = list(map(spaced.get, value))
                    if not all(ids):
                        regular_misses.append((len(runs), value))
                elif value:
                    value = findall(value)
                    ids = list(map(pretoken_ids.get, value))
                    if not all(ids):
                        verbatim_misses.append((len(runs), value))
                else:
                    continue
                runs.append(ids)
        if regular_misses or verbatim_misses:
            holes = [_holes(runs[index]) for index, _ in regular_misses]
            parts = set()
            for (_, parts_of_run), at in zip(regular_misses, holes):
                parts.update(map(parts_of_run.__getitem__, at))
            if len(spaced) + len(parts) > caches.size:
                spaced.clear()  # the ids found so far are kept in runs: only the missing are needed
            self._learn(caches, parts, set(chain.from_iterable(tokens for _, tokens in verbatim_misses)))
            for (index, parts_of_run), at in zip(regular_misses, holes):
                _fill(runs[index], at, parts_of_run, spaced)
            for index, tokens in verbatim_misses:
                ids = runs[index]
                _fill(ids, _holes(ids), tokens, pretoken_ids)
        return "".join(chain.from_iterable(runs))

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``; special tokens become their own ids."""
        return self.encode_to_array(text).tolist()

    def encode_to_array(self, text: str) -> np.ndarray:
        """The ids of ``text`` as a NumPy array (uint32), skipping the list of Python ints."""
        if len(text) <= _BLOCK_CHARS:
            return id_string_to_array(self._encode_block(text, self._caches))
        return id_string_to_array("".join(self._encode_block(block, self._caches) for block in self._blocks(text)))

    def _blocks(self, text: str) -> Iterator[str]:
        """``text`` in blocks of about ``_BLOCK_CHARS``, cut where the encoding cannot change."""
        start = 0
        while len(text) - start > _BLOCK_CHARS:
            window = _BLOCK_CHARS
            cut = 0
            while cut <= 0 and start + window < len(text):
                cut = self._last_safe_cut(text[start : start + window])
                window *= 2
            if cut <= 0:
                break
            yield text[start : start + cut]
            start += cut
        yield text[start:]

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """Lazily encode a stream of text (for example a file object, line by line).

        The result equals ``encode("".join(iterable))`` however the stream is cut. Memory stays
        small and constant: text is encoded in blocks of about 16K characters with caches of its
        own, bounded at ``STREAM_CACHE_SIZE`` entries (use :meth:`encode` or ``bpestore encode``
        for speed on big files).
        """
        caches = _Caches(STREAM_CACHE_SIZE, batch=False)
        for ids in self._encode_stream(iterable, caches, _STREAM_BLOCK):
            yield from map(ord, ids)

    def encode_blocks(self, iterable: Iterable[str], block_chars: int = _BLOCK_CHARS) -> Iterator[np.ndarray]:
        """Like :meth:`encode_iterable`, but yields the ids a block at a time as arrays, with the
        tokenizer's own (large) caches: the fast way through big streams."""
        for ids in self._encode_stream(iterable, self._caches, block_chars):
            yield id_string_to_array(ids)

    def _encode_stream(self, iterable: Iterable[str], caches: _Caches, block_chars: int) -> Iterator[str]:
        """Text is gathered until there are ``block_chars`` characters, then encoded up to the
        last place where a cut cannot change the result; the rest waits for more text."""
        pending: list[str] = []
        pending_length = 0
        threshold = block_chars
        for chunk in iterable:
            pending.append(chunk)
            pending_length += len(chunk)
            if pending_length < threshold:
                continue
            text = "".join(pending)
            cut = self._last_safe_cut(text)
            if cut > 0:
                yield self._encode_block(text[:cut], caches)
                text = text[cut:]
                threshold = block_chars
            else:  # a long stretch without a safe cut: look again only when it has doubled
                threshold = 2 * len(text)
            pending, pending_length = [text], len(text)
        text = "".join(pending)
        if len(text) > _BLOCK_CHARS:
            yield from (self._encode_block(block, caches) for block in self._blocks(text))
        else:
            yield self._encode_block(text, caches)

    def _last_safe_cut(self, text: str) -> int:
        """The last index where ``text`` can be cut without changing its encoding, whatever
        follows; 0 if there is none.

        That is a space followed by non-whitespace (a pre-tokenizer boundary, see
        :mod:`bpestore.pretokenize`) far enough from the end that no special token still being
        received can reach back over it, and not inside a special token.
        """
        end = len(text) - max(self._longest_special, 1)
        if not self._split_safe:  # only special tokens are known boundaries
            starts = [m.start() for m in self._specials.finditer(text) if m.end() <= end]
            return starts[-1] if starts else 0
        while end > 0:
            cut = text.rfind(" ", 0, end)
            if cut <= 0:
                return 0
            if (
                text[cut + 1] not in REGEX_WHITESPACE
                and not self._special_follows(text, cut + 1)
                and not self._inside_special(text, cut)
            ):
                return cut
            end = cut
        return 0

    def _special_follows(self, text: str, position: int) -> bool:
        # A special token is cut out before pre-tokenization, so the space before it ends its
        # piece of text: it belongs to the whitespace run before it, and a cut there is unsafe.
        return any(text.startswith(token, position) for token in self.special_tokens)

    def _inside_special(self, text: str, cut: int) -> bool:
        if not self._specials_have_space:
            return False  # a special token covering the cut would contain the space there
        reach = self._longest_special
        window_start = max(cut - 2 * reach, 0)
        window = text[window_start : cut + reach]
        return any(
            window_start + start < cut < window_start + end
            for start, end in (m.span() for m in self._specials.finditer(window))
        )

    # -- decoding -------------------------------------------------------------------------------

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of ``ids`` joined; ValueError naming the first id outside the vocabulary."""
        vocab = self.vocab
        ids = ids if isinstance(ids, (list, tuple)) else list(ids)
        try:
            return b"".join(map(vocab.__getitem__, ids))
        except (KeyError, TypeError):
            for token_id in ids:
                if token_id not in vocab:
                    raise ValueError(f"id {token_id!r} is not in the vocabulary (ids go up to {max(vocab)})") from None
            raise

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
