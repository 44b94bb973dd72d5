"""Two builds of the engine side by side in one process: is a change to the Rust faster?

Separate processes are too noisy on a shared VM to show a change of a few percent: one build
against itself, in alternating fresh processes, gave 0.80-0.90x (the size of the environment
moves the stack, and the machine's speed wanders between processes). Here both builds'
extension files are loaded into one interpreter (two copies of a shared library are two sets
of statics: nothing is shared but the allocator) and their calls alternate, A then B, B then A,
on the same text object. The ratio of each round is A's time over B's; the median of those
ratios, with its quartiles, is the result (B's speed-up).

Two copies of one build (files at two paths), 2 MB and 101 rounds, gave 0.988-1.011x in four
runs, both orders; with 20 MB and 21 rounds, 1.01-1.06x, a bias toward B in some runs whose cause
is not known (the first-made encoder's memory?). So: many short rounds, and both orders (A B,
then B A: the second run's ratio should be the first's inverse).

A build is a directory holding the extension (``_engine.cpython-311-x86_64-linux-gnu.so`` or
another name this interpreter would import) or a path to the file itself, e.g. the installed one
and a copy made before a change:

    mkdir -p /tmp/before && cp bpestore/_engine.*.so /tmp/before/
    # ... change the Rust, rebuild (pip install -e . or maturin develop) ...
    python benchmarks/ab_engine.py /tmp/before bpestore --mb 2 --rounds 101
    python benchmarks/ab_engine.py bpestore /tmp/before --mb 2 --rounds 101
    python benchmarks/ab_engine.py /tmp/before bpestore --encoding cl100k_base --mode cold
    python benchmarks/ab_engine.py /tmp/before bpestore --mode file --threads 2 --corpus big.txt
    python benchmarks/ab_engine.py /tmp/before bpestore --mode count --corpus /tmp/world_big.txt --rounds 21

Modes: ``warm`` (the same encoder's later passes: its cache full), ``cold`` (a fresh encoder per
timed call), ``list`` (warm, a Python list instead of an array), ``file`` (the file at
``--corpus`` to a ``.npy``, a fresh encoder per call), ``count`` (training's counting: the
pre-tokens of the file at ``--corpus`` counted by ``count_file`` with ``--encoding``'s pattern,
``<|endoftext|>`` split out, on ``--threads`` threads; the counts must be equal). Every call's ids must be equal in number
across both builds and all rounds (and, except for ``file``, equal): a build that encodes
differently is an error, not a result.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("BPESTORE_SHARED", HERE.parent.parent / "shared"))


def extension_in(directory: Path) -> Path:
    """The engine's extension file in `directory`: the one this interpreter would import, by its
    order of suffixes (a build for this Python's version before a stable-ABI one)."""
    names = [f"_engine{suffix}" for suffix in importlib.machinery.EXTENSION_SUFFIXES]
    for name in names:
        if (directory / name).is_file():
            return directory / name
    raise SystemExit(f"error: no engine build in {directory} (none of {', '.join(names)})")


def load_build(path: str, tag: str) -> ModuleType:
    """The engine in `path` (a directory holding the extension, or the file), as module `tag`."""
    file = Path(path)
    if file.is_dir():
        file = extension_in(file)
    if not file.is_file():
        raise SystemExit(f"error: no engine build at {file}")
    # (the name's last part is the one the extension's init function is named after)
    name = f"{tag}._engine"
    loader = importlib.machinery.ExtensionFileLoader(name, str(file))
    spec = importlib.util.spec_from_file_location(name, str(file), loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def tokenizer_args(encoding: str) -> tuple[Any, ...]:
    """The engine's ``Encoder`` arguments for GPT-2 (from ../shared's fixtures) or a tiktoken
    encoding that bpe-openai ships."""
    from bpestore import Tokenizer

    if encoding == "gpt2":
        fixtures = SHARED / "fixtures"
        tokenizer = Tokenizer.from_files(fixtures / "gpt2_vocab.json", fixtures / "gpt2_merges.txt", special_tokens=["<|endoftext|>"])
    else:
        try:
            import bpe_openai
        except ImportError:
            raise SystemExit(f"error: {encoding} needs bpe-openai (pip install -e '.[bench-peers]')")
        data = Path(bpe_openai.__file__).parent / "data" / f"{encoding}.tiktoken.gz"
        tokenizer = Tokenizer.from_format("tiktoken", data, pattern=encoding)
    model = tokenizer.model
    merges = model.merges if model.merge_rule == "pair" else []
    return (tokenizer.vocab, merges, model.whole_ids, tokenizer.pattern, model.merge_rule)


def report(label: str, size: int, times: dict[str, list[float]], ratios: list[float]) -> None:
    """The line of results: each build's median speed, and B's speed-up with its quartiles."""
    ratios = sorted(ratios)
    quartile = len(ratios) // 4
    speed = {name: size / statistics.median(values) / 1e6 for name, values in times.items()}
    print(
        f"{label} ({size / 1e6:.1f} MB, {len(ratios)} rounds): "
        f"A {speed['A']:.1f} MB/s, B {speed['B']:.1f} MB/s (medians); "
        f"B's speed-up {statistics.median(ratios):.3f}x "
        f"(quartiles {ratios[quartile]:.3f}-{ratios[len(ratios) - 1 - quartile]:.3f})"
    )


def alternate(rounds: int, timed: Callable[[str, int], float | None]) -> tuple[dict[str, list[float]], list[float]] | None:
    """Each round times A then B, or B then A (alternating, so that drift weighs on both):
    ``timed(name, round)`` is one timed call's seconds, or None when its result differs, which
    ends the comparison (None). Returns each build's times and each round's ratio A/B."""
    times: dict[str, list[float]] = {"A": [], "B": []}
    ratios = []
    for round_ in range(rounds):
        took = {}
        for name in ["A", "B"] if round_ % 2 == 0 else ["B", "A"]:
            seconds = timed(name, round_)
            if seconds is None:
                return None
            took[name] = seconds
            times[name].append(seconds)
        ratios.append(took["A"] / took["B"])
    return times, ratios


def compare_counting(builds: dict[str, ModuleType], args: argparse.Namespace) -> int:
    """``--mode count``: both builds' ``count_file`` of the corpus, alternating; equal counts."""
    size = os.path.getsize(args.corpus)

    def call(build: ModuleType) -> tuple[float, Any]:
        pattern = {"gpt2": build.GPT2_PATTERN, "cl100k_base": build.CL100K_PATTERN, "o200k_base": build.O200K_PATTERN}
        started = time.perf_counter()
        counts = build.count_file(args.corpus, pattern[args.encoding], ["<|endoftext|>"], args.threads)
        return time.perf_counter() - started, counts

    expected = dict(call(builds["A"])[1].items())
    if dict(call(builds["B"])[1].items()) != expected:
        print("error: build B counted differently", file=sys.stderr)
        return 1

    def timed(name: str, round_: int) -> float | None:
        seconds, counts = call(builds[name])
        if len(counts) != len(expected):
            print(f"error: build {name} counted differently in round {round_ + 1}", file=sys.stderr)
            return None
        return seconds

    measured = alternate(args.rounds, timed)
    if measured is None:
        return 1
    report(f"{args.encoding} count, {args.threads} thread(s)", size, *measured)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("a", help="the build to compare against (directory or file)")
    parser.add_argument("b", help="the build whose speed-up is reported")
    parser.add_argument("--encoding", default="gpt2", choices=["gpt2", "cl100k_base", "o200k_base"])
    parser.add_argument("--corpus", default=str(SHARED / "corpora" / "wiki_en_57M.txt"))
    parser.add_argument("--mb", type=float, default=20.0, help="megabytes of the corpus to encode (not for file)")
    parser.add_argument("--mode", default="warm", choices=["warm", "cold", "list", "file", "count"])
    parser.add_argument("--threads", type=int, default=1, help="for --mode file and count")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    if not Path(args.corpus).is_file():
        raise SystemExit(f"error: no corpus at {args.corpus} (set BPESTORE_SHARED or pass --corpus)")

    builds = {"A": load_build(args.a, "build_a"), "B": load_build(args.b, "build_b")}
    if args.mode == "count":
        return compare_counting(builds, args)
    encoder_args = tokenizer_args(args.encoding)
    if args.mode == "file":
        text, size = "", os.path.getsize(args.corpus)
    else:
        with open(args.corpus, encoding="utf-8") as f:
            text = f.read(int(args.mb * 1e6))
        size = len(text.encode("utf-8"))
    # (removed on every way out, the early returns of a build that encodes differently too)
    with tempfile.TemporaryDirectory(prefix="ab_engine_") as workdir:

        def call(encoder: Any) -> tuple[float, Any]:
            """One timed call; its result (ids, or their number for a file)."""
            if args.mode == "file":
                output = Path(workdir) / "ids.npy"
                output.unlink(missing_ok=True)
                started = time.perf_counter()
                count = encoder.encode_file_to_npy(args.corpus, output, threads=args.threads)
                return time.perf_counter() - started, count
            encode: Callable[[str], Any] = encoder.encode if args.mode == "list" else encoder.encode_to_buffer
            started = time.perf_counter()
            ids = encode(text)
            elapsed = time.perf_counter() - started
            return elapsed, ids if args.mode == "list" else bytes(ids)

        fresh = args.mode in ("cold", "file")
        warm = {} if fresh else {name: build.Encoder(*encoder_args) for name, build in builds.items()}
        # A's ids are the reference; the untimed first pass gives them (and fills a warm cache).
        _, expected = call(warm["A"] if warm else builds["A"].Encoder(*encoder_args))
        if warm and call(warm["B"])[1] != expected:
            print("error: build B encoded differently in its first pass", file=sys.stderr)
            return 1

        def timed(name: str, round_: int) -> float | None:
            seconds, result = call(builds[name].Encoder(*encoder_args) if fresh else warm[name])
            if result != expected:
                print(f"error: build {name} encoded differently in round {round_ + 1}", file=sys.stderr)
                return None
            return seconds

        measured = alternate(args.rounds, timed)
    if measured is None:
        return 1
    report(f"{args.encoding} {args.mode}", size, *measured)
    return 0


if __name__ == "__main__":
    sys.exit(main())
