"""Count GPT-2 pre-tokens with Ray Data and write them as Parquet for ``bpestore train --counts``.

Run (here on 2 CPUs and a 512 MB object store; on a cluster, ``ray.init()`` joins it)::

    python examples/ray_counts.py corpus/ counts
    bpestore train --counts counts --special-token '<|endoftext|>' --name web --vocab-size 32000

The counts are bpestore's: GPT-2 pre-tokens of the text cut at ``<|endoftext|>`` (which is not
counted), each file a document of its own, newlines kept (``read_text`` would give a row per line
*without its newline*; ``read_binary_files`` a row per file: a whole file in a task's memory).
Each file (a path or URL; a directory: every file below it, hidden ones left out) is cut into
ranges of 64 MB. A task reads its range and then on to the end of the document that crosses the
range's end, and counts the documents that begin in its range: those after a separator that
starts there (and the file's first, for the range at 0). So each document is counted once, by
one task, and a task holds a range and a document, never a whole file. Ray sums the counts by
word (groupby) and its workers write the Parquet parts: the driver holds the list of ranges only.

Bad UTF-8 is refused, as bpestore refuses it: the task raises, naming the file and byte.
The output is a directory of part files with a string ``word`` and an integer ``count`` column.
"""

import collections
import os
import sys

import pyarrow as pa
import pyarrow.fs as pafs
import ray
import regex

GPT2 = regex.compile(r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
SEP = b"<|endoftext|>"
RANGE = 64 << 20  # bytes of a file per task


def ranges(corpus):  # {"file", "start", "end"} for each RANGE bytes of each file of corpus
    scheme = corpus[:corpus.index("://") + 3] if "://" in corpus else ""  # "s3://"; none for a path
    filesystem, root = pafs.FileSystem.from_uri(corpus if scheme else os.path.abspath(corpus))
    files = [filesystem.get_file_info(root)]
    if files[0].type == pafs.FileType.NotFound:
        raise FileNotFoundError(corpus)
    if files[0].type == pafs.FileType.Directory:  # every file below it, hidden ones ("/.") left out
        files = [info for info in filesystem.get_file_info(pafs.FileSelector(root, recursive=True))
                 if info.is_file and "/." not in info.path[len(root):]]
    return [{"file": scheme + info.path, "start": start, "end": start + RANGE}
            for info in files for start in range(0, info.size, RANGE)]


def documents(file, start, end):  # the text of each document that begins in bytes [start, end) of a file
    filesystem, path = pafs.FileSystem.from_uri(file)
    with filesystem.open_input_file(path) as f:
        f.seek(start)
        data = bytearray(f.read(end - start))
        cut = data.find(SEP, end - start)  # the first separator that starts after the range
        while cut < 0 and (more := f.read(1 << 20)):  # read on to it: the last document is ours
            data += more
            cut = data.find(SEP, max(end - start, len(data) - len(more) - len(SEP) + 1))
    if cut >= 0:
        del data[cut:]
    at = 0
    if start > 0:  # up to the first separator: the document of the range before
        at = data.find(SEP)
        if at < 0:
            return  # no separator starts in this range: no document begins in it
        at += len(SEP)
    while at <= len(data):  # each document, decoded as it comes (a range's text is never whole)
        stop = data.find(SEP, at)
        stop = len(data) if stop < 0 else stop
        try:
            text = data[at:stop].decode("utf-8")
        except UnicodeDecodeError as error:  # refused, as bpestore refuses it
            raise ValueError(f"{file}: invalid UTF-8 at byte {start + at + error.start}") from None
        yield text
        at = stop + len(SEP)


def count(batch):  # a batch of ranges: their words and counts
    counts = collections.Counter()
    for file, start, end in zip(batch["file"], batch["start"], batch["end"]):
        for document in documents(str(file), int(start), int(end)):
            counts.update(GPT2.findall(document))
    return pa.table({"word": list(counts), "count": list(counts.values())})


*corpus, out = sys.argv[1:]
ray.init(num_cpus=2, object_store_memory=512 << 20)
ds = ray.data.from_items([r for c in corpus for r in ranges(c)]).map_batches(count, batch_size=1)
ds.groupby("word").sum("count").rename_columns({"sum(count)": "count"}).write_parquet(out)
