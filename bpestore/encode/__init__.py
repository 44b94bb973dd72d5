"""Encoding: ``Tokenizer`` (:mod:`.tokenizer`, over the Rust engine's ``Encoder``), whole files
(:mod:`.files`), and the merges of a ranked vocabulary (:mod:`.bpe`).

The last stage of the pipeline. Uses pre-tokenizing; knows nothing of training.
"""
