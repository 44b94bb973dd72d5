"""Stored rows <-> :class:`~bpestore.BPEModel`: the queries that read a tokenizer's vocab and
merges, and the one function that turns those rows into a model (both loaders use it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from ..errors import DamagedStoreError
from ..model import BPEModel, MergeRule
from .checked import Row

@dataclass(frozen=True)
class StoredWarm:
    """A tokenizer's warm table as the store keeps it (``warm_caches``): the engine's packed
    pre-tokens and ids (opaque here; bpestore/encode/warm.py makes and reads them), the
    fingerprint of the model that made it, how many pre-tokens it holds and where they came from."""

    fingerprint: str
    entries: int
    source: str
    data: bytes
    created_at: datetime | None = None


WARM_SQL = "SELECT fingerprint, entries, source, data FROM warm_caches WHERE tokenizer_id = ?"
VOCAB_SQL = "SELECT token_id, token FROM vocab WHERE tokenizer_id = ?"
MERGES_SQL = 'SELECT "left", "right" FROM merges WHERE tokenizer_id = ? ORDER BY rank'


def model_from_rows(
    special_tokens_json: str,
    pattern: str,
    merge_rule: str,
    vocab_rows: Mapping[int, bytes] | Iterable[tuple[int, bytes]],
    merge_rows: Iterable[tuple[bytes, bytes]],
    ref: str = "",
    location: str = "",
    added_tokens_json: str = "[]",
) -> BPEModel:
    """A model from a ``tokenizers`` row's columns (``added_tokens_json``: since 0010) and its ``vocab`` and ``merges`` rows (in rank
    order). What the model's checks refuse (a pattern a damaged or crafted store holds, say) is a
    DamagedStoreError naming ``ref`` in ``location``."""
    row = Row(location, ref, "tokenizers", "its row")
    specials = row.json_list_of_text("special_tokens", special_tokens_json)
    added = row.json_list_of_text("added_tokens", added_tokens_json)
    row.text("pattern", pattern)
    # (the column's text, whatever a store holds: the model checks it is a rule it knows)
    rule = cast(MergeRule, row.text("merge_rule", merge_rule))
    try:
        return BPEModel.stored(dict(vocab_rows), merge_rows, specials, pattern, rule, added)
    except (ValueError, TypeError) as error:
        raise DamagedStoreError(f"{ref} in {location} cannot be used: {error}") from None
