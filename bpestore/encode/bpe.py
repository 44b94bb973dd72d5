"""Applying BPE merges to one pre-token.

Tokens are single characters here (see :class:`TokenAlphabet`), so a pre-token is a string, a pair
of tokens a two-character string, and merging every occurrence of a pair is one ``str.replace``.
Two merge rules exist in the wild, and they differ for some vocabularies:

* :class:`PairRankMerger` -- GPT-2's ``bpe()``, also CS336's and Hugging Face's: repeatedly take
  the adjacent pair whose *merge* has the lowest rank and merge all its occurrences left to right.
* :class:`TokenRankMerger` -- tiktoken's: look the whole pre-token up first; then repeatedly merge
  the leftmost adjacent pair whose *concatenation* is the lowest-ranked token (rank = token id).

Each has a quadratic-free variant for long inputs (a heap of candidate merges over a linked list),
so a megabyte without whitespace still encodes in time linear up to a log factor.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from operator import add, itemgetter

import numpy as np

from .batch_bpe import BatchBPE

_NO_RANK = 1 << 62
# Above this many tokens the heap-based variants win over rescanning the string each step.
LONG_INPUT = 64
# Below this many words, merging them one by one beats the NumPy batch's fixed cost.
BATCH_MIN = 48


class TokenAlphabet:
    """One character per token: byte ``b`` is ``chr(b)``, longer tokens get codes from 256 up."""

    def __init__(self, vocab: Mapping[int, bytes]):
        ids = sorted(vocab)
        tokens = list(map(vocab.__getitem__, ids))
        self.id_of_bytes: dict[bytes, int] = dict(zip(tokens, ids))
        if len(self.id_of_bytes) != len(tokens):
            first = {}
            for token_id, token in zip(ids, tokens):
                if first.setdefault(token, token_id) != token_id:
                    raise ValueError(f"ids {first[token]} and {token_id} both stand for the token {token!r}")
        missing = [b for b in range(256) if bytes([b]) not in self.id_of_bytes]
        if missing:
            shown = ", ".join(f"0x{b:02x}" for b in missing[:8]) + (" ..." if len(missing) > 8 else "")
            raise ValueError(f"the vocab lacks {len(missing)} single-byte tokens ({shown}); byte-level BPE needs all 256")
        singles = [bytes([b]) for b in range(256)]
        longer = [token for token in tokens if len(token) > 1]  # in id order
        codes = list(range(256, min(256 + len(longer), 0xD800)))
        codes += range(0xE000, 0xE000 + len(longer) - len(codes))  # past the surrogates
        chars = "".join(map(chr, range(256))) + "".join(map(chr, codes))
        self.char_of_bytes: dict[bytes, str] = dict(zip(singles + longer, chars))
        self.id_of_code: list[int] = [-1] * (codes[-1] + 1 if codes else 256)
        for char, token in zip(chars, singles + longer):
            self.id_of_code[ord(char)] = self.id_of_bytes[token]

        # token character -> the character whose code is the token's id (see id_string)
        self.id_char_of_code: list[str] = [chr(max(token_id, 0)) for token_id in self.id_of_code]

    def id_string(self, chars: str) -> str:
        """The token ids of ``chars`` as a string of ``chr(id)`` (see :func:`id_string_to_array`)."""
        return chars.translate(self.id_char_of_code)


def id_string_to_array(ids: str) -> np.ndarray:
    """Token ids written as a string of ``chr(id)`` -> a uint32 array (ids in the surrogate range
    are lone surrogates, which 'surrogatepass' lets through)."""
    return np.frombuffer(ids.encode("utf-32-le", "surrogatepass"), dtype="<u4")


class PairRankMerger:
    """GPT-2's rule: lowest merge rank first, all occurrences of that pair at once."""

    def __init__(self, alphabet: TokenAlphabet, merges: Sequence[tuple[bytes, bytes]]):
        self.alphabet = alphabet
        char = alphabet.char_of_bytes
        lefts = list(map(itemgetter(0), merges))
        rights = list(map(itemgetter(1), merges))
        try:
            self.pair_of_rank: list[str] = list(map(add, map(char.__getitem__, lefts), map(char.__getitem__, rights)))
            self.result_of_rank: list[str] = list(map(char.__getitem__, map(add, lefts, rights)))
        except KeyError:
            for rank, (left, right) in enumerate(merges):
                missing = [t for t in (left, right, left + right) if t not in char]
                if missing:
                    raise ValueError(f"merge {rank} ({left!r}, {right!r}): {missing[0]!r} is not in the vocab") from None
            raise
        # Where a pair is listed twice, its first rank counts (later entries overwrite earlier).
        self.rank: dict[str, int] = dict(zip(reversed(self.pair_of_rank), range(len(merges) - 1, -1, -1)))
        self._batch: BatchBPE | None = None

    def encode_many(self, words: list[str]) -> list[str]:
        """The token ids of each word (a string of byte characters) as id strings, in bulk."""
        if self._batch is None:
            rank_result = {rank: self.result_of_rank[rank] for rank in self.rank.values()}
            self._batch = BatchBPE(self.rank, rank_result, "all", self.alphabet.id_of_code)
        return _encode_many(self, self._batch, words)

    def __call__(self, word: str) -> str:
        if len(word) > LONG_INPUT:
            return self._merge_long(word)
        rank_of = self.rank.get
        pair_of_rank, result_of_rank = self.pair_of_rank, self.result_of_rank
        while len(word) > 1:
            best = min(map(rank_of, map(add, word, word[1:]), repeat(_NO_RANK)))
            if best == _NO_RANK:
                break
            word = word.replace(pair_of_rank[best], result_of_rank[best])
        return word

    def _merge_long(self, word: str) -> str:
        tokens = list(word)
        n = len(tokens)
        following = list(range(1, n + 1))  # index of the next live token (n: none)
        preceding = list(range(-1, n - 1))
        rank_of = self.rank.get
        heap = [(rank, i) for i in range(n - 1) if (rank := rank_of(tokens[i] + tokens[i + 1])) is not None]
        heapq.heapify(heap)
        while heap:
            rank = heap[0][0]
            pair, result = self.pair_of_rank[rank], self.result_of_rank[rank]
            merged_at = []
            # All occurrences of this pair, left to right, before looking at what they form.
            while heap and heap[0][0] == rank:
                i = heapq.heappop(heap)[1]
                j = following[i]
                if tokens[i] is None or j >= n or tokens[i] + tokens[j] != pair:
                    continue  # stale: a token of this pair was merged away
                tokens[i] = result
                tokens[j] = None
                following[i] = following[j]
                if following[j] < n:
                    preceding[following[j]] = i
                merged_at.append(i)
            for i in merged_at:
                if tokens[i] is None:
                    continue
                before, after = preceding[i], following[i]
                if before >= 0 and (r := rank_of(tokens[before] + tokens[i])) is not None:
                    heapq.heappush(heap, (r, before))
                if after < n and (r := rank_of(tokens[i] + tokens[after])) is not None:
                    heapq.heappush(heap, (r, i))
        return "".join(t for t in tokens if t is not None)


class TokenRankMerger:
    """tiktoken's rule: the whole piece if it is a token, else lowest-ranked concatenation first."""

    def __init__(self, alphabet: TokenAlphabet):
        self.alphabet = alphabet
        char = alphabet.char_of_bytes
        rank_of = alphabet.id_of_bytes
        self.rank: dict[str, int] = {}  # pair of token characters -> rank of their concatenation
        self.result: dict[str, str] = {}
        for token, token_rank in rank_of.items():
            for cut in range(1, len(token)):
                left, right = token[:cut], token[cut:]
                if left in char and right in char:
                    pair = char[left] + char[right]
                    self.rank[pair] = token_rank
                    self.result[pair] = char[token]
        self._batch: BatchBPE | None = None

    def encode_many(self, words: list[str]) -> list[str]:
        """The token ids of each word (a string of byte characters) as id strings, in bulk."""
        whole = self.alphabet.id_of_bytes.get
        results = [chr(token_id) if (token_id := whole(word.encode("latin-1"))) is not None else None for word in words]
        rest = [i for i, result in enumerate(results) if result is None]
        if rest:
            if self._batch is None:
                rank_result = {rank: self.result[pair] for pair, rank in self.rank.items()}
                self._batch = BatchBPE(self.rank, rank_result, "leftmost", self.alphabet.id_of_code)
            for i, ids in zip(rest, _encode_many(self, self._batch, [words[i] for i in rest])):
                results[i] = ids
        return results

    def __call__(self, word: str) -> str:
        whole = self.alphabet.char_of_bytes.get(word.encode("latin-1")) if len(word) > 1 else None
        if whole is not None:
            return whole
        if len(word) > LONG_INPUT:
            return self._merge_long(word)
        rank_of, result = self.rank.get, self.result
        while len(word) > 1:
            ranks = list(map(rank_of, map(add, word, word[1:]), repeat(_NO_RANK)))
            best = min(ranks)
            if best == _NO_RANK:
                break
            i = ranks.index(best)  # the leftmost pair of lowest rank
            word = word[:i] + result[word[i : i + 2]] + word[i + 2 :]
        return word

    def _merge_long(self, word: str) -> str:
        tokens = list(word)
        n = len(tokens)
        following = list(range(1, n + 1))
        preceding = list(range(-1, n - 1))
        rank_of = self.rank.get
        heap = [(rank, i) for i in range(n - 1) if (rank := rank_of(tokens[i] + tokens[i + 1])) is not None]
        heapq.heapify(heap)
        while heap:
            rank, i = heapq.heappop(heap)
            j = following[i]
            if tokens[i] is None or j >= n or rank_of(tokens[i] + tokens[j]) != rank:
                continue  # stale
            tokens[i] = self.result[tokens[i] + tokens[j]]
            tokens[j] = None
            following[i] = following[j]
            if following[j] < n:
                preceding[following[j]] = i
            before, after = preceding[i], following[i]
            if before >= 0 and (r := rank_of(tokens[before] + tokens[i])) is not None:
                heapq.heappush(heap, (r, before))
            if after < n and (r := rank_of(tokens[i] + tokens[after])) is not None:
                heapq.heappush(heap, (r, i))
        return "".join(t for t in tokens if t is not None)


def _encode_many(merger, batch: BatchBPE, words: list[str]) -> list[str]:
    """Short words through the NumPy batch, long ones (and small batches) one by one."""
    id_string = merger.alphabet.id_string
    if len(words) < BATCH_MIN:
        return [id_string(merger(word)) for word in words]
    results = [id_string(merger._merge_long(word)) if len(word) > LONG_INPUT else None for word in words]
    short = [i for i, result in enumerate(results) if result is None]
    for i, word_ids in zip(short, batch([words[i] for i in short])):
        results[i] = word_ids
    return results


def pair_merges_from_ranks(
    ranks: Mapping[bytes, int], on_token: Callable[[], None] | None = None
) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
    """Reconstruct a merges list from token ranks (a tiktoken vocabulary).

    For each multi-byte token, in rank order, apply tiktoken's rule to its bytes with only the
    tokens ranked below it; if that ends in exactly two tokens, they are the merge that makes it.
    Returns the merges and the tokens that no pair merge reaches; ``on_token`` is called after
    each token (for a progress bar).
    """
    merges: list[tuple[bytes, bytes]] = []
    unreachable: list[bytes] = []
    rank_of = ranks.get
    on_token = on_token or (lambda: None)
    for token, rank in sorted(ranks.items(), key=itemgetter(1)):
        on_token()
        if len(token) < 2:
            continue
        parts = [token[i : i + 1] for i in range(len(token))]
        while len(parts) > 2:
            best_rank, best_at = rank, -1
            for i in range(len(parts) - 1):
                candidate = rank_of(parts[i] + parts[i + 1])
                if candidate is not None and candidate < best_rank:
                    best_rank, best_at = candidate, i
            if best_at < 0:
                break
            parts[best_at : best_at + 2] = [parts[best_at] + parts[best_at + 1]]
        if len(parts) == 2:
            merges.append((parts[0], parts[1]))
        else:
            unreachable.append(token)
    return merges, unreachable
