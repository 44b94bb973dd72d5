"""How well a tokenizer fits a text: the numbers people compare tokenizers by.

- **bytes per token**: the UTF-8 bytes of the text over its tokens (higher: better compression);
- **characters per token**: the text's characters (Unicode code points) over its tokens: unlike
  bytes, the same unit for every script (a Chinese character is 3 bytes, a Latin letter 1);
- **fertility**: tokens per whitespace-separated word (lower: words split less);
- **Rényi efficiency** of the unigram distribution of the tokens, after Zouhar et al. (2023),
  "Tokenization and the Noiseless Channel" (ACL 2023, arXiv:2306.16842): the Rényi entropy of order
  alpha of the tokens' relative frequencies, divided by the largest entropy a vocabulary of that size
  can have, ``log |V|``. The paper found alpha = 2.5 to predict downstream quality (BLEU) best, and
  that is the default here. It is 1 when every token of the vocabulary is used equally often, and
  lower when a few tokens take most of the text or many are never used;
- **share of the vocabulary used**: the tokens that occur at least once, over the vocab size;
- **single-token-word rate**: the share of the whitespace-separated words that the tokenizer, on
  the text itself, keeps whole in one token (see :func:`single_token_word_rate`);
- **parity** (the token premium of Petrov et al. 2023, "Language Model Tokenizers Introduce
  Unfairness Between Languages"): a text's tokens over a reference text's, for parallel texts
  (the same content in two languages): 1.5 means the text costs 50 % more tokens; over many
  languages, the **Gini coefficient** of their token counts on parallel texts sums up how unequally
  a tokenizer charges them (0: every language pays the same; see :func:`gini`).

The formulas are plain functions of counts (:func:`renyi_entropy`, :func:`renyi_efficiency`, ...);
:func:`measure_text` and :func:`measure_file` encode a text and gather the counts;
:func:`measure_counts` measures a corpus from its pre-token counts (as the store keeps them) without
the text.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .encode.tokenizer import Tokenizer
from .pretokenize.corpus import iter_text_blocks

if TYPE_CHECKING:
    import numpy as np  # (imported where it runs: commands that do not encode, `train` among them, never load it)

__all__ = [
    "DEFAULT_RENYI_ALPHA",
    "Measurement",
    "WordCounter",
    "bytes_per_token",
    "characters_per_token",
    "count_words",
    "fertility",
    "gini",
    "measure_counts",
    "measure_file",
    "measure_text",
    "parity",
    "renyi_efficiency",
    "renyi_entropy",
    "single_token_word_rate",
    "vocab_used",
]

DEFAULT_RENYI_ALPHA = 2.5
"""The order of the Rényi entropy that Zouhar et al. (2023) found to correlate best with BLEU."""


def bytes_per_token(num_bytes: int, num_tokens: int) -> float | None:
    """``num_bytes / num_tokens``; None for no tokens."""
    return num_bytes / num_tokens if num_tokens else None


def characters_per_token(num_characters: int | None, num_tokens: int) -> float | None:
    """``num_characters / num_tokens`` (characters: Unicode code points, ``len`` of a str); None
    for no tokens or characters not known."""
    return num_characters / num_tokens if num_tokens and num_characters is not None else None


def single_token_word_rate(single_token_words: int | None, num_words: int) -> float | None:
    """``single_token_words / num_words``; None for no words or a count not known.

    A *word* is a maximal run of non-whitespace characters (what ``str.split()`` returns, Unicode
    whitespace included). A word is a *single-token word* when exactly one token of the text's own
    encoding holds bytes of it: no token boundary falls strictly inside the word's bytes. The
    token may hold more than the word (GPT-2's ``" cat"`` holds the space before ``cat``; the
    space does not count), but the word must not be cut: ``"cat."`` is two tokens (``cat`` and
    ``.`` are two pre-tokens) and so is not a single-token word, and neither is a sentence of
    Chinese without spaces, which is one word. The words are those of the text in context, not
    encoded alone, so every occurrence counts (a word that is one token after a space and two at
    the start of a line counts once each way)."""
    return single_token_words / num_words if num_words and single_token_words is not None else None


def parity(num_tokens: int, reference_tokens: int) -> float | None:
    """A text's tokens over a reference text's tokens: the token premium of the text against the
    reference. Meaningful for parallel texts (the same content, translated): 1.0 is parity, 2.0
    means the text costs twice the tokens. None when the reference has no tokens."""
    return num_tokens / reference_tokens if reference_tokens else None


def gini(values: Sequence[float]) -> float | None:
    """The Gini coefficient of ``values`` (none negative): the mean absolute difference of every
    ordered pair, over twice the mean. 0 when all are equal; (n-1)/n when one holds everything.
    Over the token counts of parallel texts, one per language, it measures how unequally a
    tokenizer charges the languages for the same content. None for fewer than two values or a
    mean of 0.

    >>> gini([10, 10, 10]), gini([0, 0, 30]), round(gini([1, 2, 3, 4]), 3)
    (0.0, 0.6666666666666666, 0.25)
    """
    if len(values) < 2:
        return None
    if any(value < 0 for value in values):
        raise ValueError("the Gini coefficient takes no negative values")
    total = sum(values)
    if total == 0:
        return None
    # sum over ordered pairs |x_i - x_j| = 2 * sum_i (2i - n + 1) x_(i), the values sorted
    ordered = sorted(values)
    n = len(ordered)
    spread = sum((2 * index - n + 1) * value for index, value in enumerate(ordered))
    return float(spread / (n * total))


def fertility(num_tokens: int, num_words: int) -> float | None:
    """Tokens per whitespace-separated word; None for no words."""
    return num_tokens / num_words if num_words else None


def renyi_entropy(counts: Iterable[int] | np.ndarray, alpha: float = DEFAULT_RENYI_ALPHA) -> float | None:
    """The Rényi entropy of order ``alpha`` (in nats) of the distribution ``p = counts / sum(counts)``:
    ``log(sum(p ** alpha)) / (1 - alpha)``, and Shannon's ``-sum(p log p)`` for ``alpha == 1`` (its
    limit). Zero counts do not contribute. None when there is nothing counted.
    """
    import numpy as np
    if not 0 < alpha < math.inf:  # (NaN fails too)
        raise ValueError(f"alpha must be a positive, finite number, got {alpha}")
    values = np.asarray(counts if isinstance(counts, np.ndarray) else list(counts), dtype=np.float64)
    values = values[values > 0]
    total = values.sum()
    if total <= 0:
        return None
    p = values / total
    if alpha == 1:
        return float(-(p * np.log(p)).sum())
    with np.errstate(under="ignore", over="ignore"):
        powers = float((p**alpha).sum())
    if 0 < powers < math.inf:
        return float(np.log(powers) / (1 - alpha))
    # A large alpha underflows every p**alpha to 0 (log 0: an infinite "entropy"). Then
    # log(sum p**alpha) = alpha*log(p_max) + log(sum (p/p_max)**alpha), and with alpha/(1 - alpha)
    # written 1/(1/alpha - 1) the entropy tends to the min-entropy -log(p_max), as it should.
    log_p = np.log(p)
    largest = float(log_p.max())
    scaled = float(np.log(np.exp(alpha * (log_p - largest)).sum()))
    return float(largest / (1 / alpha - 1) + scaled / (1 - alpha))



def renyi_efficiency(counts: Iterable[int] | np.ndarray, vocab_size: int, alpha: float = DEFAULT_RENYI_ALPHA) -> float | None:
    """Zouhar et al. (2023)'s efficiency: :func:`renyi_entropy` of the token counts over
    ``log(vocab_size)``, the entropy of the uniform distribution over the vocabulary. None when
    nothing is counted or the vocabulary has a single token."""
    if vocab_size < 2:
        return None
    entropy = renyi_entropy(counts, alpha)
    return None if entropy is None else entropy / math.log(vocab_size)


def vocab_used(counts: Iterable[int] | np.ndarray, vocab_size: int) -> float | None:
    """The share of the vocabulary that occurs: tokens with a count above zero over ``vocab_size``."""
    import numpy as np
    if vocab_size <= 0:
        return None
    values = np.asarray(counts if isinstance(counts, np.ndarray) else list(counts))
    return int(np.count_nonzero(values)) / vocab_size


class WordCounter:
    """Counts whitespace-separated words (``str.split()``'s) in text fed block by block, counting a
    word cut between two blocks once."""

    def __init__(self) -> None:
        self.words = 0
        self._in_word = False

    def feed(self, block: str) -> None:
        if not block:
            return
        self.words += len(block.split())
        if self._in_word and not block[0].isspace():
            self.words -= 1  # the word that straddles the cut was counted with the previous block
        self._in_word = not block[-1].isspace()


def count_words(blocks: Iterable[str]) -> int:
    """Whitespace-separated words in the concatenation of ``blocks`` (see :class:`WordCounter`)."""
    counter = WordCounter()
    for block in blocks:
        counter.feed(block)
    return counter.words


@dataclass(frozen=True)
class Measurement:
    """One tokenizer on one text: sizes, the count of each token id, and the metrics from them."""

    bytes: int
    words: int
    tokens: int
    vocab_size: int
    token_counts: np.ndarray
    """How often each id occurs (index = id; as long as the largest id + 1)."""
    characters: int | None = None
    """The text's characters (code points); None where not counted."""
    single_token_words: int | None = None
    """The words kept whole in one token (see :func:`single_token_word_rate`); None where not
    known (:func:`measure_counts`: the counts keep no words)."""

    @property
    def bytes_per_token(self) -> float | None:
        return bytes_per_token(self.bytes, self.tokens)

    @property
    def characters_per_token(self) -> float | None:
        return characters_per_token(self.characters, self.tokens)

    @property
    def single_token_word_rate(self) -> float | None:
        return single_token_word_rate(self.single_token_words, self.words)

    @property
    def fertility(self) -> float | None:
        return fertility(self.tokens, self.words)

    def renyi_efficiency(self, alpha: float = DEFAULT_RENYI_ALPHA) -> float | None:
        return renyi_efficiency(self.token_counts, self.vocab_size, alpha)

    @property
    def distinct_tokens(self) -> int:
        import numpy as np
        return int(np.count_nonzero(self.token_counts))

    @property
    def vocab_used(self) -> float | None:
        return vocab_used(self.token_counts, self.vocab_size)

    @staticmethod
    def combine(parts: Sequence[Measurement]) -> Measurement:
        """The measurement of the texts of ``parts`` taken together (same tokenizer)."""
        import numpy as np
        if not parts:
            raise ValueError("nothing to combine")
        length = max(len(part.token_counts) for part in parts)
        counts = np.zeros(length, dtype=np.int64)
        for part in parts:
            counts[: len(part.token_counts)] += part.token_counts
        return Measurement(
            bytes=sum(part.bytes for part in parts),
            words=sum(part.words for part in parts),
            tokens=sum(part.tokens for part in parts),
            vocab_size=parts[0].vocab_size,
            token_counts=counts,
            characters=_sum_known(part.characters for part in parts),
            single_token_words=_sum_known(part.single_token_words for part in parts),
        )

    def to_dict(self, alpha: float = DEFAULT_RENYI_ALPHA) -> dict[str, Any]:
        """JSON-ready: the sizes and the metrics (not the counts per id)."""
        return {
            "bytes": self.bytes,
            "words": self.words,
            "tokens": self.tokens,
            "distinct_tokens": self.distinct_tokens,
            "characters": self.characters,
            "single_token_words": self.single_token_words,
            "bytes_per_token": self.bytes_per_token,
            "characters_per_token": self.characters_per_token,
            "fertility": self.fertility,
            "renyi_efficiency": self.renyi_efficiency(alpha),
            "renyi_alpha": alpha,
            "vocab_used": self.vocab_used,
            "single_token_word_rate": self.single_token_word_rate,
        }


def _sum_known(values: Iterable[int | None]) -> int | None:
    """The sum, or None if any value is not known."""
    total = 0
    for value in values:
        if value is None:
            return None
        total += value
    return total


_WHITESPACE_LIMIT = 0x3001  # every character str.isspace() holds true for is below this


def _whitespace_table() -> np.ndarray:
    """Whether each code point below :data:`_WHITESPACE_LIMIT` is whitespace (``str.isspace``)."""
    import numpy as np
    return np.array([chr(code).isspace() for code in range(_WHITESPACE_LIMIT)], dtype=np.bool_)


_NON_ASCII_WHITESPACE = re.compile("[" + "".join(chr(code) for code in range(0x80, _WHITESPACE_LIMIT) if chr(code).isspace()) + "]")
"""Whitespace that takes more than one byte in UTF-8 (NEL, no-break space, U+3000, ...)."""

_LARGEST_SPAN = 1 << 24
"""Above this many bytes of words to decide at once, boundaries are looked up (searchsorted)
instead of counted along the bytes (a cumulative sum as long as the span)."""


class _WordCuts:
    """Counts the single-token words of a text (see :func:`single_token_word_rate`) from its text
    and its token ids, each fed in pieces, in bounded memory: words and token boundaries are byte
    offsets into the whole text, and a word is decided (no boundary strictly inside it) once the
    tokens reach its end, then forgotten with the boundaries no later word needs."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        import numpy as np
        vocab = {**tokenizer.vocab, **tokenizer.model.aliases}  # (a twin alias is an id encoding may give)
        self._token_bytes = np.zeros(max(vocab) + 1 if vocab else 0, dtype=np.int64)
        self._token_bytes[np.fromiter(vocab.keys(), dtype=np.int64, count=len(vocab))] = np.fromiter(
            map(len, vocab.values()), dtype=np.int64, count=len(vocab)
        )
        self._whitespace = _whitespace_table()
        self._byte_is_space = np.zeros(256, dtype=np.bool_)  # for text with no whitespace beyond ASCII
        self._byte_is_space[:128] = self._whitespace[:128]
        self._text_bytes = 0  # bytes of text fed so far
        self._open_word: int | None = None  # where a word that the last piece of text ended in starts
        self._starts: list[np.ndarray] = []  # the complete words not yet decided
        self._ends: list[np.ndarray] = []
        self._tokens_end = 0  # bytes the tokens fed so far cover
        self._boundaries = np.zeros(0, dtype=np.int64)  # token ends a word not yet decided may need
        self.words = 0
        self.single_token_words = 0

    def feed_text(self, text: str) -> None:
        import numpy as np
        if not text:
            return
        if _NON_ASCII_WHITESPACE.search(text) is None:
            # Every whitespace character is one byte: words are the runs of other bytes (the
            # bytes of a multi-byte character are never whitespace).
            units = np.frombuffer(text.encode("utf-8", errors="surrogatepass"), dtype=np.uint8)
            space = self._byte_is_space[units]
            offsets = np.arange(self._text_bytes, self._text_bytes + len(units) + 1, dtype=np.int64)  # of each byte
        else:  # by code points, each at its byte offset
            codes = np.frombuffer(text.encode("utf-32-le", errors="surrogatepass"), dtype="<u4")
            extra = (codes >= 0x80).astype(np.int64)  # UTF-8 bytes beyond the first
            extra += codes >= 0x800
            extra += codes >= 0x10000
            offsets = np.arange(self._text_bytes, self._text_bytes + len(codes) + 1, dtype=np.int64)
            offsets[1:] += np.cumsum(extra)
            space = self._whitespace[np.minimum(codes, _WHITESPACE_LIMIT - 1)] & (codes < _WHITESPACE_LIMIT)
        word = ~space
        starts = offsets[:-1][word & np.concatenate(([True], space[:-1]))]
        ends = offsets[1:][word & np.concatenate((space[1:], [True]))]
        if self._open_word is not None:
            if word[0]:  # the open word goes on
                starts[0] = self._open_word
            else:  # it ended with the last piece
                starts, ends = np.concatenate(([self._open_word], starts)), np.concatenate(([self._text_bytes], ends))
        self._open_word = None
        if word[-1]:  # the last word may go on in the next piece
            self._open_word = int(starts[-1])
            starts, ends = starts[:-1], ends[:-1]
        self._starts.append(starts)
        self._ends.append(ends)
        self._text_bytes = int(offsets[-1])

    def finish_text(self) -> None:
        import numpy as np
        if self._open_word is not None:
            self._starts.append(np.array([self._open_word], dtype=np.int64))
            self._ends.append(np.array([self._text_bytes], dtype=np.int64))
            self._open_word = None

    def feed_ids(self, ids: np.ndarray) -> None:
        import numpy as np
        if not len(ids):
            return
        ends = np.cumsum(self._token_bytes[ids]) + self._tokens_end
        self._tokens_end = int(ends[-1])
        self._boundaries = np.concatenate((self._boundaries, ends))
        self._decide()

    def _decide(self) -> None:
        import numpy as np
        if not self._starts:
            return
        starts, ends = np.concatenate(self._starts), np.concatenate(self._ends)
        ready = int(np.searchsorted(ends, self._tokens_end, side="right"))  # words the tokens cover
        if ready:
            self.words += ready
            self.single_token_words += int(np.count_nonzero(self._boundaries_inside(starts[:ready], ends[:ready]) == 0))
        starts, ends = starts[ready:], ends[ready:]
        self._starts, self._ends = ([starts], [ends]) if len(starts) else ([], [])
        # A later word starts at or after this: the boundaries up to it cannot fall inside one.
        first = int(starts[0]) if len(starts) else (self._open_word if self._open_word is not None else self._text_bytes)
        self._boundaries = self._boundaries[np.searchsorted(self._boundaries, first, side="right") :]

    def _boundaries_inside(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """How many token boundaries fall strictly inside each word (``start < b < end``)."""
        import numpy as np
        low, high = int(starts[0]), int(ends[-1])
        if high - low > _LARGEST_SPAN:
            found: np.ndarray = np.searchsorted(self._boundaries, ends, side="left") - np.searchsorted(self._boundaries, starts, side="right")
            return found
        # below[k]: the boundaries in (low, low + k]; a word holds those in (start, end - 1]
        boundaries = self._boundaries
        span = boundaries[np.searchsorted(boundaries, low, side="right") : np.searchsorted(boundaries, high, side="left")]
        below = np.zeros(high - low + 1, dtype=np.int32)
        below[span - low] = 1
        np.cumsum(below, out=below)
        inside: np.ndarray = below[ends - 1 - low] - below[starts - low]
        return inside

    def finish(self) -> None:
        """The text and its ids are all fed: every word is decided."""
        self.finish_text()
        self._decide()
        assert not self._starts, "the tokens do not cover the text"


def _counts_array(tokenizer: Tokenizer) -> np.ndarray:
    import numpy as np
    return np.zeros(max([*tokenizer.vocab, *tokenizer.model.aliases], default=-1) + 1, dtype=np.int64)


def _add_ids(counts: np.ndarray, ids: np.ndarray) -> np.ndarray:
    import numpy as np
    if len(ids):
        found = np.bincount(ids, minlength=len(counts))
        if len(found) > len(counts):  # cannot happen for ids of the vocab; kept exact anyway
            counts = np.concatenate([counts, np.zeros(len(found) - len(counts), dtype=np.int64)])
        counts += found
    return counts


def measure_text(tokenizer: Tokenizer, text: str) -> Measurement:
    """Encode ``text`` with ``tokenizer`` and measure it."""
    ids = tokenizer.encode_to_array(text)
    cuts = _WordCuts(tokenizer)
    cuts.feed_text(text)
    cuts.feed_ids(ids)
    cuts.finish()
    return Measurement(
        bytes=len(text.encode("utf-8", errors="surrogatepass")),
        words=len(text.split()),
        tokens=len(ids),
        vocab_size=tokenizer.vocab_size,
        token_counts=_add_ids(_counts_array(tokenizer), ids),
        characters=len(text),
        single_token_words=cuts.single_token_words,
    )


def measure_file(tokenizer: Tokenizer, path: str | os.PathLike[str], *, on_bytes: Callable[[int], None] | None = None) -> Measurement:
    """Encode the UTF-8 file at ``path`` with ``tokenizer`` (streaming, in bounded memory) and
    measure it; ``on_bytes(n)`` is called as bytes are read (for progress bars)."""
    num_bytes = 0
    characters = 0
    cuts = _WordCuts(tokenizer)  # counts the words too (as WordCounter does), in the same pass

    def read(n: int) -> None:
        nonlocal num_bytes
        num_bytes += n
        if on_bytes is not None:
            on_bytes(n)

    def blocks() -> Iterator[str]:
        nonlocal characters
        for block in iter_text_blocks(path, on_bytes=read):
            cuts.feed_text(block)
            characters += len(block)
            yield block

    counts = _counts_array(tokenizer)
    tokens = 0
    for ids in tokenizer.encode_blocks(blocks()):
        tokens += len(ids)
        counts = _add_ids(counts, ids)
        cuts.feed_ids(ids)
    cuts.finish()
    return Measurement(
        bytes=num_bytes, words=cuts.words, tokens=tokens, vocab_size=tokenizer.vocab_size, token_counts=counts,
        characters=characters, single_token_words=cuts.single_token_words,
    )


def measure_counts(
    tokenizer: Tokenizer, counts: Mapping[bytes, int] | Iterable[tuple[bytes, int]], *, num_threads: int | None = None
) -> Measurement:
    """Measure ``tokenizer`` on a corpus known by its pre-token counts (pre-token bytes to how
    often each occurs, as :meth:`bpestore.Store.count` and the store keep them), without its text.

    Each distinct pre-token is encoded once (on ``num_threads`` threads) and weighted by its count.
    Encoding never joins two pre-tokens, so where ``tokenizer`` pre-tokenizes as the counts were
    made (the same pattern), the bytes, tokens and token counts, and so bytes per token, Rényi
    efficiency and the vocabulary used, are exactly those of :func:`measure_text` on the corpus
    with its special tokens left out (the counts hold none: special tokens cut the corpus). With
    another pattern it is an estimate in which no token spans two of the counts' pre-tokens.
    Special tokens' strings in a pre-token are encoded as ordinary text.

    Words are not in the counts: ``words`` is 0, so ``fertility`` and the single-token-word rate
    are None (measure a text or a file for them).

    Raises:
        ValueError: a pre-token is not valid UTF-8 (only counts made elsewhere can hold one), or a
            count is negative.
    """
    import numpy as np
    items = list(counts.items()) if isinstance(counts, Mapping) else list(counts)
    texts = []
    for pretoken, _ in items:
        try:
            texts.append(bytes(pretoken).decode("utf-8"))
        except UnicodeDecodeError as error:
            raise ValueError(f"pre-token {bytes(pretoken)!r} is not valid UTF-8 ({error.reason}): it cannot be encoded as text") from None
    weights = np.fromiter((count for _, count in items), dtype=np.int64, count=len(items))
    if len(weights) and weights.min() < 0:
        raise ValueError(f"counts must not be negative, got {int(weights.min())}")
    encoded = tokenizer.encode_ordinary_batch(texts, num_threads)
    lengths = np.fromiter((len(ids) for ids in encoded), dtype=np.int64, count=len(encoded))
    sizes = np.fromiter((len(pretoken) for pretoken, _ in items), dtype=np.int64, count=len(items))
    ids = np.fromiter((i for one in encoded for i in one), dtype=np.int64, count=int(lengths.sum()))
    token_counts = _counts_array(tokenizer)
    if len(ids):
        if ids.max() >= len(token_counts):  # cannot happen for ids of the vocab; kept exact anyway
            token_counts = np.concatenate([token_counts, np.zeros(int(ids.max()) + 1 - len(token_counts), dtype=np.int64)])
        np.add.at(token_counts, ids, np.repeat(weights, lengths))  # exact in int64, unlike bincount's float weights
    characters = np.fromiter((len(text) for text in texts), dtype=np.int64, count=len(texts))
    return Measurement(
        characters=int((characters * weights).sum()),
        bytes=int((sizes * weights).sum()),
        words=0,
        tokens=int((lengths * weights).sum()),
        vocab_size=tokenizer.vocab_size,
        token_counts=token_counts,
    )
