"""Reshaping a tokenizer: a model derived from a model, with the map of its ids.

A smaller tokenizer is made from a trained one without training again, and a model's embedding
matrix follows it through an :class:`IdMap` (old id -> new id, -1 for a dropped token):

- :func:`trim` keeps the first merges (pair rule) or the lowest-ranked tokens (token rule, as
  tiktoken's: the id is the rank) up to a vocab size; trimming a tokenizer trained to N tokens to M
  gives exactly the tokenizer trained to M from the same counts.
- :func:`drop_unused` removes the tokens a corpus never uses and the merges only they need: the
  corpus encodes to the same tokens (mapped), and every text still encodes.
- :func:`add_tokens` adds user-defined tokens (Hugging Face's non-special added tokens: encoded
  whole, but ordinary) at new ids after the largest; its map is the identity on the old ids, and
  names the added tokens' ids (the embedding matrix grows by a row for each new one).

The tokens kept keep their order: new ids are the old ones compacted (with CS336's special tokens
first the kept ids do not change; with them last, they move down). :func:`remap` applies a map
to an encoded dataset.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .atomic import check_output_target, remove_stale_partials, temporary_name
from .errors import OutputError
from .model import MAX_TOKEN_ID, BPEModel, check_added_tokens, shown
from .pretokenize.corpus import iter_text_blocks

__all__ = ["IdMap", "add_tokens", "drop_unused", "load_id_map", "remap", "trim"]


@dataclass(frozen=True, eq=False)  # (an array does not compare to one bool)
class IdMap:
    """The ids of a reshaped tokenizer: ``array[old_id]`` is the token's new id, or -1 if it was
    dropped (or no token had that id). ``source``/``target``: the refs, when stored. A model's
    embedding matrix follows with ``embeddings[array >= 0]`` (the kept rows, in their new order).
    ``added``: the tokens :func:`add_tokens` added, with their ids (those at no old id are new rows
    of the embedding matrix); empty for a trim. ``expansions``: for a token a trim dropped, the new
    ids it splits into (its merge, undone until every part is kept): :func:`remap` writes those in
    its place, which is exactly what the trimmed tokenizer encodes the text to (see :func:`trim`)."""

    array: npt.NDArray[np.int64]
    source: str | None = None
    target: str | None = None
    _dropped: tuple[int, ...] = field(default=(), repr=False)
    added: dict[str, int] = field(default_factory=dict)
    expansions: dict[int, tuple[int, ...]] = field(default_factory=dict, repr=False)

    @property
    def dropped(self) -> list[int]:
        """The old ids of the tokens dropped (ids no token had are not among them)."""
        return list(self._dropped)

    @property
    def new_ids(self) -> list[int]:
        """The ids no old token maps to: the added tokens' that are new rows, in order."""
        old = {int(new) for new in self.array[self.array >= 0]}
        return sorted(token_id for token_id in set(self.added.values()) if token_id not in old)

    @property
    def new_vocab_size(self) -> int:
        return int(np.count_nonzero(self.array >= 0)) + len(self.new_ids)

    def __repr__(self) -> str:
        added = f", {len(self.new_ids)} added" if self.added else ""
        return f"IdMap({self.source} -> {self.target}: {int(np.count_nonzero(self.array >= 0))} ids kept, {len(self._dropped)} dropped{added})"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``{"from": ref, "to": ref, "map": {old: new}, "dropped": [old...]}``,
        and ``"added": {token: id}`` for :func:`add_tokens`'s."""
        kept = np.flatnonzero(self.array >= 0)
        data: dict[str, Any] = {
            "from": self.source,
            "to": self.target,
            "map": {str(old): int(self.array[old]) for old in kept.tolist()},
            "dropped": self.dropped,
        }
        if self.added:
            data["added"] = dict(self.added)
        if self.expansions:
            data["expansions"] = {str(old): list(new) for old, new in sorted(self.expansions.items())}
        # Checksums, so that an edited map (or a .npy that is not the one written beside it) is
        # refused instead of remapping ids wrongly without a word.
        data["npy_sha256"] = _array_checksum(self.array)
        data["sha256"] = _content_checksum(data)
        return data

    def with_refs(self, source: str | None, target: str | None) -> IdMap:
        return replace(self, source=source, target=target)

    def apply(self, ids: npt.ArrayLike) -> npt.NDArray[Any]:
        """``remap(self, ids)``."""
        return remap(self, ids)


def _id_map(old_ids: Iterable[int], kept: set[int]) -> tuple[dict[int, int], IdMap]:
    """old -> new for the ``kept`` ids (their order kept, compacted), and the IdMap of it."""
    old_ids = sorted(old_ids)
    new_of = {old: new for new, old in enumerate(sorted(kept))}
    array = np.full(old_ids[-1] + 1, -1, dtype=np.int64)
    for old, new in new_of.items():
        array[old] = new
    return new_of, IdMap(array, _dropped=tuple(old for old in old_ids if old not in kept))


def _derived(model: BPEModel, kept: set[int], merges: list[tuple[bytes, bytes]]) -> tuple[BPEModel, IdMap]:
    # The ids beside the vocab (aliases) are kept and renumbered with the kept tokens, and the
    # post-processor's ids follow their tokens: every id the new tokenizer gives or decodes is in
    # the map.
    new_of, id_map = _id_map([*model.vocab, *model.aliases], kept | set(model.aliases))
    vocab = {new: model.vocab[old] for old, new in new_of.items() if old in model.vocab}
    pipeline = {**model.pipeline, "aliases": {new_of[old]: data for old, data in model.aliases.items()}}
    if model.post_processor is not None:
        pipeline["post_processor"] = model.post_processor.with_ids(new_of)
    return BPEModel(vocab, merges, model.special_tokens, model.pattern, model.merge_rule, model.added_tokens, **pipeline), id_map


def _fixed_ids(model: BPEModel) -> set[int]:
    """The ids every reshaped tokenizer keeps: the 256 bytes', the special tokens' and the added
    tokens' (chosen by someone, as special tokens are: a trim or a corpus does not drop them)."""
    byte_ids = {token_id for token_id, token in model.vocab.items() if len(token) == 1}
    return byte_ids | set(model.whole_ids.values())


def _check_size(model: BPEModel, vocab_size: object) -> int:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise TypeError(f"vocab_size must be an int, not {type(vocab_size).__name__} ({vocab_size!r})")
    fixed = len(_fixed_ids(model))
    if vocab_size < fixed:
        kinds = "special and added" if model.added_tokens else "special"
        raise ValueError(
            f"cannot trim to {vocab_size} tokens: a trim keeps the 256 bytes and the {fixed - 256} {kinds} "
            f"token{'s' if fixed - 256 != 1 else ''}, {fixed} tokens"
        )
    if vocab_size > model.vocab_size:
        raise ValueError(f"cannot trim to {vocab_size} tokens: the tokenizer has only {model.vocab_size}")
    return vocab_size


def trim(model: BPEModel, vocab_size: int) -> tuple[BPEModel, IdMap]:
    """``model`` cut down to at most ``vocab_size`` tokens, and the map of its ids.

    Pair rule (trained here, GPT-2, Hugging Face): the longest prefix of the merges that fits,
    with the 256 bytes, the special tokens and the tokens the kept merges make (and use); so
    trimming a tokenizer trained to N tokens to M gives exactly the one trained to M from the
    same counts. Tokens that no merge makes (added to an imported vocab, say) are dropped: the
    result can then be smaller than ``vocab_size``. Token rule (tiktoken's files, where the id is
    the rank): the bytes, the special tokens and the lowest-ranked other tokens, as many as fit,
    which is what tiktoken's ranks cut short encode with; the merges kept are those whose tokens
    are all kept.

    Raises:
        ValueError: ``vocab_size`` is below the 256 bytes and the special tokens, or above the
            tokenizer's own size.
        TypeError: ``vocab_size`` is not an int.
    """
    _check_size(model, vocab_size)
    kept = _fixed_ids(model)
    id_of = {token: token_id for token_id, token in model.vocab.items()}
    if model.merge_rule == "pair":
        merges: list[tuple[bytes, bytes]] = []
        for left, right in model.merges:
            more = {id_of[left], id_of[right], id_of[left + right]} - kept
            if len(kept) + len(more) > vocab_size:
                break
            kept |= more
            merges.append((left, right))
        small, id_map = _derived(model, kept, merges)
        return small, replace(id_map, expansions=_expansions(model, id_map))
    room = vocab_size - len(kept)
    kept |= set(sorted(set(model.vocab) - kept)[:room])
    tokens = {model.vocab[token_id] for token_id in kept}
    merges = [(left, right) for left, right in model.merges if {left, right, left + right} <= tokens]
    return _derived(model, kept, merges)


def _expansions(model: BPEModel, id_map: IdMap) -> dict[int, tuple[int, ...]]:
    """For each token of a pair-rule ``model`` that a trim dropped and a merge makes, the new ids
    of its parts: its merge undone, and again for each part that was dropped too. A tokenizer
    trained by BPE merges in rank order (each merge's parts are made by earlier ones), so its
    trimmed run is the full run stopped before the first dropped merge: every dropped token of an
    encoding then stands exactly for these parts (tested against encoding with the trimmed
    tokenizer)."""
    made_by: dict[bytes, tuple[bytes, bytes]] = {}
    for left, right in model.merges:
        made_by.setdefault(left + right, (left, right))  # a token made twice: its first merge
    id_of = {token: token_id for token_id, token in model.vocab.items()}
    memo: dict[int, tuple[int, ...] | None] = {}

    def parts(old: int) -> tuple[int, ...] | None:
        if id_map.array[old] >= 0:
            return (int(id_map.array[old]),)
        if old not in memo:
            memo[old] = None  # (no merge makes a token from itself; this only guards the recursion)
            merge = made_by.get(model.vocab[old])
            if merge is not None:
                left, right = (parts(id_of[part]) for part in merge)
                memo[old] = None if left is None or right is None else left + right
        return memo[old]

    return {old: expanded for old in id_map.dropped if (expanded := parts(old)) is not None}


def used_ids(model: BPEModel, corpus: Iterable[str | os.PathLike[str]]) -> npt.NDArray[np.bool_]:
    """Which ids encoding ``corpus`` (texts; or, for ``os.PathLike`` items, UTF-8 files read in
    blocks; CorpusDecodeError names a bad byte's offset) uses: a boolean array indexed by id."""
    from .encode.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_model(model)
    used = np.zeros(max(model.vocab) + 1, dtype=np.bool_)
    for item in corpus:
        if isinstance(item, str):
            used[np.asarray(tokenizer.encode(item), dtype=np.int64)] = True
            continue
        for block in tokenizer.encode_blocks(iter_text_blocks(item)):
            used[block] = True
    return used


def _formed_by_token_rule(token: bytes, rank: dict[bytes, int]) -> set[bytes]:
    """The tokens that encoding ``token``'s bytes by the token rule forms on the way (tiktoken's:
    the adjacent pair whose concatenation ranks lowest merges first, the leftmost of equals)."""
    parts = [bytes([byte]) for byte in token]
    formed = set(parts)
    while len(parts) > 1:
        best: tuple[int, int] | None = None
        for index in range(len(parts) - 1):
            joined_rank = rank.get(parts[index] + parts[index + 1])
            if joined_rank is not None and (best is None or joined_rank < best[0]):
                best = (joined_rank, index)
        if best is None:
            break
        index = best[1]
        parts[index : index + 2] = [parts[index] + parts[index + 1]]
        formed.add(parts[index])
    return formed


def drop_unused(model: BPEModel, corpus: Iterable[str | os.PathLike[str]]) -> tuple[BPEModel, IdMap]:
    """``model`` without the tokens that encoding ``corpus`` (texts, or paths of UTF-8 files)
    never uses, nor the merges only they need; and the map of its ids.

    Kept: the 256 bytes, the special tokens, the tokens the corpus uses and every token they are
    made from (pair rule: the parts of each merge making a kept token, recursively; token rule:
    the tokens formed on the way when the token's bytes are encoded). Every merge the corpus's
    encoding made is kept, so the corpus encodes to the same tokens (``remap(map, old ids)``),
    and any text still encodes (into smaller pieces where a dropped token was) and decodes.
    """
    used = used_ids(model, corpus)
    kept = _fixed_ids(model)
    wanted = [int(token_id) for token_id in np.flatnonzero(used)]
    id_of = {token: token_id for token_id, token in model.vocab.items()}
    if model.merge_rule == "pair":
        parts_of: dict[int, list[int]] = {}
        for left, right in model.merges:
            parts_of.setdefault(id_of[left + right], []).extend((id_of[left], id_of[right]))
        stack = wanted + list(kept)
        kept = set()
        while stack:
            token_id = stack.pop()
            if token_id not in kept:
                kept.add(token_id)
                stack.extend(parts_of.get(token_id, ()))
        merges = [(left, right) for left, right in model.merges if id_of[left + right] in kept]
        return _derived(model, kept, merges)
    specials = set(model.whole_ids.values())  # (cut out whole: never formed by merges)
    for token_id in wanted:
        kept.add(token_id)
        if token_id not in specials:
            kept |= {id_of[token] for token in _formed_by_token_rule(model.vocab[token_id], id_of)}
    tokens = {model.vocab[token_id] for token_id in kept}
    merges = [(left, right) for left, right in model.merges if {left, right, left + right} <= tokens]
    return _derived(model, kept, merges)


def add_tokens(model: BPEModel, tokens: Iterable[str]) -> tuple[BPEModel, IdMap]:
    """``model`` with the added tokens ``tokens`` (:attr:`BPEModel.added_tokens`: always encoded
    whole, but ordinary), and the map of its ids: the identity on the old ids, with ``added``
    naming each token's id. A token new to the vocab gets the next id after the largest, in the
    order given; one whose bytes are already a token of the vocab keeps that token's id (and is
    from now on encoded whole), as does one that is already an added token.

    Raises:
        ValueError: no tokens, an empty one, one given twice, one that is a special token of
            ``model``, or only tokens that are already added tokens (nothing would change).
        TypeError: ``tokens`` is one string, or holds something else than strings.
    """
    tokens = check_added_tokens(tokens, model.special_tokens, repeats="refuse")
    if not tokens:
        raise ValueError("give at least one token to add")
    if set(tokens) <= set(model.added_tokens):
        listed = ", ".join(map(shown, tokens))
        what = "is already an added token" if len(tokens) == 1 else "are already added tokens"
        raise ValueError(f"nothing to add: {listed} {what} of the tokenizer")
    new = BPEModel(
        model.vocab, model.merges, model.special_tokens, model.pattern, model.merge_rule, [*model.added_tokens, *tokens], **model.pipeline
    )
    array = np.full(max(model.vocab) + 1, -1, dtype=np.int64)
    old_ids = np.fromiter(model.vocab, dtype=np.int64, count=len(model.vocab))
    array[old_ids] = old_ids
    return new, IdMap(array, added={token: new.added_ids[token] for token in tokens})


# -- applying and storing maps -------------------------------------------------------------------


def remap(id_map: IdMap, ids: npt.ArrayLike) -> npt.NDArray[Any]:
    """``ids`` (an encoded dataset, of the old tokenizer) as the new tokenizer's ids, vectorized;
    the dtype is the smallest of uint16 and uint32 that holds every new id (``encode``'s rule).

    A token a trim dropped is written as the new ids of its parts (:attr:`IdMap.expansions`), so
    the result can be longer than ``ids``: exactly what the trimmed tokenizer encodes the text to.

    Raises:
        ValueError: an id the map does not have (outside it, or a token it dropped and cannot
            expand), naming the id and its position in ``ids``.
    """
    old = np.asarray(ids)
    if old.size == 0:
        old = old.astype(np.int64)  # (an empty list is an array of floats)
    if old.dtype.kind not in "iu":
        raise ValueError(f"token ids must be integers, not {old.dtype}")
    old = old.reshape(-1)
    array = id_map.array
    outside = (old < 0) | (old >= len(array))
    if outside.any():
        position = int(np.argmax(outside))
        raise ValueError(f"unknown token id {int(old[position])} at position {position}: the map has ids 0..{len(array) - 1}")
    dtype = np.uint16 if int(array.max(initial=-1)) < 1 << 16 else np.uint32
    new = array[old]
    dropped = new < 0
    if not dropped.any():
        result: npt.NDArray[Any] = new.astype(dtype)
        return result
    expandable = np.zeros(len(array), dtype=bool)
    expandable[list(id_map.expansions)] = True
    unexpandable = dropped & ~expandable[old]
    if unexpandable.any():
        position = int(np.argmax(unexpandable))
        raise ValueError(
            f"token id {int(old[position])} at position {position} has no new id: "
            f"{_described(id_map)} dropped it"
        )
    # Every old id as a run in one flat table of new ids (a kept id: its new id; a dropped one:
    # its parts'), and the output as the runs of ``old`` one after the other.
    lengths = np.ones(len(array), dtype=np.int64)
    for token_id, parts in id_map.expansions.items():
        lengths[token_id] = len(parts)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    flat = np.repeat(array, lengths)
    for token_id, parts in id_map.expansions.items():
        flat[starts[token_id] : starts[token_id] + len(parts)] = parts
    run_lengths = lengths[old]
    ends = np.cumsum(run_lengths)
    positions = np.arange(int(ends[-1])) - np.repeat(ends - run_lengths, run_lengths) + np.repeat(starts[old], run_lengths)
    expanded: npt.NDArray[Any] = flat[positions].astype(dtype)
    return expanded


def _described(id_map: IdMap) -> str:
    if id_map.source and id_map.target:
        return f"the map from {id_map.source} to {id_map.target}"
    return "the map"


def write_id_map(id_map: IdMap, prefix: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write ``PREFIX.npy`` (the int64 array) and ``PREFIX.json`` (:meth:`IdMap.to_dict`), each
    appearing only once complete; returns their paths."""
    with id_map_writer(prefix, id_map) as writer:
        return writer.finish(id_map.target)


MapPrefix = str | os.PathLike[str] | Callable[[str], str | os.PathLike[str]]
"""Where an id map goes: a path prefix, or a function of the new tokenizer's ref that gives one."""


class id_map_writer:  # noqa: N801 - a context manager, used like a function
    """An id map's two files, written beside their names and renamed into place when the block
    completes, or removed if it fails: ``with id_map_writer(prefix, id_map) as writer: (store the
    tokenizer); writer.finish(new_ref)``. The ``.npy`` is written on entry (before the tokenizer
    is stored: a missing directory or a full disk stops everything first), the ``.json``, which
    names the new ref, by :meth:`finish`. ``prefix`` may be a function of the new ref."""

    def __init__(self, prefix: MapPrefix, id_map: IdMap, is_stored: Callable[[str], bool] | None = None) -> None:
        self._prefix = prefix
        self._id_map = id_map
        # Whether a ref was stored after all: an interrupt (Ctrl-C) can land after the commit that
        # followed place(), and then the files must stay with the tokenizer they belong to.
        self._is_stored = is_stored
        self._ref: str | None = None
        self._temporaries: list[Path] = []
        self._paths: tuple[Path, Path] | None = None
        self._placed: list[Path] = []  # files already renamed into place by place()

    def _prefix_for(self, ref: str) -> Path:
        return Path(self._prefix(ref) if callable(self._prefix) else self._prefix)

    def __enter__(self) -> id_map_writer:
        directory = self._prefix_for("new").parent
        if not directory.is_dir():
            raise FileNotFoundError(errno.ENOENT, f"cannot write the id map, no directory {directory}", str(directory))
        for suffix in (".npy", ".json"):  # (what a writer killed with SIGKILL left: its process is gone)
            remove_stale_partials(directory / f"idmap{suffix}")
        self._temporaries = [directory / temporary_name(f"idmap{suffix}") for suffix in (".npy", ".json")]
        try:
            with open(self._temporaries[0], "xb") as file:
                np.save(file, self._id_map.array, allow_pickle=False)
        except BaseException:
            self._remove_temporaries()
            raise
        return self

    def finish(self, new_ref: str | None) -> tuple[Path, Path]:
        """Write the ``.json`` (``new_ref`` as ``to``); returns the two paths the files will have."""
        prefix = self._prefix_for(new_ref or "new")
        with open(self._temporaries[1], "x", encoding="utf-8") as file:
            json.dump(self._id_map.with_refs(self._id_map.source, new_ref).to_dict(), file)
            file.write("\n")
        self._paths = (Path(f"{prefix}.npy"), Path(f"{prefix}.json"))
        return self._paths

    def place(self, new_ref: str) -> None:
        """:meth:`finish`, then rename both files into place now (not on leaving the block); if
        the block then fails, they are removed again. For the last step of a transaction that
        stores the tokenizer: a map that cannot be put in place stops the tokenizer too."""
        paths = self.finish(new_ref)
        self._ref = new_ref
        for temporary, path in zip(self._temporaries, paths):
            try:
                check_output_target(path)
                if path.is_dir():
                    raise IsADirectoryError(errno.EISDIR, "Is a directory")
                os.replace(temporary, path)
            except OSError as error:
                raise OutputError(error.errno, f"{error.strerror}; nothing was stored, neither the tokenizer nor its id map", str(path)) from None
            self._placed.append(path)

    def _stored_after_all(self) -> bool:
        if self._is_stored is None or self._ref is None:
            return False
        try:
            return self._is_stored(self._ref)
        except Exception:  # cannot tell: keep the map (it names its tokenizer) rather than lose it
            return True

    def _remove_temporaries(self) -> None:
        for temporary in self._temporaries:
            temporary.unlink(missing_ok=True)

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is not None and self._placed and not self._stored_after_all():  # no tokenizer: its map goes too
            for path in self._placed:
                path.unlink(missing_ok=True)
            self._placed.clear()
        if self._placed:
            self._remove_temporaries()
            return
        try:
            if exc_type is None and self._paths is not None:
                for temporary, path in zip(self._temporaries, self._paths):
                    try:
                        os.replace(temporary, path)
                    except OSError as error:
                        raise OutputError(error.errno, error.strerror, str(path)) from None
        finally:
            self._remove_temporaries()


def _check_id_range(path: Path, ids: list[int], entries: int) -> None:
    """ValueError (naming ``path``) for an id above the largest token id, or old ids so sparse
    that the map's array would be mostly holes: a map lists every old id of a vocabulary, so a
    huge id among a few entries is a damaged or hostile file, not a map to allocate an array for."""
    largest = max(ids, default=0)
    if largest > MAX_TOKEN_ID:
        raise ValueError(f"{path}: not an id map (id {largest} is above the largest token id, {MAX_TOKEN_ID})")
    if largest >= 16 * entries + (1 << 16):
        raise ValueError(f"{path}: not an id map (ids up to {largest} for only {entries} entries)")


def _array_checksum(array: npt.NDArray[Any]) -> str:
    return hashlib.sha256(np.ascontiguousarray(array, dtype="<i8").tobytes()).hexdigest()


def _content_checksum(data: dict[str, Any]) -> str:
    """sha256 of a map's JSON form without its own checksum, in one canonical spelling."""
    content = {key: value for key, value in data.items() if key != "sha256"}
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not an id")


def _an_id(value: object) -> int:
    """An id as a JSON map holds it: an integer (a number with a fraction, true/false, or a string
    of digits is not one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{value!r} is not an integer id")
    return value


def _read_map_json(path: Path) -> Any:
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError(f"{path}: not an id map (JSON nested too deeply)") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not an id map ({error})") from None
    if not isinstance(data, dict) or not isinstance(data.get("map"), dict):
        raise ValueError(f"{path}: not an id map (no \"map\" object)")
    if "sha256" in data and data["sha256"] != _content_checksum(data):
        raise ValueError(f"{path}: its content does not match its checksum: the map was edited or damaged; write it again (--map-out)")
    return data


def load_id_map(path: str | os.PathLike[str]) -> IdMap:
    """An id map from its ``.npy`` (the array) or ``.json`` file; ValueError in one line naming
    the file for anything else."""
    path = Path(path)
    if path.suffix == ".json":
        data = _read_map_json(path)
        try:
            pairs = {int(old): _an_id(new) for old, new in data["map"].items()}
            dropped = [_an_id(old) for old in data.get("dropped", [])]
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise ValueError(f"{path}: not an id map ({type(error).__name__}: {error})") from None
        if any(old < 0 for old in [*pairs, *dropped]) or any(new < 0 for new in pairs.values()):
            raise ValueError(f"{path}: not an id map (negative ids)")
        _check_id_range(path, [*pairs, *dropped, *pairs.values()], len(pairs) + len(dropped))
        try:
            added = {str(token): _an_id(token_id) for token, token_id in dict(data.get("added") or {}).items()}
            expansions = {
                int(old): tuple(_an_id(new) for new in parts) for old, parts in dict(data.get("expansions") or {}).items()
            }
        except (ValueError, TypeError) as error:
            raise ValueError(f"{path}: not an id map (added or expansions: {type(error).__name__}: {error})") from None
        array = np.full(max([*pairs, *dropped], default=-1) + 1, -1, dtype=np.int64)
        for old, new in pairs.items():
            array[old] = new
        kept = set(pairs.values())
        if any(old not in dropped or not parts or not set(parts) <= kept for old, parts in expansions.items()):
            raise ValueError(f"{path}: not an id map (an expansion of an id that is not dropped, or into ids no token maps to)")
        return IdMap(array, data.get("from"), data.get("to"), tuple(dropped), added, expansions)
    from .encode.files import read_npy_ids

    raw = read_npy_ids(path)
    if raw.dtype.kind not in "iu":
        raise ValueError(f"{path}: not an id map (its ids are {raw.dtype}, not integers)")
    if raw.size and raw.dtype.kind == "u" and int(raw.max()) > MAX_TOKEN_ID:  # (before int64 would wrap them)
        raise ValueError(f"{path}: not an id map (id {int(raw.max())} is above the largest token id, {MAX_TOKEN_ID})")
    array = raw.astype(np.int64)
    if (array < -1).any():
        raise ValueError(f"{path}: not an id map (ids below -1)")
    if array.size and int(array.max()) > MAX_TOKEN_ID:
        raise ValueError(f"{path}: not an id map (id {int(array.max())} is above the largest token id, {MAX_TOKEN_ID})")
    beside = path.with_suffix(".json")
    if beside.is_file():  # the map's JSON, written with it, holds the array's checksum
        written = _read_map_json(beside).get("npy_sha256")
        if written is not None and written != _array_checksum(array):
            raise ValueError(f"{path}: its content does not match the checksum in {beside.name}: the map was edited or damaged")
    return IdMap(array, _dropped=tuple(np.flatnonzero(array < 0).tolist()))
