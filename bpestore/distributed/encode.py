"""Encoding a dataset's shards on a Dask cluster (``bpestore encode NAME 'data/*.txt' --output-dir
out/ --dask ADDRESS``).

The plan, the manifest and the skipping of finished shards are :mod:`bpestore.encode.shards`'s,
as for a local run; here only the runner differs. The tokenizer is sent to each worker once
(``Client.scatter(..., broadcast=True)``: it pickles as its model, without the engine's caches, and
each worker rebuilds one engine for all its shards); every shard is one task whose result is its
manifest entry, recorded by this process (the client) as soon as it arrives. Workers write the
``.npy`` files themselves, so ``output_dir`` must be a path every worker sees (a shared file
system, or a local cluster) or an fsspec URL they can all write (``s3://...``); inputs likewise.
The tasks get absolute paths, made here from this process's working directory (a worker may run
in another: ``dask worker`` started elsewhere); the manifest names the sources as a local run
does, so that either kind of run goes on from the other's manifest.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..encode.shards import Runner, Shard, ShardedEncoding, _is_url, _local, encode_shard, encode_shards
from ..encode.tokenizer import Tokenizer
from .cluster import import_distributed

if TYPE_CHECKING:  # pragma: no cover - typing only
    from distributed import Client


def dask_runner(client: "Client", *, threads_per_shard: int = 1) -> Runner:
    """A runner for :func:`bpestore.encode.shards.encode_shards` that encodes each shard as a task
    on ``client``'s cluster, on ``threads_per_shard`` of the engine's threads (a Dask worker runs
    as many tasks at once as it has threads, so one is the right default)."""
    distributed = import_distributed()

    def run(tokenizer: Tokenizer, shards: Sequence[Shard], output_dir: str, **options: Any) -> Iterator[dict[str, Any]]:
        if not shards:
            return
        [remote_tokenizer] = client.scatter([tokenizer], broadcast=True, hash=False)
        output_dir = _absolute(output_dir)
        futures = [
            client.submit(
                encode_shard, remote_tokenizer, dataclasses.replace(shard, source=_absolute(shard.source)), output_dir,
                threads=threads_per_shard, pure=False, key=f"bpestore-encode-shard-{shard.index}-{os.urandom(4).hex()}", **options,
            )
            for shard in shards
        ]
        planned = {shard.index: shard.source for shard in shards}
        try:
            for future in distributed.as_completed(futures):
                entry = future.result()
                yield {**entry, "source": planned[entry["shard"]]}
        finally:
            # A failed shard (or Ctrl-C here) stops the rest; the finished ones stay recorded.
            client.cancel(futures + [remote_tokenizer])

    return run


def encode_shards_on_dask(
    client: "Client",
    tokenizer: Tokenizer,
    inputs: Iterable[str | os.PathLike[str]],
    output_dir: str | os.PathLike[str],
    *,
    threads_per_shard: int = 1,
    **options: Any,
) -> ShardedEncoding:
    """:func:`bpestore.encode.shards.encode_shards` with the shards encoded on ``client``'s Dask
    cluster; ``options``: ``ref``, ``progress``, ``allowed_special``, ``disallowed_special``.

    >>> from bpestore.distributed.cluster import dask_client   # doctest: +SKIP
    >>> with dask_client("local", n_workers=2) as client:      # doctest: +SKIP
    ...     encode_shards_on_dask(client, tokenizer, ["data/*.txt"], "out/", ref="gpt2")
    """
    return encode_shards(tokenizer, inputs, output_dir, runner=dask_runner(client, threads_per_shard=threads_per_shard), **options)


def _absolute(path: str) -> str:
    """A local path (``file://`` too) made absolute from this process's working directory; any
    other URL as it is."""
    return path if _is_url(path) else os.path.abspath(_local(path))
