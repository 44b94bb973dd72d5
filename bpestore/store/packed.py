"""A stored tokenizer's vocab and merges packed into one BLOB, the fast way to load it.

Reading GPT-2's 50,257 vocab rows and 50,000 merge rows costs SQLite and Python about 0.15 s, most
of ``Tokenizer.from_db``; one BLOB is read in a millisecond and unpacked by the engine
(``bpestore._engine.unpack_model``) in a few more. The rows stay the truth, the BLOB is a copy:

* ``Store.save`` writes both in one transaction (on SQLite; other databases read the rows);
* migration 0004 adds the table ``packed_models`` and packs every tokenizer already stored;
* triggers on SQLite delete a tokenizer's packed copy whenever one of its vocab or merge rows is
  inserted, changed or deleted (by anyone, at a ``sqlite3`` prompt too), so a stale copy is never
  read: the loaders fall back to the rows when there is none.

The layout is the engine's (``crates/encode/src/packed.rs`` writes and reads it; migration 0004
keeps a frozen copy of its first version, as migrations must).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, overload

from ..collector import collector_paused
from ..engine import pack_model, unpack_model, unpack_vocab
from ..errors import DamagedStoreError
from ..model import PackedMerges
from .checked import described

PACKED_SQL = "SELECT data FROM packed_models WHERE tokenizer_id = ?"


def pack(vocab: Mapping[int, bytes], merges: Sequence[tuple[bytes, bytes]]) -> bytes:
    """``vocab`` (id -> token) and ``merges`` (in rank order) as one byte string, packed by the
    engine (its layout's one writer, beside its reader)."""
    return pack_model(dict(vocab), merges)


@overload
def unpack(
    data: bytes, vocab_size: int, ref: str, location: str, *, merges_now: Literal[True] = True
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]: ...
@overload
def unpack(
    data: bytes, vocab_size: int, ref: str, location: str, *, merges_now: bool
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]] | PackedMerges]: ...
def unpack(
    data: bytes, vocab_size: int, ref: str, location: str, *, merges_now: bool = True
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]] | PackedMerges]:
    """The vocab and merges packed in ``data``, the packed copy of ``ref`` in ``location`` whose
    ``tokenizers`` row says it has ``vocab_size`` tokens; StoreError, saying how to recover, if
    the copy is not well formed or does not hold that many tokens.

    Without ``merges_now`` (a model to load), the merges come as a :class:`~bpestore.model.PackedMerges`
    of ``data``, which makes their list when the model is first asked for it, and which a
    tokenizer's encoder reads itself: the whole copy is checked now all the same, and making
    100,000 merge tuples that only ``show``, ``diff`` and ``export`` read was a third of loading
    cl100k_base from a store."""
    # The 150,000 objects made are acyclic: the cyclic collector's passes over them while they
    # are made (a third of the time, in a fresh process) find nothing.
    if not isinstance(data, bytes):  # text or a number, written by hand into a table that is not STRICT
        raise damaged(ref, location, f"it holds {described(data)}, not a blob")
    merges: list[tuple[bytes, bytes]] | PackedMerges
    try:
        with collector_paused():
            if merges_now:
                vocab, merges = unpack_model(data)
            else:
                vocab, merges = unpack_vocab(data), PackedMerges(data)
    except (ValueError, TypeError) as error:
        raise damaged(ref, location, str(error)) from None
    if len(vocab) != vocab_size:
        raise damaged(ref, location, f"it holds {len(vocab)} tokens, the tokenizer has {vocab_size}")
    return vocab, merges


def damaged(ref: str, location: str, reason: str) -> DamagedStoreError:
    """The error for a packed copy that cannot be used: it names the column, packed_models.data."""
    return DamagedStoreError(
        f"{location}: {ref} is damaged: packed_models.data, the packed copy of {ref}'s vocab and merges, cannot be used ({reason}); "
        "deleting its row from the table packed_models makes bpestore read the vocab and merges rows instead"
    )
