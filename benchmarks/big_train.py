"""Train on a 1 GB corpus (vocab 32,000 by default) and report wall time, peak memory and progress.

    python benchmarks/big_train.py                       # builds ../shared-derived 1 GB corpus in /tmp
    python benchmarks/big_train.py --corpus big.txt      # or any corpus you have
    python benchmarks/big_train.py --gigatoken --repeat 3   # against gigatoken (the bench-peers extra)

Without ``--corpus`` the corpus is assembled from ``../shared/corpora`` (or ``$BPESTORE_SHARED``):
the files are concatenated and repeated to the requested size, and each repetition shifts the
letters a-z by a different amount (a Caesar shift, four variants), so that the vocabulary keeps
growing as it would in a bigger real corpus instead of repeating one file's words.

It runs ``bpestore.train_bpe`` in a child process with progress bars on, samples the proportional
set size (PSS) of the whole process tree every 0.1 s, and records when the progress bars last
moved, so that the longest silence is reported too. With ``--store`` it then runs ``bpestore
train`` on the same corpus into a fresh SQLite store (and, with ``--postgres URL``, into a fresh
PostgreSQL database), measured the same way, and reports each against ``train_bpe``. With
``--gigatoken`` it trains with ``gigatoken.train_bpe`` too (documents split at the same special
token; its merges differ where pairs tie, as its tie-break is not CS336's), the two alternating,
``--repeat`` fresh processes each, and reports medians and gigatoken's time over bpestore's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rss import process_tree, pss_kb

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("BPESTORE_SHARED", HERE.parent.parent / "shared"))
# As a user's Python runs: compiled modules kept (this sandbox sets PYTHONDONTWRITEBYTECODE).
ENVIRONMENT = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
SOURCES = ["wiki_en_57M.txt", "reuters_17M.txt", "sotu_11M.txt", "tinystories_800K.txt"]

STORE_CHILD = """
import subprocess, sys, time
path, vocab_size, workers, db = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
started = time.perf_counter()
subprocess.run([sys.executable, "-m", "bpestore.cli", "train", path, "--name", "big", "--vocab-size", vocab_size,
                "--special-token", "<|endoftext|>", "--workers", workers, "--db", db], check=True)
print("RESULT", time.perf_counter() - started, 0, 0, 0, 0, flush=True)
"""

CHILD = """
import sys, time, resource, bpestore
path, vocab_size, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
started = time.perf_counter()
vocab, merges = bpestore.train_bpe(path, vocab_size, ["<|endoftext|>"], workers=workers, progress=True)
print("RESULT", time.perf_counter() - started, len(vocab), len(merges),
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
      resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, flush=True)
"""


GIGATOKEN_CHILD = """
import sys, time, resource, gigatoken
path, vocab_size = sys.argv[1], int(sys.argv[2])
started = time.perf_counter()
vocab, merges = gigatoken.train_bpe(path, vocab_size, ["<|endoftext|>"], separator=b"<|endoftext|>")
print("RESULT", time.perf_counter() - started, len(vocab), len(merges),
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 0, flush=True)
"""


def caesar(shift: int) -> dict[int, int]:
    lower = {ord("a") + i: ord("a") + (i + shift) % 26 for i in range(26)}
    upper = {ord("A") + i: ord("A") + (i + shift) % 26 for i in range(26)}
    return lower | upper


def build_corpus(target: Path, size: int) -> None:
    texts = [(SHARED / "corpora" / name).read_text(encoding="utf-8") for name in SOURCES if (SHARED / "corpora" / name).exists()]
    if not texts:
        sys.exit(f"no corpora under {SHARED / 'corpora'}; give --corpus")
    base = "\n<|endoftext|>\n".join(texts) + "\n<|endoftext|>\n"
    variants = [base.translate(caesar(shift)).encode("utf-8") for shift in range(4)]
    written = 0
    with open(target, "wb") as out:
        repetition = 0
        while written < size:
            block = variants[repetition % 4][: size - written]
            out.write(block)
            written += len(block)
            repetition += 1
    # the last block may end inside a character: cut back to a whole one
    data_end = target.stat().st_size
    with open(target, "rb+") as out:
        out.seek(max(data_end - 4, 0))
        tail = out.read()
        keep = len(tail.decode("utf-8", errors="ignore").encode("utf-8"))
        out.truncate(data_end - len(tail) + keep)


def build_corpus_apart(target: Path, size: int) -> None:
    """``build_corpus`` in a child process. Run here, its peak (the sources and their four
    shifted copies in memory, about 1.3 GB) would stay this process's resident size for a
    while, and a child measured after it would start from it: ``ru_maxrss`` is inherited
    across ``fork`` and ``exec``, so every measured child's peak RSS would read 1.3 GB."""
    code = "import sys; from pathlib import Path; from big_train import build_corpus; build_corpus(Path(sys.argv[1]), int(sys.argv[2]))"
    subprocess.run([sys.executable, "-c", code, str(target), str(size)], check=True, cwd=HERE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, help="corpus to train on (default: build one)")
    parser.add_argument("--size-mb", type=int, default=1000, help="size of the built corpus, MB (default 1000)")
    parser.add_argument("--vocab-size", type=int, default=32_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--store", action="store_true", help="also train through the store (bpestore train), fresh SQLite")
    parser.add_argument("--postgres", default=None, help="with --store: also into a fresh database on this PostgreSQL server")
    parser.add_argument("--gigatoken", action="store_true", help="also train with gigatoken, alternating with train_bpe")
    parser.add_argument("--repeat", type=int, default=1, help="with --gigatoken: fresh processes of each (medians)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = args.corpus
        if corpus is None:
            corpus = Path(tmp) / "big.txt"
            print(f"building {args.size_mb} MB corpus at {corpus} ...", file=sys.stderr)
            build_corpus_apart(corpus, args.size_mb * 1_000_000)
        size_mb = corpus.stat().st_size / 1e6
        ours = [sys.executable, "-c", CHILD, str(corpus), str(args.vocab_size), str(args.workers)]
        if args.gigatoken:
            report = {"corpus_mb": round(size_mb, 1), **against_gigatoken(ours, corpus, args.vocab_size, args.repeat, args.workers)}
            print(json.dumps(report, indent=2))
            return
        report = {"corpus_mb": round(size_mb, 1), "train_bpe": measure(ours)}
        if args.store:
            db = Path(tmp) / "store.db"
            report["bpestore train, fresh SQLite store"] = measure(
                [sys.executable, "-c", STORE_CHILD, str(corpus), str(args.vocab_size), str(args.workers), str(db)]
            )
            if args.postgres:
                with postgres_database(args.postgres) as url:
                    report["bpestore train, fresh PostgreSQL database"] = measure(
                        [sys.executable, "-c", STORE_CHILD, str(corpus), str(args.vocab_size), str(args.workers), url]
                    )
            base = report["train_bpe"]
            for label, row in report.items():
                if isinstance(row, dict) and label != "train_bpe":
                    row["wall_vs_train_bpe"] = round(row["wall_seconds"] / base["wall_seconds"], 2)
                    row["peak_pss_vs_train_bpe"] = round(row["peak_tree_pss_mb"] / base["peak_tree_pss_mb"], 2)
        print(json.dumps(report, indent=2))


def against_gigatoken(ours: list[str], corpus: Path, vocab_size: int, repeat: int, workers: int) -> dict:
    """``train_bpe`` and gigatoken's ``train_bpe`` on ``corpus``, alternating, ``repeat`` fresh
    processes each (gigatoken with as many threads as bpestore's workers); medians."""
    from statistics import median

    theirs = [sys.executable, "-c", GIGATOKEN_CHILD, str(corpus), str(vocab_size)]
    environment = {**ENVIRONMENT, "RAYON_NUM_THREADS": str(workers)}
    runs: dict[str, list[dict]] = {"train_bpe": [], "gigatoken": []}
    for index in range(repeat):
        order = [("train_bpe", ours), ("gigatoken", theirs)]
        for label, command in order if index % 2 == 0 else order[::-1]:
            runs[label].append(measure(command, environment))
    report = {label: {"wall_seconds": median(row["wall_seconds"] for row in rows),
                      "training_seconds": median(row["training_seconds"] for row in rows),
                      "peak_tree_pss_mb": median(row["peak_tree_pss_mb"] for row in rows),
                      "runs": rows} for label, rows in runs.items()}
    report["bpestore_over_gigatoken"] = round(report["train_bpe"]["training_seconds"] / report["gigatoken"]["training_seconds"], 2)
    return report


def measure(command: list[str], environment: dict[str, str] | None = None) -> dict:
    """Runs ``command`` (a child that prints a RESULT line), sampling its process tree's PSS every
    0.1 s and watching its progress bars on stderr; exits if it fails."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment or ENVIRONMENT)
    started = time.monotonic()
    peak_pss = 0.0
    last_progress = time.monotonic()
    longest_silence = 0.0
    os.set_blocking(child.stderr.fileno(), False)
    while child.poll() is None:
        peak_pss = max(peak_pss, sum(pss_kb(pid) for pid in process_tree(child.pid)) / 1024)
        chunk = child.stderr.read()  # non-blocking: None when the bars are quiet
        now = time.monotonic()
        if chunk:
            longest_silence = max(longest_silence, now - last_progress)
            last_progress = now
        time.sleep(0.1)
    wall = time.monotonic() - started
    output = child.stdout.read().decode()
    if child.returncode:
        sys.exit(f"training failed ({child.returncode}):\n{output}\n{child.stderr.read()}")
    result = next(line for line in output.splitlines() if line.startswith("RESULT"))
    seconds, vocab, merges, main_rss, child_rss = result.split()[1:]
    row = {"wall_seconds": round(wall, 1), "training_seconds": round(float(seconds), 1), "peak_tree_pss_mb": round(peak_pss)}
    if int(vocab):
        row |= {
            "vocab_size": int(vocab), "merges": int(merges), "peak_rss_main_mb": round(float(main_rss)),
            "peak_rss_largest_worker_mb": round(float(child_rss)),
        }
    row["longest_progress_silence_s"] = round(longest_silence, 1)
    return row


def postgres_database(url: str):
    """A new database on the server of ``url``, dropped afterwards."""
    from store_backends import postgres_database as made

    return made(url)


if __name__ == "__main__":
    main()
