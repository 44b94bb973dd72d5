"""Trainings in stages, SuperBPE's (Liu et al., 2025): stage 1 is an ordinary training to its
vocab size; stage 2 takes stage 1's merges as they are (its tokens keep their ids), splits the
corpus again with its own pre-tokenizer, replays stage 1's merges on those pieces and goes on
merging, with the same counts-to-merges path, to the final vocab size. The tokenizer encodes with
stage 2's pre-tokenizer and every merge in rank order, as SuperBPE's tokenizers do.

Each stage is :func:`~bpestore.train.through_store.count_stage` then
:func:`~bpestore.train.through_store.learn`: its corpus counted with its own pattern (and those
counts stored, so that the next training of the same files reads them back), its merges learned
by the one merge loop, continuing the stages before it as a continued training continues its
base. Both stages are counted before stage 1 merges, so that stage 2's counts are stored
meanwhile.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..model import BPEModel
from . import trainer as training
from .counts import Counts
from .recipe import Recipe, Stage, pattern_in_recipe
from .sources import CorpusFiles
from . import through_store
from .through_store import TrainingRun, TrainingStore, count_stage, learn, store_learned

__all__ = ["SUPERBPE_MAX_WORDS", "earlier_model", "superbpe_stages", "train", "train_stages"]

SUPERBPE_MAX_WORDS = 4
"""The most words a SuperBPE token holds, as its repository trains them."""


def superbpe_stages(transition: int, vocab_size: int, pattern: str = "gpt2", max_words: int | None = SUPERBPE_MAX_WORDS) -> tuple[Stage, Stage]:
    """SuperBPE's two stages: ordinary BPE with ``pattern`` to the transition vocab size, then
    SuperBPE's stage-2 pre-tokenizer (``superbpe``) to ``vocab_size``, its tokens at most
    ``max_words`` words long (None: no limit)."""
    return Stage(transition, pattern), Stage(vocab_size, "superbpe", max_words)


def earlier_model(
    merges: Sequence[tuple[bytes, bytes]], special_tokens: Sequence[str], special_tokens_at: str, pattern: str,
) -> BPEModel:
    """The model the next stage continues: the 256 bytes and ``merges``' tokens, in order, with
    the special tokens first (``special_tokens_at="start"``; at ``"end"`` they are left for the
    last stage to put after its own tokens); ``pattern`` is the next stage's."""
    first = list(special_tokens) if special_tokens_at == "start" else []
    vocab, kept = training.vocab_and_merges(first, merges, "start")
    return BPEModel(vocab, kept, first, pattern)


def train(store: TrainingStore, corpus: Any, name: str, recipe: Recipe, sizes: Sequence[int] | None, run: TrainingRun) -> list[str]:
    """Train ``recipe`` (one stage or two) and store its tokenizers: see
    :func:`bpestore.train.through_store.train`, which trains one stage."""
    if len(recipe.stages) == 1:
        return through_store.train(store, corpus, name, recipe, sizes, run)
    return train_stages(store, corpus, name, recipe, sizes, run)


def train_stages(
    store: TrainingStore, corpus: Any, name: str, recipe: Recipe, sizes: Sequence[int] | None, run: TrainingRun,
) -> list[str]:
    """Train a recipe of two stages (see the module's doc) and store one version of ``name`` per
    vocab size (``sizes``, or the recipe's: each at least the first stage's)."""
    store.check_writable()  # before the work, not after it
    if len(recipe.stages) != 2:
        raise ValueError(f"a training has one or two stages, not {len(recipe.stages)}")
    if recipe.base is not None:
        raise ValueError("a training in stages starts from the bytes: not with a base")
    first, last = recipe.stages
    sizes = training.check_vocab_sizes(list(sizes) if sizes is not None else [recipe.vocab_size])
    training.check_vocab_size(first.vocab_size, list(recipe.special_tokens))
    for size in sizes:
        if size < first.vocab_size:
            raise ValueError(f"vocab_size {size} is smaller than the first stage's ({first.vocab_size}): stage 2 only adds tokens")
    if isinstance(corpus, Counts) or not (isinstance(corpus, (str, os.PathLike, list, tuple, CorpusFiles)) or run.counting is not None):
        # (a stored corpus is counts split by one pre-tokenizer: stage 2 needs the text again)
        raise ValueError("a training in stages reads its corpus's files (stage 2 splits the text anew), not stored counts")
    if first.pattern is None or last.pattern is None:
        raise ValueError("each stage of a training in stages names its pre-tokenizer")
    stage1, stage2 = replace(recipe, stages=(first,)), replace(recipe, stages=(last,))
    regex2 = training.training_pattern(last.pattern)
    # Both stages counted first: stage 2's counts (nearly the whole text, in long pieces, the
    # longest part of the work to store) are then stored while stage 1 merges, not after. They
    # are cut as the model stage 1 will make cuts them: its special tokens, its pattern, which a
    # stand-in without merges has.
    counts1 = count_stage(store, corpus, stage1, [first.vocab_size], run)
    try:
        stand_in = earlier_model([], counts1.special_tokens, recipe.special_tokens_at, regex2)
        counts2 = count_stage(store, counts1.corpus, stage2, sizes, run, stand_in)
    except BaseException:
        counts1.close()
        raise
    try:
        learned1 = learn(store, counts1, stage1, run, stored=False)
    except BaseException:
        counts2.close()  # (its own transaction: stored whole, or not at all)
        raise
    regex1 = learned1.regex
    earlier = earlier_model(learned1.merges, learned1.special_tokens, recipe.special_tokens_at, regex2)
    learned2 = learn(store, counts2, stage2, run, earlier)
    # Each tokenizer's time is the two stages': stage 2's merges come after all of stage 1's.
    before = learned1.how["done_at"][-1] if learned1.merges else learned1.how["pretokenize_seconds"]
    learned2.how["done_at"] = [before + seconds for seconds in learned2.how["done_at"]]
    learned2.how["pretokenize_seconds"] += before
    learned2.how["reused"] = learned1.how["reused"] and learned2.how["reused"]
    stored = replace(recipe, stages=(replace(first, pattern=pattern_in_recipe(regex1)), last))
    return store_learned(store, name, stored, learned2, run, corpus_id=learned1.corpus_id)
