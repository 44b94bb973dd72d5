"""``train_bpe``: byte-level BPE training with the semantics of the Stanford CS336 reference.

The work happens in the Rust engine (``bpestore._engine``, crates/train): counting a corpus's
pre-tokens with threads (:func:`count_corpus`), then the merge loop (:func:`learn_merges`). This
module checks the arguments, drives the progress bars and builds the vocabulary.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, get_args

from ..engine import PretokenCounts
from ..engine import count_file as engine_count_file
from ..engine import learn_merges as engine_learn_merges
from ..errors import EmptyCorpusError
from ..model import MAX_TOKEN_ID, BPEModel, check_pattern
from ..model import check_special_tokens as _check_special_tokens
from ..pretokenize.corpus import check_corpus_path
from ..pretokenize.patterns import GPT2_PATTERN, pattern_named
from ..progress import progress_bar
from ..workers import check_workers
from . import sources

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]
SpecialTokensAt = Literal["start", "end"]
"""Where a trained vocabulary puts its special tokens: ``"start"`` (CS336's: ids 0..k-1, before
the 256 bytes) or ``"end"`` (GPT-2's and tiktoken's: after the last merge's token)."""

# PretokenCounts: pre-token bytes -> count, held by the engine; a read-only Mapping (``len``,
# ``[]``, ``items()``), with ``total`` and ``to_dict()``.
Mapping.register(PretokenCounts)


def check_special_tokens(special_tokens: Iterable[str] | None) -> list[str]:
    """The special tokens as a list; ValueError for duplicates, empty strings, non-strings and
    single-byte tokens (the 256 byte tokens already hold those bytes: the vocab would have the
    same token twice), TypeError for one string instead of a list. Checked before any work."""
    tokens = _check_special_tokens(special_tokens, repeats="refuse")
    for token in tokens:
        if len(token.encode("utf-8")) == 1:
            raise ValueError(
                f"special token {token!r} is a single byte, which already has a token of its own among the 256 byte tokens; "
                "use a longer string (such as '<|endoftext|>')"
            )
    return tokens


class VocabSizeNotReachedWarning(UserWarning):
    """Training ran out of pairs to merge before the vocabulary reached the size asked for."""


# Ids are 32-bit (see bpestore.model.MAX_TOKEN_ID): no vocab of more tokens can be stored or
# encoded with, and asking for one is a mistake to refuse before any work (not to warn about after).
MAX_VOCAB_SIZE = MAX_TOKEN_ID


def check_vocab_size_type(vocab_size: object) -> None:
    """TypeError unless ``vocab_size`` is an int (a bool is not, nor a str or a float: '1000' or
    1e3 is a mistake, not a size); ValueError above :data:`MAX_VOCAB_SIZE`."""
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise TypeError(f"vocab_size must be an int, not {type(vocab_size).__name__} ({vocab_size!r})")
    if vocab_size > MAX_VOCAB_SIZE:
        raise ValueError(f"vocab_size must be at most {MAX_VOCAB_SIZE} (2**31-1: ids are 32-bit), got {vocab_size}")


def check_vocab_sizes(vocab_sizes: object) -> list[int]:
    """``vocab_sizes`` (an int, or a list of them) as a list, each checked for its type (the
    smallest each may be depends on the special tokens and any base: checked later)."""
    if isinstance(vocab_sizes, (str, bytes)) or not isinstance(vocab_sizes, (int, Iterable)):
        raise TypeError(f"vocab_sizes must be an int or a list of ints, not {type(vocab_sizes).__name__} ({vocab_sizes!r})")
    sizes = [vocab_sizes] if isinstance(vocab_sizes, int) else list(vocab_sizes)
    if not sizes:
        raise ValueError("give at least one vocab size")
    for size in sizes:
        check_vocab_size_type(size)
    return sizes


def check_vocab_size(vocab_size: int, special_tokens: Sequence[str]) -> None:
    check_vocab_size_type(vocab_size)
    minimum = 256 + len(special_tokens)
    if vocab_size < minimum:
        raise ValueError(
            f"vocab_size must be at least {minimum} (256 byte tokens + {len(special_tokens)} special "
            f"tokens), got {vocab_size!r}"
        )


def max_merges(vocab_size: int, special_tokens: Sequence[str]) -> int:
    """How many merges fill a vocab of ``vocab_size``: the rest after the special tokens and the 256 bytes."""
    return vocab_size - 256 - len(special_tokens)


def check_special_tokens_at(special_tokens_at: object) -> SpecialTokensAt:
    """``special_tokens_at`` if it is ``"start"`` or ``"end"``; ValueError (TypeError) otherwise."""
    if not isinstance(special_tokens_at, str):
        raise TypeError(f"special_tokens_at must be 'start' or 'end', not {type(special_tokens_at).__name__}")
    if special_tokens_at not in get_args(SpecialTokensAt):
        raise ValueError(f"special_tokens_at must be 'start' or 'end', not {special_tokens_at!r}")
    return special_tokens_at  # type: ignore[return-value]  # (one of the Literal's values: checked above)


def check_min_count(min_count: object) -> int | None:
    """``min_count`` if it is None or a positive int; ValueError (TypeError) otherwise."""
    if min_count is None:
        return None
    if isinstance(min_count, bool) or not isinstance(min_count, int):
        raise TypeError(f"min_count must be a positive int, not {type(min_count).__name__} ({min_count!r})")
    if min_count < 1:
        raise ValueError(f"min_count must be a positive integer, got {min_count!r}")
    return min_count


def training_pattern(pattern: str) -> str:
    """The regex of the pre-tokenizer a training is asked for: a name (``gpt2``, ``cl100k_base``,
    ``o200k_base``: see :data:`~bpestore.pretokenize.patterns.PATTERNS_BY_NAME`) or a regex, which
    must be one the engine accepts as a pre-tokenizer (:func:`~bpestore.model.check_pattern`:
    ValueError for capture groups, catastrophic backtracking or characters left out). Checked
    before any work."""
    regex = pattern_named(pattern)
    check_pattern(regex)
    return regex


def as_pretoken_counts(counts: Mapping[bytes, int]) -> PretokenCounts:
    """The engine's counts: ``counts`` itself if it is already, else a copy of the mapping."""
    return counts if isinstance(counts, PretokenCounts) else PretokenCounts.from_dict(counts)


def learn_merges(
    pretoken_counts: Mapping[bytes, int],
    max_merges: int,
    *,
    progress: bool = False,
    consume_counts: bool = False,
    done_at: list[float] | None = None,
    base: Sequence[tuple[bytes, bytes]] | None = None,
    base_ranks: Mapping[int, bytes] | None = None,
    stop_if: Callable[[], object] | None = None,
    stacklevel: int = 3,
    tie_break: str = "cs336",
    max_words: int | None = None,
) -> Merges:
    """The merges learned from pre-token counts (a mapping of bytes to counts, or the engine's
    :class:`PretokenCounts`), in order, with an optional progress bar. ``consume_counts`` empties
    engine counts once read, to save memory. ``done_at``, if given, receives for each merge the
    ``time.perf_counter()`` at which it was known (to within the 0.1 s between progress reports).
    ``base``: a base tokenizer's merges, which first split the words (continued training); only
    the new merges are returned. ``base_ranks`` (instead of ``base``): a token-rule base's
    vocabulary (id -> bytes, the id being the rank, as tiktoken's): each word is first split as
    tiktoken's rule encodes it (the adjacent pair whose concatenation ranks lowest merges first),
    and the merge loop continues from those tokens. ``stop_if``, if given, is called as the
    merges progress (every 0.1 s at most); an exception it raises stops the loop and is raised
    here (work done meanwhile elsewhere that failed, say). ``stacklevel``: whose line a
    :class:`VocabSizeNotReachedWarning` names, as :func:`warnings.warn` counts from this function
    (3, the default: its caller's caller, such as the line that called :func:`train_bpe`).
    ``tie_break``: ``"cs336"`` (below), or ``"huggingface"``: equal counts ordered as Hugging Face
    ``tokenizers``' ``BpeTrainer`` orders them (its smallest pair of token ids: the bytes numbered
    by their byte-level characters, then each merge's token in the order made); with ``base``
    too (its tokens numbered in its merges' order), not with ``base_ranks``. ``max_words``: no
    new token holds more than this many words (runs of bytes other than the space; SuperBPE's
    limit on its superwords).

    The seam of the merge loop, one function from counts to merges. Contract: up to
    ``max_merges`` merges, each the most frequent adjacent pair of tokens within the pre-tokens
    (weighted by their counts), ties to the lexicographically greatest ``(left bytes, right
    bytes)``, stopping early when no pair is left: exactly ``reference_train`` of tests/reference.py
    (computed by the engine's merge loop, crates/train/src/merge.rs).
    """
    counts = as_pretoken_counts(pretoken_counts)
    checkpoints: list[tuple[int, float]] = []  # (merges done, time)
    with progress_bar(progress, max_merges, "merges", unit="merges") as bar:

        def report(more: int) -> None:
            if stop_if is not None:
                stop_if()
            bar.update(more)
            done = checkpoints[-1][0] + more if checkpoints else more
            checkpoints.append((done, time.perf_counter()))

        options: dict[str, Any] = {}  # (the engine's keyword arguments: base=, base_ranks=)
        if base is not None:
            options["base"] = list(base)
        if base_ranks is not None:
            options["base_ranks"] = list(base_ranks.items())
        if tie_break != "cs336":
            options["tie_break"] = tie_break
        if max_words is not None:
            options["max_words"] = max_words
        merges = engine_learn_merges(counts, max_merges, report, consume=consume_counts, **options)
        if len(merges) < max_merges:  # no pair left: say so rather than leave the bar unfinished
            bar.total = bar.n
            bar.set_postfix_str("no pairs left")
    warn_if_short(len(merges), max_merges, stacklevel=stacklevel)
    if done_at is not None:
        done_at[:] = merge_times(checkpoints, len(merges))
    return merges


def merge_times(checkpoints: Sequence[tuple[int, float]], merges: int) -> list[float]:
    """When each of ``merges`` merges was known, from the progress reports (``(merges done,
    time.perf_counter())``, in order): the time of the first report that covers it."""
    times = []
    ends = iter(checkpoints)
    end = next(ends, (merges, time.perf_counter()))
    for index in range(1, merges + 1):
        while end[0] < index:
            end = next(ends)
        times.append(end[1])
    return times


def warn_if_short(merges: int, max_merges: int, *, stacklevel: int = 2) -> None:
    """VocabSizeNotReachedWarning if a training found fewer merges than asked for (no pair of
    tokens was left)."""
    if merges < max_merges:
        missing = max_merges - merges
        warnings.warn(
            f"training stopped after {merges} of the {max_merges} merges asked for: no pair of tokens is left "
            f"in the corpus, so the vocabulary is {missing} token{'s' if missing != 1 else ''} smaller than asked for",
            VocabSizeNotReachedWarning,
            stacklevel=stacklevel + 1,
        )


def vocab_and_merges(
    special_tokens: Sequence[str], merges: Iterable[tuple[bytes, bytes]], special_tokens_at: SpecialTokensAt = "start"
) -> tuple[Vocab, Merges]:
    """The vocabulary of a training's ``merges``: the 256 single bytes, then one token per merge in
    order; the special tokens before them all (``special_tokens_at="start"``, ids 0..k-1) or after
    them all (``"end"``)."""
    merges = list(merges)
    ordinary = [bytes([b]) for b in range(256)] + [left + right for left, right in merges]
    specials = [token.encode("utf-8") for token in special_tokens]
    tokens = specials + ordinary if special_tokens_at == "start" else ordinary + specials
    return dict(enumerate(tokens)), merges


def train_from_counts(
    pretoken_counts: Mapping[bytes, int],
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    *,
    progress: bool = False,
    consume_counts: bool = False,
    special_tokens_at: SpecialTokensAt = "start",
) -> tuple[Vocab, Merges]:
    """Train on pre-token counts that are already known (for example, stored ones): a mapping of
    pre-token bytes to counts, or the engine's :class:`PretokenCounts`. ``consume_counts`` empties
    engine counts once read, to save memory. ``special_tokens_at``: as for :func:`train_bpe`."""
    special_tokens = check_special_tokens(special_tokens)
    check_vocab_size(vocab_size, special_tokens)
    special_tokens_at = check_special_tokens_at(special_tokens_at)
    merges = learn_merges(pretoken_counts, max_merges(vocab_size, special_tokens), progress=progress, consume_counts=consume_counts)
    return vocab_and_merges(special_tokens, merges, special_tokens_at)


def count_corpus(
    input_path: str | os.PathLike[str],
    special_tokens: Sequence[str] = (),
    *,
    pattern: str = GPT2_PATTERN,
    workers: int | None = None,
    progress: bool = False,
    count_memory: int | None = None,
    spill_dir: str | os.PathLike[str] | None = None,
    min_count: int | None = None,
) -> PretokenCounts:
    """Pre-token counts of a corpus file, counted by the engine with ``workers`` threads (default:
    one per CPU), with a progress bar over its bytes.

    ``count_memory``: count in bounded memory, the counting tables holding about that many bytes
    at most: beyond, sorted partial counts are spilled to files in ``spill_dir`` (default: the
    system's temporary directory; removed at the end) and merged k ways at the end (the chunk
    buffers, a few MB a thread, and the result come on top). ``min_count``: keep only the
    pre-tokens counted at least that often (applied to the totals as they are merged when
    spilling, so the pruned-away ones never take memory at once).

    The seam of counting. Contract: exactly ``reference_pretoken_counts`` of tests/reference.py
    (the file cut at the special tokens, which are not counted, and each part pre-tokenized with
    ``pattern``), whatever ``workers`` and ``count_memory`` (without those counted fewer than
    ``min_count`` times); CorpusDecodeError names the first bad byte of the file; OSError
    (naming ``spill_dir``) if the spilled counts cannot be written."""
    path = check_corpus_path(input_path)
    count_memory = check_count_memory(count_memory)
    min_count = check_min_count(min_count)
    spill_min_count = min_count if count_memory is not None else None  # (else pruned below)
    with progress_bar(progress, os.path.getsize(path), "pre-tokenizing", unit="B", unit_scale=True) as bar:
        counts = engine_count_file(
            path, pattern, list(special_tokens), workers, bar.update, max_memory=count_memory, spill_dir=spill_dir,
            min_count=spill_min_count,
        )
    if count_memory is None and min_count is not None and min_count > 1:
        counts = counts.pruned(min_count)
    return counts


def check_count_memory(count_memory: object) -> int | None:
    """``count_memory`` if it is None or a positive int (bytes); ValueError (TypeError) otherwise."""
    if count_memory is None:
        return None
    if isinstance(count_memory, bool) or not isinstance(count_memory, int):
        raise TypeError(f"count_memory must be a number of bytes (an int), not {type(count_memory).__name__} ({count_memory!r})")
    if count_memory < 1:
        raise ValueError(f"count_memory must be at least one byte, got {count_memory!r}")
    return count_memory


def check_not_empty(counts: Mapping[bytes, int], corpus: str) -> None:
    """EmptyCorpusError unless ``counts`` (of ``corpus``, named in the message) hold a pre-token:
    an empty corpus, or one of special tokens only, has nothing to train on (training would give
    the 256 byte tokens alone)."""
    if len(counts) == 0:
        raise EmptyCorpusError(f"{corpus}: the corpus is empty or holds only special tokens; there is nothing to train on")


def pruned_to(counts: PretokenCounts, min_count: int | None, corpus: str) -> PretokenCounts:
    """``counts`` (of ``corpus``) without the pre-tokens counted fewer than ``min_count`` times;
    EmptyCorpusError if none is left."""
    if min_count is None or min_count == 1:
        return counts
    kept = counts.pruned(min_count)
    if len(kept) == 0:
        raise EmptyCorpusError(f"{corpus}: no pre-token is counted {min_count} times or more (min_count); there is nothing to train on")
    return kept


def describe_corpus(corpus: object) -> str:
    """How a message names a corpus given to :func:`train_bpe`."""
    if isinstance(corpus, (str, os.PathLike)):
        return str(corpus)
    if isinstance(corpus, sources.CorpusFiles):
        return corpus.describe()
    if isinstance(corpus, (list, tuple)) and all(isinstance(item, (str, os.PathLike)) for item in corpus):
        return ", ".join(map(str, corpus))
    return "the corpus given"


def check_corpus_type(corpus: object) -> None:
    """TypeError unless ``corpus`` is something :func:`train_bpe` takes: a path, a list of paths,
    or an iterable of strings."""
    if not isinstance(corpus, (str, os.PathLike, sources.CorpusFiles, Iterable)) or isinstance(corpus, (bytes, bytearray)):
        raise TypeError(
            f"the corpus must be a path (str or os.PathLike), a list of paths or an iterable of str, not {type(corpus).__name__}"
        )


def count_any(
    corpus: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | Iterable[str] | sources.CorpusFiles,
    special_tokens: Sequence[str] = (),
    *,
    pattern: str = GPT2_PATTERN,
    workers: int | None = None,
    progress: bool = False,
    count_memory: int | None = None,
    spill_dir: str | os.PathLike[str] | None = None,
) -> PretokenCounts:
    """The counts of any corpus ``train_bpe`` accepts: one plain file by :func:`count_corpus`,
    several or compressed files by :func:`bpestore.train.sources.count_files`, an iterable of
    strings by :func:`bpestore.train.sources.count_strings`. ``count_memory`` and ``spill_dir``
    (see :func:`count_corpus`) bound the counting of plain files, each file's in turn (their sum
    is held as it grows); ValueError for them with strings or compressed files."""
    check_corpus_type(corpus)
    count_memory = check_count_memory(count_memory)
    if sources.is_texts(corpus):
        if count_memory is not None:
            raise ValueError("count_memory bounds the counting of files: an iterable of strings is counted in memory")
        return sources.count_strings(corpus, special_tokens, pattern=pattern)  # type: ignore[arg-type]
    files = corpus if isinstance(corpus, sources.CorpusFiles) else sources.CorpusFiles(corpus)
    if count_memory is not None and any(map(sources.is_compressed, files.paths)):
        raise ValueError("count_memory bounds the counting of plain files: compressed files are counted in memory")
    if len(files.paths) == 1 and not sources.is_compressed(files.paths[0]):
        return count_corpus(
            files.paths[0], special_tokens, pattern=pattern, workers=workers, progress=progress, count_memory=count_memory,
            spill_dir=spill_dir,
        )
    return sources.count_files(
        files, special_tokens, pattern=pattern, workers=workers, progress=progress, count_memory=count_memory, spill_dir=spill_dir
    )


def train_bpe(
    input_path: str | os.PathLike[str],
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    *,
    pattern: str = "gpt2",
    special_tokens_at: SpecialTokensAt = "start",
    min_count: int | None = None,
    workers: int | None = None,
    progress: bool = False,
    count_memory: int | None = None,
    spill_dir: str | os.PathLike[str] | None = None,
) -> tuple[Vocab, Merges]:
    """Train a byte-level BPE tokenizer on a UTF-8 text file.

    With the defaults this is exactly CS336's ``train_bpe``; ``pattern``, ``special_tokens_at``
    and ``min_count`` train the tokenizers people train after it (GPT-4's pre-tokenizer, say, with
    ``<|endoftext|>`` after the merges as tiktoken has it).

    Args:
        input_path: the corpus, UTF-8 text: a file, or several files, directories and globs
            (a list), ``.gz``/``.xz``/``.zst`` files decompressed as read, or any other iterable
            of strings (each string a document); no pre-token spans two files or two strings.
            See :mod:`bpestore.pretokenize.inputs`.
        vocab_size: the size of the final vocabulary, special tokens and the 256 bytes included.
        special_tokens: strings that cut the corpus and never take part in merges; they get ids
            0..k-1 in the order given (or the last k ids: ``special_tokens_at``).
        pattern: the pre-tokenizer: ``"gpt2"`` (CS336's, the default), ``"cl100k_base"`` (GPT-4's),
            ``"o200k_base"`` (GPT-4o's), which the engine runs on hand-written scanners, or any
            regex (in the syntax of Python's ``regex`` module, without capture groups; run on the
            engine's general regex path).
        special_tokens_at: ``"start"`` (CS336's: ids 0..k-1, before the 256 bytes) or ``"end"``
            (GPT-2's and tiktoken's: after the last merge's token, so the ordinary tokens' ids
            start at 0 and do not depend on the special tokens).
        min_count: train only on the pre-tokens counted at least this many times (the rare ones
            are most of a big corpus's pre-tokens and hardly change the merges: this bounds the
            merge loop's memory). None (the default) keeps them all.
        workers: threads for pre-tokenization (default: one per CPU). The result does not depend
            on it.
        progress: show progress bars on stderr.
        count_memory: count the pre-tokens in bounded memory: the counting tables hold about
            this many bytes at most, sorted partial counts beyond that are spilled to files in
            ``spill_dir`` (default: the system's temporary directory; removed at the end) and
            merged at the end, ``min_count`` applied as they are merged (see
            :func:`count_corpus`). Plain files only. The result does not depend on it.
        spill_dir: where ``count_memory`` spills.

    Returns:
        ``(vocab, merges)``: vocab maps ids to token bytes (special tokens, then the 256 single
        bytes, then one token per merge in creation order; or the special tokens last);
        merges lists the merged pairs in order. Training stops at ``vocab_size`` or when no pair
        of tokens is left.

    Raises:
        FileNotFoundError: ``input_path`` is missing or not a file.
        CorpusDecodeError: (a ValueError) the file is not UTF-8; the message names the byte offset.
        EmptyCorpusError: (a ValueError) the file is empty or holds only special tokens.
        ValueError: ``vocab_size`` is too small or above 2**31-1, the special tokens repeat, are
            empty or are single bytes, ``pattern`` is a misspelt name or a regex the engine does
            not take as a pre-tokenizer, ``special_tokens_at`` is neither ``"start"`` nor ``"end"``,
            ``min_count`` is below 1 (all checked before any work).
        TypeError: ``vocab_size`` is not an int, ``special_tokens`` is not a list of strings (one
            string, or a list holding something else), ``input_path`` is none of the above.
        OSError: the spilled counts (``count_memory``) cannot be written in ``spill_dir``.

    Warns:
        VocabSizeNotReachedWarning: no pair of tokens was left before ``vocab_size`` was reached
            (the vocab returned is smaller).
    """
    model = train_model(
        input_path, vocab_size, special_tokens, pattern=pattern, special_tokens_at=special_tokens_at, min_count=min_count,
        workers=workers, progress=progress, count_memory=count_memory, spill_dir=spill_dir,
    )
    return model.vocab, model.merges


def train_model(
    input_path: str | os.PathLike[str],
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    *,
    pattern: str = "gpt2",
    special_tokens_at: SpecialTokensAt = "start",
    min_count: int | None = None,
    workers: int | None = None,
    progress: bool = False,
    count_memory: int | None = None,
    spill_dir: str | os.PathLike[str] | None = None,
) -> BPEModel:
    """:func:`train_bpe` (same arguments, same errors), its result as a :class:`BPEModel` (the
    pattern trained with, the pair merge rule)."""
    special_tokens = check_special_tokens(special_tokens)
    check_vocab_size(vocab_size, special_tokens)
    check_corpus_type(input_path)
    check_workers(workers)
    regex = training_pattern(pattern)
    special_tokens_at = check_special_tokens_at(special_tokens_at)
    min_count = check_min_count(min_count)
    count_memory = check_count_memory(count_memory)
    corpus = describe_corpus(input_path)
    if count_memory is not None and isinstance(input_path, (str, os.PathLike)) and not sources.is_compressed(input_path):
        # One plain file: pruned as the spilled counts are merged (the rare pre-tokens, most of
        # a big corpus's, never held all at once).
        counts = count_corpus(
            input_path, special_tokens, pattern=regex, workers=workers, progress=progress, count_memory=count_memory,
            spill_dir=spill_dir, min_count=min_count,
        )
        if len(counts) == 0 and min_count is not None and min_count > 1:
            raise EmptyCorpusError(f"{corpus}: the corpus is empty, or no pre-token is counted {min_count} times or more (min_count); there is nothing to train on")
    else:
        counts = count_any(
            input_path, special_tokens, pattern=regex, workers=workers, progress=progress, count_memory=count_memory, spill_dir=spill_dir
        )
    check_not_empty(counts, corpus)
    counts = pruned_to(counts, min_count, corpus)
    vocab, merges = train_from_counts(
        counts, vocab_size, special_tokens, progress=progress, consume_counts=True, special_tokens_at=special_tokens_at
    )
    return BPEModel(vocab, merges, special_tokens, regex)
