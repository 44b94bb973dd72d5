"""Token ranks -> merges: the one piece of BPE that stays in Python.

Encoding (both merge rules) runs in the Rust engine (crates/encode). Importing a tiktoken
vocabulary, which has ranks but no merges, needs the merges that make its tokens:
:func:`pair_merges_from_ranks` reconstructs them with tiktoken's own rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import itemgetter


def pair_merges_from_ranks(
    ranks: Mapping[bytes, int], on_token: Callable[[], None] | None = None
) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
    """Reconstruct a merges list from token ranks (a tiktoken vocabulary).

    For each multi-byte token, in rank order, apply tiktoken's rule to its bytes with only the
    tokens ranked below it; if that ends in exactly two tokens, they are the merge that makes it.
    Returns the merges and the tokens that no pair merge reaches; ``on_token`` is called after
    each token (for a progress bar).
    """
    merges: list[tuple[bytes, bytes]] = []
    unreachable: list[bytes] = []
    rank_of = ranks.get
    on_token = on_token or (lambda: None)
    for token, rank in sorted(ranks.items(), key=itemgetter(1)):
        on_token()
        if len(token) < 2:
            continue
        parts = [token[i : i + 1] for i in range(len(token))]
        while len(parts) > 2:
            best_rank, best_at = rank, -1
            for i in range(len(parts) - 1):
                candidate = rank_of(parts[i] + parts[i + 1])
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
