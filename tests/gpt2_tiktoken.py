"""GPT-2 from the fixture files, as a tiktoken Encoding and as plain ``(vocab, merges)``.

tiktoken cannot download its encodings here, so the Encoding is built from ``gpt2_vocab.json`` and
``gpt2_merges.txt`` (OpenAI's ``encoder.json`` / ``vocab.bpe``). The byte-to-unicode decoding is
written out again here rather than imported from bpestore, so that the tests do not trust the code
under test to read the files they check it with.
"""

from __future__ import annotations

import json
from functools import lru_cache

import tiktoken

from conftest import shared_file

# tiktoken's r50k_base pattern (GPT-2), with possessive quantifiers and \s++$.
R50K_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
ENDOFTEXT = "<|endoftext|>"
ENDOFTEXT_ID = 50256


def _unicode_to_byte() -> dict[str, int]:
    """Inverse of GPT-2's ``bytes_to_unicode``: printable bytes stand for themselves, the other
    bytes, in ascending order, take the characters from U+0100 on."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    table = {chr(b): b for b in printable}
    table.update({chr(256 + n): b for n, b in enumerate(others)})
    assert len(table) == 256 and sorted(table.values()) == list(range(256))
    return table


def _decode_token(text: str, table: dict[str, int]) -> bytes:
    return bytes(table[c] for c in text)


def read_vocab_json(path) -> dict[int, bytes]:
    """A GPT-2 style ``vocab.json`` (byte-to-unicode text -> id) as id -> bytes."""
    table = _unicode_to_byte()
    with open(path, encoding="utf-8") as file:
        encoder = json.load(file)
    return {token_id: _decode_token(text, table) for text, token_id in encoder.items()}


def read_merges_txt(path) -> list[tuple[bytes, bytes]]:
    """A GPT-2 style ``merges.txt`` (``left right`` per line, byte-to-unicode text) as byte pairs."""
    table = _unicode_to_byte()
    merges = []
    with open(path, encoding="utf-8") as file:
        for line in file:
            line = line.rstrip("\n")
            if not line or line.startswith("#version"):
                continue
            left, right = line.split(" ")
            merges.append((_decode_token(left, table), _decode_token(right, table)))
    return merges


@lru_cache(maxsize=1)
def gpt2_vocab_and_merges() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """GPT-2's vocab (id -> bytes, ``<|endoftext|>`` included) and its 50,000 merges in rank order.

    Skips the calling test when the fixture files are absent. Callers must not mutate the result.
    """
    vocab = read_vocab_json(shared_file("fixtures", "gpt2_vocab.json"))
    merges = read_merges_txt(shared_file("fixtures", "gpt2_merges.txt"))
    return vocab, merges


def cs336_reference_training() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """The CS336 reference result of training on ``corpus.en``, vocab 500, ``["<|endoftext|>"]``."""
    vocab = read_vocab_json(shared_file("fixtures", "train-bpe-reference-vocab.json"))
    merges = read_merges_txt(shared_file("fixtures", "train-bpe-reference-merges.txt"))
    return vocab, merges


@lru_cache(maxsize=1)
def gpt2_encoding() -> tiktoken.Encoding:
    """tiktoken's GPT-2 (r50k_base) Encoding, built from the fixture files."""
    vocab, _ = gpt2_vocab_and_merges()
    mergeable_ranks = {token: token_id for token_id, token in vocab.items() if token_id != ENDOFTEXT_ID}
    return tiktoken.Encoding(
        name="gpt2_from_fixtures",
        pat_str=R50K_PATTERN,
        mergeable_ranks=mergeable_ranks,
        special_tokens={ENDOFTEXT: ENDOFTEXT_ID},
    )
