"""Stored rows <-> :class:`~bpestore.BPEModel`: the queries that read a tokenizer's vocab and
merges, and the one function that turns those rows into a model (both loaders use it)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from ..decoder import Decoder, DecoderError
from ..errors import DamagedStoreError
from ..model import BPEModel, MergeRule, PackedMerges, check_pattern
from ..normalizer import Normalizer, NormalizerError
from ..post_processor import PostProcessor, PostProcessorError
from ..pre_tokenizer import PreTokenizer, PreTokenizerError
from .checked import Row, described


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


def checked_warm(
    fingerprint: object, entries: object, source: object, data: object, created_at: object, row: Row, *, with_data: bool = True
) -> StoredWarm:
    """A ``warm_caches`` row read as the types its columns promise (``row``: where it is, in
    ``warm_caches``); DamagedStoreError naming the column otherwise."""
    blob = b""
    if with_data:
        if not isinstance(data, (bytes, memoryview)):
            raise row.damaged("data", f"holds {described(data)}, not a blob")
        blob = bytes(data)
    created = None if created_at is None else row.moment("created_at", created_at)
    return StoredWarm(row.text("fingerprint", fingerprint), row.integer("entries", entries), row.text("source", source), blob, created)
VOCAB_SQL = "SELECT token_id, token FROM vocab WHERE tokenizer_id = ?"
MERGES_SQL = 'SELECT "left", "right" FROM merges WHERE tokenizer_id = ? ORDER BY rank'


def model_from_rows(
    special_tokens_json: str,
    pattern: str,
    merge_rule: str,
    vocab_rows: Mapping[int, bytes] | Iterable[tuple[int, bytes]],
    merge_rows: Iterable[tuple[bytes, bytes]] | PackedMerges,
    ref: str = "",
    location: str = "",
    added_tokens_json: str = "[]",
    pipeline_json: str | None = None,
) -> BPEModel:
    """A model from a ``tokenizers`` row's columns (``added_tokens_json``: since 0010) and its ``vocab`` and ``merges`` rows (in rank
    order, or read when first asked for: :func:`.packed.unpack`). What the model's checks refuse (a pattern a damaged or crafted store holds, say) is a
    DamagedStoreError naming ``ref`` in ``location``."""
    row = Row(location, ref, "tokenizers", "its row")
    specials = row.json_list_of_text("special_tokens", special_tokens_json)
    added = row.json_list_of_text("added_tokens", added_tokens_json)
    row.text("pattern", pattern)
    # (the column's text, whatever a store holds: the model checks it is a rule it knows)
    rule = cast(MergeRule, row.text("merge_rule", merge_rule))
    pipeline = pipeline_from_json(row, pipeline_json)
    try:
        # (the model copies the vocab: a dict already, as a packed copy's is, needs no copy of its own first)
        vocab = vocab_rows if isinstance(vocab_rows, dict) else dict(vocab_rows)
        return BPEModel.stored(vocab, merge_rows, specials, pattern, rule, added, **pipeline)
    except (ValueError, TypeError) as error:
        try:  # (asked only once the model is refused: is the pattern the reason? then the column is named)
            check_pattern(pattern)
        except ValueError:
            raise row.damaged("pattern", f"cannot be used: {error}") from None
        raise DamagedStoreError(f"{ref} in {location} cannot be used: {error}") from None


def pipeline_json(model: BPEModel) -> str | None:
    """The ``tokenizers.pipeline`` column of ``model`` (None: it has no normalizer nor normalized
    tokens, as every tokenizer bpestore trains)."""
    if (
        model.normalizer is None and not model.normalized_tokens and model.post_processor is None and not model.token_options
        and model.pre_tokenizer is None and not model.dropped_bytes and not model.byte_fallback and model.decoder is None
        and not model.config and not model.aliases
    ):
        return None
    return json.dumps(
        {
            "normalizer": model.normalizer.to_hf() if model.normalizer is not None else None,
            "normalized_tokens": sorted(model.normalized_tokens),
            "post_processor": model.post_processor.to_hf() if model.post_processor is not None else None,
            "token_options": {token: sorted(named) for token, named in sorted(model.token_options.items())},
            # (no pre-tokenizer at all, SentencePiece's, is "whole"; null: the pattern makes the pieces)
            "pre_tokenizer": None if model.pre_tokenizer is None else model.pre_tokenizer.to_hf() if model.pre_tokenizer.stages else "whole",
            "dropped_bytes": sorted(model.dropped_bytes),
            "byte_fallback": model.byte_fallback,
            "decoder": model.decoder.to_hf() if model.decoder is not None else None,
            "config": model.config,
            # (id -> the bytes in hex: an alias may be any bytes)
            "aliases": {str(token_id): data.hex() for token_id, data in sorted(model.aliases.items())},
        },
        ensure_ascii=False,
    )


def pipeline_from_json(row: Row, value: object) -> dict[str, Any]:
    """The model's keyword arguments that ``tokenizers.pipeline`` holds (see :func:`pipeline_json`);
    DamagedStoreError, naming the row and column, for a value of another shape."""
    document = row.json_object("pipeline", value, nullable=True)
    if document is None:
        return {}
    normalizer, tokens, processor = document.get("normalizer"), document.get("normalized_tokens", []), document.get("post_processor")
    if not isinstance(tokens, list) or not all(isinstance(token, str) for token in tokens):
        raise row.damaged("pipeline", "holds normalized_tokens that are not a JSON list of strings")
    try:
        made = Normalizer.from_hf(normalizer) if normalizer is not None else None
    except NormalizerError as error:
        raise row.damaged("pipeline", f"holds a normalizer bpestore cannot run ({error})") from None
    try:
        post_processor = PostProcessor.from_hf(processor) if processor is not None else None
    except PostProcessorError as error:
        raise row.damaged("pipeline", f"holds a post-processor bpestore cannot apply ({error})") from None
    options = document.get("token_options", {})
    if not isinstance(options, dict) or not all(
        isinstance(named, list) and all(isinstance(option, str) for option in named) for named in options.values()
    ):
        raise row.damaged("pipeline", "holds token_options that are not a JSON object of lists of strings")
    try:
        stored = document.get("pre_tokenizer", None)
        chars_first = document.get("byte_fallback", False) is True
        pre_tokenizer = (
            None if stored is None else PreTokenizer.whole() if stored == "whole" else PreTokenizer.from_hf(stored, byte_level=not chars_first)
        )
    except PreTokenizerError as error:
        raise row.damaged("pipeline", f"holds a pre-tokenizer bpestore cannot run ({error})") from None
    dropped = document.get("dropped_bytes", [])
    if not isinstance(dropped, list) or not all(isinstance(byte, int) and not isinstance(byte, bool) and 0 <= byte < 256 for byte in dropped):
        raise row.damaged("pipeline", "holds dropped_bytes that are not a JSON list of integers from 0 to 255")
    byte_fallback = document.get("byte_fallback", False)
    if not isinstance(byte_fallback, bool):
        raise row.damaged("pipeline", "holds a byte_fallback that is not true or false")
    try:
        decoder = Decoder.from_hf(document["decoder"]) if document.get("decoder") is not None else None
    except DecoderError as error:
        raise row.damaged("pipeline", f"holds a decoder bpestore cannot apply ({error})") from None
    config = document.get("config", {})
    if not isinstance(config, dict):
        raise row.damaged("pipeline", "holds a config that is not a JSON object")
    return {
        "normalizer": made, "normalized_tokens": tokens, "post_processor": post_processor, "token_options": options,
        "pre_tokenizer": pre_tokenizer, "dropped_bytes": dropped, "byte_fallback": byte_fallback, "decoder": decoder,
        "config": config, "aliases": _aliases_from_json(row, document.get("aliases", {})),
    }


def _aliases_from_json(row: Row, value: object) -> dict[int, bytes]:
    """The ``aliases`` of a pipeline column: a JSON object of ids (decimal) to non-empty hex bytes."""
    damaged = row.damaged("pipeline", "holds aliases that are not a JSON object of ids to bytes in hex")
    if not isinstance(value, dict):
        raise damaged
    aliases: dict[int, bytes] = {}
    for key, data in value.items():
        if not (key.isascii() and key.isdigit() and isinstance(data, str) and data):
            raise damaged
        try:
            aliases[int(key)] = bytes.fromhex(data)
        except ValueError:
            raise damaged from None
    return aliases


def pipeline_lines(pipeline: dict[str, Any]) -> list[tuple[str, str]]:
    """What a tokenizer's pipeline holds (the keyword arguments :func:`pipeline_from_json` gives),
    one ``(label, text)`` line each, for ``bpestore show``."""
    lines: list[tuple[str, str]] = []
    if pipeline.get("byte_fallback"):
        lines.append(("model", "SentencePiece-style BPE: merged from characters, bytes as the fallback"))
    if pipeline.get("normalizer") is not None:
        lines.append(("normalizer", str(pipeline["normalizer"])))
    if pipeline.get("pre_tokenizer") is not None:
        lines.append(("pre-tokenizer", str(pipeline["pre_tokenizer"])))
    if pipeline.get("post_processor") is not None:
        lines.append(("post-processor", str(pipeline["post_processor"]) + " (encode --add-special-tokens)"))
    if pipeline.get("decoder") is not None:
        lines.append(("decoder", ", ".join(step[0] for step in pipeline["decoder"].steps) or "none"))
    aliases = pipeline.get("aliases") or {}
    if aliases:
        shown = ", ".join(f"{token_id} {data.decode('utf-8', errors='replace')[:20]!r}" for token_id, data in sorted(aliases.items())[:4])
        lines.append(("ids beside the vocab", f"{len(aliases)} ({shown}{' ...' if len(aliases) > 4 else ''}): decoded, given by BPE only as twins"))
    if pipeline.get("dropped_bytes"):
        lines.append(("bytes left out", ", ".join(f"0x{byte:02x}" for byte in sorted(pipeline["dropped_bytes"]))))
    options = pipeline.get("token_options") or {}
    if options:
        lines.append(("token options", ", ".join(f"{token} ({', '.join(sorted(named))})" for token, named in sorted(options.items()))))
    for key, value in (pipeline.get("config") or {}).items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append((key.replace("_", " "), shown if len(shown) <= 80 else shown[:77] + "..."))
    return lines
