"""The registry of tokenizer file formats.

A format is one module in :mod:`bpestore.formats` that calls :func:`register` with a
:class:`Format`: a name, a reader that checks the whole input and returns an :class:`Imported`
(a :class:`~bpestore.BPEModel` with the paths it came from), a writer, and how ``bpestore import
NAME`` calls the reader (:class:`ImportCommand`). The command line, the store and Python users
all go through the registry, so a new format needs nothing else.
"""

from __future__ import annotations

import operator
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import starmap
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..model import BPEModel, Merges


@dataclass(frozen=True, init=False)
class Imported:
    """What reading a tokenizer's files gives: the model, where it came from, and notes for the user.

    ``later_notes``: more notes, made by ``later_notes()`` when :attr:`notes` is first read (notes
    about merges that a ``"token"`` model computes only when asked for them: see
    :meth:`BPEModel.with_derived_merges`)."""

    model: BPEModel
    format: str
    paths: list[str]
    _notes: list[str]
    _later_notes: Callable[[], list[str]] | None = field(repr=False)

    def __init__(
        self, model: BPEModel, format: str, paths: list[str], notes: Iterable[str] = (),
        later_notes: Callable[[], list[str]] | None = None,
    ):
        set_field = object.__setattr__  # frozen: fields are set once, here (and _notes once more, below)
        set_field(self, "model", model)
        set_field(self, "format", format)
        set_field(self, "paths", paths)
        set_field(self, "_notes", list(notes))
        set_field(self, "_later_notes", later_notes)

    @property
    def notes(self) -> list[str]:
        """Notes for the user (what the files cannot carry, what was found in them)."""
        if self._later_notes is not None:
            object.__setattr__(self, "_notes", [*self._notes, *self._later_notes()])
            object.__setattr__(self, "_later_notes", None)
        return self._notes


@dataclass(frozen=True)
class ImportOption:
    """An option of ``bpestore import NAME``, handed to the format's reader.

    Attributes:
        flag: the option on the command line (``--special-token``).
        keyword: the reader's argument it fills (``special_tokens``).
        help: one line for ``--help``.
        metavar, multiple, required: as click's options have them (``multiple``: repeatable, the
            values a tuple).
        positional: pass it to the reader positionally, after the files, instead of by keyword.
        convert: turns what the command line gave into what the reader takes; a ValueError is a
            usage error naming the option.
    """

    flag: str
    keyword: str
    help: str
    metavar: str | None = None
    multiple: bool = False
    required: bool = False
    positional: bool = False
    convert: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class ImportCommand:
    """How ``bpestore import NAME`` reads a format: ``read(*files, *positional options, **options)``.

    Attributes:
        help: the subcommand's help (its first line is its summary in ``bpestore import --help``).
        files: the names of its file arguments, in the order the reader takes them.
        options: its own options (``--name``, ``--quiet`` and ``--db`` every import has).
        progress: whether the reader takes ``progress=`` (a bar, unless ``--quiet``).
    """

    help: str
    files: tuple[str, ...]
    options: tuple[ImportOption, ...] = ()
    progress: bool = False


@dataclass(frozen=True)
class Format:
    """A tokenizer file format.

    Attributes:
        name: what users call it (``bpestore export --format NAME``).
        read: ``read(*paths, **options) -> Imported``; checks the whole input first and raises
            :class:`~bpestore.errors.FormatError` for anything it cannot represent exactly.
        write: ``write(model, output) -> notes``; ``output`` is a file, or a directory when
            ``writes_directory``.
        merge_rule: the rule the format's own tools apply (``"pair"`` or ``"token"``); exporting a
            model with the other rule adds a note that some texts may encode differently.
        writes_directory: whether ``output`` names a directory of files rather than one file.
        importer: how ``bpestore import NAME`` calls ``read``; None: no import command.
        write_folder: ``write_folder(model, directory) -> notes``, for a format that also writes
            a folder of files (``hf``: a model folder) when ``output`` is a directory.
        keeps_token_rule: whether ``write`` keeps a model of the other rule exact anyway (``hf``
            writes a token-rule model with ``ignore_merges`` and a merge for every split of each
            token), so that exporting it needs no note.
    """

    name: str
    read: Callable[..., Imported]
    write: Callable[[BPEModel, Path], list[str]]
    merge_rule: str = "pair"
    writes_directory: bool = False
    importer: ImportCommand | None = None
    write_folder: Callable[[BPEModel, Path], list[str]] | None = None
    keeps_token_rule: bool = False


_FORMATS: dict[str, Format] = {}


def register(format: Format) -> Format:
    """Add ``format`` to the registry (a format module calls this once, at import)."""
    if format.name in _FORMATS and _FORMATS[format.name] is not format:
        raise ValueError(f"a format named {format.name!r} is registered already")
    _FORMATS[format.name] = format
    return format


def names() -> list[str]:
    """The registered formats' names, in registration order."""
    return list(_FORMATS)


def get(name: str) -> Format:
    """The format called ``name``; ValueError naming the known ones if there is none."""
    if not isinstance(name, str):
        raise TypeError(f"a format is named by a str (one of {', '.join(_FORMATS)}), not {type(name).__name__}")
    try:
        return _FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown format {name!r}; choose one of {', '.join(_FORMATS)}") from None


def build_model(
    path: str | os.PathLike[str],
    vocab: Mapping[int, bytes],
    merges: Iterable[tuple[bytes, bytes]] | Callable[[BPEModel], Merges],
    special_tokens: Iterable[str],
    **options: Any,
) -> BPEModel:
    """A :class:`BPEModel` from what a file held; FormatError naming the file if it is inconsistent.
    ``merges`` may be a function of the model that derives them when asked: a ``"token"`` model
    (:meth:`BPEModel.with_derived_merges`)."""
    try:
        if callable(merges):
            return BPEModel.with_derived_merges(vocab, merges, special_tokens, **options)
        return BPEModel(vocab, merges, special_tokens, **options)
    except (ValueError, TypeError) as error:  # a file's wrong types are its format's errors too
        raise FormatError(f"{path}: {error}") from None


_SPECIAL_LOOKING = re.compile(r"<\|[^\s<>|]+\|>|<[^\s<>]+>")
"""``<|endoftext|>``, ``<s>``, ``</s>``, ``<pad>``, ``<unk>``: what special tokens look like."""


def looks_special(token: bytes) -> bool:
    """Whether ``token`` is shaped as special tokens are (``<|...|>`` or ``<...>``, printable,
    no spaces), rather than a piece of text.

    >>> [looks_special(t) for t in (b"<|endoftext|>", b"</s>", b"<", b"<>", b" <a>", b"<\\xff>")]
    [True, True, False, False, False, False]
    """
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return _SPECIAL_LOOKING.fullmatch(text) is not None and text.isprintable()


def unreached_tokens_notes(model: BPEModel, merges_path: str | os.PathLike[str], special_token_option: str | None = None) -> list[str]:
    """Notes if some multi-byte tokens of a pair-rule model are made by no merge: encoding can
    never produce them. Those shaped as special tokens (:func:`looks_special`, GPT-2's
    ``<|endoftext|>``) are named, with how to declare them (``special_token_option``, such as
    ``--special-token``: the import's option for them); any others point at an empty or
    truncated merges list."""
    if model.merge_rule != "pair":
        return []
    made = set(starmap(operator.add, model.merges))
    unmade = {token for token in set(model.vocab.values()) - made if len(token) > 1}
    specials = set(model.whole_ids.values())
    def one_character(token: bytes) -> bool:
        # (a SentencePiece-style model starts from characters: one is reached without a merge)
        try:
            return model.byte_fallback and len(token.decode("utf-8")) == 1
        except UnicodeDecodeError:
            return False

    unreached = [
        token for token_id, token in sorted(item for item in model.vocab.items() if item[1] in unmade)
        if token_id not in specials and not one_character(token)
    ]
    special_looking = [token.decode("utf-8") for token in unreached if looks_special(token)]
    others = len(unreached) - len(special_looking)
    notes = []
    if special_looking:
        shown = ", ".join(special_looking[:5]) + (f" (+{len(special_looking) - 5} more)" if len(special_looking) > 5 else "")
        how = " ".join(f"{special_token_option} {_shell_quoted(token)}" for token in special_looking[:5])
        one = len(special_looking) == 1
        notes.append(
            f"warning: {shown} {'is' if one else 'are'} in the vocab but made by no merge: "
            + ("it looks like a special token" if one else "they look like special tokens")
            + ", and text holding " + ("it" if one else "them") + " is encoded as ordinary tokens unless declared special"
            + (f"; pass {how}" if special_token_option else "")
        )
    if others:
        notes.append(
            f"warning: {others} of the vocab's {model.vocab_size} tokens are made by no merge in {merges_path} "
            f"({len(model.merges)} merges; is it empty or truncated?): encoding never produces them"
        )
    return notes


def added_tokens_note(model: BPEModel, format: str) -> list[str]:
    """The note for a format that cannot mark added tokens (``.tiktoken``, GPT-2's files): they
    are written as ordinary vocab entries (their ids kept, so the ids of everything and decoding
    stay the same), but a tool reading the files no longer cuts them out of the text whole.
    ``bpestore add-tokens`` after an import restores them at the same ids; ``hf`` keeps them."""
    if not model.added_tokens:
        return []
    shown = ", ".join(f"{text!r} ({token_id})" for text, token_id in list(model.added_ids.items())[:5])
    more = f" (+{len(model.added_ids) - 5} more)" if len(model.added_ids) > 5 else ""
    return [
        f"note: {format} files cannot mark added tokens; {shown}{more} are written as ordinary tokens (same ids), "
        "but tools reading the files do not encode them whole; after importing the files, "
        "`bpestore add-tokens REF TOKEN...` restores them at the same ids (the hf format keeps them)"
    ]


def _shell_quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def resolved(*paths: str | os.PathLike[str]) -> list[str]:
    """The paths as absolute strings, as an import records them."""
    return [str(Path(path).resolve()) for path in paths]
