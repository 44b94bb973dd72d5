"""Training: counting a corpus's pre-tokens (:mod:`.counting`), the merge loop (:mod:`.merge`)
and the CS336 entry points ``train_bpe`` / ``train_from_counts`` (:mod:`.trainer`).

Stages 2 and 3 of the pipeline (count -> merge). Uses pre-tokenizing; knows nothing of the store or
encoding.
"""
