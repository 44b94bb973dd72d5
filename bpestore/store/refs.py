"""Naming stored tokenizers: ``name`` means the latest version, ``name@N`` version N."""

from __future__ import annotations

import re

from ..errors import InvalidReferenceError

_NAME = re.compile(r"[^@\s\x00]+")  # no NUL: PostgreSQL's text cannot hold it
MAX_VERSION = 2**63 - 1
"""The largest version: SQLite's integers are 64-bit."""


def parse_ref(ref: str) -> tuple[str, int | None]:
    """``"name"`` -> (name, None) meaning the latest version; ``"name@3"`` -> (name, 3)."""
    if not isinstance(ref, str):
        raise TypeError(f"a tokenizer reference is a str such as 'name' or 'name@2', not {type(ref).__name__}")
    name, at, version = ref.partition("@")
    if (
        not _is_name(name)
        or (at and not (version.isascii() and version.isdigit() and len(version.lstrip("0")) <= 19))  # int() stays cheap
        or (at and not 1 <= int(version) <= MAX_VERSION)
    ):
        raise InvalidReferenceError(
            f"{ref!r} is not a tokenizer reference: expected NAME or NAME@VERSION (VERSION from 1 to {MAX_VERSION})"
        )
    return name, int(version) if at else None


def _is_name(name: str) -> bool:
    if not _NAME.fullmatch(name):
        return False
    try:
        name.encode("utf-8")  # lone surrogates (from undecodable bytes in argv, say) cannot be stored
    except UnicodeEncodeError:
        return False
    return True


def check_name(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"a tokenizer name is a str, not {type(name).__name__} ({name!r})")
    if not _is_name(name) or len(name) > 200:
        raise InvalidReferenceError(f"invalid tokenizer name {name!r}: use up to 200 characters, no '@', no spaces and no NUL")
    return name
