"""The decoder: what a tokenizer does to its tokens' text to give the text back.

A byte-level BPE spells its text exactly: the tokens' bytes joined are the text, and bpestore's
``decode`` is that. A SentencePiece-style BPE (Llama-2, Mistral) writes a space as ``▁``, puts one
before the text and spells a byte it has no character for as a ``<0xNN>`` token; its Hugging Face
decoder turns those back. Those steps are kept with such a tokenizer and run as ``tokenizers``
runs them in ``decode(ids, skip_special_tokens=False)``: on the list of the tokens' strings, each
step token by token (``Fuse`` joins them into one; ``ByteFallback`` turns each run of ``<0xNN>``
tokens into its text, or one U+FFFD per byte if it is not UTF-8), then joined.

>>> from bpestore.decoder import Decoder
>>> llama2 = {"type": "Sequence", "decoders": [
...     {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
...     {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
>>> Decoder.from_hf(llama2).apply(["\u2581Hello", "\u2581world", "<0x21>"])
'Hello world!'
>>> Decoder.from_hf({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"}).apply(["\u2581Hi", "\u2581there"])
'Hi there'
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Decoder", "DecoderError", "fallback_spellings"]

_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


class DecoderError(ValueError):
    """A decoder's JSON that bpestore cannot apply exactly; the message names where and what."""


@dataclass(frozen=True)
class Decoder:
    """The steps applied to the tokens' strings (``document``: the ``tokenizer.json`` form):
    ``(kind, pattern, content, start, stop)``."""

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

    def apply(self, tokens: list[str]) -> str:
        """The text of ``tokens`` (each as the vocab writes it: ``<0xNN>`` for a fallback byte)
        through the steps, joined."""
        for kind, pattern, content, start, stop in self.steps:
            if kind == "Replace":
                tokens = [token.replace(pattern, content) for token in tokens]
            elif kind == "Strip":
                tokens = [_strip(token, content, start, stop) for token in tokens]
            elif kind == "Fuse":
                tokens = ["".join(tokens)]
            elif kind == "ByteFallback":
                tokens = _byte_fallback(tokens)
            else:  # Metaspace: the replacement is a space, but in the first token (unless "never")
                tokens = [token.replace(pattern, "" if index == 0 and content != "never" else " ") for index, token in enumerate(tokens)]
        return "".join(tokens)


def fallback_spellings(vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]]) -> dict[int, str]:
    """The single-byte tokens of a SentencePiece-style vocab that are its fallback bytes, spelt
    ``<0xNN>`` as its ``tokenizer.json`` writes them; the others are characters (a vocab that has
    both ``<0x20>`` and ``" "`` keeps the character's id). A byte that is not ASCII is a fallback
    byte. SentencePiece numbers its 256 fallback bytes in a row, so where the bytes that are not
    ASCII lie so, an ASCII byte is a fallback byte if its id is in that row; else, if no merge uses
    it and it is not a printable character (``\\n`` is ``<0x0A>``)."""
    singles = {token[0]: token_id for token_id, token in vocab.items() if len(token) == 1}
    high = [singles.get(byte) for byte in range(0x80, 0x100)]
    base = high[0] - 0x80 if high[0] is not None else None
    in_a_row = base is not None and all(token_id == base + 0x80 + offset for offset, token_id in enumerate(high))
    merged = {part for left, right in merges for part in (left, right)}

    def is_fallback(byte: int, token_id: int) -> bool:
        if byte >= 0x80:
            return True
        if in_a_row:
            return token_id == base + byte  # type: ignore[operator]
        return bytes([byte]) not in merged and not 0x21 <= byte <= 0x7E

    return {token_id: f"<0x{byte:02X}>" for byte, token_id in singles.items() if is_fallback(byte, token_id)}


def _strip(token: str, content: str, start: int, stop: int) -> str:
    """Up to ``start`` leading and ``stop`` trailing ``content`` characters of ``token`` removed."""
    lead = 0
    while lead < start and token[lead : lead + 1] == content:
        lead += 1
    trail = 0
    while trail < stop and len(token) - trail > lead and token[len(token) - trail - 1] == content:
        trail += 1
    return token[lead : len(token) - trail]


def _byte_fallback(tokens: list[str]) -> list[str]:
    """Each run of ``<0xNN>`` tokens as its bytes' text, or one U+FFFD for each byte if they are
    not UTF-8 (``tokenizers``' ``ByteFallback``)."""
    out: list[str] = []
    run = bytearray()

    def flush() -> None:
        if run:
            try:
                out.append(run.decode("utf-8"))
            except UnicodeDecodeError:
                out.extend("\ufffd" for _ in run)
            run.clear()

    for token in tokens:
        byte = _BYTE_TOKEN.fullmatch(token)
        if byte is not None:
            run.append(int(byte.group(1), 16))
        else:
            flush()
            out.append(token)
    flush()
    return out


def _steps(document: Any, where: str) -> list[tuple[str, str, str, int, int]]:
    if not isinstance(document, dict):
        raise DecoderError(f"{where}: must be a JSON object, not {json.dumps(document)[:60]}")
    kind = document.get("type")
    if kind == "Sequence":
        steps = document.get("decoders")
        if not isinstance(steps, list):
            raise DecoderError(f"{where}.decoders: must be an array")
        return [step for index, item in enumerate(steps) for step in _steps(item, f"{where}.decoders[{index}]")]
    if kind in ("ByteFallback", "Fuse"):
        return [(kind, "", "", 0, 0)]
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
    if kind == "Metaspace":
        replacement = document.get("replacement")
        scheme = document.get("prepend_scheme", "always")
        if document.get("add_prefix_space") is False:
            scheme = "never"
        if not isinstance(replacement, str) or len(replacement) != 1 or scheme not in ("always", "first", "never"):
            raise DecoderError(f"{where}: Metaspace needs a one-character replacement and a prepend_scheme of always, first or never")
        return [("Metaspace", replacement, str(scheme), 0, 0)]
    raise DecoderError(
        f"{where}: {json.dumps(kind)} is not supported (supported: Replace, Strip, ByteFallback, Fuse, Metaspace, Sequence)"
    )
