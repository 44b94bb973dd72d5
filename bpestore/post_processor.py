"""The post-processor: the special tokens a tokenizer puts around a text's ids on request.

Hugging Face ``tokenizers`` ends its pipeline with a post-processor: Llama-3's puts
``<|begin_of_text|>`` before every text, RoBERTa's ``<s>`` before and ``</s>`` after, BERT's
``[CLS]`` and ``[SEP]``. ``tokenizers`` applies it when ``encode`` is called with
``add_special_tokens=True`` (its default); bpestore's :meth:`~bpestore.Tokenizer.encode` gives the
ids without it unless asked (``add_special_tokens=True``), so that plain encoding stays tiktoken's
and CS336's. A ``ByteLevel`` post-processor only trims offsets: it adds no token.

>>> from bpestore.post_processor import PostProcessor
>>> roberta = {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0], "trim_offsets": True, "add_prefix_space": False}
>>> processor = PostProcessor.from_hf(roberta)
>>> processor.prefix, processor.suffix
((0,), (2,))
>>> processor.around([31414, 232])
[0, 31414, 232, 2]
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["PostProcessor", "PostProcessorError"]


class PostProcessorError(ValueError):
    """A post-processor's JSON that bpestore cannot apply exactly; the message names where and what."""


@dataclass(frozen=True)
class PostProcessor:
    """The ids a post-processor puts before (``prefix``) and after (``suffix``) the ids of one
    text, and its ``tokenizer.json`` form (``document``, kept to be written back as it was)."""

    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    document: str

    @classmethod
    def from_hf(cls, document: Any, where: str = "post_processor") -> PostProcessor:
        """The post-processor a ``tokenizer.json``'s ``"post_processor"`` describes.

        Raises:
            PostProcessorError: a kind bpestore does not apply, or one of the wrong shape (named,
                with where it is in the file).
        """
        prefix, suffix = _around(document, where)
        return cls(tuple(prefix), tuple(suffix), json.dumps(document, ensure_ascii=False, sort_keys=True))

    def to_hf(self) -> Any:
        """The ``tokenizer.json`` form, as it was read."""
        return json.loads(self.document)

    def with_ids(self, new_of: Mapping[int, int]) -> PostProcessor:
        """The same post-processor with each id it adds renumbered by ``new_of`` (old id -> new id,
        as a trim renumbers the tokens it keeps).

        >>> processor = PostProcessor.from_hf({"type": "BertProcessing", "cls": ["[CLS]", 101], "sep": ["[SEP]", 102]})
        >>> processor.with_ids({101: 1, 102: 2}).around([7])
        [1, 7, 2]
        """
        def renumbered(token_id: int) -> int:
            if token_id not in new_of:
                raise ValueError(f"the post-processor adds id {token_id}, which is dropped")
            return new_of[token_id]

        return PostProcessor.from_hf(_renumbered(self.to_hf(), renumbered))

    @property
    def adds_tokens(self) -> bool:
        """Whether it adds any token (a ``ByteLevel`` one adds none)."""
        return bool(self.prefix or self.suffix)

    @property
    def trims_offsets(self) -> bool | None:
        """None if it leaves offsets as they are; else the ``add_prefix_space`` of the step that
        trims them (a ``ByteLevel`` or ``RobertaProcessing`` with ``trim_offsets``): a token's
        leading and trailing spaces leave its span, whether or not special tokens are added."""
        return _trims(self.to_hf())

    def around_offsets(self, offsets: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """``offsets`` with ``(0, 0)`` for each token :meth:`around` puts around the ids (what
        Hugging Face ``tokenizers`` gives a token the post-processor adds)."""
        if not self.adds_tokens:
            return offsets
        return [*[(0, 0)] * len(self.prefix), *offsets, *[(0, 0)] * len(self.suffix)]

    def around(self, ids: list[int]) -> list[int]:
        """``ids`` with the prefix before and the suffix after."""
        return [*self.prefix, *ids, *self.suffix] if self.adds_tokens else ids

    def __str__(self) -> str:
        kind = self.to_hf().get("type", "?")
        return f"{kind} (adds {len(self.prefix)} before, {len(self.suffix)} after)" if self.adds_tokens else str(kind)


def _renumbered(document: Any, renumbered: Callable[[int], int]) -> Any:
    """``document`` with the ids of the special tokens it adds renumbered (the kinds
    :func:`_around` reads; others are left as they are)."""
    if not isinstance(document, dict):
        return document
    kind = document.get("type")
    if kind in ("RobertaProcessing", "BertProcessing"):
        return {
            **document, **{key: [document[key][0], renumbered(document[key][1])] for key in ("cls", "sep") if _is_pair(document.get(key))}
        }
    if kind == "TemplateProcessing":
        specials = document.get("special_tokens") or {}
        return {
            **document,
            "special_tokens": {
                name: {**entry, "ids": [renumbered(token_id) for token_id in entry.get("ids", [])]} if isinstance(entry, dict) else entry
                for name, entry in specials.items()
            },
        }
    if kind == "Sequence" and isinstance(document.get("processors"), list):
        return {**document, "processors": [_renumbered(step, renumbered) for step in document["processors"]]}
    return document


def _trims(document: Any) -> bool | None:
    """See :attr:`PostProcessor.trims_offsets` (``tokenizers``' defaults: both true)."""
    kind = document.get("type")
    if kind in ("ByteLevel", "RobertaProcessing") and document.get("trim_offsets", True):
        return bool(document.get("add_prefix_space", True))
    if kind == "Sequence":
        for step in document.get("processors", []):
            trims = _trims(step)
            if trims is not None:
                return trims
    return None


def _around(document: Any, where: str) -> tuple[list[int], list[int]]:
    if not isinstance(document, dict):
        raise PostProcessorError(f"{where}: must be a JSON object, not {json.dumps(document)[:60]}")
    kind = document.get("type")
    if kind == "ByteLevel":
        return [], []  # (it trims offsets; the ids are the same)
    if kind in ("RobertaProcessing", "BertProcessing"):
        cls, sep = document.get("cls"), document.get("sep")
        if not (_is_pair(cls) and _is_pair(sep)):
            raise PostProcessorError(f"{where}: {kind} needs cls and sep as [token, id]")
        assert isinstance(cls, list) and isinstance(sep, list)
        return [cls[1]], [sep[1]]
    if kind == "TemplateProcessing":
        return _template(document, where)
    if kind == "Sequence":
        steps = document.get("processors")
        if not isinstance(steps, list):
            raise PostProcessorError(f"{where}.processors: must be an array")
        prefix: list[int] = []
        suffix: list[int] = []
        for index, step in enumerate(steps):
            before, after = _around(step, f"{where}.processors[{index}]")
            prefix, suffix = before + prefix, suffix + after  # (each step wraps what the one before made)
        return prefix, suffix
    raise PostProcessorError(f"{where}: {json.dumps(kind)} is not supported (supported: TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel, Sequence)")


def _is_pair(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and isinstance(value[0], str) and _is_id(value[1])


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31


def _template(document: dict[str, Any], where: str) -> tuple[list[int], list[int]]:
    """A ``TemplateProcessing``'s template for one text (``single``): the ids of the special
    tokens before the text's (``$A``) and after."""
    single, specials = document.get("single"), document.get("special_tokens") or {}
    if not isinstance(single, list) or not isinstance(specials, dict):
        raise PostProcessorError(f"{where}: TemplateProcessing needs a single template and a special_tokens object")
    prefix: list[int] = []
    suffix: list[int] = []
    seen_text = False
    for index, item in enumerate(single):
        piece = item.get("SpecialToken") if isinstance(item, dict) else None
        sequence = item.get("Sequence") if isinstance(item, dict) else None
        if isinstance(sequence, dict) and sequence.get("id") == "A" and not seen_text:
            seen_text = True
            continue
        if not isinstance(piece, dict) or not isinstance(piece.get("id"), str):
            raise PostProcessorError(f"{where}.single[{index}]: an item bpestore does not apply: {json.dumps(item)[:60]}")
        entry = specials.get(piece["id"])
        ids = entry.get("ids") if isinstance(entry, dict) else None
        if not isinstance(ids, list) or not all(_is_id(token_id) for token_id in ids):
            raise PostProcessorError(f"{where}.special_tokens: {piece['id']!r} has no ids")
        (suffix if seen_text else prefix).extend(ids)
    if not seen_text:
        raise PostProcessorError(f"{where}.single: the template has no $A (the text)")
    return prefix, suffix
