"""Count GPT-2 pre-tokens with PySpark and write them as Parquet for ``bpestore train --counts``.

Run (local mode, 2 cores; give a cluster's master URL instead of ``local[2]`` to run on one)::

    python examples/spark_counts.py 'corpus/*.txt' counts.parquet
    bpestore train --counts counts.parquet --special-token '<|endoftext|>' --name web --vocab-size 32000

Each file is read whole (``wholetext=True``: one row per file, as bpestore reads a file; a row
must stay under Spark's 2 GB limit) and cut at ``<|endoftext|>``. The output is a directory of
part files with a string ``word`` and an integer ``count`` column. Tested with pyspark 4.3.0,
OpenJDK 17.0.15, Python 3.11.7: the merges equal ``bpestore.train_bpe`` on the same files.
"""

import sys

import regex
from pyspark.sql import SparkSession, functions as F, types as T

GPT2 = regex.compile(r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
split = F.udf(lambda text: [piece for part in text.split("<|endoftext|>") for piece in GPT2.findall(part)],
              T.ArrayType(T.StringType()))

corpus, out = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.master("local[2]").config("spark.driver.memory", "1g").getOrCreate()
(spark.read.text(corpus, wholetext=True)
    .select(F.explode(split("value")).alias("word")).groupBy("word").count()
    .write.parquet(out))
spark.stop()
