"""bpestore: byte-level BPE tokenizer trainer, encoder and persistent tokenizer store."""

from .errors import CorpusDecodeError
from .encode.tokenizer import Tokenizer
from .train.trainer import train_bpe

__all__ = ["CorpusDecodeError", "Store", "Tokenizer", "train_bpe"]
__version__ = "0.1.0"


def __getattr__(name: str):
    # The store pulls in SQLAlchemy; import it only when it is asked for.
    if name == "Store":
        from .workflow import Store

        return Store
    raise AttributeError(f"module 'bpestore' has no attribute {name!r}")
