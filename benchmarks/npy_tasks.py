"""``big_encode.py``'s measurements: a whole corpus file encoded with GPT-2 into a ``.npy`` of ids,
by bpestore and by gigatoken, each in a fresh process, and the untimed check of their outputs.

Params: ``input`` (the corpus), ``npy_out`` (where the ids go), ``threads``, and GPT-2 as for the
peers (``vocab``, ``merges``, ``special``, ``encoding`` = ``gpt2``, ``ranks``: the plain
``.tiktoken`` file ``prepare:peer-ranks`` writes). Every tool recognises ``<|endoftext|>`` in the
text. gigatoken's thread count is its pool's (``RAYON_NUM_THREADS``, set by the caller).

gigatoken's ways from a file to ids, each timed as its user would write it, with ``np.save`` of
the ids (as ``uint16`` when every id fits, as bpestore writes them) inside the timed call:

* ``gigatoken-encode``: ``Tokenizer.encode(file bytes)``, the file as one document, on the
  calling thread;
* ``gigatoken-files``: ``Tokenizer.encode_files(TextFileSource([path]))``, the file mapped and
  cut at pre-token-safe places by gigatoken, encoded on its pool;
* ``gigatoken-documents``: ``encode_files(TextFileSource([path], separator="<|endoftext|>"))``
  (its document path: documents between separators, the separators dropped), the separators' id
  put back between the documents with ``np.insert``. gigatoken skips empty documents, so a file
  with two separators in a row comes out short: the check then reports the difference.
"""

from __future__ import annotations

import os

import gpt2
from encode_tasks import file_job
from harness import Job, Skip
from peer_tasks import gigatoken_tokenizer
from registry import task
from train_tasks import import_or_skip

# Tokens at the end of tiktoken's ids of a cut prefix that are not compared: the cut may fall
# inside a pre-token, whose ids then differ from the whole text's.
PREFIX_GUARD_TOKENS = 100


@task("big-encode:bpestore")
def bpestore_file(params: dict) -> Job:
    """``bpestore.encode.files.encode_file_to_npy(tokenizer, input, npy_out, workers=threads)``."""
    return file_job(params, params["threads"])


def gigatoken_job(params: dict, ids_of_file) -> Job:
    """gigatoken's ids of the file (``ids_of_file(tokenizer, path)``, a NumPy array) saved as
    ``npy_out``, all timed; the number of ids is the result."""
    np = import_or_skip("numpy")
    tokenizer = gigatoken_tokenizer(params)
    dtype = np.uint16 if tokenizer.vocab_size <= 1 << 16 else np.uint32

    def run() -> int:
        ids = ids_of_file(tokenizer, params["input"])
        np.save(params["npy_out"], ids.astype(dtype, copy=False))
        return int(ids.size)

    return Job(run, lambda count: {"bytes": os.path.getsize(params["input"]), "tokens": count})


def one_document(tokenizer, path: str):
    with open(path, "rb") as file:
        return tokenizer.encode(file.read())


def file_source(separator: str | None):
    awkward, gigatoken = import_or_skip("awkward"), import_or_skip("gigatoken")  # (untimed)

    def ids_of_file(tokenizer, path: str):
        rows = tokenizer.encode_files(gigatoken.TextFileSource([path], separator=separator))
        return awkward.to_numpy(awkward.flatten(rows))

    return ids_of_file


def documents(params: dict):
    """``encode_files`` by documents, with the separator's id put back where each separator was
    (between documents, and at the file's start or end if it starts or ends with one)."""
    separator = params["special"]
    awkward, gigatoken, np = import_or_skip("awkward"), import_or_skip("gigatoken"), import_or_skip("numpy")  # (untimed)

    def ids_of_file(tokenizer, path: str):
        rows = tokenizer.encode_files(gigatoken.TextFileSource([path], separator=separator))
        flat = awkward.to_numpy(awkward.flatten(rows))
        starts = np.cumsum(awkward.to_numpy(awkward.num(rows)))[:-1]
        ids = np.insert(flat, starts, gpt2.ENDOFTEXT_ID)
        mark = separator.encode()
        with open(path, "rb") as file:
            head = file.read(len(mark))
            file.seek(max(os.path.getsize(path) - len(mark), 0))
            tail = file.read()
        if head == mark:
            ids = np.insert(ids, 0, gpt2.ENDOFTEXT_ID)
        if tail == mark and os.path.getsize(path) > len(mark):
            ids = np.append(ids, np.asarray([gpt2.ENDOFTEXT_ID], dtype=ids.dtype))
        return ids

    return ids_of_file


task("big-encode:gigatoken-encode")(lambda params: gigatoken_job(params, one_document))
task("big-encode:gigatoken-files")(lambda params: gigatoken_job(params, file_source(None)))
task("big-encode:gigatoken-documents")(lambda params: gigatoken_job(params, documents(params)))


@task("big-encode:check")
def check_outputs(params: dict) -> Job:
    """Compares each ``.npy`` of ``outputs`` (label -> path) with that of ``reference``, element
    type and ids, a block at a time from the mapped files; and the reference's first ids with
    tiktoken's of the corpus's first ``prefix_bytes`` (all but the last
    :data:`PREFIX_GUARD_TOKENS`). The run's result: label -> "identical" or what differs."""
    np = import_or_skip("numpy")
    from corpus import read_text

    def differences(reference, other) -> str:
        if other.dtype != reference.dtype:
            return f"element type {other.dtype}, not {reference.dtype}"
        block = 1 << 24
        for start in range(0, min(reference.size, other.size), block):
            a, b = reference[start:start + block], other[start:start + block]
            if not np.array_equal(a, b):
                return f"first difference at id {start + int(np.flatnonzero(a != b)[0]):,}"
        if other.size != reference.size:
            return f"{other.size:,} ids, not {reference.size:,}"
        return "identical"

    def run() -> dict:
        reference = np.load(params["outputs"][params["reference"]], mmap_mode="r")
        found = {label: differences(reference, np.load(path, mmap_mode="r")) for label, path in params["outputs"].items()}
        try:
            import_or_skip("tiktoken")
        except Skip as error:
            found["tiktoken prefix"] = f"not checked: {error}"
            return found
        text = read_text(params["input"], params["prefix_bytes"])
        expected = gpt2.tiktoken_encoding(params["vocab"]).encode(text, allowed_special="all")[:-PREFIX_GUARD_TOKENS]
        prefix = np.asarray(reference[: len(expected)], dtype=np.int64)
        found["tiktoken prefix"] = differences(np.asarray(expected, dtype=np.int64), prefix) + f" ({len(expected):,} ids)"
        return found

    return Job(run, lambda found: found)
