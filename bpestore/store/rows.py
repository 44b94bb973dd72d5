"""Stored rows <-> :class:`~bpestore.BPEModel`: the queries that read a tokenizer's vocab and
merges, and the one function that turns those rows into a model (both loaders use it)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import cast

from ..errors import DamagedStoreError
from ..model import BPEModel, MergeRule

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
    try:
        # (the column's text, whatever a store holds: the model checks it is a rule it knows)
        rule = cast(MergeRule, merge_rule)
        specials, added = json.loads(special_tokens_json), json.loads(added_tokens_json)
        return BPEModel.stored(dict(vocab_rows), merge_rows, specials, pattern, rule, added)
    except (ValueError, TypeError) as error:
        raise DamagedStoreError(f"{ref} in {location} cannot be used: {error}") from None
