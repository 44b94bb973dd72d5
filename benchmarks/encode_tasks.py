"""The encoding measurements (sections ``encode``, ``encode-warm``, ``encode-cli``, ``load``,
``pathological``) and the untimed preparations they need, all with GPT-2 built from the fixture
files.

Common params: ``vocab`` and ``merges`` (the fixture files), ``special`` (``<|endoftext|>``).
"""

from __future__ import annotations

import functools
import gc
import hashlib
import importlib
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import gpt2
from corpus import read_text
from harness import Job, Skip
from registry import task
from train_tasks import import_or_skip

# ---------------------------------------------------------------- the tokenizers


def bpestore_tokenizer_class():
    bpestore = import_or_skip("bpestore")
    tokenizer_class = getattr(bpestore, "Tokenizer", None)
    if tokenizer_class is None:
        raise Skip("bpestore.Tokenizer does not exist yet (bpestore/encode/tokenizer.py)")
    return tokenizer_class


def bpestore_from_files(params: dict):
    tokenizer_class = bpestore_tokenizer_class()
    return tokenizer_class.from_files(params["vocab"], params["merges"], special_tokens=[params["special"]])


def tiktoken_gpt2(params: dict):
    import_or_skip("tiktoken")
    return gpt2.tiktoken_encoding(params["vocab"], {params["special"]: gpt2.ENDOFTEXT_ID})


def tiktoken_gpt2_encode(params: dict):
    """tiktoken's GPT-2 ``encode``, special tokens allowed (as bpestore encodes them)."""
    return functools.partial(tiktoken_gpt2(params).encode, allowed_special="all")


def hf_gpt2(params: dict):
    import_or_skip("tokenizers")
    return gpt2.hf_tokenizer(params["vocab"], params["merges"], [params["special"]])


def bpestore_cli() -> str:
    """The ``bpestore`` command (next to this Python first), or Skip."""
    found = shutil.which("bpestore", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if not found:
        raise Skip("the bpestore command is not installed")
    for subcommand in (["import", "gpt2"], ["encode"]):
        cli_help(found, subcommand)
    return found


def cli_help(command: str, subcommand: list[str]) -> str:
    """The help text of ``bpestore SUBCOMMAND``, or Skip when it fails."""
    done = subprocess.run([command, *subcommand, "--help"], capture_output=True, text=True)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise Skip(f"`bpestore {' '.join(subcommand)} --help` failed (exit {done.returncode}: {reason})")
    return done.stdout


def ids_facts(ids, text: str, params: dict) -> dict:
    """Token count, text bytes, a digest of the ids, and the ids saved to ``ids_out`` if asked."""
    import numpy as np

    array = np.asarray(ids, dtype=np.uint32)
    if params.get("ids_out"):
        np.save(params["ids_out"], array)
    return {"tokens": int(array.size), "bytes": len(text.encode("utf-8")), "ids_sha256": hashlib.sha256(array.tobytes()).hexdigest()}


def encode_job(params: dict, encode, *, second_pass: bool = False) -> Job:
    text = read_text(params["text"], params.get("max_bytes"))
    if second_pass:
        encode(text)  # the first pass, untimed
    return Job(lambda: encode(text), lambda ids: ids_facts(ids, text, params))


# ---------------------------------------------------------------- encode: text in memory -> ids


@task("encode:bpestore")
def encode_bpestore(params: dict) -> Job:
    return encode_job(params, bpestore_from_files(params).encode)


@task("encode:tiktoken")
def encode_tiktoken(params: dict) -> Job:
    return encode_job(params, tiktoken_gpt2_encode(params))


@task("encode:hf")
def encode_hf(params: dict) -> Job:
    tokenizer = hf_gpt2(params)
    return encode_job(params, lambda text: tokenizer.encode(text, add_special_tokens=False).ids)


@task("encode-dropout:bpestore")
def encode_dropout_bpestore(params: dict) -> Job:
    """BPE-dropout at ``params["dropout"]`` (seed 1): no cache, every pre-token merged afresh."""
    encode = bpestore_from_files(params).encode
    return encode_job(params, lambda text: encode(text, dropout=params["dropout"], seed=1))


# ---------------------------------------------------------------- encode-warm: a second pass


@task("encode-warm:bpestore")
def encode_warm_bpestore(params: dict) -> Job:
    return encode_job(params, bpestore_from_files(params).encode, second_pass=True)


@task("encode-warm:tiktoken")
def encode_warm_tiktoken(params: dict) -> Job:
    return encode_job(params, tiktoken_gpt2_encode(params), second_pass=True)


# ---------------------------------------------------------------- encode-cli: file -> .npy


def bpestore_store_class():
    """``bpestore.Store`` (or ``bpestore.store.Store`` in older layouts), or None."""
    bpestore = import_or_skip("bpestore")
    try:
        from bpestore import store
    except ImportError:
        store = None
    return getattr(bpestore, "Store", None) or getattr(store, "Store", None)


@task("prepare:bpestore-db")
def prepare_bpestore_db(params: dict) -> Job:
    """Import GPT-2 into a fresh store at ``params["db"]``: with the CLI when ``via`` is "cli",
    else with ``Store(db).save`` (or the CLI when there is no Store)."""
    Path(params["db"]).unlink(missing_ok=True)
    store_class = bpestore_store_class() if params.get("via") != "cli" else None
    if store_class is not None:
        tokenizer = bpestore_from_files(params)

        def run():
            with store_class(params["db"]) as store:
                store.save(params["name"], tokenizer)
    else:
        command = [bpestore_cli(), "import", "gpt2", params["vocab"], params["merges"], "--name", params["name"],
                   "--special-token", params["special"], "--db", params["db"]]

        def run():
            subprocess.run(command, check=True)

    return Job(run)


@task("encode-cli:bpestore")
def encode_cli_bpestore(params: dict) -> Job:
    command = [bpestore_cli(), "encode", params["name"], params["input"], "--output", params["npy_out"],
               "--workers", str(params["workers"]), "--db", params["db"]]
    if "--quiet" in cli_help(command[0], ["encode"]):
        command.append("--quiet")  # no progress bars
    startup = time.perf_counter()
    subprocess.run([command[0], "--help"], capture_output=True, check=True)
    startup = time.perf_counter() - startup

    def run():
        subprocess.run(command, check=True)

    def check(_) -> dict:
        return {"bytes": os.path.getsize(params["input"]), "cli_help_seconds": round(startup, 3)}

    return Job(run, check)


@task("encode-cli:tiktoken")
def encode_cli_tiktoken(params: dict) -> Job:
    import numpy as np

    encoding = tiktoken_gpt2(params)

    def run():
        ids = encoding.encode(read_text(params["input"]), allowed_special="all")
        dtype = np.uint16 if encoding.max_token_value < 1 << 16 else np.uint32
        np.save(params["npy_out"], np.asarray(ids, dtype=dtype))

    return Job(run, lambda _: {"bytes": os.path.getsize(params["input"])})


# ---------------------------------------------------------------- load: a stored tokenizer -> ready to encode


def sample_check(params: dict, tokenizer) -> dict:
    """Whether the loaded tokenizer encodes a sample text like tiktoken does."""
    if not params.get("sample"):
        return {}
    text = read_text(params["sample"])
    expected = tiktoken_gpt2_encode(params)(text)
    ids = tokenizer.encode(text)
    ids = getattr(ids, "ids", ids)  # an HF Encoding
    return {"sample_ids_match_tiktoken": list(ids) == expected}


@task("load:bpestore")
def load_bpestore(params: dict) -> Job:
    tokenizer_class = bpestore_tokenizer_class()
    if not hasattr(tokenizer_class, "from_db"):
        raise Skip("bpestore.Tokenizer.from_db does not exist yet")
    if not Path(params["db"]).is_file():
        raise Skip(f"no store at {params['db']} (the import failed or was skipped)")
    # from_db imports the store's loader when first called: an import, untimed like every other
    # (about 15 ms on a machine without a bytecode cache, PYTHONDONTWRITEBYTECODE=1; ~3 ms with one).
    importlib.import_module("bpestore.store.loader")
    return Job(lambda: tokenizer_class.from_db(params["db"], params["name"]), lambda tok: sample_check(params, tok))


@task("load:bpestore-files")
def load_bpestore_files(params: dict) -> Job:
    bpestore_tokenizer_class()
    return Job(lambda: bpestore_from_files(params), lambda tok: sample_check(params, tok))


class _AllowAll:
    """tiktoken's Encoding with its special tokens allowed, for :func:`sample_check`."""

    def __init__(self, encoding):
        self.encoding = encoding

    def encode(self, text):
        return self.encoding.encode(text, allowed_special="all")


@task("load:tiktoken")
def load_tiktoken(params: dict) -> Job:
    import_or_skip("tiktoken")
    return Job(lambda: tiktoken_gpt2(params), lambda enc: sample_check(params, _AllowAll(enc)))


@task("prepare:hf-json")
def prepare_hf_json(params: dict) -> Job:
    tokenizer = hf_gpt2(params)
    return Job(lambda: tokenizer.save(params["json"]))


@task("load:hf")
def load_hf(params: dict) -> Job:
    import_or_skip("tokenizers")
    from tokenizers import Tokenizer

    return Job(lambda: Tokenizer.from_file(params["json"]), lambda tok: sample_check(params, tok))


# ---------------------------------------------------------------- pathological: one huge pre-token


def pathological_text(kind: str, n: int, seed: int = 0) -> str:
    """``"a" * n``, or n random non-whitespace printable ASCII characters (no newline)."""
    if kind == "repeat":
        return "a" * n
    alphabet = [chr(c) for c in range(33, 127)]
    return "".join(random.Random(seed).choices(alphabet, k=n))


def pathological_job(params: dict, encode) -> Job:
    text = pathological_text(params["kind"], params["n"])
    return Job(lambda: encode(text), lambda ids: ids_facts(ids, text, params))


@task("pathological:bpestore")
def pathological_bpestore(params: dict) -> Job:
    return pathological_job(params, bpestore_from_files(params).encode)


@task("pathological:tiktoken")
def pathological_tiktoken(params: dict) -> Job:
    return pathological_job(params, tiktoken_gpt2_encode(params))


# ---------------------------------------------------------------- comparing saved ids (in a child, see sections.compare_ids)


@task("compare:ids")
def compare_ids(params: dict) -> Job:
    """Whether the arrays saved at ``expected`` and ``got`` are equal; else where they first differ."""
    import numpy as np

    def run() -> dict:
        expected, got = np.load(params["expected"]), np.load(params["got"])
        common = min(expected.size, got.size)
        differ = np.flatnonzero(expected[:common] != got[:common])
        if differ.size == 0 and expected.size == got.size:
            return {"identical": True, "detail": f"identical ({expected.size:,} ids)"}
        at = int(differ[0]) if differ.size else common
        window = slice(max(at - 3, 0), at + 4)
        return {"identical": False, "first_difference": at,
                "detail": f"first difference at position {at:,} (lengths {expected.size:,} vs {got.size:,}); "
                          f"around it: expected {expected[window].tolist()}, got {got[window].tolist()}"}

    return Job(run, lambda result: result)


# ---------------------------------------------------------------- encode-multilingual: a non-English sample


@task("encode-multilingual:bpestore")
def encode_multilingual_bpestore(params: dict) -> Job:
    return encode_job(params, bpestore_from_files(params).encode)


@task("encode-multilingual:tiktoken")
def encode_multilingual_tiktoken(params: dict) -> Job:
    return encode_job(params, tiktoken_gpt2_encode(params))


# ---------------------------------------------------------------- encode-batch / encode-file: threads


def batch_job(params: dict, threads: int, warm: bool = False) -> Job:
    """``Tokenizer.encode_batch`` of the text's lines on ``threads`` threads (fresh tokenizer); when
    ``warm``, the same call once more (the first, untimed, fills the tokenizer's caches)."""
    tokenizer = bpestore_from_files(params)
    if not hasattr(tokenizer, "encode_batch"):
        raise Skip("Tokenizer.encode_batch does not exist yet")
    text = read_text(params["text"], params.get("max_bytes"))
    lines = text.splitlines(keepends=True)
    if warm:
        tokenizer.encode_batch(lines, num_threads=threads)
        gc.collect()  # (the first call's lists are gone before the timed call)

    def check(batches) -> dict:
        return ids_facts([i for ids in batches for i in ids], text, params)

    return Job(lambda: tokenizer.encode_batch(lines, num_threads=threads), check)


@task("encode-batch:bpestore")
def encode_batch_one_thread(params: dict) -> Job:
    return batch_job(params, 1)


@task("encode-batch:bpestore-threads")
def encode_batch_threads(params: dict) -> Job:
    return batch_job(params, params["workers"])


@task("encode-batch:bpestore-warm")
def encode_batch_one_thread_warm(params: dict) -> Job:
    return batch_job(params, 1, warm=True)


@task("encode-batch:bpestore-threads-warm")
def encode_batch_threads_warm(params: dict) -> Job:
    return batch_job(params, params["workers"], warm=True)


# ---------------------------------------------------------------- encode-iterable: a stream of lines


def iterable_job(params: dict, whole: bool) -> Job:
    """``list(Tokenizer.encode_iterable(lines))``, or ``encode(text)`` of the same text when
    ``whole`` (fresh tokenizer, its caches empty either way)."""
    tokenizer = bpestore_from_files(params)
    text = read_text(params["text"], params.get("max_bytes"))
    lines = text.splitlines(keepends=True)

    def run():
        return tokenizer.encode(text) if whole else list(tokenizer.encode_iterable(lines))

    return Job(run, lambda ids: ids_facts(ids, text, params))


@task("encode-iterable:bpestore")
def encode_iterable_lines(params: dict) -> Job:
    return iterable_job(params, whole=False)


@task("encode-iterable:bpestore-encode")
def encode_iterable_whole(params: dict) -> Job:
    return iterable_job(params, whole=True)


def file_job(params: dict, threads: int, warm: bool = False) -> Job:
    """``bpestore.encode.files.encode_file_to_npy`` on ``threads`` threads, in process (fresh
    tokenizer, imports excluded: the CLI section times the whole command); when ``warm``, the
    same call once more (the first, untimed, fills the tokenizer's caches)."""
    tokenizer = bpestore_from_files(params)
    try:
        from bpestore.encode.files import encode_file_to_npy
    except ImportError:
        raise Skip("bpestore.encode.files.encode_file_to_npy does not exist") from None
    if warm:
        encode_file_to_npy(tokenizer, params["input"], params["npy_out"], workers=threads)

    def run():
        return encode_file_to_npy(tokenizer, params["input"], params["npy_out"], workers=threads)

    return Job(run, lambda count: {"bytes": os.path.getsize(params["input"]), "tokens": int(count)})


@task("encode-file:bpestore")
def encode_file_one_thread(params: dict) -> Job:
    return file_job(params, 1)


@task("encode-file:bpestore-threads")
def encode_file_threads(params: dict) -> Job:
    return file_job(params, params["workers"])


@task("encode-file:bpestore-warm")
def encode_file_one_thread_warm(params: dict) -> Job:
    return file_job(params, 1, warm=True)


@task("encode-file:bpestore-threads-warm")
def encode_file_threads_warm(params: dict) -> Job:
    return file_job(params, params["workers"], warm=True)
