"""The decoder: what a tokenizer does to the text its tokens spell to give it back.

A byte-level BPE spells its text exactly: the tokens' bytes joined are the text, and bpestore's
``decode`` is that. A SentencePiece-style BPE (Llama-2, Mistral) writes a space as ``▁`` and puts
one before the text; its Hugging Face decoder turns ``▁`` back into spaces and strips the first
one. Those steps are kept with such a tokenizer and applied after the bytes are joined, as
``tokenizers``' ``decode(ids, skip_special_tokens=False)`` applies them.

>>> from bpestore.decoder import Decoder
>>> llama2 = {"type": "Sequence", "decoders": [
...     {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
...     {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
>>> Decoder.from_hf(llama2).apply("\u2581Hello\u2581world")
'Hello world'
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["Decoder", "DecoderError"]


class DecoderError(ValueError):
    """A decoder's JSON that bpestore cannot apply exactly; the message names where and what."""


@dataclass(frozen=True)
class Decoder:
    """The steps applied to the joined text (``document``: the ``tokenizer.json`` form)."""

    document: str
    steps: tuple[tuple[str, str, str, int, int], ...]

    @classmethod
    def from_hf(cls, document: Any, where: str = "decoder") -> Decoder:
        """The decoder a ``tokenizer.json``'s ``"decoder"`` describes.

        Raises:
            DecoderError: a step bpestore does not apply, named with where it is.
        """
        return cls(json.dumps(document, ensure_ascii=False, sort_keys=True), tuple(_steps(document, where)))

    def to_hf(self) -> Any:
        """The ``tokenizer.json`` form, as it was read."""
        return json.loads(self.document)

    def apply(self, text: str) -> str:
        """``text`` (the tokens' bytes joined, as UTF-8) through the steps."""
        for kind, pattern, content, start, stop in self.steps:
            if kind == "Replace":
                text = text.replace(pattern, content)
            else:  # Strip: up to `start` leading and `stop` trailing `content` characters
                lead = 0
                while lead < start and text[lead : lead + 1] == content:
                    lead += 1
                trail = 0
                while trail < stop and len(text) - trail > lead and text[len(text) - trail - 1] == content:
                    trail += 1
                text = text[lead : len(text) - trail]
        return text


def _steps(document: Any, where: str) -> list[tuple[str, str, str, int, int]]:
    if not isinstance(document, dict):
        raise DecoderError(f"{where}: must be a JSON object, not {json.dumps(document)[:60]}")
    kind = document.get("type")
    if kind == "Sequence":
        steps = document.get("decoders")
        if not isinstance(steps, list):
            raise DecoderError(f"{where}.decoders: must be an array")
        return [step for index, item in enumerate(steps) for step in _steps(item, f"{where}.decoders[{index}]")]
    if kind in ("ByteFallback", "Fuse", "ByteLevel"):
        return []  # (bytes joined and read as UTF-8 already are what these give)
    if kind == "Replace":
        pattern, content = document.get("pattern"), document.get("content")
        literal = pattern.get("String") if isinstance(pattern, dict) else None
        if not isinstance(literal, str) or not literal or not isinstance(content, str):
            raise DecoderError(f"{where}: Replace by a non-empty String only")
        return [("Replace", literal, content, 0, 0)]
    if kind == "Strip":
        content, start, stop = document.get("content"), document.get("start", 0), document.get("stop", 0)
        if not isinstance(content, str) or len(content) != 1 or not all(isinstance(n, int) and n >= 0 for n in (start, stop)):
            raise DecoderError(f"{where}: Strip needs one character and counts")
        return [("Strip", "", content, start, stop)]
    raise DecoderError(f"{where}: {json.dumps(kind)} is not supported (supported: Replace, Strip, ByteFallback, Fuse, ByteLevel, Sequence)")
