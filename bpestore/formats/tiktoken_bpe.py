"""tiktoken's ``.tiktoken`` files: one ``base64(token) rank`` per line, optionally gzip'd.

Neither the pre-tokenizer pattern nor the special tokens are in the file, so importing takes them
as arguments; :data:`KNOWN_ENCODINGS` has OpenAI's by name. tiktoken merges by the rank of the
resulting *token*, so an imported tokenizer records merge rule ``"token"``; a merges list is still
reconstructed (for export, ``show`` and ``diff``), and tokens that no pair merge reaches are counted.
Encoding needs no merges: a tokenizer read from Python reconstructs them only when asked for them
(:meth:`BPEModel.with_derived_merges`), so it loads in a fraction of the time.
"""

from __future__ import annotations

import base64
import gzip
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ..engine import pair_merges_from_ranks as pair_merges_from_ranks_in_engine
from ..engine import read_tiktoken
from ..errors import FormatError
from ..model import MAX_TOKEN_ID, BPEModel, Merges, check_pattern
from ..pretokenize.patterns import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN, pattern_named
from ..progress import progress_bar
from .registry import Format, ImportCommand, Imported, ImportOption, added_tokens_note, build_model, register, resolved


@dataclass(frozen=True)
class KnownEncoding:
    pattern: str
    special_tokens: dict[str, int]


# tiktoken's r50k/p50k pattern is written with possessive quantifiers and `\s++$|...|\s`; it
# matches exactly what GPT2_PATTERN matches, which the fast pre-tokenizer path knows.
KNOWN_ENCODINGS: dict[str, KnownEncoding] = {
    "r50k_base": KnownEncoding(GPT2_PATTERN, {"<|endoftext|>": 50256}),
    "gpt2": KnownEncoding(GPT2_PATTERN, {"<|endoftext|>": 50256}),
    "p50k_base": KnownEncoding(GPT2_PATTERN, {"<|endoftext|>": 50256}),
    "cl100k_base": KnownEncoding(
        CL100K_PATTERN,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
    "o200k_base": KnownEncoding(O200K_PATTERN, {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}),
}


def read_ranks(path: str | os.PathLike[str]) -> dict[bytes, int]:
    """Token bytes -> rank from a ``.tiktoken`` file (plain or gzip'd)."""
    return {token: rank for rank, token in read_vocab(path).items()}


def read_vocab(path: str | os.PathLike[str]) -> dict[int, bytes]:
    """Rank -> token bytes from a ``.tiktoken`` file (plain or gzip'd), in the file's order.

    The engine reads it (``read_tiktoken``, in one pass): one ``base64(token) rank`` per line
    (base64 as ``b64decode(validate=True)`` reads it), blank lines skipped, ranks in ASCII digits
    from 0 to ``MAX_TOKEN_ID``, no token and no rank twice; FormatError naming the file and the
    first line that breaks a rule."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as error:
            raise FormatError(f"{path}: looks gzip'd but cannot be decompressed ({error})") from None
    try:
        return read_tiktoken(data, f"{path}")
    except ValueError as error:
        raise FormatError(str(error)) from None


def write_ranks(path: str | os.PathLike[str], vocab: dict[int, bytes], special_ids: set[int]) -> int:
    """Write every non-special token as ``base64(token) id``, ordered by id; returns how many."""
    lines = [
        base64.b64encode(token) + b" " + str(token_id).encode()
        for token_id, token in sorted(vocab.items())
        if token_id not in special_ids
    ]
    Path(path).write_bytes(b"\n".join(lines) + b"\n")
    return len(lines)


def pair_merges_from_ranks(
    ranks: Mapping[bytes, int], on_tokens: Callable[[int], object] | None = None
) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
    """Reconstruct a merges list from token ranks (a tiktoken vocabulary), in the engine.

    For each multi-byte token, in rank order, apply tiktoken's rule to its bytes with only the
    tokens ranked below it; if that ends in exactly two tokens, they are the merge that makes it.
    Returns the merges and the tokens that no pair merge reaches; ``on_tokens(n)`` is told of
    each n more tokens done (for a progress bar)."""
    return pair_merges_from_ranks_in_engine(dict(ranks), on_tokens)


def resolve_pattern(pattern: str, path: str | os.PathLike[str]) -> tuple[str, dict[str, int]]:
    """A well-known encoding name -> (its regex, its special tokens); anything else is a regex,
    which must be a pre-tokenizer pattern the engine accepts (FormatError naming ``path`` if not,
    before the merges are reconstructed). The engine is the one to ask: compiling the pattern
    with Python's ``regex`` module would hang on ``a{99999999}``."""
    known = KNOWN_ENCODINGS.get(pattern)
    if known is not None:
        return known.pattern, dict(known.special_tokens)
    try:
        pattern_named(pattern)  # a misspelt name ('cl100k') is refused before it is taken for a regex
    except ValueError as error:
        raise FormatError(f"--{error}") from None
    try:
        check_pattern(pattern)
    except ValueError as error:
        names = ", ".join(KNOWN_ENCODINGS)
        raise FormatError(f"{path}: --pattern {pattern!r} is not a known pre-tokenizer ({names}); as a regex: {error}") from None
    return pattern, {}


def encoding_named_by(path: str | os.PathLike[str]) -> str | None:
    """The well-known encoding a file is named after (``cl100k_base.tiktoken``,
    ``o200k_base.tiktoken.gz``, ``r50k_base``: what tiktoken's own files are called), or None.

    >>> encoding_named_by("/data/cl100k_base.tiktoken"), encoding_named_by("mine.tiktoken")
    ('cl100k_base', None)
    """
    stem = Path(path).name.split(".", 1)[0]
    return stem if stem in KNOWN_ENCODINGS else None


def _special_ids(given: Mapping[str, int | None], defaults: dict[str, int], vocab: Mapping[int, bytes]) -> dict[str, int]:
    """Each special token's id: the one given (``TOKEN=ID``), else the known encoding's id for it,
    else the id of the file's token of its bytes, else the next id after the file's tokens and
    the ids already given (in the order given)."""
    in_file = {}
    if any(token_id is None and text not in defaults for text, token_id in given.items()):
        in_file = {token: token_id for token_id, token in vocab.items()}
    taken = {token_id for token_id in given.values() if token_id is not None} | {
        defaults[text] for text, token_id in given.items() if token_id is None and text in defaults
    }
    next_id = max([*vocab, *taken], default=-1) + 1
    specials = {}
    for text, token_id in given.items():
        if token_id is None:
            token_id = defaults.get(text, in_file.get(text.encode("utf-8")))
        if token_id is None:
            token_id, next_id = next_id, next_id + 1
        specials[text] = token_id
    return specials


def read(
    path: str | os.PathLike[str], pattern: str | None = None, special_tokens: Mapping[str, int | None] | None = None, *, progress: bool = False
) -> Imported:
    """A ``.tiktoken`` file. ``pattern`` is a well-known encoding name (which also brings its
    special tokens, unless ``special_tokens`` is given) or a regex; None: the encoding the file is
    named after (``cl100k_base.tiktoken``, see :func:`encoding_named_by`). ``special_tokens``:
    token -> id, or -> None for the known encoding's id for it, else the next free id.

    Reconstructing the merges of a big vocabulary takes longer than the rest of reading it, and
    encoding does not need them: without ``progress`` they are reconstructed when first asked
    for (``model.merges``, and the note saying how many there are); with it (``bpestore import``,
    which stores them) they are reconstructed now, under a progress bar."""
    if pattern is None:
        pattern = encoding_named_by(path)
        if pattern is None:
            names = ", ".join(name for name in KNOWN_ENCODINGS if name != "gpt2")
            raise FormatError(
                f"{path}: a .tiktoken file does not say its pre-tokenizer, and this one is not named like a known encoding "
                f"({names}): give --pattern (an encoding's name or a regex)"
            )
    regex_pattern, default_specials = resolve_pattern(pattern, path)
    given_ids = {text: token_id for text, token_id in (special_tokens or {}).items() if token_id is not None}
    if special_tokens is not None and len(given_ids) == len(special_tokens):
        _check_special_ids(given_ids, path)  # (every id given: refused before the file is read)
    vocab = read_vocab(path)  # (a vocab the engine accepts)
    specials = default_specials if special_tokens is None else _special_ids(special_tokens, default_specials, vocab)
    _check_special_ids(specials, path)
    # The ids the file does not hold; every other id of the model is a token of the file.
    not_in_file = frozenset(token_id for token_id in specials.values() if token_id not in vocab)
    for text, token_id in specials.items():
        if token_id in vocab and vocab[token_id] != text.encode("utf-8"):
            raise FormatError(f"{path}: special token {text!r} has id {token_id}, which the file gives to {vocab[token_id]!r}")
        vocab[token_id] = text.encode("utf-8")
    ordered_specials = sorted(specials, key=specials.__getitem__)
    # The engine has checked the file's tokens (read_vocab), so the model is not checked again
    # (a third of the time left); the special tokens keep them a vocab the engine accepts unless
    # one's bytes are a token of the file under another id: the model then finds that id for it
    # (the file's tokens come first), and is refused below.
    if progress:
        ranks = {token: token_id for token_id, token in vocab.items() if token_id not in not_in_file}
        with progress_bar(progress, len(ranks), "reconstructing merges", unit="tokens", unit_scale=True) as bar:
            merges, unreachable = pair_merges_from_ranks(ranks, bar.update)
        model = build_model(path, vocab, merges, ordered_specials, pattern=regex_pattern, merge_rule="token", _checked=True)
        imported = Imported(model, "tiktoken", resolved(path), [_reconstruction_note(len(merges), len(unreachable))])
    else:
        derive = partial(_reconstructed_merges, not_in_file=not_in_file)
        model = build_model(path, vocab, derive, ordered_specials, pattern=regex_pattern, _checked=True)
        imported = Imported(model, "tiktoken", resolved(path), later_notes=partial(_later_notes, model, not_in_file))
    for text, token_id in model.special_ids.items():
        if token_id != specials[text]:
            raise FormatError(f"{path}: special token {text!r} has id {specials[text]}, but the file gives its bytes the id {token_id}")
    return imported


def _reconstructed_merges(model: BPEModel, not_in_file: frozenset[int]) -> Merges:
    """The merges :func:`read` reconstructs for ``model`` read from a file, which gave every id
    of it but ``not_in_file`` (special tokens' ids of their own)."""
    ranks = {token: token_id for token_id, token in model.vocab.items() if token_id not in not_in_file}
    return pair_merges_from_ranks(ranks)[0]


def _later_notes(model: BPEModel, not_in_file: frozenset[int]) -> list[str]:
    """The note :func:`read` gives about the merges of ``model`` (see :func:`_reconstructed_merges`):
    each multi-byte token of the file is either made by a merge or reached by none."""
    multi_byte = sum(1 for token_id, token in model.vocab.items() if len(token) > 1 and token_id not in not_in_file)
    merges = len(model.merges)
    return [_reconstruction_note(merges, multi_byte - merges)]


def _reconstruction_note(merges: int, unreachable: int) -> str:
    return f"{merges} merges reconstructed; {unreachable} tokens are not reached by any pair merge"


def _check_special_ids(specials: Mapping[str, int], path: str | os.PathLike[str]) -> None:
    """FormatError for a special token's id that is no id (not an integer from 0 to
    ``MAX_TOKEN_ID``) and for two special tokens given one id (the second would silently take the
    first's place, or be blamed on the file)."""
    for token_id in specials.values():
        if type(token_id) is not int or not 0 <= token_id <= MAX_TOKEN_ID:
            raise FormatError(f"{path}: token ids must be integers from 0 to {MAX_TOKEN_ID} (2**31-1), got {token_id!r}")
    holder: dict[int, str] = {}
    for text, token_id in specials.items():
        if holder.setdefault(token_id, text) != text:
            raise FormatError(f"special tokens {holder[token_id]!r} and {text!r} are both given id {token_id}; each needs an id of its own")


def write(model: BPEModel, output: Path) -> list[str]:
    """The file ``output`` as a ``.tiktoken`` file (special tokens left out, as tiktoken keeps them apart)."""
    notes = []
    vocab, special_ids = model.vocab, model.special_ids
    if model.merge_rule == "pair":
        reconstructed, unreachable = pair_merges_from_ranks(
            {token: token_id for token_id, token in vocab.items() if token_id not in special_ids.values()}
        )
        if reconstructed != model.merges or unreachable:
            notes.append(
                "tiktoken merges by token rank (the id); for this tokenizer the ranks do not reproduce its merges "
                "exactly, so some texts may encode differently in tiktoken"
            )
    written = write_ranks(output, vocab, set(special_ids.values()))
    specials = ", ".join(f"{text!r}: {token_id}" for text, token_id in special_ids.items()) or "none"
    notes += added_tokens_note(model, "tiktoken")
    notes.append(f"wrote {written:,} tokens to {output}; tiktoken also needs pat_str={model.pattern!r} and special_tokens={{{specials}}}")
    return notes


def parse_special_assignments(values: Iterable[str]) -> dict[str, int | None] | None:
    """``--special-token`` values of ``bpestore import tiktoken`` as a dict: ``TOKEN=ID`` (the id
    in ASCII digits after the last ``=``) gives the id, ``TOKEN`` alone None (the id found by
    :func:`read`: the known encoding's, else the next free one), as ``bpestore import gpt2``
    takes them; None for none (the well-known encoding's own); ValueError for a token given
    twice (the last would silently win).

    >>> parse_special_assignments(["<|endoftext|>=100257", "<|pad|>", "a=b"])
    {'<|endoftext|>': 100257, '<|pad|>': None, 'a=b': None}
    """
    specials: dict[str, int | None] = {}
    for value in values:
        text, equals, token_id = value.rpartition("=")
        if equals and text and token_id.isdigit() and not token_id.isascii():
            raise ValueError(f"{value!r}: expected TOKEN=ID with the id in ASCII digits, e.g. '<|endoftext|>=100257', or TOKEN alone")
        if not (equals and text and token_id.isdigit()):
            text, token_id = value, ""
        if not text:
            raise ValueError("an empty special token")
        if text in specials:
            raise ValueError(f"special token {text!r} is given twice")
        specials[text] = int(token_id) if token_id else None
    return specials or None


IMPORTER = ImportCommand(
    help="""A .tiktoken file (base64 token and rank per line; gzip'd or not).

    tiktoken merges by the rank of the resulting token; the stored tokenizer does the same, and a
    merges list is reconstructed for export, show and diff.

    The pre-tokenizer pattern is not in the file: --pattern gives it, or the file's name when it
    is a known encoding's (cl100k_base.tiktoken, o200k_base.tiktoken, r50k_base, p50k_base).

    \b
    Example:
      bpestore import tiktoken cl100k_base.tiktoken --name cl100k
      bpestore import tiktoken mine.tiktoken --name mine --pattern cl100k_base --special-token '<|pad|>'
    """,
    files=("file",),
    options=(
        ImportOption(
            "--pattern", "pattern",
            "The pre-tokenizer: a well-known encoding's name (which also brings its special tokens) or a regex "
            "[default: the encoding the file is named after].",
            metavar="{r50k_base,p50k_base,cl100k_base,o200k_base}|REGEX", positional=True,
        ),
        ImportOption(
            "--special-token", "special_tokens",
            "A special token (repeatable; replaces the defaults): TOKEN=ID, or TOKEN for the known encoding's id "
            "for it, else the next id after the file's.",
            metavar="TOKEN[=ID]", multiple=True, convert=parse_special_assignments,
        ),
    ),
    progress=True,
)

FORMAT = register(Format("tiktoken", read, write, merge_rule="token", importer=IMPORTER))
