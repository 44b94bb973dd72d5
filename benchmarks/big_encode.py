"""Encode a large corpus file with GPT-2 into a ``.npy`` of ids: bpestore against gigatoken.

    python benchmarks/big_encode.py --corpus /tmp/train1g/big.txt            # a 1 GB corpus
    python benchmarks/big_encode.py --corpus ../shared/corpora/wiki_en_57M.txt --repeat 5
    python benchmarks/big_encode.py --threads 1 --gigatoken-paths encode      # fewer rows
    python benchmarks/big_encode.py --corpus big.txt --baseline /tmp/old      # before/after

Without ``--corpus`` it builds ``big_train.py``'s corpus (``--size-mb``, 1,000 by default) in a
temporary directory. bpestore runs ``bpestore.encode.files.encode_file_to_npy(tokenizer, corpus,
out.npy, workers=N)`` for each N of ``--threads``; gigatoken runs each of ``--gigatoken-paths``
(``npy_tasks.py`` says what each does; ``encode`` is single-threaded and runs at one thread only)
on a pool of N threads (``RAYON_NUM_THREADS``), its ids saved with ``np.save`` inside the timed
call. Every run is a fresh process (``harness.py``: the tokenizer built untimed, the call timed,
``ru_maxrss`` of that process after it, a sampled PSS of its tree); the rows alternate, in
reverse order every other round, ``--repeat`` rounds. With ``--baseline DIR`` (a directory
holding another ``bpestore`` package, e.g. a copy with the engine before a change) bpestore runs
from there too, as ``bpestore-baseline``.

After the first round, untimed, every output is compared with bpestore's first (element type and
every id), and bpestore's first ids with tiktoken's of the corpus's first ``--prefix-mb`` (when
tiktoken is installed). Ratios are reported only for rows whose ids are identical, each the
median over rounds of the two runs' ratio in that round: gigatoken's time over bpestore's (its
fastest path by median, on at most as many threads; above 1, bpestore is faster), and the
baseline's time and CPU time over bpestore's. The table goes to stdout and the JSON (every run, the
machine, the load) to ``--json`` if given. Exit status 1 when bpestore's outputs differ.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from statistics import median

from big_train import build_corpus_apart
from harness import run_task
from machine import describe
from report import number, table

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("BPESTORE_SHARED", HERE.parent.parent / "shared"))
GIGATOKEN_PATHS = ("encode", "files", "documents")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, help="the file to encode (default: build big_train.py's corpus)")
    parser.add_argument("--size-mb", type=int, default=1000, help="size of the built corpus, MB (default 1000)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds: fresh processes of each row (default 3)")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated (default 1,2)")
    parser.add_argument("--gigatoken-paths", default=",".join(GIGATOKEN_PATHS),
                        help=f"gigatoken's ways from a file to ids, comma-separated, of {', '.join(GIGATOKEN_PATHS)} "
                             "(default all; none: bpestore only)")
    parser.add_argument("--baseline", type=Path, help="a directory holding another bpestore package, run as bpestore-baseline")
    parser.add_argument("--prefix-mb", type=float, default=1.0, help="prefix checked against tiktoken, MB (default 1)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before a run is stopped (default 1800)")
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    parser.add_argument("--keep-workdir", action="store_true", help="keep the outputs (.npy files) in the work directory")
    args = parser.parse_args(argv)
    args.threads = [int(n) for n in args.threads.split(",") if n]
    args.gigatoken_paths = [path for path in args.gigatoken_paths.split(",") if path and path != "none"]
    unknown = set(args.gigatoken_paths) - set(GIGATOKEN_PATHS)
    if unknown:
        parser.error(f"unknown gigatoken path(s): {', '.join(sorted(unknown))}")
    return args


def rows_to_run(args: argparse.Namespace) -> list[dict]:
    """Each row: label, task, threads, and the environment its process gets."""
    rows = []
    for threads in args.threads:
        environment = {"RAYON_NUM_THREADS": str(threads)}
        rows.append({"label": f"bpestore {threads}t", "task": "big-encode:bpestore", "threads": threads, "env": environment})
        if args.baseline:
            rows.append({"label": f"bpestore-baseline {threads}t", "task": "big-encode:bpestore", "threads": threads,
                         "env": {**environment, "PYTHONPATH": str(args.baseline.resolve())}})
        for path in args.gigatoken_paths:
            if path == "encode" and threads != 1:
                continue  # (one document on the calling thread: the pool is not used)
            rows.append({"label": f"gigatoken-{path} {threads}t", "task": f"big-encode:gigatoken-{path}", "threads": threads,
                         "env": environment})
    return rows


def summary(row: dict, runs: list[dict], corpus_mb: float) -> dict:
    done = [run for run in runs if run["status"] == "ok"]
    if not done:
        return {"status": runs[0]["status"], "reason": runs[0].get("reason", "")}
    seconds = median(run["seconds"] for run in done)
    return {
        "status": "ok", "seconds": seconds, "seconds_all": [run["seconds"] for run in done], "mb_per_s": corpus_mb / seconds,
        "cpu_seconds": median(run["cpu_seconds"] for run in done),
        "peak_rss_mb": max(run["peak_rss_mb"] for run in done),
        "tree_pss_peak_mb": max(run.get("tree_pss_peak_mb") or 0 for run in done),
        "tokens": done[0]["info"].get("tokens"),
    }


def paired(theirs: list[dict], ours: list[dict], key: str = "seconds") -> float | None:
    """The median over rounds of their ``key`` over ours, each round's two runs taken close
    together (a ratio holds better than two medians while the machine's load drifts)."""
    pairs = [their[key] / our[key] for their, our in zip(theirs, ours) if their["status"] == our["status"] == "ok" and our[key]]
    return median(pairs) if pairs else None


def ratios(results: dict[str, dict], rows: list[dict], runs: dict[str, list[dict]], checked: dict[str, str]) -> None:
    """Adds to each bpestore row, as paired ratios (above 1: bpestore is faster): the time of
    gigatoken's fastest path (by median) with identical ids on at most as many threads over
    bpestore's, and the baseline's time and CPU time (same threads) over bpestore's."""
    for row in rows:
        label, result = row["label"], results[row["label"]]
        if not label.startswith("bpestore ") or result["status"] != "ok":
            continue
        usable = [other for other in rows if other["threads"] <= row["threads"] and results[other["label"]]["status"] == "ok"
                  and checked.get(other["label"]) == "identical"]
        same = [other for other in usable if other["threads"] == row["threads"]]
        # (gigatoken's best with at most as many threads: its one-thread path may beat its pool)
        peers = [other["label"] for other in usable if other["label"].startswith("gigatoken")]
        if peers:
            fastest = min(peers, key=lambda peer: results[peer]["seconds"])
            result["fastest_gigatoken"] = fastest
            result["speed_vs_gigatoken"] = paired(runs[fastest], runs[label])
        baseline = [other["label"] for other in same if other["label"].startswith("bpestore-baseline")]
        if baseline:
            result["speed_vs_baseline"] = paired(runs[baseline[0]], runs[label])
            result["cpu_vs_baseline"] = paired(runs[baseline[0]], runs[label], "cpu_seconds")


def render(corpus: Path, corpus_mb: float, rows: list[dict], results: dict[str, dict], checked: dict[str, str]) -> str:
    headers = ["row", "median s (runs)", "MB/s", "CPU s", "peak RSS MiB", "tree PSS MiB", "ids", "x gigatoken", "x baseline",
               "x baseline CPU"]
    lines = []
    for row in rows:
        result = results[row["label"]]
        if result["status"] != "ok":
            lines.append([row["label"], result["status"], "", "", "", "", result.get("reason", "")[:60], "", "", ""])
            continue
        times = result["seconds_all"]
        lines.append([
            row["label"], f"{result['seconds']:.2f} ({len(times)}: {min(times):.2f}-{max(times):.2f})", number(result["mb_per_s"], "{:.1f}"),
            number(result["cpu_seconds"], "{:.1f}"), number(result["peak_rss_mb"], "{:.0f}"), number(result["tree_pss_peak_mb"], "{:.0f}"),
            checked.get(row["label"], "not checked"), number(result.get("speed_vs_gigatoken"), "{:.2f}x"),
            number(result.get("speed_vs_baseline"), "{:.2f}x"), number(result.get("cpu_vs_baseline"), "{:.2f}x"),
        ])
    prefix = checked.get("tiktoken prefix", "not checked")
    return "\n".join([f"{corpus} ({corpus_mb:,.1f} MB); bpestore's ids against tiktoken's on a prefix: {prefix}", table(headers, lines)])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    machine = describe(HERE.parent)
    with tempfile.TemporaryDirectory(prefix="big_encode.") as workdir:
        work = Path(workdir)
        corpus = args.corpus
        if corpus is None:
            corpus = work / "big.txt"
            print(f"building {args.size_mb} MB corpus at {corpus} ...", file=sys.stderr)
            build_corpus_apart(corpus, args.size_mb * 1_000_000)
        corpus_mb = corpus.stat().st_size / 1e6
        params = {"encoding": "gpt2", "vocab": str(SHARED / "fixtures" / "gpt2_vocab.json"),
                  "merges": str(SHARED / "fixtures" / "gpt2_merges.txt"), "special": "<|endoftext|>",
                  "ranks": str(work / "gpt2.tiktoken"), "json": str(work / "gpt2.json"), "input": str(corpus)}
        prepared = run_task("prepare:peer-ranks", params, timeout=args.timeout)
        rows = rows_to_run(args)
        if prepared["status"] != "ok":  # (no tiktoken: no ranks file, no gigatoken rows)
            rows = [row for row in rows if not row["label"].startswith("gigatoken")]
        outputs = {row["label"]: str(work / f"{row['label'].replace(' ', '-')}.npy") for row in rows}
        runs: dict[str, list[dict]] = {row["label"]: [] for row in rows}
        checked: dict[str, str] = {}
        for index in range(args.repeat):
            for row in rows if index % 2 == 0 else rows[::-1]:
                print(f"round {index + 1}/{args.repeat}: {row['label']} ...", file=sys.stderr)
                outcome = run_task(row["task"], {**params, "threads": row["threads"], "npy_out": outputs[row["label"]]},
                                   timeout=args.timeout, env=row["env"])
                runs[row["label"]].append(outcome)
            if index == 0:
                written = {label: path for label, path in outputs.items() if runs[label][0]["status"] == "ok"}
                reference = rows[0]["label"]
                if reference in written:
                    check = run_task("big-encode:check", {**params, "outputs": written, "reference": reference,
                                                          "prefix_bytes": int(args.prefix_mb * 1_000_000)}, timeout=args.timeout)
                    checked = check.get("info") or {reference: f"check {check['status']}: {check.get('reason', '')}"}
                    print(f"ids: {json.dumps(checked)}", file=sys.stderr)
        if args.keep_workdir:
            kept = Path(tempfile.mkdtemp(prefix="big_encode-kept."))
            for path in outputs.values():
                if os.path.exists(path):
                    os.replace(path, kept / Path(path).name)
            print(f"outputs kept in {kept}", file=sys.stderr)
    results = {row["label"]: summary(row, runs[row["label"]], corpus_mb) for row in rows}
    ratios(results, rows, runs, checked)
    machine["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(render(corpus, corpus_mb, rows, results, checked))
    print(f"load average (1, 5, 15 min) at start {machine['load_average_at_start']}, at end {machine['load_average_at_end']}; "
          f"{machine['usable_cores']} usable cores; commit {machine['git_commit']}")
    if args.json:
        args.json.write_text(json.dumps({"corpus": str(corpus), "corpus_mb": corpus_mb, "settings": {
            "repeat": args.repeat, "threads": args.threads, "gigatoken_paths": args.gigatoken_paths,
            "baseline": str(args.baseline) if args.baseline else None}, "machine": machine, "ids": checked,
            "results": results, "runs": runs}, indent=2))
    bad = [label for label, found in checked.items() if label.startswith("bpestore") and found != "identical"]
    return 1 if bad or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
