"""Training: the CS336 entry points ``train_bpe`` / ``train_from_counts`` (:mod:`.trainer`).

Stages 2 and 3 of the pipeline (count -> merge), both in the Rust engine (``bpestore._engine``,
crates/train): pre-token counts of a corpus, counted with threads, then the merge loop. Knows
nothing of the store or encoding.
"""
