"""Counting pre-tokens on a Dask cluster against counting in this process, one run each.

On wiki_en_57M (or ``--corpus``), with ``<|endoftext|>`` as the special token, measures:

* ``in-process``: :func:`bpestore.train.trainer.count_corpus` with ``--workers`` threads (the
  engine's own parallel counting), and with 1 thread;
* ``dask``: :func:`bpestore.distributed.count.count_on_dask` on a local cluster of ``--workers``
  processes of one thread each, started by :func:`bpestore.distributed.cluster.dask_client`
  (so without Dask's ``MALLOC_TRIM_THRESHOLD_``);
* ``dask, MALLOC_TRIM``: the same on a LocalCluster with Dask's defaults, whose nannies set
  ``MALLOC_TRIM_THRESHOLD_=65536`` in every worker.

Start-up is the cluster's start plus each worker's first import of bpestore (about 0.4 s of CPU
a worker), paid once per cluster, not per corpus.

For each: wall seconds of the counting (cluster start-up given apart), CPU seconds (this process,
plus every worker's user + system time during the call, read in the workers), the ratio to the
in-process wall time, and for Dask the largest peak RSS of a worker process and the number of
tasks the scheduler ran (its task stream: the counts of the shards and the reduce's; ``--partitions``
parts, default one per worker). Every result is checked equal to the in-process counts.

    python benchmarks/dask_count.py [--corpus PATH] [--workers 2] [--shard-mb 8] [--partitions N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bpestore.distributed.cluster import MALLOC_TRIM_VARIABLE, dask_client  # noqa: E402
from bpestore.distributed.count import count_on_dask, plan_shards  # noqa: E402
from bpestore.train.counts import Counts  # noqa: E402
from bpestore.train.trainer import count_corpus  # noqa: E402

SPECIALS = ["<|endoftext|>"]


def shared_dir() -> Path:
    return Path(os.environ.get("BPESTORE_SHARED", REPO.parent / "shared")).resolve()


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def worker_cpu(client) -> float:
    """The CPU seconds all workers have used so far (user + system, each worker process)."""

    def used() -> float:
        import resource

        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    return sum(client.run(used).values())


def worker_peak_mb(client) -> float:
    """The largest peak resident set of any worker process so far, in MiB."""

    def peak() -> float:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    return max(client.run(peak).values())


def in_process(path: Path, threads: int) -> tuple[dict, Counts]:
    cpu, started = cpu_seconds(), time.perf_counter()
    table = count_corpus(path, SPECIALS, workers=threads)
    wall = time.perf_counter() - started
    return {"wall_s": wall, "cpu_s": cpu_seconds() - cpu}, Counts(table, special_tokens=SPECIALS)


def import_bpestore() -> None:
    import bpestore.distributed.count  # noqa: F401 - what the tasks need, imported once per worker


def on_dask(client, path: Path, shard_bytes: int, partitions: int | None, startup: float) -> tuple[dict, Counts]:
    """Counts on ``client``'s workers, once they have imported bpestore (part of the start-up)."""
    import distributed

    started = time.perf_counter()
    client.run(import_bpestore)
    startup += time.perf_counter() - started
    trim = sorted({str(value) for value in client.run(lambda: os.environ.get(MALLOC_TRIM_VARIABLE)).values()})
    workers_before, cpu, started = worker_cpu(client), cpu_seconds(), time.perf_counter()
    with distributed.get_task_stream(client) as stream:
        counts = count_on_dask(client, [path], SPECIALS, shard_bytes=shard_bytes, partitions=partitions)
    wall = time.perf_counter() - started
    workers_cpu = worker_cpu(client) - workers_before
    return {
        "wall_s": wall, "cpu_s": cpu_seconds() - cpu + workers_cpu, "workers_cpu_s": workers_cpu,
        "startup_s": startup, "worker_peak_rss_mb": worker_peak_mb(client), "tasks": len(stream.data), MALLOC_TRIM_VARIABLE: trim,
    }, counts


def dask_defaults_client(workers: int):
    """A LocalCluster as Dask starts it by default (its nannies set MALLOC_TRIM_THRESHOLD_)."""
    import distributed

    cluster = distributed.LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs={"dashboard_address": ":0"}
    )
    return cluster, distributed.Client(cluster)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=shared_dir() / "corpora" / "wiki_en_57M.txt")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shard-mb", type=float, default=8.0)
    parser.add_argument("--partitions", type=int, default=None, help="The reduce's parts [default: one per worker].")
    parser.add_argument("--json", type=Path, default=None, help="Also write the results here.")
    args = parser.parse_args()
    shard_bytes = int(args.shard_mb * (1 << 20))
    size = args.corpus.stat().st_size
    print(f"{args.corpus} ({size / 1e6:.1f} MB), {len(plan_shards([args.corpus], shard_bytes))} shards of "
          f"{args.shard_mb:g} MiB, {args.workers} workers, machine load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    with open(args.corpus, "rb") as file:  # into the page cache first: every run reads it from memory
        while file.read(1 << 24):
            pass
    results: dict[str, dict] = {}
    results[f"in-process, {args.workers} threads"], expected = in_process(args.corpus, args.workers)
    results["in-process, 1 thread"], _ = in_process(args.corpus, 1)

    started = time.perf_counter()
    with dask_client("local", n_workers=args.workers) as client:
        client.wait_for_workers(args.workers)
        results["dask (no MALLOC_TRIM)"], counts = on_dask(client, args.corpus, shard_bytes, args.partitions, time.perf_counter() - started)
    assert counts == expected, "Dask's counts differ from the in-process counts"

    started = time.perf_counter()
    cluster, client = dask_defaults_client(args.workers)
    try:
        client.wait_for_workers(args.workers)
        results["dask, Dask's MALLOC_TRIM"], counts = on_dask(client, args.corpus, shard_bytes, args.partitions, time.perf_counter() - started)
    finally:
        client.close()
        cluster.close()
    assert counts == expected, "Dask's counts differ from the in-process counts"

    base = results[f"in-process, {args.workers} threads"]["wall_s"]
    print(f"{'':32} {'wall s':>8} {'CPU s':>8} {'/ in-process':>12} {'start-up s':>10} {'worker RSS MiB':>14} {'tasks':>6}  {MALLOC_TRIM_VARIABLE}")
    for name, row in results.items():
        rss = f"{row['worker_peak_rss_mb']:14.0f}" if "worker_peak_rss_mb" in row else f"{'-':>14}"
        print(
            f"{name:32} {row['wall_s']:8.2f} {row['cpu_s']:8.2f} {row['wall_s'] / base:12.2f} "
            f"{row.get('startup_s', 0):10.2f} {rss} {row.get('tasks', '-'):>6}  {','.join(row.get(MALLOC_TRIM_VARIABLE, ['-']))}"
        )
    no_trim, trim = results["dask (no MALLOC_TRIM)"], results["dask, Dask's MALLOC_TRIM"]
    print(f"Dask overhead (wall, vs in-process {args.workers} threads): {no_trim['wall_s'] - base:+.2f} s; "
          f"MALLOC_TRIM costs {trim['workers_cpu_s'] / no_trim['workers_cpu_s'] - 1:+.0%} worker CPU")
    if args.json:
        args.json.write_text(json.dumps({"corpus": str(args.corpus), "bytes": size, "shard_bytes": shard_bytes,
                                         "workers": args.workers, "partitions": args.partitions, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
