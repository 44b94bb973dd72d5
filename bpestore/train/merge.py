"""The BPE merge loop: from pre-token counts to the ordered list of merges.

Representation, chosen for speed in pure Python:

* every token is one character: byte ``b`` is ``chr(b)``, the token made by merge ``i`` is
  :func:`token_char` ``(i)``; a pre-token ("word") is the string of its tokens' characters, so
  applying a merge to it is one ``str.replace`` (which, like BPE, replaces left to right without
  overlap);
* a pair of tokens is the two-character string of its tokens;
* ``pair_counts`` holds every adjacent pair's count, weighted by the words' counts;
* the words that may hold a pair: every occurrence of a pair arises when its newer token is made
  (or, for two bytes, is there from the start), so each merge records, sorted by neighbour, the
  words where its new token was made next to each left and right neighbour; a pair's words are
  one slice of its newer token's record. Some may no longer hold the pair; ``str.replace`` then
  changes nothing and they are skipped;
* the best pair comes from a heap ordered by (-count, reversed bytes of the pair). A pair's count
  only rises in the merge that creates the pair; it waits in a bucket by the power of two of its
  count and enters the heap once the heap's best count comes within reach of it, so the many
  pairs that never come close to winning never enter the heap. Heap entries of pairs whose count
  fell are refreshed lazily when they reach the top.

After a merge of ``(a, b)`` into ``n`` only the neighbours of each new ``n`` change: ``(x, a)``
becomes ``(x, n)`` and ``(b, y)`` becomes ``(n, y)``, and between two new ``n`` the pair ``(b, a)``
becomes ``(n, n)``. Merges that touch many words are applied with NumPy over all of them at once.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterator, Mapping
from itertools import repeat
from operator import add

import numpy as np

_SEPARATOR = "\U0010ffff"  # never a token character (see token_char)
_SEPARATOR_CODE = ord(_SEPARATOR)
_MAX_MERGES = _SEPARATOR_CODE - 0x800 - 256
_INVERT_BYTES = {i: 255 - i for i in range(256)}
_NO_WORDS = np.zeros(0, dtype=np.int64)

# Merges whose candidate words number at least this go through the NumPy path.
BULK_THRESHOLD = 96


def token_char(merge_index: int) -> str:
    """The character standing for the token made by merge ``merge_index`` (surrogates skipped)."""
    code = 256 + merge_index
    return chr(code if code < 0xD800 else code + 0x800)


def _descending_key(token: bytes) -> str:
    """A string whose ascending order is the descending order of ``token`` among bytes strings."""
    return token.decode("latin-1").translate(_INVERT_BYTES) + "\u0100"


def _codes(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), dtype="<u4")


def _chars(codes: np.ndarray) -> str:
    return codes.astype("<u4").tobytes().decode("utf-32-le")


class _MergeState:
    def __init__(self, pretoken_counts: Mapping[bytes, int], bulk_threshold: int, consume: bool):
        words = [token.decode("latin-1") for token in pretoken_counts]
        self.words = np.empty(len(words), dtype=object)
        self.words[:] = words
        self.freqs = list(pretoken_counts.values())
        self.freq_array = np.array(self.freqs, dtype=np.int64)
        if consume:  # the caller has no further use for them: free their memory for the merges
            pretoken_counts.clear()
        self.bulk_threshold = bulk_threshold
        self.token_bytes: dict[str, bytes] = {chr(b): bytes([b]) for b in range(256)}
        self.sort_key: dict[str, str] = {c: _descending_key(t) for c, t in self.token_bytes.items()}
        self.pair_counts: defaultdict[str, int] = defaultdict(int)
        self.byte_pair_words: dict[str, np.ndarray] = {}  # pair of two bytes -> words holding it
        # merged token -> where it was made next to each left (right) neighbour, as keys
        # neighbour << 32 | word, sorted and unique on first use (most are never used)
        self.left_records: dict[str, np.ndarray] = {}
        self.right_records: dict[str, np.ndarray] = {}
        self.twin_records: dict[str, np.ndarray] = {}  # merged token -> words where it was made twice in a row
        self.heap: list[tuple[int, str, str, str]] = []
        self.waiting: defaultdict[int, list[str]] = defaultdict(list)  # count.bit_length() -> pairs
        self._count_initial_pairs(words)

    def _count_initial_pairs(self, words: list[str]) -> None:
        if not words:
            return
        # Small integer types throughout: this is the peak of training's memory.
        codes = _codes(_SEPARATOR.join(words))
        word_of_position = np.cumsum(codes == _SEPARATOR_CODE, dtype=np.int32)
        left, right = codes[:-1], codes[1:]
        valid = (left != _SEPARATOR_CODE) & (right != _SEPARATOR_CODE)
        pair_ids = ((left[valid] << 8) | right[valid]).astype(np.uint16)  # both are bytes here
        pair_words = word_of_position[:-1][valid]
        del codes, word_of_position, left, right, valid
        totals = np.bincount(pair_ids, weights=self.freq_array[pair_words], minlength=1 << 16)
        # Group the words by pair (a stable sort keeps each group's words in order; a word holding a
        # pair twice appears twice in a row, and is kept once).
        order = np.argsort(pair_ids, kind="stable")
        pair_ids, pair_words = pair_ids[order], pair_words[order]
        del order
        first = np.ones(len(pair_ids), dtype=bool)
        first[1:] = (pair_ids[1:] != pair_ids[:-1]) | (pair_words[1:] != pair_words[:-1])
        pair_ids, pair_words = pair_ids[first], pair_words[first]
        present = np.flatnonzero(totals)
        starts = np.searchsorted(pair_ids, present)
        ends = np.searchsorted(pair_ids, present, side="right")
        sort_key = self.sort_key
        for pair_id, total, start, end in zip(present.tolist(), totals[present].tolist(), starts.tolist(), ends.tolist()):
            pair = chr(pair_id >> 8) + chr(pair_id & 0xFF)
            self.pair_counts[pair] = int(total)
            self.byte_pair_words[pair] = pair_words[start:end]
            self.heap.append((-int(total), sort_key[pair[0]], sort_key[pair[1]], pair))
        heapq.heapify(self.heap)

    def _release_waiting(self, best: int) -> None:
        """Move into the heap every waiting pair whose count may reach ``best``."""
        pair_counts, sort_key, heap = self.pair_counts, self.sort_key, self.heap
        for bits in sorted(self.waiting, reverse=True):
            if (1 << bits) - 1 < best:  # all counts in this bucket are below the best
                break
            for pair in self.waiting.pop(bits):
                count = pair_counts[pair]
                if count > 0:
                    heapq.heappush(heap, (-count, sort_key[pair[0]], sort_key[pair[1]], pair))

    def best_pair(self) -> str | None:
        heap, pair_counts = self.heap, self.pair_counts
        while True:
            while heap:
                negative_count, _, _, pair = heap[0]
                current = pair_counts.get(pair, 0)
                if current == -negative_count:
                    break
                if current > 0:  # the count fell since this entry was pushed: refresh it
                    heapq.heapreplace(heap, (-current, *heap[0][1:]))
                else:
                    heapq.heappop(heap)
            best = -heap[0][0] if heap else 0
            if not self.waiting or (1 << max(self.waiting)) - 1 < best:
                return heap[0][3] if best > 0 else None
            self._release_waiting(best)

    def _candidates(self, pair: str) -> np.ndarray:
        """The words that may hold ``pair`` (see the module docstring)."""
        a, b = pair[0], pair[1]
        if a < "\u0100" and b < "\u0100":
            return self.byte_pair_words.pop(pair, _NO_WORDS)
        if a == b:
            return self.twin_records[a]
        records, token, code = (self.left_records, b, ord(a)) if b > a else (self.right_records, a, ord(b))
        keys = records[token]  # b > a: b is newer, so (a, b) arose where b was made; else a is
        if not keys.flags.writeable:  # first use: sort, and keep each (neighbour, word) once
            keys = records[token] = np.unique(keys)
        found = keys[np.searchsorted(keys, code << 32) : np.searchsorted(keys, (code + 1) << 32)]
        return found & 0xFFFFFFFF

    @staticmethod
    def _record(neighbour_codes, word_ids) -> np.ndarray:
        """Keys neighbour << 32 | word, unsorted (marked read-only until sorted)."""
        keys = (np.asarray(neighbour_codes, dtype=np.int64) << 32) | np.asarray(word_ids, dtype=np.int64)
        keys.flags.writeable = False
        return keys

    def merge(self, pair: str, new: str) -> None:
        a, b = pair[0], pair[1]
        merged = self.token_bytes[a] + self.token_bytes[b]
        self.token_bytes[new] = merged
        self.sort_key[new] = _descending_key(merged)
        candidates = self._candidates(pair)
        if len(candidates) >= self.bulk_threshold:
            self._merge_bulk(pair, new, candidates)
        else:
            self._merge_each(pair, new, candidates.tolist())
        del self.pair_counts[pair]

    def _wait(self, pairs: list[str], counts: list[int]) -> None:
        waiting = self.waiting
        for pair, count in zip(pairs, counts):
            waiting[count.bit_length()].append(pair)

    def _merge_each(self, pair: str, new: str, word_ids: list[int]) -> None:
        a, b = pair[0], pair[1]
        words, freqs, pair_counts = self.words, self.freqs, self.pair_counts
        lost_between = b + a
        gained: set[str] = set()
        lefts: list[tuple[int, int]] = []  # (neighbour code, word id)
        rights: list[tuple[int, int]] = []
        twins: list[int] = []
        for word_id in word_ids:
            old = words[word_id]
            word = old.replace(pair, new)
            if len(word) == len(old):
                continue  # no longer holds the pair
            words[word_id] = word
            freq = freqs[word_id]
            last = len(word) - 1
            i = word.find(new)
            while i >= 0:
                if i > 0:
                    x = word[i - 1]
                    if x == new:
                        pair_counts[lost_between] -= freq
                        twins.append(word_id)
                    else:
                        pair_counts[x + a] -= freq
                        lefts.append((ord(x), word_id))
                    g = word[i - 1 : i + 1]
                    pair_counts[g] += freq
                    gained.add(g)
                if i < last:
                    y = word[i + 1]
                    if y != new:  # a following new token accounts for the pair between the two
                        pair_counts[b + y] -= freq
                        rights.append((ord(y), word_id))
                        g = word[i : i + 2]
                        pair_counts[g] += freq
                        gained.add(g)
                i = word.find(new, i + 1)
        self.left_records[new] = self._record(*(zip(*lefts) if lefts else ((), ())))
        self.right_records[new] = self._record(*(zip(*rights) if rights else ((), ())))
        self.twin_records[new] = np.unique(np.array(twins, dtype=np.int64))
        gained_pairs = list(gained)
        self._wait(gained_pairs, list(map(pair_counts.__getitem__, gained_pairs)))

    def _merge_bulk(self, pair: str, new: str, candidates: np.ndarray) -> None:
        a, b = pair[0], pair[1]
        # Words that no longer hold the pair come back unchanged and add no new token below.
        ids = candidates
        news = list(map(str.replace, self.words[ids], repeat(pair), repeat(new)))
        self.words[ids] = news
        # The new words side by side, with a separator before, between and after them.
        codes = _codes(_SEPARATOR + _SEPARATOR.join(news) + _SEPARATOR)
        new_code = ord(new)
        positions = np.flatnonzero(codes == new_code)
        owners = np.cumsum(codes == _SEPARATOR_CODE)[positions] - 1
        word_of = ids[owners]
        freqs = self.freq_array[word_of]
        pair_counts = self.pair_counts
        left, right = codes[positions - 1], codes[positions + 1]
        # Between two new tokens: (b, a) becomes (new, new); counted once, from the right one.
        twin = left == new_code
        self.twin_records[new] = np.unique(word_of[twin]) if twin.any() else _NO_WORDS
        if twin.any():
            total = int(freqs[twin].sum())
            pair_counts[b + a] -= total
            pair_counts[new + new] += total
            self._wait([new + new], [pair_counts[new + new]])
        select = (left != _SEPARATOR_CODE) & ~twin
        self.left_records[new] = self._record(left[select], word_of[select])
        self._move(left[select], freqs[select], a, new, left_side=True)
        select = (right != _SEPARATOR_CODE) & (right != new_code)
        self.right_records[new] = self._record(right[select], word_of[select])
        self._move(right[select], freqs[select], b, new, left_side=False)

    def _move(self, neighbours, weights, old: str, new: str, *, left_side: bool) -> None:
        """Counts pass from (x, old) to (x, new) for each left neighbour x (or from (old, y) to
        (new, y) for each right neighbour y), weighted by the words' counts."""
        if not len(neighbours):
            return
        if neighbours.max() < 1 << 17:
            sums = np.bincount(neighbours, weights=weights)
            distinct = np.flatnonzero(sums)
            totals = sums[distinct].astype(np.int64)
        else:
            distinct, inverse = np.unique(neighbours, return_inverse=True)
            totals = np.bincount(inverse, weights=weights).astype(np.int64)
        chars = _chars(distinct)
        if left_side:
            lost, gained = list(map(add, chars, repeat(old))), list(map(add, chars, repeat(new)))
        else:
            lost, gained = list(map(add, repeat(old), chars)), list(map(add, repeat(new), chars))
        pair_counts = self.pair_counts
        remaining = np.fromiter(map(pair_counts.__getitem__, lost), dtype=np.int64, count=len(lost)) - totals
        pair_counts.update(zip(lost, remaining.tolist()))
        counts = totals.tolist()
        pair_counts.update(zip(gained, counts))  # new pairs: they contain the new token
        self._wait(gained, counts)


def learn_merges(
    pretoken_counts: Mapping[bytes, int],
    max_merges: int,
    *,
    bulk_threshold: int = BULK_THRESHOLD,
    consume_counts: bool = False,
) -> Iterator[tuple[bytes, bytes]]:
    """Yield up to ``max_merges`` merges, best first, each as ``(left bytes, right bytes)``.

    Each merge joins the most frequent adjacent pair of tokens (counted within pre-tokens, weighted
    by their counts); ties go to the lexicographically greatest ``(left, right)``. Stops early when
    no pair is left. ``bulk_threshold`` only chooses between two equivalent code paths;
    ``consume_counts`` empties ``pretoken_counts`` (a dict) once read, to save memory.
    """
    if max_merges > _MAX_MERGES:
        raise ValueError(f"at most {_MAX_MERGES} merges are supported, not {max_merges}")
    state = _MergeState(pretoken_counts, bulk_threshold, consume_counts)
    for merge_index in range(max_merges):
        pair = state.best_pair()
        if pair is None:
            return
        yield state.token_bytes[pair[0]], state.token_bytes[pair[1]]
        state.merge(pair, token_char(merge_index))
