"""Training through the store: a :class:`~bpestore.train.recipe.Recipe`'s corpus counted (or its
stored counts read back), merged, and each tokenizer stored with the recipe that reproduces it.

This is :meth:`bpestore.workflow.Store.train`'s work; the store is reached through
:class:`TrainingStore`, what this module needs of it (the layers keep the training below the
store's users and beside the store: this module imports neither the store nor the encoder, the
façade hands itself in). One path for every training: counts, reuse of stored counts and stored
merges, the merge loop, the tokenizers written in one transaction.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..engine import PretokenCounts
from ..model import BPEModel
from ..progress import progress_bar
from ..workers import check_workers
from . import continued
from . import trainer as training
from .backends import CountingBackend
from .counts import Counts
from .memory import estimate_merge_memory
from .recipe import TIE_BREAKS, Recipe, StoredCorpusInput, file_inputs, pattern_in_recipe
from .sources import CorpusFiles


@dataclass
class CorpusCounts:
    """A corpus's pre-token counts as the store holds them (see :meth:`bpestore.workflow.Store.count`)."""

    corpus_id: int
    counts: PretokenCounts
    """The engine's counts: read back, counted now, or the table of the counts given."""
    reused: bool
    """Whether they were read back from the store rather than counted now."""
    seconds: float = 0.0
    """How long getting them took (hashing and counting the files, or reading the stored counts
    back), not writing them into the store nor waiting for its lock."""


@dataclass
class NewCorpus:
    """Counts made now and not yet stored, with what the store needs to keep them as a corpus
    (see :meth:`TrainingStore._store_new_corpus`)."""

    counts: PretokenCounts
    source: str
    size_bytes: int
    sha256: str
    pattern: str
    specials_json: str
    origin: str
    files: list[Any]
    """The store's rows of the files counted (:class:`bpestore.store.database.CorpusFile`)."""
    seconds: float
    """How long counting took (see :attr:`CorpusCounts.seconds`)."""
    owned: bool
    """Whether the counts are bpestore's own (training may empty them once read), not the caller's."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C after counting (during the merge loop, or while the new tokenizers were being
    written, a transaction that is rolled back): no tokenizer was stored, but the corpus's
    pre-token counts were, complete, in a transaction of their own; training again on the same
    corpus reuses them."""

    def __init__(self, corpus_id: int) -> None:
        super().__init__(
            f"no tokenizer was stored, but the pre-token counts of the corpus are kept in the store "
            f"(corpus {corpus_id}); training again on it reuses them"
        )
        self.corpus_id = corpus_id


@dataclass(frozen=True)
class TrainingRun:
    """How a training runs, none of which changes its merges (so no part of its recipe)."""

    workers: int | None = None
    progress: bool = False
    max_memory: int | None = None
    counting: CountingBackend | None = None
    on_counted: Callable[[], object] | None = None
    count_memory: int | None = None
    spill_dir: str | os.PathLike[str] | None = None
    warm_entries: int = 0


class TrainingStore(Protocol):
    """What training needs of the store (:class:`bpestore.workflow.Store` is one)."""

    def check_writable(self) -> None: ...
    def load_model(self, ref: str) -> BPEModel: ...
    def corpora(self, corpus_id: int | None = None) -> list[Any]: ...
    def _ref_of(self, ref: str) -> str: ...
    def _pattern_of(self, corpus: object, pattern: str | None, base: BPEModel | None) -> str: ...
    def _described(self, corpus: object) -> str: ...
    def _counted(
        self, corpus: Any, special_tokens: Sequence[str], *, workers: int | None, progress: bool, pattern: str,
        counting: CountingBackend | None, count_memory: int | None = None, spill_dir: str | os.PathLike[str] | None = None,
    ) -> CorpusCounts | NewCorpus: ...
    def _store_new_corpus(self, new: NewCorpus, progress: bool, on_rows: Callable[[int], object] | None = None) -> int: ...
    def _writes_in_background(self) -> bool: ...
    def _same_training(
        self, corpus_id: int | None, special_tokens: Sequence[str], max_merges: int, min_count: int | None, tie_break: str = "cs336",
    ) -> tuple[str, list[tuple[bytes, bytes]]] | None: ...
    def _row_writes(self, rows: int) -> int: ...
    def _transaction(self, write: bool = False) -> AbstractContextManager[Any]: ...
    def _insert_tokenizer(
        self, connection: Any, name: str, tokenizer: BPEModel, *, corpus_id: int | None, source: str,
        training_params: dict[str, Any] | None, training_seconds: float | None, warm: Any = None,
    ) -> str: ...
    def _warm_source_of_counts(self, counts: PretokenCounts, entries: int) -> Any: ...
    def _warm_table(self, model: BPEModel, source: Any, entries: int) -> Any: ...


def recorded_recipe(store: TrainingStore, recipe: Recipe, corpus: object, corpus_id: int, regex: str, base_ref: str | None) -> Recipe:
    """The recipe a tokenizer is stored with: ``recipe`` with its inputs as trained (the files
    counted here, by absolute path and content hash; any other corpus, counts given or counted
    elsewhere or stored already, by the stored corpus's identity), its pattern named as it was
    resolved, and its base's full ref."""
    if isinstance(corpus, CorpusFiles):
        inputs: tuple[Any, ...] = file_inputs([(path, digest) for path, digest, _ in corpus.hashed()])
    else:
        inputs = (StoredCorpusInput(store.corpora(corpus_id)[0].sha256),)
    stages = (*recipe.stages[:-1], replace(recipe.stages[-1], pattern=pattern_in_recipe(regex)))
    return replace(recipe, inputs=inputs, stages=stages, base=base_ref)


def train(
    store: TrainingStore, corpus: Any, name: str, recipe: Recipe, sizes: Sequence[int] | None, run: TrainingRun,
) -> list[str]:
    """Train ``recipe`` on ``corpus`` (what its inputs resolve to: a :class:`CorpusFiles`, a
    stored corpus, counts given, or what a counting backend takes) and store one version of
    ``name`` per vocab size (``sizes``, or the recipe's alone; the recipe's last stage names the
    largest). Returns the refs. See :meth:`bpestore.workflow.Store.train`."""
    store.check_writable()  # before the work, not after it
    if len(recipe.stages) != 1:  # (trainings in stages: bpestore.train.stages, stage by stage)
        raise ValueError(f"train() trains a recipe of one stage, not {len(recipe.stages)}")
    return store_learned(store, name, recipe, learn(store, count_stage(store, corpus, recipe, sizes, run), recipe, run), run)


@dataclass
class Learned:
    """One stage learned: its merges, and what storing tokenizers of them needs."""

    merges: list[tuple[bytes, bytes]]
    """The merges learned (a base's, or an earlier stage's, not among them)."""
    corpus: Any
    """The corpus as resolved (the files counted, a stored corpus, counts given)."""
    corpus_id: int
    """The stored corpus whose counts the merges were learned from."""
    special_tokens: list[str]
    sizes: list[int]
    regex: str
    base_ref: str | None
    base_model: BPEModel | None
    warm_source: Any
    how: dict[str, Any]
    """reused, pretokenize_seconds, done_at (each merge's time), donor (see _store_tokenizers)."""


@dataclass
class StageCounts:
    """A stage's counts, got: read back, or counted now and being stored (on a thread of its
    own, where the store allows: ``saving``): what :func:`count_stage` gives and :func:`learn`
    merges."""

    found: CorpusCounts | NewCorpus
    corpus: Any
    """The corpus as resolved (the files counted, a stored corpus, counts given)."""
    special_tokens: list[str]
    sizes: list[int]
    regex: str
    base_ref: str | None
    base_model: BPEModel | None
    corpus_id: int | None
    """The stored corpus's id, once known (None while the counts are being stored)."""
    saver: ThreadPoolExecutor | None = None
    saving: Future[int] | None = None
    saved_rows: list[int] = field(default_factory=lambda: [0])
    """Rows the saving thread has written (for a bar, if the merges end first)."""

    def close(self) -> None:
        """Waits for the counts' save, if one is under way (its own transaction: all or nothing)."""
        if self.saver is not None:
            self.saver.shutdown(wait=True)


def count_stage(
    store: TrainingStore, corpus: Any, recipe: Recipe, sizes: Sequence[int] | None, run: TrainingRun,
    earlier: BPEModel | None = None,
) -> StageCounts:
    """Count (or read back the stored counts of) ``corpus`` with the pattern of ``recipe``'s one
    stage, and start storing new counts: what :func:`learn` merges. A training in stages counts
    its second stage before its first merges, so that the second's counts (nearly the whole text,
    in long pieces: seconds to store) are stored meanwhile. ``earlier``: as for :func:`learn`;
    only its pattern, special and added tokens are read here."""
    if len(recipe.stages) != 1:
        raise ValueError(f"a stage is learned alone, not {len(recipe.stages)} at once")
    special_tokens = training.check_special_tokens(list(recipe.special_tokens))
    sizes = training.check_vocab_sizes(list(sizes) if sizes is not None else [recipe.vocab_size])
    workers, progress = run.workers, run.progress
    check_workers(workers)
    training.check_special_tokens_at(recipe.special_tokens_at)
    training.check_min_count(recipe.min_count)
    if recipe.tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break is one of {', '.join(map(repr, TIE_BREAKS))}, not {recipe.tie_break!r}")
    if recipe.tie_break != "cs336" and recipe.base is not None:
        raise ValueError(f"the {recipe.tie_break} tie-break trains from scratch: not with a base")
    base_ref, base_model = None, earlier
    if recipe.base is not None:
        base_ref = store._ref_of(recipe.base)
        base_model = store.load_model(base_ref)
        special_tokens = continued.check_base(base_ref, base_model, special_tokens, sizes)
    elif earlier is None:
        for size in sizes:
            training.check_vocab_size(size, special_tokens)
    regex = store._pattern_of(corpus, recipe.stages[-1].pattern, base_model)
    if run.counting is None and isinstance(corpus, (str, os.PathLike, list, tuple)):
        # Files counted here: hashed once, and named by path and hash in the recipe stored.
        training.check_corpus_type(corpus)
        training.check_count_memory(run.count_memory)
        corpus = CorpusFiles(corpus)
    found = store._counted(
        corpus, continued.cut_tokens(special_tokens, base_model), workers=workers, progress=progress, pattern=regex,
        counting=run.counting, count_memory=run.count_memory, spill_dir=run.spill_dir,
    )
    got = StageCounts(
        found, corpus, special_tokens, sizes, regex, base_ref, base_model, found.corpus_id if isinstance(found, CorpusCounts) else None,
    )
    # New counts are stored on a thread of their own while this one merges (the merge loop
    # runs in the engine, without the GIL): a big corpus's rows take seconds to write, and
    # the merge loop needs the counts only to read them. In memory, they are written first.
    if isinstance(found, NewCorpus):
        if store._writes_in_background():
            got.saver = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bpestore-save-counts")
            rows = got.saved_rows
            got.saving = got.saver.submit(store._store_new_corpus, found, False, lambda more: rows.__setitem__(0, rows[0] + more))
        else:
            got.corpus_id = store._store_new_corpus(found, progress)
    return got


def learn(
    store: TrainingStore, got: StageCounts, recipe: Recipe, run: TrainingRun, earlier: BPEModel | None = None, *, stored: bool = True,
) -> Learned:
    """The merges of the counts ``got`` (:func:`count_stage`), their save (if any) waited for: the
    path of every training and of every stage of one. ``earlier``: the model of the stages before
    this one (the base it continues, in memory; the counts were cut by its pattern, which is this
    stage's, or by a stand-in's: see :func:`bpestore.train.stages.train_stages`). ``stored``:
    whether tokenizers of these merges will be stored (not those of a first stage): else no warm
    table is prepared."""
    found, corpus, special_tokens, sizes = got.found, got.corpus, got.special_tokens, got.sizes
    regex, base_ref, base_model = got.regex, got.base_ref, got.base_model
    if earlier is not None:
        base_model = earlier
    progress = run.progress
    min_count = training.check_min_count(recipe.min_count)
    counts = found.counts
    reused = isinstance(found, CorpusCounts)
    # (taken now: the merge loop may empty the counts)
    warm_source = store._warm_source_of_counts(counts, run.warm_entries) if stored else None
    # What the merge loop reads: the counts, or a pruned copy (the full ones are stored).
    merged_counts = training.pruned_to(counts, min_count, store._described(corpus))
    # The training's own time: getting the counts, then merging; not writing the store nor
    # waiting for its write lock (another writer's).
    pretokenize_seconds = found.seconds
    corpus_id = got.corpus_id
    saving, saved_rows = got.saving, got.saved_rows
    owned = found.owned if isinstance(found, NewCorpus) else not isinstance(corpus, Counts)

    def stop_if_saving_failed() -> None:
        """Called as the merges progress: a failed save stops the loop; a finished one lets
        the counts go (the merge loop holds words of its own), if they are bpestore's."""
        if saving is None or not saving.done():
            return
        if saving.exception() is not None:
            raise saving.exception()  # type: ignore[misc]
        if owned and len(counts):
            counts.clear()

    # From here on the counts are saved (or being saved): a Ctrl-C (in the merge loop, which
    # can take hours, or while the tokenizers are written, seconds for a big vocab; that
    # transaction rolls back) keeps them, and says so.
    try:
        max_merges = continued.max_merges(max(sizes), special_tokens, base_model)
        # Replaying the base's merges costs what learning them would.
        estimate = estimate_merge_memory(merged_counts, max_merges + continued.replayed_merges(base_model))
        if progress:
            print(f"memory estimate: {estimate.describe()}", file=sys.stderr, flush=True)
        estimate.check(run.max_memory)
        found_at: list[float] = []  # when each merge was found (to within 0.1 s)
        if run.on_counted is not None:
            run.on_counted()
        merging_since = time.perf_counter()
        # The merge loop may empty the counts once read (memory), unless they are the
        # caller's (counts given) or are being written meanwhile.
        options: dict[str, Any] = {
            "progress": progress, "done_at": found_at, "consume_counts": (owned and saving is None) or merged_counts is not counts,
            "stop_if": stop_if_saving_failed,
            # a VocabSizeNotReachedWarning names the line that called Store.train (four frames up)
            "stacklevel": 6 if base_model is None else 7,
        }
        if recipe.tie_break != "cs336":
            options["tie_break"] = recipe.tie_break
        max_words = recipe.stages[-1].max_words
        if max_words is not None:
            options["max_words"] = max_words
        # A training of these very counts stored already, with as many merges (or all there
        # are): its merges are this one's, a prefix of them (the merge loop is deterministic,
        # and a smaller vocab's merges are a prefix of a larger one's). No loop to run again.
        donor = store._same_training(corpus_id, special_tokens, max_merges, min_count, recipe.tie_break) if reused and base_model is None and max_words is None else None
        if donor is not None:
            merges = donor[1]
            found_at[:] = [time.perf_counter()] * len(merges)
            training.warn_if_short(len(merges), max_merges, stacklevel=5)
        elif base_model is None:
            merges = training.learn_merges(merged_counts, max_merges, **options)
        else:
            merges = continued.learn_continued(merged_counts, max_merges, base_model, **options)
        done_at = [pretokenize_seconds + moment - merging_since for moment in found_at]
        if saving is not None:
            if progress and not saving.done():  # the merges are done first: show the rest of the save
                # (the rows are written per pre-token: twice on SQLite, staged then copied; the bar
                # counts pre-tokens, as the user knows them)
                per_pretoken = max(1, store._row_writes(len(counts)) // max(1, len(counts)))
                with progress_bar(True, len(counts), "saving pre-token counts", unit="pre-tokens", unit_scale=True) as bar:
                    while not saving.done():
                        bar.update(saved_rows[0] // per_pretoken - bar.n)
                        wait([saving], timeout=0.1)
                    bar.update(saved_rows[0] // per_pretoken - bar.n)
            corpus_id = saving.result()
        assert corpus_id is not None
    except KeyboardInterrupt:
        if saving is not None:
            try:
                corpus_id = saving.result()  # the counts' own transaction finishes first
            except Exception:  # noqa: BLE001 - not saved after all: nothing was kept
                raise KeyboardInterrupt from None
        assert corpus_id is not None
        raise TrainingInterrupted(corpus_id) from None
    finally:
        got.close()
    how = {"reused": reused, "pretokenize_seconds": pretokenize_seconds, "done_at": done_at, "donor": donor}
    return Learned(merges, corpus, corpus_id, special_tokens, sizes, regex, base_ref, base_model, warm_source, how)


def store_learned(store: TrainingStore, name: str, recipe: Recipe, learned: Learned, run: TrainingRun, corpus_id: int | None = None) -> list[str]:
    """Store a tokenizer of ``learned``'s merges per vocab size, each with ``recipe`` (as trained:
    :func:`recorded_recipe`, its inputs those of stored corpus ``corpus_id``, else the merges'
    own). A Ctrl-C meanwhile keeps the counts (stored already) and writes no tokenizer."""
    try:
        recorded = recorded_recipe(store, recipe, learned.corpus, corpus_id or learned.corpus_id, learned.regex, learned.base_ref)
        return _store_tokenizers(
            store, name, recorded, learned.special_tokens, learned.sizes, learned.merges, learned.base_model, learned.regex,
            learned.warm_source, run, learned.corpus_id, learned.how,
        )
    except KeyboardInterrupt:
        raise TrainingInterrupted(learned.corpus_id) from None


def _store_tokenizers(
    store: TrainingStore, name: str, recipe: Recipe, special_tokens: Sequence[str], sizes: Sequence[int], merges: list[tuple[bytes, bytes]],
    base_model: BPEModel | None, regex: str, warm_source: Any, run: TrainingRun, corpus_id: int | None, how: dict[str, Any],
) -> list[str]:
    """Build, check and write a tokenizer per size, in one transaction: each with the recipe that
    reproduces it (``recipe`` trained to its size) in its training parameters. Seconds for big
    vocabs, said on one line (the per-tokenizer row bars would be one line each). ``special_tokens``:
    all of them, the base's first."""
    saving_bar = progress_bar(
        run.progress, len(sizes), f"saving {len(sizes)} tokenizer{'s' if len(sizes) > 1 else ''}",
        bar_format="{desc}: {n}/{total} [{elapsed}]{postfix}",
    )
    with saving_bar as bar:
        # Each tokenizer and its warm table (the engine merging its corpus's most frequent
        # pre-tokens) are made before the write transaction, which they would hold up.
        built = []
        for size in sizes:
            bar.set_postfix_str(f"vocab {size:,}: warm table")
            model, num_merges = continued.model_of_size(
                size, special_tokens, merges, base_model, pattern=regex, special_tokens_at=recipe.special_tokens_at
            )
            built.append((size, model, num_merges, store._warm_table(model, warm_source, run.warm_entries)))
        with store._transaction(write=True) as connection:
            refs = []
            for size, model, num_merges, warm in built:
                bar.set_postfix_str(f"vocab {size:,}")
                seconds = how["done_at"][num_merges - 1] if num_merges else how["pretokenize_seconds"]
                params: dict[str, Any] = {} if recipe.base is None else {"base": recipe.base}
                if recipe.min_count is not None:
                    params["min_count"] = recipe.min_count
                if recipe.tie_break != "cs336":
                    params["tie_break"] = recipe.tie_break
                if how["donor"] is not None:
                    params["merges_of"] = how["donor"][0]  # the stored training whose merges these are
                if "params_of" in how:  # what a kind of training says of its tokenizer of this many merges
                    params |= how["params_of"](num_merges)
                refs.append(
                    store._insert_tokenizer(
                        connection,
                        name,
                        model,
                        corpus_id=corpus_id,
                        source="trained",
                        training_params={
                            "vocab_size": size,
                            "workers": run.workers,
                            "reused_pretoken_counts": how["reused"],
                            "pretokenize_seconds": round(how["pretokenize_seconds"], 3),
                            "special_tokens_at": recipe.special_tokens_at,
                            **params,
                            "recipe": recipe.with_vocab_size(size).to_dict(),
                        },
                        training_seconds=round(seconds, 3),
                        warm=warm,
                    )
                )
                bar.update(1)
            bar.set_postfix_str("committing")
        bar.set_postfix_str("done", refresh=False)
    return refs
