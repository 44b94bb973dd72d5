"""The BPE merge loop: from pre-token counts to the ordered list of merges.

Representation, chosen for speed in pure Python:

* every token is one character: byte ``b`` is ``chr(b)``, the token made by merge ``i`` is
  :func:`token_char` ``(i)``; a pre-token is the string of its tokens' characters, so applying a merge
  to it is one ``str.replace`` (which, like BPE, replaces left to right without overlap);
* a pair of tokens is the two-character string of its tokens;
* ``pair_counts`` holds every adjacent pair's count weighted by pre-token frequency, and ``index``
  the pre-tokens each pair was ever seen in (entries may be stale; they are skipped);
* the best pair comes from a heap ordered by (-count, reversed bytes of the pair). Counts only rise
  for pairs that a merge just created, which are pushed then; entries of pairs whose count fell are
  refreshed lazily when they reach the top.

After a merge of ``(a, b)`` into ``n`` only the neighbours of each new ``n`` change: ``(x, a)``
becomes ``(x, n)`` and ``(b, y)`` becomes ``(n, y)`` (with ``(b, a)`` becoming ``(n, n)`` between two
new ``n``). Merges that touch many pre-tokens are applied with NumPy over all of them at once.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterator, Mapping
from operator import itemgetter

import numpy as np

_SEPARATOR = "\U0010ffff"  # never a token character (see token_char)
_SEPARATOR_CODE = ord(_SEPARATOR)
_MAX_MERGES = _SEPARATOR_CODE - 0x800 - 256
_INVERT_BYTES = {i: 255 - i for i in range(256)}

# Merges that touch at least this many pre-tokens go through the NumPy path.
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


class _MergeState:
    def __init__(self, pretoken_counts: Mapping[bytes, int], bulk_threshold: int):
        self.words = [token.decode("latin-1") for token in pretoken_counts]
        self.freqs = list(pretoken_counts.values())
        self.freq_array = np.array(self.freqs, dtype=np.int64)
        self.bulk_threshold = bulk_threshold
        self.token_bytes: dict[str, bytes] = {chr(b): bytes([b]) for b in range(256)}
        self.sort_key: dict[str, str] = {c: _descending_key(t) for c, t in self.token_bytes.items()}
        self.pair_counts: defaultdict[str, int] = defaultdict(int)
        self.index: defaultdict[str, list[int]] = defaultdict(list)
        self.heap: list[tuple[int, str, str, str]] = []
        self._count_initial_pairs()

    def _count_initial_pairs(self) -> None:
        if not self.words:
            return
        codes = _codes(_SEPARATOR.join(self.words))
        word_of_position = np.cumsum(codes == _SEPARATOR_CODE)
        left, right = codes[:-1], codes[1:]
        valid = (left != _SEPARATOR_CODE) & (right != _SEPARATOR_CODE)
        pair_codes = (left[valid].astype(np.int64) << 21) | right[valid]
        pair_words = word_of_position[:-1][valid]
        unique_pairs, pair_ids = np.unique(pair_codes, return_inverse=True)
        totals = np.bincount(pair_ids, weights=self.freq_array[pair_words], minlength=len(unique_pairs))
        order = np.argsort(pair_ids, kind="stable")
        ends = np.cumsum(np.bincount(pair_ids, minlength=len(unique_pairs)))
        words_by_pair = pair_words[order]
        start = 0
        for code, total, end in zip(unique_pairs.tolist(), totals.tolist(), ends.tolist()):
            pair = chr(code >> 21) + chr(code & 0x1FFFFF)
            self.pair_counts[pair] = int(total)
            self.index[pair] = words_by_pair[start:end].tolist()
            start = end
        sort_key = self.sort_key
        self.heap = [(-count, sort_key[p[0]], sort_key[p[1]], p) for p, count in self.pair_counts.items()]
        heapq.heapify(self.heap)

    def best_pair(self) -> str | None:
        heap, pair_counts = self.heap, self.pair_counts
        while heap:
            negative_count, _, _, pair = heap[0]
            current = pair_counts.get(pair, 0)
            if current == -negative_count:
                return pair if current > 0 else None
            if current > 0:  # the count fell since this entry was pushed: refresh it
                heapq.heapreplace(heap, (-current, *heap[0][1:]))
            else:
                heapq.heappop(heap)
        return None

    def merge(self, pair: str, new: str) -> None:
        a, b = pair[0], pair[1]
        merged = self.token_bytes[a] + self.token_bytes[b]
        self.token_bytes[new] = merged
        self.sort_key[new] = _descending_key(merged)
        word_ids = self.index.pop(pair)
        if len(word_ids) >= self.bulk_threshold:
            gained = self._merge_bulk(pair, new, word_ids)
        else:
            gained = self._merge_each(pair, new, word_ids)
        del self.pair_counts[pair]
        sort_key, pair_counts = self.sort_key, self.pair_counts
        for g in gained:
            heapq.heappush(self.heap, (-pair_counts[g], sort_key[g[0]], sort_key[g[1]], g))

    def _merge_each(self, pair: str, new: str, word_ids: list[int]) -> set[str]:
        a, b = pair[0], pair[1]
        words, freqs, pair_counts, index = self.words, self.freqs, self.pair_counts, self.index
        lost_between = b + a
        gained: set[str] = set()
        for word_id in word_ids:
            old = words[word_id]
            word = old.replace(pair, new)
            if len(word) == len(old):
                continue  # stale index entry
            words[word_id] = word
            freq = freqs[word_id]
            last = len(word) - 1
            i = word.find(new)
            while i >= 0:
                if i > 0:
                    x = word[i - 1]
                    if x == new:
                        pair_counts[lost_between] -= freq
                    else:
                        pair_counts[x + a] -= freq
                    g = word[i - 1 : i + 1]
                    pair_counts[g] += freq
                    gained.add(g)
                    index[g].append(word_id)
                if i < last:
                    y = word[i + 1]
                    if y != new:  # a following new token accounts for the pair between the two
                        pair_counts[b + y] -= freq
                        g = word[i : i + 2]
                        pair_counts[g] += freq
                        gained.add(g)
                        index[g].append(word_id)
                i = word.find(new, i + 1)
        return gained

    def _merge_bulk(self, pair: str, new: str, word_ids: list[int]) -> set[str]:
        a, b = pair[0], pair[1]
        ids = np.unique(np.asarray(word_ids, dtype=np.int64))
        id_list = ids.tolist()
        words = self.words
        olds = itemgetter(*id_list)(words) if len(id_list) > 1 else (words[id_list[0]],)
        news = [old.replace(pair, new) for old in olds]
        for word_id, word in zip(id_list, news):
            words[word_id] = word
        # The new words side by side, with a separator before, between and after them.
        codes = _codes(_SEPARATOR + _SEPARATOR.join(news) + _SEPARATOR)
        new_code = ord(new)
        positions = np.flatnonzero(codes == new_code)
        owners = np.cumsum(codes == _SEPARATOR_CODE)[positions] - 1
        freqs = self.freq_array[ids][owners]
        pair_counts, index = self.pair_counts, self.index
        gained: set[str] = set()

        def apply(neighbours: np.ndarray, select: np.ndarray, lost_of, gained_of) -> None:
            neighbours, weights, word_of = neighbours[select], freqs[select], ids[owners[select]]
            if not len(neighbours):
                return
            order = np.argsort(neighbours, kind="stable")
            neighbours, weights, word_of = neighbours[order], weights[order], word_of[order]
            distinct, starts = np.unique(neighbours, return_index=True)
            sums = np.add.reduceat(weights, starts)
            ends = starts[1:].tolist() + [len(neighbours)]
            for code, total, start, end in zip(distinct.tolist(), sums.tolist(), starts.tolist(), ends):
                c = chr(code)
                pair_counts[lost_of(c)] -= total
                g = gained_of(c)
                pair_counts[g] += total
                gained.add(g)
                index[g].extend(word_of[start:end].tolist())

        left, right = codes[positions - 1], codes[positions + 1]
        apply(
            left,
            left != _SEPARATOR_CODE,
            lambda x: b + a if x == new else x + a,
            lambda x: x + new,
        )
        apply(
            right,
            (right != _SEPARATOR_CODE) & (right != new_code),
            lambda y: b + y,
            lambda y: new + y,
        )
        return gained


def learn_merges(
    pretoken_counts: Mapping[bytes, int], max_merges: int, *, bulk_threshold: int = BULK_THRESHOLD
) -> Iterator[tuple[bytes, bytes]]:
    """Yield up to ``max_merges`` merges, best first, each as ``(left bytes, right bytes)``.

    Each merge joins the most frequent adjacent pair of tokens (counted within pre-tokens, weighted
    by their counts); ties go to the lexicographically greatest ``(left, right)``. Stops early when
    no pair is left. ``bulk_threshold`` only chooses between two equivalent code paths.
    """
    if max_merges > _MAX_MERGES:
        raise ValueError(f"at most {_MAX_MERGES} merges are supported, not {max_merges}")
    state = _MergeState(pretoken_counts, bulk_threshold)
    for merge_index in range(max_merges):
        pair = state.best_pair()
        if pair is None:
            return
        yield state.token_bytes[pair[0]], state.token_bytes[pair[1]]
        state.merge(pair, token_char(merge_index))
