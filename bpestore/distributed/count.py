"""Counting a corpus's pre-tokens on a Dask cluster: a map over shards, a tree reduce, by hash.

The corpus (paths, directories, globs, or fsspec URLs such as ``s3://bucket/shards/*.txt``) is
cut into shards of about ``shard_bytes`` (:func:`plan_shards`): byte ranges of each plain file,
each compressed file whole. Each worker counts a shard with
:func:`bpestore.train.counts.count_shard`, which moves the range's ends to safe cuts, so the
shards' counts sum to the corpus's exactly, whatever the shard size. The counts travel as three
flat arrays (see :class:`~bpestore.train.counts.Counts`), never as a dict.

The reduce adds the shards' counts up on the workers, in ``partitions`` disjoint parts by a hash of
the pre-token, so that the client receives ``partitions`` sums and never one task holds all the
distinct pre-tokens. Its layout (:func:`reduce_graph`), with ``S`` shards, ``P`` parts and a fan-in
``f``:

* below the split, a tree of whole counts: each task adds up ``f`` shards' counts (or ``f`` sums
  of the level below), for ``L - 1`` levels, ``L`` the smallest with ``f ** L >= P``;
* at level ``L``, each task adds up its ``f`` inputs and splits the sum into ``P`` parts; a
  ``getitem`` task per part takes it out (it runs where the split is, so it moves nothing);
* above the split, a tree per part: part ``i`` of every split, ``f`` at a time, to a root per part,
  which prunes its totals (``min_count``). A pre-token lives in one part only, so pruning a part's
  total is exact: the client receives only the pre-tokens counted at least ``min_count`` times in
  the whole corpus.

Splitting only once a task has added up ``f ** L >= P`` shards makes ``P * ceil(S / f ** L) <= S +
P`` getitems, so the whole count is ``O(S + P)`` tasks: ``S`` counts, fewer than ``S / (f - 1)``
sums below the split, and fewer than ``(S + P) f / (f - 1) + P log_f S`` at and above it (40
shards in 4 parts with ``f = 8``: 69 tasks, where a getitem per shard and part made 228). The
price is memory below the split: a task there holds its ``f`` inputs and their sum, whole
counts of up to ``f ** L < f * P`` shards (for ``P <= f``: the ``f`` shards of its inputs), where
splitting each shard kept every task to a part of its inputs. Above the split no task holds more
than its ``f`` inputs and its part of the corpus's distinct pre-tokens. Both bounds are
independent of the corpus's size. The other way to ``O(S)`` tasks, leaves that each take ``f >=
P`` shards' counts and keep their own part of them, would hold ``P`` whole shards a task too, and
send each shard's counts to up to ``P`` workers, one per part; here each count crosses the
network at most once per level of the trees (a getitem runs where its split is).

The graph is built with :func:`dask.delayed` and submitted once (``Client.compute``): Dask orders
it (:mod:`dask.order`) so that sums run as soon as their inputs are done, freeing the shards'
counts early, and a worker that dies is recovered from: its tasks, and those of the results it
held that are still needed, run again elsewhere.
"""

from __future__ import annotations

import contextlib
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
from .cluster import dask_client, import_distributed, quiet_dask_logs

if TYPE_CHECKING:  # pragma: no cover - typing only
    from dask.delayed import Delayed
    from distributed import Client

__all__ = [
    "DEFAULT_SHARD_BYTES", "DaskCounting", "Shard", "count_on_dask", "describe_inputs", "plan_shards", "reduce_graph", "split_level",
]

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


def _expand(inputs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[tuple[str, int]]:
    """Every file of the inputs with its size: local sources as ``bpestore train`` expands them
    (files, directories, globs), absolute; URLs through fsspec (globs expanded)."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    files: list[tuple[str, int]] = []
    local: list[str | os.PathLike[str]] = []

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


def plan_shards(inputs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], shard_bytes: int = DEFAULT_SHARD_BYTES) -> list[Shard]:
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


def describe_inputs(inputs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> str:
    """Where Dask-counted counts came from, for the store: the inputs as given, space-separated
    (local paths and globs made absolute)."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    return " ".join(text if "://" in (text := os.fspath(source)) else os.path.abspath(text) for source in inputs)


# The tasks (module-level functions: workers import them by name).


def _count(shard: Shard, pattern: str, special_tokens: Sequence[str]) -> Counts:
    return count_shard(shard.source, shard.start, shard.end, pattern=pattern, special_tokens=special_tokens)


def _add_up(*counts: Counts, min_count: int | None = None, parts: int = 1) -> Counts | list[Counts]:
    """The sum of ``counts``, pruned to ``min_count`` (only where the sum is a total: a root), in
    ``parts`` parts by hash if more than one."""
    total = counts[0] if len(counts) == 1 else Counts.sum(counts)  # pruned and split make new counts
    if min_count is not None:
        total = total.pruned(min_count)
    return total if parts == 1 else total.split(parts)


def split_level(partitions: int, fan_in: int) -> int:
    """The level of the reduce whose tasks split their sums into ``partitions`` parts: the lowest
    whose tasks add up at least ``partitions`` shards (0: no split, for one part)."""
    level, covered = 0, 1
    while covered < partitions:
        level, covered = level + 1, covered * fan_in
    return level


def reduce_graph(maps: Sequence[Delayed], partitions: int, fan_in: int, min_count: int | None, run: str) -> list[Delayed]:
    """The reduce of the shards' counts ``maps`` (see the module's doc): one root per part, each
    the (pruned) sum of its part of every shard. Its keys are tuples named for what they hold,
    ``run`` in the name (``bpestore-sum-RUN``: whole sums below the split; ``-split-``,
    ``-part-``: the getitems; ``-total-``: the trees per part), so a dashboard groups them."""
    import dask

    add = dask.delayed(_add_up, pure=True)

    def added(nodes: Sequence[Delayed], name: str, *key: int) -> list[Delayed]:
        # a group of one is passed up as it is: a task for it would only copy it
        return [
            group[0] if len(group) == 1 else add(*group, dask_key_name=(name, *key, index))
            for index, group in enumerate(nodes[i : i + fan_in] for i in range(0, len(nodes), fan_in))
        ]

    def tree(nodes: Sequence[Delayed], part: int, *, pruned: bool) -> Delayed:
        """``nodes`` added up to one root, ``fan_in`` at a time; the root prunes (no task for a
        lone node that is ``pruned`` already, or needs no pruning)."""
        name, level = f"bpestore-total-{run}", 0
        while len(nodes) > fan_in:
            nodes, level = added(nodes, name, part, level), level + 1
        if len(nodes) == 1 and (pruned or min_count is None):
            return nodes[0]
        root: Delayed = add(*nodes, min_count=min_count, dask_key_name=(name, part, level, 0))
        return root

    if partitions == 1:
        return [tree(maps, 0, pruned=False)]
    nodes: Sequence[Delayed] = maps
    for level in range(1, split_level(partitions, fan_in)):
        if len(nodes) <= fan_in:
            break  # one task adds them all up: let it be the split
        nodes = added(nodes, f"bpestore-sum-{run}", level)
    whole = len(nodes) <= fan_in  # one split adds up the whole corpus: it prunes, exactly
    splits = [
        add(*nodes[i : i + fan_in], parts=partitions, min_count=min_count if whole else None, dask_key_name=(f"bpestore-split-{run}", i // fan_in))
        for i in range(0, len(nodes), fan_in)
    ]
    getitem = dask.delayed(operator.getitem, pure=True)
    return [
        tree(
            [getitem(split, part, dask_key_name=(f"bpestore-part-{run}", index, part)) for index, split in enumerate(splits)],
            part,
            pruned=whole,
        )
        for part in range(partitions)
    ]


def count_on_dask(
    client: Client,
    inputs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
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
    import dask

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
    count = dask.delayed(_count, pure=True)
    maps = [
        count(shard, pattern, special_tokens, dask_key_name=(f"bpestore-count-{run}", index)) for index, shard in enumerate(shards)
    ]
    # One graph, submitted once: Dask orders it so that each sum runs as soon as its inputs are done.
    futures = client.compute([*maps, *reduce_graph(maps, partitions, fan_in, min_count, run)])
    mapped, roots = futures[: len(maps)], futures[len(maps) :]
    sizes = {future.key: shard.size for future, shard in zip(mapped, shards)}
    try:
        # The shards' futures are released as they finish (they are here for progress and their
        # errors): a shard's counts then live on the cluster only until the sum that reads them is
        # done. Only the roots' results come here, one part at a time, as engine counts (three
        # flat arrays each on the wire, see Counts.__reduce__), never as a dict.
        with progress_bar(progress, sum(sizes.values()), "counting on Dask", unit="B", unit_scale=True) as bar:
            for future in distributed.as_completed(mapped):
                if future.status == "error":
                    future.result()  # raises the shard's error
                bar.update(sizes[future.key])
                future.release()
        mapped.clear()
        result: Counts | None = None
        for future in distributed.as_completed(roots):
            part = future.result()
            future.release()
            if result is None:
                result = part  # the first part is the start of the whole, not copied into it
            else:
                result.merge(part)  # the engine's hash tables: no Python object per pre-token
        assert result is not None  # there is a root per part, and a part at least
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
    ``min_count`` the counts are pruned on the cluster, exactly). ``quiet``: Dask's log records
    (a lost worker's warnings and tracebacks) are kept off stderr while counting
    (:func:`~.cluster.quiet_dask_logs`; a local cluster's workers too).
    """

    def __init__(
        self,
        cluster: str | Client = "local",
        *,
        n_workers: int | None = None,
        min_count: int | None = None,
        shard_bytes: int = DEFAULT_SHARD_BYTES,
        partitions: int | None = None,
        quiet: bool = False,
    ) -> None:
        self.cluster = cluster
        self.n_workers = n_workers
        self.min_count = min_count
        self.shard_bytes = shard_bytes
        self.partitions = partitions
        self.quiet = quiet

    def count(
        self,
        corpus: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
        special_tokens: Sequence[str] = (),
        *,
        pattern: str = GPT2_PATTERN,
        progress: bool = False,
    ) -> Counts:
        def count(client: Client) -> Counts:
            return count_on_dask(
                client, corpus, special_tokens, pattern=pattern, shard_bytes=self.shard_bytes, min_count=self.min_count,
                partitions=self.partitions, progress=progress,
            )

        if not isinstance(self.cluster, str):
            with quiet_dask_logs() if self.quiet else contextlib.nullcontext():
                return count(self.cluster)
        with dask_client(self.cluster, n_workers=self.n_workers, quiet=self.quiet) as client:
            return count(client)

    def __repr__(self) -> str:
        return f"DaskCounting({self.cluster!r})"
