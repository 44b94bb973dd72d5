"""A cache, in NumPy, from short byte strings (the segments of a text) to their token ids.

Encoding natural text is mostly looking up the same few hundred thousand segments again and again.
A Python dict does that at a few hundred nanoseconds per segment, most of it waiting for memory.
This table looks up all the segments of a block of text at once with array operations, which the
CPU can overlap, and hands back where each segment's ids are.

Keys are exact, not hashes: a segment of up to ``MAX_KEY_BYTES`` bytes is its bytes packed into
``KEY_WORDS`` little-endian 64-bit words, with its length in the top byte of the last word (so an
empty slot, all zeros, never equals a key). Longer segments are the caller's business.
"""

from __future__ import annotations

import numpy as np

KEY_WORDS = 4  # 1, 2, 4 or 8: a row of KEY_WORDS booleans is read as one integer
MAX_KEY_BYTES = 8 * KEY_WORDS - 1
# The padding a byte buffer needs after its text so that keys can be read past its end.
KEY_PADDING = 8 * KEY_WORDS

_LOW_BYTES = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
_ROW_OF_BOOLS = np.dtype(f"<u{KEY_WORDS}")
_ALL_TRUE = int.from_bytes(b"\x01" * KEY_WORDS, "little")
_MULTIPLIERS = np.array(
    [0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93][:KEY_WORDS], dtype=np.uint64
)


def segment_keys(buffer: bytes, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The keys (shape ``(n, KEY_WORDS)``, uint64) of the segments ``buffer[start:start+length]``,
    each at most ``MAX_KEY_BYTES`` long; ``buffer`` must end with ``KEY_PADDING`` spare bytes."""
    # A view of every 8-byte window of the buffer, one per byte offset: unaligned, but one gather.
    windows = np.ndarray(shape=(len(buffer) - 7,), dtype="<u8", buffer=buffer, strides=(1,))
    keys = np.empty((len(starts), KEY_WORDS), dtype=np.uint64)
    for word in range(KEY_WORDS):
        in_word = np.clip(lengths - 8 * word, 0, 8)
        np.bitwise_and(windows[starts + 8 * word], _LOW_BYTES[in_word], out=keys[:, word])
    keys[:, -1] |= lengths.astype(np.uint64) << np.uint64(56)
    return keys


def first_of_each_key(keys: np.ndarray) -> np.ndarray:
    """The index of the first occurrence of each distinct key (row) of ``keys``."""
    whole_keys = np.ascontiguousarray(keys).view(np.dtype((np.void, 8 * KEY_WORDS))).ravel()
    return np.unique(whole_keys, return_index=True)[1]


def _rows_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Whether each row of ``a`` equals that of ``b``: the KEY_WORDS booleans of a row read as
    one integer (far faster than ``.all(axis=1)``)."""
    return (a == b).view(_ROW_OF_BOOLS).ravel() == _ALL_TRUE


class SegmentTable:
    """Exact keys -> token ids, in an open-addressing hash table with linear probing.

    Each slot holds a key and where its ids are in ``ids`` (start and count). The table doubles
    when half full, and keeps its size when cleared. ``ids`` has spare room at its end that
    callers may use as scratch space with :meth:`scratch`.
    """

    def __init__(self, entries: int = 8):
        """Room for ``entries`` keys to begin with (and about 4 ids each)."""
        self._allocate(2 * max(entries, 8))
        self.ids = np.zeros(4 * max(entries, 8), dtype=np.uint32)
        self.ids_used = 0

    def _allocate(self, capacity: int) -> None:
        bits = (capacity - 1).bit_length()
        self._shift = np.uint64(64 - bits)
        self._mask = (1 << bits) - 1
        self._keys = np.zeros((1 << bits, KEY_WORDS), dtype=np.uint64)
        # a key of at most MAX_KEY_BYTES bytes has at most that many ids: a byte holds the count
        self._id_start = np.zeros(1 << bits, dtype=np.int32)
        self._id_count = np.zeros(1 << bits, dtype=np.uint8)
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def clear(self) -> None:
        """Forget every key, keeping the room (a cache that was full once will be again)."""
        self._keys.fill(0)
        self.count = 0
        self.ids_used = 0

    def _slots(self, keys: np.ndarray) -> np.ndarray:
        mixed = keys[:, 0] * _MULTIPLIERS[0]
        for word in range(1, KEY_WORDS):
            mixed += keys[:, word] * _MULTIPLIERS[word]
        return (mixed >> self._shift).astype(np.int64)

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(id_start, id_count)`` of each key; a key not in the table has start -1 (and count 0,
        which a stored key may have too)."""
        n = len(keys)
        slots = self._slots(keys)
        found = np.full(n, -1, dtype=np.int64)
        pending = np.arange(n)
        while len(pending):
            slot = slots[pending]
            stored = np.take(self._keys, slot, axis=0)  # much faster than self._keys[slot]
            hit = _rows_equal(stored, keys[pending] if len(pending) < n else keys)
            found[pending[hit]] = slot[hit]
            pending = pending[~hit & (stored[:, -1] != 0)]  # an empty slot ends the search: a miss
            slots[pending] = (slots[pending] + 1) & self._mask
        missing = found < 0
        id_start = self._id_start[found].astype(np.int64)
        id_count = self._id_count[found].astype(np.int64)
        id_start[missing] = -1
        id_count[missing] = 0
        return id_start, id_count

    def insert(self, keys: np.ndarray, ids: np.ndarray, counts: np.ndarray) -> None:
        """Add distinct keys not in the table yet; key i has ids ``ids[sum(counts[:i]):][:counts[i]]``."""
        if self.count + len(keys) > (self._mask + 1) // 2:
            self._grow(self.count + len(keys))
        starts = self.ids_used + np.cumsum(counts) - counts
        self._reserve(len(ids))
        self.ids[self.ids_used : self.ids_used + len(ids)] = ids
        self.ids_used += len(ids)
        self._place(keys, starts, counts)

    def _place(self, keys: np.ndarray, id_start: np.ndarray, id_count: np.ndarray) -> None:
        slots = self._slots(keys)
        claimant = np.empty(self._mask + 1, dtype=np.int64)  # only read where just written
        pending = np.arange(len(keys))
        while len(pending):
            slot = slots[pending]
            free = np.flatnonzero(self._keys[slot, -1] == 0)
            # Several keys may want the same free slot: each writes its number there, and the one
            # whose number stayed gets the slot; the others probe on, as do keys that met a full slot.
            claimant[slot[free]] = free
            winners = free[claimant[slot[free]] == free]
            chosen, placed = slot[winners], pending[winners]
            self._keys[chosen] = keys[placed]
            self._id_start[chosen] = id_start[placed]
            self._id_count[chosen] = id_count[placed]
            left = np.ones(len(pending), dtype=bool)
            left[winners] = False
            pending = pending[left]
            slots[pending] = (slots[pending] + 1) & self._mask
        self.count += len(keys)

    def _grow(self, entries: int) -> None:
        occupied = np.flatnonzero(self._keys[:, -1] != 0)
        keys, id_start, id_count = self._keys[occupied], self._id_start[occupied], self._id_count[occupied]
        self._allocate(2 * entries)
        self._place(keys, id_start, id_count)

    def _reserve(self, extra: int) -> None:
        needed = self.ids_used + extra
        if needed > len(self.ids):
            grown = np.zeros(max(needed, 2 * len(self.ids)), dtype=np.uint32)
            grown[: self.ids_used] = self.ids[: self.ids_used]
            self.ids = grown

    def gather(self, id_start: np.ndarray, id_count: np.ndarray) -> np.ndarray:
        """The ids at each ``(start, count)``, one after another."""
        out_start = np.cumsum(id_count) - id_count
        total = int(out_start[-1] + id_count[-1]) if len(out_start) else 0
        return self.ids[np.repeat(id_start - out_start, id_count) + np.arange(total)]

    def scratch(self, ids: np.ndarray) -> int:
        """Copy ``ids`` past the stored ids, where the next :meth:`insert` will overwrite them, and
        return their start: lets one gather from ``self.ids`` serve stored and passing ids alike."""
        self._reserve(len(ids))
        self.ids[self.ids_used : self.ids_used + len(ids)] = ids
        return self.ids_used
