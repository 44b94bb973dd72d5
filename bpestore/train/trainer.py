"""``train_bpe``: byte-level BPE training with the semantics of the Stanford CS336 reference."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence

from ..pretokenize.corpus import check_corpus_path
from .counting import count_file_pretokens
from ..model import BPEModel
from ..model import check_special_tokens as _check_special_tokens
from .merge import learn_merges
from ..pretokenize.patterns import GPT2_PATTERN
from ..progress import progress_bar

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]


def check_special_tokens(special_tokens: Iterable[str] | None) -> list[str]:
    """The special tokens as a list; ValueError for duplicates, empty strings or non-strings."""
    return _check_special_tokens(special_tokens, repeats="refuse")


def check_vocab_size(vocab_size: int, special_tokens: Sequence[str]) -> None:
    minimum = 256 + len(special_tokens)
    if not isinstance(vocab_size, int) or vocab_size < minimum:
        raise ValueError(
            f"vocab_size must be at least {minimum} (256 byte tokens + {len(special_tokens)} special "
            f"tokens), got {vocab_size!r}"
        )


def max_merges(vocab_size: int, special_tokens: Sequence[str]) -> int:
    """How many merges fill a vocab of ``vocab_size``: the rest after the special tokens and the 256 bytes."""
    return vocab_size - 256 - len(special_tokens)


def base_vocab(special_tokens: Sequence[str]) -> Vocab:
    """Special tokens first (ids 0..k-1, in order), then the 256 single bytes."""
    vocab = {i: token.encode("utf-8") for i, token in enumerate(special_tokens)}
    offset = len(vocab)
    vocab.update({offset + b: bytes([b]) for b in range(256)})
    return vocab


def iter_merges(
    pretoken_counts: Mapping[bytes, int], max_merges: int, *, progress: bool = False, consume_counts: bool = False
) -> Iterator[tuple[bytes, bytes]]:
    """The merges learned from pre-token counts, one at a time, with an optional progress bar.
    ``consume_counts`` empties the counts once read (see :func:`bpestore.train.merge.learn_merges`).

    The seam of the merge loop, one function from counts to merges. Contract: up to
    ``max_merges`` merges, each the most frequent adjacent pair of tokens within the pre-tokens
    (weighted by their counts), ties to the lexicographically greatest ``(left bytes, right
    bytes)``, stopping early when no pair is left: exactly ``reference_train`` of tests/reference.py,
    whoever computes it (this Python loop, or the compiled engine's).
    """
    with progress_bar(progress, max_merges, "merges", unit="merge") as bar:
        for merge in learn_merges(pretoken_counts, max_merges, consume_counts=consume_counts):
            yield merge
            bar.update(1)
        if bar.n < max_merges:  # no pair left: say so rather than leave the bar unfinished
            bar.total = bar.n
            bar.set_postfix_str("no pairs left")


def vocab_and_merges(special_tokens: Sequence[str], merges: Iterable[tuple[bytes, bytes]]) -> tuple[Vocab, Merges]:
    vocab = base_vocab(special_tokens)
    merges = list(merges)
    next_id = len(vocab)
    for left, right in merges:
        vocab[next_id] = left + right
        next_id += 1
    return vocab, merges


def train_from_counts(
    pretoken_counts: Mapping[bytes, int],
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    *,
    progress: bool = False,
    consume_counts: bool = False,
) -> tuple[Vocab, Merges]:
    """Train on pre-token counts that are already known (for example, stored ones).
    ``consume_counts`` empties the counts once read, to save memory."""
    special_tokens = check_special_tokens(special_tokens)
    check_vocab_size(vocab_size, special_tokens)
    merges = iter_merges(pretoken_counts, max_merges(vocab_size, special_tokens), progress=progress, consume_counts=consume_counts)
    return vocab_and_merges(special_tokens, merges)


def count_corpus(
    input_path: str | os.PathLike,
    special_tokens: Sequence[str] = (),
    *,
    pattern: str = GPT2_PATTERN,
    workers: int | None = None,
    progress: bool = False,
) -> dict[bytes, int]:
    """Pre-token counts of a corpus file (as bytes), with a progress bar over its bytes."""
    path = check_corpus_path(input_path)
    with progress_bar(progress, os.path.getsize(path), "pre-tokenizing", unit="B", unit_scale=True) as bar:
        return count_file_pretokens(path, special_tokens, pattern=pattern, workers=workers, on_progress=bar.update)


def train_bpe(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    *,
    workers: int | None = None,
    progress: bool = False,
) -> tuple[Vocab, Merges]:
    """Train a byte-level BPE tokenizer on a UTF-8 text file.

    Args:
        input_path: the corpus, UTF-8 text.
        vocab_size: the size of the final vocabulary, special tokens and the 256 bytes included.
        special_tokens: strings that cut the corpus and never take part in merges; they get ids
            0..k-1 in the order given.
        workers: processes for pre-tokenization (default: the usable CPUs). The result does not
            depend on it.
        progress: show progress bars on stderr.

    Returns:
        ``(vocab, merges)``: vocab maps ids to token bytes (special tokens, then the 256 single
        bytes, then one token per merge in creation order); merges lists the merged pairs in order.
        Training stops at ``vocab_size`` or when no pair of tokens is left.

    Raises:
        FileNotFoundError: ``input_path`` is missing or not a file.
        CorpusDecodeError: (a ValueError) the file is not UTF-8; the message names the byte offset.
        ValueError: ``vocab_size`` is too small or the special tokens repeat.
    """
    model = train_model(input_path, vocab_size, special_tokens, workers=workers, progress=progress)
    return model.vocab, model.merges


def train_model(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    *,
    workers: int | None = None,
    progress: bool = False,
) -> BPEModel:
    """:func:`train_bpe` (same arguments, same errors), its result as a :class:`BPEModel` (GPT-2's
    pattern, the pair merge rule)."""
    special_tokens = check_special_tokens(special_tokens)
    check_vocab_size(vocab_size, special_tokens)
    counts = count_corpus(input_path, special_tokens, workers=workers, progress=progress)
    vocab, merges = train_from_counts(counts, vocab_size, special_tokens, progress=progress, consume_counts=True)
    return BPEModel(vocab, merges, special_tokens)
