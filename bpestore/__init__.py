"""bpestore: byte-level BPE tokenizer trainer, encoder and persistent tokenizer store."""

from .corpus import CorpusDecodeError
from .tokenizer import Tokenizer
from .training import train_bpe

__all__ = ["CorpusDecodeError", "Tokenizer", "train_bpe"]
__version__ = "0.1.0"
