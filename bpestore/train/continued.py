"""Continuing a trained tokenizer, and the model of each vocab size a merge run serves.

A training that continues ``base`` (a stored tokenizer) keeps its vocabulary, ids and merges
exactly, in order (so that a model's embedding table can be extended), then learns further
merges from the corpus's counts, its words first split by the base's own merge rule: a pair-rule
base (trained here, GPT-2, Hugging Face) replays its merges on the words; a token-rule base
(tiktoken's files) splits each word as tiktoken encodes it. The base's special tokens keep their
ids, new ones get the next free ids, and each vocab size counts them all.

One merge run serves every vocab size (a smaller vocab's merges are a prefix of a larger one's):
:func:`model_of_size` makes the model of one size from it, continuing a base or not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..model import BPEModel
from ..pretokenize.patterns import GPT2_PATTERN
from . import trainer
from .trainer import SpecialTokensAt

__all__ = ["check_base", "cut_tokens", "first_new_id", "learn_continued", "model_of_size", "replayed_merges"]


def check_base(ref: str, base: BPEModel, special_tokens: list[str], sizes: Sequence[int]) -> list[str]:
    """The special tokens of a training continuing ``base`` (stored as ``ref``): the base's, then
    the new ones. ValueError for a vocab size that leaves no room, or a base that normalizes its
    text (its corpus would have to be counted normalized, which training does not do)."""
    if base.normalizer is not None:
        raise ValueError(f"{ref} normalizes its text ({base.normalizer}): continuing its training is not supported")
    if base.pre_tokenizer is not None:
        raise ValueError(f"{ref} splits its text with a pre-tokenizer pipeline ({base.pre_tokenizer}): continuing its training is not supported")
    specials = [*base.special_tokens, *(token for token in special_tokens if token not in base.special_tokens)]
    minimum = first_new_id(base, specials)
    for size in sizes:
        trainer.check_vocab_size_type(size)
        if size < minimum:
            raise ValueError(
                f"vocab_size must be at least {minimum} to continue {ref} (its {len(base.vocab)} tokens and "
                f"{minimum - len(base.vocab)} new special tokens), got {size!r}"
            )
    return specials


def cut_tokens(special_tokens: Sequence[str], base: BPEModel | None) -> list[str]:
    """The strings a training's corpus is cut at: its special tokens, and a base's added tokens
    (which it encodes whole, as it does special tokens: no new merge may reach into them)."""
    added = [] if base is None else [token for token in base.added_tokens if token not in special_tokens]
    return [*special_tokens, *added]


def _new_specials(base: BPEModel, special_tokens: Sequence[str]) -> list[str]:
    """The special tokens that need an id: those whose bytes ``base`` has no token for (GPT-2's
    files hold ``<|endoftext|>`` as an ordinary token: made special, it keeps its id)."""
    known = set(base.vocab.values())
    return [token for token in special_tokens if token.encode("utf-8") not in known]


def first_new_id(base: BPEModel, special_tokens: Sequence[str]) -> int:
    """The vocab size of ``base`` with the new special tokens added."""
    return len(base.vocab) + len(_new_specials(base, special_tokens))


def _continued(
    base: BPEModel, special_tokens: Sequence[str], new_merges: Sequence[tuple[bytes, bytes]], special_tokens_at: SpecialTokensAt
) -> BPEModel:
    """``base`` with its ids kept, then the new special tokens and a token per new merge (unless
    the base already holds its bytes) at the next free ids: the special tokens first
    (``special_tokens_at="start"``) or last (``"end"``)."""
    specials = [token.encode("utf-8") for token in _new_specials(base, special_tokens)]
    made = [left + right for left, right in new_merges]
    vocab = dict(base.vocab)
    known = set(vocab.values())
    next_id = max(vocab) + 1
    for token in specials + made if special_tokens_at == "start" else made + specials:
        if token not in known:
            vocab[next_id] = token
            known.add(token)
            next_id += 1
    return BPEModel(vocab, [*base.merges, *new_merges], special_tokens, base.pattern, base.merge_rule, base.added_tokens, **base.pipeline)


def learn_continued(counts: Mapping[bytes, int], max_merges: int, base: BPEModel, **options: Any) -> list[tuple[bytes, bytes]]:
    """The new merges of a training continuing ``base``, its words first split by the base's own
    merge rule: the pair rule replays its merges in order (GPT-2's ``bpe()``); the token rule
    encodes each word as tiktoken does (ranks = ids), the merges being unused."""
    if base.merge_rule == "token":
        return trainer.learn_merges(counts, max_merges, base_ranks=base.vocab, **options)
    return trainer.learn_merges(counts, max_merges, base=base.merges, **options)  # (stacklevel: the caller's, one more)


def replayed_merges(base: BPEModel | None) -> int:
    """The merges that the merge loop replays before learning new ones (for its memory estimate):
    a pair-rule base's; a token-rule base splits the words without merging."""
    return len(base.merges) if base is not None and base.merge_rule == "pair" else 0


def max_merges(size: int, special_tokens: Sequence[str], base: BPEModel | None) -> int:
    """The merges a vocab of ``size`` tokens has room for, special tokens (and a base) counted."""
    if base is None:
        return trainer.max_merges(size, special_tokens)
    return size - first_new_id(base, special_tokens)


def model_of_size(
    size: int,
    special_tokens: Sequence[str],
    merges: Sequence[tuple[bytes, bytes]],
    base: BPEModel | None = None,
    *,
    pattern: str = GPT2_PATTERN,
    special_tokens_at: SpecialTokensAt = "start",
) -> tuple[BPEModel, int]:
    """The model of vocab size ``size`` from a merge run's ``merges`` (all the run learned, in
    order; a base's own not among them), continuing ``base`` if given (with its pattern), else
    with ``pattern``; and how many of the merges it took (fewer than asked when the run stopped
    early). ``special_tokens_at``: where the (new) special tokens' ids go."""
    taken = min(max_merges(size, special_tokens, base), len(merges))
    if base is not None:
        return _continued(base, special_tokens, merges[:taken], special_tokens_at), taken
    vocab, size_merges = trainer.vocab_and_merges(special_tokens, merges[:taken], special_tokens_at)
    return BPEModel(vocab, size_merges, special_tokens, pattern), taken
