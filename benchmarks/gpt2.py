"""GPT-2 from the fixture files (``gpt2_vocab.json`` / ``gpt2_merges.txt``) for the peers.

The files are in GPT-2's byte-to-unicode encoding; the decoding is written out here rather than
imported from bpestore, so that the benchmark does not trust the code under test to read them.
"""

from __future__ import annotations

import json
from pathlib import Path

ENDOFTEXT = "<|endoftext|>"
ENDOFTEXT_ID = 50256

# tiktoken's r50k_base pattern (GPT-2), with possessive quantifiers and \s++$.
R50K_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""


def unicode_to_byte() -> dict[str, int]:
    """Inverse of GPT-2's ``bytes_to_unicode``: printable bytes stand for themselves, the other
    bytes, in ascending order, take the characters from U+0100 on."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    table = {chr(b): b for b in printable}
    table.update({chr(256 + n): b for n, b in enumerate(others)})
    return table


def read_vocab(vocab_path: str | Path) -> dict[bytes, int]:
    """Token bytes -> id, special token included."""
    table = unicode_to_byte()
    with open(vocab_path, encoding="utf-8") as file:
        encoder = json.load(file)
    return {bytes(table[c] for c in text): token_id for text, token_id in encoder.items()}


def tiktoken_encoding(vocab_path: str | Path, special_tokens: dict[str, int] | None = None):
    """A ``tiktoken.Encoding`` for GPT-2 built from the fixture vocab (reads the file)."""
    import tiktoken

    special_tokens = {ENDOFTEXT: ENDOFTEXT_ID} if special_tokens is None else special_tokens
    specials = {token.encode("utf-8") for token in special_tokens}
    ranks = {token: token_id for token, token_id in read_vocab(vocab_path).items() if token not in specials}
    return tiktoken.Encoding(name="gpt2", pat_str=R50K_PATTERN, mergeable_ranks=ranks, special_tokens=special_tokens)


def hf_tokenizer(vocab_path: str | Path, merges_path: str | Path, special_tokens=(ENDOFTEXT,)):
    """A Hugging Face ``tokenizers.Tokenizer`` for GPT-2: BPE model, ByteLevel pre-tokenizer and
    decoder, no prefix space, the special tokens recognised in the text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tokenizer = Tokenizer(models.BPE.from_file(str(vocab_path), str(merges_path)))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(list(special_tokens))
    return tokenizer


def read_merges_file(merges_path: str | Path) -> list[tuple[bytes, bytes]]:
    """A merges file in GPT-2's encoding (``left right`` per line, optional ``#version`` line)."""
    table = unicode_to_byte()
    merges = []
    for line in Path(merges_path).read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#version"):
            left, right = line.split(" ")
            merges.append((bytes(table[c] for c in left), bytes(table[c] for c in right)))
    return merges
