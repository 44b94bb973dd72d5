"""The normalizer: what a tokenizer does to text before splitting it into pre-tokens.

A tokenizer's pipeline is normalizer → pre-tokenizer → BPE model (→ post-processor), as in Hugging
Face ``tokenizers``. A tokenizer trained by bpestore has no normalizer; one imported from a
``tokenizer.json`` may have one (GPT-NeoX and Qwen2 compose text to ``NFC``, others lowercase or
replace spaces). The steps are those of ``tokenizers`` and run in the engine on its tables, one
stretch of text at a time between special tokens, as ``tokenizers`` runs them:

>>> from bpestore.normalizer import Normalizer
>>> normalizer = Normalizer.from_hf({"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]})
>>> normalizer.normalize("Ｆｕｌｌ Width")
'full width'
>>> normalizer.to_hf()
{'type': 'Sequence', 'normalizers': [{'type': 'NFKC'}, {'type': 'Lowercase'}]}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .engine import normalize

#: The steps whose JSON is only its type.
_PLAIN = ("NFC", "NFD", "NFKC", "NFKD", "Lowercase")

#: Hugging Face normalizers bpestore does not run, and the tokenizers that use them.
_UNSUPPORTED = {
    "BertNormalizer": "BERT's normalizer (a WordPiece tokenizer's)",
    "Precompiled": "a SentencePiece precompiled character map (T5, ALBERT, XLM-R)",
    "StripAccents": "StripAccents",
    "Nmt": "Nmt",
    "ByteLevel": "ByteLevel as a normalizer",
}


class NormalizerError(ValueError):
    """A normalizer's JSON that bpestore cannot run exactly; the message names where and what."""


@dataclass(frozen=True)
class Step:
    """One normalizer: ``kind`` (``NFC``, ``NFD``, ``NFKC``, ``NFKD``, ``Lowercase``, ``Replace``,
    ``Prepend``, ``Strip``) and its two arguments: ``Replace``: the literal string and what
    replaces it; ``Prepend``: the prefix; ``Strip``: ``"1"`` to strip whitespace on the left, on
    the right."""

    kind: str
    a: str = ""
    b: str = ""

    def to_hf(self) -> dict[str, Any]:
        """This step as ``tokenizers`` writes it in a ``tokenizer.json``."""
        if self.kind in _PLAIN:
            return {"type": self.kind}
        if self.kind == "Replace":
            return {"type": "Replace", "pattern": {"String": self.a}, "content": self.b}
        if self.kind == "Prepend":
            return {"type": "Prepend", "prepend": self.a}
        return {"type": "Strip", "strip_left": self.a == "1", "strip_right": self.b == "1"}


@dataclass(frozen=True)
class Normalizer:
    """A sequence of normalizer steps, run in order on the text between special tokens."""

    steps: tuple[Step, ...]

    @classmethod
    def from_hf(cls, document: Any, where: str = "normalizer") -> Normalizer:
        """The normalizer a ``tokenizer.json``'s ``"normalizer"`` describes.

        Raises:
            NormalizerError: a step bpestore does not run (named, with where it is in the file),
                or a step of the wrong shape.
        """
        return cls(tuple(_steps(document, where)))

    def to_hf(self) -> dict[str, Any]:
        """This normalizer as ``tokenizers`` writes it (one step as itself, several as a ``Sequence``)."""
        steps = [step.to_hf() for step in self.steps]
        return steps[0] if len(steps) == 1 else {"type": "Sequence", "normalizers": steps}

    def to_json(self) -> str:
        """The ``tokenizer.json`` form, as one line of JSON (how the store keeps it)."""
        return json.dumps(self.to_hf(), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Normalizer:
        """The normalizer :meth:`to_json` wrote."""
        return cls.from_hf(json.loads(text))

    def engine_steps(self) -> list[tuple[str, str, str]]:
        """The steps as the engine takes them."""
        return [(step.kind, step.a, step.b) for step in self.steps]

    def normalize(self, text: str) -> str:
        """``text`` normalized (in the engine, as encoding normalizes it)."""
        return normalize(self.engine_steps(), text)

    def __str__(self) -> str:
        """The steps in a line, e.g. ``NFKC, Lowercase``, ``Replace(' ' → '▁')``."""
        shown = []
        for step in self.steps:
            if step.kind == "Replace":
                shown.append(f"Replace({step.a!r} → {step.b!r})")
            elif step.kind == "Prepend":
                shown.append(f"Prepend({step.a!r})")
            elif step.kind == "Strip":
                sides = [side for side, on in (("left", step.a), ("right", step.b)) if on == "1"]
                shown.append(f"Strip({', '.join(sides) or 'nothing'})")
            else:
                shown.append(step.kind)
        return ", ".join(shown)


def _steps(document: Any, where: str) -> list[Step]:
    if not isinstance(document, dict):
        raise NormalizerError(f"{where}: must be a JSON object, not {json.dumps(document)[:60]}")
    kind = document.get("type")
    if kind == "Sequence":
        inner = document.get("normalizers")
        if not isinstance(inner, list):
            raise NormalizerError(f"{where}.normalizers: must be an array")
        return [step for index, item in enumerate(inner) for step in _steps(item, f"{where}.normalizers[{index}]")]
    if kind in _PLAIN:
        return [Step(kind)]
    if kind == "Replace":
        pattern = document.get("pattern")
        literal = pattern.get("String") if isinstance(pattern, dict) else None
        content = document.get("content")
        if isinstance(pattern, dict) and "Regex" in pattern:
            raise NormalizerError(f"{where}: Replace by a Regex (only Replace by a String is supported)")
        if not isinstance(literal, str) or not literal or not isinstance(content, str):
            raise NormalizerError(f"{where}: Replace needs a non-empty String pattern and a string content")
        return [Step("Replace", literal, content)]
    if kind == "Prepend":
        prepend = document.get("prepend")
        if not isinstance(prepend, str):
            raise NormalizerError(f"{where}: Prepend needs a string prepend")
        return [Step("Prepend", prepend)]
    if kind == "Strip":
        left, right = document.get("strip_left", True), document.get("strip_right", True)
        if not isinstance(left, bool) or not isinstance(right, bool):
            raise NormalizerError(f"{where}: Strip's strip_left and strip_right must be true or false")
        return [Step("Strip", "1" if left else "", "1" if right else "")]
    named = _UNSUPPORTED.get(kind) if isinstance(kind, str) else None
    raise NormalizerError(f"{where}: {named or json.dumps(kind)} is not supported (supported: {', '.join(_PLAIN)}, Replace, Prepend, Strip, Sequence)")
