"""Reading and writing tokenizers in other tools' file formats, as plug-ins.

Each format is one module here that registers a :class:`Format` (see :mod:`.registry`); this
package finds them all, so adding a format means adding its module. Python users and the command
line use the same two functions, with the same checks and errors:

>>> from bpestore import formats
>>> formats.names()
['gpt2', 'hf', 'tiktoken']
>>> formats.read("word2vec", "vectors.bin")
Traceback (most recent call last):
...
ValueError: unknown format 'word2vec'; choose one of gpt2, hf, tiktoken
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from pathlib import Path
from typing import Any, Protocol

from ..atomic import atomic_directory, atomic_path
from ..collector import collector_paused
from ..model import BPEModel
from .registry import Format, ImportCommand, Imported, ImportOption, get, names, register

__all__ = ["Format", "ImportCommand", "ImportOption", "Imported", "export", "get", "names", "read", "register"]


class HasModel(Protocol):
    """Anything that carries a :class:`BPEModel` (a :class:`~bpestore.Tokenizer` does)."""

    @property
    def model(self) -> BPEModel: ...


def _load_format_modules() -> None:
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_") and module.name != "registry":
            importlib.import_module(f"{__name__}.{module.name}")


_load_format_modules()


def read(format: str, *paths: str | os.PathLike[str], **options: Any) -> Imported:
    """Read a tokenizer from ``format``'s files; nothing half-read is ever returned.

    ``bpestore.formats.read("gpt2", "vocab.json", "merges.txt", special_tokens=["<|endoftext|>"])``,
    ``read("hf", "tokenizer.json")``, ``read("tiktoken", "cl100k_base.tiktoken", "cl100k_base")``.
    Returns an :class:`Imported`; ``Tokenizer.from_model(imported.model)`` encodes with it.

    Raises:
        FormatError: (a ValueError) the files cannot be represented exactly.
        ValueError: ``format`` is not a registered format.
        OSError: a file cannot be read.
    """
    reader = get(format).read
    with collector_paused():  # (the many objects of a real tokenizer's file hold no cycles)
        return reader(*paths, **options)


def export(tokenizer: BPEModel | HasModel, format: str, output: str | os.PathLike[str]) -> list[str]:
    """Write ``tokenizer`` (a :class:`~bpestore.Tokenizer` or a :class:`BPEModel`) in ``format``;
    returns notes for the user (what the format cannot carry, what was written).

    ``gpt2`` writes ``vocab.json`` and ``merges.txt`` into the directory ``output``; ``hf`` and
    ``tiktoken`` write the file ``output``, and ``hf`` a model folder (``tokenizer.json``,
    ``tokenizer_config.json``, ``special_tokens_map.json``, which ``transformers`` loads) when
    ``output`` is a directory or ends with ``/``. Atomic (see :mod:`bpestore.atomic`): each file
    appears only once complete; a failure part-way leaves no partial file.

    Raises:
        TypeError: ``tokenizer`` is neither a Tokenizer nor a BPEModel.
        ValueError: ``format`` is not a registered format.
        OSError: the output cannot be written (its directory missing, a full disk).
    """
    if isinstance(tokenizer, BPEModel):
        model = tokenizer
    elif isinstance(getattr(tokenizer, "model", None), BPEModel):
        model = tokenizer.model
    else:
        raise TypeError(f"export needs a Tokenizer or a BPEModel, not {type(tokenizer).__name__}")
    target = get(format)
    notes: list[str] = []
    if model.merge_rule == "token" and target.merge_rule != "token" and not target.keeps_token_rule:
        produced = {a + b for a, b in model.merges}
        unreachable = sum(1 for token in model.vocab.values() if len(token) > 1 and token not in produced) - len(model.special_ids)
        notes.append(
            f"this tokenizer merges by token rank (tiktoken); {format} tools merge by pair rank, "
            f"and {max(unreachable, 0)} tokens are not reached by any pair merge, so some texts may encode differently"
        )
    as_folder = target.write_folder is not None and (Path(output).is_dir() or str(output).endswith(("/", os.sep)))
    output = Path(output)
    with (atomic_directory if target.writes_directory or as_folder else atomic_path)(output) as temporary:
        written = (target.write_folder if as_folder and target.write_folder is not None else target.write)(model, temporary)
    return notes + [note.replace(str(temporary), str(output)) for note in written]
