"""Training recipes: one plain value that holds everything that determines a training's merges and
vocabulary, so that a stored tokenizer can be rebuilt from it exactly.

A :class:`Recipe` names its inputs (files by path and the sha256 of their content, or a corpus the
store holds, by its sha256), its stages (each a pre-tokenizer and the vocab size it trains to; one,
or two for SuperBPE: see :mod:`bpestore.train.stages`), the special tokens and where their ids go,
``min_count``, the tie-break and the base it continues, if any. How a training runs (threads,
progress, a Dask cluster, memory limits, the store's lock) is not part of it: it does not change
the merges.

Recipes are written as TOML (:meth:`Recipe.to_toml`) and read back (:func:`recipe_from_toml`,
:func:`load_recipe`), checked as they are read: an unknown key or a value of the wrong type is a
:class:`~bpestore.errors.RecipeError` of one line.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from ..errors import RecipeError
from ..pretokenize.patterns import name_of_pattern
from .sources import CorpusFiles
from .trainer import SpecialTokensAt

TieBreak = Literal["cs336", "huggingface"]
"""How equal counts are ordered: ``cs336`` (the lexicographically greatest pair of byte strings)
or ``huggingface`` (Hugging Face ``BpeTrainer``'s: the smallest pair of its token ids)."""

TIE_BREAKS: tuple[str, ...] = get_args(TieBreak)


@dataclass(frozen=True)
class FileInput:
    """A file of the corpus, by path and the sha256 (hex) of its (decompressed) content."""

    path: str
    sha256: str


@dataclass(frozen=True)
class StoredCorpusInput:
    """A corpus the store holds, by its identity (:attr:`~bpestore.store.database.CorpusInfo.sha256`),
    counted with the recipe's first stage's pattern and its special tokens."""

    corpus_sha256: str


Input = FileInput | StoredCorpusInput


@dataclass(frozen=True)
class Stage:
    """One stage of a training: its pre-tokenizer (a name such as ``gpt2``, or a regex) and the
    vocab size it trains to (special tokens and the 256 bytes included)."""

    vocab_size: int
    pattern: str | None = "gpt2"
    """None (recipes built by :meth:`~bpestore.workflow.Store.train`'s keyword form only, never
    written down: a stored recipe names its pattern): the counts' own, the base's, else GPT-2's."""
    max_words: int | None = None
    """If set, no merge of this stage makes a token of more than this many words (runs of bytes
    other than the space): SuperBPE's limit on its superwords (4 in its repository)."""


@dataclass(frozen=True)
class Recipe:
    """Everything that determines a training's merges and vocabulary (see the module's doc)."""

    inputs: tuple[Input, ...]
    stages: tuple[Stage, ...]
    special_tokens: tuple[str, ...] = ()
    special_tokens_at: SpecialTokensAt = "start"
    min_count: int | None = None
    tie_break: TieBreak = "cs336"
    base: str | None = None
    """The ref of the stored tokenizer this training continues (``name@N``), or None."""
    format: int = field(default=1)
    """The recipe format's version."""

    @property
    def vocab_size(self) -> int:
        """The vocab size the last stage trains to: the tokenizer's."""
        return self.stages[-1].vocab_size

    @property
    def pattern(self) -> str | None:
        """The pre-tokenizer of the last stage (the tokenizer encodes with it), by name or regex."""
        return self.stages[-1].pattern

    def with_vocab_size(self, vocab_size: int) -> Recipe:
        """The same recipe, its last stage trained to ``vocab_size``."""
        last = replace(self.stages[-1], vocab_size=vocab_size)
        return Recipe(self.inputs, (*self.stages[:-1], last), self.special_tokens, self.special_tokens_at, self.min_count,
                      self.tie_break, self.base, self.format)

    def to_dict(self) -> dict[str, Any]:
        """The recipe as plain data (what :meth:`to_toml` writes and :func:`recipe_from_dict` reads)."""
        data: dict[str, Any] = {"format": self.format}
        if self.base is not None:
            data["base"] = self.base
        data["special_tokens"] = list(self.special_tokens)
        data["special_tokens_at"] = self.special_tokens_at
        if self.min_count is not None:
            data["min_count"] = self.min_count
        data["tie_break"] = self.tie_break
        data["inputs"] = [
            {"path": item.path, "sha256": item.sha256} if isinstance(item, FileInput) else {"corpus_sha256": item.corpus_sha256}
            for item in self.inputs
        ]
        data["stages"] = [
            ({} if stage.pattern is None else {"pattern": stage.pattern}) | {"vocab_size": stage.vocab_size}
            | ({} if stage.max_words is None else {"max_words": stage.max_words})
            for stage in self.stages
        ]
        return data

    def to_toml(self) -> str:
        """The recipe as a TOML document (read back by :func:`recipe_from_toml` as an equal recipe)."""
        data = self.to_dict()
        lines = ["# A bpestore training recipe: `bpestore train --recipe FILE --name NAME` trains it."]
        for key, value in data.items():
            if not isinstance(value, list) or key == "special_tokens":
                lines.append(f"{key} = {_toml_value(value)}")
        for table in ("inputs", "stages"):
            for item in data[table]:
                lines.append("")
                lines.append(f"[[{table}]]")
                lines.extend(f"{key} = {_toml_value(value)}" for key, value in item.items())
        return "\n".join(lines) + "\n"


def _toml_value(value: object) -> str:
    """A TOML value: a basic string (JSON's escapes are TOML's, DEL aside), an integer, a list of strings."""
    if isinstance(value, bool):
        raise TypeError("no booleans in a recipe")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    raise TypeError(f"no {type(value).__name__} in a recipe")


_TOP_KEYS = {"format", "base", "special_tokens", "special_tokens_at", "min_count", "tie_break", "inputs", "stages"}


def recipe_from_toml(text: str, where: str = "the recipe") -> Recipe:
    """The recipe a TOML document describes; RecipeError (one line, naming ``where``) if it is not one."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise RecipeError(f"{where} is not TOML: {error}") from None
    return recipe_from_dict(data, where)


def load_recipe(path: str | os.PathLike[str]) -> Recipe:
    """The recipe in the TOML file ``path`` (see :func:`recipe_from_toml`)."""
    try:
        with open(path, "rb") as file:
            raw = file.read()
    except OSError as error:
        raise RecipeError(f"cannot read the recipe {os.fspath(path)}: {error.strerror or error}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RecipeError(f"the recipe {os.fspath(path)} is not UTF-8") from None
    return recipe_from_toml(text, f"the recipe {os.fspath(path)}")


def _kind(value: object) -> str:
    return {bool: "a boolean", int: "an integer", str: "a string", list: "a list", dict: "a table"}.get(type(value), type(value).__name__)


def recipe_from_dict(data: Mapping[str, Any], where: str = "the recipe") -> Recipe:
    """The recipe ``data`` (as :meth:`Recipe.to_dict` gives it) describes; RecipeError otherwise."""

    def fail(message: str) -> RecipeError:
        return RecipeError(f"{where}: {message}")

    def string(table: Mapping[str, Any], key: str, context: str) -> str:
        value = table[key]
        if not isinstance(value, str):
            raise fail(f"{context}{key} must be a string, not {_kind(value)}")
        return value

    def integer(table: Mapping[str, Any], key: str, context: str, least: int) -> int:
        value = table[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(f"{context}{key} must be an integer, not {_kind(value)}")
        if value < least:
            raise fail(f"{context}{key} must be at least {least}, not {value}")
        return value

    def keys(table: Mapping[str, Any], allowed: set[str], required: set[str], context: str) -> None:
        unknown = sorted(set(table) - allowed)
        if unknown:
            raise fail(f"unknown key {context}{unknown[0]} (known: {', '.join(sorted(allowed))})")
        missing = sorted(required - set(table))
        if missing:
            raise fail(f"{context}{missing[0]} is missing")

    def tables(key: str) -> list[Mapping[str, Any]]:
        value = data[key]
        if not isinstance(value, list) or not value or not all(isinstance(item, dict) for item in value):
            raise fail(f"{key} must be a non-empty array of tables ([[{key}]])")
        return value

    if not isinstance(data, Mapping):
        raise fail(f"a recipe is a table, not {_kind(data)}")
    keys(data, _TOP_KEYS, {"inputs", "stages"}, "")
    version = integer(data, "format", "", 1) if "format" in data else 1
    if version != 1:
        raise fail(f"format {version} is newer than this bpestore's recipes (format 1)")
    inputs: list[Input] = []
    for number, item in enumerate(tables("inputs"), 1):
        context = f"inputs[{number}]."
        if "corpus_sha256" in item:
            keys(item, {"corpus_sha256"}, set(), context)
            inputs.append(StoredCorpusInput(_sha256(string(item, "corpus_sha256", context), context + "corpus_sha256", fail)))
        else:
            keys(item, {"path", "sha256"}, {"path", "sha256"}, context)
            inputs.append(FileInput(string(item, "path", context), _sha256(string(item, "sha256", context), context + "sha256", fail)))
    if any(isinstance(item, StoredCorpusInput) for item in inputs) and len(inputs) > 1:
        raise fail("a stored corpus is the only input of its recipe (grow it with `bpestore count add`)")
    stages: list[Stage] = []
    for number, item in enumerate(tables("stages"), 1):
        context = f"stages[{number}]."
        keys(item, {"pattern", "vocab_size", "max_words"}, {"vocab_size"}, context)
        pattern = string(item, "pattern", context) if "pattern" in item else "gpt2"
        max_words = integer(item, "max_words", context, 1) if "max_words" in item else None
        stages.append(Stage(integer(item, "vocab_size", context, 1), pattern, max_words))
    if len(stages) > 2:
        raise fail(f"{len(stages)} stages: this bpestore trains recipes of one stage, or two (SuperBPE's)")
    if len(stages) == 2 and stages[1].vocab_size < stages[0].vocab_size:
        raise fail(f"stages[2].vocab_size ({stages[1].vocab_size}) is smaller than stages[1]'s ({stages[0].vocab_size}): a stage only adds tokens")
    special_tokens: tuple[str, ...] = ()
    if "special_tokens" in data:
        value = data["special_tokens"]
        if not isinstance(value, list) or not all(isinstance(token, str) for token in value):
            raise fail("special_tokens must be a list of strings")
        special_tokens = tuple(value)
    at = string(data, "special_tokens_at", "") if "special_tokens_at" in data else "start"
    if at not in ("start", "end"):
        raise fail(f"special_tokens_at must be \"start\" or \"end\", not {at!r}")
    tie_break = string(data, "tie_break", "") if "tie_break" in data else "cs336"
    if tie_break not in TIE_BREAKS:
        raise fail(f"tie_break must be one of {', '.join(map(repr, TIE_BREAKS))}, not {tie_break!r}")
    min_count = integer(data, "min_count", "", 1) if "min_count" in data else None
    base = string(data, "base", "") if "base" in data else None
    return Recipe(
        tuple(inputs), tuple(stages), special_tokens, at, min_count, tie_break, base, version,  # type: ignore[arg-type]
    )


def _sha256(value: str, key: str, fail: Any) -> str:
    if len(value) != 64 or any(char not in "0123456789abcdef" for char in value):
        raise fail(f"{key} must be a sha256 in hex (64 characters 0-9 a-f), not {value!r}")
    return value


def pattern_in_recipe(regex: str) -> str:
    """How a recipe names a pre-tokenizer: its name if it has one (``gpt2``), else the regex."""
    return name_of_pattern(regex) or regex


def input_files(recipe: Recipe) -> CorpusFiles:
    """The recipe's input files, each checked to hold the content the recipe names (its sha256;
    the hashes are kept, and counting does not read the files twice to find them): RecipeError for
    a file that is missing or whose content differs."""
    paths = [item.path for item in recipe.inputs if isinstance(item, FileInput)]
    for path in paths:
        if not os.path.isfile(path):
            raise RecipeError(f"the recipe's input {path} is not a file")
    files = CorpusFiles(paths)
    if len(files.paths) != len(paths):
        raise RecipeError("the recipe lists an input file twice")
    for item, (_, digest, _) in zip(recipe.inputs, files.hashed()):
        assert isinstance(item, FileInput)
        if digest != item.sha256:
            raise RecipeError(f"the recipe's input {item.path} has changed: its sha256 is {digest}, the recipe's {item.sha256}")
    return files


def file_inputs(hashed: Sequence[tuple[os.PathLike[str] | str, str]]) -> tuple[FileInput, ...]:
    """The inputs of files already hashed (a path and its content's sha256 each), by absolute path."""
    return tuple(FileInput(os.path.abspath(os.fspath(path)), digest) for path, digest in hashed)

