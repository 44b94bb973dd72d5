"""BPE for many pre-tokens at once, with NumPy.

All words sit side by side in one array of token codes. One *round* performs one step of the
merge rule in every unfinished word at once:

* ``"all"`` (GPT-2's rule): in each word, the lowest-ranked pair is merged at every occurrence,
  left to right without overlap -- one iteration of GPT-2's ``bpe()``;
* ``"leftmost"`` (tiktoken's rule): in each word, only the leftmost pair of lowest rank is merged.

Words stop when no pair of theirs has a rank. A round costs a few array operations over the
unfinished words, so the Python overhead is per round, not per word or per merge.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np

NO_RANK = np.iinfo(np.int64).max
_CODE_BITS = 21  # characters are below 0x110000
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _codes(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), dtype="<u4")


class _PairTable:
    """A NumPy open-addressing hash table: pair of token codes -> rank, looked up in bulk."""

    def __init__(self, keys: np.ndarray, ranks: np.ndarray):
        bits = max(4, (2 * max(len(keys), 1) - 1).bit_length())  # load factor <= 1/2
        size = 1 << bits
        self._shift = np.uint64(64 - bits)
        self._mask = size - 1
        self._keys = np.full(size, -1, dtype=np.int64)
        self._ranks = np.full(size, NO_RANK, dtype=np.int64)
        slots = self._slot(keys)
        pending = np.arange(len(keys))
        while len(pending):  # linear probing; keys are distinct
            slot = slots[pending]
            free = self._keys[slot] == -1
            # several pending keys may want the same free slot: the first one of each gets it
            order = np.flatnonzero(free)
            winners = order[np.unique(slot[order], return_index=True)[1]]
            self._keys[slot[winners]] = keys[pending[winners]]
            self._ranks[slot[winners]] = ranks[pending[winners]]
            placed = np.zeros(len(pending), dtype=bool)
            placed[winners] = True
            pending = pending[~placed]
            slots[pending] = (slots[pending] + 1) & self._mask

    def _slot(self, keys: np.ndarray) -> np.ndarray:
        # Fibonacci hashing: the top bits of the key times 2^64 / golden ratio
        return ((keys.astype(np.uint64) * _GOLDEN) >> self._shift).astype(np.int64)

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        ranks = np.full(len(keys), NO_RANK, dtype=np.int64)
        slots = self._slot(keys)
        pending = np.arange(len(keys))
        while len(pending):
            slot = slots[pending]
            found = self._keys[slot]
            hit = found == keys[pending]
            ranks[pending[hit]] = self._ranks[slot[hit]]
            pending = pending[~hit & (found != -1)]  # an empty slot ends the probe: absent
            slots[pending] = (slots[pending] + 1) & self._mask
        return ranks


class BatchBPE:
    """Merges for many words at once, returning each word's token ids.

    Args:
        pair_rank: pair of token characters -> rank (lower merges first).
        rank_result: rank -> the character of the token the pair becomes.
        rule: ``"all"`` occurrences of the best pair per step, or only the ``"leftmost"``.
        id_of_code: token character code -> token id.
    """

    def __init__(
        self,
        pair_rank: Mapping[str, int],
        rank_result: Mapping[int, str],
        rule: Literal["all", "leftmost"],
        id_of_code: list[int],
    ):
        self.rule = rule
        keys = np.fromiter(((ord(p[0]) << _CODE_BITS) | ord(p[1]) for p in pair_rank), dtype=np.int64, count=len(pair_rank))
        ranks = np.fromiter(pair_rank.values(), dtype=np.int64, count=len(pair_rank))
        self._table = _PairTable(keys, ranks)
        self._result = np.zeros(max(rank_result, default=0) + 1, dtype=np.uint32)
        self._result[np.fromiter(rank_result.keys(), dtype=np.int64)] = np.fromiter(map(ord, rank_result.values()), dtype=np.uint32)
        self._id_of_code = np.asarray(id_of_code, dtype=np.int64)
        # Pairs of two single bytes, the whole first round, by direct lookup.
        self._byte_pairs = np.full(1 << 16, NO_RANK, dtype=np.int64)
        small = (keys >> _CODE_BITS < 256) & (keys & ((1 << _CODE_BITS) - 1) < 256)
        self._byte_pairs[((keys[small] >> _CODE_BITS) << 8) | (keys[small] & 0xFF)] = ranks[small]

    def _lookup(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        return self._table.lookup((left.astype(np.int64) << _CODE_BITS) | right)

    def __call__(self, words: list[str]) -> list[str]:
        """The token ids of each word (a string of byte characters, chr(0..255)), each as a
        string of chr(id)."""
        results: list[str | None] = [None] * len(words)
        lens = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        codes = _codes("".join(words))
        word_ids = np.arange(len(words))
        # rank[i]: rank of the pair (i, i + 1), NO_RANK at the end of a word
        ends = np.cumsum(lens) - 1
        rank = np.full(len(codes), NO_RANK, dtype=np.int64)
        inner = np.ones(len(codes), dtype=bool)
        inner[ends[lens > 0]] = False
        if len(codes):
            left, right = codes[:-1][inner[:-1]], codes[1:][inner[:-1]]
            if left.max(initial=0) < 256 and right.max(initial=0) < 256:
                rank[:-1][inner[:-1]] = self._byte_pairs[(left.astype(np.int64) << 8) | right]
            else:
                rank[:-1][inner[:-1]] = self._lookup(left, right)
        for word_id in np.flatnonzero(lens <= 1).tolist():
            results[word_id] = _id_chars(self._id_of_code[_codes(words[word_id])])
        keep_words = lens > 1
        codes, rank = codes[np.repeat(keep_words, lens)], rank[np.repeat(keep_words, lens)]
        lens, word_ids = lens[keep_words], word_ids[keep_words]
        while len(lens):
            starts = np.cumsum(lens) - lens
            best = np.minimum.reduceat(rank, starts)
            done = best == NO_RANK
            if done.any():
                self._emit(results, codes, lens, starts, word_ids, done)
                alive = ~done
                positions = np.repeat(alive, lens)
                codes, rank = codes[positions], rank[positions]
                lens, word_ids, best = lens[alive], word_ids[alive], best[alive]
                if not len(lens):
                    break
                starts = np.cumsum(lens) - lens
            word_of = np.repeat(np.arange(len(lens)), lens)
            candidate = rank == best[word_of]
            merged = self._select(candidate, word_of)
            codes[merged] = self._result[rank[merged]]
            keep = np.ones(len(codes), dtype=bool)
            keep[merged + 1] = False
            lens = lens - np.bincount(word_of[merged], minlength=len(lens))
            codes, rank, word_of = codes[keep], rank[keep], word_of[keep]
            # Pairs that changed: the merged token with its right and its left neighbour. The
            # k-th merged position moves left by k, the right halves removed before it.
            at = merged - np.arange(len(merged))
            before = at - 1
            before = before[(before >= 0) & (word_of[np.maximum(before, 0)] == word_of[at])]
            changed = np.concatenate([at, before])
            has_next = changed + 1 < len(codes)
            has_next[has_next] = word_of[changed[has_next] + 1] == word_of[changed[has_next]]
            rank[changed] = NO_RANK
            with_next = changed[has_next]
            rank[with_next] = self._lookup(codes[with_next], codes[with_next + 1])
        return results  # type: ignore[return-value]

    def _select(self, candidate: np.ndarray, word_of: np.ndarray) -> np.ndarray:
        positions = np.flatnonzero(candidate)
        if self.rule == "leftmost":
            first = np.ones(len(positions), dtype=bool)
            first[1:] = word_of[positions[1:]] != word_of[positions[:-1]]
            return positions[first]
        if len(positions) < 2 or not (positions[1:] == positions[:-1] + 1).any():
            return positions
        # Runs of adjacent occurrences (a pair (x, x) over "x x x ..."): every other one, from the left.
        run_start = np.ones(len(positions), dtype=bool)
        run_start[1:] = positions[1:] != positions[:-1] + 1
        first_of_run = np.maximum.accumulate(np.where(run_start, np.arange(len(positions)), 0))
        return positions[(np.arange(len(positions)) - first_of_run) % 2 == 0]

    def _emit(self, results, codes, lens, starts, word_ids, done) -> None:
        ids = _id_chars(self._id_of_code[codes[np.repeat(done, lens)]])
        offset = 0
        for word_id, length in zip(word_ids[done].tolist(), lens[done].tolist()):
            results[word_id] = ids[offset : offset + length]
            offset += length


def _id_chars(ids: np.ndarray) -> str:
    return ids.astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")
