"""Hugging Face ``tokenizer.json`` with a BPE model over byte-level pre-tokenization.

Supported: ``ByteLevel`` pre-tokenization (GPT-2's regex, no prefix space) or a ``Sequence`` of a
``Split`` by a regex (behavior ``Isolated``) and ``ByteLevel`` without its own regex; no normalizer;
merges as ``"a b"`` strings or ``["a", "b"]`` pairs; added tokens: those marked ``"special": false``
become the model's added tokens (ordinary, encoded whole: :attr:`BPEModel.added_tokens`), the
others special tokens.
Anything that would make Hugging Face produce different ids (a normalizer, a prefix space,
WordPiece or Unigram models, dropout, subword prefixes, byte fallback, whole-word lookup) is refused.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from functools import partial
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..model import MAX_TOKEN_ID, BPEModel, Merges
from ..pretokenize.patterns import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN
from .gpt2 import token_to_text, unicode_to_byte
from .registry import Format, ImportCommand, Imported, build_model, register, resolved, unreached_tokens_notes


# A bounded quantifier followed by "+": possessive in Python's `regex`, but in Oniguruma (the
# engine of Hugging Face's Split) a second, unbounded repetition. The atom before it is a \p{..}
# class, an escape, a bracket class or a plain character.
_BOUNDED_THEN_PLUS = re.compile(r"(\\[pP]\{[^}]*\}|\\.|\[(?:\\.|[^\]\\])*\]|[^\\\[\]()|])(\{\d+(?:,\d*)?\})\+")
_KNOWN_PATTERNS = (GPT2_PATTERN, CL100K_PATTERN, O200K_PATTERN)


def pattern_for_hf(pattern: str) -> str:
    """``pattern`` as Oniguruma reads it the same way: possessive ``X{m,n}+`` -> atomic ``(?>X{m,n})``."""
    return _BOUNDED_THEN_PLUS.sub(r"(?>\1\2)", pattern)


def pattern_from_hf(pattern: str) -> str:
    """A Split regex from a tokenizer.json as Python's `regex` must read it to match the same."""
    for known in _KNOWN_PATTERNS:
        if pattern == pattern_for_hf(known):
            return known
    return _BOUNDED_THEN_PLUS.sub(r"(?:\1\2)+", pattern)


@dataclass
class HFTokenizer:
    vocab: dict[int, bytes]
    merges: list[tuple[bytes, bytes]]
    special_tokens: list[str]
    pattern: str
    added_tokens: list[str] = field(default_factory=list)
    ignore_merges: bool = False
    """Llama-3's option: a pre-token that is a token is that token, merges apart (tiktoken's rule)."""
    unapplied: list[str] = field(default_factory=list)
    """The parts of the file kept out of the model (a post-processor, truncation, padding)."""


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


def _pattern_of(path: str | os.PathLike[str], pre_tokenizer: Any) -> str:
    def refuse(what: str) -> FormatError:
        return FormatError(f"{path}: pre_tokenizer: {what} is not supported")

    if not pre_tokenizer:
        raise refuse("none (a byte-level BPE needs ByteLevel pre-tokenization)")
    pre_tokenizer = _object(path, pre_tokenizer, "pre_tokenizer")
    kind = pre_tokenizer.get("type")
    if kind == "ByteLevel":
        if pre_tokenizer.get("add_prefix_space"):
            raise refuse("ByteLevel with add_prefix_space=true (a space added before the text)")
        if not pre_tokenizer.get("use_regex", True):
            raise refuse("ByteLevel without a splitting regex")
        return GPT2_PATTERN
    if kind == "Sequence":
        steps = pre_tokenizer.get("pretokenizers") or []
        if not isinstance(steps, list) or not all(isinstance(step, dict) for step in steps):
            raise FormatError(f"{path}: pre_tokenizer's pretokenizers must be an array of objects, not {_describe(steps)}")
        if len(steps) == 2 and steps[0].get("type") == "Split" and steps[1].get("type") == "ByteLevel":
            split, byte_level = steps
            regex = split.get("pattern")
            regex = regex.get("Regex") if isinstance(regex, dict) else None
            if not isinstance(regex, str):
                raise refuse("pretokenizers[0]: Split by a plain string (only a Regex)")
            # Isolated keeps the matches and the gaps between them as pieces; Removed with invert
            # keeps the matches and drops the gaps (OLMo-2's). For a regex whose matches cover any
            # text (as bpestore's patterns must: it refuses text they do not cover) both are the
            # matches, one piece each.
            behavior, invert = split.get("behavior"), bool(split.get("invert"))
            if (behavior, invert) not in (("Isolated", False), ("Removed", True)):
                raise refuse(f"pretokenizers[0]: Split with behavior {split.get('behavior')!r}, invert={split.get('invert')!r}")
            if byte_level.get("add_prefix_space") or byte_level.get("use_regex", True):
                raise refuse("pretokenizers[1]: ByteLevel after Split with add_prefix_space or use_regex")
            return pattern_from_hf(regex)
        raise refuse(f"a Sequence of {[step.get('type') for step in steps]}")
    raise refuse(repr(kind))


# The models Hugging Face tokenizers have besides BPE, and the families that publish them.
_OTHER_MODELS = {
    "Unigram": "a Unigram model (T5, ALBERT, XLM-R, mBART)",
    "WordPiece": "a WordPiece model (BERT, DistilBERT, ELECTRA)",
    "WordLevel": "a WordLevel model (a word-to-id table)",
}


def _model_kind(model: dict[str, Any]) -> str | None:
    """The model's type; a file of an older tokenizers release may leave it out (its fields tell)."""
    kind = model.get("type")
    if kind is None:
        if "merges" in model:
            return "BPE"
        if "max_input_chars_per_word" in model:
            return "WordPiece"
        if isinstance(model.get("vocab"), list):
            return "Unigram"
    return kind if isinstance(kind, str) else None


def _check_model(path: str | os.PathLike[str], model: dict[str, Any]) -> None:
    kind = _model_kind(model)
    if kind != "BPE":
        what = _OTHER_MODELS.get(kind or "", f"a model of type {json.dumps(kind)}")
        raise FormatError(f"{path}: model: {what}: bpestore stores BPE tokenizers only")
    if model.get("byte_fallback"):
        raise FormatError(
            f"{path}: model: a SentencePiece-style BPE over characters (byte_fallback: Llama-2, Mistral, Gemma, Phi-3), "
            "not a byte-level one: not supported"
        )
    problems = {
        "dropout": model.get("dropout") not in (None, 0, 0.0),
        "continuing_subword_prefix": bool(model.get("continuing_subword_prefix")),
        "end_of_word_suffix": bool(model.get("end_of_word_suffix")),
    }
    unsupported = [f"model.{name}" for name, present in problems.items() if present]
    if unsupported:
        raise FormatError(f"{path}: unsupported BPE option {', '.join(unsupported)}")


def _added_tokens(path: str | os.PathLike[str], added: Any) -> list[tuple[str, int, bool]]:
    """``added_tokens`` as (content, id, special) in id order (``special``: unless the file says
    ``"special": false``); FormatError for anything malformed."""
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
        options = [name for name in ("lstrip", "rstrip", "single_word") if token.get(name)]
        if options:
            raise FormatError(f"{path}: added_tokens[{index}] {content!r} uses {', '.join(options)}, which is not supported")
        tokens.append((content, token_id, token.get("special") is not False))
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
    _check_model(path, model)
    normalizer = data.get("normalizer")
    if normalizer:
        kind = normalizer.get("type") if isinstance(normalizer, dict) else normalizer
        inner = [step.get("type") for step in normalizer.get("normalizers", []) if isinstance(step, dict)] if kind == "Sequence" else []
        shown = f"Sequence of {inner}" if inner else repr(kind)
        raise FormatError(f"{path}: normalizer: {shown} is not supported (it changes the text before it is split)")
    pattern = _pattern_of(path, data.get("pre_tokenizer"))
    listed = _added_tokens(path, data.get("added_tokens"))
    added = [(content, token_id) for content, token_id, _ in listed]
    added_text = dict(added)
    if len(added_text) != len(added):
        repeated = next(content for content, _ in added if sum(1 for other, _ in added if other == content) > 1)
        raise FormatError(f"{path}: added token {repeated!r} is listed twice")
    alphabet = unicode_to_byte()
    vocab: dict[int, bytes] = {}
    model_vocab = _object(path, model.get("vocab", {}), "model.vocab")
    for text, token_id in model_vocab.items():
        token_id = _token_id(path, token_id, f"vocab entry {text!r}")
        if text in added_text:
            token = text.encode("utf-8")
        elif all(c in alphabet for c in text):
            token = bytes(alphabet[c] for c in text)
        else:
            raise FormatError(f"{path}: vocab entry {text!r} is not byte-level (characters outside GPT-2's byte alphabet)")
        if vocab.setdefault(token_id, token) != token:  # two spellings of one token are fine
            raise FormatError(f"{path}: vocab gives id {token_id} to two tokens ({token_to_text(vocab[token_id])!r} and {text!r})")
    for text, token_id in added_text.items():
        if vocab.setdefault(token_id, text.encode("utf-8")) != text.encode("utf-8"):
            raise FormatError(f"{path}: added token {text!r} has id {token_id}, which the vocab gives to another token")
    merges = []
    model_merges = model.get("merges", [])
    if not isinstance(model_merges, list):
        raise FormatError(f"{path}: model.merges must be an array, not {_describe(model_merges)}")
    for rank, merge in enumerate(model_merges):
        parts = merge.split(" ") if isinstance(merge, str) else merge
        if not isinstance(parts, list) or len(parts) != 2 or not all(isinstance(p, str) and p for p in parts):
            raise FormatError(f"{path}: merge {rank} is {merge!r}, expected 'a b' or ['a', 'b']")
        try:
            merges.append((bytes(alphabet[c] for c in parts[0]), bytes(alphabet[c] for c in parts[1])))
        except KeyError:
            raise FormatError(f"{path}: merge {rank} {merge!r} is not byte-level") from None
    specials = [content for content, _, special in listed if special]
    ordinary = [content for content, _, special in listed if not special]
    ignore_merges = bool(model.get("ignore_merges"))
    if ignore_merges:
        _check_merges_follow_ids(path, vocab, merges)
    unapplied = [f"{key} {_kind(data[key], key)!r}" for key in ("truncation", "padding") if data.get(key)]
    if _adds_tokens(data.get("post_processor")):  # (ByteLevel's only trims offsets: the ids are the same)
        unapplied.insert(0, f"post_processor {_kind(data['post_processor'], 'post_processor')!r}")
    return HFTokenizer(vocab, merges, specials, pattern, ordinary, ignore_merges, unapplied)


def _adds_tokens(processor: Any) -> bool:
    """Whether a post-processor adds tokens to what encode gives (a template, RoBERTa's, BERT's)."""
    if not isinstance(processor, dict):
        return False
    if processor.get("type") == "Sequence":
        return any(_adds_tokens(step) for step in processor.get("processors") or [])
    return processor.get("type") in ("TemplateProcessing", "RobertaProcessing", "BertProcessing")


def _kind(value: Any, key: str) -> str:
    kind = value.get("type", key) if isinstance(value, dict) else key
    return kind if isinstance(kind, str) else key


def _check_merges_follow_ids(path: str | os.PathLike[str], vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]]) -> None:
    """With ``ignore_merges``, bpestore encodes by tiktoken's rule: the whole pre-token if it is a
    token, else merging the adjacent pair whose joined token has the lowest id. That is Hugging
    Face's BPE exactly when its merges come in the order of the ids of the tokens they make (as in
    Llama-3's, converted from tiktoken's ranks); FormatError otherwise, rather than other ids."""
    ids = {token: token_id for token_id, token in vocab.items()}
    previous = -1
    for rank, (left, right) in enumerate(merges):
        made = ids.get(left + right)
        if made is None or made < previous:
            raise FormatError(
                f"{path}: model.ignore_merges with merges out of the order of their tokens' ids (merge {rank}): "
                "bpestore's whole-token rule would encode differently"
            )
        previous = made


def tokenizer_json(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_ids: dict[str, int],
    pattern: str,
    *,
    whole_token_lookup: bool = False,
    added_ids: dict[str, int] | None = None,
) -> dict[str, Any]:
    """A ``tokenizer.json`` document that the ``tokenizers`` library loads and encodes with;
    ``added_ids``: the added tokens (ordinary, encoded whole), written as added tokens with
    ``"special": false``."""
    added_ids = added_ids or {}
    whole = {**special_ids, **added_ids}
    # A special token is written as its text (as GPT-2's vocab has "<|endoftext|>"), unless it is
    # also an ordinary token that merges use or a single byte: then the model needs it in the byte
    # alphabet ("Ġ", not " "), and the added token (same id) carries the text.
    merge_tokens = {part for left, right in merges for part in (left, right, left + right)}
    raw_ids = {token_id for token_id in whole.values() if len(vocab[token_id]) > 1 and vocab[token_id] not in merge_tokens}
    model_vocab = {
        (token.decode("utf-8") if token_id in raw_ids else token_to_text(token)): token_id
        for token_id, token in sorted(vocab.items())
    }
    # Hugging Face gives an added token the model's id for its text, or else a new id: so the text
    # of a special token written in the byte alphabet is a second key for the same id.
    for text, token_id in whole.items():
        model_vocab.setdefault(text, token_id)
    if pattern == GPT2_PATTERN:
        pre_tokenizer = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    else:
        pre_tokenizer = {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": pattern_for_hf(pattern)}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
            ],
        }
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": token_id, "content": text, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
                "special": text in special_ids,
            }
            for text, token_id in sorted(whole.items(), key=lambda item: item[1])
        ],
        "normalizer": None,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": byte_level,
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
    those marked ``"special": false`` added tokens (ordinary, encoded whole)."""
    document = read_tokenizer_json(path)
    rule = "token" if document.ignore_merges else "pair"  # (see _check_merges_follow_ids)
    merges: list[tuple[bytes, bytes]] | Callable[[BPEModel], Merges] = document.merges
    if document.ignore_merges:
        merges = partial(_first_merges, document.merges)  # the token rule's own merges: one per token
    model = build_model(
        path, document.vocab, merges, document.special_tokens, pattern=document.pattern, added_tokens=document.added_tokens,
    )
    assert model.merge_rule == rule
    return Imported(model, "hf", resolved(path), [*unreached_tokens_notes(model, path), *_unapplied_notes(document)])


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


def _unapplied_notes(document: HFTokenizer) -> list[str]:
    """What of the file is not applied, said at import rather than dropped without a word."""
    return [
        f"{what} is not applied: encode gives the ids of Hugging Face's encode(text, add_special_tokens=False)"
        for what in document.unapplied
    ]


def write(model: BPEModel, output: Path) -> list[str]:
    """The file ``output`` as a ``tokenizer.json``."""
    write_tokenizer_json(output, tokenizer_json(model.vocab, model.merges, model.special_ids, model.pattern, added_ids=model.added_ids))
    return [f"wrote {len(model.vocab):,} tokens to {output}"]


IMPORTER = ImportCommand(
    help="""A Hugging Face tokenizer.json (byte-level BPE; added tokens become special tokens,
    those marked "special": false added tokens: ordinary, encoded whole).

    \b
    Example:
      bpestore import hf tokenizer.json --name my-hf-bpe
    """,
    files=("tokenizer_json",),
)

FORMAT = register(Format("hf", read, write, merge_rule="pair", importer=IMPORTER))
