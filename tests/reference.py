"""A deliberately naive reference of byte-level BPE, to check bpestore against.

Everything here is written for clarity, not speed (in the style of minbpe): training recounts every
pair after every merge, and encoding is the original GPT-2 ``bpe()`` loop. It shares no code with
bpestore, so a bug there cannot hide behind the same bug here. ``tests/test_reference.py`` checks
this module against the CS336 reference training result and against tiktoken's GPT-2 encoder.

Semantics (Stanford CS336 assignment 1):

* ids: the special tokens first (0..k-1, in the order given), then the 256 single bytes, then one
  id per merge in creation order;
* the text is split at special tokens (longest first), each piece is pre-tokenized with the GPT-2
  regex, and merges never cross a pre-token boundary;
* each training step merges the most frequent adjacent pair, ties going to the lexicographically
  greatest ``(left bytes, right bytes)``.

Beyond CS336 (what people train after it), :func:`reference_train` also takes another
pre-tokenizer ``pattern``, the special tokens at the end of the vocab (``special_tokens_at="end"``:
after the last merge, as GPT-2 and tiktoken have ``<|endoftext|>``), and a ``min_count`` below
which a pre-token is left out of training.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections import Counter
from collections.abc import Callable

import regex

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]


def split_on_specials(text: str, special_tokens: list[str], keep: bool) -> list[str]:
    """``text`` cut at the special tokens, longest first so that a special containing another wins.

    With ``keep`` the special tokens stay in the result (at odd indices); otherwise they are dropped.
    """
    if not special_tokens:
        return [text]
    alternation = "|".join(re.escape(token) for token in sorted(special_tokens, key=len, reverse=True))
    if keep:
        alternation = f"({alternation})"
    return re.split(alternation, text)


def pretokenize(text: str, pattern: str = GPT2_PATTERN) -> list[bytes]:
    """The pre-tokens (GPT-2's by default) of a text without special tokens, as UTF-8 bytes."""
    return [match.encode("utf-8") for match in regex.findall(pattern, text)]


def reference_pretoken_counts(text: str, special_tokens: list[str], pattern: str = GPT2_PATTERN) -> Counter[bytes]:
    """How often each pre-token (by ``pattern``) occurs in ``text``, special tokens left out."""
    counts: Counter[bytes] = Counter()
    for piece in split_on_specials(text, special_tokens, keep=False):
        counts.update(pretokenize(piece, pattern))
    return counts


def merge_pair(tokens: tuple[bytes, ...], pair: tuple[bytes, bytes]) -> tuple[bytes, ...]:
    """Replace each occurrence of ``pair`` in ``tokens`` by the merged token, left to right, no overlap."""
    merged = []
    i = 0
    while i < len(tokens):
        if i + 1 < len(tokens) and (tokens[i], tokens[i + 1]) == pair:
            merged.append(tokens[i] + tokens[i + 1])
            i += 2
        else:
            merged.append(tokens[i])
            i += 1
    return tuple(merged)


def reference_train(
    text: str,
    vocab_size: int,
    special_tokens: list[str],
    *,
    pattern: str = GPT2_PATTERN,
    special_tokens_at: str = "start",
    min_count: int = 1,
) -> tuple[Vocab, Merges]:
    """Train byte-level BPE on ``text`` (see the module docstring for the exact semantics)."""
    # Each distinct pre-token counted at least min_count times, as a tuple of single-byte
    # tokens, with how often it occurs.
    words: Counter[tuple[bytes, ...]] = Counter()
    for pretoken, count in reference_pretoken_counts(text, special_tokens, pattern).items():
        if count >= min_count:
            words[tuple(bytes([b]) for b in pretoken)] = count

    merges = reference_merges(words, vocab_size - len(special_tokens) - 256)
    tokens = [bytes([b]) for b in range(256)] + [left + right for left, right in merges]
    specials = [token.encode("utf-8") for token in special_tokens]
    ordered = specials + tokens if special_tokens_at == "start" else tokens + specials
    return dict(enumerate(ordered)), merges


def byte_level_code(byte: int) -> int:
    """GPT-2's ``bytes_to_unicode``: the code point of a byte's character (Hugging Face's ids of
    the single bytes are in this order)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    if byte in printable:
        return byte
    return 256 + [b for b in range(256) if b not in printable].index(byte)


def words_of(token: bytes) -> int:
    """The words of a token: its runs of bytes other than the space (SuperBPE's count)."""
    return len([word for word in token.split(b" ") if word])


def reference_merges(
    words: Counter[tuple[bytes, ...]],
    num_merges: int,
    *,
    tie_break: str = "cs336",
    made: list[bytes] | None = None,
    max_words: int | None = None,
) -> Merges:
    """Up to ``num_merges`` merges learned from ``words`` (each a tuple of tokens, with its count):
    CS336's loop. Words start as single bytes in training; continued training starts them as a
    base tokenizer split them.

    ``tie_break="huggingface"``: equal counts go to the smallest pair of Hugging Face's ids: the
    single bytes in the order of their byte-level characters, then the tokens in the order made
    (``made``: those of the merges before these, in order). ``max_words``: a pair whose token
    would hold more words is never merged (SuperBPE's limit)."""
    made = list(made or [])

    def hf_id(token: bytes) -> int:
        return byte_level_code(token[0]) if len(token) == 1 else 1024 + made.index(token)

    merges: Merges = []
    while len(merges) < num_merges:
        pair_counts: Counter[tuple[bytes, bytes]] = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                if max_words is None or words_of(pair[0] + pair[1]) <= max_words:
                    pair_counts[pair] += count
        if not pair_counts:
            break
        if tie_break == "huggingface":
            best = max(pair_counts, key=lambda pair: (pair_counts[pair], -hf_id(pair[0]), -hf_id(pair[1])))
        else:
            # Most frequent first; among equals, the greatest (left, right) by tuple comparison.
            best = max(pair_counts, key=lambda pair: (pair_counts[pair], pair))
        merges.append(best)
        if best[0] + best[1] not in made and len(best[0] + best[1]) > 1:
            made.append(best[0] + best[1])
        new_words: Counter[tuple[bytes, ...]] = Counter()
        for word, count in words.items():
            new_words[merge_pair(word, best)] += count
        words = new_words
    return merges


def bpe(pretoken: bytes, ranks: dict[tuple[bytes, bytes], int]) -> list[bytes]:
    """The original GPT-2 ``bpe()``: merge the lowest-ranked pair everywhere until none is ranked."""
    tokens = [bytes([b]) for b in pretoken]
    while len(tokens) > 1:
        pairs = set(zip(tokens, tokens[1:]))
        best = min(pairs, key=lambda pair: ranks.get(pair, float("inf")))
        if best not in ranks:
            break
        tokens = list(merge_pair(tuple(tokens), best))
    return tokens


def reference_encode(
    text: str, vocab: Vocab, merges: Merges, special_tokens: list[str] | None, pattern: str = GPT2_PATTERN,
    dropped_bytes: frozenset[int] = frozenset(),
) -> list[int]:
    """Encode ``text`` with a trained ``vocab``/``merges``; special tokens become their own ids.

    A special token missing from ``vocab`` gets the next free id (max id + 1, + 2, ... in the order
    given). ``dropped_bytes`` are left out of each pre-token before it is merged (as Hugging Face's
    BPE leaves out a character its vocab lacks).
    """
    special_tokens = list(special_tokens or [])
    # Ascending ids, later ones winning: should a special token share its bytes with an ordinary
    # token (say a one-byte special token), the ordinary token keeps the ordinary id.
    token_to_id = {token: token_id for token_id, token in sorted(vocab.items())}
    special_to_id: dict[bytes, int] = {}
    next_id = max(vocab) + 1
    for special in special_tokens:
        encoded = special.encode("utf-8")
        if encoded in special_to_id:
            continue
        if encoded in token_to_id:
            special_to_id[encoded] = min(i for i, token in vocab.items() if token == encoded)
        else:
            special_to_id[encoded] = next_id
            next_id += 1
    ranks = {pair: rank for rank, pair in enumerate(merges)}

    ids: list[int] = []
    for index, piece in enumerate(split_on_specials(text, special_tokens, keep=True)):
        if index % 2 == 1:  # the captured special tokens sit at the odd indices
            ids.append(special_to_id[piece.encode("utf-8")])
            continue
        for pretoken in pretokenize(piece, pattern):
            kept = bytes(byte for byte in pretoken if byte not in dropped_bytes)
            ids.extend(token_to_id[token] for token in bpe(kept, ranks))
    return ids


def reference_decode(ids: list[int], vocab: Vocab) -> str:
    """The text of ``ids``; bytes that are not valid UTF-8 become U+FFFD."""
    return b"".join(vocab[token_id] for token_id in ids).decode("utf-8", errors="replace")


def reference_pair_merges_from_ranks(ranks: dict[bytes, int]) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
    """A merges list from token ranks (a tiktoken vocabulary), the obvious way: for each
    multi-byte token, in rank order, tiktoken's rule on its bytes with only the tokens ranked
    below it (the lowest-ranked adjacent pair joined first, the leftmost of equals); two parts at
    the end are its merge, more mean no pair merge reaches it."""
    merges: list[tuple[bytes, bytes]] = []
    unreachable: list[bytes] = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) < 2:
            continue
        parts = [token[i : i + 1] for i in range(len(token))]
        while len(parts) > 2:
            best_rank, best_at = rank, -1
            for i in range(len(parts) - 1):
                candidate = ranks.get(parts[i] + parts[i + 1])
                if candidate is not None and candidate < best_rank:
                    best_rank, best_at = candidate, i
            if best_at < 0:
                break
            parts[best_at : best_at + 2] = [parts[best_at] + parts[best_at + 1]]
        if len(parts) == 2:
            merges.append((parts[0], parts[1]))
        else:
            unreachable.append(token)
    return merges, unreachable


# -- BPE-dropout (Provilkov et al., 2020) -----------------------------------------------------------

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def reference_read_tiktoken(source: str, data: bytes) -> dict[int, bytes]:
    """Rank -> token of a ``.tiktoken`` file's contents, in the file's order, a line at a time (the
    line-by-line reader bpestore had in Python): ValueError for the first line that breaks a rule,
    naming ``source``, the line and what is wrong, with the messages the engine must give; or, for
    a file whose lines are all right, naming the single bytes missing from it."""
    ranks: dict[bytes, int] = {}
    seen_ranks: dict[int, int] = {}
    for line_number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        malformed = f"{source}, line {line_number}: expected 'base64-token rank', got {line[:80]!r}"
        fields = line.split()
        if len(fields) != 2:
            raise ValueError(malformed)
        try:
            token = base64.b64decode(fields[0], validate=True)
        except binascii.Error:
            raise ValueError(malformed) from None
        if fields[1].startswith(b"-") and fields[1][1:].isdigit():
            raise ValueError(f"{source}, line {line_number}: negative rank {int(fields[1])}")
        if not fields[1].isdigit():  # ASCII digits only: no sign, no "_", no other scripts' digits
            raise ValueError(malformed)
        rank = int(fields[1])
        if rank > 2**31 - 1:
            raise ValueError(f"{source}, line {line_number}: rank {rank} is too large; ranks must be integers from 0 to {2**31 - 1} (2**31-1)")
        if not token:
            raise ValueError(f"{source}, line {line_number}: an empty token")
        if token in ranks:
            raise ValueError(f"{source}, line {line_number}: token {token!r} appears twice")
        if rank in seen_ranks:
            raise ValueError(f"{source}, line {line_number}: rank {rank} also given on line {seen_ranks[rank]}")
        ranks[token] = rank
        seen_ranks[rank] = line_number
    if not ranks:
        raise ValueError(f"{source}: no tokens found")
    missing = [byte for byte in range(256) if bytes([byte]) not in ranks]
    if missing:
        shown = ", ".join(f"0x{byte:02x}" for byte in missing[:8]) + (" ..." if len(missing) > 8 else "")
        raise ValueError(f"{source}: the vocab lacks {len(missing)} single-byte tokens ({shown}); byte-level BPE needs all 256")
    return {rank: token for token, rank in ranks.items()}


def splitmix(z: int) -> int:
    """SplitMix64's output function."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


class PieceDraws:
    """The draws of one pre-token: SplitMix64 seeded by the seed, the text's index in its batch
    and the pre-token's byte offset in its text; each draw is 53 bits as a float in [0, 1)."""

    def __init__(self, seed: int, text_index: int, offset: int, probability: float):
        self.state = splitmix(seed ^ splitmix(((text_index + GOLDEN) & MASK64) ^ splitmix(offset)))
        self.probability = probability

    def drops(self) -> bool:
        self.state = (self.state + GOLDEN) & MASK64
        return (splitmix(self.state) >> 11) / float(1 << 53) < self.probability


def dropout_merge(
    pretoken: bytes, rank_of: Callable[[bytes, bytes], int | None], draws: PieceDraws, whole_rank: int | None = None
) -> list[bytes]:
    """One pre-token by BPE-dropout: (the token rule: the whole pre-token if it is a token, unless
    a draw drops that;) then, again and again, list the adjacent pairs that merge by (rank, leftmost
    first), draw for each in that order until one is kept, merge it; done when all are dropped."""
    tokens = [bytes([b]) for b in pretoken]
    if whole_rank is not None and len(tokens) > 1 and not draws.drops():
        return [pretoken]
    while True:
        candidates = sorted(
            (rank, i) for i in range(len(tokens) - 1) if (rank := rank_of(tokens[i], tokens[i + 1])) is not None
        )
        kept = next((i for _, i in candidates if not draws.drops()), None)
        if kept is None:
            return tokens
        tokens[kept : kept + 2] = [tokens[kept] + tokens[kept + 1]]


def reference_encode_dropout(
    text: str,
    vocab: Vocab,
    merges: Merges,
    special_tokens: list[str] | None,
    probability: float,
    seed: int,
    *,
    pattern: str = GPT2_PATTERN,
    rule: str = "pair",
    text_index: int = 0,
) -> list[int]:
    """:func:`reference_encode` with BPE-dropout (see :func:`dropout_merge`): the pair rule ranks a
    pair by its merge, the token rule (tiktoken's vocabularies, rank = id) by the id of the
    token it makes. Special tokens are never dropped; a probability of 0 is plain encoding."""
    special_tokens = list(special_tokens or [])
    token_to_id = {token: token_id for token_id, token in sorted(vocab.items())}
    merge_rank = {pair: rank for rank, pair in reversed(list(enumerate(merges)))}  # a pair's first rank

    def rank_of(left: bytes, right: bytes) -> int | None:
        if rule == "pair":
            return merge_rank.get((left, right))
        return token_to_id.get(left + right)

    ids: list[int] = []
    offset = 0  # in bytes, in the whole text
    for index, piece in enumerate(split_on_specials(text, special_tokens, keep=True)):
        if index % 2 == 1:
            ids.append(token_to_id[piece.encode("utf-8")])
        else:
            at = offset
            for pretoken in pretokenize(piece, pattern):
                draws = PieceDraws(seed, text_index, at, probability)
                if len(pretoken) == 1:
                    ids.append(token_to_id[pretoken])
                else:
                    whole = token_to_id.get(pretoken) if rule == "token" else None
                    ids.extend(token_to_id[token] for token in dropout_merge(pretoken, rank_of, draws, whole))
                at += len(pretoken)
        offset += len(piece.encode("utf-8"))
    return ids


# SuperBPE (Liu et al., 2025), as its repository (github.com/PythonNut/superbpe) trains it.

SUPERBPE_REGEX = r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r\n/]*| +(?!\S)"
"""Its stage-2 regex (scripts/extend_tokenizer.sh)."""


def superbpe_pretokenize(text: str) -> list[bytes]:
    """SuperBPE's stage-2 pieces of a text without special tokens, as its training makes them:
    Hugging Face's trainer reads the text a line at a time (each line with its ``\n``); its
    ``Split(regex, behavior="isolated")`` keeps each match and each stretch between two matches
    as pieces; its trainer never makes a token holding ``": "``, which is a cut after each colon
    followed by a space."""
    pieces: list[str] = []
    for line in _lines(text):
        position = 0
        for match in regex.finditer(SUPERBPE_REGEX, line):
            if match.start() > position:
                pieces.append(line[position:match.start()])
            pieces.append(match.group())
            position = match.end()
        if position < len(line):
            pieces.append(line[position:])
    return [part.encode("utf-8") for piece in pieces for part in _cut_colons(piece)]


def _lines(text: str) -> list[str]:
    """``text`` cut after each ``\n`` (only: Hugging Face reads lines so), each keeping it."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def _cut_colons(piece: str) -> list[str]:
    """``piece`` cut after each colon that a space follows."""
    parts, start = [], 0
    for index in range(len(piece) - 1):
        if piece[index] == ":" and piece[index + 1] == " ":
            parts.append(piece[start:index + 1])
            start = index + 1
    parts.append(piece[start:])
    return [part for part in parts if part]


def stage_pretokens(text: str, special_tokens: list[str], pattern: str) -> Counter[bytes]:
    """How often each pre-token of a stage occurs: ``pattern`` a regex, or ``"superbpe"``."""
    counts: Counter[bytes] = Counter()
    for piece in split_on_specials(text, special_tokens, keep=False):
        counts.update(superbpe_pretokenize(piece) if pattern == "superbpe" else pretokenize(piece, pattern))
    return counts


def reference_train_stages(
    text: str,
    stages: list[tuple[str, int, int | None]],
    special_tokens: list[str],
    *,
    special_tokens_at: str = "start",
    tie_break: str = "cs336",
) -> tuple[Vocab, Merges]:
    """A training in stages, each ``(pattern, vocab_size, max_words)``: stage 1 is ordinary BPE
    with its pattern to its vocab size; each later stage splits the text with its own pattern,
    applies every merge so far to each piece in order (each merge everywhere, as learned), and
    goes on merging to its vocab size. The vocabulary: the 256 bytes, one token per merge of
    stage 1 and one per later merge whose bytes are new, in order; the special tokens first or
    last."""
    merges: Merges = []
    tokens = [bytes([b]) for b in range(256)]
    for number, (pattern, vocab_size, max_words) in enumerate(stages):
        words: Counter[tuple[bytes, ...]] = Counter()
        for pretoken, count in stage_pretokens(text, special_tokens, pattern).items():
            word = tuple(bytes([b]) for b in pretoken)
            for merge in merges:
                word = merge_pair(word, merge)
            words[word] += count
        learned = reference_merges(
            words, vocab_size - len(special_tokens) - len(tokens), tie_break=tie_break, made=tokens[256:], max_words=max_words,
        )
        merges += learned
        tokens += [left + right for left, right in learned if number == 0 or left + right not in tokens]
    specials = [token.encode("utf-8") for token in special_tokens]
    ordered = specials + tokens if special_tokens_at == "start" else tokens + specials
    return dict(enumerate(ordered)), merges


# Parity-aware BPE (Foroutan et al., 2025), as Hugging Face's ``ParityBpeTrainer`` trains it.


class WindowStuck(Exception):
    """The window variant's choice where Hugging Face's loops forever: every language with pairs
    left is over its share of the window, and the first language (the default of its search)
    too, while a language with no pair left is not yet excluded."""


def parity_window_pick(scores: list[float], window: list[int], window_size: int, threshold: float, when_stuck: str = "raise") -> int:
    """The window variant's choice (Hugging Face's ``select_language_window``): the language of the
    highest score (the lowest index among equals) whose share of the ``window`` (the languages
    chosen lately, counted over ``window_size``) is at most ``threshold``; the languages over it
    are excluded one at a time. A language that has no pair left scores ``-inf`` and is never the
    highest: when no language is left to choose, the search's default, the first, is taken.
    Where Hugging Face's search never ends (:class:`WindowStuck`): ``when_stuck="raise"``
    raises it, ``"highest"`` takes the highest score of all (bpestore's choice there)."""
    included = [True] * len(scores)
    while True:
        best, best_score = 0, -float("inf")
        for index, score in enumerate(scores):
            if included[index] and score > best_score:
                best, best_score = index, score
        if window.count(best) / window_size <= threshold:
            return best
        already_excluded = not included[best]
        included[best] = False
        if not any(included):
            return best
        if already_excluded:
            if when_stuck == "raise":
                raise WindowStuck()
            return max(range(len(scores)), key=lambda index: (scores[index], -index))


def tokens_of(words: Counter[tuple[bytes, ...]]) -> int:
    """The tokens of a corpus whose words are ``words`` (each a tuple of tokens, with its count)."""
    return sum(len(word) * count for word, count in words.items())


def as_words(counts: Counter[bytes]) -> Counter[tuple[bytes, ...]]:
    """Pre-token counts as words of single bytes."""
    return Counter({tuple(bytes([b]) for b in pretoken): count for pretoken, count in counts.items()})


def reference_parity_merges(
    train: list[Counter[bytes]],
    num_merges: int,
    *,
    dev: list[Counter[bytes]] | None = None,
    ratio: list[float] | None = None,
    variant: str = "base",
    window_size: int = 100,
    alpha: float = 2.0,
    global_merges: int = 0,
    tie_break: str = "cs336",
    when_stuck: str = "raise",
) -> Merges:
    """Parity-aware BPE on one corpus per language (``train``: each language's pre-token counts).

    Each merge is first chosen for one language: the one whose text takes the most tokens, on its
    part of the parallel development set ``dev`` (the same content in every language); with
    per-language ``ratio`` instead, the one whose training text is least compressed (its first
    token count over its current one) relative to its ratio; with neither, the one whose
    training text takes the most tokens. The ``window`` variant skips a language chosen for more
    than ``alpha`` / languages of the last ``window_size`` merges (see
    :func:`parity_window_pick`). That language's most frequent pair is merged, in every
    language's words (and the development set's); a language with no pair left is passed over
    (in the window variant, after it was chosen). The first ``global_merges`` merges are plain
    BPE's on all the languages' counts together.

    Among equal counts: CS336's greatest ``(left bytes, right bytes)``, or with
    ``tie_break="huggingface"`` the greatest pair of byte-level strings (``ParityBpeTrainer``
    compares its tokens' strings, not their ids as ``BpeTrainer`` does). ``when_stuck``: see
    :func:`parity_window_pick`."""
    words = [as_words(counts) for counts in train]
    dev_words = [as_words(counts) for counts in dev] if dev is not None else None
    initial = [tokens_of(language) for language in words]

    def key(pair: tuple[bytes, bytes]) -> tuple[object, ...]:
        if tie_break == "huggingface":
            return tuple(byte_level_code(b) for b in pair[0]), tuple(byte_level_code(b) for b in pair[1])
        return pair

    def best_pair(languages: list[Counter[tuple[bytes, ...]]]) -> tuple[bytes, bytes] | None:
        pair_counts: Counter[tuple[bytes, bytes]] = Counter()
        for language in languages:
            for word, count in language.items():
                for pair in zip(word, word[1:]):
                    pair_counts[pair] += count
        if not pair_counts:
            return None
        return max(pair_counts, key=lambda pair: (pair_counts[pair], key(pair)))

    threshold = alpha / len(train)
    window: list[int] = []
    exhausted: set[int] = set()
    merges: Merges = []
    while len(merges) < num_merges and len(exhausted) < len(train):
        if len(merges) < global_merges:
            best = best_pair(words)
            if best is None:
                break
        else:
            if ratio is not None:
                # (the float operations of Hugging Face's, in its order)
                scores = [-((first / tokens_of(language)) / r) for first, language, r in zip(initial, words, ratio)]
            else:
                scores = [tokens_of(language) for language in (dev_words if dev_words is not None else words)]
            scores = [-float("inf") if index in exhausted else score for index, score in enumerate(scores)]  # type: ignore[misc]
            if variant == "window":
                chosen = parity_window_pick(scores, window, window_size, threshold, when_stuck)
                window = (window + [chosen])[-window_size:]
            else:
                chosen = max((index for index in range(len(train)) if index not in exhausted), key=lambda index: (scores[index], -index))
            best = best_pair([words[chosen]])
            if best is None:
                exhausted.add(chosen)
                continue
        merges.append(best)
        for language in [*words, *(dev_words or [])]:
            merged: Counter[tuple[bytes, ...]] = Counter()
            for word, count in language.items():
                merged[merge_pair(word, best)] += count
            language.clear()
            language.update(merged)
    return merges
