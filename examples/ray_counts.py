"""Count GPT-2 pre-tokens with Ray Data and write them as Parquet for ``bpestore train --counts``.

Run (here on 2 CPUs; on a cluster, ``ray.init()`` joins it)::

    python examples/ray_counts.py corpus/ counts
    bpestore train --counts counts --special-token '<|endoftext|>' --name web --vocab-size 32000

Each file is read whole (``read_binary_files``: one row per file, as bpestore reads a file) and
cut at ``<|endoftext|>``; ``read_text`` would give a row per line *without its newline*, losing
every pre-token that holds one. The output is a directory of part files with a string ``word``
and an integer ``count`` column. Tested with ray 2.60.0 (``ray[data]``, pyarrow 26.0.1), Python
3.11.7: the merges equal ``bpestore.train_bpe`` on the same files.
"""

import collections
import sys

import pyarrow as pa
import ray
import regex

GPT2 = regex.compile(r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def count(batch):  # {"bytes": an array of whole files}
    counts = collections.Counter(p for data in batch["bytes"] for part in data.decode("utf-8").split("<|endoftext|>")
                                 for p in GPT2.findall(part))
    return pa.table({"word": list(counts), "count": list(counts.values())})


corpus, out = sys.argv[1], sys.argv[2]
ray.init(num_cpus=2)
ds = ray.data.read_binary_files(corpus).map_batches(count, batch_format="numpy")
ds.groupby("word").sum("count").rename_columns({"sum(count)": "count"}).write_parquet(out)
