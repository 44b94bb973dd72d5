"""The one door to the compiled engine, ``bpestore._engine`` (the Rust crates under ``crates/``,
typed in ``bpestore/_engine.pyi``), as tiktoken's ``core.py`` is to its extension: every other
module of the package takes the engine's names from here (``tests/test_layout.py`` checks it; the
import-linter contracts cannot see an extension module).

Here, once, the engine is also handed the project's exception classes: the one table of the
errors that cross the seam. The engine raises them without importing any Python module of the
project (without this table it raises plain ``ValueError`` s with the same messages).
"""

from __future__ import annotations

from ._engine import (
    CL100K_PATTERN,
    DEFAULT_CACHE_ENTRIES,
    GPT2_DIGIT_RUNS_PATTERN,
    GPT2_DIGITS_PATTERN,
    GPT2_PATTERN,
    LLAMA3_PATTERN,
    O200K_PATTERN,
    QWEN2_PATTERN,
    PARTIAL_NPY_MARK,
    Encoder,
    IdIterator,
    NpyWriter,
    PretokenCounts,
    Pretokenizer,
    SortedRows,
    StreamEncoder,
    __version__,
    byte_level_merges,
    byte_level_vocab_json,
    byte_level_tokens,
    check_model,
    token_ids,
    count_file,
    count_texts,
    file_chunk_boundaries,
    first_merge_out_of_id_order,
    learn_merges,
    learn_parity_merges,
    normalize,
    pipeline_spans,
    register_errors,
    pack_model,
    pair_merges_from_ranks,
    read_tiktoken,
    unpack_model,
    unpack_vocab,
    utf8_error,
)
from .errors import CorpusDecodeError, PatternError

# The engine's failures, as the project's classes:
# - a pattern that fails on a text (backtracking limit, text no match covers): PatternError(message)
# - a corpus or input file that is not UTF-8: CorpusDecodeError(path, offset, reason)
register_errors(PatternError, CorpusDecodeError)

__all__ = [
    "CL100K_PATTERN",
    "DEFAULT_CACHE_ENTRIES",
    "GPT2_DIGIT_RUNS_PATTERN",
    "GPT2_DIGITS_PATTERN",
    "GPT2_PATTERN",
    "LLAMA3_PATTERN",
    "O200K_PATTERN",
    "QWEN2_PATTERN",
    "PARTIAL_NPY_MARK",
    "NpyWriter",
    "Encoder",
    "IdIterator",
    "PretokenCounts",
    "Pretokenizer",
    "SortedRows",
    "StreamEncoder",
    "__version__",
    "byte_level_merges",
    "byte_level_vocab_json",
    "byte_level_tokens",
    "check_model",
    "token_ids",
    "count_file",
    "count_texts",
    "file_chunk_boundaries",
    "first_merge_out_of_id_order",
    "learn_merges",
    "learn_parity_merges",
    "normalize",
    "pipeline_spans",
    "pack_model",
    "pair_merges_from_ranks",
    "read_tiktoken",
    "unpack_model",
    "unpack_vocab",
    "utf8_error",
]
