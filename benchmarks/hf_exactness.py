"""Every real ``tokenizer.json`` in ``$BPESTORE_SHARED/tokenizers`` against Hugging Face
``tokenizers``, on many more lines than the tests try: for each file, bpestore's import (or the
line it refuses the file with), then the lines of each text whose ids are identical to HF's
``encode(line, add_special_tokens=False)``, with ``add_special_tokens=True``, and whose decoding
equals HF's ``decode(ids, skip_special_tokens=False)``.

Usage::

    python3 benchmarks/hf_exactness.py [--lines 20000] [--text /tmp/world.txt ...]

The texts are the shared corpora's first ``--lines`` lines (line ends kept) and every ``--text``
given whole (``benchmarks/world_corpus.py`` builds a text of 30-odd languages).
"""

from __future__ import annotations

import argparse
import itertools
import os
import json
import sys
import tempfile
from pathlib import Path

import tokenizers

from bpestore import Tokenizer, formats
from bpestore.errors import BpestoreError

SHARED = Path(os.environ.get("BPESTORE_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
CORPORA = ["wiki_en_57M.txt", "reuters_17M.txt", "sotu_11M.txt", "tinystories_800K.txt"]


def lines_of(path: Path, count: int | None) -> list[str]:
    with path.open(encoding="utf-8", newline="") as text:
        return list(itertools.islice(text, count))


def readable(path: Path, scratch: Path) -> tuple[Path, str]:
    """``path``, or a copy without the merges HF itself refuses to read (a merge of three spaces,
    which "a b" cannot spell: the shared Llama-2 file has three), and a note of what was dropped."""
    document = json.loads(path.read_text(encoding="utf-8"))
    merges = document.get("model", {}).get("merges")
    if not isinstance(merges, list) or all(not isinstance(merge, str) or merge.count(" ") == 1 for merge in merges):
        return path, ""
    kept = [merge for merge in merges if not isinstance(merge, str) or merge.count(" ") == 1]
    document["model"]["merges"] = kept
    fixed = scratch / f"{path.parent.name}.json"
    fixed.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return fixed, f" (without the {len(merges) - len(kept)} merges HF refuses)"


def compare(ours: Tokenizer, reference: tokenizers.Tokenizer, lines: list[str]) -> tuple[int, int, int]:
    """Lines whose ids are HF's without and with the special tokens, and whose decoding is HF's."""
    plain = [encoding.ids for encoding in reference.encode_batch(lines, add_special_tokens=False)]
    special = [encoding.ids for encoding in reference.encode_batch(lines, add_special_tokens=True)]
    same_plain = sum(mine == theirs for mine, theirs in zip(ours.encode_batch(lines), plain))
    same_special = sum(mine == theirs for mine, theirs in zip(ours.encode_batch(lines, add_special_tokens=True), special))
    decoded = reference.decode_batch(plain, skip_special_tokens=False)
    same_decoding = sum(ours.decode(ids) == theirs for ids, theirs in zip(plain, decoded))
    return same_plain, same_special, same_decoding


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=20_000, help="lines of each shared corpus")
    parser.add_argument("--text", type=Path, action="append", default=[], help="a text to try whole (repeatable)")
    args = parser.parse_args()
    texts = {name: lines_of(SHARED / "corpora" / name, args.lines) for name in CORPORA if (SHARED / "corpora" / name).is_file()}
    texts.update({path.name: lines_of(path, None) for path in args.text})
    print("| tokenizer | text | ids | ids with special tokens | decoding |")
    print("|---|---|---:|---:|---:|")
    scratch = Path(tempfile.mkdtemp())
    for folder in sorted((SHARED / "tokenizers").iterdir()):
        if not (folder / "tokenizer.json").is_file():
            continue
        path, note = readable(folder / "tokenizer.json", scratch)
        try:
            ours = Tokenizer.from_model(formats.read("hf", path).model)
        except BpestoreError as error:
            print(f"| {folder.name} | refused: {str(error).removeprefix(str(path) + ': ')} | | | |")
            continue
        reference = tokenizers.Tokenizer.from_file(str(path))
        reference.no_truncation()
        reference.no_padding()
        for name, lines in texts.items():
            plain, special, decoding = compare(ours, reference, lines)
            total = len(lines)
            print(f"| {folder.name}{note} | {name} | {plain:,} / {total:,} | {special:,} / {total:,} | {decoding:,} / {total:,} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
