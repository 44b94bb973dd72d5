"""The typed face of ``bpestore._engine``, the Rust engine (crates/ in the repository).

Users do not import this module: the public API (``bpestore.Tokenizer``, ``bpestore.train_bpe``,
``bpestore.Store``) calls it. Each stage's bindings add their part below.
"""

__version__: str

# ---------------------------------------------------------------- encode (crates/python/src/encode.rs)

from collections.abc import Callable, Iterable
from os import PathLike

class Encoder:
    """A byte-level BPE encoder: ids from text and bytes from ids, thread-safe, GIL released.

    ``vocab``: id -> bytes, every single byte among them, no token twice (special tokens that have
    ids of their own left out); ``merges`` in rank order (unused by the token rule);
    ``special_tokens``: token -> id; ``merge_rule``: ``"pair"`` (GPT-2, CS336, Hugging Face) or
    ``"token"`` (tiktoken). Bad input raises ValueError with bpestore's messages.
    """

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: Iterable[tuple[bytes, bytes]],
        special_tokens: dict[str, int],
        pattern: str,
        merge_rule: str = "pair",
    ) -> None: ...
    def encode(self, text: str, allowed_special: str | Iterable[str] | None = None) -> list[int]:
        """The ids of ``text``; ``allowed_special`` None or "all": every special token is
        recognised; a collection: only those (the others are ordinary text)."""
    def encode_to_bytes(self, text: str, allowed_special: str | Iterable[str] | None = None) -> bytes:
        """The ids as uint32 little-endian bytes (``numpy.frombuffer(b, dtype="<u4")``)."""
    def encode_batch(self, texts: Iterable[str], num_threads: int | None = None) -> list[list[int]]:
        """The ids of each text, on ``num_threads`` threads (default: the CPUs), in order."""
    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The tokens' bytes joined; ValueError naming the first id not in the vocabulary."""
    def stream(self, block_bytes: int = 65536) -> StreamEncoder:
        """An encoder for a stream of text pieces, in constant memory."""
    def encode_file_to_npy(
        self,
        path: str | PathLike[str],
        output: str | PathLike[str],
        threads: int | None = None,
        progress: Callable[[int], object] | None = None,
    ) -> int:
        """A UTF-8 file's ids into a 1-D ``.npy`` (dtype ``npy_dtype``), via ``output.partial``
        and a rename; returns the number of ids. ``progress(n)``: n more input bytes done.
        Invalid UTF-8: ``bpestore.errors.CorpusDecodeError``."""
    @property
    def max_id(self) -> int:
        """The highest id, special tokens included."""
    @property
    def npy_dtype(self) -> str:
        """``"uint16"`` when every id fits, else ``"uint32"``."""

class StreamEncoder:
    """Feeds text to an :class:`Encoder` piece by piece; all the ids returned equal those of the
    whole text, however it is cut."""

    def feed(self, text: str) -> list[int]:
        """The ids of the text up to the last place that what follows cannot change."""
    def finish(self) -> list[int]:
        """The ids of the rest: the end of the stream."""
