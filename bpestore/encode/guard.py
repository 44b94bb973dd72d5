"""PatternError, not a panic, when a custom pattern hits the regex engine's backtracking limit
while encoding.

The engine's encoder (crates/encode) still pre-tokenizes with the panicking
``Pretokenizer::for_each_piece`` (its error path is not yet threaded through encode, batches,
streams and file encoding); PyO3 turns that panic into ``pyo3_runtime.PanicException``, a
``BaseException`` with a Rust backtrace's worth of surprise. Only patterns other than the three
known ones can hit the limit (those run on hand-written scanners), so only their tokenizers wrap
the engine in :class:`GuardedEngine`, which re-raises that panic as one
:class:`~bpestore.errors.PatternError` naming the pattern and the byte offset (in the piece of text
the pre-tokenizer was given: the text between special tokens, or a block of a batch, stream or
file). The known patterns pay nothing.
"""

from __future__ import annotations

import codecs
import glob
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import PatternError

_PANIC_MARK = "backtracks catastrophically"


@contextmanager
def pattern_errors() -> Iterator[None]:
    """Re-raise the engine's backtracking-limit panic as a PatternError; anything else as it is."""
    try:
        yield
    except BaseException as error:
        if type(error).__name__ == "PanicException" and _PANIC_MARK in str(error):
            raise PatternError(str(error)) from None
        raise


class GuardedEngine:
    """The engine's object (an encoder, or the iterators and streams it returns) with every call
    under :func:`pattern_errors`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                with pattern_errors():
                    result = value(*args, **kwargs)
            except BaseException as error:
                if type(error).__name__ == "PanicException" and name == "encode_batch":
                    self._find_the_failing_text(*args, **kwargs)
                if type(error).__name__ == "PanicException" and name == "encode_file_to_npy":
                    self._find_the_failing_block(*args)
                raise
            # The encoder's iterators and streams encode later, as they are used.
            return GuardedEngine(result) if type(result).__name__ in {"IdIterator", "StreamEncoder"} else result

        return call

    def _find_the_failing_text(self, texts: Any, num_threads: Any = None, allowed_special: Any = None) -> None:
        """A panic in one of ``encode_batch``'s threads reaches Python without its message ("a
        scoped thread panicked"): encode the texts again one by one, on this thread, to raise the
        real error (a PatternError naming the text) if there is one."""
        for index, text in enumerate(texts):
            try:
                with pattern_errors():
                    self._inner.encode(text, allowed_special)
            except PatternError as found:
                raise PatternError(f"text {index}: {found}") from None

    def _find_the_failing_block(self, path: Any, output: Any, *_: Any) -> None:
        """As :meth:`_find_the_failing_text`, for a file encoded on threads: remove the partial
        output the panic left (the engine removes it on its own errors, not on a panic), then
        encode the file again as a stream, on this thread, in blocks of 1 MiB, until the real
        error."""
        output = Path(output)
        for partial in output.parent.glob(f".{glob.escape(output.name)}.{os.getpid()}-*.partial"):
            partial.unlink(missing_ok=True)
        stream = self._inner.stream()
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        with open(path, "rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                with pattern_errors():
                    stream.feed(decoder.decode(block))
        with pattern_errors():
            stream.finish()

    def __iter__(self) -> GuardedEngine:
        return self

    def __next__(self) -> Any:
        with pattern_errors():
            return next(self._inner)
