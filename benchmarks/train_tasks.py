"""The ``train`` section's measurements: bpestore and its peers train on the same corpus.

Every tool's timed region includes reading the corpus: bpestore reads the file itself; the peers
get the documents streamed from the file (:func:`corpus.iter_documents`), with the separator lines
(the special token, or blank lines) dropped. rustbpe and bpeasy have no special tokens, so they are
asked for ``vocab_size - len(special_tokens)`` tokens: every tool then learns the same number of
merges. ``check`` writes the learned (merged) tokens to ``tokens_out`` for the parent to compare.
"""

from __future__ import annotations

import json

from corpus import iter_documents
from harness import Job, Skip
from registry import task

# The GPT-2 pre-tokenizer pattern that bpestore trains with (no possessive quantifiers).
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
BPEASY_MAX_TOKEN_LENGTH = 128


def specials(params: dict) -> list[str]:
    return [params["special"]] if params.get("special") else []


def documents(params: dict):
    return iter_documents(params["corpus"], params.get("special"), params["separator"])


def learned_tokens_report(params: dict, vocab_size: int, learned: list[bytes], **extra) -> dict:
    """Facts about a trained vocabulary; the learned tokens go to ``params["tokens_out"]``."""
    if params.get("tokens_out"):
        with open(params["tokens_out"], "w") as file:
            json.dump(sorted(token.hex() for token in learned), file)
    return {"vocab_size": vocab_size, "merges": len(learned), **extra}


def import_or_skip(module: str):
    try:
        return __import__(module)
    except ImportError as error:
        raise Skip(f"{module} is not installed ({error})") from error


def train_with_pattern(pattern: str):
    """The ``train-patterns`` section's task: bpestore's train_bpe with the pre-tokenizer ``pattern``."""

    def make(params: dict) -> Job:
        train_bpe = import_or_skip("bpestore").train_bpe

        def run():
            return train_bpe(params["corpus"], params["vocab_size"], specials(params), workers=params["workers"], pattern=pattern)

        def check(result) -> dict:
            vocab, merges = result
            return learned_tokens_report(params, len(vocab), [left + right for left, right in merges], pattern=pattern)

        return Job(run, check)

    return make


PATTERN_NAMES = ("gpt2", "cl100k_base", "o200k_base")
for _name in PATTERN_NAMES:
    task(f"train-patterns:{_name}")(train_with_pattern(_name))


@task("train:bpestore")
def train_bpestore(params: dict) -> Job:
    # The attribute is resolved here, untimed: bpestore imports its modules when first asked for.
    train_bpe = import_or_skip("bpestore").train_bpe

    def run():
        return train_bpe(params["corpus"], params["vocab_size"], specials(params), workers=params["workers"])

    def check(result) -> dict:
        vocab, merges = result
        return learned_tokens_report(params, len(vocab), [left + right for left, right in merges])

    return Job(run, check)


@task("train-small:bpestore")
def train_small_bpestore(params: dict) -> Job:
    train_bpe = import_or_skip("bpestore").train_bpe  # imported untimed (see train:bpestore)
    from gpt2 import read_merges_file

    def run():
        return train_bpe(params["corpus"], params["vocab_size"], specials(params), workers=1)

    def check(result) -> dict:
        vocab, merges = result
        return {"vocab_size": len(vocab), "merges": len(merges),
                "matches_reference": merges == read_merges_file(params["reference_merges"])}

    return Job(run, check)


@task("train:hf")
def train_hf(params: dict) -> Job:
    import_or_skip("tokenizers")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=params["vocab_size"],
        special_tokens=specials(params),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )

    def run():
        tokenizer.train_from_iterator(documents(params), trainer=trainer)
        return tokenizer

    def check(tokenizer) -> dict:
        return learned_tokens_report(params, tokenizer.get_vocab_size(), hf_learned_tokens(tokenizer))

    return Job(run, check)


def hf_learned_tokens(tokenizer) -> list[bytes]:
    """The tokens made by an HF BPE model's merges, as bytes (the model stores them byte-to-unicode
    encoded; merges are ``[left, right]`` pairs, or ``"left right"`` strings in older versions)."""
    from gpt2 import unicode_to_byte

    table = unicode_to_byte()
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    pairs = [pair if isinstance(pair, list) else pair.split(" ") for pair in merges]
    return [bytes(table[c] for c in left + right) for left, right in pairs]


@task("train:rustbpe")
def train_rustbpe(params: dict) -> Job:
    rustbpe = import_or_skip("rustbpe")
    tokenizer = rustbpe.Tokenizer()
    asked = params["vocab_size"] - len(specials(params))

    def run():
        tokenizer.train_from_iterator(documents(params), asked, pattern=GPT2_PATTERN)
        return tokenizer

    def check(tokenizer) -> dict:
        ranks = dict(tokenizer.get_mergeable_ranks())
        learned = [token for token, rank in ranks.items() if rank >= 256]
        return learned_tokens_report(params, tokenizer.vocab_size, learned, asked=asked, special_tokens=0)

    return Job(run, check)


@task("train:bpeasy")
def train_bpeasy(params: dict) -> Job:
    bpeasy = import_or_skip("bpeasy")
    asked = params["vocab_size"] - len(specials(params))

    def run():
        return bpeasy.train_bpe(documents(params), GPT2_PATTERN, BPEASY_MAX_TOKEN_LENGTH, asked)

    def check(ranks: dict[bytes, int]) -> dict:
        learned = [token for token, rank in ranks.items() if rank >= 256]
        return learned_tokens_report(params, len(ranks), learned, asked=asked, special_tokens=0,
                                     max_token_length=BPEASY_MAX_TOKEN_LENGTH)

    return Job(run, check)


@task("train:gigatoken")
def train_gigatoken(params: dict) -> Job:
    """gigatoken's ``train_bpe`` reads the file itself, as bpestore does; documents split at the
    separator. Its default tie-break is Hugging Face's (among pairs of equal count, which pair
    wins differs from bpestore's lexicographically greatest): learned tokens can differ at ties."""
    gigatoken = import_or_skip("gigatoken")
    separator = params["special"].encode() if params["separator"] == "special" else b"\n\n"

    def run():
        return gigatoken.train_bpe(params["corpus"], params["vocab_size"], specials(params), separator=separator)

    def check(result) -> dict:
        vocab, merges = result
        return learned_tokens_report(params, len(vocab), [left + right for left, right in merges], tie_breaking="huggingface")

    return Job(run, check)
