"""Warm tables: a stored tokenizer's cache, filled before its first text.

A fresh tokenizer merges each distinct pre-token the first time it meets it and caches the ids, so
its first pass over a text is slower than its second. A tokenizer stored by bpestore knows what it
will mostly meet: the pre-token counts of its training corpus. When it is stored, the engine merges
the most frequent of them once and the store keeps their ids (the table ``warm_caches``, migration
0011); :meth:`Tokenizer.from_db <bpestore.Tokenizer.from_db>` (and ``Store.load``, ``bpestore
encode``) hands them to the new tokenizer's engine, each of whose caches starts as a copy of them
(and starts so again when full): a piece of the table is one lookup, as any piece seen before.
(Looked up in the table first and the caches second, every piece cost two fetches, and a second
pass over English ran at 0.75-0.87 the speed of a tokenizer without a table.)

Where the pre-tokens come from (:class:`WarmSource`):

* a training (``Store.train``, ``bpestore train``): its corpus's counts, the most frequent first,
  each seen twice or more (a corpus's pre-tokens seen once are most of its distinct ones, and rarely
  met again: 482,000 of the 505,000 SuperBPE pieces of 57 MB of English; taken by byte order, as
  their counts tie, they made the table of such a tokenizer 16.5 MB instead of 0.8);
* ``Store.warm(ref, files)`` / ``bpestore warm REF FILE...``: those files, counted with the
  tokenizer's own pattern and special tokens;
* an import, or ``bpestore warm REF`` of a tokenizer stored without a corpus: the vocabulary itself,
  every token the pre-tokenizer would keep whole, in id order (a vocabulary in merge order lists
  its most frequent tokens first). Not for a tokenizer of the token rule (tiktoken's, Llama-3's):
  it finds a pre-token that is a token in one lookup of its vocabulary already, so such a table
  only adds a lookup to every piece (measured: a first pass over English no faster, a second
  25-40% slower); one stored by an older bpestore is left unused.

The ids never differ from those merging gives: the engine makes them with its own merge, and a
table carries the fingerprint of the model that made it (its tokens, merges, rule, and the version
of the rule's code); a table whose fingerprint is not the loaded model's is left unused. Loading
also checks that each piece's ids spell exactly its bytes: a damaged table is an error, never used.

Size: ``entries`` pre-tokens at most (:data:`DEFAULT_WARM_ENTRIES` by default: for GPT-2 on
English, 6.9 MB stored, checked and loaded in about 0.13 s; 0: no table). Pre-tokens of one byte
(never merged) or longer than the engine caches (:data:`MAX_WARM_PIECE` bytes) are left out.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..engine import PretokenCounts, Pretokenizer
from ..errors import StoreError
from ..model import BPEModel
from ..store.rows import StoredWarm


class Tokenizer(Protocol):
    """What this module needs of a :class:`bpestore.Tokenizer` (which imports this module)."""

    @property
    def fingerprint(self) -> str: ...

    @property
    def merge_rule(self) -> str: ...

    def pack_warm(self, pieces: Sequence[bytes], entries: int) -> tuple[bytes, int]: ...

    def load_warm(self, data: bytes) -> int: ...

DEFAULT_WARM_ENTRIES = 1 << 18
"""Pre-tokens in a warm table by default: 262,144, the most frequent. Half as many left 1.6% of
the piece occurrences of 20 MB of wiki_en_57M to be merged (63,618 distinct pieces) with the
table of the whole file, and its first pass took 1.5x the second; with these, 0.4% (15,424)."""

MAX_WARM_PIECE = 64
"""The longest pre-token, in bytes, a warm table (and the engine's caches) keeps."""


@dataclass(frozen=True)
class WarmSource:
    """The pre-tokens of a warm table, most useful first, and where they came from, in words."""

    pieces: list[bytes]
    description: str


def check_entries(entries: int) -> int:
    """``entries`` if it is a size a warm table can have (an int >= 0), else a ValueError / TypeError."""
    if isinstance(entries, bool) or not isinstance(entries, int):
        raise TypeError(f"warm entries must be an int, not {type(entries).__name__}")
    if entries < 0 or entries >= 2**32:
        raise ValueError(f"warm entries must be in [0, 2**32), got {entries:,}")
    return entries


def from_counts(counts: PretokenCounts, entries: int, description: str, min_count: int = 1) -> WarmSource:
    """The ``entries`` most frequent pre-tokens of ``counts`` counted ``min_count`` times or more
    (equal counts in byte order)."""
    return WarmSource(counts.most_common(check_entries(entries), 2, MAX_WARM_PIECE, min_count), description)


TRAINING_SOURCE = "the training corpus's counts"


def from_training_counts(counts: PretokenCounts, entries: int) -> WarmSource:
    """The table of a tokenizer trained on ``counts``: their ``entries`` most frequent pre-tokens
    seen twice or more (see the module's doc)."""
    return from_counts(counts, entries, TRAINING_SOURCE, min_count=2)


VOCAB_SOURCE = "the vocabulary's whole pre-tokens"


def from_vocab(model: BPEModel, entries: int) -> WarmSource:
    """The tokens of ``model`` that its pre-tokenizer keeps whole, in id order, ``entries`` at
    most: a warm table for a tokenizer that comes without a corpus (an import). None for the
    token rule, which finds them in its vocabulary in one lookup (see the module's doc)."""
    check_entries(entries)
    if model.merge_rule == "token":
        return WarmSource([], VOCAB_SOURCE)
    pretokenizer = Pretokenizer(model.pattern)
    cut_out = set(model.whole_ids.values())  # special and added tokens never reach the pre-tokenizer
    pieces: list[bytes] = []
    for token_id in sorted(model.vocab):
        if len(pieces) >= entries:
            break
        token = model.vocab[token_id]
        if token_id in cut_out or not 2 <= len(token) <= MAX_WARM_PIECE:
            continue
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            continue  # part of a character: never a whole pre-token of a text
        if pretokenizer.pretokenize(text) == [text]:
            pieces.append(token)
    return WarmSource(pieces, VOCAB_SOURCE)


def from_files(
    model: BPEModel, paths: Sequence[str | os.PathLike[str]], entries: int, *, workers: int | None = None, progress: bool = False
) -> WarmSource:
    """The ``entries`` most frequent pre-tokens of the text files ``paths``, cut at ``model``'s
    special and added tokens and pre-tokenized with its pattern."""
    from ..train.trainer import count_corpus  # (training's counting, only when files are given)

    check_entries(entries)
    if not paths:
        raise ValueError("no files to count")
    counts = PretokenCounts()
    for path in paths:
        counts.merge(count_corpus(path, list(model.whole_ids), pattern=model.pattern, workers=workers, progress=progress))
    names = ", ".join(os.fspath(path) for path in paths)
    return from_counts(counts, entries, f"the files {names}")


def make(tokenizer: Tokenizer, source: WarmSource, entries: int = DEFAULT_WARM_ENTRIES) -> StoredWarm | None:
    """The warm table of ``tokenizer`` for ``source``'s first ``entries`` pre-tokens, as the store
    keeps it; None when there are none (or ``entries`` is 0)."""
    if check_entries(entries) == 0 or not source.pieces:
        return None
    data, held = tokenizer.pack_warm(source.pieces, entries)
    if held == 0:
        return None
    return StoredWarm(tokenizer.fingerprint, held, source.description, data)


def useful(merge_rule: str, source: str) -> bool:
    """Whether a table of pre-tokens from ``source`` speeds a tokenizer of ``merge_rule`` (a table
    of a token-rule vocabulary's own tokens does not: see the module's doc)."""
    return not (merge_rule == "token" and source == VOCAB_SOURCE)


def apply_stored(tokenizer: Tokenizer, warm: StoredWarm | None, ref: str, location: str) -> bool:
    """Give ``tokenizer`` (just loaded as ``ref`` from ``location``) its stored table ``warm``,
    if it was made for this very model (same fingerprint); whether it did. A damaged table is a
    StoreError naming the tokenizer and how to remove the table."""
    if warm is None or warm.fingerprint != tokenizer.fingerprint or not useful(tokenizer.merge_rule, warm.source):
        return False
    try:
        tokenizer.load_warm(warm.data)
    except ValueError as error:
        where = f"{location}: " if location else ""
        raise StoreError(
            f"{where}the warm table of {ref} cannot be used ({error}); "
            f"bpestore warm {ref} --remove deletes it (the tokenizer then loads without it)"
        ) from None
    return True
