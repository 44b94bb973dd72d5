"""Naming stored tokenizers: ``name`` means the latest version, ``name@N`` version N."""

from __future__ import annotations

import re

from ..errors import InvalidReferenceError

_NAME = re.compile(r"[^@\s]+")


def parse_ref(ref: str) -> tuple[str, int | None]:
    """``"name"`` -> (name, None) meaning the latest version; ``"name@3"`` -> (name, 3)."""
    name, at, version = ref.partition("@")
    if not _NAME.fullmatch(name) or (at and not (version.isascii() and version.isdigit())) or (at and int(version) < 1):
        raise InvalidReferenceError(f"{ref!r} is not a tokenizer reference: expected NAME or NAME@VERSION (VERSION >= 1)")
    return name, int(version) if at else None


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > 200:
        raise InvalidReferenceError(f"invalid tokenizer name {name!r}: use up to 200 characters, no '@' and no spaces")
    return name
