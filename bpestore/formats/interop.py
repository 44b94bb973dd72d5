"""Import tokenizers from GPT-2, Hugging Face and tiktoken files; export them back.

Each importer reads and checks the whole input before anything is stored, and returns a
:class:`Tokenizer` whose ids are those of the tool the files came from.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..encode.bpe import pair_merges_from_ranks
from ..errors import FormatError
from . import gpt2, hf, tiktoken_bpe
from ..pretokenize.patterns import GPT2_PATTERN
from ..progress import progress_bar
from ..encode.tokenizer import Tokenizer

ExportFormat = Literal["gpt2", "hf", "tiktoken"]
EXPORT_FORMATS: tuple[str, ...] = ("gpt2", "hf", "tiktoken")


@dataclass
class ImportReport:
    """What an import found worth telling the user."""

    tokenizer: Tokenizer
    source: str
    notes: list[str] = field(default_factory=list)


def _build(path, vocab, merges, special_tokens, **options) -> Tokenizer:
    try:
        return Tokenizer(vocab, merges, special_tokens, **options)
    except ValueError as error:
        raise FormatError(f"{path}: {error}") from None


def import_gpt2(vocab_path: str | os.PathLike, merges_path: str | os.PathLike, special_tokens=()) -> ImportReport:
    """GPT-2's ``vocab.json`` + ``merges.txt``; special tokens must be named (GPT-2 lists
    ``<|endoftext|>`` in its vocab but not as special)."""
    special_tokens = list(special_tokens)
    try:
        vocab = gpt2.read_vocab(vocab_path, literal_tokens=special_tokens)
        merges = gpt2.read_merges(merges_path)
    except ValueError as error:
        raise FormatError(str(error)) from None
    tokenizer = _build(merges_path, vocab, merges, special_tokens)
    return ImportReport(tokenizer, f"imported from gpt2 {Path(vocab_path).resolve()} {Path(merges_path).resolve()}")


def import_hf(path: str | os.PathLike) -> ImportReport:
    """A Hugging Face ``tokenizer.json`` (byte-level BPE); its added tokens become special tokens."""
    document = hf.read_tokenizer_json(path)
    tokenizer = _build(path, document.vocab, document.merges, document.special_tokens, pattern=document.pattern)
    return ImportReport(tokenizer, f"imported from hf {Path(path).resolve()}")


def resolve_tiktoken_pattern(pattern: str) -> tuple[str, dict[str, int]]:
    """A well-known encoding name -> (its regex, its special tokens); anything else is a regex."""
    known = tiktoken_bpe.KNOWN_ENCODINGS.get(pattern)
    if known is not None:
        return known.pattern, dict(known.special_tokens)
    import regex

    try:
        regex.compile(pattern)
    except regex.error as error:
        names = ", ".join(tiktoken_bpe.KNOWN_ENCODINGS)
        raise FormatError(f"--pattern {pattern!r} is neither a known encoding ({names}) nor a valid regex: {error}") from None
    return pattern, {}


def import_tiktoken(
    path: str | os.PathLike, pattern: str, special_tokens: dict[str, int] | None = None, *, progress: bool = False
) -> ImportReport:
    """A ``.tiktoken`` file. ``pattern`` is a well-known encoding name (which also brings its
    special tokens, unless ``special_tokens`` is given) or a regex. Reconstructing the merges of a
    big vocabulary takes seconds: ``progress`` shows a bar."""
    regex_pattern, default_specials = resolve_tiktoken_pattern(pattern)
    specials = default_specials if special_tokens is None else dict(special_tokens)
    ranks = tiktoken_bpe.read_ranks(path)
    vocab = {rank: token for token, rank in ranks.items()}
    for text, token_id in specials.items():
        if token_id in vocab and vocab[token_id] != text.encode("utf-8"):
            raise FormatError(f"{path}: special token {text!r} has id {token_id}, which the file gives to {vocab[token_id]!r}")
        vocab[token_id] = text.encode("utf-8")
    with progress_bar(progress, len(ranks), "reconstructing merges", unit="token", unit_scale=True) as bar:
        merges, unreachable = pair_merges_from_ranks(ranks, lambda: bar.update(1))
    tokenizer = _build(
        path, vocab, merges, sorted(specials, key=specials.__getitem__), pattern=regex_pattern, merge_rule="token"
    )
    notes = [f"{len(merges)} merges reconstructed; {len(unreachable)} tokens are not reached by any pair merge"]
    return ImportReport(tokenizer, f"imported from tiktoken {Path(path).resolve()}", notes)


def export_tokenizer(tokenizer: Tokenizer, export_format: ExportFormat, output: str | os.PathLike) -> list[str]:
    """Write ``tokenizer`` in another tool's format; returns notes for the user.

    ``gpt2`` writes ``vocab.json`` and ``merges.txt`` into the directory ``output``; ``hf`` and
    ``tiktoken`` write the file ``output``.
    """
    output = Path(output)
    notes: list[str] = []
    vocab, merges = tokenizer.vocab, tokenizer.merges
    if tokenizer.merge_rule == "token" and export_format != "tiktoken":
        produced = {a + b for a, b in merges}
        unreachable = sum(1 for token in vocab.values() if len(token) > 1 and token not in produced) - len(tokenizer.special_ids)
        notes.append(
            f"this tokenizer merges by token rank (tiktoken); {export_format} tools merge by pair rank, "
            f"and {max(unreachable, 0)} tokens are not reached by any pair merge, so some texts may encode differently"
        )
    if export_format == "gpt2":
        if tokenizer.pattern != GPT2_PATTERN:
            notes.append("GPT-2 files cannot carry the pre-tokenizer pattern; load them with this pattern:\n  " + tokenizer.pattern)
        output.mkdir(parents=True, exist_ok=True)
        gpt2.write_vocab(output / "vocab.json", vocab)
        gpt2.write_merges(output / "merges.txt", merges)
        notes.append(f"wrote {output / 'vocab.json'} and {output / 'merges.txt'}")
    elif export_format == "hf":
        hf.write_tokenizer_json(output, hf.tokenizer_json(vocab, merges, tokenizer.special_ids, tokenizer.pattern))
        notes.append(f"wrote {output}")
    elif export_format == "tiktoken":
        if tokenizer.merge_rule == "pair":
            reconstructed, unreachable = pair_merges_from_ranks(
                {token: token_id for token_id, token in vocab.items() if token_id not in tokenizer.special_ids.values()}
            )
            if reconstructed != merges or unreachable:
                notes.append(
                    "tiktoken merges by token rank (the id); for this tokenizer the ranks do not reproduce its merges "
                    "exactly, so some texts may encode differently in tiktoken"
                )
        tiktoken_bpe.write_ranks(output, vocab, set(tokenizer.special_ids.values()))
        specials = ", ".join(f"{text!r}: {token_id}" for text, token_id in tokenizer.special_ids.items()) or "none"
        notes.append(f"wrote {output}; tiktoken also needs pat_str={tokenizer.pattern!r} and special_tokens={{{specials}}}")
    else:
        raise ValueError(f"unknown export format {export_format!r}; choose one of {', '.join(EXPORT_FORMATS)}")
    return notes
