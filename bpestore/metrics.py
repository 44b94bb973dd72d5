"""How well a tokenizer fits a text: the numbers people compare tokenizers by.

- **bytes per token**: the UTF-8 bytes of the text over its tokens (higher: better compression);
- **fertility**: tokens per whitespace-separated word (lower: words split less);
- **Rényi efficiency** of the unigram distribution of the tokens, after Zouhar et al. (2023),
  "Tokenization and the Noiseless Channel" (ACL 2023, arXiv:2306.16842): the Rényi entropy of order
  alpha of the tokens' relative frequencies, divided by the largest entropy a vocabulary of that size
  can have, ``log |V|``. The paper found alpha = 2.5 to predict downstream quality (BLEU) best, and
  that is the default here. It is 1 when every token of the vocabulary is used equally often, and
  lower when a few tokens take most of the text or many are never used;
- **share of the vocabulary used**: the tokens that occur at least once, over the vocab size.

The formulas are plain functions of counts (:func:`renyi_entropy`, :func:`renyi_efficiency`, ...);
:func:`measure_text` and :func:`measure_file` encode a text and gather the counts;
:func:`measure_counts` measures a corpus from its pre-token counts (as the store keeps them) without
the text.
"""

from __future__ import annotations

import math
import os
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
    "count_words",
    "fertility",
    "measure_counts",
    "measure_file",
    "measure_text",
    "renyi_efficiency",
    "renyi_entropy",
    "vocab_used",
]

DEFAULT_RENYI_ALPHA = 2.5
"""The order of the Rényi entropy that Zouhar et al. (2023) found to correlate best with BLEU."""


def bytes_per_token(num_bytes: int, num_tokens: int) -> float | None:
    """``num_bytes / num_tokens``; None for no tokens."""
    return num_bytes / num_tokens if num_tokens else None


def fertility(num_tokens: int, num_words: int) -> float | None:
    """Tokens per whitespace-separated word; None for no words."""
    return num_tokens / num_words if num_words else None


def renyi_entropy(counts: Iterable[int] | np.ndarray, alpha: float = DEFAULT_RENYI_ALPHA) -> float | None:
    """The Rényi entropy of order ``alpha`` (in nats) of the distribution ``p = counts / sum(counts)``:
    ``log(sum(p ** alpha)) / (1 - alpha)``, and Shannon's ``-sum(p log p)`` for ``alpha == 1`` (its
    limit). Zero counts do not contribute. None when there is nothing counted.
    """
    import numpy as np
    if not alpha > 0:
        raise ValueError(f"alpha must be positive, got {alpha}")
    values = np.asarray(counts if isinstance(counts, np.ndarray) else list(counts), dtype=np.float64)
    values = values[values > 0]
    total = values.sum()
    if total <= 0:
        return None
    p = values / total
    if alpha == 1:
        return float(-(p * np.log(p)).sum())
    return float(np.log((p**alpha).sum()) / (1 - alpha))


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

    @property
    def bytes_per_token(self) -> float | None:
        return bytes_per_token(self.bytes, self.tokens)

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
        )

    def to_dict(self, alpha: float = DEFAULT_RENYI_ALPHA) -> dict[str, Any]:
        """JSON-ready: the sizes and the metrics (not the counts per id)."""
        return {
            "bytes": self.bytes,
            "words": self.words,
            "tokens": self.tokens,
            "distinct_tokens": self.distinct_tokens,
            "bytes_per_token": self.bytes_per_token,
            "fertility": self.fertility,
            "renyi_efficiency": self.renyi_efficiency(alpha),
            "renyi_alpha": alpha,
            "vocab_used": self.vocab_used,
        }


def _counts_array(tokenizer: Tokenizer) -> np.ndarray:
    import numpy as np
    return np.zeros(max(tokenizer.vocab) + 1 if tokenizer.vocab else 0, dtype=np.int64)


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
    return Measurement(
        bytes=len(text.encode("utf-8", errors="surrogatepass")),
        words=len(text.split()),
        tokens=len(ids),
        vocab_size=tokenizer.vocab_size,
        token_counts=_add_ids(_counts_array(tokenizer), ids),
    )


def measure_file(tokenizer: Tokenizer, path: str | os.PathLike[str], *, on_bytes: Callable[[int], None] | None = None) -> Measurement:
    """Encode the UTF-8 file at ``path`` with ``tokenizer`` (streaming, in bounded memory) and
    measure it; ``on_bytes(n)`` is called as bytes are read (for progress bars)."""
    num_bytes = 0
    words = WordCounter()

    def read(n: int) -> None:
        nonlocal num_bytes
        num_bytes += n
        if on_bytes is not None:
            on_bytes(n)

    def blocks() -> Iterator[str]:
        for block in iter_text_blocks(path, on_bytes=read):
            words.feed(block)
            yield block

    counts = _counts_array(tokenizer)
    tokens = 0
    for ids in tokenizer.encode_blocks(blocks()):
        tokens += len(ids)
        counts = _add_ids(counts, ids)
    return Measurement(bytes=num_bytes, words=words.words, tokens=tokens, vocab_size=tokenizer.vocab_size, token_counts=counts)


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

    Words are not in the counts: ``words`` is 0, so ``fertility`` is None (measure a text or a file
    for it).

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
    return Measurement(
        bytes=int((sizes * weights).sum()),
        words=0,
        tokens=int((lengths * weights).sum()),
        vocab_size=tokenizer.vocab_size,
        token_counts=token_counts,
    )
