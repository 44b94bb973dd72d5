"""Encoding: ``Tokenizer`` (:mod:`.tokenizer`), its BPE (:mod:`.bpe`) and whole files
(:mod:`.files`).

The last stage of the pipeline. Uses pre-tokenizing; knows nothing of training.
"""
