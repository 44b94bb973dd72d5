"""Reading the benchmark corpora: documents for the peers' trainers, and text to encode.

The corpora separate documents by a line holding only the special token (``<|endoftext|>``);
``tinystories_800K.txt`` separates stories by blank lines. :func:`detect_separator` tells which.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

SPECIAL_LINE = "special"
BLANK_LINE = "blank"
_SNIFF_BYTES = 1 << 20
_COPY_BLOCK = 1 << 20


def detect_separator(path: str | Path, special: str | None) -> str:
    """``"special"`` when a line of the file's first few MB is exactly the special token, else
    ``"blank"`` (documents separated by empty lines)."""
    if special:
        with open(path, "rb") as file:
            head = b"\n" + file.read(_SNIFF_BYTES)
        if b"\n" + special.encode("utf-8") + b"\n" in head:
            return SPECIAL_LINE
    return BLANK_LINE


def iter_documents(path: str | Path, special: str | None, separator: str) -> Iterator[str]:
    """The documents of the file, streamed line by line; separator lines are dropped."""
    marker = special if separator == SPECIAL_LINE else ""
    lines: list[str] = []
    with open(path, encoding="utf-8") as file:
        for line in file:
            if line.rstrip("\n") == marker:
                if lines:
                    yield "".join(lines)
                    lines = []
            else:
                lines.append(line)
    if lines:
        yield "".join(lines)


def utf8_prefix(data: bytes, max_bytes: int | None) -> bytes:
    """At most ``max_bytes`` of ``data``, cut at a character boundary."""
    if max_bytes is None or max_bytes >= len(data):
        return data
    end = max_bytes
    while end > 0 and (data[end] & 0xC0) == 0x80:  # a continuation byte: back off to a start byte
        end -= 1
    return data[:end]


def copy_prefix(source: str | Path, target: str | Path, max_bytes: int) -> None:
    """Copy the first ``max_bytes`` of ``source``, cut at a character boundary, block by block."""
    with open(source, "rb") as src:
        start = max(max_bytes - 3, 0)  # a character has at most 3 continuation bytes
        src.seek(start)
        end = start + len(utf8_prefix(src.read(7), max_bytes - start))
        src.seek(0)
        with open(target, "wb") as dst:
            remaining = end
            while remaining:
                block = src.read(min(_COPY_BLOCK, remaining))
                if not block:
                    break
                dst.write(block)
                remaining -= len(block)


def read_text(path: str | Path, max_bytes: int | None = None) -> str:
    """The file's text, or its first ``max_bytes`` bytes cut at a character boundary."""
    with open(path, "rb") as file:
        data = file.read() if max_bytes is None else file.read(max_bytes + 4)
    return utf8_prefix(data, max_bytes).decode("utf-8")


def mb_to_bytes(megabytes: float | None, path: str | Path) -> int | None:
    """``--encode-mb`` as a byte count (MB = 10**6 bytes), or None for the whole file."""
    if megabytes is None or megabytes * 1_000_000 >= os.path.getsize(path):
        return None
    return int(megabytes * 1_000_000)


# Letters of scripts other than Latin (and Latin with diacritics), for a non-English sample.
_SCRIPTS = {
    "cyrillic": (0x430, 0x44F), "greek": (0x3B1, 0x3C9), "arabic": (0x627, 0x64A), "hebrew": (0x5D0, 0x5EA),
    "devanagari": (0x915, 0x939), "thai": (0xE01, 0xE2E), "hangul": (0xAC00, 0xD7A3), "cjk": (0x4E00, 0x9FFF),
    "latin-diacritics": (0xE0, 0xFF), "armenian": (0x561, 0x586), "georgian": (0x10D0, 0x10F0),
}


def write_multilingual_text(path: str | Path, size_bytes: int, seed: int = 0) -> None:
    """About ``size_bytes`` of generated non-English text: words of eleven scripts (a lexicon of
    made-up words per script, drawn with Zipf's law, as natural text repeats its words), with
    digits, punctuation, emoji and newlines between them. Deterministic for a seed."""
    import random

    rng = random.Random(seed)
    lexicons = {}
    for script, (low, high) in _SCRIPTS.items():
        short = script in ("hangul", "cjk")  # syllables and ideographs: short words
        lexicons[script] = ["".join(chr(rng.randint(low, high)) for _ in range(rng.randint(1, 3 if short else 9)))
                            for _ in range(4000)]
    weights = [1 / rank for rank in range(1, 4001)]
    scripts = list(_SCRIPTS)
    extras = [",", ".", "!", "?", " —", " (", ")", ":", "«", "»", "😀", " 👍🏽", "\n", "\n\n", "2024", "3.14", " 42"]
    out, size = [], 0
    while size < size_bytes:
        script = rng.choice(scripts)
        words = rng.choices(lexicons[script], weights, k=rng.randint(5, 40))  # a sentence in one script
        sentence = " ".join(words) + rng.choice(extras) + " "
        out.append(sentence)
        size += len(sentence.encode("utf-8"))
    data = "".join(out).encode("utf-8")
    Path(path).write_bytes(utf8_prefix(data, size_bytes))
