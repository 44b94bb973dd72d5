"""The seam of counting: :class:`CountingBackend`, what training needs from whatever counts a
corpus's pre-tokens, and :class:`InProcessCounting`, the default (the engine's threads, in this
process). Dask's is :class:`bpestore.distributed.count.DaskCounting`; any object with the same
``count`` method plugs in: ``Store.train(corpus, ..., counting=backend)``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..pretokenize.patterns import GPT2_PATTERN
from . import trainer
from .counts import Counts
from .sources import CorpusFiles

__all__ = ["CountingBackend", "InProcessCounting"]

Corpus = str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | Iterable[str] | CorpusFiles


@runtime_checkable
class CountingBackend(Protocol):
    """Counts a corpus's pre-tokens, somewhere.

    Contract of ``count(corpus, special_tokens, *, pattern, progress) -> Counts``:

    - takes ``corpus``, the inputs as the backend understands them (the in-process backend: a
      path, or a list of files, directories, globs and compressed files, or an iterable of
      strings; Dask's: paths and fsspec URLs); ``special_tokens``, already checked
      (:func:`bpestore.train.trainer.check_special_tokens`); ``pattern``, the pre-tokenizer's
      regex; ``progress``, whether to show a progress bar on stderr;
    - returns a :class:`~bpestore.train.counts.Counts` made with that ``pattern`` and those
      ``special_tokens``, whose ``source`` says where the counts came from (it names the corpus in
      the store);
    - guarantees counts identical to :class:`InProcessCounting`'s on the same inputs (exactly
      ``reference_pretoken_counts`` of tests/reference.py for one file: the text cut at the special
      tokens, which are not counted, each part pre-tokenized with ``pattern``; no pre-token spans
      two files), however the work is split; unless the backend is explicitly asked to prune
      (Dask's ``min_count``), in which case exactly those counts at or above the threshold;
    - raises what in-process counting raises: FileNotFoundError for a missing input,
      :class:`~bpestore.errors.CorpusDecodeError` naming the first bad byte.
    """

    # ``corpus`` as the store passes it (paths, or an iterable of paths or of strings): what every
    # backend takes, Dask's too; InProcessCounting also takes CorpusFiles (Corpus).
    def count(
        self,
        corpus: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
        special_tokens: Sequence[str] = (),
        *,
        pattern: str = GPT2_PATTERN,
        progress: bool = False,
    ) -> Counts: ...


@dataclass(frozen=True)
class InProcessCounting:
    """A :class:`CountingBackend`: counting in this process, on the engine's ``workers`` threads
    (default: one per CPU) — :func:`bpestore.train.trainer.count_any`; with ``count_memory``
    (bytes), in bounded memory, spilling sorted partial counts to ``spill_dir`` (see
    :func:`bpestore.train.trainer.count_corpus`)."""

    workers: int | None = None
    count_memory: int | None = None
    spill_dir: str | os.PathLike[str] | None = None

    def count(self, corpus: Corpus, special_tokens: Sequence[str] = (), *, pattern: str = GPT2_PATTERN, progress: bool = False) -> Counts:
        table = trainer.count_any(
            corpus, special_tokens, pattern=pattern, workers=self.workers, progress=progress, count_memory=self.count_memory,
            spill_dir=self.spill_dir,
        )
        return Counts(table, pattern, special_tokens, source=trainer.describe_corpus(corpus), origin="files")
