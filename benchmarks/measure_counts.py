"""How long metrics.measure_counts takes on a corpus's most frequent pre-tokens, and how far the
numbers of the top N are from those of all of them: what the web explorer's MAX_PRETOKENS
(bpestore/web/data.py) trades.

    python benchmarks/measure_counts.py                         # wiki_en_57M of ../shared/corpora
    python benchmarks/measure_counts.py --corpus big.txt --top 50000 200000 --threads 2

The tokenizer is GPT-2's (the shared fixtures' vocab.json and merges.txt, with <|endoftext|>).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from bpestore import Tokenizer
from bpestore._engine import GPT2_PATTERN, count_file
from bpestore.metrics import measure_counts

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("BPESTORE_SHARED", HERE.parent.parent / "shared"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=SHARED / "corpora" / "wiki_en_57M.txt")
    parser.add_argument("--top", type=int, nargs="+", default=[50_000, 200_000])
    parser.add_argument("--threads", type=int, default=1, help="encoding threads (default 1)")
    args = parser.parse_args()
    fixtures = SHARED / "fixtures"
    tokenizer = Tokenizer.from_files(fixtures / "gpt2_vocab.json", fixtures / "gpt2_merges.txt", ["<|endoftext|>"])
    started = time.perf_counter()
    counts = count_file(args.corpus, GPT2_PATTERN, ["<|endoftext|>"], None)
    items = sorted(counts.items(), key=lambda item: (-item[1], item[0]))  # as the explorer reads them
    all_bytes = sum(len(pretoken) * count for pretoken, count in items)
    print(f"{args.corpus.name}: counted in {time.perf_counter() - started:.1f} s, {len(items):,} distinct pre-tokens")
    for top in sorted({min(n, len(items)) for n in args.top} | {len(items)}):
        part = items[:top]
        started = time.perf_counter()
        measured = measure_counts(tokenizer, part, num_threads=args.threads)
        seconds = time.perf_counter() - started
        covered = sum(len(pretoken) * count for pretoken, count in part) / all_bytes
        print(
            f"top {top:>10,}: {seconds:6.2f} s  bytes/token {measured.bytes_per_token:.4f}  "
            f"Rényi eff. {measured.renyi_efficiency():.4f}  bytes covered {covered:.2%}"
        )


if __name__ == "__main__":
    main()
