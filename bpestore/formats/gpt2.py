"""GPT-2's ``vocab.json`` + ``merges.txt`` (tokens written with GPT-2's byte-to-unicode mapping)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

from ..engine import byte_level_merges as engine_byte_level_merges
from ..engine import byte_level_tokens, byte_level_vocab_json
from ..errors import FormatError
from ..model import MAX_TOKEN_ID, BPEModel
from ..pretokenize.patterns import GPT2_PATTERN
from .registry import (
    Format, ImportCommand, Imported, ImportOption, added_tokens_note, build_model, register, resolved, unreached_tokens_notes,
)


@lru_cache(maxsize=1)
def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from each byte to a printable character."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


@lru_cache(maxsize=1)
def unicode_to_byte() -> dict[str, int]:
    return {c: b for b, c in byte_to_unicode().items()}


def token_to_text(token: bytes) -> str:
    """A token's bytes in GPT-2's printable form."""
    table = byte_to_unicode()
    return "".join(table[b] for b in token)


# A real tokenizer's file (Llama-3's: 128,000 tokens, 280,000 merges) read a token at a time, a
# character at a time, took most of a second in Python; the engine decodes them all at once. It
# returns None at the first doubt, and the callers then go a token at a time, to name the problem.


def byte_level_bytes(text: str) -> bytes | None:
    """The bytes of a token written in GPT-2's printable form, or None if a character is not in
    its alphabet."""
    tokens = byte_level_tokens([text])
    return None if tokens is None else tokens[0]


def byte_level_many(texts: Iterable[str]) -> list[bytes] | None:
    """:func:`byte_level_bytes` of each of ``texts``, or None if one is not a byte-level string."""
    return byte_level_tokens(texts if isinstance(texts, list) else list(texts))


def byte_level_vocab(data: dict[str, Any]) -> dict[int, bytes] | None:
    """A vocab written ``{printable token: id}`` as ``{id: bytes}``, decoded at once, if every id
    is an integer in range given once and every token byte-level; None otherwise."""
    ids = list(data.values())
    if not ids or set(map(type, ids)) != {int} or min(ids) < 0 or max(ids) > MAX_TOKEN_ID or len(set(ids)) != len(ids):
        return None
    tokens = byte_level_many(data)
    return None if tokens is None else dict(zip(ids, tokens))


def byte_level_merges(lines: Iterable[str]) -> list[tuple[bytes, bytes]] | None:
    """The merges written as ``"left right"`` strings, each part byte-level and not empty; or None
    if one is not so."""
    return engine_byte_level_merges(lines if isinstance(lines, list) else list(lines))


def text_to_token(text: str, *, where: str = "") -> bytes:
    """The bytes of a token written in GPT-2's printable form; ValueError for foreign characters."""
    token = byte_level_bytes(text)
    if token is None:
        foreign = next(c for c in text if c not in unicode_to_byte())
        raise ValueError(f"{where}character {foreign!r} in {text!r} is not in GPT-2's byte-to-unicode alphabet")
    return token


def read_vocab(path: str | os.PathLike[str], literal_tokens: Iterable[str] = ()) -> dict[int, bytes]:
    """``vocab.json``: printable token -> id, returned as id -> bytes.

    ``literal_tokens`` (special tokens) are taken as plain UTF-8 text when they are not written
    in the byte-to-unicode alphabet.
    """
    literal = set(literal_tokens)
    raw = Path(path).read_bytes()
    # (at once in the engine, for a file that is exactly such a vocab; any other is read below)
    fast = byte_level_vocab_json(raw, MAX_TOKEN_ID)
    if fast is not None:
        return fast
    try:
        data = json.loads(utf8_text(path, raw))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from None
    except RecursionError:
        raise ValueError(f"{path}: not valid JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object mapping tokens to ids")
    fast = byte_level_vocab(data)
    if fast is not None:
        return fast
    # a token at a time, to name what is wrong (or take a special token's text as it is)
    vocab: dict[int, bytes] = {}
    for text, token_id in data.items():
        if type(token_id) is not int or not 0 <= token_id <= MAX_TOKEN_ID:
            raise ValueError(
                f"{path}: token {text!r} has id {json.dumps(token_id)[:60]}; ids must be integers from 0 to {MAX_TOKEN_ID} (2**31-1)"
            )
        if token_id in vocab:
            raise ValueError(f"{path}: id {token_id} is given to two tokens")
        token = byte_level_bytes(text)
        if token is None and text in literal:
            token = text.encode("utf-8")
        vocab[token_id] = token if token is not None else text_to_token(text, where=f"{path}: ")
    return vocab


def read_utf8(path: str | os.PathLike[str]) -> str:
    """The text of a file; ValueError naming the file and the first bad byte if it is not UTF-8."""
    return utf8_text(path, Path(path).read_bytes())


def utf8_text(path: str | os.PathLike[str], data: bytes) -> str:
    """``data`` (the file at ``path``) as text; ValueError as :func:`read_utf8` gives."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(f"{path}, line {line}: not UTF-8 (byte offset {error.start}: {error.reason})") from None


def read_merges(path: str | os.PathLike[str]) -> list[tuple[bytes, bytes]]:
    """``merges.txt``: one ``left right`` pair per line, an optional ``#version`` first line."""
    lines = read_utf8(path).split("\n")
    body = lines[1:] if lines[0].startswith("#version") else lines
    if body and body[-1] == "":
        body = body[:-1]  # (the last line's end)
    fast = byte_level_merges(body)  # (None for anything else: a line's "\r", a blank line, a foreign character)
    if fast is not None:
        return fast
    merges: list[tuple[bytes, bytes]] = []
    for line_number, line in enumerate(lines, start=1):
        line = line.rstrip("\r\n")
        if (line_number == 1 and line.startswith("#version")) or not line.strip():
            continue
        fields = line.split(" ")
        if len(fields) != 2 or not fields[0] or not fields[1]:
            raise ValueError(f"{path}, line {line_number}: expected two tokens separated by one space, got {line!r}")
        left, right = byte_level_bytes(fields[0]), byte_level_bytes(fields[1])
        if left is None or right is None:
            where = f"{path}, line {line_number}: "
            left, right = text_to_token(fields[0], where=where), text_to_token(fields[1], where=where)
        merges.append((left, right))
    return merges


def write_vocab(path: str | os.PathLike[str], vocab: dict[int, bytes]) -> None:
    data = {token_to_text(token): token_id for token_id, token in sorted(vocab.items())}
    Path(path).write_text(json.dumps(data, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")


def write_merges(path: str | os.PathLike[str], merges: list[tuple[bytes, bytes]]) -> None:
    lines = ["#version: 0.2"] + [f"{token_to_text(a)} {token_to_text(b)}" for a, b in merges]
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def read(vocab_path: str | os.PathLike[str], merges_path: str | os.PathLike[str], special_tokens: Iterable[str] = ()) -> Imported:
    """GPT-2's ``vocab.json`` + ``merges.txt``; special tokens must be named (GPT-2 lists
    ``<|endoftext|>`` in its vocab but not as special)."""
    special_tokens = list(special_tokens)
    try:
        vocab = read_vocab(vocab_path, literal_tokens=special_tokens)
        merges = read_merges(merges_path)
    except ValueError as error:
        raise FormatError(str(error)) from None
    model = build_model(f"{vocab_path} + {merges_path}", vocab, merges, special_tokens)
    return Imported(
        model, "gpt2", resolved(vocab_path, merges_path), later_notes=partial(unreached_tokens_notes, model, merges_path, "--special-token")
    )


def write(model: BPEModel, output: Path) -> list[str]:
    """``vocab.json`` and ``merges.txt`` in the directory ``output`` (made if missing)."""
    notes = []
    if model.pattern != GPT2_PATTERN:
        notes.append("GPT-2 files cannot carry the pre-tokenizer pattern; load them with this pattern:\n  " + model.pattern)
    output.mkdir(parents=True, exist_ok=True)
    write_vocab(output / "vocab.json", model.vocab)
    write_merges(output / "merges.txt", model.merges)
    notes += added_tokens_note(model, "GPT-2")
    notes.append(f"wrote {len(model.vocab):,} tokens to {output / 'vocab.json'} and {len(model.merges):,} merges to {output / 'merges.txt'}")
    return notes


IMPORTER = ImportCommand(
    help="""GPT-2's vocab.json (encoder.json) and merges.txt (vocab.bpe).

    \b
    Example:
      bpestore import gpt2 vocab.json merges.txt --name gpt2 --special-token '<|endoftext|>'
    """,
    files=("vocab_json", "merges_txt"),
    options=(ImportOption("--special-token", "special_tokens", "A special token (repeatable), e.g. '<|endoftext|>'.", multiple=True),),
)

FORMAT = register(Format("gpt2", read, write, merge_rule="pair", writes_directory=True, importer=IMPORTER))
