"""Sharded encoding (``bpestore encode ... --output-dir``): one process against a local Dask cluster.

A corpus is cut into ``--shards`` files (at document ends, ``<|endoftext|>``, when it has them,
else at line ends); GPT-2 (the fixture files) encodes them into shards three ways, each timed once
(cluster start-up not included):

* ``local``: :func:`bpestore.encode.shards.encode_shards`, shard after shard, ``--workers`` engine
  threads each;
* ``dask``: :func:`bpestore.distributed.encode.encode_shards_on_dask` on a ``LocalCluster`` of
  ``--workers`` single-threaded processes (one shard per task, the tokenizer scattered once);
* ``rerun``: the same command again, every shard already done (reading the manifest, checking
  the outputs' sizes).

The ids of all three equal ``encode_file_to_npy`` of each file, concatenated (checked).

    python benchmarks/sharded_encode.py --corpus ../shared/corpora/reuters_17M.txt --shards 16
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SHARED = Path(os.environ.get("BPESTORE_SHARED", Path(__file__).resolve().parent.parent.parent / "shared"))


def cut(text: str, shards: int) -> list[str]:
    """``shards`` pieces of about equal size, each ending at a document or line end."""
    separator = "<|endoftext|>" if "<|endoftext|>" in text else "\n"
    pieces, start = [], 0
    for index in range(1, shards):
        end = text.find(separator, max(start, len(text) * index // shards))
        if end < 0:
            break
        end += len(separator)
        pieces.append(text[start:end])
        start = end
    pieces.append(text[start:])
    return pieces


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=SHARED / "corpora" / "reuters_17M.txt")
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    from bpestore import Tokenizer
    from bpestore.distributed.cluster import dask_client
    from bpestore.distributed.encode import encode_shards_on_dask
    from bpestore.encode.shards import encode_shards, load_shards

    fixtures = SHARED / "fixtures"
    tokenizer = Tokenizer.from_files(fixtures / "gpt2_vocab.json", fixtures / "gpt2_merges.txt", ["<|endoftext|>"])
    text = args.corpus.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="bpestore-shards-") as work:
        data = Path(work) / "data"
        data.mkdir()
        for index, piece in enumerate(cut(text, args.shards)):
            (data / f"part-{index:04d}.txt").write_text(piece, encoding="utf-8")
        inputs = [str(data / "*.txt")]
        rows = []

        started = time.perf_counter()
        local = encode_shards(tokenizer, inputs, Path(work) / "local", workers=args.workers)
        rows.append(("local", time.perf_counter() - started, len(local.encoded)))
        started = time.perf_counter()
        again = encode_shards(tokenizer, inputs, Path(work) / "local", workers=args.workers)
        rows.append(("rerun", time.perf_counter() - started, len(again.encoded)))
        with dask_client("local", n_workers=args.workers) as client:
            started = time.perf_counter()
            distributed = encode_shards_on_dask(client, tokenizer, inputs, Path(work) / "dask")
            rows.append(("dask", time.perf_counter() - started, len(distributed.encoded)))

        expected = load_shards(Path(work) / "local")
        same = np.array_equal(expected, load_shards(Path(work) / "dask"))
        size = sum(path.stat().st_size for path in data.iterdir())
        print(f"{args.corpus.name}: {size / 1e6:.1f} MB in {len(local.entries)} shards, {local.tokens} ids; "
              f"{args.workers} workers; dask ids equal local: {same}")
        print(f"{'run':<8}{'seconds':>10}{'MB/s':>8}{'encoded':>9}")
        for name, seconds, encoded in rows:
            print(f"{name:<8}{seconds:>10.2f}{size / 1e6 / seconds:>8.1f}{encoded:>9}")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
