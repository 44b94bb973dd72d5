"""Counting a corpus given as many inputs: files, directories, globs, compressed files, or (from
Python) any iterable of strings. See :mod:`bpestore.pretokenize.inputs` for the rules: a file
boundary is a cut like a special token, and each string of an iterable is a document of its own.

Plain files are counted by the engine on threads (``count_file``); compressed files and strings
are streamed through ``count_texts`` in pieces cut where a cut changes nothing. Memory stays
bounded by the counts themselves, never by the corpus's size.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from ..engine import PretokenCounts, Pretokenizer
from ..engine import count_file as engine_count_file
from ..engine import count_texts as engine_count_texts
from ..pretokenize.inputs import CorpusFiles, is_compressed, iter_file_text, text_pieces
from ..pretokenize.patterns import GPT2_PATTERN
from ..progress import progress_bar

__all__ = ["CorpusFiles", "count_files", "count_strings", "is_compressed", "is_texts"]


def is_texts(corpus: object) -> bool:
    """Whether ``corpus`` is an iterable of texts rather than files: anything iterable but a path
    (``str``/``os.PathLike``) or a list, tuple or set of paths. To train on a list of strings,
    pass ``iter(the_list)``."""
    if isinstance(corpus, (str, os.PathLike, bytes)):
        return False
    if isinstance(corpus, (list, tuple, set, frozenset)):
        return False
    return isinstance(corpus, Iterable)


def count_strings(texts: Iterable[str], special_tokens: Sequence[str] = (), *, pattern: str = GPT2_PATTERN) -> PretokenCounts:
    """The pre-token counts of ``texts``, each a document of its own (cut at the special tokens),
    read one at a time (a generator or a Hugging Face ``datasets`` column is never held whole)."""

    def checked() -> Iterable[str]:
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"the corpus's texts must be str, item {index} is {type(text).__name__}")
            yield text

    return engine_count_texts(checked(), pattern, list(special_tokens))


def count_files(
    files: CorpusFiles,
    special_tokens: Sequence[str] = (),
    *,
    pattern: str = GPT2_PATTERN,
    workers: int | None = None,
    progress: bool = False,
    count_memory: int | None = None,
    spill_dir: str | os.PathLike[str] | None = None,
) -> PretokenCounts:
    """The pre-token counts of ``files`` as one corpus (each file's counts summed: a file
    boundary is a cut), with one progress bar over the bytes of all of them on disk.
    ``count_memory``: each plain file is counted in that much memory, spilling to ``spill_dir``
    (see :func:`bpestore.train.trainer.count_corpus`)."""
    specials = list(special_tokens)
    counts = PretokenCounts()
    cutter = Pretokenizer(pattern, specials)
    with progress_bar(progress, files.disk_bytes, "pre-tokenizing", unit="B", unit_scale=True) as bar:
        for path in files.paths:
            if is_compressed(path):
                pieces = text_pieces(iter_file_text(path, bar.update), cutter.last_safe_cut)
                counts.merge(engine_count_texts(pieces, pattern, specials))
            else:
                counted = engine_count_file(path, pattern, specials, workers, bar.update, max_memory=count_memory, spill_dir=spill_dir)
                counts.merge(counted)
    return counts
