"""Imported Hugging Face tokenizers: bpestore against Hugging Face `tokenizers` on the same file.

For each byte-level ``tokenizer.json`` bpestore imports (``../shared/tokenizers``): the time to
import it (``formats.read``, the file to a checked model), then the time to encode the same text
with a fresh tokenizer (cold) in each library, after checking that the ids are identical. One
process, one thread (run it under ``taskset -c 0``: HF's batch paths use every core otherwise),
medians of ``--repeat`` runs.

    taskset -c 0 python3 benchmarks/hf_pipelines.py --text ../shared/corpora/wiki_en_57M.txt --mb 5
    taskset -c 0 python3 benchmarks/hf_pipelines.py --text /tmp/world.txt --mb 5     # benchmarks/world_corpus.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SHARED = Path(os.environ.get("BPESTORE_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
FAMILIES = ["llama3.2", "olmo2-dolma2", "gpt-neox-20b", "roberta-base", "falcon", "smollm"]


def hf_tokenizer(path: Path):
    """Hugging Face's tokenizer from the file, without truncation and padding (bpestore keeps
    neither; SmolLM's file pads to 192)."""
    from tokenizers import Tokenizer as HF

    tokenizer = HF.from_file(str(path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def median_seconds(run, repeat: int, prepare=lambda: None) -> float:
    """Median time of ``run(prepare())``, ``prepare`` untimed (a fresh tokenizer: the cold pass)."""
    times = []
    for _ in range(repeat):
        prepared = prepare()
        started = time.perf_counter()
        run(prepared)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--text", type=Path, default=SHARED / "corpora" / "wiki_en_57M.txt")
    parser.add_argument("--mb", type=float, default=5.0, help="MB (10^6 bytes) of the text's start to encode")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lines", action="store_true", help="encode the text's lines as a batch (HF's usual use), not one string")
    args = parser.parse_args(argv)

    from bpestore import Tokenizer, formats

    data = args.text.read_bytes()[: int(args.mb * 1e6)]
    text = data.decode("utf-8", errors="ignore")
    print(f"text: {args.text.name}, {len(data) / 1e6:.1f} MB{' as a batch of lines' if args.lines else ''}; one thread; "
          f"medians of {args.repeat}")
    # bpestore's built-in path on the same text: cl100k_base from the file the bpe-openai package
    # ships (a known pattern on its scanner, tiktoken's rule), else GPT-2's files
    builtin_name, builtin = "GPT-2", None
    try:
        from harness import Skip
        from peer_tasks import bpe_openai_file

        builtin = Tokenizer.from_format("tiktoken", bpe_openai_file("cl100k_base"), "cl100k_base")
        builtin_name = "cl100k_base"
    except (ImportError, Skip):
        builtin = Tokenizer.from_files(SHARED / "fixtures" / "gpt2_vocab.json", SHARED / "fixtures" / "gpt2_merges.txt", ["<|endoftext|>"])
    if args.lines:
        lines = text.splitlines(keepends=True)
        builtin_seconds = median_seconds(lambda tokenizer: tokenizer.encode_batch(lines, num_threads=1), args.repeat,
                                         lambda: Tokenizer.from_model(builtin.model))
    else:
        builtin_seconds = median_seconds(lambda tokenizer: tokenizer.encode(text), args.repeat, lambda: Tokenizer.from_model(builtin.model))
    print(f"built-in {builtin_name} path (bpestore, cold): {len(data) / 1e6 / builtin_seconds:.1f} MB/s")
    print(f"{'tokenizer':<14} {'import s':>9} {'bpestore MB/s':>14} {'HF MB/s':>9} {'bpestore/HF':>12} {'/built-in':>10}  ids")
    for family in FAMILIES:
        path = SHARED / "tokenizers" / family / "tokenizer.json"
        if not path.is_file():
            print(f"{family:<14} missing: {path}")
            continue
        import_seconds = median_seconds(lambda _: formats.read("hf", path), args.repeat)
        model = formats.read("hf", path).model
        oracle = hf_tokenizer(path)
        same = Tokenizer.from_model(model).encode(text) == oracle.encode(text, add_special_tokens=False).ids
        if args.lines:
            lines = text.splitlines(keepends=True)
            ours = median_seconds(lambda tokenizer: tokenizer.encode_batch(lines, num_threads=1), args.repeat,
                                  lambda: Tokenizer.from_model(model))
            theirs = median_seconds(lambda tokenizer: tokenizer.encode_batch(lines, add_special_tokens=False), args.repeat,
                                    lambda: hf_tokenizer(path))
        else:
            ours = median_seconds(lambda tokenizer: tokenizer.encode(text), args.repeat, lambda: Tokenizer.from_model(model))
            theirs = median_seconds(lambda tokenizer: tokenizer.encode(text, add_special_tokens=False), args.repeat,
                                    lambda: hf_tokenizer(path))
        mb = len(data) / 1e6
        print(f"{family:<14} {import_seconds:>9.3f} {mb / ours:>14.1f} {mb / theirs:>9.1f} {theirs / ours:>11.2f}x "
              f"{builtin_seconds / ours:>9.2f}x  {'identical' if same else 'DIFFERENT'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
