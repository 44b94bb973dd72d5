"""Benchmark bpestore against its peers on one corpus, in one run.

Run from the repository root with the project's Python:

    python benchmarks/run.py --corpus ../shared/corpora/wiki_en_57M.txt
    python benchmarks/run.py --only train --repeat 1
    python benchmarks/run.py --only encode,load --encode-mb 10
    python benchmarks/run.py --show benchmarks/results/20250101-120000.json   # the table again

Sections (``--only``, comma-separated; default all):

* ``train``: train a vocabulary (default 10,000 with ``<|endoftext|>``) with bpestore, Hugging Face
  ``tokenizers``, rustbpe and bpeasy; reading the corpus is timed for every tool.
* ``train-small``: CS336's check, ``corpus.en`` with vocab 500, in process, against its reference merges.
* ``train-patterns``: bpestore training on the corpus with the gpt2, cl100k_base and o200k_base pre-tokenizers (each time over GPT-2's).
* ``encode-dropout``: bpestore's plain encode against BPE-dropout (p = 0.1) on the same text.
* ``encode``: GPT-2 (from the shared fixtures) encoding the corpus text single-threaded: bpestore vs
  tiktoken (and HF for reference); the ids must be identical.
* ``encode-warm``: the same, timing a second pass of the same encoder (bpestore's caches then hold
  the text's words; tiktoken keeps none).
* ``encode-cli``: ``bpestore encode`` of the corpus file to ``.npy`` vs tiktoken + ``np.save``.
* ``load``: ``Tokenizer.from_db`` vs building tiktoken's Encoding from the files vs HF's
  ``Tokenizer.from_file``.
* ``pathological``: encoding ``"a" * n`` and n random non-whitespace characters, n = 125k .. 1M.
* ``peers``: the other encoders that are installed (tiktoken, gigatoken, quicktok, fastokens; the
  ``bench-peers`` extra) against bpestore, with GPT-2, cl100k_base and o200k_base, on English and the
  multilingual sample, cold and warm; each tool's ids are checked against tiktoken's before it is timed.
  ``train`` trains with gigatoken too when it is installed.

Every measurement runs in a fresh subprocess (``harness.py``) that times only the measured call and
reports its own peak memory. The table of medians goes to stdout (progress to stderr) and the same,
with every run, to ``--json`` (default ``benchmarks/results/<timestamp>.json``). The exit status is
1 when bpestore's output differs from the reference's.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import machine
from report import render
from rss import maxrss_mb
from sections import DEFAULT_REPEAT, RUNNERS, SECTIONS, Settings, log

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHARED = Path(os.environ.get("BPESTORE_SHARED", REPO.parent / "shared"))


def parse_sections(text: str) -> list[str]:
    chosen = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in SECTIONS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    return chosen


def parse_sizes(text: str) -> list[int]:
    return [int(float(size)) for size in text.split(",")]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=SHARED / "corpora" / "wiki_en_57M.txt", help="UTF-8 text file")
    parser.add_argument("--fixtures", type=Path, default=SHARED / "fixtures", help="directory with gpt2_vocab.json, gpt2_merges.txt")
    parser.add_argument("--only", type=parse_sections, default=list(SECTIONS), help=f"sections, from {','.join(SECTIONS)}")
    parser.add_argument("--repeat", type=int, help=f"runs per measurement (default: {DEFAULT_REPEAT})")
    parser.add_argument("--vocab-size", type=int, default=10_000)
    parser.add_argument("--special", default="<|endoftext|>", help="the special token for training ('' for none)")
    parser.add_argument("--workers", type=int, default=2, help="threads for bpestore (and rayon threads for HF and rustbpe when training)")
    parser.add_argument("--encode-mb", type=float, help="encode only the first MB (10^6 bytes) of the corpus (default: all)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds allowed to one run (default 3600)")
    parser.add_argument("--pathological-timeout", type=float, default=300, help="seconds allowed to one pathological run")
    parser.add_argument("--pathological-sizes", type=parse_sizes, default=[125_000, 250_000, 500_000, 1_000_000])
    parser.add_argument("--json", type=Path, help="where to write the results (default benchmarks/results/<timestamp>.json)")
    parser.add_argument("--show", type=Path, metavar="JSON", help="print the table of a saved results file and exit")
    parser.add_argument("--world", type=Path, help="a text of many languages (benchmarks/world_corpus.py) encoded by the peers section too")
    parser.add_argument("--keep-workdir", action="store_true", help="keep the temporary directory (ids, stores) for inspection")
    return parser.parse_args(argv)


def settings_from(args: argparse.Namespace, workdir: Path) -> Settings:
    from corpus import mb_to_bytes

    return Settings(
        corpus=args.corpus.resolve(), fixtures=args.fixtures.resolve(), workdir=workdir, vocab_size=args.vocab_size,
        special=args.special, workers=args.workers, encode_bytes=mb_to_bytes(args.encode_mb, args.corpus),
        repeat=args.repeat, timeout=args.timeout, pathological_timeout=args.pathological_timeout,
        pathological_sizes=args.pathological_sizes, world=args.world.resolve() if args.world else None,
    )


def settings_record(settings: Settings, sections: list[str]) -> dict:
    record = {key: str(value) if isinstance(value, Path) else value for key, value in vars(settings).items() if key != "workdir"}
    record.update(sections=sections, corpus_bytes=settings.corpus.stat().st_size,
                  runs={name: settings.runs(name) for name in sections})
    return record


def default_json_path(started: datetime.datetime) -> Path:
    return HERE / "results" / f"{started.strftime('%Y%m%d-%H%M%S')}.json"


def write_json(results: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")


def check_inputs(settings: Settings) -> None:
    missing = [path for path in (settings.corpus, settings.fixtures / "gpt2_vocab.json", settings.fixtures / "gpt2_merges.txt")
               if not path.is_file()]
    if missing:
        sys.exit(f"missing: {', '.join(map(str, missing))} (set --corpus/--fixtures or BPESTORE_SHARED)")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.show:
        print(render(json.loads(args.show.read_text())))
        return 0
    started = datetime.datetime.now().astimezone()
    json_path = args.json or default_json_path(started)
    workdir = Path(tempfile.mkdtemp(prefix="bpestore-bench-"))
    try:
        settings = settings_from(args, workdir)
        check_inputs(settings)
        results = {"started": started.isoformat(timespec="seconds"), "machine": machine.describe(REPO),
                   "settings": settings_record(settings, args.only), "sections": []}
        for name in args.only:
            log(f"[{name}]")
            results["sections"].append(RUNNERS[name](settings))
            write_json(results, json_path)  # after every section, so that a long run keeps what it has
    finally:
        if args.keep_workdir:
            log(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    results["runner_peak_rss_mb"] = maxrss_mb()["rss_self_mb"]  # the floor of every child's ru_maxrss
    write_json(results, json_path)
    print(render(results))
    print(f"\nJSON: {json_path}")
    failed = [item for result in results["sections"] for item in result["checks"] if item["fatal"] and not item["ok"]]
    for item in failed:
        print(f"!!! MISMATCH: {item['check']}: {item['detail']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
