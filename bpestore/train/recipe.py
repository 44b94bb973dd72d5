"""Training recipes: one plain value that holds everything that determines a training's merges and
vocabulary, so that a stored tokenizer can be rebuilt from it exactly.

A :class:`Recipe` names its inputs (files by path and the sha256 of their content, or a corpus the
store holds, by its sha256), its stages (each a pre-tokenizer and the vocab size it trains to; one,
or two for SuperBPE: see :mod:`bpestore.train.stages`), the special tokens and where their ids go,
``min_count``, the tie-break, the base it continues, if any, and for a parity-aware training
(:class:`Parity`) its languages, each with its own inputs and development text. How a training runs (threads,
progress, a Dask cluster, memory limits, the store's lock) is not part of it: it does not change
the merges.

Recipes are written as TOML (:meth:`Recipe.to_toml`) and read back (:func:`recipe_from_toml`,
:func:`load_recipe`), checked as they are read: an unknown key or a value of the wrong type is a
:class:`~bpestore.errors.RecipeError` of one line.
"""

from __future__ import annotations

import json
import math
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

ParityVariant = Literal["base", "window"]
"""How a parity-aware training chooses each merge's language: ``base`` (the worst compressed) or
``window`` (the same, passing over a language that took more than its share of the last merges)."""

PARITY_VARIANTS: tuple[str, ...] = get_args(ParityVariant)


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
class Language:
    """A language of a parity-aware training: its corpus (counted, and stored, as a corpus of its
    own) and its part of the parallel development set."""

    name: str
    inputs: tuple[Input, ...]
    dev: tuple[FileInput, ...] = ()
    """Its development text (the same content in every language), or none: see :class:`Parity`."""
    ratio: float | None = None
    """Its target compression ratio (instead of a development set)."""


@dataclass(frozen=True)
class Parity:
    """Parity-aware BPE (Foroutan et al., 2025; :mod:`bpestore.train.parity`): each merge is
    the most frequent pair of the language whose development text takes the most tokens (given
    a development set for every language); else, given a ratio for every language, of the one
    least compressed for its ratio; else of the one whose training text takes the most tokens."""

    languages: tuple[Language, ...]
    variant: ParityVariant = "base"
    window_size: int = 100
    """``window``: the merges looked back on."""
    alpha: float = 2.0
    """``window``: a language takes at most ``alpha`` / languages of them."""
    global_merges: int = 0
    """The first merges are plain BPE's on all the languages' text together."""

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain data (the ``[parity]`` table of a recipe)."""
        data: dict[str, Any] = {"variant": self.variant}
        if self.variant == "window":
            data |= {"window_size": self.window_size, "alpha": self.alpha}
        if self.global_merges:
            data["global_merges"] = self.global_merges
        data["languages"] = [
            {"name": language.name, "inputs": [_input_dict(item) for item in language.inputs]}
            | ({"dev": [_input_dict(item) for item in language.dev]} if language.dev else {})
            | ({} if language.ratio is None else {"ratio": language.ratio})
            for language in self.languages
        ]
        return data


def _input_dict(item: Input) -> dict[str, str]:
    return {"path": item.path, "sha256": item.sha256} if isinstance(item, FileInput) else {"corpus_sha256": item.corpus_sha256}


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
    parity: Parity | None = None
    """A parity-aware training's languages and settings (its ``inputs`` are then empty: each
    language has its own)."""

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
        return replace(self, stages=(*self.stages[:-1], last))

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
        if self.parity is None:
            data["inputs"] = [_input_dict(item) for item in self.inputs]
        else:
            data["parity"] = self.parity.to_dict()
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
            if key != "parity" and (not isinstance(value, list) or key == "special_tokens"):
                lines.append(f"{key} = {_toml_value(value)}")
        if "parity" in data:
            lines += ["", "[parity]"]
            lines.extend(f"{key} = {_toml_value(value)}" for key, value in data["parity"].items() if key != "languages")
            for language in data["parity"]["languages"]:
                lines += ["", "[[parity.languages]]"]
                lines.extend(f"{key} = {_toml_value(value)}" for key, value in language.items())
        for table in ("inputs", "stages"):
            for item in data.get(table, ()):
                lines.append("")
                lines.append(f"[[{table}]]")
                lines.extend(f"{key} = {_toml_value(value)}" for key, value in item.items())
        return "\n".join(lines) + "\n"


def _toml_value(value: object) -> str:
    """A TOML value: a basic string (JSON's escapes are TOML's, DEL aside), an integer, a finite
    float (``repr``: the shortest that reads back as the same float), a list of them, an inline
    table of them."""
    if isinstance(value, bool):
        raise TypeError("no booleans in a recipe")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"no {value} in a recipe")
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key} = {_toml_value(item)}" for key, item in value.items()) + "}"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    raise TypeError(f"no {type(value).__name__} in a recipe")


_TOP_KEYS = {"format", "base", "special_tokens", "special_tokens_at", "min_count", "tie_break", "inputs", "stages", "parity"}


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

    def tables(key: str, table: Mapping[str, Any] | None = None, context: str = "") -> list[Mapping[str, Any]]:
        value = (data if table is None else table)[key]
        if not isinstance(value, list) or not value or not all(isinstance(item, dict) for item in value):
            raise fail(f"{context}{key} must be a non-empty array of tables ([[{context}{key}]])")
        return value

    def read_inputs(items: list[Mapping[str, Any]], context: str) -> tuple[Input, ...]:
        inputs: list[Input] = []
        for number, item in enumerate(items, 1):
            where_item = f"{context}[{number}]."
            if "corpus_sha256" in item:
                keys(item, {"corpus_sha256"}, set(), where_item)
                inputs.append(StoredCorpusInput(_sha256(string(item, "corpus_sha256", where_item), where_item + "corpus_sha256", fail)))
            else:
                keys(item, {"path", "sha256"}, {"path", "sha256"}, where_item)
                inputs.append(FileInput(string(item, "path", where_item), _sha256(string(item, "sha256", where_item), where_item + "sha256", fail)))
        if any(isinstance(item, StoredCorpusInput) for item in inputs) and len(inputs) > 1:
            raise fail(f"a stored corpus is the only input of its {'recipe' if context == 'inputs' else 'language'} (grow it with `bpestore count add`)")
        return tuple(inputs)

    def positive(table: Mapping[str, Any], key: str, context: str) -> float:
        value = table[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise fail(f"{context}{key} must be a number, not {_kind(value)}")
        if not (math.isfinite(value) and value > 0):
            raise fail(f"{context}{key} must be a finite number above 0, not {value}")
        return float(value)

    def read_parity(table: object) -> Parity:
        if not isinstance(table, dict):
            raise fail(f"parity must be a table ([parity]), not {_kind(table)}")
        keys(table, {"variant", "window_size", "alpha", "global_merges", "languages"}, {"languages"}, "parity.")
        variant = string(table, "variant", "parity.") if "variant" in table else "base"
        if variant not in PARITY_VARIANTS:
            raise fail(f"parity.variant must be one of {', '.join(map(repr, PARITY_VARIANTS))}, not {variant!r}")
        if variant != "window" and ("window_size" in table or "alpha" in table):
            raise fail("parity.window_size and parity.alpha are the window variant's: give them with variant = \"window\"")
        languages: list[Language] = []
        for index, item in enumerate(tables("languages", table, "parity."), 1):
            context = f"parity.languages[{index}]."
            keys(item, {"name", "inputs", "dev", "ratio"}, {"name", "inputs"}, context)
            name = string(item, "name", context)
            if not name or any(char.isspace() or char == "=" for char in name):
                raise fail(f"{context}name must be a name without spaces or '=', not {name!r}")
            if name in [language.name for language in languages]:
                raise fail(f"{context}name: the language {name!r} is named twice")
            dev = read_inputs(tables("dev", item, context), context + "dev") if "dev" in item else ()
            if any(isinstance(entry, StoredCorpusInput) for entry in dev):
                raise fail(f"{context}dev names files (path and sha256), not a stored corpus")
            ratio = positive(item, "ratio", context) if "ratio" in item else None
            languages.append(Language(name, read_inputs(tables("inputs", item, context), context + "inputs"), dev, ratio))  # type: ignore[arg-type]
        with_dev = sum(bool(language.dev) for language in languages)
        with_ratio = sum(language.ratio is not None for language in languages)
        if with_dev not in (0, len(languages)) or with_ratio not in (0, len(languages)):
            raise fail("every language has a development text (dev), or none has; every language has a ratio, or none has")
        if with_dev and with_ratio:
            raise fail("the languages have a development text or a ratio, not both")
        return Parity(
            tuple(languages), variant,  # type: ignore[arg-type]
            integer(table, "window_size", "parity.", 1) if "window_size" in table else 100,
            positive(table, "alpha", "parity.") if "alpha" in table else 2.0,
            integer(table, "global_merges", "parity.", 0) if "global_merges" in table else 0,
        )

    if not isinstance(data, Mapping):
        raise fail(f"a recipe is a table, not {_kind(data)}")
    keys(data, _TOP_KEYS, {"stages"}, "")
    version = integer(data, "format", "", 1) if "format" in data else 1
    if version != 1:
        raise fail(f"format {version} is newer than this bpestore's recipes (format 1)")
    parity = read_parity(data["parity"]) if "parity" in data else None
    if parity is not None and "inputs" in data:
        raise fail("a parity-aware recipe's inputs are its languages' (parity.languages): no [[inputs]] with [parity]")
    if parity is None and "inputs" not in data:
        raise fail("inputs is missing")
    inputs = read_inputs(tables("inputs"), "inputs") if parity is None else ()
    stages: list[Stage] = []
    for number, item in enumerate(tables("stages"), 1):
        context = f"stages[{number}]."
        keys(item, {"pattern", "vocab_size", "max_words"}, {"vocab_size"}, context)
        pattern = string(item, "pattern", context) if "pattern" in item else "gpt2"
        max_words = integer(item, "max_words", context, 1) if "max_words" in item else None
        stages.append(Stage(integer(item, "vocab_size", context, 1), pattern, max_words))
    if len(stages) > 2:
        raise fail(f"{len(stages)} stages: this bpestore trains recipes of one stage, or two (SuperBPE's)")
    if parity is not None and len(stages) != 1:
        raise fail("a parity-aware recipe has one stage")
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
    if parity is not None and base is not None:
        raise fail("a parity-aware recipe starts from the bytes: no base")
    return Recipe(
        inputs, tuple(stages), special_tokens, at, min_count, tie_break, base, version, parity,  # type: ignore[arg-type]
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

