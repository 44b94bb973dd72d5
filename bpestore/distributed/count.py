"""Counting a corpus's pre-tokens on a Dask cluster: a map over shards, a tree reduce, by hash.

The corpus (paths, directories, globs, or fsspec URLs such as ``s3://bucket/shards/*.txt``) is
cut into shards of about ``shard_bytes`` (:func:`plan_shards`): byte ranges of each plain file,
each compressed file whole. Each worker counts a shard with
:func:`bpestore.train.counts.count_shard`, which moves the range's ends to safe cuts, so the
shards' counts sum to the corpus's exactly, whatever the shard size. The counts travel as three
flat arrays (see :class:`~bpestore.train.counts.Counts`), never as a dict.

The reduce is bounded in memory twice over: each shard's counts are split by a hash of the
pre-token into ``partitions`` disjoint parts, and part ``i`` of all shards is added up apart from
the other parts, in a tree (``fan_in`` counts per addition), so no task of the reduce holds more
than about ``1 / partitions`` of the distinct pre-tokens (and its ``fan_in`` inputs). A
pre-token lives in one part only, so pruning a part's total (``min_count``) is exact: the
client receives only the pre-tokens counted at least ``min_count`` times in the whole corpus.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..pretokenize.inputs import CorpusFiles, is_compressed
from ..pretokenize.patterns import GPT2_PATTERN
from ..progress import progress_bar
from ..train.counts import Counts, count_shard
from ..train.trainer import check_special_tokens
from .cluster import dask_client, import_distributed

if TYPE_CHECKING:  # pragma: no cover - typing only
    from distributed import Client, Future

__all__ = ["DEFAULT_SHARD_BYTES", "DaskCounting", "Shard", "count_on_dask", "describe_inputs", "plan_shards"]

#: Shards of 64 MiB: about a second of counting each (the engine counts some 50 MB/s a thread),
#: few enough tasks for the scheduler; a shard's text is read 1 MiB at a time, never whole.
DEFAULT_SHARD_BYTES = 64 << 20

#: How many counts one task of the tree reduce adds up.
DEFAULT_FAN_IN = 8


@dataclass(frozen=True)
class Shard:
    """Bytes ``start`` to ``end`` of ``source`` (a path or an fsspec URL; ``end`` None: to the
    end), before :func:`~bpestore.train.counts.count_shard` moves them to safe cuts. ``size``:
    the shard's bytes (on disk, for a compressed file), for progress."""

    source: str
    start: int
    end: int | None
    size: int


def _expand(inputs: str | os.PathLike | Iterable[str | os.PathLike]) -> list[tuple[str, int]]:
    """Every file of the inputs with its size: local sources as ``bpestore train`` expands them
    (files, directories, globs), absolute; URLs through fsspec (globs expanded)."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    files: list[tuple[str, int]] = []
    local: list[str | os.PathLike] = []

    def flush_local() -> None:
        if local:
            files.extend((str(Path(path).resolve()), Path(path).stat().st_size) for path in CorpusFiles(local).paths)
            local.clear()

    for source in inputs:
        text = os.fspath(source)
        if "://" not in text:
            local.append(text)
            continue
        flush_local()
        import fsspec

        fs, _token, paths = fsspec.core.get_fs_token_paths(text)
        if not paths:
            raise FileNotFoundError(2, "No corpus file matches this URL", text)
        for path in sorted(paths):
            files.append((fs.unstrip_protocol(path), int(fs.size(path))))
    flush_local()
    if not files:
        raise ValueError("give at least one corpus file")
    return files


def plan_shards(inputs: str | os.PathLike | Iterable[str | os.PathLike], shard_bytes: int = DEFAULT_SHARD_BYTES) -> list[Shard]:
    """The shards of a corpus: each plain file in ranges of ``shard_bytes`` (the last one open
    ended, so a file that grows is still read to its end), each compressed file whole."""
    if not isinstance(shard_bytes, int) or shard_bytes < 1:
        raise ValueError(f"shard_bytes must be a positive integer, got {shard_bytes!r}")
    shards: list[Shard] = []
    for source, size in _expand(inputs):
        if is_compressed(source) or size <= shard_bytes:
            shards.append(Shard(source, 0, None, size))
            continue
        starts = range(0, size, shard_bytes)
        for start in starts:
            end = start + shard_bytes
            shards.append(Shard(source, start, end if end < size else None, min(shard_bytes, size - start)))
    return shards


def describe_inputs(inputs: str | os.PathLike | Iterable[str | os.PathLike]) -> str:
    """Where Dask-counted counts came from, for the store: the inputs as given, space-separated
    (local paths and globs made absolute)."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    return " ".join(text if "://" in (text := os.fspath(source)) else os.path.abspath(text) for source in inputs)


# The tasks (module-level functions: workers import them by name).


def _count(shard: Shard, pattern: str, special_tokens: Sequence[str], parts: int) -> Counts | list[Counts]:
    counts = count_shard(shard.source, shard.start, shard.end, pattern=pattern, special_tokens=special_tokens)
    return counts if parts == 1 else counts.split(parts)


def _add_up(*counts: Counts) -> Counts:
    return Counts.sum(counts)


def _prune(counts: Counts, min_count: int) -> Counts:
    return counts.pruned(min_count)


def _tree_reduce(client: Client, futures: list[Future], fan_in: int, key: str) -> Future:
    level = 0
    while len(futures) > 1:
        futures = [
            client.submit(_add_up, *futures[i : i + fan_in], key=f"{key}-{level}-{i // fan_in}")
            for i in range(0, len(futures), fan_in)
        ]
        level += 1
    return futures[0]


def count_on_dask(
    client: Client,
    inputs: str | os.PathLike | Iterable[str | os.PathLike],
    special_tokens: Sequence[str] = (),
    *,
    pattern: str | None = None,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    min_count: int | None = None,
    partitions: int | None = None,
    fan_in: int = DEFAULT_FAN_IN,
    progress: bool = False,
) -> Counts:
    """The pre-token counts of a corpus, counted on the Dask cluster of ``client``: exactly those
    of counting it in one process (:meth:`bpestore.Store.count`: no pre-token spans two files),
    pruned to the pre-tokens counted at least ``min_count`` times if given. ``partitions``
    (default: the cluster's workers) and ``fan_in`` shape the reduce (see the module's doc). The
    result's ``source`` says where the counts came from. A shard's error (a missing file, bad
    UTF-8: CorpusDecodeError) is raised here; the other tasks are cancelled."""
    import uuid

    distributed = import_distributed()
    special_tokens = check_special_tokens(special_tokens)
    pattern = pattern or GPT2_PATTERN
    if min_count is not None and (not isinstance(min_count, int) or min_count < 1):
        raise ValueError(f"min_count must be a positive integer, got {min_count!r}")
    if not isinstance(fan_in, int) or fan_in < 2:
        raise ValueError(f"fan_in must be an integer of at least 2, got {fan_in!r}")
    shards = plan_shards(inputs, shard_bytes)
    if partitions is None:
        partitions = max(1, len(client.nthreads()))  # one part per worker
    if not isinstance(partitions, int) or partitions < 1:
        raise ValueError(f"partitions must be a positive integer, got {partitions!r}")
    run = uuid.uuid4().hex[:12]  # keys of this run only: never a stale result of another
    mapped = [
        client.submit(_count, shard, pattern, special_tokens, partitions, key=f"bpestore-count-{run}-{index}")
        for index, shard in enumerate(shards)
    ]
    sizes = {future.key: shard.size for future, shard in zip(mapped, shards)}
    roots: list[Future] = []
    try:
        for part in range(partitions):
            if partitions == 1:
                leaves = mapped
            else:
                leaves = [
                    client.submit(operator.getitem, future, part, key=f"bpestore-part-{run}-{index}-{part}")
                    for index, future in enumerate(mapped)
                ]
            root = _tree_reduce(client, leaves, fan_in, f"bpestore-sum-{run}-{part}")
            if min_count is not None:
                root = client.submit(_prune, root, min_count, key=f"bpestore-prune-{run}-{part}")
            roots.append(root)
        # Only the roots stay referenced from here: each shard's counts (and each sum below a
        # root) are freed on the cluster as soon as the tasks that read them are done.
        with progress_bar(progress, sum(sizes.values()), "counting on Dask", unit="B", unit_scale=True) as bar:
            for future in distributed.as_completed(mapped):
                if future.status == "error":
                    future.result()  # raises the shard's error
                bar.update(sizes[future.key])
                future.release()
        mapped.clear()
        result = Counts(None, pattern, special_tokens)
        for future in distributed.as_completed(roots):
            result.merge(future.result())
            future.release()
    except BaseException:
        client.cancel([*mapped, *roots], force=True)
        raise
    result.source = describe_inputs(inputs) + ("" if min_count is None else f" (min_count={min_count})")
    result.origin = "dask"
    return result


class DaskCounting:
    """A :class:`~bpestore.train.backends.CountingBackend` that counts on a Dask cluster
    (:func:`count_on_dask`): ``Store.train(corpus, ..., counting=DaskCounting("local"))``, or
    ``bpestore train --dask ADDRESS``.

    ``cluster``: a ``distributed.Client``, used as it is, or an address (a scheduler such as
    ``tcp://host:8786``, or ``"local"`` for a local cluster of ``n_workers`` processes), connected
    to (or started) for each count and closed after it (:func:`~.cluster.dask_client`).
    ``min_count``, ``shard_bytes`` and ``partitions``: as for :func:`count_on_dask` (with
    ``min_count`` the counts are pruned on the cluster, exactly).
    """

    def __init__(
        self,
        cluster: str | Client = "local",
        *,
        n_workers: int | None = None,
        min_count: int | None = None,
        shard_bytes: int = DEFAULT_SHARD_BYTES,
        partitions: int | None = None,
    ) -> None:
        self.cluster = cluster
        self.n_workers = n_workers
        self.min_count = min_count
        self.shard_bytes = shard_bytes
        self.partitions = partitions

    def count(
        self,
        corpus: str | os.PathLike | Iterable[str | os.PathLike],
        special_tokens: Sequence[str] = (),
        *,
        pattern: str = GPT2_PATTERN,
        progress: bool = False,
    ) -> Counts:
        options = {"pattern": pattern, "shard_bytes": self.shard_bytes, "min_count": self.min_count, "partitions": self.partitions, "progress": progress}
        if not isinstance(self.cluster, str):
            return count_on_dask(self.cluster, corpus, special_tokens, **options)
        with dask_client(self.cluster, n_workers=self.n_workers) as client:
            return count_on_dask(client, corpus, special_tokens, **options)

    def __repr__(self) -> str:
        return f"DaskCounting({self.cluster!r})"
