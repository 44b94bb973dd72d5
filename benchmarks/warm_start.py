"""A stored tokenizer's first pass over a text: cold (empty caches) against a warm table from the
store (``Tokenizer.from_db``, bpestore/encode/warm.py), side by side in one run.

Each row times one ``encode(text)`` in a fresh process (the tokenizer built untimed), medians of
``--repeat`` runs, interleaved so that a machine whose speed wanders affects every row alike. With
``--array``, ``encode_to_array(text)`` instead: the same encoder without the Python list, whose
making (an int reference per id) costs every row alike and so hides how much the table saves:

* ``cold``: ``Tokenizer.from_db(db, name, warm=False)``: what every load was before warm tables;
* ``db-vocab``: ``from_db`` of GPT-2 as ``bpestore import`` stores it (its warm table: the
  vocabulary's tokens that are whole pre-tokens);
* ``db-corpus``: ``from_db`` after ``bpestore warm gpt2 WARM_FILE`` (the most frequent pre-tokens
  of that file, by default the corpus the text is cut from: a tokenizer encoding its own
  training corpus, as an LM's data preparation does);
* ``second-pass``: the same tokenizer's second ``encode`` (its caches full): the ceiling;
* ``baseline`` (with ``--baseline DIR``): another bpestore package, e.g. a checkout of an older
  commit with its engine built in place, cold, from GPT-2's files (its store may predate this
  one's schema): the same machine's figure for "today's cold" when comparing with an old one.

It also reports how long ``from_db`` takes with and without the table (the table is read and
checked when loading), and checks that every row's ids equal the cold row's.

    python benchmarks/warm_start.py --encode-mb 20 --repeat 5
    python benchmarks/warm_start.py --encode-mb 20 --repeat 5 --array
    python benchmarks/warm_start.py --corpus ../shared/corpora/wiki_en_57M.txt --warm-file ../shared/corpora/reuters_17M.txt
    python benchmarks/warm_start.py --baseline /tmp/old    # /tmp/old: a checkout whose bpestore/ holds its built engine
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("BPESTORE_SHARED", HERE.parent.parent / "shared"))

CHILD = r"""
import ctypes, hashlib, json, sys, time
from bpestore import Tokenizer
db, name, text_path, max_bytes, variant, utf8_first, output, vocab, merges = sys.argv[1:10]
with open(text_path, encoding="utf-8") as f:
    text = f.read(int(max_bytes))
if utf8_first == "1":
    # CPython makes a str's UTF-8 form on the first call of an extension that reads it, and
    # keeps it: made here, untimed, the rows compare the tokenizers alone. (Through the C API,
    # not bpestore: the baseline's package may lack any given function.)
    ctypes.pythonapi.PyUnicode_AsUTF8AndSize.restype = ctypes.c_void_p
    ctypes.pythonapi.PyUnicode_AsUTF8AndSize(ctypes.py_object(text), None)
if output == "array":
    import numpy  # noqa: F401  (imported by encode_to_array's first call: not what is measured)
started = time.perf_counter()
if variant == "baseline":
    tokenizer = Tokenizer.from_files(vocab, merges, special_tokens=["<|endoftext|>"])
else:
    tokenizer = Tokenizer.from_db(db, name, warm=variant != "cold")
loaded = time.perf_counter() - started
encode = tokenizer.encode_to_array if output == "array" else tokenizer.encode
started = time.perf_counter()
ids = encode(text)
first = time.perf_counter() - started
started = time.perf_counter()
again = encode(text)
second = time.perf_counter() - started
del again  # (freed after the clock stopped, as the first pass's ids are)
digest = hashlib.sha256(repr(list(ids)).encode()).hexdigest()
warm = getattr(tokenizer, "warm_entries", 0)
print(json.dumps({"load": loaded, "first": first, "second": second, "warm": warm, "ids": digest, "mb": len(text.encode()) / 1e6}))
"""


def run_child(db: str, name: str, text: Path, max_bytes: int, variant: str, utf8_first: bool, output: str,
              baseline: Path | None = None) -> dict[str, float]:
    env = {**os.environ, "RAYON_NUM_THREADS": "1"}
    if variant == "baseline":
        assert baseline is not None
        env["PYTHONPATH"] = str(baseline.resolve())
    fixtures = SHARED / "fixtures"
    command = [sys.executable, "-c", CHILD, db, name, str(text), str(max_bytes), variant, "1" if utf8_first else "0", output,
               str(fixtures / "gpt2_vocab.json"), str(fixtures / "gpt2_merges.txt")]
    # (run from the filesystem's root: a bpestore/ in the working directory would shadow the baseline's)
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True, cwd="/")
    return json.loads(done.stdout)


def bpestore(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "bpestore.cli", *args], check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=SHARED / "corpora" / "wiki_en_57M.txt", help="the text (its first --encode-mb)")
    parser.add_argument("--warm-file", type=Path, default=None, help="what db-corpus warms from [default: --corpus]")
    parser.add_argument("--encode-mb", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--entries", type=int, default=262_144, help="the warm tables' size")
    parser.add_argument(
        "--with-utf8", action="store_true",
        help="time the str's first UTF-8 conversion too (CPython's, made by whichever call reads the str first; untimed by default)",
    )
    parser.add_argument("--array", action="store_true", help="time encode_to_array (a NumPy array) instead of encode (a list)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a directory holding another bpestore package (its engine built): a cold row of it, from GPT-2's files")
    args = parser.parse_args()
    if args.baseline and not (args.baseline / "bpestore" / "__init__.py").is_file():
        sys.exit(f"{args.baseline} holds no bpestore package (expected {args.baseline / 'bpestore' / '__init__.py'})")
    output = "array" if args.array else "list"
    fixtures = SHARED / "fixtures"
    for needed in (args.corpus, fixtures / "gpt2_vocab.json"):
        if not needed.exists():
            sys.exit(f"{needed} is missing (set BPESTORE_SHARED)")
    max_bytes = int(args.encode_mb * 1e6)
    with tempfile.TemporaryDirectory() as workdir:
        vocab_db, corpus_db = os.path.join(workdir, "vocab.db"), os.path.join(workdir, "corpus.db")
        for db in (vocab_db, corpus_db):
            bpestore("import", "gpt2", str(fixtures / "gpt2_vocab.json"), str(fixtures / "gpt2_merges.txt"), "--name", "gpt2",
                     "--special-token", "<|endoftext|>", "--warm-entries", str(args.entries), "--db", db, "--quiet")
        bpestore("warm", "gpt2", str(args.warm_file or args.corpus), "--entries", str(args.entries), "--db", corpus_db, "--quiet")
        variants = {"cold": vocab_db, "db-vocab": vocab_db, "db-corpus": corpus_db}
        if args.baseline:
            variants["baseline"] = ""
        runs: dict[str, list[dict[str, float]]] = {variant: [] for variant in variants}
        for _ in range(args.repeat):
            for variant, db in variants.items():
                runs[variant].append(run_child(db, "gpt2", args.corpus, max_bytes, variant, not args.with_utf8, output, args.baseline))
    digests = {run["ids"] for variant_runs in runs.values() for run in variant_runs}
    if len(digests) != 1:
        sys.exit("MISMATCH: the rows' ids differ")
    mb = runs["cold"][0]["mb"]
    cold = statistics.median(run["first"] for run in runs["cold"])
    print(f"text: {args.corpus.name}, first {mb:.1f} MB; GPT-2; {'encode_to_array' if args.array else 'encode'}; "
          f"fresh process per run, medians of {args.repeat}; ids identical in every row")
    print(f"db-corpus warmed from {(args.warm_file or args.corpus).name}; tables of at most {args.entries:,} pre-tokens; "
          + ("the str's first UTF-8 conversion timed" if args.with_utf8 else "the str's UTF-8 form made before timing"))
    if args.baseline:
        print(f"baseline: {args.baseline}, cold, loaded from GPT-2's files (its 'from_db s' is that load)")
    baseline = statistics.median(run["first"] for run in runs["baseline"]) if args.baseline else None
    print(f"{'row':<12} {'pieces':>9} {'from_db s':>10} {'encode s':>9} {'MB/s':>7} {'x cold':>7}"
          + (f" {'x baseline':>10}" if baseline else ""))
    rows = [(variant, [run["first"] for run in variant_runs]) for variant, variant_runs in runs.items()]
    rows.append(("second-pass", [run["second"] for run in runs["cold"]]))
    for variant, times in rows:
        source = runs.get(variant, runs["cold"])
        load = statistics.median(run["load"] for run in source)
        seconds = statistics.median(times)
        print(f"{variant:<12} {int(source[0]['warm']):>9,} {load:>10.3f} {seconds:>9.3f} {mb / seconds:>7.1f} {cold / seconds:>7.2f}"
              + (f" {baseline / seconds:>10.2f}" if baseline else ""))


if __name__ == "__main__":
    main()
