"""Comparing two tokenizers: vocabularies, merges, special tokens, pattern, and cost on a text."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .tokenizer import Tokenizer


def token_text(token: bytes) -> str:
    """A token for people, unambiguous: its UTF-8 text with backslashes doubled, control and
    non-printable characters escaped as Python does, and bytes that are not UTF-8 as ``\\xNN``."""
    pieces = []
    for char in token.decode("utf-8", errors="surrogateescape"):
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that is not part of valid UTF-8
            pieces.append(f"\\x{code - 0xDC00:02x}")
        elif char == "\\":
            pieces.append("\\\\")
        elif char.isprintable():
            pieces.append(char)
        else:
            pieces.append(repr(char)[1:-1])
    return "".join(pieces)


@dataclass
class TokenizerDiff:
    """What differs between tokenizer ``a`` and tokenizer ``b``.

    Tokens are compared by their bytes; ``only_a`` and ``only_b`` list ``(id, token)`` ordered by
    id, which for trained tokenizers is the order the tokens were learned in.
    """

    a: str
    b: str
    vocab_size_a: int
    vocab_size_b: int
    shared_tokens: int
    only_a: list[tuple[int, bytes]]
    only_b: list[tuple[int, bytes]]
    merges_a: int
    merges_b: int
    common_merge_prefix: int
    first_different_merge: dict[str, Any] | None
    shared_merges: int
    special_tokens_only_a: list[str]
    special_tokens_only_b: list[str]
    same_pattern: bool
    pattern_a: str
    pattern_b: str
    merge_rule_a: str
    merge_rule_b: str
    corpus: str | None = None
    corpus_bytes: int | None = None
    tokens_a: int | None = None
    tokens_b: int | None = None

    @property
    def bytes_per_token_a(self) -> float | None:
        return self.corpus_bytes / self.tokens_a if self.tokens_a else None

    @property
    def bytes_per_token_b(self) -> float | None:
        return self.corpus_bytes / self.tokens_b if self.tokens_b else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: tokens as readable text (see :func:`token_text`)."""
        data = {key: value for key, value in self.__dict__.items() if key not in {"only_a", "only_b"}}
        data["only_a"] = [{"id": i, "token": token_text(t)} for i, t in self.only_a]
        data["only_b"] = [{"id": i, "token": token_text(t)} for i, t in self.only_b]
        if self.corpus is not None:
            data["bytes_per_token_a"] = self.bytes_per_token_a
            data["bytes_per_token_b"] = self.bytes_per_token_b
        return data


def _merge_dict(merge: tuple[bytes, bytes] | None) -> list[str] | None:
    return None if merge is None else [token_text(merge[0]), token_text(merge[1])]


def count_tokens(tokenizer: Tokenizer, path: str | os.PathLike, *, progress: bool = False, description: str = "") -> int:
    from .corpus import iter_text_blocks
    from .progress import progress_bar

    with progress_bar(progress, os.path.getsize(path), description or "encoding", unit="B", unit_scale=True) as bar:
        total = 0
        for ids in tokenizer.encode_blocks(iter_text_blocks(path, on_bytes=bar.update)):
            total += len(ids)
    return total


def diff_tokenizers(
    name_a: str,
    a: Tokenizer,
    name_b: str,
    b: Tokenizer,
    corpus: str | os.PathLike | None = None,
    *,
    progress: bool = False,
) -> TokenizerDiff:
    ids_a = {token: token_id for token_id, token in a.vocab.items()}
    ids_b = {token: token_id for token_id, token in b.vocab.items()}
    prefix = 0
    for merge_a, merge_b in zip(a.merges, b.merges):
        if merge_a != merge_b:
            break
        prefix += 1
    first_different = None
    if prefix < max(len(a.merges), len(b.merges)):
        first_different = {
            "rank": prefix,
            "a": _merge_dict(a.merges[prefix] if prefix < len(a.merges) else None),
            "b": _merge_dict(b.merges[prefix] if prefix < len(b.merges) else None),
        }
    result = TokenizerDiff(
        a=name_a,
        b=name_b,
        vocab_size_a=a.vocab_size,
        vocab_size_b=b.vocab_size,
        shared_tokens=len(ids_a.keys() & ids_b.keys()),
        only_a=sorted((i, t) for t, i in ids_a.items() if t not in ids_b),
        only_b=sorted((i, t) for t, i in ids_b.items() if t not in ids_a),
        merges_a=len(a.merges),
        merges_b=len(b.merges),
        common_merge_prefix=prefix,
        first_different_merge=first_different,
        shared_merges=len(set(a.merges) & set(b.merges)),
        special_tokens_only_a=[t for t in a.special_tokens if t not in b.special_tokens],
        special_tokens_only_b=[t for t in b.special_tokens if t not in a.special_tokens],
        same_pattern=a.pattern == b.pattern,
        pattern_a=a.pattern,
        pattern_b=b.pattern,
        merge_rule_a=a.merge_rule,
        merge_rule_b=b.merge_rule,
    )
    if corpus is not None:
        result.corpus = os.fspath(corpus)
        result.corpus_bytes = os.path.getsize(corpus)
        result.tokens_a = count_tokens(a, corpus, progress=progress, description=f"encoding with {name_a}")
        result.tokens_b = count_tokens(b, corpus, progress=progress, description=f"encoding with {name_b}")
    return result
