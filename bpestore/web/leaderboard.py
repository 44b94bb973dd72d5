"""The leaderboard page's numbers (``/leaderboard``), from the stored evaluations
(``bpestore eval``, :meth:`~bpestore.store.database.ModelStore.evaluations`) and nothing else: a
row per tokenizer and file, sorted by a column; each tokenizer's bytes per token averaged over its
files; each file's parity against a reference file (its tokens over the reference's, with the
same tokenizer), a grid of tokenizers by files; and each tokenizer's parity summed up over its
files (the lowest, the highest, the Gini coefficient of its token counts).

A file is identified by its content (sha256), as the store identifies it, and shown by the label
it was first evaluated under (with the start of its sha256 where two contents share a label).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..evaluate import ParitySummary, parity_summary
from ..metrics import DEFAULT_RENYI_ALPHA, parity
from ..store.database import Evaluation

__all__ = ["COLUMNS", "Column", "Leaderboard", "LeaderboardRow", "leaderboard"]


@dataclass(frozen=True)
class Column:
    """A column of the leaderboard's table."""

    key: str
    """Its name in ``?sort=`` (and the attribute of :class:`LeaderboardRow` it shows)."""
    heading: str
    title: str
    """What it means (the heading's tooltip)."""
    numeric: bool = True
    percent: bool = False
    """Shown as a percentage (the value is a share)."""


COLUMNS = (
    Column("tokenizer", "tokenizer", "name@version", numeric=False),
    Column("file", "file", "the file's label (its name when evaluated)", numeric=False),
    Column("bytes_per_token", "bytes/token", "UTF-8 bytes per token (higher: shorter sequences)"),
    Column("characters_per_token", "chars/token", "characters (code points) per token"),
    Column("fertility", "tokens/word", "tokens per whitespace-separated word (lower: fewer pieces)"),
    Column("renyi_efficiency", "Rényi eff.", "Rényi efficiency of the token distribution (Zouhar et al. 2023)"),
    Column("vocab_used", "vocab used", "share of the vocabulary that occurs in the file", percent=True),
    Column("single_token_word_rate", "1-token words", "share of words no token boundary falls inside", percent=True),
    Column("parity", "parity", "the file's tokens over the reference file's, same tokenizer (lower: cheaper)"),
)
_COLUMN_KEYS = {column.key for column in COLUMNS}


@dataclass(frozen=True)
class LeaderboardRow:
    """One tokenizer evaluated on one file."""

    evaluation: Evaluation
    file: str
    """The file's label on this page."""
    parity: float | None
    """Its tokens over the reference file's with the same tokenizer (None: that tokenizer was
    not evaluated on the reference file)."""
    index: int
    """Its place in the store's order (tokenizer, file), which breaks ties when sorting."""

    @property
    def tokenizer(self) -> str:
        return self.evaluation.ref

    def value(self, key: str) -> str | float | None:
        """The value of column ``key``."""
        if key == "tokenizer":
            return self.evaluation.ref
        if key == "file":
            return self.file
        if key == "parity":
            return self.parity
        found: float | None = getattr(self.evaluation, key)
        return found


@dataclass(frozen=True)
class Leaderboard:
    alpha: float | None
    """The Rényi order of the evaluations shown (None: none stored)."""
    alphas: list[float]
    """Every order stored (the page shows one at a time)."""
    tokenizers: list[str]
    files: list[str]
    """Labels, in the order of the heat map's columns."""
    reference: str | None
    rows: list[LeaderboardRow]
    """Sorted as asked."""
    sort: str
    descending: bool
    mean_bytes_per_token: list[tuple[str, float, int]]
    """Per tokenizer: its bytes per token averaged over the files it was evaluated on, and how many."""
    parity: list[list[float | None]]
    """A row per tokenizer, a column per file (None: not evaluated on it or on the reference)."""
    parity_summaries: list[ParitySummary]
    """Per tokenizer evaluated on two files or more: its parity over them (for parallel texts,
    over the languages)."""


def _sort_key(key: str, row: LeaderboardRow) -> tuple[str, float]:
    value = row.value(key)
    if isinstance(value, str):
        return value.lower(), 0.0
    return "", float(value) if value is not None else 0.0


def _default_reference(files: Sequence[str]) -> str | None:
    """A file labelled ``en`` (``en.txt``, ``en``), else one whose label starts with ``en``,
    else the first."""
    for label in files:
        if label.split(".")[0].lower() == "en":
            return label
    for label in files:
        if label.lower().startswith("en"):
            return label
    return files[0] if files else None


def leaderboard(
    evaluations: Sequence[Evaluation], *, alpha: float | None = None, reference: str | None = None,
    sort: str = "tokenizer", descending: bool = False,
) -> Leaderboard:
    """The leaderboard of ``evaluations`` (in the store's order: tokenizer, then file label) of
    Rényi order ``alpha`` (default :data:`~bpestore.metrics.DEFAULT_RENYI_ALPHA` if stored, else
    the smallest stored), with parity against the file labelled ``reference`` (default: see
    :func:`_default_reference`), rows sorted by column ``sort`` (rows without a value last,
    whatever the order). ValueError for an alpha, reference or column that is not there."""
    if sort not in _COLUMN_KEYS:
        raise ValueError(f"cannot sort by {sort!r}: the columns are {', '.join(c.key for c in COLUMNS)}")
    alphas = sorted({e.alpha for e in evaluations})
    if alpha is None:
        alpha = DEFAULT_RENYI_ALPHA if DEFAULT_RENYI_ALPHA in alphas or not alphas else alphas[0]
    elif alphas and alpha not in alphas:
        raise ValueError(f"no evaluations of Rényi order {alpha:g} are stored (stored: {', '.join(f'{a:g}' for a in alphas)})")
    shown = [e for e in evaluations if e.alpha == alpha]
    # Files by content; a label per content (the first it was stored under), made unique.
    first_label: dict[str, str] = {}
    for e in shown:
        first_label.setdefault(e.sha256, e.label)
    by_label: dict[str, list[str]] = {}
    for sha256, label in first_label.items():
        by_label.setdefault(label, []).append(sha256)
    labels = {
        sha256: label if len(by_label[label]) == 1 else f"{label} ({sha256[:8]})" for sha256, label in first_label.items()
    }
    files = sorted(labels.values(), key=str.lower)
    sha_of = {label: sha256 for sha256, label in labels.items()}
    if reference is None:
        reference = _default_reference(files)
    elif reference not in sha_of:
        raise ValueError(f"the reference file {reference!r} is not among the evaluated files ({', '.join(files) or 'none'})")
    tokenizers = list(dict.fromkeys(e.ref for e in shown))
    tokens = {(e.ref, e.sha256): e.tokens for e in shown}
    reference_sha = sha_of.get(reference or "")

    def parity_of(e: Evaluation) -> float | None:
        base = tokens.get((e.ref, reference_sha or ""))
        return parity(e.tokens, base) if base is not None else None

    rows = [LeaderboardRow(e, labels[e.sha256], parity_of(e), index) for index, e in enumerate(shown)]
    present = [row for row in rows if row.value(sort) is not None]
    missing = [row for row in rows if row.value(sort) is None]
    ordered = sorted(present, key=lambda row: _sort_key(sort, row), reverse=descending) + missing
    means = []
    for ref in tokenizers:
        values = [e.bytes_per_token for e in shown if e.ref == ref and e.bytes_per_token is not None]
        if values:
            means.append((ref, sum(values) / len(values), len(values)))
    cell = {(row.tokenizer, row.file): row.parity for row in rows}
    grid = [[cell.get((ref, label)) for label in files] for ref in tokenizers]
    summaries = []
    for ref in tokenizers:
        own = [(row.file, row.evaluation.tokens, row.parity) for row in rows if row.tokenizer == ref]
        if len(own) > 1:
            summaries.append(parity_summary(ref, sorted(own, key=lambda item: item[0].lower())))
    return Leaderboard(alpha if shown else None, alphas, tokenizers, files, reference, ordered, sort, descending, means, grid, summaries)
