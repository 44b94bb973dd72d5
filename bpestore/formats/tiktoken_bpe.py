"""tiktoken's ``.tiktoken`` files: one ``base64(token) rank`` per line, optionally gzip'd.

Neither the pre-tokenizer pattern nor the special tokens are in the file, so importing takes them
as arguments; :data:`KNOWN_ENCODINGS` has OpenAI's by name. tiktoken merges by the rank of the
resulting *token*, so an imported tokenizer records merge rule ``"token"``; a merges list is still
reconstructed (for export, ``show`` and ``diff``), and tokens that no pair merge reaches are counted.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..engine import pair_merges_from_ranks as pair_merges_from_ranks_in_engine
from ..errors import FormatError
from ..model import MAX_TOKEN_ID, BPEModel, check_pattern
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
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as error:
            raise FormatError(f"{path}: looks gzip'd but cannot be decompressed ({error})") from None
    well_formed = _well_formed_ranks(data)
    # (Something is wrong otherwise: the line-by-line reading names the first problem.)
    return well_formed if well_formed is not None else _ranks_line_by_line(path, data)


def _ranks_line_by_line(path: str | os.PathLike[str], data: bytes) -> dict[bytes, int]:
    """:func:`read_ranks` of the file's ``data``, a line at a time: FormatError for the first
    line that breaks a rule (its number and what is wrong)."""
    ranks: dict[bytes, int] = {}
    seen_ranks: dict[int, int] = {}
    for line_number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 2:
            raise FormatError(f"{path}, line {line_number}: expected 'base64-token rank', got {line[:80]!r}")
        try:
            token = base64.b64decode(fields[0], validate=True)
        except binascii.Error:
            raise FormatError(f"{path}, line {line_number}: expected 'base64-token rank', got {line[:80]!r}") from None
        if fields[1].startswith(b"-") and fields[1][1:].isdigit():
            raise FormatError(f"{path}, line {line_number}: negative rank {int(fields[1])}")
        if not fields[1].isdigit():  # ASCII digits only: no sign, no "_", no other scripts' digits
            raise FormatError(f"{path}, line {line_number}: expected 'base64-token rank', got {line[:80]!r}")
        rank = int(fields[1])
        if rank > MAX_TOKEN_ID:
            raise FormatError(f"{path}, line {line_number}: rank {rank} is too large; ranks must be integers from 0 to {MAX_TOKEN_ID} (2**31-1)")
        if not token:
            raise FormatError(f"{path}, line {line_number}: an empty token")
        if token in ranks:
            raise FormatError(f"{path}, line {line_number}: token {token!r} appears twice")
        if rank in seen_ranks:
            raise FormatError(f"{path}, line {line_number}: rank {rank} also given on line {seen_ranks[rank]}")
        ranks[token] = rank
        seen_ranks[rank] = line_number
    if not ranks:
        raise FormatError(f"{path}: no tokens found")
    return ranks


def _well_formed_ranks(data: bytes) -> dict[bytes, int] | None:
    """The ranks of a well-formed file, read a column at a time (o200k_base's 200k lines in a
    fraction of the line-by-line loop's 1.7 s); None if any line breaks a rule of
    :func:`read_ranks`, whose loop then says which. (``a2b_base64(strict_mode=True)`` is
    ``b64decode(validate=True)`` without its wrapper.)"""
    fields = [line.split() for line in data.splitlines() if line.strip()]
    if not fields or any(len(pair) != 2 for pair in fields):
        return None
    try:
        tokens = [binascii.a2b_base64(pair[0], strict_mode=True) for pair in fields]
    except binascii.Error:
        return None
    numbers = [pair[1] for pair in fields]
    if not all(map(bytes.isdigit, numbers)) or not all(tokens):
        return None
    ranks = list(map(int, numbers))
    table = dict(zip(tokens, ranks))
    if max(ranks) > MAX_TOKEN_ID or len(table) != len(tokens) or len(set(ranks)) != len(ranks):
        return None
    return table


def write_ranks(path: str | os.PathLike[str], vocab: dict[int, bytes], special_ids: set[int]) -> None:
    """Write every non-special token as ``base64(token) id``, ordered by id."""
    lines = [
        base64.b64encode(token) + b" " + str(token_id).encode()
        for token_id, token in sorted(vocab.items())
        if token_id not in special_ids
    ]
    Path(path).write_bytes(b"\n".join(lines) + b"\n")


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


def read(
    path: str | os.PathLike[str], pattern: str, special_tokens: dict[str, int] | None = None, *, progress: bool = False
) -> Imported:
    """A ``.tiktoken`` file. ``pattern`` is a well-known encoding name (which also brings its
    special tokens, unless ``special_tokens`` is given) or a regex. Reconstructing the merges of a
    big vocabulary takes seconds: ``progress`` shows a bar."""
    regex_pattern, default_specials = resolve_pattern(pattern, path)
    specials = default_specials if special_tokens is None else dict(special_tokens)
    _check_special_ids(specials)
    ranks = read_ranks(path)
    vocab = {rank: token for token, rank in ranks.items()}
    for text, token_id in specials.items():
        if token_id in vocab and vocab[token_id] != text.encode("utf-8"):
            raise FormatError(f"{path}: special token {text!r} has id {token_id}, which the file gives to {vocab[token_id]!r}")
        vocab[token_id] = text.encode("utf-8")
    with progress_bar(progress, len(ranks), "reconstructing merges", unit="tokens", unit_scale=True) as bar:
        merges, unreachable = pair_merges_from_ranks(ranks, bar.update)
    model = build_model(
        path, vocab, merges, sorted(specials, key=specials.__getitem__), pattern=regex_pattern, merge_rule="token"
    )
    notes = [f"{len(merges)} merges reconstructed; {len(unreachable)} tokens are not reached by any pair merge"]
    return Imported(model, "tiktoken", resolved(path), notes)


def _check_special_ids(specials: Mapping[str, int]) -> None:
    """FormatError for two special tokens given one id (the second would silently take the
    first's place, or be blamed on the file)."""
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
    write_ranks(output, vocab, set(special_ids.values()))
    specials = ", ".join(f"{text!r}: {token_id}" for text, token_id in special_ids.items()) or "none"
    notes += added_tokens_note(model, "tiktoken")
    notes.append(f"wrote {output}; tiktoken also needs pat_str={model.pattern!r} and special_tokens={{{specials}}}")
    return notes


def parse_special_assignments(values: Iterable[str]) -> dict[str, int] | None:
    """``TOKEN=ID`` strings (``--special-token`` of ``bpestore import tiktoken``) as a dict; None
    for none (the well-known encoding's own); ValueError for one that is not ``TOKEN=ID`` (the id
    in ASCII digits) and for a token given twice (the last would silently win)."""
    specials: dict[str, int] = {}
    for value in values:
        text, equals, token_id = value.rpartition("=")
        if not equals or not text or not (token_id.isascii() and token_id.isdigit()):
            raise ValueError(f"{value!r}: expected TOKEN=ID, e.g. '<|endoftext|>=100257'")
        if text in specials:
            raise ValueError(f"special token {text!r} is given twice (ids {specials[text]} and {int(token_id)})")
        specials[text] = int(token_id)
    return specials or None


IMPORTER = ImportCommand(
    help="""A .tiktoken file (base64 token and rank per line; gzip'd or not).

    tiktoken merges by the rank of the resulting token; the stored tokenizer does the same, and a
    merges list is reconstructed for export, show and diff.

    \b
    Example:
      bpestore import tiktoken cl100k_base.tiktoken --name cl100k --pattern cl100k_base
    """,
    files=("file",),
    options=(
        ImportOption(
            "--pattern", "pattern", "The pre-tokenizer: a well-known encoding's name (which also brings its special tokens) or a regex.",
            metavar="{r50k_base,p50k_base,cl100k_base,o200k_base}|REGEX", required=True, positional=True,
        ),
        ImportOption(
            "--special-token", "special_tokens", "A special token and its id (repeatable); replaces the defaults.",
            metavar="TOK=ID", multiple=True, convert=parse_special_assignments,
        ),
    ),
    progress=True,
)

FORMAT = register(Format("tiktoken", read, write, merge_rule="token", importer=IMPORTER))
