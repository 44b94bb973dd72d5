"""Hugging Face ``tokenizer.json`` files with a BPE model, read into a :class:`BPEModel` that
encodes exactly as ``tokenizers`` does.

Byte-level BPE (GPT-2, Llama-3, OLMo-2, Qwen2, GPT-NeoX, RoBERTa, Falcon, SmolLM): its
pre-tokenizer runs as one regex where one regex makes the same pieces (GPT-2's, cl100k's, o200k's,
Llama-3's, Qwen2's, Digits then GPT-2's: each on a hand-written scanner), else as a pipeline of
``Split``, ``Digits``, ``Punctuation``, ``Whitespace``, ``WhitespaceSplit``, ``ByteLevel`` and a
leading ``Metaspace`` or prefix space (:mod:`bpestore.pre_tokenizer`). ``ignore_merges`` (Llama-3)
is imported as a ``"token"``-rule model where the merges are tiktoken's rule made explicit. The
normalizer (:mod:`bpestore.normalizer`), the post-processor (:mod:`bpestore.post_processor`,
applied by ``encode(text, add_special_tokens=True)``) and the added tokens with their options
(``lstrip``, ``rstrip``, ``single_word``, ``normalized``, ``special``) are kept; truncation and
padding are kept as settings (shown, written back on export) but not applied: bpestore encodes
whole texts, unpadded (a warning says so).

SentencePiece-style BPE (Llama-2, Mistral: ``byte_fallback``, merged from characters, spaces
written as ``▁`` by the normalizer or a ``Metaspace`` pre-tokenizer) is imported as a second kind of
model, with its decoder (:mod:`bpestore.decoder`).

Anything else that would make Hugging Face produce different ids is refused in one line naming it
and where it is in the file (``pre_tokenizer.pretokenizers[0]: BertPreTokenizer``): Unigram,
WordPiece and WordLevel models, dropout, subword prefixes and suffixes, an unknown component.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Any

from ..engine import first_merge_out_of_id_order
from ..errors import FormatError
from ..model import MAX_TOKEN_ID, BPEModel, Merges, check_pattern
from ..normalizer import Normalizer, NormalizerError
from ..decoder import Decoder, DecoderError, fallback_spellings
from ..post_processor import PostProcessor, PostProcessorError
from ..pre_tokenizer import PreTokenizer, PreTokenizerError, onig_regex
from ..pretokenize.patterns import (
    CL100K_PATTERN, GPT2_DIGIT_RUNS_PATTERN, GPT2_DIGITS_PATTERN, GPT2_PATTERN, LLAMA3_PATTERN, O200K_PATTERN, QWEN2_PATTERN,
)
from .gpt2 import byte_level_bytes, byte_level_many, byte_level_merges, byte_level_vocab, token_to_text, unicode_to_byte
from .hf_folder import CONFIG_FILE, SPECIAL_TOKENS_FILE, config_of_folder, folder_files
from .registry import Format, ImportCommand, Imported, build_model, register, resolved, unreached_tokens_notes


# A bounded quantifier followed by "+": possessive in Python's `regex`, but in Oniguruma (the
# engine of Hugging Face's Split) a second, unbounded repetition. The atom before it is a \p{..}
# class, an escape, a bracket class or a plain character.
_BOUNDED_THEN_PLUS = re.compile(r"(\\[pP]\{[^}]*\}|\\.|\[(?:\\.|[^\]\\])*\]|[^\\\[\]()|])(\{\d+(?:,\d*)?\})\+")
_KNOWN_PATTERNS = (GPT2_PATTERN, CL100K_PATTERN, O200K_PATTERN, LLAMA3_PATTERN, QWEN2_PATTERN)


def pattern_for_hf(pattern: str) -> str:
    """``pattern`` as Oniguruma reads it the same way: possessive ``X{m,n}+`` -> atomic ``(?>X{m,n})``."""
    return _BOUNDED_THEN_PLUS.sub(r"(?>\1\2)", pattern)


def pattern_from_hf(pattern: str) -> str:
    """A Split regex from a tokenizer.json as Python's `regex` must read it to match the same."""
    for known in _KNOWN_PATTERNS:
        if pattern == pattern_for_hf(known):
            return known
    return _BOUNDED_THEN_PLUS.sub(r"(?:\1\2)+", onig_regex(pattern))


@dataclass
class HFTokenizer:
    vocab: dict[int, bytes]
    merges: list[tuple[bytes, bytes]]
    special_tokens: list[str]
    pattern: str
    added_tokens: list[str] = field(default_factory=list)
    split_at: str | None = None
    """The JSON path of the ``Split`` that :attr:`pattern` came from (None: ByteLevel's regex)."""
    notes: list[str] = field(default_factory=list)
    """Warnings about settings of the file that are not kept (post-processor, truncation, padding)."""
    whole_token_lookup: bool = False
    """``ignore_merges``: a whole pre-token that is a vocab token is that token (Llama-3)."""
    split_drops_uncovered: bool = False
    """Whether the Split drops the text no match covers (else each such stretch is a piece)."""
    normalizer: Normalizer | None = None
    """What normalizes the text before it is pre-tokenized (None: nothing)."""
    normalized_tokens: list[str] = field(default_factory=list)
    """The added tokens found in the normalized text (``"normalized": true``)."""
    post_processor: PostProcessor | None = None
    """The special tokens put around a text on request (None: none)."""
    token_options: dict[str, frozenset[str]] = field(default_factory=dict)
    """How added tokens take their surroundings (``lstrip``, ``rstrip``, ``single_word``)."""
    pre_tokenizer: PreTokenizer | None = None
    """The pre-tokenizers run stage by stage (None: :attr:`pattern` makes the pieces)."""
    pre_tokenizer_json: Any = None
    """The file's ``pre_tokenizer``, as it is."""
    dropped_bytes: list[int] = field(default_factory=list)
    """The single bytes the vocab lacks, left out of the text when encoding (as Hugging Face does)."""
    byte_fallback: bool = False
    """A SentencePiece-style BPE: merged from characters, bytes as the fallback."""
    decoder: Decoder | None = None
    """What the tokens' joined text goes through to give the text back (SentencePiece-style only)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """The file's ``truncation`` and ``padding``, where set: kept, not applied."""
    aliases: dict[int, bytes] = field(default_factory=dict)
    """Vocab entries kept beside the vocab (``BPEModel.aliases``): twins of added tokens, entries
    that are not byte-level, byte-fallback tokens of a character the vocab has."""


def _describe(value: Any) -> str:
    """A JSON value as a message shows it: its JSON type and a short JSON rendering."""
    kind = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): ""}.get(type(value), "a number")
    shown = json.dumps(value, ensure_ascii=False)
    shown = shown[:60] + "..." if len(shown) > 60 else shown
    return f"{kind} {shown}".strip()


def _object(path: str | os.PathLike[str], value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise FormatError(f"{path}: {what} must be a JSON object, not {_describe(value)}")
    return value


def _token_id(path: str | os.PathLike[str], value: Any, what: str) -> int:
    """An id as the file gives it: a JSON integer (not a boolean, not a float) in range."""
    if type(value) is not int:
        raise FormatError(f"{path}: {what} has id {json.dumps(value)[:60]}, not an integer")
    if not 0 <= value <= MAX_TOKEN_ID:
        raise FormatError(f"{path}: {what} has id {value}; ids must be integers from 0 to {MAX_TOKEN_ID} (2**31-1)")
    return value


def _refuse(path: str | os.PathLike[str], where: str, what: str) -> FormatError:
    """The error for a component bpestore cannot run exactly: where it is in the file, and what."""
    return FormatError(f"{path}: {where}: {what}")


def _regex_of(path: str | os.PathLike[str], where: str, split: dict[str, Any]) -> str:
    """The regex of a ``Split`` pre-tokenizer (a ``{"Regex": ...}`` pattern)."""
    regex = split.get("pattern")
    regex = regex.get("Regex") if isinstance(regex, dict) else None
    if not isinstance(regex, str):
        raise _refuse(path, where, "Split by a plain string (only Split by a Regex is supported)")
    return regex


def _split_is_isolating(split: dict[str, Any]) -> bool:
    """Whether a ``Split`` makes each regex match a piece: ``Isolated``, or ``Removed`` with
    ``invert`` (Hugging Face's split.rs inverts which stretches are matches, then removes the new
    "matches", the stretches between the regex's matches; each regex match stays a piece of its
    own). The two agree wherever the matches cover the text, which bpestore checks."""
    behavior, invert = split.get("behavior"), bool(split.get("invert"))
    return (behavior == "Isolated" and not invert) or (behavior == "Removed" and invert)


def _pattern_of(path: str | os.PathLike[str], pre_tokenizer: Any) -> tuple[str, str | None, bool]:
    """The pre-tokenizer's regex in Python's `regex` syntax, the JSON path of the ``Split`` it
    came from (None: ByteLevel's own regex, GPT-2's), and whether that Split drops the text no
    match covers (``Removed`` with ``invert``) rather than making each such stretch a piece."""
    if not pre_tokenizer:
        raise _refuse(path, "pre_tokenizer", "none (bpestore needs byte-level pre-tokenization: ByteLevel)")
    pre_tokenizer = _object(path, pre_tokenizer, "pre_tokenizer")
    kind = pre_tokenizer.get("type")
    if kind == "ByteLevel":
        if pre_tokenizer.get("add_prefix_space"):
            raise _refuse(path, "pre_tokenizer", "ByteLevel with add_prefix_space=true (it adds a space before the text)")
        if not pre_tokenizer.get("use_regex", True):
            raise _refuse(path, "pre_tokenizer", "ByteLevel with use_regex=false and no Split before it")
        return GPT2_PATTERN, None, False
    if kind != "Sequence":
        raise _refuse(path, "pre_tokenizer", f"{kind} (bpestore needs byte-level pre-tokenization: ByteLevel)")
    steps = pre_tokenizer.get("pretokenizers") or []
    if not isinstance(steps, list) or not all(isinstance(step, dict) for step in steps):
        raise FormatError(f"{path}: pre_tokenizer.pretokenizers must be an array of objects, not {_describe(steps)}")
    where = [f"pre_tokenizer.pretokenizers[{index}]" for index in range(len(steps))]
    kinds = [step.get("type") for step in steps]
    if kinds == ["Digits", "ByteLevel"]:
        return _digits_then_byte_level(path, where, *steps), None, False
    # Name the first step bpestore cannot run at all before judging the sequence's shape.
    for index, step_kind in enumerate(kinds):
        if step_kind not in ("Split", "ByteLevel"):
            raise _refuse(path, where[index], f"{step_kind} (supported: a Split by a regex, then ByteLevel)")
    if kinds != ["Split", "ByteLevel"]:
        raise _refuse(path, "pre_tokenizer", f"Sequence of {kinds} (supported: a Split by a regex, then ByteLevel)")
    split, byte_level = steps
    regex = _regex_of(path, where[0], split)
    if not _split_is_isolating(split):
        raise _refuse(
            path, where[0],
            f"Split with behavior {split.get('behavior')!r}, invert={bool(split.get('invert'))!r} "
            "(supported: Isolated, or Removed with invert=true)",
        )
    if byte_level.get("add_prefix_space") or byte_level.get("use_regex", True):
        raise _refuse(path, where[1], "ByteLevel after a Split must have add_prefix_space=false and use_regex=false")
    return pattern_from_hf(regex), where[0], split.get("behavior") == "Removed"


# (Digits splits at Rust's char::is_numeric: general categories Nd, Nl, No, which is \p{N}.)
DIGITS_THEN_GPT2_PATTERN = GPT2_DIGITS_PATTERN
"""SmolLM's and StarCoder's pre-tokenizer: Digits(individual_digits=true), then ByteLevel."""
DIGIT_RUNS_THEN_GPT2_PATTERN = GPT2_DIGIT_RUNS_PATTERN
"""Digits(individual_digits=false), then ByteLevel."""


def _digits_then_byte_level(path: str | os.PathLike[str], where: list[str], digits: dict[str, Any], byte_level: dict[str, Any]) -> str:
    """The one regex that makes the pieces of ``Digits`` followed by ``ByteLevel`` with GPT-2's regex."""
    if byte_level.get("add_prefix_space") or not byte_level.get("use_regex", True):
        raise _refuse(path, where[1], "ByteLevel after Digits must have add_prefix_space=false and use_regex=true")
    return DIGITS_THEN_GPT2_PATTERN if digits.get("individual_digits") else DIGIT_RUNS_THEN_GPT2_PATTERN


_OTHER_MODELS = {
    "Unigram": "a Unigram model (T5, ALBERT, XLM-R)",
    "WordPiece": "a WordPiece model (BERT, DistilBERT)",
    "WordLevel": "a WordLevel model (a whole-word vocabulary)",
}


def _model_kind(model: dict[str, Any]) -> Any:
    """The model's type; a file without ``"type"`` is read as Hugging Face reads it: as the first
    kind whose fields it has (BPE: merges; WordPiece: max_input_chars_per_word; Unigram: a vocab
    of [piece, score] pairs; WordLevel: a vocab object)."""
    if "type" in model:
        return model["type"]
    if "merges" in model:
        return "BPE"
    if "max_input_chars_per_word" in model:
        return "WordPiece"
    if isinstance(model.get("vocab"), list):
        return "Unigram"
    return "WordLevel" if "vocab" in model else None


def _is_sentencepiece_style(data: dict[str, Any]) -> bool:
    """A BPE over characters with SentencePiece's conventions (Llama-2, Mistral, Gemma): bytes
    reached through ``<0xNN>`` tokens (byte_fallback), spaces written as "\u2581"."""
    if data["model"].get("byte_fallback"):
        return True
    if "Metaspace" in json.dumps([data.get("pre_tokenizer"), data.get("decoder")]):
        # (unless ByteLevel then writes its bytes: a byte-level BPE whose text Metaspace prepares)
        return '"ByteLevel"' not in json.dumps(data.get("pre_tokenizer"))
    # (a byte-level vocab writes a space "Ġ"; a SentencePiece one "\u2581", as its normalizer does)
    # (the normalizer first: looking through a vocab of 128,000 tokens costs more)
    vocab = data["model"].get("vocab")
    return "\u2581" in json.dumps(data.get("normalizer"), ensure_ascii=False) and isinstance(vocab, dict) and any(
        isinstance(token, str) and token.startswith("\u2581") for token in vocab
    )


def _check_model(path: str | os.PathLike[str], data: dict[str, Any]) -> bool:
    """Whether the model is a SentencePiece-style BPE with byte fallback (Llama-2, Mistral),
    else a byte-level one; FormatError for another model or option bpestore does not run."""
    model = data["model"]
    kind = _model_kind(model)
    if isinstance(kind, str) and kind in _OTHER_MODELS:
        raise _refuse(path, "model", f"{_OTHER_MODELS[kind]}: bpestore stores BPE tokenizers only")
    if kind != "BPE":
        raise _refuse(path, "model.type", f"{_describe(kind) or 'missing'}: bpestore stores BPE tokenizers only")
    sentencepiece = _is_sentencepiece_style(data)
    if sentencepiece and model.get("byte_fallback") is not True:
        raise _refuse(path, "model", "a SentencePiece-style BPE over characters without byte_fallback (unknown tokens): not supported")
    problems = {
        "dropout": model.get("dropout") not in (None, 0, 0.0),
        "continuing_subword_prefix": bool(model.get("continuing_subword_prefix")),
        "end_of_word_suffix": bool(model.get("end_of_word_suffix")),
    }
    unsupported = [name for name, present in problems.items() if present]
    if unsupported:
        raise _refuse(path, "model", f"BPE with {', '.join(unsupported)}: not supported")
    return sentencepiece


def _normalizer_of(path: str | os.PathLike[str], normalizer: Any) -> Normalizer | None:
    """The file's normalizer as bpestore runs it (None: it has none); FormatError naming a step
    bpestore does not run, and where it is in the file."""
    if not normalizer:
        return None
    try:
        return Normalizer.from_hf(normalizer)
    except NormalizerError as error:
        raise FormatError(f"{path}: {error}") from None


def _template_specials(processor: dict[str, Any]) -> list[str]:
    """The special tokens a post-processor puts around one text (what ``add_special_tokens``
    adds in Hugging Face)."""
    kind = processor.get("type")
    if kind == "TemplateProcessing":
        single = processor.get("single")
        items = single if isinstance(single, list) else []
        return [str(item["SpecialToken"].get("id", "?")) for item in items if isinstance(item, dict) and isinstance(item.get("SpecialToken"), dict)]
    if kind in ("RobertaProcessing", "BertProcessing"):
        return [str(pair[0]) for pair in (processor.get("cls"), processor.get("sep")) if isinstance(pair, list) and pair]
    if kind == "Sequence":
        processors = processor.get("processors")
        steps = processors if isinstance(processors, list) else []
        return [token for step in steps if isinstance(step, dict) for token in _template_specials(step)]
    return []


def _post_processor_of(data: dict[str, Any]) -> tuple[PostProcessor | None, list[str]]:
    """The file's post-processor, kept (``encode(text, add_special_tokens=True)`` applies it),
    and a note saying so; one it has that bpestore cannot apply is a warning line, as are
    truncation and padding, which bpestore does not keep."""
    notes = []
    processor = data.get("post_processor")
    kept = None
    if isinstance(processor, dict):
        added = _template_specials(processor)
        try:
            kept = PostProcessor.from_hf(processor)
        except PostProcessorError as error:
            around = f" (HF's add_special_tokens=True adds {', '.join(added)})" if added else ""
            notes.append(f"warning: {error}; it is not kept{around}: bpestore's ids are HF's with add_special_tokens=False")
        else:
            if kept.adds_tokens:
                notes.append(
                    f"note: post_processor {kept} kept: encode gives HF's ids with add_special_tokens=False, "
                    f"and with add_special_tokens=True ({', '.join(added)} added)"
                )
    for setting in ("truncation", "padding"):
        if data.get(setting):
            notes.append(
                f"warning: {setting} {json.dumps(data[setting])[:80]} is kept as a setting (shown, written back on export) "
                "but not applied: bpestore encodes whole texts, unpadded"
            )
    return kept, notes


def _added_tokens(path: str | os.PathLike[str], added: Any) -> list[tuple[str, int, bool, bool, frozenset[str]]]:
    """``added_tokens`` as (content, id, special, normalized, options) in id order (``special``:
    unless the file says ``"special": false``; ``normalized``: found in the normalized text, by
    default unless special, as Hugging Face reads it; options: those of ``lstrip``, ``rstrip``,
    ``single_word`` set); FormatError for anything malformed."""
    if added is None:
        return []
    if not isinstance(added, list):
        raise FormatError(f"{path}: added_tokens must be an array, not {_describe(added)}")
    tokens = []
    for index, token in enumerate(added):
        token = _object(path, token, f"added token {index}")
        content = token.get("content")
        if not isinstance(content, str) or not content:
            raise FormatError(f"{path}: added token {index} has content {_describe(content)}, not a non-empty string")
        token_id = _token_id(path, token.get("id"), f"added token {content!r}")
        options = frozenset(name for name in ("lstrip", "rstrip", "single_word") if token.get(name) is True)
        special = token.get("special") is not False
        normalized = token.get("normalized", not special)
        tokens.append((content, token_id, special, normalized is True, options))
    return sorted(tokens, key=lambda token: token[1])


def read_tokenizer_json(path: str | os.PathLike[str]) -> HFTokenizer:
    try:
        data = json.loads(Path(path).read_bytes().decode("utf-8"))
    except UnicodeDecodeError as error:
        raise FormatError(f"{path}: not UTF-8 (invalid byte at offset {error.start}: {error.reason})") from None
    except (json.JSONDecodeError, RecursionError) as error:
        raise FormatError(f"{path}: not a tokenizer.json ({error if isinstance(error, json.JSONDecodeError) else 'nested too deeply'})") from None
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise FormatError(f"{path}: not a tokenizer.json (no 'model' object)")
    model = data["model"]
    sentencepiece = _check_model(path, data)
    normalizer = _normalizer_of(path, data.get("normalizer"))
    pre_tokenizer: PreTokenizer | None = None
    if sentencepiece:
        # (no pre-tokenizer: each stretch between special tokens is merged as one piece; Mistral's
        # Metaspace writes its spaces as "▁", puts one before the text and may split at each)
        pre_tokenizer = PreTokenizer.whole()
        if data.get("pre_tokenizer"):
            try:
                pre_tokenizer = PreTokenizer.from_hf(data["pre_tokenizer"], byte_level=False)
            except PreTokenizerError as error:
                raise FormatError(f"{path}: {error}") from None
        pattern, split_at, split_drops_uncovered = GPT2_PATTERN, None, False
    else:
        pattern, split_at, split_drops_uncovered, pre_tokenizer = _pieces_of(path, data.get("pre_tokenizer"))
    listed = _added_tokens(path, data.get("added_tokens"))
    added = [(content, token_id) for content, token_id, _, _, _ in listed]
    added_text = dict(added)
    if len(added_text) != len(added):
        repeated = next(content for content, _ in added if sum(1 for other, _ in added if other == content) > 1)
        raise FormatError(f"{path}: added token {repeated!r} is listed twice")
    alphabet = unicode_to_byte()
    vocab: dict[int, bytes] = {}
    model_vocab = _object(path, model.get("vocab", {}), "model.vocab")
    byte_twins: list[tuple[int, int]] = []
    aliases: dict[int, bytes] = {}
    one_by_one: Iterable[tuple[str, Any]] = model_vocab.items()
    decoded = None if sentencepiece else byte_level_vocab(model_vocab)
    if decoded is not None:
        # (every token decoded at once; those that are added tokens too go the way below)
        vocab = decoded
        shared = sorted(added_text.keys() & model_vocab.keys(), key=model_vocab.__getitem__)
        one_by_one = [(text, model_vocab[text]) for text in shared]
        for text in shared:
            del vocab[model_vocab[text]]
    for text, token_id in one_by_one:
        token_id = _token_id(path, token_id, f"vocab entry {text!r}")
        if sentencepiece:
            _add_sentencepiece_token(path, vocab, text, token_id, byte_twins, aliases)
            continue
        if text in added_text:
            token = text.encode("utf-8")
            if len(text) == 1 and text in alphabet and token != bytes([alphabet[text]]):
                # Hugging Face gives the added token the id of the vocab's byte token that GPT-2's
                # alphabet spells the same way, so the text "é" would encode as the byte 0xe9.
                raise _refuse(
                    path, "added_tokens",
                    f"{text!r} is also how the byte-level vocab writes the single byte 0x{alphabet[text]:02x} (id {token_id}): "
                    "Hugging Face encodes that text as that byte's token, which bpestore does not do",
                )
        elif (byte_level := byte_level_bytes(text)) is not None:
            token = byte_level
        else:
            # Hugging Face keeps it: no pre-token is ever spelt so (ByteLevel writes every byte in
            # its alphabet), and its ByteLevel decoder gives such a token's UTF-8.
            if aliases.setdefault(token_id, text.encode("utf-8")) != text.encode("utf-8") or token_id in vocab:
                raise FormatError(f"{path}: vocab gives id {token_id} to two tokens")
            continue
        if token_id in aliases:
            raise FormatError(f"{path}: vocab gives id {token_id} to two tokens ({aliases[token_id].decode('utf-8')!r} and {text!r})")
        if vocab.setdefault(token_id, token) != token:  # two spellings of one token are fine
            raise FormatError(f"{path}: vocab gives id {token_id} to two tokens ({token_to_text(vocab[token_id])!r} and {text!r})")
    for text, token_id in added_text.items():
        if token_id in aliases or vocab.setdefault(token_id, text.encode("utf-8")) != text.encode("utf-8"):
            raise FormatError(f"{path}: added token {text!r} has id {token_id}, which the vocab gives to another token")
    post_processor, notes = _post_processor_of(data)
    dropped_bytes = _add_missing_bytes(vocab, aliases)
    if dropped_bytes:
        shown_bytes = ", ".join(f"0x{byte:02x}" for byte in dropped_bytes[:6]) + (" ..." if len(dropped_bytes) > 6 else "")
        notes.append(
            f"note: the vocab lacks {len(dropped_bytes)} single bytes ({shown_bytes}): Hugging Face leaves them out of "
            "the text it encodes, and so does bpestore; they get ids of their own after the others, which no encoding gives"
        )
    twins = _drop_twins(vocab, added_text)
    if twins:
        # Hugging Face finds an added token in the text before its model sees it, so there the
        # added token's id is given; its model gives the vocab's id only to bytes a normalizer
        # wrote after the token was looked for. Both ids are kept, as they are there.
        shown = ", ".join(f"{twin} ({token_to_text(vocab[added_id])[:20]!r} is {added_id})" for twin, added_id in twins[:3])
        notes.append(
            f"note: {len(twins)} vocab ids spell an added token again ({shown}{' ...' if len(twins) > 3 else ''}); "
            "both ids are kept, as in Hugging Face: the added token's where the text holds it, the vocab's where "
            "its model makes those bytes (after a normalizer), and either decodes"
        )
        aliases.update((twin, vocab[added_id]) for twin, added_id in twins)
    explained = {twin for twin, _ in twins} | {fallback for fallback, _ in byte_twins}
    strange = sorted(token_id for token_id in aliases if token_id not in explained)
    if strange:
        shown = ", ".join(f"{token_id} ({aliases[token_id].decode('utf-8')[:20]!r})" for token_id in strange[:3])
        notes.append(
            f"note: {len(strange)} vocab entries are not byte-level ({shown}{' ...' if len(strange) > 3 else ''}): "
            "as in Hugging Face, no text encodes to them and each decodes to its UTF-8"
        )
    merges = []
    model_merges = model.get("merges", [])
    if not isinstance(model_merges, list):
        raise FormatError(f"{path}: model.merges must be an array, not {_describe(model_merges)}")
    fast = None if sentencepiece else _byte_level_merges(model_merges)
    if fast is not None:
        merges = fast
    for rank, merge in enumerate(model_merges if fast is None else []):  # (one at a time: to name a bad one)
        parts = merge.split(" ") if isinstance(merge, str) else merge
        if not isinstance(parts, list) or len(parts) != 2 or not all(isinstance(p, str) and p for p in parts):
            raise FormatError(f"{path}: merge {rank} is {merge!r}, expected 'a b' or ['a', 'b']")
        if sentencepiece:
            merges.append((_sentencepiece_bytes(parts[0]), _sentencepiece_bytes(parts[1])))
            continue
        left, right = byte_level_bytes(parts[0]), byte_level_bytes(parts[1])
        if left is None or right is None:
            raise FormatError(f"{path}: merge {rank} {merge!r} is not byte-level")
        merges.append((left, right))
    specials = [content for content, _, special, _, _ in listed if special]
    ordinary = [content for content, _, special, _, _ in listed if not special]
    token_options = {content: options for content, _, _, _, options in listed if options}
    normalized = [content for content, _, _, in_normalized, _ in listed if in_normalized] if normalizer is not None else []
    spelt: dict[str, list[str]] = {}
    for content in normalized:
        assert normalizer is not None
        written = normalizer.normalize(content)
        spelt.setdefault(written, []).append(content)
        if not written:
            # Hugging Face looks for it as "", which matches between every two characters: its
            # encode then cuts the text into single characters, or panics ("bad split").
            raise _refuse(
                path, "added_tokens",
                f"{content!r} is found in normalized text, and the normalizer writes it as nothing: Hugging Face then "
                "cuts the text at every character, or fails; not supported",
            )
    if byte_twins:
        notes.append(
            f"note: {len(byte_twins)} byte-fallback tokens spell a character token again ({', '.join(f'{a} is {b}' for a, b in byte_twins[:3])}"
            f"{' ...' if len(byte_twins) > 3 else ''}); encoding gives the character tokens' ids, as Hugging Face's does, "
            "and either decodes"
        )
    for spelling, contents in spelt.items():
        if len(contents) > 1:
            first = min(contents, key=added_text.__getitem__)
            notes.append(
                f"warning: the added tokens {', '.join(map(repr, contents))} are all looked for as {spelling!r} once normalized: "
                f"Hugging Face gives one of them, not the same one from run to run; bpestore gives {first!r} (id {added_text[first]})"
            )
    decoder = _decoder_of(path, data.get("decoder")) if sentencepiece else None
    return HFTokenizer(
        vocab, merges, specials, pattern, ordinary, split_at, notes, bool(model.get("ignore_merges")),
        split_drops_uncovered, normalizer, normalized, post_processor, token_options, pre_tokenizer, data.get("pre_tokenizer"),
        dropped_bytes, sentencepiece, decoder, {setting: data[setting] for setting in ("truncation", "padding") if data.get(setting)},
        aliases,
    )


def _byte_level_merges(merges: list[Any]) -> list[tuple[bytes, bytes]] | None:
    """``model.merges`` all written ``"a b"`` or all ``["a", "b"]``, byte-level, decoded at once
    (see :func:`~bpestore.formats.gpt2.byte_level_merges`); None otherwise, for the loop that
    names the first bad one."""
    if all(map(str.__instancecheck__, merges)):
        return byte_level_merges(merges)
    if all(map(list.__instancecheck__, merges)) and set(map(len, merges)) == {2}:
        parts = list(chain.from_iterable(merges))
        if "" not in parts:
            tokens = byte_level_many(parts)
            return None if tokens is None else list(zip(tokens[0::2], tokens[1::2]))
    return None


def _add_missing_bytes(vocab: dict[int, bytes], aliases: dict[int, bytes]) -> list[int]:
    """Gives each single byte ``vocab`` lacks a token at the next free id (bpestore's vocabularies
    hold all 256), and returns those bytes: encoding leaves them out of the text, as Hugging Face's
    BPE leaves out a character its vocab lacks (GPT-NeoX's lacks the bytes UTF-8 never holds,
    Falcon's and SmolLM's some control characters)."""
    tokens = set(vocab.values())
    missing = [byte for byte in range(256) if bytes([byte]) not in tokens]
    next_id = max([*vocab, *aliases], default=-1) + 1
    for offset, byte in enumerate(missing):
        vocab[next_id + offset] = bytes([byte])
    return missing


_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _sentencepiece_bytes(text: str) -> bytes:
    """A SentencePiece vocab entry's bytes: ``<0xNN>`` is the byte NN (byte fallback), any other
    entry its UTF-8 (``▁`` included, as the normalizer writes a space)."""
    byte = _BYTE_TOKEN.fullmatch(text)
    return bytes([int(byte.group(1), 16)]) if byte else text.encode("utf-8")


def _add_sentencepiece_token(
    path: str | os.PathLike[str], vocab: dict[int, bytes], text: str, token_id: int, byte_twins: list[tuple[int, int]],
    aliases: dict[int, bytes],
) -> None:
    """Adds a SentencePiece vocab entry. A byte-fallback token ``<0x61>`` and the character token
    ``a`` are the same bytes: the character's id is the vocab's (Hugging Face falls back to bytes
    only for a character its vocab lacks, so it never gives the other) and the fallback's an
    alias, decoded only; noted in ``byte_twins``."""
    token = _sentencepiece_bytes(text)
    if vocab.setdefault(token_id, token) != token:
        raise FormatError(f"{path}: vocab gives id {token_id} to two tokens")
    twin = next((other for other, bytes_ in vocab.items() if bytes_ == token and other != token_id), None) if len(token) == 1 else None
    if twin is not None:
        fallback, character = (token_id, twin) if _BYTE_TOKEN.fullmatch(text) else (twin, token_id)
        aliases[fallback] = vocab.pop(fallback)
        byte_twins.append((fallback, character))


def _decoder_of(path: str | os.PathLike[str], decoder: Any) -> Decoder | None:
    if not decoder:
        return None
    try:
        return Decoder.from_hf(decoder)
    except DecoderError as error:
        raise FormatError(f"{path}: {error}") from None


def _pieces_of(path: str | os.PathLike[str], pre_tokenizer: Any) -> tuple[str, str | None, bool, PreTokenizer | None]:
    """How a byte-level file's pre-tokenizer makes pieces: one regex (see :func:`_pattern_of`),
    or, when no one regex makes them, the pre-tokenizers run stage by stage (a pipeline)."""
    try:
        return (*_pattern_of(path, pre_tokenizer), None)
    except FormatError as refused:
        if not pre_tokenizer:
            raise
        try:
            pipeline = _pipeline_of(path, pre_tokenizer)
        except FormatError as error:
            if "no ByteLevel step" in str(error):
                raise refused from None  # (its words name the step: Whitespace, Metaspace, ...)
            raise
        return GPT2_PATTERN, None, False, pipeline


def _pipeline_of(path: str | os.PathLike[str], pre_tokenizer: Any) -> PreTokenizer:
    """The file's pre-tokenizers as a pipeline run stage by stage; FormatError naming a step
    bpestore does not run, and where it is."""
    try:
        return PreTokenizer.from_hf(pre_tokenizer)
    except PreTokenizerError as error:
        raise FormatError(f"{path}: {error}") from None


def _drop_twins(vocab: dict[int, bytes], added: dict[str, int]) -> list[tuple[int, int]]:
    """Removes from ``vocab`` each id whose bytes are an added token's under another id (GPT-NeoX
    lists its runs of spaces both ways); returns (removed id, the added token's id) pairs."""
    added_ids = {text.encode("utf-8"): token_id for text, token_id in added.items()}
    twins = [
        (token_id, added_ids[token]) for token_id, token in vocab.items() if token in added_ids and added_ids[token] != token_id
    ]
    for token_id, _ in twins:
        del vocab[token_id]
    return sorted(twins)


def tokenizer_json(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_ids: dict[str, int],
    pattern: str,
    *,
    whole_token_lookup: bool = False,
    added_ids: dict[str, int] | None = None,
    normalizer: Normalizer | None = None,
    normalized_tokens: frozenset[str] = frozenset(),
    post_processor: PostProcessor | None = None,
    token_options: dict[str, frozenset[str]] | None = None,
    pre_tokenizer: PreTokenizer | None = None,
    dropped_bytes: frozenset[int] = frozenset(),
    settings: dict[str, Any] | None = None,
    aliases: dict[int, bytes] | None = None,
    twin_ids: dict[int, int] | None = None,
) -> dict[str, Any]:
    """A ``tokenizer.json`` document that the ``tokenizers`` library loads and encodes with;
    ``added_ids``: the added tokens (ordinary, encoded whole), written as added tokens with
    ``"special": false``; ``settings``: the ``truncation`` and ``padding`` an imported file had;
    ``aliases`` and ``twin_ids``: the model's (``BPEModel.aliases``), written back as the vocab
    entries they came from (a twin in the byte alphabet, any other alias as its UTF-8 text)."""
    added_ids = added_ids or {}
    whole = {**special_ids, **added_ids}
    # A special token is written as its text (as GPT-2's vocab has "<|endoftext|>"), unless it is
    # also an ordinary token that merges use or a single byte: then the model needs it in the byte
    # alphabet ("Ġ", not " "), and the added token (same id) carries the text.
    merge_tokens = {part for left, right in merges for part in (left, right, left + right)}
    raw_ids = {token_id for token_id in whole.values() if len(vocab[token_id]) > 1 and vocab[token_id] not in merge_tokens}
    # (a byte the text loses is no token of Hugging Face's vocab: its BPE then leaves it out too)
    twin_ids = twin_ids or {}
    twinned = set(twin_ids.values())  # (the model spells their bytes with the twin's id)
    model_vocab = {
        (token.decode("utf-8") if token_id in raw_ids else token_to_text(token)): token_id
        for token_id, token in sorted(vocab.items())
        if not (len(token) == 1 and token[0] in dropped_bytes) and token_id not in twinned
    }
    for alias, token in sorted((aliases or {}).items()):
        try:
            model_vocab.setdefault(token_to_text(token) if alias in twin_ids else token.decode("utf-8"), alias)
        except UnicodeDecodeError:
            raise FormatError(f"id {alias} beside the vocab is {token!r}, not UTF-8: a tokenizer.json cannot hold it") from None
    # Hugging Face gives an added token the model's id for its text, or else a new id: so the text
    # of a special token written in the byte alphabet is a second key for the same id.
    for text, token_id in whole.items():
        model_vocab.setdefault(text, token_id)
    written_pre_tokenizer: Any
    if pre_tokenizer is not None:
        written_pre_tokenizer = pre_tokenizer.to_hf()
    elif pattern == GPT2_PATTERN:
        written_pre_tokenizer = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    else:
        written_pre_tokenizer = {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": pattern_for_hf(pattern)}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
            ],
        }
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True}
    return {
        "version": "1.0",
        "truncation": (settings or {}).get("truncation"),
        "padding": (settings or {}).get("padding"),
        "added_tokens": [
            {
                "id": token_id, "content": text,
                **{option: option in (token_options or {}).get(text, ()) for option in ("single_word", "lstrip", "rstrip")},
                "normalized": text in normalized_tokens,
                "special": text in special_ids,
            }
            for text, token_id in sorted(whole.items(), key=lambda item: item[1])
        ],
        "normalizer": normalizer.to_hf() if normalizer is not None else None,
        "pre_tokenizer": written_pre_tokenizer,
        "post_processor": post_processor.to_hf() if post_processor is not None else byte_level,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": whole_token_lookup,
            "vocab": model_vocab,
            "merges": [[token_to_text(a), token_to_text(b)] for a, b in merges],
        },
    }


def write_tokenizer_json(path: str | os.PathLike[str], document: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(document, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")



def read(path: str | os.PathLike[str]) -> Imported:
    """A Hugging Face ``tokenizer.json`` (byte-level BPE); its added tokens become special tokens,
    those marked ``"special": false`` added tokens (ordinary, encoded whole). ``path`` may be a
    model folder: its ``tokenizer.json``, with what ``tokenizer_config.json`` and
    ``special_tokens_map.json`` say (roles of tokens, chat template, maximum length) kept."""
    config: dict[str, Any] = {}
    if Path(path).is_dir():
        folder = Path(path)
        if not (folder / "tokenizer.json").is_file():
            raise FormatError(f"{folder}: a model folder without tokenizer.json (bpestore reads the fast tokenizer's file)")
        config = config_of_folder(folder)
        path = folder / "tokenizer.json"
    document = read_tokenizer_json(path)
    config = {**config, **document.settings}
    if document.split_at is not None:
        try:
            _check_split_covers(path, document.split_at, document.pattern, document.split_drops_uncovered)
        except FormatError:
            # (HF keeps or drops the text no match covers: the Split runs as it is)
            document.pre_tokenizer = _pipeline_of(path, document.pre_tokenizer_json)
            document.pattern = GPT2_PATTERN
    if document.whole_token_lookup:
        _check_merges_follow_ids(path, document.vocab, document.merges)
        # the token rule's own merges: the first that makes each token
        model = build_model(
            path, document.vocab, partial(_first_merges, document.merges), document.special_tokens, pattern=document.pattern,
            added_tokens=document.added_tokens, normalizer=document.normalizer, normalized_tokens=document.normalized_tokens,
            post_processor=document.post_processor, token_options=document.token_options, pre_tokenizer=document.pre_tokenizer,
            dropped_bytes=document.dropped_bytes, decoder=document.decoder, config=config, aliases=document.aliases,
            **({"byte_fallback": True} if document.byte_fallback else {}),
        )
        assert model.merge_rule == "token"
    else:
        model = build_model(
            path, document.vocab, document.merges, document.special_tokens, pattern=document.pattern, added_tokens=document.added_tokens,
            normalizer=document.normalizer, normalized_tokens=document.normalized_tokens, post_processor=document.post_processor,
            token_options=document.token_options, pre_tokenizer=document.pre_tokenizer,
            dropped_bytes=document.dropped_bytes, decoder=document.decoder, config=config, aliases=document.aliases,
            **({"byte_fallback": True} if document.byte_fallback else {}),
        )
    # (the notes on unreached tokens pass over every merge: made only if read, which loading a
    # tokenizer with Tokenizer.from_format never does)
    return Imported(model, "hf", resolved(path), document.notes, later_notes=partial(unreached_tokens_notes, model, path))


def _check_merges_follow_ids(path: str | os.PathLike[str], vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]]) -> None:
    """With ``ignore_merges`` (Llama-3), bpestore encodes by tiktoken's rule: the whole pre-token
    if it is a token, else merging the adjacent pair whose joined token has the lowest id. That is
    Hugging Face's BPE exactly when its merges come in the order of the ids of the tokens they make
    (as in Llama-3's, converted from tiktoken's ranks); FormatError otherwise, rather than other ids."""
    rank = first_merge_out_of_id_order(vocab, merges)
    if rank is not None:
        raise _refuse(
            path, f"model.merges[{rank}]",
            f"ignore_merges with merges out of the order of their tokens' ids (merge {rank}): "
            "bpestore's whole-token rule would encode differently",
        )


def _first_merges(merges: list[tuple[bytes, bytes]], model: BPEModel) -> Merges:
    """The first merge that makes each token, in order: the token rule's merges (a file such as
    Llama-3's lists several ways to make many tokens)."""
    made: set[bytes] = set()
    first = []
    for left, right in merges:
        if left + right not in made:
            made.add(left + right)
            first.append((left, right))
    return first


_UNCOVERED = re.compile(r"does not cover all of the text \((.*)\); its matches")


def _check_split_covers(path: str | os.PathLike[str], where: str, pattern: str, drops_uncovered: bool) -> None:
    """FormatError if the Split's regex leaves some text to no match: Hugging Face makes each
    such stretch a piece of its own (or, for ``Removed`` with ``invert``, drops it), bpestore's
    pre-tokenizer refuses such text, so the two would differ (and no change to the regex makes
    them the same: a catch-all alternative changes what the other alternatives match)."""
    try:
        check_pattern(pattern)
    except ValueError as error:
        uncovered = _UNCOVERED.search(str(error))
        if uncovered is None:
            raise FormatError(f"{path}: {where}: {error}") from None
        raise _refuse(
            path, where,
            f"Split regex {json.dumps(pattern)} does not cover all of the text ({uncovered.group(1)}): Hugging Face "
            + ("drops each uncovered stretch" if drops_uncovered else "makes each uncovered stretch a piece of its own")
            + ", which bpestore does not do yet",
        ) from None


def write(model: BPEModel, output: Path) -> list[str]:
    """The file ``output`` as a ``tokenizer.json``."""
    if model.byte_fallback:
        write_tokenizer_json(output, sentencepiece_json(model))
        return [f"wrote {len(model.vocab):,} tokens to {output}"]
    token_rule = model.merge_rule == "token"
    merges = _token_rule_merges(model) if token_rule else model.merges
    document = tokenizer_json(
        model.vocab, merges, model.special_ids, model.pattern, whole_token_lookup=token_rule, added_ids=model.added_ids,
        normalizer=model.normalizer,
        normalized_tokens=model.normalized_tokens, post_processor=model.post_processor, token_options=model.token_options,
        pre_tokenizer=model.pre_tokenizer, dropped_bytes=model.dropped_bytes,
        settings={setting: model.config[setting] for setting in ("truncation", "padding") if setting in model.config},
        aliases=model.aliases, twin_ids=model.twin_ids,
    )
    write_tokenizer_json(output, document)
    return [f"wrote {len(model.vocab):,} tokens to {output}"]


def sentencepiece_json(model: BPEModel) -> dict[str, Any]:
    """A ``tokenizer.json`` document for a SentencePiece-style BPE (Llama-2, Mistral: merged from
    characters, bytes as the fallback), with its normalizer, pre-tokenizer, post-processor and
    decoder as they were read. A token is its text; a single byte is ``<0xNN>`` (the fallback
    token) unless a merge uses it as a character, or it is a printable ASCII character: either
    spelling gives the same ids, as Hugging Face falls back to a byte's token only for a character
    its vocab lacks."""
    fallback = fallback_spellings(model.vocab, model.merges)
    ids = {token: token_id for token_id, token in model.vocab.items()}

    def text(token: bytes) -> str:
        return fallback.get(ids[token]) or token.decode("utf-8")

    whole = model.whole_ids
    vocab = {text(token): token_id for token_id, token in sorted(model.vocab.items()) if token_id not in whole.values()}
    for alias, token in sorted(model.aliases.items()):  # (a byte-fallback token of a character the vocab has, say)
        vocab.setdefault(f"<0x{token[0]:02X}>" if len(token) == 1 else token.decode("utf-8", errors="replace"), alias)
    for content, token_id in whole.items():
        vocab.setdefault(content, token_id)
    pre_tokenizer = model.pre_tokenizer.to_hf() if model.pre_tokenizer is not None and model.pre_tokenizer.stages else None
    return {
        "version": "1.0",
        "truncation": model.config.get("truncation"),
        "padding": model.config.get("padding"),
        "added_tokens": [
            {
                "id": token_id, "content": content,
                **{option: option in model.token_options.get(content, ()) for option in ("single_word", "lstrip", "rstrip")},
                "normalized": content in model.normalized_tokens,
                "special": content in model.special_ids,
            }
            for content, token_id in sorted(whole.items(), key=lambda item: item[1])
        ],
        "normalizer": model.normalizer.to_hf() if model.normalizer is not None else None,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": model.post_processor.to_hf() if model.post_processor is not None else None,
        "decoder": model.decoder.to_hf() if model.decoder is not None else None,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": "<unk>" if "<unk>" in whole else None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": True,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [[text(left), text(right)] for left, right in model.merges],
        },
    }


def _token_rule_merges(model: BPEModel) -> list[tuple[bytes, bytes]]:
    """tiktoken's rule (merge the adjacent pair whose joined token has the lowest id, a whole
    pre-token that is a token being that token) as Hugging Face's BPE runs it: ``ignore_merges``
    and a merge for every way to make each token of two tokens, in the order of the tokens' ids.
    (Llama-3's file lists its merges so; the first way to make each token alone, which the model
    keeps, would leave pairs unmerged that tiktoken's rule merges.)"""
    whole = set(model.whole_ids.values())
    vocab, _ = model.bpe_vocab()  # (a twin is the model's token of its bytes)
    ids = {token: token_id for token_id, token in vocab.items() if token_id not in whole}
    merges: list[tuple[bytes, bytes]] = []
    for token_id, token in sorted(vocab.items()):
        if token_id in whole or len(token) < 2:
            continue
        merges.extend(
            (token[:cut], token[cut:]) for cut in range(1, len(token)) if token[:cut] in ids and token[cut:] in ids
        )
    return merges


def write_folder(model: BPEModel, folder: Path) -> list[str]:
    """A model folder in ``folder``: ``tokenizer.json``, ``tokenizer_config.json`` and
    ``special_tokens_map.json``, which ``transformers.AutoTokenizer.from_pretrained`` loads
    (``folder`` made if missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    write(model, folder / "tokenizer.json")
    for name, document in folder_files(model.config, model.special_tokens).items():
        write_tokenizer_json(folder / name, document)
    return [f"wrote {folder}/ (tokenizer.json, {CONFIG_FILE}, {SPECIAL_TOKENS_FILE})"]


IMPORTER = ImportCommand(
    help="""A Hugging Face tokenizer.json, or a model folder holding one (byte-level BPE, or
    SentencePiece-style BPE with byte fallback; added tokens become special tokens, those marked
    "special": false added tokens: ordinary, encoded whole). A folder's tokenizer_config.json
    (bos/eos/pad tokens, chat template, maximum length) is kept with the tokenizer.

    \b
    Example:
      bpestore import hf tokenizer.json --name my-hf-bpe
      bpestore import hf path/to/Llama-3.2-1B/ --name llama3.2
    """,
    files=("tokenizer_json",),
)

FORMAT = register(Format("hf", read, write, merge_rule="pair", importer=IMPORTER, write_folder=write_folder, keeps_token_rule=True))
