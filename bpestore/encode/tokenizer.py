"""``Tokenizer``: encode text to ids and back with a byte-level BPE vocabulary.

Encoding works on a block of text's UTF-8 bytes with NumPy: it cuts them at special tokens and
before every space that starts a word (see :mod:`bpestore.encode.byte_segments`), and looks all the
segments up at once in a hash table of arrays (:mod:`bpestore.encode.segment_table`). Only the distinct
segments not seen before go through the regex and BPE, in one batch per block, so the per-byte
work on natural text is a few array operations.
"""

from __future__ import annotations

import errno
import os
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Literal

import numpy as np
import regex

from .byte_segments import gather_text, joinable, segment_bounds
from .bpe import PairRankMerger, TokenAlphabet, TokenRankMerger, id_string_to_array
from ..pretokenize.patterns import (
    GPT2_PATTERN,
    LETTER_RUN_PATTERNS,
    REGEX_WHITESPACE,
    SPLIT_SAFE_PATTERNS,
    SpecialSplitter,
)
from .segment_table import KEY_PADDING, MAX_KEY_BYTES, SegmentTable, first_of_each_key, segment_keys

MergeRule = Literal["pair", "token"]

# Distinct segments and pre-tokens remembered; each cache is emptied when it outgrows this.
DEFAULT_CACHE_SIZE = 1 << 20
# encode_iterable gathers about this many characters before encoding them, and its caches hold
# this many entries at most: together they keep its memory within about a megabyte.
_STREAM_BLOCK = 1 << 13
STREAM_CACHE_SIZE = 1 << 12
# encode works through long texts in blocks of about this many characters.
_BLOCK_CHARS = 1 << 20


class _Caches:
    """What a tokenizer remembers between blocks of text, each part emptied when it would outgrow
    ``size`` entries: the ids of distinct short segments (a NumPy table, looked up a block at a
    time), of long segments and of distinct pre-tokens. ``batch`` lets new pre-tokens be merged
    together with NumPy (fast, but with sizeable arrays).

    Pre-token ids are kept as *id strings*, one character ``chr(id)`` per id: joining them is the
    fastest way Python has to concatenate, and one conversion gives an array."""

    __slots__ = ("segments", "long_segments", "pretokens", "size", "batch")

    def __init__(self, size: int, batch: bool):
        # A small cache gets all its room at once: growing it step by step costs more memory at
        # the peak (old and new arrays) than it ever holds.
        self.segments = SegmentTable(size if size <= STREAM_CACHE_SIZE else 8)
        self.long_segments: dict[bytes, np.ndarray] = {}
        self.pretokens: dict[str, str] = {}
        self.size = size
        self.batch = batch


def _strictly_inside(spans: list[tuple[int, int]], span_starts: list[int], position: int) -> bool:
    """Whether one of ``spans`` (in order, not overlapping) has ``position`` strictly inside."""
    index = bisect_right(span_starts, position) - 1
    return index >= 0 and spans[index][0] < position < spans[index][1]


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

    Encoding fills caches that are not locked: a tokenizer must not encode in two threads at once.
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

    def _learn_segments(
        self, raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray, caches: _Caches
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The ids of the segments ``raw[start:start+length]`` (cut as by :func:`segment_bounds`),
        pre-tokenizing and merging everything new in one batch.

        Returns ``(order, ids, counts)``: the segments taken in ``order`` (a permutation), their
        ids concatenated, and how many each has.
        """
        # Joinable segments go side by side as one text to the regex: each meets the next at a
        # safe cut (see bpestore.pretokenize), so each starts a pre-token, found from the
        # lengths. Any other segment is a text of its own.
        side_by_side = joinable(raw, starts, lengths) if self._split_safe else np.zeros(len(starts), dtype=bool)
        order = np.concatenate([np.flatnonzero(side_by_side), np.flatnonzero(~side_by_side)])
        text, char_lengths = gather_text(raw, starts[order], lengths[order])
        together = int(side_by_side.sum())
        tokens = self._regex.findall(text[: int(char_lengths[:together].sum())]) if together else []
        token_ends = np.cumsum(np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens)))
        segment_ends = np.cumsum(char_lengths[:together])
        tokens_before = np.searchsorted(token_ends, segment_ends, side="right")
        if not np.array_equal(token_ends[tokens_before - 1], segment_ends):
            raise AssertionError("segment grouping went wrong: the pattern is not split-safe")
        token_counts = np.diff(tokens_before, prepend=0).tolist()
        position = int(segment_ends[-1]) if together else 0
        for length in char_lengths[together:].tolist():
            alone = self._regex.findall(text[position : position + length])
            tokens.extend(alone)
            token_counts.append(len(alone))
            position += length

        self._learn_pretokens(caches, set(tokens))
        id_strings = list(map(caches.pretokens.__getitem__, tokens))
        # ids before each token, then before each segment (one may have none: a pattern that
        # leaves characters unmatched)
        ids_before_token = np.zeros(len(id_strings) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, id_strings), dtype=np.int64, count=len(id_strings)), out=ids_before_token[1:])
        ids_before_segment = ids_before_token[np.cumsum([0, *token_counts])]
        return order, id_string_to_array("".join(id_strings)), np.diff(ids_before_segment)

    def _encode_block(self, text: str, caches: _Caches) -> np.ndarray:
        """The ids of a text of moderate size, with one batch for everything not cached yet."""
        data = text.encode("utf-8")
        buffer = data + bytes(KEY_PADDING)
        raw = np.frombuffer(buffer, dtype=np.uint8)
        specials = self._specials.byte_spans(data) if self._specials else []
        bounds = segment_bounds(raw, len(data), self._split_safe, specials, self._specials_have_space)
        starts, lengths = bounds[:-1], np.diff(bounds)
        special_at = np.searchsorted(starts, [start for start, _ in specials]).astype(np.int64)
        is_short = lengths <= MAX_KEY_BYTES
        is_short[special_at] = False
        is_long = ~is_short
        is_long[special_at] = False
        id_start = np.empty(len(starts), dtype=np.int64)
        id_count = np.empty(len(starts), dtype=np.int64)

        short = np.flatnonzero(is_short)
        id_start[short], id_count[short] = self._short_segment_ids(buffer, raw, starts[short], lengths[short], caches)

        # Special tokens and long segments: their ids go to the segment table's scratch space.
        long = np.flatnonzero(is_long)
        if len(specials) or len(long):
            special_ids = [self.special_ids[data[start:end].decode("utf-8")] for start, end in specials]
            long_ids = self._long_segment_ids(raw, starts[long].tolist(), bounds[long + 1].tolist(), caches)
            counts = np.array([1] * len(special_ids) + list(map(len, long_ids)), dtype=np.int64)
            first = caches.segments.scratch(np.concatenate([np.array(special_ids, dtype=np.uint32), *long_ids]))
            order = np.concatenate([special_at, long])
            id_count[order] = counts
            id_start[order] = first + np.cumsum(counts) - counts

        # Every segment's ids are now somewhere in the table's id array: gather them in order.
        return caches.segments.gather(id_start, id_count)

    def _short_segment_ids(
        self, buffer: bytes, raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray, caches: _Caches
    ) -> tuple[np.ndarray, np.ndarray]:
        """Where the ids of each short segment are in the segment table (start, count), learning
        the segments it does not hold yet."""
        table = caches.segments
        keys = segment_keys(buffer, starts, lengths)
        id_start, id_count = table.lookup(keys)
        missing = np.flatnonzero(id_start < 0)
        if len(missing):
            distinct = missing[first_of_each_key(keys[missing])]
            if len(table) + len(distinct) > caches.size:
                # Start the table afresh with this block's known segments, ids copied out first.
                known = np.flatnonzero(id_start >= 0)
                known = known[first_of_each_key(keys[known])]
                known_ids = table.gather(id_start[known], id_count[known])
                table.clear()
                table.insert(keys[known], known_ids, id_count[known])
                missing = np.arange(len(keys))  # the ids found so far are gone from the table
            order, ids, counts = self._learn_segments(raw, starts[distinct], lengths[distinct], caches)
            table.insert(keys[distinct[order]], ids, counts)
            id_start[missing], id_count[missing] = table.lookup(keys[missing])
        return id_start, id_count

    def _long_segment_ids(self, raw: np.ndarray, starts: list[int], ends: list[int], caches: _Caches) -> list[np.ndarray]:
        """The ids of each long segment ``raw[start:end]``, from a dict keyed by its bytes."""
        cache = caches.long_segments
        data = raw.data
        segments = [bytes(data[start:end]) for start, end in zip(starts, ends)]
        new = {segment: start for segment, start in zip(segments, starts) if segment not in cache}
        if new:
            if len(cache) + len(new) > caches.size:
                cache.clear()
                new = dict(zip(segments, starts))
            new_starts = np.fromiter(new.values(), dtype=np.int64, count=len(new))
            new_lengths = np.fromiter(map(len, new), dtype=np.int64, count=len(new))
            order, ids, counts = self._learn_segments(raw, new_starts, new_lengths, caches)
            keys = list(new)
            cache.update(zip(map(keys.__getitem__, order.tolist()), np.split(ids, np.cumsum(counts)[:-1].tolist())))
        return list(map(cache.__getitem__, segments))

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``; special tokens become their own ids."""
        return self.encode_to_array(text).tolist()

    def encode_to_array(self, text: str) -> np.ndarray:
        """The ids of ``text`` as a NumPy array (uint32), skipping the list of Python ints."""
        if len(text) <= _BLOCK_CHARS:
            return self._encode_block(text, self._caches)
        return np.concatenate([self._encode_block(block, self._caches) for block in self._blocks(text)])

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
        small and constant: text is encoded in blocks of about 8K characters with caches of its
        own, bounded at ``STREAM_CACHE_SIZE`` entries (use :meth:`encode` or ``bpestore encode``
        for speed on big files).
        """
        caches = _Caches(STREAM_CACHE_SIZE, batch=False)
        for ids in self._encode_stream(iterable, caches, _STREAM_BLOCK):
            yield from ids.tolist()

    def encode_blocks(self, iterable: Iterable[str], block_chars: int = _BLOCK_CHARS) -> Iterator[np.ndarray]:
        """Like :meth:`encode_iterable`, but yields the ids a block at a time as arrays, with the
        tokenizer's own (large) caches: the fast way through big streams."""
        return self._encode_stream(iterable, self._caches, block_chars)

    def _encode_stream(self, iterable: Iterable[str], caches: _Caches, block_chars: int) -> Iterator[np.ndarray]:
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

        That is a space between two characters that are not whitespace (a pre-tokenizer boundary,
        see :mod:`bpestore.pretokenize.patterns`) far enough from the end that no special token still being
        received can reach back over it, and not inside a special token.
        """
        end = len(text) - max(self._longest_special, 1)
        if not self._split_safe:  # only special tokens are known boundaries
            starts = [m.start() for m in self._specials.finditer(text) if m.end() <= end]
            return starts[-1] if starts else 0
        # Special tokens found from the start of the text (a place no special token covers), so
        # that overlapping ones pair up as they do when encoding; one that ends after `end` may
        # still grow into a longer one, but cannot cover a cut before `end`.
        spans = [match.span() for match in self._specials.finditer(text)] if self._specials_have_space else []
        span_starts = [start for start, _ in spans]
        while end > 0:
            cut = text.rfind(" ", 0, end)
            if cut <= 0:
                return 0
            if (
                text[cut + 1] not in REGEX_WHITESPACE
                and text[cut - 1] not in REGEX_WHITESPACE
                and not self._special_follows(text, cut + 1)
                and not _strictly_inside(spans, span_starts, cut)
            ):
                return cut
            end = cut
        return 0

    def _special_follows(self, text: str, position: int) -> bool:
        # A special token is cut out before pre-tokenization, so the space before it ends its
        # piece of text: it belongs to the whitespace run before it, and a cut there is unsafe.
        return any(text.startswith(token, position) for token in self.special_tokens)

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
