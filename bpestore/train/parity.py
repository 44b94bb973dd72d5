"""Parity-aware training (Foroutan et al., 2025, "Parity-Aware Byte-Pair Encoding: Improving
Cross-lingual Fairness in Tokenization"): one corpus per language, and each merge the most
frequent pair of the language whose text is worst compressed, so that no language pays far more
tokens than the others for the same content.

How a merge's language is chosen (:class:`~bpestore.train.recipe.Parity`) follows Hugging Face
``tokenizers``' ``ParityBpeTrainer``, which follows the paper's code: the language whose part of a
parallel development set takes the most tokens (or, with target ratios, the least compressed for
its ratio; with neither, the one whose training text takes the most tokens); the ``window``
variant passes over a language that took more than ``alpha`` / languages of the last
``window_size`` merges; the first ``global_merges`` are plain BPE's on all languages together.
The merge loop is the engine's (``ParityLoop``, crates/train/src/parity.rs): the plain training's
loop, once per language.

Each language's corpus is counted as ordinary training counts one (the store's ``_counted``),
stored as a corpus of its own and reused by any later training of the same content; the
development texts, small, are counted in memory. The tokenizers are stored as every training's
are, each with the recipe that reproduces it; they belong to no one corpus (their recipe names
each language's).
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import Any

from ..engine import PretokenCounts
from ..engine import learn_parity_merges as engine_learn_parity_merges
from ..progress import progress_bar
from . import trainer as training
from .memory import MemoryEstimate, estimate_merge_memory
from .recipe import (
    PARITY_VARIANTS, TIE_BREAKS, Input, Language, Parity, Recipe, StoredCorpusInput, file_inputs, input_files,
    pattern_in_recipe,
)
from .sources import CorpusFiles, count_files
from .through_store import NewCorpus, TrainingInterrupted, TrainingRun, TrainingStore, _store_tokenizers

__all__ = ["ParityMerges", "check_parity", "languages_of_files", "learn_parity_merges", "train"]


def check_parity(parity: Parity) -> None:
    """ValueError (TypeError) for settings no training can have: no language, a name twice or
    one with spaces or ``=``, a language without inputs, development texts or ratios for some
    languages only (or both), a ratio or ``alpha`` that is not a finite number above 0, a
    ``window_size`` below 1, ``global_merges`` below 0, an unknown variant."""
    if not isinstance(parity, Parity):
        raise TypeError(f"parity must be a Parity, not {type(parity).__name__}")
    if not parity.languages:
        raise ValueError("a parity-aware training needs its languages, one corpus each")
    names = [language.name for language in parity.languages]
    for name in names:
        if not isinstance(name, str) or not name or any(char.isspace() or char == "=" for char in name):
            raise ValueError(f"a language's name is a word without spaces or '=', not {name!r}")
        if names.count(name) > 1:
            raise ValueError(f"the language {name!r} is named twice")
    for language in parity.languages:
        if not language.inputs:
            raise ValueError(f"the language {language.name!r} has no inputs")
        if language.ratio is not None and not _positive(language.ratio):
            raise ValueError(f"the ratio of {language.name!r} must be a finite number above 0, not {language.ratio!r}")
    with_dev = sum(bool(language.dev) for language in parity.languages)
    with_ratio = sum(language.ratio is not None for language in parity.languages)
    if with_dev not in (0, len(names)):
        raise ValueError("give every language a development text, or none")
    if with_ratio not in (0, len(names)):
        raise ValueError("give every language a ratio, or none")
    if with_dev and with_ratio:
        raise ValueError("give the languages development texts or ratios, not both")
    if parity.variant not in PARITY_VARIANTS:
        raise ValueError(f"variant is one of {', '.join(map(repr, PARITY_VARIANTS))}, not {parity.variant!r}")
    if isinstance(parity.window_size, bool) or not isinstance(parity.window_size, int) or parity.window_size < 1:
        raise ValueError(f"window_size must be a positive integer, not {parity.window_size!r}")
    if not _positive(parity.alpha):
        raise ValueError(f"alpha must be a finite number above 0, not {parity.alpha!r}")
    if isinstance(parity.global_merges, bool) or not isinstance(parity.global_merges, int) or parity.global_merges < 0:
        raise ValueError(f"global_merges must be an integer of at least 0, not {parity.global_merges!r}")


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def languages_of_files(
    train: Mapping[str, str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | StoredCorpusInput],
    dev: Mapping[str, str | os.PathLike[str] | Sequence[str | os.PathLike[str]]] | None = None,
    ratio: Mapping[str, float] | None = None,
) -> tuple[Language, ...]:
    """The languages of a parity-aware training from their files: ``train`` maps each language's
    name to its inputs (a file, directory or glob, or a list of them, as a training's corpus; or
    a stored corpus); ``dev``, to its development text (the same keys); ``ratio``, to its target
    ratio. The files are hashed now (a recipe names each by path and content)."""
    for given, what in ((dev, "development texts"), (ratio, "ratios")):
        if given is not None and set(given) != set(train):
            missing = sorted(set(train) ^ set(given))
            raise ValueError(f"the {what} are not for the languages trained on: {', '.join(missing)}")
    languages = []
    for name, sources in train.items():
        inputs: tuple[Input, ...] = (
            (sources,) if isinstance(sources, StoredCorpusInput) else file_inputs([(path, digest) for path, digest, _ in CorpusFiles(sources).hashed()])
        )
        dev_inputs = file_inputs([(path, digest) for path, digest, _ in CorpusFiles(dev[name]).hashed()]) if dev is not None else ()
        languages.append(Language(name, inputs, dev_inputs, None if ratio is None else ratio[name]))
    return tuple(languages)


@dataclass(frozen=True)
class ParityMerges:
    """A parity-aware merge run: its merges and, for each, the language it was chosen for."""

    merges: list[tuple[bytes, bytes]]
    languages: list[int | None]
    """The index of each merge's language (None: one of the global merges)."""


def learn_parity_merges(
    train: Sequence[PretokenCounts],
    max_merges: int,
    parity: Parity,
    *,
    dev: Sequence[PretokenCounts] | None = None,
    tie_break: str = "cs336",
    progress: bool = False,
    done_at: list[float] | None = None,
) -> ParityMerges:
    """The seam of the parity-aware merge loop: up to ``max_merges`` merges from each language's
    pre-token counts (``train``, in ``parity.languages``' order), the languages balanced on
    ``dev`` (their development texts' counts; else on ``parity``'s ratios, else on the training
    text). Contract: exactly ``reference_parity_merges`` of tests/reference.py. ``done_at``, if
    given, receives for each merge the ``time.perf_counter()`` at which it was known (to within
    0.1 s). Warns (:class:`~bpestore.train.trainer.VocabSizeNotReachedWarning`) when every
    language runs out of pairs first."""
    ratios = [language.ratio for language in parity.languages]
    options: dict[str, Any] = {
        "variant": parity.variant, "window_size": parity.window_size, "alpha": float(parity.alpha),
        "global_merges": parity.global_merges, "tie_break": tie_break,
    }
    if dev is not None:
        options["dev"] = list(dev)
    elif all(ratio is not None for ratio in ratios):
        options["ratio"] = [float(ratio) for ratio in ratios]  # type: ignore[arg-type]
    checkpoints: list[tuple[int, float]] = []
    with progress_bar(progress, max_merges, "merges", unit="merges") as bar:

        def report(more: int) -> None:
            bar.update(more)
            checkpoints.append(((checkpoints[-1][0] if checkpoints else 0) + more, time.perf_counter()))

        merges, languages = engine_learn_parity_merges(list(train), max_merges, report, **options)
        if len(merges) < max_merges:
            bar.total = bar.n
            bar.set_postfix_str("no pairs left")
    training.warn_if_short(len(merges), max_merges, stacklevel=3)
    if done_at is not None:
        done_at[:] = training.merge_times(checkpoints, len(merges))
    return ParityMerges(merges, languages)


def _recorded_inputs(corpus: Any, recorded_sha256: str | None) -> tuple[Input, ...]:
    """A language's inputs as trained: its files by absolute path and hash, or its stored corpus."""
    if isinstance(corpus, CorpusFiles):
        return file_inputs([(path, digest) for path, digest, _ in corpus.hashed()])
    assert recorded_sha256 is not None
    return (StoredCorpusInput(recorded_sha256),)


def train(
    store: TrainingStore, name: str, recipe: Recipe, corpora: Sequence[Any], sizes: Sequence[int] | None, run: TrainingRun,
) -> list[str]:
    """Train the parity-aware ``recipe`` (its ``parity`` set) and store one version of ``name`` per
    vocab size (``sizes``, or the recipe's). ``corpora``: what each language's inputs resolve to,
    in order (a :class:`~bpestore.train.sources.CorpusFiles`, or a corpus the store holds);
    everything is checked before any is counted. Returns the refs."""
    store.check_writable()
    parity = recipe.parity
    if parity is None:
        raise ValueError("the recipe is not a parity-aware one (no parity)")
    check_parity(parity)
    if len(corpora) != len(parity.languages):
        raise ValueError(f"{len(corpora)} corpora for {len(parity.languages)} languages")
    if len(recipe.stages) != 1:
        raise ValueError("a parity-aware training has one stage")
    if recipe.base is not None:
        raise ValueError("a parity-aware training starts from the bytes: not with a base")
    if recipe.tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break is one of {', '.join(map(repr, TIE_BREAKS))}, not {recipe.tie_break!r}")
    if recipe.stages[0].max_words is not None:
        raise ValueError("a parity-aware training limits no token's words (max_words)")
    special_tokens = training.check_special_tokens(list(recipe.special_tokens))
    sizes = training.check_vocab_sizes(list(sizes) if sizes is not None else [recipe.vocab_size])
    for size in sizes:
        training.check_vocab_size(size, special_tokens)
    training.check_special_tokens_at(recipe.special_tokens_at)
    min_count = training.check_min_count(recipe.min_count)
    regex = training.training_pattern(recipe.stages[0].pattern or "gpt2")
    dev_files = [input_files(replace(recipe, inputs=language.dev)) if language.dev else None for language in parity.languages]
    max_merges = training.max_merges(max(sizes), special_tokens)

    started = time.perf_counter()
    # New counts are stored on a thread of their own, one language after another, while the
    # next languages are counted and the loop merges (as a plain training stores its counts);
    # in memory, they are written first.
    saver = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bpestore-save-counts") if store._writes_in_background() else None
    try:
        return _train_counted(store, name, recipe, parity, corpora, sizes, run, special_tokens, min_count, regex, dev_files, max_merges, started, saver)
    finally:
        if saver is not None:
            saver.shutdown(wait=True)


def _train_counted(
    store: TrainingStore, name: str, recipe: Recipe, parity: Parity, corpora: Sequence[Any], sizes: list[int], run: TrainingRun,
    special_tokens: list[str], min_count: int | None, regex: str, dev_files: list[CorpusFiles | None], max_merges: int, started: float,
    saver: ThreadPoolExecutor | None,
) -> list[str]:
    """:func:`train`'s work once everything is checked: count (or read back) each language, merge,
    store; the new counts saved on ``saver``'s thread, if any."""
    counts, saved, stored_sha256, reused = [], [], [], []
    for language, corpus in zip(parity.languages, corpora):
        found = store._counted(
            corpus, special_tokens, workers=run.workers, progress=run.progress, pattern=regex, counting=run.counting,
            count_memory=run.count_memory, spill_dir=run.spill_dir,
        )
        saving: Future[int]
        if isinstance(found, NewCorpus) and saver is not None:
            saving = saver.submit(store._store_new_corpus, found, False)
        else:
            saving = Future()
            saving.set_result(store._store_new_corpus(found, run.progress) if isinstance(found, NewCorpus) else found.corpus_id)
        saved.append(saving)
        reused.append(not isinstance(found, NewCorpus))
        stored_sha256.append(getattr(corpus, "sha256", None))
        counts.append(training.pruned_to(found.counts, min_count, f"the corpus of {language.name!r}"))
    dev_counts = None
    if all(files is not None for files in dev_files):
        dev_counts = []
        for language, files in zip(parity.languages, dev_files):
            assert files is not None
            table = count_files(files, special_tokens, pattern=regex, workers=run.workers)
            training.check_not_empty(table, f"the development text of {language.name!r} ({files.describe()})")
            dev_counts.append(table)
    pretokenize_seconds = time.perf_counter() - started

    warm_source = None
    if run.warm_entries:
        together = PretokenCounts()
        for table in counts:
            together.merge(table)
        warm_source = store._warm_source_of_counts(together, run.warm_entries)
    # One merge loop per language (and per development text), each with its words and tokens.
    loops = [estimate_merge_memory(table, max_merges) for table in [*counts, *(dev_counts or [])]]
    estimate = MemoryEstimate(
        sum(loop.distinct_pretokens for loop in loops), sum(loop.pretoken_bytes for loop in loops), sum(loop.merges for loop in loops),
    )
    if run.progress:
        print(f"memory estimate: {estimate.describe()}", file=sys.stderr, flush=True)
    estimate.check(run.max_memory)
    if run.on_counted is not None:
        run.on_counted()

    found_at: list[float] = []
    merging_since = time.perf_counter()
    try:
        learned = learn_parity_merges(counts, max_merges, parity, dev=dev_counts, tie_break=recipe.tie_break, progress=run.progress, done_at=found_at)
        if run.progress and not all(saving.done() for saving in saved):
            print("saving the languages' pre-token counts", file=sys.stderr, flush=True)
        corpus_ids = [saving.result() for saving in saved]
    except KeyboardInterrupt:
        wait(saved)  # (each language's counts are stored in a transaction of its own: let them finish)
        kept = [saving.result() for saving in saved if saving.done() and saving.exception() is None]
        if not kept:
            raise
        raise TrainingInterrupted(kept[0]) from None
    done_at = [pretokenize_seconds + moment - merging_since for moment in found_at]

    languages = tuple(
        replace(
            language, inputs=_recorded_inputs(corpus, sha),
            dev=file_inputs([(path, digest) for path, digest, _ in files.hashed()]) if files is not None else (),
        )
        for language, corpus, sha, files in zip(parity.languages, corpora, stored_sha256, dev_files)
    )
    stage = replace(recipe.stages[0], pattern=pattern_in_recipe(regex))
    recorded = replace(recipe, inputs=(), stages=(stage,), parity=replace(parity, languages=languages))

    def merges_per_language(merges: int) -> dict[str, Any]:
        served = learned.languages[:merges]
        return {"parity_merges": {language.name: served.count(index) for index, language in enumerate(parity.languages)}}

    how = {
        "reused": all(reused), "pretokenize_seconds": pretokenize_seconds, "done_at": done_at, "donor": None,
        "params_of": merges_per_language,
    }
    try:
        return _store_tokenizers(store, name, recorded, special_tokens, sizes, learned.merges, None, regex, warm_source, run, None, how)
    except KeyboardInterrupt:
        raise TrainingInterrupted(corpus_ids[0]) from None

