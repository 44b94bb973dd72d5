"""SuperBPE against plain BPE, and the Hugging Face tie-break against HF's trainer, in one run.

Three tables (markdown on stdout, everything in a JSON file):

* ``bpt``: bytes per token on held-out text of SuperBPE (t at 50%, 80% and 90% of the final vocab
  size) and of plain BPE of the same final size, each trained on the start of a corpus (wiki,
  reuters, sotu) and evaluated on its end, which no training read. One store per corpus: the plain
  training counts the corpus, SuperBPE's first stage reads those counts back (and its merges: they
  are a prefix of the plain training's), its second stage counts once and is reused for every t.
* ``time``: wall-clock time of training from the file into a fresh store (counting included),
  plain to the final size against SuperBPE with t = 80%, run alternately, each in a fresh process.
* ``hf``: ``tie_break="huggingface"`` (counting included) against HF ``BpeTrainer`` (byte-level,
  GPT-2's regex, every byte in its initial alphabet, the documents cut at the special token), each
  in a fresh process; the merges must be identical.

    python benchmarks/superbpe.py                        # all three, on ../shared/corpora
    python benchmarks/superbpe.py --only time,hf --repeat 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from machine import describe  # noqa: E402

SPECIAL = "<|endoftext|>"
SHARED = Path(os.environ.get("BPESTORE_SHARED", REPO.parent / "shared")) / "corpora"
# corpus -> (bytes trained on: its start; bytes evaluated: its end)
SPLITS = {"wiki_en_57M.txt": (20_000_000, 5_000_000), "reuters_17M.txt": (12_000_000, 3_000_000), "sotu_11M.txt": (8_000_000, 2_000_000)}


def cut(path: Path, start: int, size: int, out: Path) -> Path:
    """``size`` bytes of ``path`` from ``start`` (moved to character boundaries)."""
    data = path.read_bytes()
    begin = start
    while begin < len(data) and (data[begin] & 0xC0) == 0x80:
        begin += 1
    end = min(len(data), begin + size)
    while end < len(data) and (data[end] & 0xC0) == 0x80:
        end += 1
    out.write_bytes(data[begin:end])
    return out


def child(code: str) -> dict:
    """Run ``code`` in a fresh interpreter (it prints one JSON line last) and return that line."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(HERE)]), RAYON_NUM_THREADS="2", TOKENIZERS_PARALLELISM="true")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"child failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


TRAIN_CODE = """
import json, time, warnings
from bpestore import Store
from bpestore.workflow import superbpe_stages
warnings.simplefilter("ignore")
args = json.loads({args!r})
with Store(args["db"]) as store:
    started = time.perf_counter()
    if args.get("t"):
        (ref,) = store.train(args["corpus"], "superbpe", special_tokens=[args["special"]], workers=2,
                             stages=superbpe_stages(args["t"], args["size"]), tie_break=args.get("tie_break", "cs336"))
    else:
        (ref,) = store.train(args["corpus"], "plain", args["size"], [args["special"]], workers=2, tie_break=args.get("tie_break", "cs336"))
    seconds = time.perf_counter() - started
    merges = store.load_model(ref).merges
print(json.dumps({{"seconds": seconds, "ref": ref, "merges": [[a.hex(), b.hex()] for a, b in merges]}}))
"""

HF_CODE = """
import json, re, time
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
args = json.loads({args!r})
text = open(args["corpus"], encoding="utf-8").read()
started = time.perf_counter()
tokenizer = Tokenizer(models.BPE())
tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
tokenizer.add_special_tokens([args["special"]])
trainer = trainers.BpeTrainer(vocab_size=args["size"], special_tokens=[args["special"]],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
tokenizer.train_from_iterator(text.split(args["special"]), trainer)
seconds = time.perf_counter() - started
from gpt2 import unicode_to_byte
table = unicode_to_byte()
merges = json.loads(tokenizer.to_str())["model"]["merges"]
pairs = [m if isinstance(m, list) else m.split(" ") for m in merges]
print(json.dumps({{"seconds": seconds, "merges": [[bytes(table[c] for c in l).hex(), bytes(table[c] for c in r).hex()] for l, r in pairs]}}))
"""

BPT_CODE = """
import json, warnings
from bpestore import Store, Tokenizer
from bpestore.workflow import superbpe_stages
warnings.simplefilter("ignore")
args = json.loads({args!r})
held_out = open(args["held_out"], encoding="utf-8").read()
size_bytes = len(held_out.encode("utf-8"))
rows = []
with Store(args["db"]) as store:
    (plain,) = store.train(args["corpus"], "plain", args["size"], [args["special"]], workers=2)
    refs = [("plain BPE", None, plain)]
    for fraction in args["fractions"]:
        t = round(args["size"] * fraction)
        (ref,) = store.train(args["corpus"], f"superbpe-{{t}}", special_tokens=[args["special"]], workers=2,
                             stages=superbpe_stages(t, args["size"]))
        refs.append((f"SuperBPE t={{fraction:.0%}}", t, ref))
for label, t, ref in refs:
    tokens = len(Tokenizer.from_db(args["db"], ref).encode(held_out))
    rows.append({{"tokenizer": label, "t": t, "ref": ref, "tokens": tokens, "bytes": size_bytes, "bytes_per_token": size_bytes / tokens}})
print(json.dumps({{"rows": rows}}))
"""


def bpt_table(size: int, fractions: list[float], workdir: Path) -> list[dict]:
    results = []
    for name, (train_bytes, held_bytes) in SPLITS.items():
        path = SHARED / name
        if not path.exists():
            print(f"skipped {name}: not in {SHARED}", file=sys.stderr)
            continue
        corpus = cut(path, 0, train_bytes, workdir / f"train-{name}")
        held_out = cut(path, path.stat().st_size - held_bytes, held_bytes, workdir / f"held-{name}")
        args = {"db": str(workdir / f"bpt-{name}.db"), "corpus": str(corpus), "held_out": str(held_out), "size": size,
                "fractions": fractions, "special": SPECIAL}
        print(f"bpt: {name}", file=sys.stderr, flush=True)
        rows = child(BPT_CODE.format(args=json.dumps(args)))["rows"]
        plain = rows[0]["bytes_per_token"]
        for row in rows:
            row["corpus"] = name
            row["gain"] = row["bytes_per_token"] / plain - 1
        results.extend(rows)
    return results


def time_table(corpus: Path, size: int, t: int, repeat: int, workdir: Path) -> list[dict]:
    rows = []
    for run in range(repeat):
        for label, extra in (("plain BPE", {}), (f"SuperBPE t={t}", {"t": t})):
            db = workdir / f"time-{run}-{len(rows)}.db"
            args = {"db": str(db), "corpus": str(corpus), "size": size, "special": SPECIAL, **extra}
            print(f"time: {label} run {run + 1}", file=sys.stderr, flush=True)
            result = child(TRAIN_CODE.format(args=json.dumps(args)))
            rows.append({"tokenizer": label, "run": run + 1, "seconds": result["seconds"], "merges": len(result["merges"])})
            db.unlink()
    return rows


def hf_table(corpus: Path, size: int, repeat: int, workdir: Path) -> tuple[list[dict], bool]:
    rows, same = [], True
    for run in range(repeat):
        db = workdir / f"hf-{run}.db"
        args = {"db": str(db), "corpus": str(corpus), "size": size, "special": SPECIAL, "tie_break": "huggingface"}
        print(f"hf: bpestore run {run + 1}", file=sys.stderr, flush=True)
        ours = child(TRAIN_CODE.format(args=json.dumps(args)))
        db.unlink()
        print(f"hf: HF BpeTrainer run {run + 1}", file=sys.stderr, flush=True)
        theirs = child(HF_CODE.format(args=json.dumps(args)))
        same = same and ours["merges"] == theirs["merges"]
        rows.append({"tool": "bpestore --tie-break huggingface", "run": run + 1, "seconds": ours["seconds"], "merges": len(ours["merges"])})
        rows.append({"tool": "HF BpeTrainer", "run": run + 1, "seconds": theirs["seconds"], "merges": len(theirs["merges"])})
    return rows, same


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="bpt,time,hf")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--bpt-size", type=int, default=16000)
    parser.add_argument("--time-size", type=int, default=32000)
    parser.add_argument("--hf-size", type=int, default=10000)
    parser.add_argument("--corpus", type=Path, default=SHARED / "wiki_en_57M.txt", help="the corpus of the time and hf tables")
    parser.add_argument("--json", type=Path, default=HERE / "results" / f"superbpe-{time.strftime('%Y%m%d-%H%M%S')}.json")
    options = parser.parse_args()
    only = set(options.only.split(","))
    report: dict = {"machine": describe(REPO), "settings": {k: str(v) for k, v in vars(options).items()}}
    with tempfile.TemporaryDirectory(prefix="bpestore-superbpe-") as directory:
        workdir = Path(directory)
        if "bpt" in only:
            rows = bpt_table(options.bpt_size, [0.5, 0.8, 0.9], workdir)
            report["bpt"] = rows
            print(f"\nBytes per token on held-out text, final vocab size {options.bpt_size:,}:\n")
            print("| corpus | tokenizer | bytes/token | vs plain BPE |\n|---|---|---:|---:|")
            for row in rows:
                print(f"| {row['corpus']} | {row['tokenizer']} | {row['bytes_per_token']:.3f} | {row['gain']:+.1%} |")
        if "time" in only:
            t = round(options.time_size * 0.8)
            rows = time_table(options.corpus, options.time_size, t, options.repeat, workdir)
            plain = median([row["seconds"] for row in rows if row["tokenizer"] == "plain BPE"])
            staged = median([row["seconds"] for row in rows if row["tokenizer"] != "plain BPE"])
            report["time"] = {"rows": rows, "plain_median": plain, "superbpe_median": staged, "ratio": staged / plain}
            print(f"\nTraining time on {options.corpus.name} to {options.time_size:,} (fresh store, counting included), "
                  f"median of {options.repeat}:\n")
            print("| training | median s | runs (s) |\n|---|---:|---|")
            for label in ("plain BPE", f"SuperBPE t={t}"):
                runs = [row["seconds"] for row in rows if row["tokenizer"] == label]
                print(f"| {label} | {median(runs):.1f} | {', '.join(f'{s:.1f}' for s in runs)} |")
            print(f"\nSuperBPE / plain: {staged / plain:.2f}x")
        if "hf" in only:
            rows, same = hf_table(options.corpus, options.hf_size, options.repeat, workdir)
            ours = median([row["seconds"] for row in rows if row["tool"].startswith("bpestore")])
            theirs = median([row["seconds"] for row in rows if row["tool"] == "HF BpeTrainer"])
            report["hf"] = {"rows": rows, "identical_merges": same, "bpestore_median": ours, "hf_median": theirs, "speedup": theirs / ours}
            print(f"\nHugging Face's tie-break on {options.corpus.name} to {options.hf_size:,}, median of {options.repeat}:\n")
            print("| tool | median s | runs (s) |\n|---|---:|---|")
            for tool in ("bpestore --tie-break huggingface", "HF BpeTrainer"):
                runs = [row["seconds"] for row in rows if row["tool"] == tool]
                print(f"| {tool} | {median(runs):.1f} | {', '.join(f'{s:.1f}' for s in runs)} |")
            print(f"\nHF / bpestore: {theirs / ours:.1f}x; merges identical: {same}")
    options.json.parent.mkdir(parents=True, exist_ok=True)
    options.json.write_text(json.dumps(report, indent=2))
    print(f"\n(saved {options.json})", file=sys.stderr)
    if "hf" in only and not report["hf"]["identical_merges"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
