"""The sections: which measurements each runs, on which inputs, and what it checks.

Each section returns ``{"name", "rows", "checks", "notes"}``: a row per tool with its runs and
their summary (median seconds, max peak memory, the task's facts), checks that compare the tools'
outputs (a failed check on bpestore's output makes the run exit non-zero), and notes on the setup.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import gpt2
from corpus import copy_prefix, detect_separator, write_multilingual_text
from harness import run_task

SECTIONS = ("train", "train-small", "train-patterns", "encode", "encode-dropout", "encode-multilingual", "encode-warm", "encode-batch", "encode-iterable",
            "encode-file", "encode-cli", "load", "pathological", "peers")
DEFAULT_REPEAT = {"train": 3, "train-small": 7, "train-patterns": 3, "encode": 3, "encode-dropout": 3, "encode-multilingual": 3, "encode-warm": 3, "encode-batch": 3,
                  "encode-iterable": 3, "encode-file": 3, "encode-cli": 3, "load": 7, "pathological": 3, "peers": 3}
SINGLE_THREAD_ENV = {"TOKENIZERS_PARALLELISM": "false", "RAYON_NUM_THREADS": "1"}
BPESTORE = "bpestore"


@dataclass
class Settings:
    corpus: Path
    fixtures: Path
    workdir: Path
    vocab_size: int = 10_000
    special: str = gpt2.ENDOFTEXT
    workers: int = 2
    encode_bytes: int | None = None
    repeat: int | None = None
    timeout: float = 3600.0
    pathological_timeout: float = 300.0
    pathological_sizes: list[int] = field(default_factory=lambda: [125_000, 250_000, 500_000, 1_000_000])
    world: Path | None = None  # real running text in many languages (benchmarks/world_corpus.py), for `peers`

    def runs(self, section: str) -> int:
        return self.repeat if self.repeat is not None else DEFAULT_REPEAT[section]

    def gpt2_params(self) -> dict:
        return {"vocab": str(self.fixtures / "gpt2_vocab.json"), "merges": str(self.fixtures / "gpt2_merges.txt"),
                "special": gpt2.ENDOFTEXT, "name": "gpt2"}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- measuring and summarizing


def outcome_line(outcome: dict) -> str:
    if outcome["status"] == "ok":
        return f"{outcome['seconds']:.3f} s, peak RSS {outcome['peak_rss_mb']:.0f} MiB"
    return f"{outcome['status'].upper()}: {outcome.get('reason', '')}"


def measure(section: str, tool: str, params: dict | Callable[[int], dict], runs: int, *,
            timeout: float, env: dict | None = None, first: int = 0, of: int | None = None) -> dict:
    """Run ``section:tool`` ``runs`` times, each in a fresh process; stop at the first run that does
    not succeed. ``params`` may be a function of the run's index (to save outputs on run 0 only).
    The runs are numbered from ``first``, of ``of`` in all (default: ``runs``), in the log."""
    task = f"{section}:{tool}"
    outcomes = []
    for index in range(first, first + runs):
        outcome = run_task(task, params(index) if callable(params) else params, timeout=timeout, env=env)
        outcomes.append(outcome)
        log(f"  {task} run {index + 1}/{of or runs}: {outcome_line(outcome)}")
        if outcome["status"] != "ok":
            break
    return summarize(tool, outcomes)


def summarize(tool: str, outcomes: list[dict]) -> dict:
    ok = [outcome for outcome in outcomes if outcome["status"] == "ok"]
    failed = [outcome for outcome in outcomes if outcome["status"] != "ok"]
    row = {"tool": tool, "status": failed[-1]["status"] if failed else "ok", "runs": outcomes}
    if failed:
        row["reason"] = failed[-1].get("reason", "")
    if ok:
        row["seconds"] = statistics.median(outcome["seconds"] for outcome in ok)
        row["seconds_all"] = [round(outcome["seconds"], 4) for outcome in ok]
        row["cpu_seconds"] = statistics.median(outcome["cpu_seconds"] for outcome in ok)
        for key in ("peak_rss_mb", "rss_self_mb", "rss_children_mb", "tree_pss_peak_mb"):
            values = [outcome[key] for outcome in ok if outcome.get(key) is not None]
            row[key] = max(values) if values else None
        row["info"] = ok[0]["info"]
        if row["info"].get("bytes"):
            row["mb_per_s"] = row["info"]["bytes"] / 1e6 / row["seconds"]
    return row


def add_ratios(rows: list[dict], reference: str = BPESTORE) -> None:
    """``bpestore_over_peer``: bpestore's median time divided by each row's (above 1: bpestore is slower).
    bpestore's row is ``reference``, or else the first timed row whose tool starts with it."""
    timed = [row for row in rows if "seconds" in row and row["tool"].startswith(reference)]
    base = next((row for row in timed if row["tool"] == reference), timed[0] if timed else None)
    for row in rows:
        if base and "seconds" in row and row is not base:
            row["bpestore_over_peer"] = base["seconds"] / row["seconds"]


def check(name: str, ok: bool, detail: str, *, fatal: bool = True) -> dict:
    """A check of the tools' outputs; ``fatal`` ones (bpestore's) make the run fail."""
    if not ok:
        log(f"  {'MISMATCH' if fatal else 'warning'}: {name}: {detail}")
    return {"check": name, "ok": ok, "detail": detail, "fatal": fatal}


def compare_ids(name: str, reference: Path, other: Path, *, fatal: bool = True) -> dict:
    """Whether two saved id arrays are identical; else where they first differ. Compared in a child
    process: this process must stay small, since every child it starts inherits its peak RSS as the
    floor of its own ``ru_maxrss``."""
    outcome = run_task("compare:ids", {"expected": str(reference), "got": str(other)})
    if outcome["status"] != "ok":
        return check(name, False, f"could not compare: {outcome.get('reason', '')}", fatal=fatal)
    return check(name, outcome["info"]["identical"], outcome["info"]["detail"], fatal=fatal)


def ok_rows(rows: list[dict], *tools: str) -> bool:
    return all(any(row["tool"] == tool and row["status"] == "ok" for row in rows) for tool in tools)


def section(name: str, rows: list[dict], checks: list[dict] | None = None, notes: list[str] | None = None) -> dict:
    add_ratios(rows)
    return {"name": name, "rows": rows, "checks": checks or [], "notes": notes or []}


# ---------------------------------------------------------------- train


TRAIN_TOOLS = (BPESTORE, "hf", "rustbpe", "bpeasy", "gigatoken")


def train_section(settings: Settings) -> dict:
    separator = detect_separator(settings.corpus, settings.special)
    specials = 1 if settings.special else 0
    base = {"corpus": str(settings.corpus), "vocab_size": settings.vocab_size, "special": settings.special,
            "workers": settings.workers, "separator": separator}
    tokens_out = {tool: settings.workdir / f"train-{tool}-tokens.json" for tool in TRAIN_TOOLS}
    rows = []
    for tool in TRAIN_TOOLS:
        params = lambda index, tool=tool: {**base, "tokens_out": str(tokens_out[tool]) if index == 0 else None}
        rows.append(measure("train", tool, params, settings.runs("train"), timeout=settings.timeout,
                            env={"RAYON_NUM_THREADS": str(settings.workers)}))
    notes = [
        f"documents for the peers: separated by {'lines holding only ' + settings.special if separator == 'special' else 'blank lines'}",
        f"rustbpe and bpeasy have no special tokens: asked for vocab_size - {specials} = {settings.vocab_size - specials} "
        "tokens, so that they learn as many merges as the others",
        f"parallelism: bpestore workers={settings.workers}; RAYON_NUM_THREADS={settings.workers} for HF, rustbpe and gigatoken",
        "gigatoken (when installed, the bench-peers extra) reads the file itself, as bpestore does; its tie-break among "
        "pairs of equal count is Hugging Face's, not bpestore's (the greatest pair), so its tokens differ at ties",
    ]
    return section("train", rows, train_checks(settings, rows, tokens_out), notes)


def train_checks(settings: Settings, rows: list[dict], tokens_out: dict[str, Path]) -> list[dict]:
    import json

    checks = []
    specials = 1 if settings.special else 0
    for row in rows:
        if row["status"] != "ok":
            continue
        info = row["info"]
        produced = info["vocab_size"] + (specials if info.get("special_tokens") == 0 else 0)
        checks.append(check(f"{row['tool']} vocab size", produced == settings.vocab_size,
                            f"{produced:,} tokens with the special ({info['merges']:,} merges), asked {settings.vocab_size:,}",
                            fatal=row["tool"] == BPESTORE))
    if ok_rows(rows, BPESTORE):
        ours = set(json.loads(tokens_out[BPESTORE].read_text()))
        for row in rows:
            if row["tool"] != BPESTORE and row["status"] == "ok":
                theirs = set(json.loads(tokens_out[row["tool"]].read_text()))
                shared = len(ours & theirs)
                row["info"]["learned_tokens_shared_with_bpestore"] = shared
                checks.append(check(f"learned tokens shared by bpestore and {row['tool']}", True,
                                    f"{shared:,} of {len(ours):,} ({shared / max(len(ours), 1):.1%})", fatal=False))
    return checks


def train_patterns_section(settings: Settings) -> dict:
    """bpestore training on the corpus with each named pre-tokenizer (issue 26: cl100k_base and
    o200k_base within 1.3x of GPT-2's time); rows in one run, each pattern's time over GPT-2's."""
    base = {"corpus": str(settings.corpus), "vocab_size": settings.vocab_size, "special": settings.special,
            "workers": settings.workers}
    rows = [measure("train-patterns", name, base, settings.runs("train-patterns"), timeout=settings.timeout)
            for name in ("gpt2", "cl100k_base", "o200k_base")]
    gpt2_row = rows[0]
    checks = []
    for row in rows[1:]:
        if "seconds" in row and "seconds" in gpt2_row:
            row["over_gpt2"] = row["seconds"] / gpt2_row["seconds"]
            checks.append(check(f"{row['tool']} time / gpt2 time", True, f"{row['over_gpt2']:.2f}x (target <= 1.3x)", fatal=False))
    notes = ["bpestore train_bpe with pattern=NAME, a fresh process per run; the merges differ (other pre-tokens), the merge count is the same"]
    return section("train-patterns", rows, checks, notes)


def train_small_section(settings: Settings) -> dict:
    """CS336's check: corpus.en, vocab 500, <|endoftext|>, in this process (no workers)."""
    params = {"corpus": str(settings.fixtures / "corpus.en"), "vocab_size": 500, "special": gpt2.ENDOFTEXT,
              "reference_merges": str(settings.fixtures / "train-bpe-reference-merges.txt")}
    rows = [measure("train-small", BPESTORE, params, settings.runs("train-small"), timeout=settings.timeout)]
    checks = [check("bpestore merges == CS336 reference merges", row["info"]["matches_reference"], "corpus.en, vocab 500")
              for row in rows if row["status"] == "ok"]
    notes = ["in process, a fresh process per run (imports untimed), one thread; the CS336 reference implementation takes 0.38 s here; target (issue 12) <= 0.05 s with the reference merges"]
    return section("train-small", rows, checks, notes)


# ---------------------------------------------------------------- encode


def encode_section(settings: Settings) -> dict:
    gpt = settings.gpt2_params()
    base = {**gpt, "text": str(settings.corpus), "max_bytes": settings.encode_bytes}
    ids_out = {tool: settings.workdir / f"encode-{tool}.npy" for tool in ("tiktoken", BPESTORE, "hf")}
    rows = []
    for tool in ("tiktoken", BPESTORE, "hf"):
        params = lambda index, tool=tool: {**base, "ids_out": str(ids_out[tool]) if index == 0 else None}
        rows.append(measure("encode", tool, params, settings.runs("encode"), timeout=settings.timeout, env=SINGLE_THREAD_ENV))
    checks = [compare_ids(f"{tool} ids == tiktoken ids", ids_out["tiktoken"], ids_out[tool], fatal=tool == BPESTORE)
              for tool in (BPESTORE, "hf") if ok_rows(rows, "tiktoken", tool)]
    notes = [f"text: {describe_input(settings)}; single-threaded, <|endoftext|> allowed; MB = 10^6 bytes of UTF-8"]
    return section("encode", rows, checks, notes)


def encode_dropout_section(settings: Settings) -> dict:
    """bpestore's plain encode (cold: a fresh tokenizer per process, its cache empty) against
    BPE-dropout at p = 0.1 on the same text (issue 26: dropout at >= 0.5x plain encode's speed)."""
    gpt = settings.gpt2_params()
    base = {**gpt, "text": str(settings.corpus), "max_bytes": settings.encode_bytes}
    rows = [measure("encode", BPESTORE, base, settings.runs("encode-dropout"), timeout=settings.timeout, env=SINGLE_THREAD_ENV)]
    dropped = measure("encode-dropout", BPESTORE, {**base, "dropout": 0.1}, settings.runs("encode-dropout"),
                      timeout=settings.timeout, env=SINGLE_THREAD_ENV)
    dropped["tool"] = "bpestore dropout=0.1"
    rows.append(dropped)
    checks = []
    if "mb_per_s" in rows[0] and "mb_per_s" in dropped:
        speed = dropped["mb_per_s"] / rows[0]["mb_per_s"]
        checks.append(check("dropout speed / plain encode speed", True, f"{speed:.2f}x (target >= 0.5x)", fatal=False))
    notes = [f"text: {describe_input(settings)}; single-threaded; plain = encode(text) on a fresh tokenizer; dropout = encode(text, dropout=0.1, seed=1)"]
    return section("encode-dropout", rows, checks, notes)


MULTILINGUAL_DEFAULT_BYTES = 5_000_000


def encode_multilingual_section(settings: Settings) -> dict:
    """The encode section on a generated non-English sample (eleven scripts, see
    corpus.write_multilingual_text), as large as --encode-mb (5 MB by default)."""
    size = settings.encode_bytes or MULTILINGUAL_DEFAULT_BYTES
    text_path = settings.workdir / "multilingual.txt"
    write_multilingual_text(text_path, size)
    base = {**settings.gpt2_params(), "text": str(text_path), "max_bytes": None}
    ids_out = {tool: settings.workdir / f"encode-multilingual-{tool}.npy" for tool in ("tiktoken", BPESTORE)}
    rows = []
    for tool in ("tiktoken", BPESTORE):
        params = lambda index, tool=tool: {**base, "ids_out": str(ids_out[tool]) if index == 0 else None}
        rows.append(measure("encode-multilingual", tool, params, settings.runs("encode-multilingual"),
                            timeout=settings.timeout, env=SINGLE_THREAD_ENV))
    checks = [compare_ids(f"{BPESTORE} ids == tiktoken ids", ids_out["tiktoken"], ids_out[BPESTORE])] if ok_rows(rows, "tiktoken", BPESTORE) else []
    notes = [f"text: {size / 1e6:g} MB generated in eleven scripts (Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai, "
             "Hangul, CJK, Latin with diacritics, Armenian, Georgian; Zipf-distributed made-up words); single-threaded"]
    return section("encode-multilingual", rows, checks, notes)


THREAD_TOOLS = (BPESTORE, "bpestore-threads", "bpestore-warm", "bpestore-threads-warm")


def thread_ratios(rows: list[dict]) -> None:
    """bpestore/peer of a threads row = its one-thread row's time over its own (the speed-up of the
    threads), cold against cold and warm against warm; the warm one-thread row is a base (1x)."""
    by_tool = {row["tool"]: row for row in rows}
    for one, threads in ((BPESTORE, "bpestore-threads"), ("bpestore-warm", "bpestore-threads-warm")):
        for tool in (one, threads):
            by_tool.get(tool, {}).pop("bpestore_over_peer", None)
        if "seconds" in by_tool.get(one, {}) and "seconds" in by_tool.get(threads, {}):
            by_tool[threads]["bpestore_over_peer"] = by_tool[one]["seconds"] / by_tool[threads]["seconds"]


def encode_batch_section(settings: Settings) -> dict:
    """Tokenizer.encode_batch of the text's lines, one thread against --workers threads, cold (a fresh
    tokenizer) and warm (its second call)."""
    base = {**settings.gpt2_params(), "text": str(settings.corpus), "max_bytes": settings.encode_bytes, "workers": settings.workers}
    rows = [measure("encode-batch", tool, base, settings.runs("encode-batch"), timeout=settings.timeout)
            for tool in THREAD_TOOLS]
    same = [row["info"]["ids_sha256"] for row in rows if row["status"] == "ok"]
    checks = [check("the same ids on any number of threads, cold or warm", len(set(same)) == 1, f"{len(same)} rows")] \
        if len(same) > 1 else []
    notes = [f"text: {describe_input(settings)}, as a list of its lines; a fresh process and tokenizer per run; bpestore: "
             f"encode_batch(lines, num_threads=1); bpestore-threads: num_threads={settings.workers}; -warm: the "
             "tokenizer's second such call (the first untimed); bpestore/peer of a threads row = the speed-up of "
             "the threads over the one-thread row of the same kind (target >= 1.7 with 2); CPU s: user+sys"]
    result = section("encode-batch", rows, checks, notes)
    thread_ratios(rows)
    return result


def encode_iterable_section(settings: Settings) -> dict:
    """Tokenizer.encode_iterable over the text's lines against encode of the whole text."""
    base = {**settings.gpt2_params(), "text": str(settings.corpus), "max_bytes": settings.encode_bytes}
    rows = [measure("encode-iterable", tool, base, settings.runs("encode-iterable"), timeout=settings.timeout,
                    env=SINGLE_THREAD_ENV) for tool in (BPESTORE, "bpestore-encode")]
    checks = [check("encode_iterable gives encode's ids", rows[0]["info"]["ids_sha256"] == rows[1]["info"]["ids_sha256"], "")] \
        if ok_rows(rows, BPESTORE, "bpestore-encode") else []
    notes = [f"text: {describe_input(settings)}; bpestore: list(encode_iterable(lines)), its memory bounded (a cache of "
             "4096 pre-tokens); bpestore-encode: encode(text); bpestore/peer of bpestore-encode = how many times "
             "slower the stream is (issue 13: not an order of magnitude)"]
    return section("encode-iterable", rows, checks, notes)


def encode_file_section(settings: Settings) -> dict:
    """A file encoded to .npy in process (bpestore.encode.files.encode_file_to_npy), one thread
    against --workers threads."""
    source = encode_cli_input(settings)
    npy = {tool: settings.workdir / f"encode-file-{tool}.npy" for tool in THREAD_TOOLS}
    base = {**settings.gpt2_params(), "input": str(source), "workers": settings.workers}
    rows = [measure("encode-file", tool, {**base, "npy_out": str(npy[tool])}, settings.runs("encode-file"), timeout=settings.timeout)
            for tool in THREAD_TOOLS]
    checks = [compare_ids(f"the same .npy from {tool} as from {BPESTORE}", npy[BPESTORE], npy[tool])
              for tool in THREAD_TOOLS[1:] if ok_rows(rows, BPESTORE, tool)]
    notes = [f"input: {describe_input(settings)}; a fresh process and tokenizer per run, imports excluded; bpestore: "
             f"workers=1; bpestore-threads: workers={settings.workers}; -warm: the tokenizer's second such call (the "
             "first untimed); bpestore/peer of a threads row = the speed-up over the one-thread row of the same "
             "kind (target >= 1.7 with 2); CPU s: user+sys"]
    result = section("encode-file", rows, checks, notes)
    thread_ratios(rows)
    return result


def encode_warm_section(settings: Settings) -> dict:
    """The same text encoded a second time by the same encoder (the first pass untimed): the
    steady state of a long job, once bpestore's caches hold the text's words."""
    base = {**settings.gpt2_params(), "text": str(settings.corpus), "max_bytes": settings.encode_bytes}
    ids_out = {tool: settings.workdir / f"encode-warm-{tool}.npy" for tool in ("tiktoken", BPESTORE)}
    rows = []
    for tool in ("tiktoken", BPESTORE):
        params = lambda index, tool=tool: {**base, "ids_out": str(ids_out[tool]) if index == 0 else None}
        rows.append(measure("encode-warm", tool, params, settings.runs("encode-warm"), timeout=settings.timeout, env=SINGLE_THREAD_ENV))
    checks = [compare_ids(f"{BPESTORE} ids == tiktoken ids", ids_out["tiktoken"], ids_out[BPESTORE])] if ok_rows(rows, "tiktoken", BPESTORE) else []
    notes = [f"text: {describe_input(settings)}, encoded once untimed, then timed a second time by the same encoder "
             "(tiktoken keeps no cache: its two passes cost the same)"]
    return section("encode-warm", rows, checks, notes)


def describe_input(settings: Settings) -> str:
    if settings.encode_bytes is None:
        return f"all of {settings.corpus.name}"
    return f"the first {settings.encode_bytes / 1e6:g} MB of {settings.corpus.name}"


# ---------------------------------------------------------------- encode-cli


def encode_cli_input(settings: Settings) -> Path:
    """The corpus, or its first ``--encode-mb`` MB copied to the work directory (outside the repo)."""
    if settings.encode_bytes is None:
        return settings.corpus
    path = settings.workdir / "encode-input.txt"
    copy_prefix(settings.corpus, path, settings.encode_bytes)
    return path


def prepare(task: str, params: dict, timeout: float) -> dict:
    outcome = run_task(task, params, timeout=timeout, env=SINGLE_THREAD_ENV)
    log(f"  {task} (untimed preparation): {outcome_line(outcome)}")
    return outcome


def not_run(tool: str, because: dict) -> dict:
    return {"tool": tool, "status": because["status"] if because["status"] != "ok" else "skipped",
            "reason": f"preparation: {because.get('reason', '')}", "runs": []}


def encode_cli_section(settings: Settings) -> dict:
    gpt = settings.gpt2_params()
    source = encode_cli_input(settings)
    db = settings.workdir / "encode-cli.db"
    npy = {tool: settings.workdir / f"encode-cli-{tool}.npy" for tool in ("tiktoken", BPESTORE)}
    common = {**gpt, "input": str(source), "db": str(db), "workers": settings.workers}
    rows = [measure("encode-cli", "tiktoken", {**common, "npy_out": str(npy["tiktoken"])}, settings.runs("encode-cli"),
                    timeout=settings.timeout, env=SINGLE_THREAD_ENV)]
    imported = prepare("prepare:bpestore-db", {**common, "via": "cli"}, settings.timeout)
    if imported["status"] == "ok":
        rows.append(measure("encode-cli", BPESTORE, {**common, "npy_out": str(npy[BPESTORE])},
                            settings.runs("encode-cli"), timeout=settings.timeout))
    else:
        rows.append(not_run(BPESTORE, imported))
    checks = [compare_ids("bpestore .npy == tiktoken ids", npy["tiktoken"], npy[BPESTORE])] if ok_rows(rows, "tiktoken", BPESTORE) else []
    notes = [f"input: {describe_input(settings)}",
             f"bpestore: `bpestore encode gpt2 INPUT --output OUT.npy --workers {settings.workers} --db DB`, a whole "
             "process (interpreter start-up and imports included; see cli_help_seconds)",
             "tiktoken: read the file, encode single-threaded, np.save (in process, imports excluded)"]
    return section("encode-cli", rows, checks, notes)


# ---------------------------------------------------------------- load


def load_section(settings: Settings) -> dict:
    gpt = settings.gpt2_params()
    db, json_path = settings.workdir / "load.db", settings.workdir / "gpt2-tokenizer.json"
    common = {**gpt, "db": str(db), "json": str(json_path), "sample": str(settings.fixtures / "tinystories_sample.txt")}
    runs, timeout = settings.runs("load"), settings.timeout
    stored = prepare("prepare:bpestore-db", {**common, "via": "store"}, timeout)
    saved = prepare("prepare:hf-json", common, timeout)
    rows = [
        measure("load", BPESTORE, common, runs, timeout=timeout, env=SINGLE_THREAD_ENV) if stored["status"] == "ok"
        else not_run(BPESTORE, stored),
        measure("load", "bpestore-files", common, runs, timeout=timeout, env=SINGLE_THREAD_ENV),
        measure("load", "tiktoken", common, runs, timeout=timeout, env=SINGLE_THREAD_ENV),
        measure("load", "hf", common, runs, timeout=timeout, env=SINGLE_THREAD_ENV) if saved["status"] == "ok"
        else not_run("hf", saved),
    ]
    checks = [check(f"{row['tool']} encodes the sample like tiktoken", row["info"]["sample_ids_match_tiktoken"],
                    "tinystories_sample.txt", fatal=row["tool"].startswith(BPESTORE))
              for row in rows if row["status"] == "ok" and row["tool"] != "tiktoken" and "sample_ids_match_tiktoken" in row["info"]]
    notes = ["bpestore: Tokenizer.from_db(db, 'gpt2'); bpestore-files: Tokenizer.from_files(vocab, merges); "
             "tiktoken: Encoding built from gpt2_vocab.json (file read included); hf: Tokenizer.from_file(tokenizer.json)"]
    return section("load", rows, checks, notes)


# ---------------------------------------------------------------- pathological


PATHOLOGICAL_KINDS = {"repeat": '"a" * n', "random": "n random non-whitespace ASCII characters"}


def pathological_section(settings: Settings) -> dict:
    gpt = settings.gpt2_params()
    rows = []
    for kind in PATHOLOGICAL_KINDS:
        for tool in (BPESTORE, "tiktoken"):
            rows += pathological_series(settings, gpt, kind, tool)
    for kind in PATHOLOGICAL_KINDS:
        for n in settings.pathological_sizes:
            add_ratios([row for row in rows if row["kind"] == kind and row["n"] == n])
    checks = [check(f"bpestore ids == tiktoken ids ({kind}, n={n:,})", ours["info"]["ids_sha256"] == theirs["info"]["ids_sha256"],
                    f"{ours['info']['tokens']:,} vs {theirs['info']['tokens']:,} ids")
              for kind in PATHOLOGICAL_KINDS for n in settings.pathological_sizes
              for ours in pick(rows, BPESTORE, kind, n) for theirs in pick(rows, "tiktoken", kind, n)]
    notes = [f"inputs: {'; '.join(PATHOLOGICAL_KINDS.values())}; growth = time(n) / time(n/2), ~2 when linear",
             f"each run has {settings.pathological_timeout:g} s; after a timeout the larger n are not tried"]
    return {"name": "pathological", "rows": rows, "checks": checks, "notes": notes}


def pathological_series(settings: Settings, gpt: dict, kind: str, tool: str) -> list[dict]:
    rows, previous = [], None
    for n in settings.pathological_sizes:
        if previous is not None and previous["status"] != "ok":
            row = {"tool": tool, "status": "skipped", "reason": f"{previous['status']} at a smaller n", "runs": []}
        else:
            row = measure("pathological", tool, {**gpt, "kind": kind, "n": n}, settings.runs("pathological"),
                          timeout=settings.pathological_timeout, env=SINGLE_THREAD_ENV)
        row.update(kind=kind, n=n)
        if row.get("seconds") is not None:
            row["us_per_char"] = row["seconds"] / n * 1e6
            if previous is not None and previous.get("seconds") and n == 2 * previous["n"]:
                row["growth"] = row["seconds"] / previous["seconds"]
        rows.append(row)
        previous = row
    return rows


def pick(rows: list[dict], tool: str, kind: str, n: int) -> list[dict]:
    return [row for row in rows if row["tool"] == tool and row["kind"] == kind and row["n"] == n and row["status"] == "ok"]


# ---------------------------------------------------------------- peers


PEER_TEXTS = ("en", "multilingual")
# cold: a fresh tokenizer's first pass, its building untimed; warm: its second pass; fresh: its
# building from the files and its first pass timed together, what a new process pays. The last
# keeps the cold rows honest about work a tool moves into its loading (gigatoken fills its piece
# cache with the whole vocabulary as it loads, so its cold pass starts partly warm).
PEER_PASSES = ("cold", "warm", "fresh")


def peers_section(settings: Settings) -> dict:
    """Every encoder that is installed (peer_tasks.PEER_TOOLS), on English (the corpus, --encode-mb)
    and on the multilingual sample, with GPT-2 and, where a vocabulary is at hand offline, cl100k_base
    and o200k_base; each pass of PEER_PASSES (cold, warm, fresh). A tool's first run saves its
    ids, which are compared with tiktoken's before its time is reported: a tool whose ids differ is
    a ``mismatch`` row, with no time (bpestore's mismatch fails the run)."""
    from peer_tasks import ENCODINGS, PEER_TOOLS

    texts = {"en": (settings.corpus, settings.encode_bytes)}
    multilingual = settings.workdir / "peers-multilingual.txt"
    write_multilingual_text(multilingual, settings.encode_bytes or MULTILINGUAL_DEFAULT_BYTES)
    texts["multilingual"] = (multilingual, None)
    if settings.world is not None:
        texts["world"] = (settings.world, settings.encode_bytes)
    rows: list[dict] = []
    checks: list[dict] = []
    skipped: list[str] = []
    for encoding in ENCODINGS:
        vocab = {**settings.gpt2_params(), "encoding": encoding, "ranks": str(settings.workdir / f"{encoding}.tiktoken"),
                 "json": str(settings.workdir / "peers-gpt2-tokenizer.json")}
        prepared = prepare("prepare:peer-ranks", vocab, settings.timeout)
        if prepared["status"] != "ok":
            skipped.append(f"{encoding}: {prepared.get('reason', '')}")
            continue
        for text_name, (path, max_bytes) in texts.items():
            group = {"text": text_name, "encoding": encoding}
            for kind in PEER_PASSES:
                suffix = "" if kind == "cold" else f"-{kind}"
                reference = settings.workdir / f"peers-{encoding}-{text_name}-tiktoken{suffix}.npy"
                tools = [tool + suffix for tool in ("tiktoken", *(tool for tool in PEER_TOOLS if tool != "tiktoken"))]

                def params_of(label: str) -> Callable[[int], dict]:
                    ids_out = settings.workdir / f"peers-{encoding}-{text_name}-{label}.npy"
                    return lambda index: {**vocab, "text": str(path), "max_bytes": max_bytes,
                                          "ids_out": str(ids_out) if index == 0 else None}

                firsts = {label: peer_first_run(label, params_of(label), settings, None if label.startswith("tiktoken") else reference,
                                                group, checks) for label in tools}
                # The other runs in rounds, one run of each tool per round: on a host whose speed
                # drifts (a shared virtual machine), every tool then meets the same drift, and
                # their ratios hold where a tool's runs one after another did not.
                runs = {label: first["runs"] for label, first in firsts.items() if first["status"] == "continue"}
                for index in range(1, settings.runs("peers")):
                    for label in [label for label in tools if label in runs]:
                        outcome = measure("peers", label, params_of(label), 1, timeout=settings.timeout, env=SINGLE_THREAD_ENV,
                                          first=index, of=settings.runs("peers"))
                        runs[label] += outcome["runs"]
                        if outcome["status"] != "ok":  # (no more rounds for it: its row is its failure)
                            firsts[label] = summarize(label, runs.pop(label))
                kind_rows = [{**(summarize(label, runs[label]) if label in runs else firsts[label]), **group, "pass": kind}
                             for label in tools]
                add_ratios(kind_rows, reference=BPESTORE + suffix)
                rows += kind_rows
    notes = [f"en: {describe_input(settings)}; multilingual: {(settings.encode_bytes or MULTILINGUAL_DEFAULT_BYTES) / 1e6:g} MB "
             "generated in eleven scripts (as encode-multilingual); single-threaded (RAYON_NUM_THREADS=1)",
             *([f"world: {settings.world} (benchmarks/world_corpus.py: real running text in many languages)"] if settings.world else []),
             "gpt2 from the fixtures (bpestore and gigatoken from a .tiktoken file of its ranks, fastokens from HF's tokenizer.json); "
             "cl100k_base and o200k_base from the bpe-openai package's .tiktoken files with tiktoken's own patterns and "
             "special tokens (quicktok uses the copy it bundles); special tokens recognised in the text by every tool",
             "cold: a fresh process and tokenizer per run (built untimed); warm: the same tokenizer's second pass over the "
             "text; fresh: the tokenizer's building from the files and its first pass, timed together; bpestore/peer: "
             "bpestore's time over the peer's, in the same pass",
             "each tool's first run saves its ids, compared with tiktoken's before its time is reported: a tool whose ids "
             "differ is a MISMATCH row without a time",
             "after the first runs, one run of each tool per round: a drift of the machine's speed meets every tool alike",
             *(f"not run: {reason}" for reason in skipped)]
    same = [item for item in checks if item["ok"]]
    summary = [check(f"ids identical to tiktoken's: {len(same)} of {len(checks)} rows", len(same) == len(checks),
                     "every (text, vocabulary, tool, cold/warm) compared before being timed", fatal=False)] if checks else []
    return {"name": "peers", "rows": rows, "checks": summary + [item for item in checks if not item["ok"]], "notes": notes}


def peer_first_run(tool: str, params: Callable[[int], dict], settings: Settings, reference: Path | None,
                   group: dict, checks: list[dict]) -> dict:
    """``peers:TOOL``'s first run, its ids checked against ``reference`` (None: it is the
    reference): status ``continue`` with its ``runs`` if its other runs are to follow, else the
    tool's row (a failure, or a mismatch, which keeps no time)."""
    first = measure("peers", tool, params, 1, timeout=settings.timeout, env=SINGLE_THREAD_ENV, of=settings.runs("peers"))
    if first["status"] != "ok":
        return first
    if reference is not None:
        if not reference.is_file():
            return {"tool": tool, "status": "skipped", "reason": "no tiktoken ids to compare with", "runs": first["runs"]}
        verdict = compare_ids(f"{tool} ids == tiktoken ids ({group['encoding']}, {group['text']})", reference,
                              Path(params(0)["ids_out"]), fatal=tool.startswith(BPESTORE))
        checks.append(verdict)
        if not verdict["ok"]:
            return {"tool": tool, "status": "mismatch", "reason": verdict["detail"], "runs": first["runs"], "info": first["info"]}
    return {"tool": tool, "status": "continue", "runs": first["runs"]}


RUNNERS = {"train": train_section, "train-small": train_small_section, "train-patterns": train_patterns_section, "encode": encode_section,
           "encode-dropout": encode_dropout_section,
           "encode-multilingual": encode_multilingual_section, "encode-warm": encode_warm_section,
           "encode-batch": encode_batch_section,
           "encode-iterable": encode_iterable_section, "encode-file": encode_file_section, "encode-cli": encode_cli_section,
           "load": load_section, "pathological": pathological_section, "peers": peers_section}
