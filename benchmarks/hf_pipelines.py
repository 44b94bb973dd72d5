"""Imported Hugging Face tokenizers: bpestore against Hugging Face `tokenizers` on the same file.

For each byte-level ``tokenizer.json`` bpestore imports (``../shared/tokenizers``): the time to
load it in each library (the file to a tokenizer that has encoded one word: bpestore's
``Tokenizer.from_format("hf", path)`` and, from a store it was imported into, ``Tokenizer.from_db``;
HF's ``Tokenizer.from_file``; gigatoken's ``Tokenizer(path)``), then the time to encode the same text
with a fresh tokenizer (cold) in each library, after checking that the ids are identical; then
bpestore's ``encode_to_array`` against gigatoken (both give a NumPy array), cold and warm (the
second pass), where gigatoken loads the file and its ids are HF's. "deepseek-v3-pre" is Llama-3.2's file with DeepSeek-V3's pre-tokenizer written in (three
``Split`` regexes, the last ending in ``\s+(?!\S)|\s+``): the pipeline most recent models
publish, on a vocabulary at hand. One
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
FAMILIES = ["llama3.2", "olmo2-dolma2", "gpt-neox-20b", "roberta-base", "falcon", "smollm", "deepseek-v3-pre"]

# DeepSeek-V3's pre-tokenizer, as its tokenizer.json has it
DEEPSEEK_V3_PRE_TOKENIZER = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
    {"type": "Split", "pattern": {"Regex": "[一-龥\u3040-ゟ゠-ヿ]+"}, "behavior": "Isolated", "invert": False},
    {"type": "Split", "pattern": {"Regex": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
     "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
]}


def tokenizer_file(family: str, scratch: Path) -> Path:
    """The family's tokenizer.json (deepseek-v3-pre: written into ``scratch`` from Llama-3.2's)."""
    if family != "deepseek-v3-pre":
        return SHARED / "tokenizers" / family / "tokenizer.json"
    import json

    document = json.loads((SHARED / "tokenizers" / "llama3.2" / "tokenizer.json").read_text(encoding="utf-8"))
    document["pre_tokenizer"] = DEEPSEEK_V3_PRE_TOKENIZER
    path = scratch / "deepseek-v3-pre.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def gigatoken_tokenizer(path: Path):
    """gigatoken's tokenizer from the file, or None where it is not installed or refuses it."""
    try:
        import gigatoken

        return gigatoken.Tokenizer(str(path))
    except Exception:  # (gigatoken refuses files whose bytes are not all single tokens: Falcon, SmolLM)
        return None


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

    from bpestore import Store, Tokenizer, formats

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
    print(f"{'tokenizer':<16} {'load s':>9} {'from_db s':>9} {'HF load s':>9} {'giga load':>9} {'bpestore MB/s':>14} {'HF MB/s':>9} {'bpestore/HF':>12} {'/built-in':>10}  ids"
          f"{'':>8} array: {'bpestore':>9} {'gigatoken':>10} {'warm: bpestore':>15} {'gigatoken':>10}")
    import tempfile

    scratch = Path(tempfile.mkdtemp())
    for family in FAMILIES:
        path = tokenizer_file(family, scratch)
        if not path.is_file():
            print(f"{family:<14} missing: {path}")
            continue
        # loading: the file to a tokenizer that has encoded a word (bpestore builds its engine then)
        import_seconds = median_seconds(lambda _: Tokenizer.from_format("hf", path).encode("a"), args.repeat)
        hf_import_seconds = median_seconds(lambda _: hf_tokenizer(path).encode("a"), args.repeat)
        model = formats.read("hf", path).model
        with Store(scratch / "store.db") as store:
            store.save(family, model)
        db_seconds = median_seconds(lambda _: Tokenizer.from_db(scratch / "store.db", family).encode("a"), args.repeat)
        giga_load = "—"
        if gigatoken_tokenizer(path) is not None:
            giga_load = f"{median_seconds(lambda _: gigatoken_tokenizer(path).encode('a'), args.repeat):.3f}"
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
        # (gigatoken returns a NumPy array: bpestore's encode_to_array is the like for like)
        giga, giga_cold, giga_warm, ours_array, ours_warm = gigatoken_tokenizer(path), "—", "—", "—", "—"
        if not args.lines:
            ours_array = f"{mb / median_seconds(lambda tokenizer: tokenizer.encode_to_array(text), args.repeat, lambda: Tokenizer.from_model(model)):.1f}"
            warm = Tokenizer.from_model(model)
            warm.encode_to_array(text)
            ours_warm = f"{mb / median_seconds(lambda _: warm.encode_to_array(text), args.repeat):.1f}"
            if giga is not None and list(giga.encode(text)) == oracle.encode(text, add_special_tokens=False).ids:
                giga_cold = f"{mb / median_seconds(lambda tokenizer: tokenizer.encode(text), args.repeat, lambda: gigatoken_tokenizer(path)):.1f}"
                giga_warm = f"{mb / median_seconds(lambda _: giga.encode(text), args.repeat):.1f}"
        print(f"{family:<16} {import_seconds:>9.3f} {db_seconds:>9.3f} {hf_import_seconds:>9.3f} {giga_load:>9} {mb / ours:>14.1f} {mb / theirs:>9.1f} {theirs / ours:>11.2f}x "
              f"{builtin_seconds / ours:>9.2f}x  {'identical' if same else 'DIFFERENT':<9} {ours_array:>15} {giga_cold:>10} {ours_warm:>15} {giga_warm:>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
