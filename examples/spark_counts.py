"""Count GPT-2 pre-tokens with PySpark and write them as Parquet for ``bpestore train --counts``.

Run (local mode: 2 cores, a 512 MB heap; give a cluster's master URL instead to run on one)::

    spark-submit --master 'local[2]' --driver-memory 512m examples/spark_counts.py corpus/*.txt counts.parquet
    bpestore train --counts counts.parquet --special-token '<|endoftext|>' --name web --vocab-size 32000

The counts are bpestore's: GPT-2 pre-tokens of the text cut at ``<|endoftext|>`` (which is not
counted), each file a document of its own, newlines kept. Spark reads a record per *document*:
the special token is the record separator (``lineSep``; the default, a record per line, would
drop every newline), and a file is read in splits of 128 MB (``spark.sql.files.maxPartitionBytes``),
a document that crosses a split's end going whole to that split. A Python worker counts a split's
documents (handed over in Arrow batches of at most 64 MB, ``spark.sql.execution.arrow.maxBytesPerBatch``)
into one Counter and hands Spark its words; Spark sums them by word, spilling to disk when its
memory is short, and its tasks write the Parquet parts. So memory is bounded by a split, a batch
and the distinct words of a split, never by the corpus, and the driver holds neither the text nor
the word list. A document is read whole: one without a separator in it is a whole file (at most 2 GB).

Bad UTF-8 fails the job: Spark passes the bytes on as they are and pyarrow's ``to_pylist`` raises
UnicodeDecodeError (as bpestore refuses such a file); ``is_valid_utf8(value)`` finds the file.
The output is a directory of part files with a string ``word`` and an integer ``count`` column.
"""

import collections
import sys

import pyarrow as pa
import regex
from pyspark.sql import SparkSession, functions as F

GPT2 = regex.compile(r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def count(batches):  # the Arrow batches of one split's documents (a "value" column)
    counts = collections.Counter()
    for batch in batches:
        for document in batch.column("value").to_pylist():  # UnicodeDecodeError for bad UTF-8
            counts.update(GPT2.findall(document))
    words = list(counts)
    for i in range(0, len(words), 100_000):  # hand them over in batches of 100,000 words
        part = words[i:i + 100_000]
        yield pa.RecordBatch.from_pydict({"word": part, "count": [counts[word] for word in part]})


*corpus, out = sys.argv[1:]
spark = SparkSession.builder.appName("bpestore counts").getOrCreate()
(spark.read.text(corpus, lineSep="<|endoftext|>")  # a record per document, newlines kept
    .mapInArrow(count, "word string, count long")  # a split's words and counts
    .groupBy("word").agg(F.sum("count").alias("count"))  # summed across splits
    .write.parquet(out))
spark.stop()
