"""Parity-aware training: bpestore against Hugging Face ``tokenizers``' ``ParityBpeTrainer``, in one run.

The input is the world text of ``world_corpus.py`` (LibreOffice's help in 33 languages; build it
with a large ``--per-language`` for a big corpus), split into one file per language, and, as the
parallel development set, each language's Universal Declaration of Human Rights from NLTK's
``udhr2.zip`` (the ``nltk/nltk_data`` repository on GitHub, ``packages/corpora/udhr2.zip``; public
domain): the whole Declaration, the same content in every language.

Each side runs in a fresh process, alternately, ``--repeat`` times:

* **bpestore**: ``bpestore train --parity LANG.txt ... --dev DEV_DIR --tie-break huggingface``
  into a fresh store (counting every language, storing its counts, merging, storing the tokenizer);
* **HF**: ``ParityBpeTrainer(num_merges=...).train_from_iterator`` on the same files (byte-level
  pre-tokenizer, GPT-2's regex), each language given as pieces cut where a cut changes no
  pre-token (so that HF pre-tokenizes on every core, and counts what bpestore counts), the
  development texts whole.

The merges must be identical (exit status 1 otherwise). Markdown on stdout; every run, the machine
and the settings in ``benchmarks/results/parity-<timestamp>.json``.

    python3 benchmarks/world_corpus.py --out /tmp/world_big.txt --per-language 12000000
    python3 benchmarks/parity.py --world /tmp/world_big.txt --udhr udhr2.zip --vocab-size 32000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from bpestore.formats.gpt2 import unicode_to_byte

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from machine import describe  # noqa: E402
from world_corpus import LIBREOFFICE_LANGUAGES, SEPARATOR  # noqa: E402

# Each language of the world text (its LibreOffice folder) -> its file in udhr2.zip.
UDHR_FILES = {
    "en-US": "eng", "ca": "cat", "cs": "ces", "da": "dan", "de": "deu", "dz": "dzo", "el": "ell_monotonic", "es": "spa",
    "et": "est", "eu": "eus", "fi": "fin", "fr": "fra", "gl": "glg", "hi": "hin", "hu": "hun", "id": "ind", "it": "ita",
    "ja": "jpn", "km": "khm", "ko": "kor", "nl": "nld", "om": "gax", "pl": "pol", "pt": "por_PT", "pt-BR": "por_BR",
    "ru": "rus", "sk": "slk", "sl": "slv", "sv": "swe", "tr": "tur", "vi": "vie", "zh-CN": "cmn_hans", "zh-TW": "cmn_hant",
}

HF_CODE = """
import json, sys, time
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
args = json.loads(sys.argv[1])
started = time.perf_counter()
train = [json.load(open(path, encoding="utf-8")) for path in args["pieces"]]
dev = [[open(path, encoding="utf-8", newline="").read()] for path in args["dev"]]
tokenizer = Tokenizer(models.BPE())
tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
trainer = trainers.ParityBpeTrainer(num_merges=args["merges"], variant=args["variant"], show_progress=False)
trainer.train_from_iterator(tokenizer, train, dev_iterators=dev)
seconds = time.perf_counter() - started
merges = json.loads(tokenizer.to_str())["model"]["merges"]
json.dump([merge if isinstance(merge, list) else merge.split(" ") for merge in merges], open(args["out"], "w"))
print(json.dumps({"seconds": seconds}))
"""

BPESTORE_CODE = """
import json, sys, time
from bpestore.cli import main
args = json.loads(sys.argv[1])
started = time.perf_counter()
try:
    main(["--db", args["db"], "train", "--parity", *args["train"], "--dev", args["dev_dir"], "--name", "parity",
          "--vocab-size", str(args["vocab_size"]), "--tie-break", "huggingface", "--parity-variant", args["variant"], "-q"])
except SystemExit as exit:
    if exit.code:
        raise
seconds = time.perf_counter() - started
from bpestore import Store
with Store(args["db"]) as store:
    model = store.load_model("parity@1")
    info = store.info("parity@1")
json.dump([[left.hex(), right.hex()] for left, right in model.merges], open(args["out"], "w"))
print(json.dumps({"seconds": seconds, "training_seconds": info.training_seconds, "parity_merges": info.training_params["parity_merges"]}))
"""


def split_world(world: Path, udhr: Path, workdir: Path, languages: int | None) -> tuple[list[Path], Path, list[Path], list[Path]]:
    """The world text as one file per language, each language's Declaration as its development
    text, and HF's pieces of each language (JSON lists of strings)."""
    from bpestore.engine import GPT2_PATTERN, Pretokenizer
    from bpestore.pretokenize.inputs import text_pieces

    sections = world.read_text(encoding="utf-8").split(SEPARATOR + "\n")
    names = list(LIBREOFFICE_LANGUAGES.values())
    if len(sections) != len(names):
        raise SystemExit(f"{world} holds {len(sections)} languages, not LibreOffice's {len(names)} (build it without --bible)")
    chosen = list(zip(names, sections))[:languages]
    (workdir / "train").mkdir()
    (workdir / "dev").mkdir()
    (workdir / "pieces").mkdir()
    cutter = Pretokenizer(GPT2_PATTERN, [])
    train, dev, pieces = [], [], []
    with zipfile.ZipFile(udhr) as archive:
        for name, text in chosen:
            train.append(workdir / "train" / f"{name}.txt")
            train[-1].write_text(text, encoding="utf-8", newline="")
            dev.append(workdir / "dev" / f"{name}.txt")
            dev[-1].write_bytes(archive.read(f"udhr2/{UDHR_FILES[name]}.txt"))
            blocks = (text[start:start + 65536] for start in range(0, len(text), 65536))
            pieces.append(workdir / "pieces" / f"{name}.json")
            pieces[-1].write_text(json.dumps(list(text_pieces(blocks, cutter.last_safe_cut)), ensure_ascii=False), encoding="utf-8")
    return train, workdir / "dev", dev, pieces


def run(code: str, args: dict) -> dict:
    """``code`` in a fresh interpreter (its last stdout line is JSON), with its CPU time."""
    env = dict(os.environ, PYTHONPATH=str(REPO), TOKENIZERS_PARALLELISM="true")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-c", code, json.dumps(args)], capture_output=True, text=True, env=env, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"child failed: {done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["cpu_seconds"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=Path, required=True, help="world_corpus.py's text (without --bible)")
    parser.add_argument("--udhr", type=Path, required=True, help="NLTK's udhr2.zip")
    parser.add_argument("--languages", type=int, default=None, help="the first N languages only")
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--variant", choices=["base", "window"], default="base")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", type=Path, default=HERE / "results" / f"parity-{time.strftime('%Y%m%d-%H%M%S')}.json")
    options = parser.parse_args()
    report: dict = {"machine": describe(REPO), "settings": {k: str(v) for k, v in vars(options).items()}, "runs": []}
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        train, dev_dir, dev, pieces = split_world(options.world, options.udhr, workdir, options.languages)
        size = sum(path.stat().st_size for path in train)
        report["input"] = {"languages": len(train), "bytes": size, "dev_bytes": sum(path.stat().st_size for path in dev)}
        merges = options.vocab_size - 256
        same = True
        for attempt in range(options.repeat):
            db = workdir / f"s{attempt}.db"
            ours = run(BPESTORE_CODE, {
                "db": str(db), "train": [str(path) for path in train], "dev_dir": str(dev_dir), "vocab_size": options.vocab_size,
                "variant": options.variant, "out": str(workdir / "ours.json"),
            })
            theirs = run(HF_CODE, {
                "pieces": [str(path) for path in pieces], "dev": [str(path) for path in dev], "merges": merges, "variant": options.variant,
                "out": str(workdir / "hf.json"),
            })
            byte_of = unicode_to_byte()  # (HF's byte-level characters -> bytes)
            hf = [[bytes(byte_of[c] for c in left).hex(), bytes(byte_of[c] for c in right).hex()] for left, right in json.loads((workdir / "hf.json").read_text())]
            identical = hf == json.loads((workdir / "ours.json").read_text())
            same = same and identical
            report["runs"].append({"bpestore": ours, "hf": theirs, "identical_merges": identical, "merges": len(hf)})
            db.unlink()
            print(f"run {attempt + 1}: bpestore {ours['seconds']:.1f} s, HF {theirs['seconds']:.1f} s, identical merges: {identical}", file=sys.stderr)
    ours_s = statistics.median(r["bpestore"]["seconds"] for r in report["runs"])
    ours_cpu = statistics.median(r["bpestore"]["cpu_seconds"] for r in report["runs"])
    ours_train = statistics.median(r["bpestore"]["training_seconds"] for r in report["runs"])
    hf_s = statistics.median(r["hf"]["seconds"] for r in report["runs"])
    hf_cpu = statistics.median(r["hf"]["cpu_seconds"] for r in report["runs"])
    info = report["input"]
    print(f"Parity-aware training, {info['languages']} languages, {info['bytes'] / 1e6:.1f} MB (development set: the UDHR, "
          f"{info['dev_bytes'] / 1e3:.0f} KB), vocab {options.vocab_size:,}, variant {options.variant}, median of {options.repeat}:\n")
    print("| trainer | wall (s) | CPU (s) | x HF (wall) | identical merges |")
    print("|---|---:|---:|---:|---|")
    print(f"| bpestore `train --parity --tie-break huggingface` (fresh store) | {ours_s:.1f} | {ours_cpu:.1f} | {hf_s / ours_s:.1f} | {'yes' if same else 'NO'} |")
    print(f"| (of which counting and merging) | {ours_train:.1f} | | {hf_s / ours_train:.1f} | |")
    print(f"| HF `ParityBpeTrainer` | {hf_s:.1f} | {hf_cpu:.1f} | 1.0 | |")
    options.json.parent.mkdir(parents=True, exist_ok=True)
    options.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
