"""The merge loop's memory estimate (bpestore/train/memory.py) against its measured peak.

    python benchmarks/memory_estimate.py                  # the four corpora of ../shared/corpora
    python benchmarks/memory_estimate.py --merges 2000 20000 50000 --corpus big.txt

For each corpus and number of merges, a child process counts the corpus, resets its peak resident
memory (``/proc/self/clear_refs``, Linux only), runs the merge loop and reports the peak it added
(``VmHWM`` minus ``VmRSS`` before the loop) beside the estimate. This is where the formula's
constants were fitted; rerun it after changing crates/train/src/merge.rs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("BPESTORE_SHARED", HERE.parent.parent / "shared"))

CHILD = """
import json, sys
from bpestore._engine import GPT2_PATTERN, count_file, learn_merges
from bpestore.train.memory import estimate_merge_memory

path, merges = sys.argv[1], int(sys.argv[2])

def status(key):
    with open("/proc/self/status") as file:
        return next(int(line.split()[1]) * 1024 for line in file if line.startswith(key))

counts = count_file(path, GPT2_PATTERN, ["<|endoftext|>"])
estimate = estimate_merge_memory(counts, merges)
with open("/proc/self/clear_refs", "w") as file:
    file.write("5")
before = status("VmRSS:")
learn_merges(counts, merges)
print(json.dumps({"distinct": estimate.distinct_pretokens, "pretoken_bytes": estimate.pretoken_bytes,
                  "estimate": estimate.peak_bytes, "measured": status("VmHWM:") - before}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", nargs="*", type=Path, default=sorted((SHARED / "corpora").glob("*.txt")))
    parser.add_argument("--merges", nargs="*", type=int, default=[2000, 8000, 20000, 50000])
    args = parser.parse_args()
    print(f"{'corpus':<24}{'merges':>8}{'distinct':>10}{'bytes':>10}{'estimate MiB':>14}{'measured MiB':>14}{'error':>8}")
    for corpus in args.corpus:
        for merges in args.merges:
            output = subprocess.run([sys.executable, "-c", CHILD, str(corpus), str(merges)], capture_output=True, text=True, check=True)
            row = json.loads(output.stdout)
            error = (row["estimate"] - row["measured"]) / row["measured"]
            print(
                f"{corpus.name:<24}{merges:>8}{row['distinct']:>10}{row['pretoken_bytes']:>10}"
                f"{row['estimate'] / 2**20:>14.1f}{row['measured'] / 2**20:>14.1f}{error:>+8.0%}"
            )


if __name__ == "__main__":
    main()
