"""tiktoken's ``.tiktoken`` files: one ``base64(token) rank`` per line, optionally gzip'd.

Neither the pre-tokenizer pattern nor the special tokens are in the file, so importing takes them
as arguments; :data:`KNOWN_ENCODINGS` has OpenAI's by name. tiktoken merges by the rank of the
resulting *token*, so an imported tokenizer records merge rule ``"token"``; a merges list is still
reconstructed (for export, ``show`` and ``diff``), and tokens that no pair merge reaches are counted.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import FormatError
from ..pretokenize import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN


@dataclass(frozen=True)
class KnownEncoding:
    pattern: str
    special_tokens: dict[str, int]


# tiktoken's r50k/p50k pattern is written with possessive quantifiers and `\s++$|...|\s`; it
# matches exactly what GPT2_PATTERN matches, which the fast pre-tokenizer path knows.
KNOWN_ENCODINGS: dict[str, KnownEncoding] = {
    "r50k_base": KnownEncoding(GPT2_PATTERN, {"<|endoftext|>": 50256}),
    "gpt2": KnownEncoding(GPT2_PATTERN, {"<|endoftext|>": 50256}),
    "p50k_base": KnownEncoding(GPT2_PATTERN, {"<|endoftext|>": 50256}),
    "cl100k_base": KnownEncoding(
        CL100K_PATTERN,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
    "o200k_base": KnownEncoding(O200K_PATTERN, {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}),
}


def read_ranks(path: str | os.PathLike) -> dict[bytes, int]:
    """Token bytes -> rank from a ``.tiktoken`` file (plain or gzip'd)."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as error:
            raise FormatError(f"{path}: looks gzip'd but cannot be decompressed ({error})") from None
    ranks: dict[bytes, int] = {}
    seen_ranks: dict[int, int] = {}
    for line_number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 2:
            raise FormatError(f"{path}, line {line_number}: expected 'base64-token rank', got {line[:80]!r}")
        try:
            token = base64.b64decode(fields[0], validate=True)
            rank = int(fields[1])
        except (binascii.Error, ValueError):
            raise FormatError(f"{path}, line {line_number}: expected 'base64-token rank', got {line[:80]!r}") from None
        if rank < 0:
            raise FormatError(f"{path}, line {line_number}: negative rank {rank}")
        if token in ranks:
            raise FormatError(f"{path}, line {line_number}: token {token!r} appears twice")
        if rank in seen_ranks:
            raise FormatError(f"{path}, line {line_number}: rank {rank} also given on line {seen_ranks[rank]}")
        ranks[token] = rank
        seen_ranks[rank] = line_number
    if not ranks:
        raise FormatError(f"{path}: no tokens found")
    return ranks


def write_ranks(path: str | os.PathLike, vocab: dict[int, bytes], special_ids: set[int]) -> None:
    """Write every non-special token as ``base64(token) id``, ordered by id."""
    lines = [
        base64.b64encode(token) + b" " + str(token_id).encode()
        for token_id, token in sorted(vocab.items())
        if token_id not in special_ids
    ]
    Path(path).write_bytes(b"\n".join(lines) + b"\n")
