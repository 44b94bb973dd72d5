"""The spilling counter (``count_memory``, issue 26.5) against the in-memory one on a corpus:
time and peak memory of each, every run in a fresh process.

    python benchmarks/spill_count.py                    # wiki_en_57M of ../shared/corpora
    python benchmarks/spill_count.py --corpus big.txt --repeat 3 --threads 2 --fraction 0.1

The in-memory counter runs first; the spilling one then gets a budget of ``--fraction`` (a
tenth) of the memory the in-memory count added to its process (peak RSS, ``VmHWM``, minus the RSS
before counting), with and without ``--min-count``. Target: the spilling counter at most twice
the in-memory counter's time. The counts must be equal (pre-tokens, total), else it fails.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("BPESTORE_SHARED", HERE.parent.parent / "shared"))
MB = 1 << 20


def status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status (Linux only)")


def child(corpus: str, threads: int, budget: int, min_count: int, spill_dir: str) -> None:
    """One count in this (fresh) process; prints its facts as JSON."""
    from bpestore._engine import GPT2_PATTERN, count_file

    before = status_kib("VmRSS")
    options: dict[str, object] = {}
    if budget:
        options = {"max_memory": budget, "spill_dir": spill_dir, "min_count": min_count or None}
    started = time.perf_counter()
    counts = count_file(corpus, GPT2_PATTERN, ["<|endoftext|>"], threads, **options)  # type: ignore[arg-type]
    seconds = time.perf_counter() - started
    if min_count and not budget:
        counts = counts.pruned(min_count)
    print(json.dumps({
        "seconds": seconds, "distinct": len(counts), "total": counts.total,
        "added_mb": (status_kib("VmHWM") - before) / 1024, "peak_rss_mb": status_kib("VmHWM") / 1024,
    }))


def run(corpus: Path, threads: int, budget: int, min_count: int, spill_dir: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(corpus), str(threads), str(budget), str(min_count), spill_dir],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out)


def measure(label: str, repeat: int, *args) -> dict:
    runs = [run(*args) for _ in range(repeat)]
    result = dict(runs[0])
    result["seconds"] = statistics.median(r["seconds"] for r in runs)
    result["added_mb"] = max(r["added_mb"] for r in runs)
    result["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
    print(
        f"{label:<34} {result['seconds']:7.2f} s  peak RSS {result['peak_rss_mb']:7.1f} MiB "
        f"(counting added {result['added_mb']:7.1f} MiB)  {result['distinct']:,} distinct",
        flush=True,
    )
    return result


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        corpus, threads, budget, min_count, spill_dir = sys.argv[2:7]
        child(corpus, int(threads), int(budget), int(min_count), spill_dir)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=SHARED / "corpora" / "wiki_en_57M.txt")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each (the median time)")
    parser.add_argument("--fraction", type=float, default=0.1, help="the budget, as a fraction of the in-memory count's memory")
    parser.add_argument("--min-count", type=int, default=2)
    parser.add_argument("--spill-dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    print(f"{args.corpus.name}: {args.corpus.stat().st_size / MB:.0f} MiB, {args.threads} threads, median of {args.repeat}")
    common = (args.corpus, args.threads)
    memory = measure("in memory", args.repeat, *common, 0, 0, args.spill_dir)
    budget = int(memory["added_mb"] * MB * args.fraction)
    spilled = measure(f"spilling, budget {budget / MB:.1f} MiB", args.repeat, *common, budget, 0, args.spill_dir)
    pruned_memory = measure(f"in memory, then min_count {args.min_count}", args.repeat, *common, 0, args.min_count, args.spill_dir)
    pruned = measure(f"spilling, min_count {args.min_count}", args.repeat, *common, budget, args.min_count, args.spill_dir)
    for a, b in [(memory, spilled), (pruned_memory, pruned)]:
        if (a["distinct"], a["total"]) != (b["distinct"], b["total"]):
            raise SystemExit(f"the counts differ: {a} {b}")
    print(f"time ratio spilling / in memory: {spilled['seconds'] / memory['seconds']:.2f} "
          f"(with min_count {args.min_count}: {pruned['seconds'] / memory['seconds']:.2f}); target <= 2")
    print(f"peak RSS ratio: {spilled['peak_rss_mb'] / memory['peak_rss_mb']:.2f} "
          f"(with min_count {args.min_count}: {pruned['peak_rss_mb'] / memory['peak_rss_mb']:.2f})")


if __name__ == "__main__":
    main()
