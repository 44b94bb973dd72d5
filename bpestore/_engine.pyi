"""The typed face of ``bpestore._engine``, the Rust engine (crates/ in the repository).

Users do not import this module: the public API (``bpestore.Tokenizer``, ``bpestore.train_bpe``,
``bpestore.Store``) calls it. Each stage's bindings add their part below.
"""

__version__: str

# -- pretokenize (crates/pretokenize, crates/python/src/pretokenize.rs) ---------------------------

GPT2_PATTERN: str
"""The GPT-2 pattern, byte for byte ``bpestore.pretokenize.GPT2_PATTERN``."""
CL100K_PATTERN: str
O200K_PATTERN: str

class Pretokenizer:
    """A pre-tokenizer with its special tokens: ``regex.findall(pattern, text)`` on the text
    between special tokens (found longest first), each special token a piece of its own.
    Hand-written scanners run the three known patterns; any other runs on fancy_regex.
    ValueError for an invalid pattern or an empty special token."""

    def __init__(self, pattern: str, special_tokens: list[str] = ...) -> None: ...
    @property
    def pattern(self) -> str: ...
    @property
    def special_tokens(self) -> list[str]: ...
    @property
    def split_safe(self) -> bool:
        """Whether a space between two non-whitespace characters is a safe cut."""
    def pretokenize(self, text: str) -> list[str]:
        """The pre-tokens of ``text``, special tokens as pieces of their own."""
    def last_safe_cut(self, text: str) -> int:
        """The last str index where ``text``, the start of a longer stream, can be cut without
        changing its pieces whatever follows; 0 if there is none."""
    def next_safe_cut(self, window: bytes, start: int) -> int | None:
        """The first safe cut (byte offset) at or after ``start`` in ``window``, UTF-8 bytes of a
        file (possibly cut mid-character at its ends); None if there is none."""

def utf8_error(data: bytes) -> tuple[int, str] | None:
    """``(offset, reason)`` of the first invalid UTF-8 in ``data`` as Python's decoder names it
    ("invalid start byte", "invalid continuation byte", "unexpected end of data"); None if valid."""
