"""Pre-tokenizer throughput: the engine's scanners and its regex path against Python's ``regex``.

For GPT-2, cl100k_base and o200k_base, on English (the first 20 MB of wiki_en_57M), German
(fixtures/german.txt, repeated) and multilingual text (tests/strategies.py's ``random_text``:
every script, odd whitespace), prints MB/s of UTF-8 input (medians of several runs):

* ``scanner``: ``Pretokenizer(pattern).piece_count(text)``, the hand-written scanner alone (the
  GIL released, no Python strings built);
* ``pieces``: ``Pretokenizer(pattern).pretokenize(text)``, the same plus a Python list of str;
* ``fancy_regex``: the engine's regex path (``regex_engine=True``), what any other pattern runs on;
* ``regex.findall``: Python's ``regex`` module, the reference.

Each figure is given by wall time and by CPU time of the measuring thread (``time.thread_time``;
the engine runs on the calling thread), which other processes on a busy machine inflate less.
The engine's pieces are checked against ``regex.findall`` on every text first.

    python benchmarks/pretokenize.py [--english-mb 20] [--runs 5] [--multilingual-chars 2000000]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

import regex

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.strategies

from bpestore import _engine  # noqa: E402
from bpestore.pretokenize import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN  # noqa: E402
from tests.strategies import random_text  # noqa: E402

PATTERNS = {"gpt2": GPT2_PATTERN, "cl100k": CL100K_PATTERN, "o200k": O200K_PATTERN}


def shared_dir() -> Path:
    return Path(os.environ.get("BPESTORE_SHARED", REPO.parent / "shared")).resolve()


def read_prefix(path: Path, megabytes: float) -> str:
    with open(path, "rb") as file:
        data = file.read(int(megabytes * 1e6))
    return data.decode("utf-8", errors="ignore")  # (a character cut at the end is dropped)


def samples(args) -> dict[str, str]:
    texts = {}
    english = shared_dir() / "corpora" / "wiki_en_57M.txt"
    if english.is_file():
        texts[f"english ({args.english_mb:g} MB of wiki_en_57M)"] = read_prefix(english, args.english_mb)
    else:
        print(f"skipping English: {english} not found", file=sys.stderr)
    german = shared_dir() / "fixtures" / "german.txt"
    if german.is_file():
        text = german.read_text(encoding="utf-8")
        repeat = max(1, int(args.german_mb * 1e6 / len(text.encode("utf-8"))))
        texts[f"german (german.txt x{repeat})"] = "\n".join([text] * repeat)
    multilingual = random_text(random.Random(0), args.multilingual_chars, special_pieces=False, assigned_only=True)
    texts[f"multilingual (random_text, {args.multilingual_chars:,} chars)"] = multilingual
    return texts


def measure(call, text: str, runs: int) -> tuple[float, float]:
    """Median MB/s of ``call(text)`` by wall time and by this thread's CPU time."""
    megabytes = len(text.encode("utf-8")) / 1e6
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.thread_time()
        call(text)
        cpus.append(time.thread_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return megabytes / statistics.median(walls), megabytes / statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--english-mb", type=float, default=20)
    parser.add_argument("--german-mb", type=float, default=5)
    parser.add_argument("--multilingual-chars", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=5, help="runs per engine measurement")
    parser.add_argument("--python-runs", type=int, default=3, help="runs per regex.findall measurement")
    args = parser.parse_args()

    print("MB/s of UTF-8 input, wall / CPU time; the last column compares CPU times")
    columns = ["scanner", "pieces", "fancy_regex", "regex.findall"]
    print(f"{'text':52} {'pattern':7} " + " ".join(f"{column:>15}" for column in columns) + f" {'scanner/findall':>16}")
    for label, text in samples(args).items():
        text.encode("utf-8")  # (PyO3 reads str as UTF-8, which Python caches after the first call)
        for name, pattern in PATTERNS.items():
            scanner = _engine.Pretokenizer(pattern, [])
            fancy = _engine.Pretokenizer(pattern, [], regex_engine=True)
            compiled = regex.compile(pattern)
            expected = compiled.findall(text)
            assert scanner.pretokenize(text) == expected, f"{name} differs from regex.findall on {label}"
            scanner.piece_count(text)  # warm: the Unicode table is built on first use
            fast = measure(scanner.piece_count, text, args.runs)
            pieces = measure(scanner.pretokenize, text, args.runs)
            slow = measure(fancy.piece_count, text, max(1, args.python_runs))
            python = measure(compiled.findall, text, args.python_runs)
            cells = " ".join(f"{wall:6.1f} /{cpu:7.1f}" for wall, cpu in (fast, pieces, slow, python))
            print(f"{label:52} {name:7} {cells} {fast[1] / python[1]:15.1f}x", flush=True)


if __name__ == "__main__":
    main()
