"""The typed face of ``bpestore._engine``, the Rust engine (crates/ in the repository).

Users do not import this module: the public API (``bpestore.Tokenizer``, ``bpestore.train_bpe``,
``bpestore.Store``) calls it. Each stage's bindings add their part below.
"""

__version__: str
