"""bpestore: train byte-level BPE tokenizers (CS336 semantics), keep them in a database, encode with
them (ids identical to tiktoken's).

The public API: :class:`Tokenizer` (encode and decode), :class:`BPEModel` (a tokenizer as plain,
validated data), :func:`train_bpe` (CS336's training function), :class:`Store` (named, versioned
tokenizers in SQLite or any SQLAlchemy database), :mod:`~bpestore.formats` (GPT-2, Hugging Face and
tiktoken files) and :mod:`~bpestore.errors`.

>>> from bpestore import BPEModel, Tokenizer
>>> model = BPEModel({i: bytes([i]) for i in range(256)} | {256: b"lo"}, [(b"l", b"o")], ["<|endoftext|>"])
>>> tokenizer = Tokenizer.from_model(model)
>>> tokenizer.encode("hello<|endoftext|>")
[104, 101, 108, 256, 257]
>>> tokenizer.decode([104, 101, 108, 256])
'hello'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import errors, formats
from ._engine import __version__
from .encode.tokenizer import Tokenizer
from .errors import (
    BpestoreError,
    CorpusDecodeError,
    DatabaseTooNewError,
    DisallowedSpecialTokenError,
    EmptyCorpusError,
    FormatError,
    InvalidReferenceError,
    NotABpestoreDatabaseError,
    StoreError,
    TokenizerNotFoundError,
)
from .model import BPEModel, MergeRule
from .train.trainer import train_bpe

if TYPE_CHECKING:
    from .workflow import Store

__all__ = [
    "BPEModel",
    "BpestoreError",
    "CorpusDecodeError",
    "DatabaseTooNewError",
    "DisallowedSpecialTokenError",
    "EmptyCorpusError",
    "FormatError",
    "InvalidReferenceError",
    "MergeRule",
    "NotABpestoreDatabaseError",
    "Store",
    "StoreError",
    "Tokenizer",
    "TokenizerNotFoundError",
    "__version__",
    "errors",
    "formats",
    "train_bpe",
]


def __getattr__(name: str):
    # The store pulls in SQLAlchemy; import it only when it is asked for.
    if name == "Store":
        from .workflow import Store

        return Store
    raise AttributeError(f"module 'bpestore' has no attribute {name!r}")
