"""The pre-tokenizer pipeline: Hugging Face's pre-tokenizers in a sequence, run in the engine.

Most tokenizers split text with one regex (``BPEModel.pattern``: GPT-2's, cl100k's, Llama-3's),
and bpestore runs those on its fastest paths. Some published tokenizers chain several
pre-tokenizers instead (Falcon: ``Punctuation``, ``ByteLevel``, ``Digits``, ``Split``); such a
chain is kept as it is and run stage by stage in the engine, each stage on the pieces the one
before made, as ``tokenizers`` runs it (after ``ByteLevel`` the later stages see bytes as GPT-2's
byte alphabet writes them). Falcon's chain and DeepSeek-V3's each have a hand-written pass that
makes the same pieces in one go.

>>> from bpestore.pre_tokenizer import PreTokenizer
>>> falcon = {"type": "Sequence", "pretokenizers": [
...     {"type": "Punctuation", "behavior": "Contiguous"},
...     {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
...     {"type": "Digits", "individual_digits": False},
...     {"type": "Split", "pattern": {"Regex": "[0-9][0-9][0-9]"}, "behavior": "Isolated", "invert": False}]}
>>> PreTokenizer.from_hf(falcon).pieces("Hello, world!! 1234567")
['Hello', ',', 'Ġworld', '!!', 'Ġ', '123', '456', '7']

Two pre-tokenizers write into the text before pieces are made of it: ``Metaspace`` (Mistral's:
each space written ``▁``, one put before the text) and ``ByteLevel`` with ``add_prefix_space``
(a space put before each stretch). Either must come first; the engine applies it to each stretch
of text between special tokens, as ``tokenizers`` does.

>>> mistral = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True}
>>> PreTokenizer.from_hf(mistral, byte_level=False).pieces("Hello big world")
['▁Hello', '▁big', '▁world']
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["PreTokenizer", "PreTokenizerError"]

BEHAVIORS = ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")
# The characters the Rust regex crate's escape() escapes (Hugging Face escapes a Split's String so).
_REGEX_META = set("\\.+*?()|[]{}^$#&-~")


#: Oniguruma's \w (Hugging Face's Split regexes run on Oniguruma) inside brackets: Unicode's
#: word characters (UTS #18: alphabetic, marks, decimal digits, connectors), but not the joiners
#: (U+200C, U+200D) that the Rust regex engine's \w also takes.
_ONIG_WORD_IN_CLASS = r"\p{Alphabetic}\p{M}\p{Nd}\p{Pc}"
#: Outside brackets (and for \b) Oniguruma's \w also takes the six numbers of Latin-1: the
#: superscripts ``² ³ ¹`` and the fractions ``¼ ½ ¾``.
_ONIG_WORD = _ONIG_WORD_IN_CLASS + r"\x{B2}\x{B3}\x{B9}\x{BC}\x{BD}\x{BE}"
# Oniguruma's word boundaries, between its word characters and the others (or the text's ends)
_ONIG_BOUNDARY = rf"(?:(?<=[{_ONIG_WORD}])(?![{_ONIG_WORD}])|(?<![{_ONIG_WORD}])(?=[{_ONIG_WORD}]))"
_ONIG_NOT_BOUNDARY = rf"(?:(?<=[{_ONIG_WORD}])(?=[{_ONIG_WORD}])|(?<![{_ONIG_WORD}])(?![{_ONIG_WORD}]))"


def onig_regex(pattern: str) -> str:
    r"""``pattern`` (a Split regex of a tokenizer.json, as Oniguruma reads it) written so that the
    engine's regex matches the same: ``\w`` and ``\W`` spelt out as Oniguruma's classes, and the
    word boundaries ``\b`` and ``\B`` as look-arounds on them (the engine's own \b knows fewer
    word characters: not ``²``).

    >>> print(onig_regex(r"[\w\-]+"))
    [\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\-]+
    """
    out, index, in_class = [], 0, False
    while index < len(pattern):
        c = pattern[index]
        if c == "\\" and index + 1 < len(pattern):
            escaped = pattern[index + 1]
            if escaped == "w":
                out.append(_ONIG_WORD_IN_CLASS if in_class else f"[{_ONIG_WORD}]")
            elif escaped == "W":
                out.append(f"[^{_ONIG_WORD_IN_CLASS}]" if in_class else f"[^{_ONIG_WORD}]")
            elif escaped == "b" and not in_class:
                out.append(_ONIG_BOUNDARY)
            elif escaped == "B" and not in_class:
                out.append(_ONIG_NOT_BOUNDARY)
            else:
                out.append(c + escaped)
            index += 2
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class and not (out and out[-1] == "["):
            in_class = False
        out.append(c)
        index += 1
    return "".join(out)


class PreTokenizerError(ValueError):
    """A pre-tokenizer's JSON that bpestore cannot run exactly; the message names where and what."""


@dataclass(frozen=True)
class PreTokenizer:
    """A sequence of Hugging Face pre-tokenizers (``document``: the ``tokenizer.json`` form) and
    the engine's stages for it."""

    document: str
    stages: tuple[tuple[str, str, str, bool], ...]

    @classmethod
    def from_hf(cls, document: Any, where: str = "pre_tokenizer", *, byte_level: bool = True) -> PreTokenizer:
        """The pipeline a ``tokenizer.json``'s ``"pre_tokenizer"`` describes: for a byte-level
        BPE (``byte_level``) it must have a ``ByteLevel`` step, for a SentencePiece-style one
        (merged from characters) it must not.

        Raises:
            PreTokenizerError: a pre-tokenizer bpestore does not run (named, with where it is).
        """
        stages = tuple(_stages(document, where))
        for index, (kind, _, _, _) in enumerate(stages):
            if kind == "Prefix" and index:
                raise PreTokenizerError(f"{where}: Metaspace, or ByteLevel with add_prefix_space, after another pre-tokenizer is not supported")
        has_byte_level = any(kind == "ByteLevel" for kind, _, _, _ in stages)
        if byte_level and not has_byte_level:
            raise PreTokenizerError(f"{where}: no ByteLevel step (bpestore runs byte-level BPE)")
        if not byte_level and has_byte_level:
            raise PreTokenizerError(f"{where}: ByteLevel in a SentencePiece-style BPE (merged from characters) is not supported")
        return cls(json.dumps(document, ensure_ascii=False, sort_keys=True), stages)

    @classmethod
    def whole(cls) -> PreTokenizer:
        """No pre-tokenizer (``"pre_tokenizer": null``): each stretch of text between special
        tokens is one piece, as a SentencePiece-style BPE (Llama-2) merges it."""
        return cls("null", ())

    def to_hf(self) -> Any:
        """The ``tokenizer.json`` form, as it was read."""
        return json.loads(self.document)

    def engine_stages(self) -> list[tuple[str, str, str, bool]]:
        """The stages as the engine takes them."""
        return list(self.stages)

    def pieces(self, text: str) -> list[str]:
        """The pieces of ``text``, written as ``tokenizers``' ``pre_tokenize_str`` writes them
        (GPT-2's byte alphabet), made by the engine as encoding makes them."""
        from .engine import pipeline_spans

        written, spans = pipeline_spans(self.engine_stages(), text)
        data = written.encode("utf-8")
        if not any(kind == "ByteLevel" for kind, _, _, _ in self.stages):
            return [data[start:end].decode("utf-8") for start, end in spans]
        alphabet = _alphabet()
        return ["".join(alphabet[byte] for byte in data[start:end]) for start, end in spans]

    def __str__(self) -> str:
        if not self.stages:
            return "none (each stretch between special tokens one piece)"
        kinds = []
        for kind, regex, behavior, invert in self.stages:
            if kind == "Prefix":
                kinds.append(f"Metaspace({regex!r}, {behavior})" if invert else f"prefix {regex!r} ({behavior})")
            elif kind == "ByteLevel":
                kinds.append("ByteLevel" + ("" if regex == "gpt2" else "(no regex)"))
            else:
                shown = f"Split({regex!r})" if kind == "Split" else kind
                kinds.append(f"{shown}:{behavior}{'/invert' if invert else ''}")
        return " → ".join(kinds)


def _metaspace(document: dict[str, Any], where: str) -> list[tuple[str, str, str, bool]]:
    """``Metaspace`` as ``tokenizers`` reads it: spaces written as ``replacement``, which is put
    before the text by ``prepend_scheme`` (``add_prefix_space: false`` of older files is
    ``never``), then, if ``split``, a piece starting at each ``replacement``."""
    replacement = document.get("replacement")
    if not isinstance(replacement, str) or len(replacement) != 1:
        raise PreTokenizerError(f"{where}: Metaspace needs a replacement of one character, not {json.dumps(replacement)}")
    scheme = document.get("prepend_scheme", "always")
    if document.get("add_prefix_space") is False:
        if scheme != "never":  # (as tokenizers refuses it, the default scheme "always" included)
            raise PreTokenizerError(f"{where}: add_prefix_space does not match declared prepend_scheme")
        scheme = "never"
    if scheme not in ("always", "first", "never"):
        raise PreTokenizerError(f"{where}: Metaspace prepend_scheme {json.dumps(scheme)} (one of always, first, never)")
    split = document.get("split", True)
    if not isinstance(split, bool):
        raise PreTokenizerError(f"{where}: Metaspace split must be true or false")
    stages = [("Prefix", replacement, str(scheme), True)]
    if split:
        escaped = "".join("\\" + c if c in _REGEX_META else c for c in replacement)
        stages.append(("Split", escaped, "MergedWithNext", False))
    return stages


def _alphabet() -> dict[int, str]:
    """GPT-2's byte alphabet: printable Latin-1 as itself, the other bytes from U+0100 on."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [byte for byte in range(256) if byte not in printable]
    return {**{byte: chr(byte) for byte in printable}, **{byte: chr(0x100 + index) for index, byte in enumerate(others)}}


def _behavior(document: dict[str, Any], where: str, default: str = "Isolated") -> str:
    behavior = document.get("behavior", default)
    if behavior not in BEHAVIORS:
        raise PreTokenizerError(f"{where}: behavior {json.dumps(behavior)} (one of {', '.join(BEHAVIORS)})")
    return str(behavior)


def _stages(document: Any, where: str, first: bool = True) -> list[tuple[str, str, str, bool]]:
    """The engine's stages for ``document`` (``first``: whether nothing runs before it)."""
    if not isinstance(document, dict):
        raise PreTokenizerError(f"{where}: must be a JSON object, not {json.dumps(document)[:60]}")
    kind = document.get("type")
    if kind == "Sequence":
        steps = document.get("pretokenizers")
        if not isinstance(steps, list):
            raise PreTokenizerError(f"{where}.pretokenizers: must be an array")
        return [
            stage for index, step in enumerate(steps) for stage in _stages(step, f"{where}.pretokenizers[{index}]", first and index == 0)
        ]
    if kind == "ByteLevel":
        # (a prefix space goes before each stretch it gets, then GPT-2's regex if use_regex)
        prefix = [("Prefix", " ", "always", False)] if document.get("add_prefix_space") is True else []
        if prefix and not first:
            raise PreTokenizerError(f"{where}: ByteLevel with add_prefix_space after another pre-tokenizer is not supported")
        return [*prefix, ("ByteLevel", "gpt2" if document.get("use_regex", True) else "", "Isolated", False)]
    if kind == "Metaspace":
        if not first:
            raise PreTokenizerError(f"{where}: Metaspace after another pre-tokenizer is not supported")
        return _metaspace(document, where)
    if kind == "Split":
        pattern = document.get("pattern")
        invert = document.get("invert", False)
        if not isinstance(pattern, dict) or not isinstance(invert, bool):
            raise PreTokenizerError(f"{where}: Split needs a pattern object and a boolean invert")
        if isinstance(pattern.get("Regex"), str):
            regex = onig_regex(pattern["Regex"])
        elif isinstance(pattern.get("String"), str) and pattern["String"]:
            regex = "".join("\\" + c if c in _REGEX_META else c for c in pattern["String"])
        else:
            raise PreTokenizerError(f"{where}: Split needs a Regex or a non-empty String pattern")
        return [("Split", regex, _behavior(document, where), invert)]
    if kind == "Digits":
        individual = document.get("individual_digits", False)
        return [("Numeric", "", "Isolated" if individual else "Contiguous", False)]
    if kind == "Punctuation":
        return [("Punctuation", "", _behavior(document, where), False)]
    if kind == "Whitespace":
        return [("Split", r"\w+|[^\w\s]+", "Removed", True)]
    if kind == "WhitespaceSplit":
        return [("Whitespace", "", "Removed", False)]
    raise PreTokenizerError(
        f"{where}: {json.dumps(kind)} is not supported (supported: ByteLevel, Split, Digits, Punctuation, Whitespace, "
        "WhitespaceSplit, Metaspace, Sequence)"
    )
