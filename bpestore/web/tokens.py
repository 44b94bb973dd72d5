"""How the explorer shows a token: one helper (:func:`token_html`) for the playground, the vocab,
merges and diff tables, so that a token reads the same everywhere.

- Characters are shown as characters; only the bytes of a token that splits a UTF-8 character
  are shown as bytes, ``\\xNN`` (``<span class="byte">``).
- A space, tab or newline is the character itself in ``<span class="ws sp|tab|nl">``: the text
  stays copyable as it is, and the stylesheet marks it (``␣``, ``→``, ``↵``) inside an element of
  class ``show-ws`` (the playground's whitespace toggle; tables always).
- Other characters that print as nothing or move the cursor (control characters, zero-width and
  other spaces, separators) are escaped, ``\\r``, ``\\u200b``, in ``<span class="esc">``.

Every piece says what it stands for, so the rendering can be undone exactly (the tests do:
tests/test_web_render.py); everything else is escaped text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from markupsafe import Markup, escape

if TYPE_CHECKING:
    from ..encode.tokenizer import Tokenizer

WHITESPACE_CLASS = {" ": "sp", "\t": "tab", "\n": "nl"}
SHORT_ESCAPES = {"\r": "\\r", "\x0b": "\\v", "\x0c": "\\f"}

__all__ = ["CHUNK_TOKENS", "WHITESPACE_CLASS", "TokenSpans", "char_escape", "token_html"]


def char_escape(char: str) -> str:
    """How a character that prints as nothing is written: ``\\r``, ``\\v``, ``\\f``, else
    ``\\uXXXX`` (``\\UXXXXXXXX`` past the BMP)."""
    code = ord(char)
    short = SHORT_ESCAPES.get(char)
    if short is not None:
        return short
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def token_html(token: bytes) -> Markup:
    """A token's bytes as HTML (see the module's docstring)."""
    text = token.decode("utf-8", errors="surrogateescape")
    if text.isprintable() and " " not in text:  # most tokens: nothing to mark
        return escape(text)
    parts: list[str] = []
    run: list[str] = []  # plain characters not yet written
    for char in text:
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that is not part of a whole UTF-8 character
            kind, shown = "byte", f"\\x{code - 0xDC00:02x}"
        elif char in WHITESPACE_CLASS:
            kind, shown = "ws " + WHITESPACE_CLASS[char], char
        elif not char.isprintable():
            kind, shown = "esc", char_escape(char)
        else:
            run.append(char)
            continue
        if run:
            parts.append(str(escape("".join(run))))
            run.clear()
        title = "" if kind.startswith("ws") else f' title="{"byte" if kind == "byte" else f"U+{code:04X}"}"'
        parts.append(f'<span class="{kind}"{title}>{shown}</span>')
    if run:
        parts.append(str(escape("".join(run))))
    return Markup("".join(parts))


CHUNK_TOKENS = 200  # tokens per block of a long text, at least (TokenSpans.html)
COLOURS = 6  # the stylesheet's token colours (.tok.c0 ... .tok.c5), which only separate neighbours
_HEADS = [f'<span class="tok c{index}' for index in range(COLOURS)]


class TokenSpans:
    """A tokenizer's tokens as the playground's ``<span class="tok">`` elements: each token's
    span (its text, and the id, bytes and rank its title tells) is made once and kept, so a
    long text is a join of ready-made strings, not a template loop (100 KB in well under a
    second: benchmarks/playground_render.py)."""

    def __init__(self, tokenizer: Tokenizer):
        self.vocab = tokenizer.vocab
        self.special = frozenset(tokenizer.special_ids.values())
        id_of = {token: token_id for token_id, token in self.vocab.items()}
        self.rank: dict[int, int] = {}
        for rank, (left, right) in enumerate(tokenizer.merges):
            made = id_of.get(left + right)
            if made is not None:
                self.rank.setdefault(made, rank)
        self.ranks_are_ids = tokenizer.merge_rule == "token"
        self._tails: dict[int, str] = {}
        self._line_ends = frozenset(token_id for token_id, token in self.vocab.items() if token.endswith(b"\n"))

    def describe(self, token_id: int) -> str:
        """What hovering a token tells: ``id 262 · 3 bytes: 74 68 65 · rank 6``."""
        token = self.vocab[token_id]
        size = f"{len(token)} byte{'s' if len(token) != 1 else ''}: {token.hex(' ')}"
        if token_id in self.special:
            what = "special token"
        elif token_id in self.rank:
            what = f"rank {self.rank[token_id]:,}"
        elif len(token) > 1 and self.ranks_are_ids:
            what = f"rank {token_id:,}"
        else:
            what = "a single byte" if len(token) == 1 else "no merge makes it"
        return f"id {token_id:,} · {size} · {what}"

    def _tail(self, token_id: int) -> str:
        """The span of ``token_id`` after its colour class (kept)."""
        token = self.vocab[token_id]
        classes = " special" if token_id in self.special else ""
        inner = token_html(token)
        if not classes and "class=\"byte\"" in inner:
            classes = " bytes"
        tail = f'{classes}" data-id="{token_id}" title="{escape(self.describe(token_id))}">{inner}</span>'
        self._tails[token_id] = tail
        return tail

    def html(self, ids: list[int]) -> Markup:
        """The spans of ``ids``, in order, coloured in turn. Past :data:`CHUNK_TOKENS` tokens,
        they are cut into blocks (``<div class="chunk">``) after a token that ends a line, at
        least that many tokens apart: the stylesheet lets the browser skip laying out the blocks
        off screen (``content-visibility``), which most of a long text's time in the browser was."""
        tails, heads, line_ends = self._tails, _HEADS, self._line_ends
        chunked = len(ids) > CHUNK_TOKENS
        parts: list[str] = ['<div class="chunk">'] if chunked else []
        append = parts.append
        since = 0
        for position, token_id in enumerate(ids):
            tail = tails.get(token_id)
            if tail is None:
                tail = self._tail(token_id)
            append(heads[position % COLOURS])
            append(tail)
            since += 1
            if chunked and since >= CHUNK_TOKENS and token_id in line_ends:
                append('</div><div class="chunk">')
                since = 0
        if chunked:
            append("</div>")
        return Markup("".join(parts))
