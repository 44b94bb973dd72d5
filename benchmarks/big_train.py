"""Train on a 1 GB corpus (vocab 32,000 by default) and report wall time, peak memory and progress.

    python benchmarks/big_train.py                       # builds ../shared-derived 1 GB corpus in /tmp
    python benchmarks/big_train.py --corpus big.txt      # or any corpus you have

Without ``--corpus`` the corpus is assembled from ``../shared/corpora`` (or ``$BPESTORE_SHARED``):
the files are concatenated and repeated to the requested size, and each repetition shifts the
letters a-z by a different amount (a Caesar shift, four variants), so that the vocabulary keeps
growing as it would in a bigger real corpus instead of repeating one file's words.

It runs ``bpestore.train_bpe`` in a child process with progress bars on, samples the proportional
set size (PSS) of the whole process tree every 0.1 s, and records when the progress bars last
moved, so that the longest silence is reported too.
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
SOURCES = ["wiki_en_57M.txt", "reuters_17M.txt", "sotu_11M.txt", "tinystories_800K.txt"]

CHILD = """
import sys, time, resource, bpestore
path, vocab_size, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
started = time.perf_counter()
vocab, merges = bpestore.train_bpe(path, vocab_size, ["<|endoftext|>"], workers=workers, progress=True)
print("RESULT", time.perf_counter() - started, len(vocab), len(merges),
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
      resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, flush=True)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, help="corpus to train on (default: build one)")
    parser.add_argument("--size-mb", type=int, default=1000, help="size of the built corpus, MB (default 1000)")
    parser.add_argument("--vocab-size", type=int, default=32_000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = args.corpus
        if corpus is None:
            corpus = Path(tmp) / "big.txt"
            print(f"building {args.size_mb} MB corpus at {corpus} ...", file=sys.stderr)
            build_corpus(corpus, args.size_mb * 1_000_000)
        size_mb = corpus.stat().st_size / 1e6
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(corpus), str(args.vocab_size), str(args.workers)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
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
        output = child.stdout.read().decode()
        if child.returncode:
            sys.exit(f"training failed ({child.returncode}):\n{output}")
        result = next(line for line in output.splitlines() if line.startswith("RESULT"))
        seconds, vocab, merges, main_rss, child_rss = result.split()[1:]
        report = {
            "corpus_mb": round(size_mb, 1),
            "vocab_size": int(vocab),
            "merges": int(merges),
            "wall_seconds": round(float(seconds), 1),
            "peak_tree_pss_mb": round(peak_pss),
            "peak_rss_main_mb": round(float(main_rss)),
            "peak_rss_largest_worker_mb": round(float(child_rss)),
            "longest_progress_silence_s": round(longest_silence, 1),
        }
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
