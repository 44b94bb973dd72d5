"""Pre-tokenizing: the pre-tokenizer patterns, special tokens, safe cuts and reading corpora.

Stage 1 of the pipeline (pre-tokenize -> count -> merge -> store -> load -> encode). Knows nothing
of training, the store or encoding.
"""

from .patterns import CL100K_PATTERN, GPT2_PATTERN, LLAMA3_PATTERN, O200K_PATTERN, QWEN2_PATTERN, SPLIT_SAFE_PATTERNS

__all__ = ["CL100K_PATTERN", "GPT2_PATTERN", "LLAMA3_PATTERN", "O200K_PATTERN", "QWEN2_PATTERN", "SPLIT_SAFE_PATTERNS"]
