"""Evaluating tokenizers on text files (``bpestore eval``, :meth:`bpestore.Store.evaluate`): each
tokenizer measured on each file (:mod:`bpestore.metrics`), with the parity of each file against a
reference file, as one result that prints as a table, JSON or CSV.

Here are the pieces that need no store: checking the files, identifying them by content, turning
a :class:`~bpestore.metrics.Measurement` into the :class:`~bpestore.store.database.Evaluation`
the store keeps, and the result. :meth:`bpestore.Store.evaluate` (in :mod:`bpestore.workflow`)
joins them to the store, which keeps each evaluation and gives it back instead of measuring the
same tokenizer on the same content again.
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .atomic import atomic_path
from .metrics import DEFAULT_RENYI_ALPHA, Measurement, gini, parity
from .pretokenize.corpus import check_corpus_path
from .store.database import Evaluation

__all__ = [
    "CSV_COLUMNS", "EvaluatedFile", "EvaluationResult", "EvaluationRow", "ParitySummary", "check_alpha", "evaluated_files",
    "evaluation_of", "parity_summary", "with_parity",
]

_HASH_BLOCK = 1 << 20


def check_alpha(alpha: float) -> float:
    """``alpha`` as a float; ValueError unless it is a finite number above 0 (the order of a
    Rényi entropy)."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise TypeError(f"alpha must be a number, not {type(alpha).__name__}")
    if not (alpha > 0 and math.isfinite(alpha)):
        raise ValueError(f"alpha (the order of the Rényi entropy) must be a finite number above 0, got {alpha!r}")
    return float(alpha)


@dataclass(frozen=True)
class EvaluatedFile:
    """A text file to evaluate on, checked and identified."""

    path: str
    """As given."""
    resolved: str
    label: str
    """Its name in tables: the file name, or the path as given where two files share a name."""
    sha256: str
    """The sha256 of its content (hex)."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def evaluated_files(
    paths: Sequence[str | os.PathLike[str]], reference: str | os.PathLike[str] | None = None
) -> tuple[list[EvaluatedFile], int]:
    """The files to evaluate on, each checked (it exists, is a file, is not empty: there is
    nothing to measure in an empty file) and hashed, in the order given; and the index of the
    reference file among them (``reference``, the same file by its resolved path, or its label;
    default the first). ValueError for no files, a file given twice, a reference not among
    them; FileNotFoundError naming a missing file."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if not paths:
        raise ValueError("give at least one text file to evaluate on (--corpus FILE)")
    checked = [check_corpus_path(path) for path in paths]  # every file checked before any is read
    resolved = [str(path.resolve()) for path in checked]
    for index, full in enumerate(resolved):
        if full in resolved[:index]:
            raise ValueError(f"{os.fspath(paths[index])} is given twice")
    for checked_path in checked:
        if checked_path.stat().st_size == 0:
            raise ValueError(f"{checked_path} is empty: there is nothing to measure in it")
    names = [path.name for path in checked]
    labels = names if len(set(names)) == len(names) else [os.fspath(path) for path in paths]
    files = [
        EvaluatedFile(os.fspath(given), full, label, _sha256(path))
        for given, full, label, path in zip(paths, resolved, labels, checked)
    ]
    index = 0
    if reference is not None:
        wanted = os.fspath(reference)
        found = [i for i, file in enumerate(files) if file.label == wanted or file.path == wanted]
        if not found and Path(wanted).exists():
            full = str(Path(wanted).resolve())
            found = [i for i, file in enumerate(files) if file.resolved == full]
        if not found:
            raise ValueError(f"the reference file {wanted} is not one of the files evaluated on ({', '.join(f.label for f in files)})")
        index = found[0]
    return files, index


def evaluation_of(ref: str, file: EvaluatedFile, measured: Measurement, alpha: float = DEFAULT_RENYI_ALPHA) -> Evaluation:
    """What the store keeps of tokenizer ``ref`` measured on ``file`` (a file's measurement knows
    its characters and single-token words)."""
    if measured.characters is None or measured.single_token_words is None:
        raise ValueError("an evaluation needs a measurement of a text (measure_file, measure_text), not of counts")
    return Evaluation(
        ref=ref, sha256=file.sha256, label=file.label, path=file.resolved, alpha=alpha,
        bytes=measured.bytes, characters=measured.characters, words=measured.words, tokens=measured.tokens,
        distinct_tokens=measured.distinct_tokens, single_token_words=measured.single_token_words,
        bytes_per_token=measured.bytes_per_token, characters_per_token=measured.characters_per_token,
        fertility=measured.fertility, renyi_efficiency=measured.renyi_efficiency(alpha), vocab_used=measured.vocab_used,
        single_token_word_rate=measured.single_token_word_rate, created_at=datetime.now(timezone.utc),
    )


@dataclass(frozen=True)
class EvaluationRow:
    """One tokenizer on one file: what was measured (or read back), and its parity."""

    evaluation: Evaluation
    """With the file's label and path in this evaluation (a stored row may have been measured
    on the same content under another name)."""
    parity: float | None
    """This file's tokens over the reference file's, with the same tokenizer."""
    reused: bool
    """Whether it was read back from the store rather than measured now."""

    def to_dict(self) -> dict[str, Any]:
        data = self.evaluation.to_dict()
        return {"tokenizer": data.pop("ref"), "file": data.pop("label"), **data, "parity": self.parity, "reused": self.reused}


@dataclass(frozen=True)
class ParitySummary:
    """One tokenizer's parity over the files it was evaluated on (for parallel texts: over the
    languages): the cheapest and the dearest file against the reference, and the Gini coefficient
    of the files' token counts (0: every file takes as many tokens)."""

    tokenizer: str
    files: int
    lowest: float | None
    lowest_file: str | None
    highest: float | None
    highest_file: str | None
    gini: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokenizer": self.tokenizer, "files": self.files, "lowest_parity": self.lowest, "lowest_parity_file": self.lowest_file,
            "highest_parity": self.highest, "highest_parity_file": self.highest_file, "gini": self.gini,
        }

    def describe(self) -> str:
        """One line for people."""
        if self.highest is None or self.lowest is None:
            return f"{self.tokenizer}: no parity (no tokens in the reference file)"
        spread = f"parity from {self.lowest:.3f} ({self.lowest_file}) to {self.highest:.3f} ({self.highest_file})"
        return f"{self.tokenizer}: {spread}, Gini {'-' if self.gini is None else f'{self.gini:.3f}'} of the tokens over {self.files} files"


def parity_summary(ref: str, rows: Sequence[tuple[str, int, float | None]]) -> ParitySummary:
    """The summary of tokenizer ``ref``'s rows, each (file label, tokens, parity)."""
    ranked = sorted((value, label) for label, _, value in rows if value is not None)
    lowest, highest = (ranked[0], ranked[-1]) if ranked else ((None, None), (None, None))
    return ParitySummary(ref, len(rows), lowest[0], lowest[1], highest[0], highest[1], gini([tokens for _, tokens, _ in rows]))


CSV_COLUMNS = (
    "tokenizer", "file", "path", "sha256", "alpha", "bytes", "characters", "words", "tokens", "distinct_tokens",
    "single_token_words", "bytes_per_token", "characters_per_token", "fertility", "renyi_efficiency", "vocab_used",
    "single_token_word_rate", "parity", "reference", "reused", "created_at",
)
"""The columns of :meth:`EvaluationResult.write_csv`, in order."""


@dataclass(frozen=True)
class EvaluationResult:
    """Tokenizers evaluated on files: a row per tokenizer and file, by file then tokenizer, in the
    order given."""

    refs: list[str]
    files: list[EvaluatedFile]
    reference: str
    """The label of the file parity is measured against."""
    alpha: float
    rows: list[EvaluationRow]
    stored: bool = True
    """Whether the rows measured now were kept in the store (not on a read-only store)."""

    @property
    def parity_summaries(self) -> list[ParitySummary]:
        """Each tokenizer's parity over the files, in the order given (see :class:`ParitySummary`)."""
        return [
            parity_summary(ref, [(row.evaluation.label, row.evaluation.tokens, row.parity) for row in self.rows if row.evaluation.ref == ref])
            for ref in self.refs
        ]

    @property
    def reused(self) -> int:
        """How many rows were read back from the store instead of measured."""
        return sum(row.reused for row in self.rows)

    def row(self, ref: str, label: str) -> EvaluationRow:
        """The row of tokenizer ``ref`` on the file labelled ``label``."""
        for row in self.rows:
            if row.evaluation.ref == ref and row.evaluation.label == label:
                return row
        raise KeyError((ref, label))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "tokenizers": self.refs,
            "files": [{"file": f.label, "path": f.resolved, "sha256": f.sha256} for f in self.files],
            "reference": self.reference,
            "alpha": self.alpha,
            "stored": self.stored,
            "rows": [row.to_dict() for row in self.rows],
            "parity_summary": [summary.to_dict() for summary in self.parity_summaries],
        }

    def write_csv(self, path: str | os.PathLike[str]) -> None:
        """The rows as CSV (:data:`CSV_COLUMNS`; empty cells for metrics that have no value),
        written atomically: ``path`` appears only once complete."""
        with atomic_path(path) as temporary, open(temporary, "x", newline="", encoding="utf-8") as file:
            writer = csv.DictWriter(file, fieldnames=CSV_COLUMNS)
            writer.writeheader()
            for row in self.rows:
                data = row.to_dict() | {"reference": self.reference}
                writer.writerow({column: "" if data[column] is None else data[column] for column in CSV_COLUMNS})


def with_parity(refs: Sequence[str], files: Sequence[EvaluatedFile], reference: int, found: dict[tuple[str, str], tuple[Evaluation, bool]]) -> list[EvaluationRow]:
    """The rows, by file then tokenizer, each with its parity against file ``reference``;
    ``found`` maps (ref, sha256) to the evaluation and whether it was reused."""
    rows = []
    for file in files:
        for ref in refs:
            evaluation, reused = found[(ref, file.sha256)]
            reference_tokens = found[(ref, files[reference].sha256)][0].tokens
            here = replace(evaluation, label=file.label, path=file.resolved)
            rows.append(EvaluationRow(here, parity(evaluation.tokens, reference_tokens), reused))
    return rows
