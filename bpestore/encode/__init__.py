"""Encoding: ``Tokenizer`` (:mod:`.tokenizer`, over the Rust engine's ``Encoder``) and whole files
(:mod:`.files`).

The last stage of the pipeline. Uses pre-tokenizing; knows nothing of training.
"""
