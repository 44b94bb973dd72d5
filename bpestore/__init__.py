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

import importlib
from typing import TYPE_CHECKING

from . import errors
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

if TYPE_CHECKING:
    from . import formats
    from .engine import __version__
    from .encode.tokenizer import Tokenizer
    from .model import MAX_TOKEN_ID, BPEModel, MergeRule
    from .train.counts import Counts, train_bpe_from_counts
    from .train.trainer import train_bpe
    from .workflow import Store

__all__ = [
    "BPEModel",
    "BpestoreError",
    "Counts",
    "CorpusDecodeError",
    "DatabaseTooNewError",
    "DisallowedSpecialTokenError",
    "EmptyCorpusError",
    "FormatError",
    "InvalidReferenceError",
    "MAX_TOKEN_ID",
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
    "train_bpe_from_counts",
]


# Where each public name comes from; it is imported when first asked for. So ``import bpestore``
# itself loads neither NumPy nor the engine nor SQLAlchemy (milliseconds instead of about half a
# second), and the command line handles Ctrl-C from its very start (see bpestore/cli.py).
_LAZY = {
    "__version__": ".engine",
    "Tokenizer": ".encode.tokenizer",
    "BPEModel": ".model",
    "MAX_TOKEN_ID": ".model",  # the largest token id (2**31 - 1): ids are 32-bit everywhere
    "MergeRule": ".model",
    "train_bpe": ".train.trainer",
    "Counts": ".train.counts",  # pre-token counts made anywhere (issue 14)
    "train_bpe_from_counts": ".train.counts",
    "Store": ".workflow",
    "formats": None,  # a submodule
}


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module 'bpestore' has no attribute {name!r}")
    source = _LAZY[name]
    if source is None:
        value = importlib.import_module(f".{name}", __name__)
    else:
        value = getattr(importlib.import_module(source, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
