"""Training: the CS336 entry points ``train_bpe`` / ``train_from_counts`` / ``train_model``
(:mod:`.trainer`).

Stages 2 and 3 of the pipeline (count -> merge), both in the Rust engine (``bpestore._engine``,
crates/train): a corpus's pre-token counts, counted with threads, then the merge loop. Uses
pre-tokenizing; knows nothing of the store or encoding.
"""
