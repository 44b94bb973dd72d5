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
