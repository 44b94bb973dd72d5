"""The workflows that join the store and the algorithms: training into the store, loading a stored
tokenizer as a ``Tokenizer``, encoding a file with it, importing and exporting through the formats,
describing and comparing tokenizers. The command line is a thin layer over these.

This is the one module that knows both :mod:`bpestore.store` and the pipeline's algorithms
(:mod:`bpestore.train`, :mod:`bpestore.encode`); the store itself knows neither.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, BinaryIO, Literal

from . import evaluate as evaluating
from . import formats, metrics
from .encode import warm as warming
from .atomic import atomic_path
from .encode.files import encode_file_to_npy, is_npy, read_npy_ids, write_npy_stream
from .encode.tokenizer import Tokenizer
from .encode.shards import encode_shards
from .errors import PatternError, RecipeError, StoreError
from .evaluate import EvaluationResult, EvaluationRow
from .metrics import DEFAULT_RENYI_ALPHA, Measurement
from .model import BPEModel
from .pretokenize.corpus import check_corpus_path, is_stream_path, iter_text_blocks
from .pretokenize.inputs import CorpusFiles, corpus_identity, short_corpus_path, stored_corpus_paths
from .pretokenize.patterns import GPT2_PATTERN, name_of_pattern
from .progress import progress_bar, progress_step
from .store.database import (
    CorpusFile, CorpusInfo, Evaluation, ModelStore, StoreSummary, TokenizerInfo, is_in_memory, summarize_store,
)
from .store.check import Problem, check_store
from .store.rows import StoredWarm
from .store import loader
from .store.refs import check_name
from .train import continued
from .train import trainer as training
from .train.backends import CountingBackend, InProcessCounting
from .train.counts import Counts, as_counts, check_training_specials, read_counts
from .train.trainer import SpecialTokensAt
from .train.recipe import Language, Parity, Recipe, TieBreak, Stage, StoredCorpusInput, input_files, load_recipe, recipe_from_dict, recipe_from_toml
from .train import parity as parity_training
from .train.parity import languages_of_files
from .train import stages as stages_training
from .train.stages import SUPERBPE_MAX_WORDS, superbpe_stages
from .train.through_store import CorpusCounts, NewCorpus, TrainingInterrupted, TrainingRun
from .train.memory import MemoryEstimate, MemoryLimitError, estimate_merge_memory, format_bytes, parse_bytes
from .workers import check_workers

if TYPE_CHECKING:
    import numpy as np  # (imported where it runs: commands that do not encode, `train` among them, never load it)
    import numpy.typing as npt
    from .engine import PretokenCounts
    from .reshape import IdMap, MapPrefix

# What the front ends (the CLI, which may import nothing else of the package: pyproject.toml's
# contracts) use, the store's names and the encoders' among them.
__all__ = [
    "ComparedTokenizer", "CorpusCounts", "CorpusInfo", "CountingBackend", "Counts", "Evaluation", "EvaluationResult", "EvaluationRow",
    "FileComparison", "InProcessCounting", "read_counts", "Measurement", "MemoryEstimate",
    "MemoryLimitError", "Store", "StoreSummary", "TokenizerDiff", "TokenizerInfo",
    "TokenCount", "TokenizerComparison", "TrainingInterrupted", "atomic_output", "atomic_path", "compare_tokenizers", "count_tokens", "decode_array", "diff_tokenizers", "encode_shards", "is_npy", "read_npy_ids", "encode_stream", "encode_to",
    "export_from_store", "import_into_store", "is_in_memory", "load_tokenizer", "name_of_pattern", "format_bytes", "parse_bytes", "remap_file",
    "short_corpus_path", "summarize_store", "check_store", "Problem", "check_output_path",
    "token_text", "Recipe", "load_recipe", "recipe_from_dict", "recipe_from_toml", "check_recipe_options",
    "Stage", "superbpe_stages", "SUPERBPE_MAX_WORDS", "Language", "Parity", "languages_of_files", "StoredCorpusInput",
]


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
    """The text file compared on, or ``"N files"`` for several (their totals below)."""
    corpus_bytes: int | None = None
    tokens_a: int | None = None
    tokens_b: int | None = None
    files: list[FileComparison] | None = None
    """One row per file compared on (see :class:`FileComparison`), in the order given."""
    total_a: Measurement | None = None
    """``a`` measured on all the files compared on together (:meth:`Measurement.combine`: as if
    on their concatenation, each file's pre-tokens kept apart); None without a corpus."""
    total_b: Measurement | None = None
    """The same for ``b``."""

    @property
    def bytes_per_token_a(self) -> float | None:
        return self.corpus_bytes / self.tokens_a if self.tokens_a and self.corpus_bytes is not None else None

    @property
    def bytes_per_token_b(self) -> float | None:
        return self.corpus_bytes / self.tokens_b if self.tokens_b and self.corpus_bytes is not None else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: tokens as readable text (see :func:`token_text`)."""
        data = {key: value for key, value in self.__dict__.items() if key not in {"only_a", "only_b", "total_a", "total_b"}}
        data["only_a"] = [{"id": i, "token": token_text(t)} for i, t in self.only_a]
        data["only_b"] = [{"id": i, "token": token_text(t)} for i, t in self.only_b]
        if self.corpus is not None:
            data["bytes_per_token_a"] = self.bytes_per_token_a
            data["bytes_per_token_b"] = self.bytes_per_token_b
        if self.files is not None:
            data["files"] = [row.to_dict() for row in self.files]
        if self.total_a is not None and self.total_b is not None:
            data["total"] = FileComparison("(all files)", self.total_a, self.total_b).to_dict()
            del data["total"]["path"]
        return data


@dataclass
class FileComparison:
    """Two tokenizers measured on one text file (see :mod:`bpestore.metrics`)."""

    path: str
    a: Measurement
    b: Measurement

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "bytes": self.a.bytes, "words": self.a.words, "a": self.a.to_dict(), "b": self.b.to_dict()}


def _merge_dict(merge: tuple[bytes, bytes] | None) -> list[str] | None:
    return None if merge is None else [token_text(merge[0]), token_text(merge[1])]


def measure_file_with_progress(tokenizer: Tokenizer, path: str | os.PathLike[str], *, progress: bool = False, description: str = "") -> Measurement:
    """:func:`bpestore.metrics.measure_file`, with a progress bar when asked for."""
    with progress_bar(progress, os.path.getsize(path), description or "encoding", unit="B", unit_scale=True) as bar:
        return metrics.measure_file(tokenizer, path, on_bytes=bar.update)


def diff_tokenizers(
    name_a: str,
    a: Tokenizer,
    name_b: str,
    b: Tokenizer,
    corpus: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    *,
    progress: bool = False,
) -> TokenizerDiff:
    """Compare ``a`` and ``b``; with ``corpus`` (a text file or several), also measure both on each
    file (:attr:`TokenizerDiff.files`) and in total."""
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
        paths = [os.fspath(corpus)] if isinstance(corpus, (str, os.PathLike)) else [os.fspath(path) for path in corpus]
        if not paths:
            raise ValueError("give at least one corpus file")
        for path in paths:
            check_corpus_path(path)  # every file is checked before any is encoded
        result.files = [
            FileComparison(
                path,
                measure_file_with_progress(a, path, progress=progress, description=f"{Path(path).name} with {name_a}"),
                measure_file_with_progress(b, path, progress=progress, description=f"{Path(path).name} with {name_b}"),
            )
            for path in paths
        ]
        result.corpus = paths[0] if len(paths) == 1 else f"{len(paths)} files"
        result.corpus_bytes = sum(row.a.bytes for row in result.files)
        result.tokens_a = sum(row.a.tokens for row in result.files)
        result.tokens_b = sum(row.b.tokens for row in result.files)
        result.total_a = Measurement.combine([row.a for row in result.files])
        result.total_b = Measurement.combine([row.b for row in result.files])
    return result


@dataclass
class ComparedTokenizer:
    """One row of a :class:`TokenizerComparison`: a tokenizer, what it shares with the first one
    compared (the first's row shares everything with itself), and its cost on the files."""

    ref: str
    vocab_size: int
    merges: int
    special_tokens: list[str]
    merge_rule: str
    same_pattern: bool
    """Whether its pattern is the first tokenizer's."""
    shared_tokens: int
    """Tokens (by their bytes) also in the first tokenizer's vocab."""
    shared_merges: int
    common_merge_prefix: int
    files: list[Measurement] | None = None
    """Measured on each file compared on, in order; None without a corpus."""
    total: Measurement | None = None
    """On all the files together (:meth:`Measurement.combine`)."""

    def to_dict(self) -> dict[str, Any]:
        data = {key: value for key, value in self.__dict__.items() if key not in {"files", "total"}}
        if self.files is not None and self.total is not None:
            data["files"] = [measured.to_dict() for measured in self.files]
            data["total"] = self.total.to_dict()
        return data


@dataclass
class TokenizerComparison:
    """Several tokenizers side by side (``bpestore diff`` of more than two), each against the
    first: sizes, shared vocab and merges, and, on a corpus, the cost of each."""

    tokenizers: list[ComparedTokenizer]
    corpus_files: list[str] | None = None

    @property
    def base(self) -> str:
        return self.tokenizers[0].ref

    def to_dict(self) -> dict[str, Any]:
        return {"base": self.base, "corpus_files": self.corpus_files, "tokenizers": [row.to_dict() for row in self.tokenizers]}


def compare_tokenizers(
    named: Sequence[tuple[str, Tokenizer]],
    corpus: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    *,
    progress: bool = False,
) -> TokenizerComparison:
    """Compare each of ``named`` (``(ref, tokenizer)``, at least two) with the first; with
    ``corpus`` (a text file or several), measure each tokenizer once on each file."""
    if len(named) < 2:
        raise ValueError("give at least two tokenizers to compare")
    paths = None
    if corpus is not None:
        paths = [os.fspath(corpus)] if isinstance(corpus, (str, os.PathLike)) else [os.fspath(path) for path in corpus]
        if not paths:
            raise ValueError("give at least one corpus file")
        for path in paths:
            check_corpus_path(path)  # every file is checked before any is encoded
    _, first = named[0]
    first_tokens = set(first.vocab.values())
    first_merges = set(first.merges)
    rows = []
    for ref, tokenizer in named:
        prefix = 0
        for merge_a, merge_b in zip(first.merges, tokenizer.merges):
            if merge_a != merge_b:
                break
            prefix += 1
        row = ComparedTokenizer(
            ref=ref,
            vocab_size=tokenizer.vocab_size,
            merges=len(tokenizer.merges),
            special_tokens=list(tokenizer.special_tokens),
            merge_rule=tokenizer.merge_rule,
            same_pattern=tokenizer.pattern == first.pattern,
            shared_tokens=sum(1 for token in set(tokenizer.vocab.values()) if token in first_tokens),
            shared_merges=len(first_merges.intersection(tokenizer.merges)),
            common_merge_prefix=prefix,
        )
        if paths is not None:
            row.files = [
                measure_file_with_progress(tokenizer, path, progress=progress, description=f"{Path(path).name} with {ref}") for path in paths
            ]
            row.total = Measurement.combine(row.files)
        rows.append(row)
    return TokenizerComparison(rows, paths)


class Store(ModelStore):
    """A database of tokenizers: named and versioned, trained into it or saved, loaded as
    :class:`~bpestore.Tokenizer`. Use as a context manager, or call :meth:`close`.

    A plain path means a SQLite file (created on first use); any SQLAlchemy URL is accepted. The
    storage itself is :class:`bpestore.store.database.ModelStore`; this class adds what needs the
    algorithms.

    Example::

        store = Store("tokenizers.db")
        refs = store.train("corpus.txt", name="ts", vocab_sizes=[1000, 10000],
                           special_tokens=["<|endoftext|>"])      # ["ts@1", "ts@2"]
        tok = store.load("ts@2")
    """

    def load_model(self, ref: str) -> BPEModel:
        """The stored tokenizer ``ref`` as a model, read by the one loader
        (:func:`bpestore.store.loader.load_model`) on this store's connection."""
        return loader.load_model(self, ref)

    def load(self, ref: str, *, warm: bool = True) -> Tokenizer:
        """The stored tokenizer ``ref`` (``name`` for the latest version, or ``name@N``), as
        :meth:`load_model` reads it, with its warm table unless ``warm=False`` (see
        :meth:`Tokenizer.from_db <bpestore.Tokenizer.from_db>`)."""
        return Tokenizer.from_db(self, ref, warm=warm)

    def count(
        self,
        corpus: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | Counts | CorpusInfo,
        special_tokens: Sequence[str] = (),
        *,
        workers: int | None = None,
        progress: bool = False,
        pattern: str | None = None,
        counting: CountingBackend | None = None,
        count_memory: int | None = None,
        spill_dir: str | os.PathLike[str] | None = None,
    ) -> CorpusCounts:
        """The pre-token counts of ``corpus`` (one or several files, directories, globs, compressed
        files: see :mod:`bpestore.pretokenize.inputs`), counted and saved in the store, or read
        back from it when the same content was counted before with the same special tokens.

        The counts are saved in a transaction of their own as soon as they are complete, before
        any merge: a training interrupted later keeps them, and the next one reuses them.
        ``pattern``: the pre-tokenizer, by name (``gpt2``, ``cl100k_base``, ``o200k_base``) or
        regex: by default GPT-2's, or the counts' own (counts given, a stored corpus); counts are
        stored and reused per pattern.

        ``counting``: the :class:`~bpestore.train.backends.CountingBackend` that counts (Dask's,
        say: :class:`bpestore.distributed.count.DaskCounting`), given ``corpus`` as it is; its
        counts are then stored as :meth:`train_from_counts` stores counts (identified by their
        own hash, so the store is consulted after counting, not before). By default the corpus
        is counted in this process (:class:`~bpestore.train.backends.InProcessCounting` on
        ``workers`` threads), once per content; ``count_memory`` (bytes) bounds the memory of
        that counting, spilling sorted partial counts to ``spill_dir`` (see
        :func:`~bpestore.train.trainer.count_corpus`; the counts are the same)."""
        special_tokens = training.check_special_tokens(special_tokens)
        regex = _pattern_of_training(corpus, pattern, None)
        found = self._counted(
            corpus, special_tokens, workers=workers, progress=progress, pattern=regex, counting=counting, count_memory=count_memory,
            spill_dir=spill_dir,
        )
        if isinstance(found, CorpusCounts):
            return found
        return CorpusCounts(self._store_new_corpus(found, progress), found.counts, reused=False, seconds=found.seconds)

    def _counted(
        self,
        corpus: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | Counts | CorpusInfo,
        special_tokens: Sequence[str],
        *,
        workers: int | None,
        progress: bool,
        pattern: str,
        counting: CountingBackend | None,
        count_memory: int | None = None,
        spill_dir: str | os.PathLike[str] | None = None,
    ) -> CorpusCounts | NewCorpus:
        """:meth:`count`'s work but the last step: the counts read back from the store (a
        :class:`CorpusCounts`), or counted now and not yet stored (a :class:`NewCorpus`, for
        :meth:`_store_new_corpus`). ``special_tokens``: checked by the caller
        (:func:`~bpestore.train.trainer.check_special_tokens`), once."""
        started = time.perf_counter()
        if isinstance(corpus, CorpusInfo):
            return self._stored_counts(corpus, special_tokens, pattern, started)
        self.check_writable()  # new counts are saved: refuse before counting, not after
        if isinstance(corpus, Counts):
            return self._given_counts(corpus, special_tokens, pattern, started, owned=False)
        training.check_corpus_type(corpus)
        check_workers(workers)
        count_memory = training.check_count_memory(count_memory)
        if counting is not None and count_memory is not None:
            raise ValueError("count_memory bounds counting in this process: give it to the counting backend instead")
        if counting is not None:
            made = counting.count(corpus, special_tokens, pattern=pattern, progress=progress)
            if not isinstance(made, Counts):
                raise TypeError(f"a counting backend returns Counts, not {type(made).__name__}")
            return self._given_counts(made, special_tokens, pattern, started, owned=True)
        files = corpus if isinstance(corpus, CorpusFiles) else CorpusFiles(corpus)
        specials_json = json.dumps(special_tokens, ensure_ascii=False)
        sha256, size_bytes = files.identity()
        with self._transaction() as connection:
            corpus_id = self._find_corpus(connection, sha256, pattern, specials_json)
        if corpus_id is not None:
            return CorpusCounts(corpus_id, self.pretoken_counts(corpus_id), reused=True, seconds=time.perf_counter() - started)
        counter = InProcessCounting(workers, count_memory, spill_dir)
        counts = counter.count(files, special_tokens, pattern=pattern, progress=progress).table
        training.check_not_empty(counts, files.describe())  # nothing to train on: store nothing
        return NewCorpus(
            counts, files.describe(), size_bytes, sha256, pattern, specials_json, "files",
            [CorpusFile(str(path.resolve()), digest, size) for path, digest, size in files.hashed()],
            seconds=time.perf_counter() - started, owned=True,
        )

    def _store_new_corpus(self, new: NewCorpus, progress: bool, on_rows: Callable[[int], object] | None = None) -> int:
        """Store counts made now as a corpus, in a transaction of their own; returns its id (that
        of the same corpus, if another process stored it since it was looked for). ``progress``:
        a bar of the rows written, or ``on_rows(n)`` told of each n more."""
        return self._store_corpus(
            new.source, new.size_bytes, new.sha256, new.pattern, new.specials_json, new.counts, progress,
            origin=new.origin, files=new.files, on_rows=on_rows,
        )

    def _writes_in_background(self) -> bool:
        """Whether a thread of its own may write to this store while this one merges: a file or a
        server (each thread gets a connection of its own from the pool), not a database in memory
        (one connection, for the thread that opened it)."""
        return not (self.is_sqlite and getattr(self, "_sqlite_file", None) is None)

    def _stored_counts(self, corpus: CorpusInfo, special_tokens: Sequence[str], pattern: str, started: float) -> CorpusCounts:
        """:meth:`count` of a corpus the store holds (:meth:`corpus_of`): its counts read back,
        if they were made with ``pattern`` and ``special_tokens`` (ValueError otherwise)."""
        if set(special_tokens) != set(corpus.special_tokens):
            raise ValueError(
                f"corpus {corpus.id} was counted with the special tokens {corpus.special_tokens}, not {list(special_tokens)}: "
                "train on it with those (--special-token for each)"
            )
        if corpus.pattern != pattern:
            raise ValueError(
                f"corpus {corpus.id} was counted with the pre-tokenizer {_pattern_described(corpus.pattern)}, not {_pattern_described(pattern)}"
            )
        return CorpusCounts(corpus.id, self.pretoken_counts(corpus.id), reused=True, seconds=time.perf_counter() - started)

    def add_to_corpus(
        self,
        corpus: int | str | CorpusInfo,
        inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        workers: int | None = None,
        progress: bool = False,
    ) -> CorpusInfo:
        """Grow a stored corpus by files, counting only them: the stored counts plus the new
        files' (counted with the corpus's pattern and special tokens, in this process) are stored
        as a corpus listing every file, in one transaction. Training on it gives exactly the
        merges of training on all the files together (each file is a document of its own, as
        always: a file boundary is a cut). ``corpus``: its id, a tokenizer's ref (the corpus it
        was trained on), or a :class:`CorpusInfo`.

        Corpora do not change under the tokenizers trained on them: the sum is a new corpus, and
        the one grown is deleted in the same transaction only if no tokenizer uses it. Returns the
        new corpus (an equal one already stored, if so). ValueError for a file whose content the
        corpus holds already (adding it would count it twice), or given twice.
        """
        self.check_writable()
        old = corpus if isinstance(corpus, CorpusInfo) else self.corpus_of(corpus)
        files = CorpusFiles(inputs)
        held = {file.sha256: file.path for file in self.corpus_files(old.id)}
        given: dict[str, Path] = {}
        for path, digest, _ in files.hashed():  # each file read once here, before any counting
            if digest in held:
                raise ValueError(
                    f"{path}: corpus {old.id} holds this content already (as {held[digest]}); adding it again would count it twice"
                )
            if digest in given:
                raise ValueError(f"{path} and {given[digest]} have the same content: give it once")
            given[digest] = path
        added = InProcessCounting(workers).count(files, old.special_tokens, pattern=old.pattern, progress=progress).table
        counts = self.pretoken_counts(old.id)
        counts.merge(added)
        old_files = self.corpus_files(old.id)
        new_files = [CorpusFile(str(path.resolve()), digest, size) for path, digest, size in files.hashed()]
        if old.origin == "files" and old_files:
            # Every file is known: the identity of training on all of them (`train A B C`).
            sha256 = corpus_identity([file.sha256 for file in [*old_files, *new_files]])
        else:
            # Counts made elsewhere, or files not listed (stored before 0008): the counts' own.
            sha256 = Counts(counts, old.pattern, old.special_tokens).sha256()
        old_paths = [file.path for file in old_files] or stored_corpus_paths(old.path, old.origin)[1]
        source = json.dumps([*old_paths, *(file.path for file in new_files)], ensure_ascii=False)
        specials_json = json.dumps(old.special_tokens, ensure_ascii=False)
        size = old.size_bytes + sum(file.size_bytes for file in new_files)
        with self._staged_corpus(source, counts, progress, None) as (connection, staged, report):
            with self._transaction(write=True, on=connection):
                now = self._find_corpus(connection, old.sha256, old.pattern, specials_json)
                if now != old.id:
                    raise StoreError(f"corpus {old.id} was deleted or changed while the new files were counted; nothing was stored: run again")
                new_id = self._find_corpus(connection, sha256, old.pattern, specials_json)
                if new_id is None:
                    new_id = self._insert_corpus(
                        connection, source, size, sha256, old.pattern, specials_json, staged, origin=old.origin,
                        files=[*old_files, *new_files] if old_files or old.origin == "files" else [], on_rows=report,
                    )
                if not old.tokenizers and new_id != old.id:
                    self._delete_corpus(connection, old.id)
        return self.corpora(new_id)[0]

    def _given_counts(
        self, counts: Counts, special_tokens: Sequence[str], pattern: str, started: float, owned: bool
    ) -> CorpusCounts | NewCorpus:
        """:meth:`_counted` for counts made elsewhere: a corpus identified by the hash of the
        counts themselves (:meth:`Counts.sha256`), its path saying where they came from and its
        size the bytes of text they cover; found again when the same counts come back.
        ``owned``: whether the counts are bpestore's own (a counting backend's), which training
        may empty once read, or the caller's. ValueError unless they were made with ``pattern``."""
        special_tokens = check_training_specials(counts, special_tokens)
        if counts.pattern != pattern:
            raise ValueError(
                f"the counts were made with the pre-tokenizer {_pattern_described(counts.pattern)}, not {_pattern_described(pattern)}"
            )
        specials_json = json.dumps(special_tokens, ensure_ascii=False)
        sha256 = counts.sha256()
        with self._transaction() as connection:
            corpus_id = self._find_corpus(connection, sha256, pattern, specials_json)
        seconds = time.perf_counter() - started
        if corpus_id is not None:
            return CorpusCounts(corpus_id, counts.table, reused=True, seconds=seconds)  # the same counts: nothing to read back
        source = counts.source or "counts given"
        training.check_not_empty(counts, source)
        return NewCorpus(counts.table, source, counts.text_bytes, sha256, pattern, specials_json, counts.origin, [], seconds, owned)

    def train_from_counts(
        self,
        counts: Counts | Mapping[bytes, int] | str | os.PathLike[str],
        name: str,
        vocab_sizes: int | Sequence[int],
        special_tokens: Sequence[str] | None = None,
        *,
        min_count: int | None = None,
        progress: bool = False,
        max_memory: int | None = None,
        base: str | None = None,
        special_tokens_at: SpecialTokensAt = "start",
    ) -> list[str]:
        """:meth:`train` on pre-token counts made anywhere: :class:`~bpestore.train.counts.Counts`
        (counted on Dask, say), a Parquet file of ``pretoken``/``word`` and ``count`` columns (as
        Spark or Ray write them) or a ``word<TAB>count`` text file
        (:func:`~bpestore.train.counts.read_counts`). The counts are stored as a corpus (its
        identity the hash of the counts, its path where they came from) and train like any other.
        ``special_tokens``: the counts' own by default; others are refused. ``min_count``: only
        the pre-tokens counted at least that often (the pruned counts are the corpus stored).
        ``special_tokens_at``: as for :meth:`train`."""
        self.check_writable()
        counts = as_counts(counts, special_tokens=special_tokens)
        special_tokens = check_training_specials(counts, special_tokens)
        if min_count is not None:
            counts = counts.pruned(min_count)
        return self.train(
            counts, name, vocab_sizes, special_tokens, progress=progress, max_memory=max_memory, base=base, special_tokens_at=special_tokens_at
        )

    def train(
        self,
        corpus: Recipe | str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | Counts | CorpusInfo,
        name: str,
        vocab_sizes: int | Sequence[int] | None = None,
        special_tokens: Sequence[str] = (),
        *,
        workers: int | None = None,
        progress: bool = False,
        max_memory: int | None = None,
        base: str | None = None,
        counting: CountingBackend | None = None,
        on_counted: Callable[[], object] | None = None,
        pattern: str | None = None,
        special_tokens_at: SpecialTokensAt = "start",
        min_count: int | None = None,
        count_memory: int | None = None,
        spill_dir: str | os.PathLike[str] | None = None,
        warm_entries: int = warming.DEFAULT_WARM_ENTRIES,
        tie_break: TieBreak = "cs336",
        stages: Sequence[Stage | tuple[str, int]] | None = None,
    ) -> list[str]:
        """Train on ``corpus`` and store one version of ``name`` per vocab size; or, ``corpus``
        a :class:`~bpestore.train.recipe.Recipe`, train that recipe and store one version (the
        options it decides, ``vocab_sizes`` to ``min_count``, left out: RecipeError otherwise).
        The keyword form builds a recipe of its own; each tokenizer is stored with the recipe that
        reproduces it (``training_params["recipe"]``, :meth:`recipe_of`). The work is
        :func:`bpestore.train.stages.train`'s (one stage: :func:`bpestore.train.through_store.train`).

        ``corpus``: a text file, or a list of files, directories and globs, ``.gz``/``.xz``/``.zst``
        files among them, counted as one corpus (no pre-token spans two files; see
        :mod:`bpestore.pretokenize.inputs`); or a corpus the store holds (:meth:`corpus_of`: its
        counts are read back, nothing is counted). One merge run serves every size (a smaller vocab's
        merges are a prefix of a larger one's). The corpus's pre-token counts are stored first
        (:meth:`count`), and reused when the same content is trained on again with the same
        special tokens, skipping pre-tokenization; a training interrupted after counting
        (Ctrl-C: :class:`TrainingInterrupted`) keeps them. ``max_memory``: refuse (a
        :class:`~bpestore.train.memory.MemoryLimitError`, before merging) when the merge loop's
        estimated memory (:func:`estimate_training`) is above this many bytes. Returns the new
        refs, in the order of ``vocab_sizes``.

        ``counting``: a :class:`~bpestore.train.backends.CountingBackend` to count the corpus
        with (for example :class:`bpestore.distributed.count.DaskCounting`), instead of this
        process's threads; see :meth:`count`. Every backend's counts are the same, so are the
        merges. ``on_counted()``: called once the counts are at hand (counted and being saved, or
        read back) and before the merge loop starts (the moment from which Ctrl-C keeps them).

        ``pattern``: the pre-tokenizer, by name (``gpt2``, ``cl100k_base``, ``o200k_base``) or
        regex (see :func:`~bpestore.train.trainer.train_bpe`); by default GPT-2's, or the one the
        counts were made with (counts given, a stored corpus), or the base's; asking for another
        than theirs is a ValueError. It is stored with each tokenizer, which encodes with it.
        ``special_tokens_at``: ``"start"`` (CS336's ids 0..k-1) or ``"end"`` (after the last
        merge's token, as GPT-2's and tiktoken's; with a base, its new special tokens after the new
        merges'). ``min_count``: merge only the pre-tokens counted at least that often (the
        corpus's full counts are stored all the same, and reused by trainings without it).
        ``count_memory`` and ``spill_dir``: count in bounded memory, as :meth:`count` does.
        ``tie_break``: how pairs of equal counts are ordered: ``"cs336"`` (the lexicographically
        greatest pair of byte strings) or ``"huggingface"`` (Hugging Face ``BpeTrainer``'s merges
        exactly, for the same pre-tokens: its smallest pair of token ids; not with ``base``).
        ``warm_entries``: each tokenizer is stored with the ids of the corpus's that many most
        frequent pre-tokens (its warm table, :mod:`bpestore.encode.warm`), so that a loaded
        tokenizer does not merge them again; 0 stores none.

        ``base`` (a ref, ``name@N``): continue that stored tokenizer's training. The new one keeps
        its vocabulary, ids and merges exactly, in order (so a model's embedding table can be
        extended), then learns further merges from this corpus's counts, its words first split by
        the base's merges; the base's special tokens keep their ids, new ones get the next free
        ids, and each vocab size counts them all. The base's ref is kept in the training
        parameters (``base``). Any base continues with its own pattern (the corpus is counted
        with it) and its own merge rule: a pair-rule base (trained here, GPT-2, Hugging Face)
        replays its merges on the words; a token-rule base (tiktoken's files: cl100k_base,
        o200k_base) splits each word as tiktoken encodes it, and the result keeps the token
        rule, its new tokens ranked after all the base's, so that text whose pre-tokens no new
        token can join encodes to exactly the base's ids.

        ``stages`` (instead of ``vocab_sizes`` and ``pattern``): a training in two stages, each a
        :class:`~bpestore.train.recipe.Stage` or a ``(pattern, vocab_size)`` pair: SuperBPE's is
        :func:`~bpestore.train.stages.superbpe_stages` (see :mod:`bpestore.train.stages`). The
        corpus is files (stage 2 splits their text anew); the counts of each stage are stored
        and reused.

        A recipe with :attr:`~bpestore.train.recipe.Recipe.parity` trains parity-aware BPE
        (:mod:`bpestore.train.parity`): each language's inputs are counted (and stored) as a
        corpus of their own; :func:`~bpestore.train.parity.languages_of_files` makes its
        languages from files.
        """
        check_name(name)
        warming.check_entries(warm_entries)
        run = TrainingRun(workers, progress, max_memory, counting, on_counted, count_memory, spill_dir, warm_entries)
        if isinstance(corpus, Recipe):
            check_recipe_options(
                corpus, {}, vocab_sizes=vocab_sizes, special_tokens=special_tokens, base=base, pattern=pattern,
                special_tokens_at=None if special_tokens_at == "start" else special_tokens_at, min_count=min_count,
                tie_break=None if tie_break == "cs336" else tie_break,
            )
            if corpus.parity is not None:  # one corpus per language
                corpora = [self._inputs_of(replace(corpus, inputs=language.inputs)) for language in corpus.parity.languages]
                return parity_training.train(self, name, corpus, corpora, None, run)
            return stages_training.train(self, self._inputs_of(corpus), name, corpus, None, run)
        specials = tuple(training.check_special_tokens(special_tokens))
        if stages is not None:
            if vocab_sizes is not None or pattern is not None:
                raise ValueError("stages name each stage's pattern and vocab size: give no vocab_sizes or pattern with them")
            steps = tuple(_stage_of(stage) for stage in stages)
            recipe = Recipe((), steps, specials, special_tokens_at, min_count, tie_break, base)
            return stages_training.train(self, corpus, name, recipe, None, run)
        sizes = training.check_vocab_sizes(vocab_sizes)  # (None: refused there)
        recipe = Recipe((), (Stage(max(sizes), pattern),), specials, special_tokens_at, min_count, tie_break, base)
        return stages_training.train(self, corpus, name, recipe, sizes, run)

    def recipe_of(self, ref: str) -> Recipe:
        """The recipe that reproduces the stored tokenizer ``ref``; RecipeError for one stored
        without (imported, reshaped, or trained before recipes were recorded)."""
        info = self.info(ref)
        data = (info.training_params or {}).get("recipe")
        if data is None:
            raise RecipeError(f"{info.ref} has no recipe: it was {info.source}" + (" before recipes were stored" if info.source == "trained" else ""))
        return recipe_from_dict(data, f"the recipe stored with {info.ref}")

    def _inputs_of(self, recipe: Recipe) -> CorpusFiles | CorpusInfo:
        """What a recipe's inputs name: its files (their content checked against the recipe), or
        the stored corpus of that identity counted with the recipe's pattern and special tokens."""
        stored = [item for item in recipe.inputs if isinstance(item, StoredCorpusInput)]
        if not stored:
            return input_files(recipe)
        regex = training.training_pattern(recipe.stages[0].pattern or "gpt2")
        specials = set(recipe.special_tokens)
        for info in self.corpora():
            if info.sha256 == stored[0].corpus_sha256 and info.pattern == regex and set(info.special_tokens) == specials:
                return info
        raise RecipeError(
            f"no corpus {stored[0].corpus_sha256[:12]}... counted with {_pattern_described(regex)} and the special tokens "
            f"{list(recipe.special_tokens)} in {self.location}"
        )

    # What training needs of the store besides its storage (:class:`~bpestore.train.through_store.TrainingStore`).

    def _ref_of(self, ref: str) -> str:
        return self.info(ref).ref

    def _pattern_of(self, corpus: object, pattern: str | None, base: BPEModel | None) -> str:
        return _pattern_of_training(corpus, pattern, base)

    def _described(self, corpus: object) -> str:
        return _corpus_described(corpus)

    def _warm_source_of_counts(self, counts: PretokenCounts, entries: int) -> warming.WarmSource:
        return warming.from_training_counts(counts, entries)

    def _warm_table(self, model: BPEModel, source: warming.WarmSource, entries: int) -> StoredWarm | None:
        return warming.make(Tokenizer.from_model(model), source, entries)

    def _same_training(
        self, corpus_id: int | None, special_tokens: Sequence[str], max_merges: int, min_count: int | None, tie_break: str = "cs336",
    ) -> tuple[str, list[tuple[bytes, bytes]]] | None:
        """A stored training of corpus ``corpus_id`` (its counts, pattern and special tokens, in
        this order, no base, the same ``min_count``) whose merges include the first
        ``max_merges`` of this training's: it has that many, or stopped sooner because no pair
        was left. Returns its ref and those merges, or None."""
        if corpus_id is None:
            return None
        for info in sorted(self.tokenizers_trained_on(corpus_id), key=lambda info: -info.num_merges):
            params = info.training_params or {}
            if info.base_ref is not None or info.merge_rule != "pair" or info.special_tokens != list(special_tokens):
                continue
            if params.get("min_count") != min_count:  # other counts were merged
                continue
            if params.get("tie_break", "cs336") != tie_break:  # equal counts ordered otherwise
                continue
            stages = params.get("recipe", {}).get("stages", ())
            if len(stages) > 1 or any("max_words" in stage for stage in stages):  # other counts, or pairs left out
                continue
            asked = params.get("vocab_size")
            ran_out = isinstance(asked, int) and info.num_merges < training.max_merges(asked, special_tokens)
            if info.num_merges >= max_merges or ran_out:
                return info.ref, self.load_model(info.ref).merges[:max_merges]
        return None

    def estimate_training(
        self,
        corpus: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | Counts | CorpusInfo,
        vocab_size: int,
        special_tokens: Sequence[str] = (),
        *,
        workers: int | None = None,
        progress: bool = False,
        base: str | None = None,
        counting: CountingBackend | None = None,
        pattern: str | None = None,
        min_count: int | None = None,
        count_memory: int | None = None,
        spill_dir: str | os.PathLike[str] | None = None,
    ) -> tuple[CorpusCounts, MemoryEstimate]:
        """A dry run: count ``corpus`` (or reuse its stored counts; new counts are saved) and
        estimate the merge loop's memory for ``vocab_size`` (continuing ``base``, if given; with
        ``pattern``, ``min_count``, ``count_memory`` and ``spill_dir`` as :meth:`train` takes
        them), without merging."""
        special_tokens = training.check_special_tokens(special_tokens)
        training.check_vocab_size_type(vocab_size)
        check_workers(workers)
        min_count = training.check_min_count(min_count)
        base_model = None
        if base is None:
            training.check_vocab_size(vocab_size, special_tokens)
            merges = training.max_merges(vocab_size, special_tokens)
        else:
            base_ref = self.info(base).ref
            base_model = self.load_model(base_ref)
            special_tokens = continued.check_base(base_ref, base_model, special_tokens, [vocab_size])
            merges = continued.replayed_merges(base_model) + continued.max_merges(vocab_size, special_tokens, base_model)
        regex = _pattern_of_training(corpus, pattern, base_model)
        counted = self.count(
            corpus, continued.cut_tokens(special_tokens, base_model), workers=workers, progress=progress, pattern=regex,
            counting=counting, count_memory=count_memory, spill_dir=spill_dir,
        )
        return counted, estimate_merge_memory(training.pruned_to(counted.counts, min_count, _corpus_described(corpus)), merges)

    def compare(
        self,
        refs: Sequence[str],
        corpus: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        *,
        progress: bool = False,
    ) -> TokenizerComparison:
        """Compare stored tokenizers, each with the first, and measure them on ``corpus`` if
        given; see :func:`compare_tokenizers`."""
        resolved = [self.info(ref).ref for ref in refs]  # every ref checked before any is loaded
        return compare_tokenizers([(ref, self.load(ref)) for ref in resolved], corpus, progress=progress)

    def diff(
        self,
        ref_a: str,
        ref_b: str,
        corpus: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        *,
        progress: bool = False,
    ) -> TokenizerDiff:
        """Compare two stored tokenizers, and measure them on ``corpus`` (a text file or several)
        if given; see :class:`TokenizerDiff`."""
        info_a, info_b = self.info(ref_a), self.info(ref_b)
        return diff_tokenizers(info_a.ref, self.load(info_a.ref), info_b.ref, self.load(info_b.ref), corpus, progress=progress)

    def evaluate(
        self,
        refs: str | Sequence[str],
        corpora: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        reference: str | os.PathLike[str] | None = None,
        alpha: float = DEFAULT_RENYI_ALPHA,
        recompute: bool = False,
        progress: bool = False,
    ) -> EvaluationResult:
        """Measure each stored tokenizer of ``refs`` on each text file of ``corpora`` (a file per
        language makes a per-language table): bytes, characters and tokens per word, the Rényi
        efficiency of order ``alpha``, the vocabulary used, the single-token-word rate (see
        :mod:`bpestore.metrics`), and the parity of each file against ``reference`` (one of the
        files, by path or name; default the first): its tokens over the reference's, with the
        same tokenizer, meaningful when the files say the same thing in different languages.

        Each tokenizer's measurement of each file is kept in the store (the ``evaluations``
        table), identified by the tokenizer, the file's content (sha256, whatever its name) and
        ``alpha``; a later evaluation reads it back instead of encoding the file again
        (:attr:`EvaluationRow.reused`), unless ``recompute``, which measures again and replaces
        it. On a store that cannot be written nothing is kept (:attr:`EvaluationResult.stored`
        is False). Everything is checked before anything is encoded: every ref (TokenizerNotFoundError),
        every file (FileNotFoundError; ValueError for an empty one or one given twice), the
        reference and ``alpha`` (ValueError)."""
        refs = [refs] if isinstance(refs, str) else list(refs)
        if not refs:
            raise ValueError("give at least one tokenizer to evaluate")
        alpha = evaluating.check_alpha(alpha)
        resolved = [self.info(ref).ref for ref in refs]
        refs = list(dict.fromkeys(resolved))  # the same tokenizer named twice is one
        files, reference_index = evaluating.evaluated_files(
            [corpora] if isinstance(corpora, (str, os.PathLike)) else list(corpora), reference
        )
        stored = self.read_only_reason is None
        found: dict[tuple[str, str], tuple[Evaluation, bool]] = {}
        for ref in refs:
            if not recompute:
                for kept in self.evaluations(ref, alpha=alpha):
                    found[(ref, kept.sha256)] = (kept, True)
            tokenizer: Tokenizer | None = None
            for file in files:
                if (ref, file.sha256) in found:
                    continue
                if tokenizer is None:
                    tokenizer = self.load(ref)
                measured = measure_file_with_progress(tokenizer, file.resolved, progress=progress, description=f"{file.label} with {ref}")
                evaluation = evaluating.evaluation_of(ref, file, measured, alpha)
                if stored:
                    evaluation = self.save_evaluation(evaluation, replace=recompute)
                found[(ref, file.sha256)] = (evaluation, False)
        rows = evaluating.with_parity(refs, files, reference_index, found)
        return EvaluationResult(refs, files, files[reference_index].label, alpha, rows, stored)

    # -- warm tables: the pre-tokens a stored tokenizer works out ahead ------------------------

    def warm(
        self,
        ref: str,
        files: Sequence[str | os.PathLike[str]] = (),
        *,
        entries: int = warming.DEFAULT_WARM_ENTRIES,
        workers: int | None = None,
        progress: bool = False,
    ) -> tuple[str, StoredWarm | None]:
        """(Re)make the warm table of the stored tokenizer ``ref`` (:mod:`bpestore.encode.warm`):
        the ids of the ``entries`` most frequent pre-tokens of ``files`` (counted with the
        tokenizer's pattern and special tokens); without files, of the corpus it was trained on
        (its stored counts), or for a tokenizer without one (an import), of its vocabulary's
        tokens that are whole pre-tokens. Replaces any table it had; returns the tokenizer's full
        ref and the table (None, and no table kept, when there are no pre-tokens or ``entries``
        is 0)."""
        self.check_writable()
        info = self.info(ref)
        model = self.load_model(info.ref)
        if files:
            source = warming.from_files(model, files, entries, workers=workers, progress=progress)
        else:
            source = self._warm_source(info, model, entries)
        with progress_step(progress, f"merging {min(entries, len(source.pieces)):,} pre-tokens"):
            table = warming.make(Tokenizer.from_model(model), source, entries)
        if table is None:
            self.delete_warm(info.ref)
        else:
            self.save_warm(info.ref, table)
        return info.ref, table

    def _warm_source(self, info: TokenizerInfo, model: BPEModel, entries: int) -> warming.WarmSource:
        """The pre-tokens for a warm table of ``model`` (the stored tokenizer ``info``, or one
        made from it) when no files are named: the most frequent of the corpus ``info`` was
        trained on (for a reshaped tokenizer, the one it was reshaped from was), or, without one,
        ``model``'s vocabulary's whole pre-tokens."""
        seen = {info.ref}
        while info.corpus_sha256 is None and info.reshaped_from is not None and info.reshaped_from not in seen:
            try:  # (a reshaped tokenizer's corpus is its origin's, if that is still stored)
                info = self.info(info.reshaped_from)
            except LookupError:
                break
            seen.add(info.ref)
        if info.corpus_sha256 is not None:
            counts = self.pretoken_counts(self.corpus_of(info.ref).id)
            return warming.from_training_counts(counts, entries)
        return warming.from_vocab(model, entries)

    def warm_status(self, ref: str, model: BPEModel | None = None) -> dict[str, Any] | None:
        """What ``show`` tells of the warm table of ``ref`` (``model``: the tokenizer, if loaded
        already): its pre-tokens, where they came from, and whether it is stale (made for
        another model or bpestore version: unused); None without one."""
        stored = self.warm_of(ref, data=False)
        if stored is None:
            return None
        model = model if model is not None else self.load_model(ref)
        fingerprint = Tokenizer.from_model(model).fingerprint
        return {
            "entries": stored.entries, "source": stored.source, "stale": stored.fingerprint != fingerprint,
            "unused": not warming.useful(model.merge_rule, stored.source),
        }

    # -- reshaping: a new version derived from a stored one, with its id map -----------------

    def trim(
        self, ref: str, vocab_size: int, name: str | None = None, *, map_out: MapPrefix | None = None
    ) -> tuple[str, IdMap]:
        """Store ``ref`` trimmed to ``vocab_size`` tokens (:func:`bpestore.reshape.trim`: its
        first merges, or a token-rule tokenizer's lowest ranks; exactly the training to that size
        from the same counts) as the next version of ``name`` (default: ``ref``'s name). Returns
        the new ref and the :class:`~bpestore.reshape.IdMap` from ``ref``'s ids to its ids; with
        ``map_out`` (a path prefix, or a function of the new ref giving one) the map is also written to ``PREFIX.npy`` and ``PREFIX.json``,
        which appear only if the tokenizer is stored (and it is stored only if they can be
        written). The lineage is kept in the training parameters (``reshaped_from``, ``how``,
        ``vocab_size``) and the source (``trimmed from REF``).

        Raises:
            ValueError: ``vocab_size`` below the 256 bytes and the special tokens, or above the
                tokenizer's size (checked before anything is written).
        """
        from . import reshape

        self.check_writable()
        info = self.info(ref)
        check_name(name or info.name)
        model, id_map = reshape.trim(self.load_model(info.ref), vocab_size)
        params = {"reshaped_from": info.ref, "how": "trim", "vocab_size": vocab_size}
        return self._save_reshaped(name or info.name, model, id_map, params, f"trimmed from {info.ref}", map_out)

    def drop_unused(
        self,
        ref: str,
        corpus: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        name: str | None = None,
        *,
        map_out: MapPrefix | None = None,
    ) -> tuple[str, IdMap]:
        """Store ``ref`` without the tokens that encoding ``corpus`` (UTF-8 text files,
        directories or globs) never uses, nor the merges only they need
        (:func:`bpestore.reshape.drop_unused`: the corpus encodes to the same tokens, any text
        still encodes), as the next version of ``name`` (default: ``ref``'s name). Returns the new
        ref and the id map, written to ``map_out`` as by :meth:`trim`. Lineage: ``reshaped_from``,
        ``how: "drop-unused"`` and the corpus files in the training parameters."""
        from . import reshape
        from .pretokenize.inputs import expand_inputs

        self.check_writable()
        info = self.info(ref)
        check_name(name or info.name)
        files = expand_inputs(corpus)  # every file checked before any is encoded
        model, id_map = reshape.drop_unused(self.load_model(info.ref), files)
        params = {"reshaped_from": info.ref, "how": "drop-unused", "corpus": [str(path.resolve()) for path in files]}
        return self._save_reshaped(name or info.name, model, id_map, params, f"unused tokens of {info.ref} dropped", map_out)

    def add_tokens(
        self, ref: str, tokens: Sequence[str], name: str | None = None, *, map_out: MapPrefix | None = None
    ) -> tuple[str, IdMap]:
        """Store ``ref`` with the added tokens ``tokens`` (:func:`bpestore.reshape.add_tokens`:
        user-defined tokens, always encoded whole like special tokens but ordinary, as Hugging
        Face's non-special added tokens) as the next version of ``name`` (default: ``ref``'s
        name). A token new to the vocab gets the next id after the largest, in the order given; one
        whose bytes are already a token keeps its id. Returns the new ref and the id map (the
        identity on ``ref``'s ids; ``IdMap.added`` names each token's id), written to ``map_out`` as
        by :meth:`trim`. Lineage: ``reshaped_from``, ``how: "add-tokens"`` and ``tokens`` in the
        training parameters.

        Raises:
            ValueError: an empty token, one given twice, one that is a special token, or only
                tokens that are already added tokens (checked before anything is written).
        """
        from . import reshape

        self.check_writable()
        info = self.info(ref)
        check_name(name or info.name)
        model, id_map = reshape.add_tokens(self.load_model(info.ref), tokens)
        params = {"reshaped_from": info.ref, "how": "add-tokens", "tokens": list(tokens)}
        return self._save_reshaped(name or info.name, model, id_map, params, f"tokens added to {info.ref}", map_out)

    def _is_stored(self, ref: str) -> bool:
        try:
            self.info(ref)
        except StoreError:
            return False
        return True

    def _save_reshaped(
        self, name: str, model: BPEModel, id_map: IdMap, params: dict[str, Any], source: str, map_out: MapPrefix | None
    ) -> tuple[str, IdMap]:
        """Save a reshaped model and, with ``map_out``, its id map: the map's files are written
        beside their names first and appear once the tokenizer is stored (neither without the other)."""
        from . import reshape

        id_map = id_map.with_refs(params["reshaped_from"], None)
        # Its warm table: the pre-tokens the tokenizer it comes from would have (its corpus's).
        entries = warming.DEFAULT_WARM_ENTRIES
        warm = warming.make(Tokenizer.from_model(model), self._warm_source(self.info(params["reshaped_from"]), model, entries), entries)
        if map_out is None:
            new_ref = self.save(name, model, source=source, training_params=params, warm=warm)
        else:
            # The map's files are renamed into place inside the transaction that stores the
            # tokenizer, last: a map that cannot be written (a directory in its place, a name too
            # long) stores nothing, and a failure after the rename removes them again.
            with reshape.id_map_writer(map_out, id_map, is_stored=self._is_stored) as writer:
                new_ref = self.save(name, model, source=source, training_params=params, warm=warm, before_commit=writer.place)
        return new_ref, id_map.with_refs(params["reshaped_from"], new_ref)


def remap_file(
    map_path: str | os.PathLike[str], ids_path: str | os.PathLike[str], output: str | os.PathLike[str]
) -> tuple[int, str]:
    """Write ``ids_path``'s ids (a ``.npy`` that ``encode`` wrote) through the id map at
    ``map_path`` (its ``.npy`` or ``.json``) to ``output`` (``.npy``, atomic: uint16 when every
    new id fits, else uint32); returns the number of ids and the dtype. ValueError in one line
    for an id the map does not have (its position named), or a file that is not what it should be."""
    import numpy as np

    from . import reshape

    to_stdout = os.fspath(output) == "-"
    if not to_stdout:
        inputs = [Path(map_path), Path(map_path).with_suffix(".npy"), Path(map_path).with_suffix(".json"), Path(ids_path)]
        if any(_same_file(Path(output), given) for given in inputs):
            raise ValueError(f"{output}: the output may not be one of the inputs (the map, its other file, or the ids)")
    id_map = reshape.load_id_map(map_path)
    ids = read_npy_ids(ids_path)
    try:
        new = reshape.remap(id_map, ids)
    except ValueError as error:
        raise ValueError(f"{ids_path}: {error}") from None
    if to_stdout:  # as `encode -o -`: the .npy on standard output
        np.save(sys.stdout.buffer, new, allow_pickle=False)
        sys.stdout.buffer.flush()
        return len(new), str(new.dtype)
    with atomic_path(output) as temporary:
        with open(temporary, "xb") as file:
            np.save(file, new, allow_pickle=False)
    return len(new), str(new.dtype)


def check_output_path(path: str | os.PathLike[str]) -> None:
    """OutputError naming ``path`` when an output could not be written there, found before any
    work: a directory, a device or pipe (:func:`~bpestore.atomic.check_output_target`), or a
    missing directory."""
    import errno

    from .atomic import check_output_target
    from .errors import OutputError

    check_output_target(path)
    target = Path(path)
    if target.is_dir():
        raise OutputError(errno.EISDIR, "Is a directory", os.fspath(path))
    if not target.parent.is_dir():
        raise OutputError(errno.ENOENT, f"no directory {target.parent}", os.fspath(path))


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (the same path resolved, or the same inode: a link)."""
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def check_recipe_options(
    recipe: Recipe, names: Mapping[str, str], *, vocab_sizes: object = None, special_tokens: Sequence[str] = (), base: str | None = None,
    pattern: str | None = None, special_tokens_at: str | None = None, min_count: int | None = None, tie_break: str | None = None,
) -> None:
    """RecipeError (one line) for an option given with ``recipe`` that contradicts it (one given
    with the recipe's own value is fine). ``names``: how the caller spells each option (the CLI's
    ``--vocab-size``, or Python's keywords), by keyword."""
    sizes = [vocab_sizes] if isinstance(vocab_sizes, int) else vocab_sizes
    contradicted = [
        keyword for keyword, differs in [
            ("vocab_sizes", sizes is not None and list(sizes) != [recipe.vocab_size]),  # type: ignore[call-overload]
            ("special_tokens", bool(special_tokens) and tuple(special_tokens) != recipe.special_tokens),
            ("base", base is not None and base != recipe.base),
            ("pattern", pattern is not None and training.training_pattern(pattern) != training.training_pattern(recipe.pattern or "gpt2")),
            ("special_tokens_at", special_tokens_at is not None and special_tokens_at != recipe.special_tokens_at),
            ("min_count", min_count is not None and min_count != recipe.min_count),
            ("tie_break", tie_break is not None and tie_break != recipe.tie_break),
        ] if differs
    ]
    if contradicted:
        listed = ", ".join(names.get(keyword, keyword) for keyword in contradicted)
        raise RecipeError(f"{listed} contradict{'s' if len(contradicted) == 1 else ''} the recipe: leave {'it' if len(contradicted) == 1 else 'them'} out, or change the recipe")


def _stage_of(stage: object) -> Stage:
    """A stage given as a Stage or ``(pattern, vocab_size)``, checked."""
    if isinstance(stage, Stage):
        stage = (stage.pattern, stage.vocab_size, stage.max_words)
    max_words = None
    if isinstance(stage, tuple) and len(stage) == 3:
        *pair, max_words = stage
        stage = tuple(pair)
        if max_words is not None and (isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1):
            raise ValueError(f"max_words must be a positive integer, not {max_words!r}")
    if not isinstance(stage, (tuple, list)) or len(stage) != 2 or not isinstance(stage[0], str):
        raise TypeError(f"a stage is a (pattern, vocab_size) pair, not {stage!r}")
    training.check_vocab_size_type(stage[1])
    training.training_pattern(stage[0])  # a known name or a regex that compiles
    return Stage(stage[1], stage[0], max_words)


def _pattern_of_training(corpus: object, pattern: str | None, base: BPEModel | None) -> str:
    """The regex a training (or a count) pre-tokenizes with: the one asked for (a name or a
    regex: :func:`~bpestore.train.trainer.training_pattern`), else the base's, the counts' given
    or the stored corpus's own, else GPT-2's. ValueError when the one asked for is not the
    base's (a continued training counts as its base encodes)."""
    if pattern is None:
        if base is not None:
            return base.pattern
        return corpus.pattern if isinstance(corpus, (Counts, CorpusInfo)) else GPT2_PATTERN
    regex = training.training_pattern(pattern)
    if base is not None and regex != base.pattern:
        raise ValueError(
            f"a continued training pre-tokenizes as its base does, with {_pattern_described(base.pattern)}, not {_pattern_described(regex)}"
        )
    return regex


def _pattern_described(pattern: str) -> str:
    """A pattern in a message: its name if it has one, else the regex."""
    name = name_of_pattern(pattern)
    return name if name is not None else repr(pattern)


def _corpus_described(corpus: object) -> str:
    """How a message names what a training trains on."""
    if isinstance(corpus, CorpusInfo):
        return f"corpus {corpus.id}"
    if isinstance(corpus, Counts):
        return corpus.source or "the counts given"
    return training.describe_corpus(corpus)


def load_tokenizer(store: str | os.PathLike[str], ref: str) -> Tokenizer:
    """The tokenizer ``ref`` from the store at ``store``, by the one loader (the fast SQLite path
    first), with its warm table; a store that does not exist is an error, never created."""
    return Tokenizer.from_db(store, ref)


def import_into_store(
    store: str | os.PathLike[str], name: str, format: str, *paths: str | os.PathLike[str], lock_timeout: float | None = None,
    save_progress: bool = False, warm_entries: int = warming.DEFAULT_WARM_ENTRIES, **options: Any,
) -> tuple[str, formats.Imported]:
    """Read ``format``'s files (see :func:`bpestore.formats.read`; ``options`` are its) and store
    the tokenizer as the next version of ``name``; returns the new ref and what the import found.
    Nothing is stored unless the whole input is understood; the files are read before the store's
    write lock is taken (``lock_timeout``: see :class:`Store`). ``save_progress``: a line while
    the files are read and the model checked (seconds for GPT-2's, with nothing else to show),
    then a bar while the vocab and merges are written. ``warm_entries``: the tokenizer is stored
    with a warm table of that many of its vocabulary's tokens that are whole pre-tokens
    (:func:`bpestore.encode.warm.from_vocab`; 0: none); ``Store.warm`` remakes it from a corpus."""
    warming.check_entries(warm_entries)
    names = ", ".join(Path(path).name for path in paths)
    with progress_step(save_progress, f"reading and checking {names}"):
        imported = formats.read(format, *paths, **options)
    with progress_step(save_progress and warm_entries > 0, "working out the warm table"):
        table = warming.make(Tokenizer.from_model(imported.model), warming.from_vocab(imported.model, warm_entries), warm_entries)
    with Store(store, lock_timeout=lock_timeout) as opened:
        ref = opened.save(
            name, imported.model, source_format=imported.format, source_paths=imported.paths, progress=save_progress, warm=table
        )
    return ref, imported


@contextmanager
def atomic_output(path: str | os.PathLike[str], mode: str = "w", **open_options: Any) -> Iterator[IO[Any]]:
    """A file opened for writing that appears as ``path`` only once the block completes (see
    :func:`atomic_path`): a failure part-way leaves no partial ``path`` and no temporary file."""
    with atomic_path(path) as temporary:
        # "x": create it, never write through something already there
        with open(temporary, mode.replace("w", "x"), **open_options) as file:
            yield file


def export_from_store(store: str | os.PathLike[str], ref: str, format: str, output: str | os.PathLike[str]) -> list[str]:
    """Write the stored tokenizer ``ref`` in ``format`` (see :func:`bpestore.formats.export`,
    atomic: the output appears only once complete); returns notes."""
    formats.get(format)  # an unknown format is refused before anything is read
    return formats.export(loader.load_model(store, ref), format, output)


def encode_to(
    tokenizer: Tokenizer,
    source: str | os.PathLike[str] | BinaryIO,
    output: str | os.PathLike[str],
    *,
    workers: int | None = None,
    progress: bool = False,
    allowed_special: Literal["all"] | AbstractSet[str] = "all",
    disallowed_special: Literal["all"] | Collection[str] = "all",
    dropout: float | None = None,
    seed: int = 0,
) -> int:
    """Encode UTF-8 text from ``source`` (a file path or a binary stream such as stdin) into the
    NumPy array file ``output`` (``.npy``); returns the number of ids. A file path is encoded in
    parallel on ``workers`` threads, in bounded memory. ``allowed_special`` and
    ``disallowed_special``: the special-token policy of :meth:`Tokenizer.encode` (another than
    the default encodes a stream, on one thread). ``dropout``, ``seed``: BPE-dropout, each
    pre-token seeded by its offset in the input (the same ids from a file as from a stream)."""
    path = source if isinstance(source, (str, os.PathLike)) else None  # (else a stream)
    # (a pipe or a device is read once, as a stream: the parallel path splits a file by offsets)
    if path is not None and allowed_special == "all" and disallowed_special == "all" and not is_stream_path(path):
        return encode_file_to_npy(tokenizer, path, output, workers=workers, progress=progress, dropout=dropout, seed=seed)
    with _file_named_in_pattern_errors(path):
        return write_npy_stream(
            tokenizer, _text_blocks(source, path, progress), output, allowed_special=allowed_special, disallowed_special=disallowed_special,
            dropout=dropout, seed=seed,
        )


def encode_stream(
    tokenizer: Tokenizer,
    source: str | os.PathLike[str] | BinaryIO,
    *,
    progress: bool = False,
    allowed_special: Literal["all"] | AbstractSet[str] = "all",
    disallowed_special: Literal["all"] | Collection[str] = "all",
    dropout: float | None = None,
    seed: int = 0,
) -> Iterator[npt.NDArray[np.uint32]]:
    """The ids of UTF-8 text from ``source`` (a file path or a binary stream such as stdin), a
    block at a time, read as they are used (for output that is not an array: text, say; to a
    file, through :func:`atomic_output`, so that an input that turns out to be bad late, a full
    disk or Ctrl-C leaves no partial file). The special-token policy and dropout as for
    :func:`encode_to`."""
    path = source if isinstance(source, (str, os.PathLike)) else None
    with _file_named_in_pattern_errors(path):
        yield from tokenizer.encode_blocks(
            _text_blocks(source, path, progress), allowed_special=allowed_special, disallowed_special=disallowed_special,
            dropout=dropout, seed=seed,
        )


def decode_array(tokenizer: Tokenizer, ids: npt.NDArray[Any], *, block: int = 1 << 20) -> bytes:
    """The bytes of an array of ids (:func:`read_npy_ids`'), decoded a block at a time (a list of
    Python ints per block, not per array); ValueError naming the first id outside the vocab."""
    return b"".join(tokenizer.decode_bytes(ids[start : start + block].tolist()) for start in range(0, len(ids), block))


@dataclass(frozen=True)
class TokenCount:
    """How many tokens a text is (``bpestore encode --count``), with its size to judge it by."""

    tokens: int
    bytes: int
    characters: int

    @property
    def bytes_per_token(self) -> float | None:
        return metrics.bytes_per_token(self.bytes, self.tokens)

    def to_dict(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "bytes": self.bytes, "characters": self.characters, "bytes_per_token": self.bytes_per_token}


def count_tokens(
    tokenizer: Tokenizer,
    source: str | os.PathLike[str] | BinaryIO,
    *,
    progress: bool = False,
    allowed_special: Literal["all"] | AbstractSet[str] = "all",
    disallowed_special: Literal["all"] | Collection[str] = "all",
    dropout: float | None = None,
    seed: int = 0,
) -> TokenCount:
    """Encode UTF-8 text from ``source`` (a file path or a binary stream), as :func:`encode_stream`
    does (dropout included), and count its tokens, bytes and characters, in bounded memory."""
    path = source if isinstance(source, (str, os.PathLike)) else None
    sizes = _Sizes()
    tokens = 0
    with _file_named_in_pattern_errors(path):
        for ids in tokenizer.encode_blocks(
            _text_blocks(source, path, progress, sizes), allowed_special=allowed_special, disallowed_special=disallowed_special,
            dropout=dropout, seed=seed,
        ):
            tokens += len(ids)
    return TokenCount(tokens=tokens, bytes=sizes.bytes, characters=sizes.characters)


class _Sizes:
    """The bytes and characters of a text read so far."""

    def __init__(self) -> None:
        self.bytes = 0
        self.characters = 0


def _text_blocks(
    source: str | os.PathLike[str] | BinaryIO, path: str | os.PathLike[str] | None, progress: bool, sizes: _Sizes | None = None
) -> Iterator[str]:
    """The text of ``source`` a block at a time, with a bar of the bytes read when asked for;
    ``sizes`` adds up the bytes and characters read."""
    total = os.path.getsize(check_corpus_path(path, streams=True)) if path is not None and not is_stream_path(path) else None
    with progress_bar(progress, total, "encoding", unit="B", unit_scale=True) as bar:
        if sizes is None:
            yield from iter_text_blocks(source, on_bytes=bar.update)
            return

        def read(n: int) -> None:
            sizes.bytes += n
            bar.update(n)

        for block in iter_text_blocks(source, on_bytes=read):
            sizes.characters += len(block)
            yield block


@contextmanager
def _file_named_in_pattern_errors(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """A stream's PatternError offsets are the file's: name the file too, as encoding it on
    threads does."""
    try:
        yield
    except PatternError as error:
        if path is not None:
            raise PatternError(f"{os.fspath(path)}: {error}") from None
        raise
