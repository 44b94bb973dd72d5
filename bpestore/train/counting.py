"""Counting a corpus's pre-tokens: in this process or in worker processes, in bounded memory.

The corpus is read in chunks cut at safe places (:func:`bpestore.pretokenize.corpus.chunk_boundaries`).
No process ever holds more than one chunk of text, and workers send back pre-token counts, never
pre-tokens.
"""

from __future__ import annotations

import os
import queue as queue_module
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import regex

from ..errors import CorpusDecodeError
from ..workers import default_workers, process_context
from ..pretokenize.corpus import (
    DEFAULT_CHUNK_BYTES,
    ProgressCallback,
    check_corpus_path,
    chunk_boundaries,
    first_decode_error,
    read_chunk,
)
from ..pretokenize.patterns import (
    GPT2_PATTERN,
    LETTER_RUN_PATTERNS,
    REGEX_WHITESPACE,
    SPLIT_SAFE_PATTERNS,
    SpecialSplitter,
)
from ..pretokenize.cuts import irregular_spans


class SegmentCounter:
    """Counts the pre-tokens of many texts, running the regex only on distinct segments.

    Feed texts (pieces between special tokens) with :meth:`add`; :meth:`pretoken_counts` turns the
    segment counts into pre-token counts. Memory grows with the number of distinct segments, which
    :meth:`add` bounds by folding segments into pre-token counts every ``max_segments``.
    """

    def __init__(self, pattern: str = GPT2_PATTERN, max_segments: int = 300_000):
        self.pattern = pattern
        self._regex = regex.compile(pattern)
        self._split_safe = pattern in SPLIT_SAFE_PATTERNS
        self._letter_runs = pattern in LETTER_RUN_PATTERNS
        self._max_segments = max_segments
        self._spaced: Counter[str] = Counter()  # part p stands for the segment " " + p
        self._raw: Counter[str] = Counter()  # segments counted verbatim
        self._pretokens: Counter[str] = Counter()  # updated with dict.get/set: no __missing__ calls

    def add(self, text: str) -> None:
        """Count the pre-tokens of one text that holds no special token."""
        if not self._split_safe:
            self._pretokens.update(self._regex.findall(text))
            return
        spaced, raw = self._spaced, self._raw
        parts = text.split(" ")
        spaced.update(parts)  # C-level counting: the bulk of the work
        first = parts[0]
        spaced[first] -= 1
        raw[first] += 1
        for start, end in irregular_spans(text):
            segment = text[start:end]
            segment_parts = segment.split(" ")
            if start == 0:
                raw[segment_parts[0]] -= 1
            for part in segment_parts[1:]:
                spaced[part] -= 1
            raw[segment] += 1
        if len(spaced) + len(raw) > self._max_segments:
            self._fold()

    def _fold(self) -> None:
        """Turn the segment counts into pre-token counts (bounded memory, same result)."""
        pretokens = self._pretokens
        get = pretokens.get
        findall = self._regex.findall
        # The regex runs once over all spaced segments of equal count joined together: joined
        # segments all start with a space followed by non-whitespace, and those in by_count end
        # with non-whitespace, so the joins are safe cuts.
        by_count: dict[int, list[str]] = {}
        letter_runs = self._letter_runs
        for part, count in self._spaced.items():
            if count > 0:
                if letter_runs and part.isalpha() and part.isascii():
                    token = " " + part  # one pre-token, no regex needed
                    pretokens[token] = get(token, 0) + count
                elif part[-1:] in REGEX_WHITESPACE:  # (the last part of a text, or "")
                    for token in findall(" " + part):
                        pretokens[token] = get(token, 0) + count
                elif count in by_count:
                    by_count[count].append(part)
                else:
                    by_count[count] = [part]
        for count, parts in by_count.items():
            for token, n in Counter(findall(" " + " ".join(parts))).items():
                pretokens[token] = get(token, 0) + n * count
        for segment, count in self._raw.items():
            if count > 0:
                for token in findall(segment):
                    pretokens[token] = get(token, 0) + count
        self._spaced.clear()
        self._raw.clear()

    def pretoken_counts(self) -> Counter[str]:
        """All pre-tokens counted so far, as text."""
        self._fold()
        return self._pretokens


def _count_chunks(path, chunks, special_tokens, pattern, on_chunk) -> dict[bytes, int]:
    splitter = SpecialSplitter(special_tokens)
    counter = SegmentCounter(pattern)
    for start, end in chunks:
        for piece in splitter.split(read_chunk(path, start, end)):
            counter.add(piece)
        on_chunk(end - start)
    return {token.encode("utf-8"): count for token, count in counter.pretoken_counts().items()}


def _worker(path, special_tokens, pattern, tasks, results) -> None:
    def next_chunks():
        while (task := tasks.get()) is not None:
            yield task

    try:
        counts = _count_chunks(path, next_chunks(), special_tokens, pattern, lambda n: results.put(("progress", n)))
        results.put(("done", counts))
    except BaseException as error:  # report every failure to the parent, which raises it
        results.put(("error", error))


def count_file_pretokens(
    path: str | os.PathLike,
    special_tokens: Sequence[str] = (),
    *,
    pattern: str = GPT2_PATTERN,
    workers: int | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    on_progress: ProgressCallback | None = None,
    backend: CountingBackend | None = None,
) -> dict[bytes, int]:
    """Pre-token counts of a UTF-8 file cut at ``special_tokens``, as UTF-8 bytes -> count.

    ``workers`` processes (default: the usable CPUs) each read their own chunks; with one worker,
    or a file of one chunk, everything happens in this process. ``backend`` replaces that choice
    (see :class:`CountingBackend`).
    """
    backend = backend or WorkerProcesses(workers, chunk_bytes)
    return backend.count(check_corpus_path(path), special_tokens, pattern, on_progress or (lambda n: None))


class CountingBackend(Protocol):
    """The seam for counting a corpus's pre-tokens (in this process, in worker processes; the
    compiled engine's threads and a distributed engine plug in here too).

    Contract: ``count(path, special_tokens, pattern, on_progress)`` returns how often each
    pre-token of the UTF-8 file at ``path`` occurs, as ``{pre-token UTF-8 bytes: count}``, where
    the text is cut at ``special_tokens`` (longest first; they are never counted) and the pieces
    between are pre-tokenized with ``pattern``: exactly ``reference_pretoken_counts`` of
    tests/reference.py on the whole file, however the work is split. ``on_progress(n)`` is called
    as bytes are done (the calls add up to the file size). Invalid UTF-8 raises
    :class:`~bpestore.errors.CorpusDecodeError` naming the first bad byte of the file.
    """

    def count(self, path: Path, special_tokens: Sequence[str], pattern: str, on_progress: ProgressCallback) -> dict[bytes, int]: ...


@dataclass(frozen=True)
class WorkerProcesses:
    """Counts chunks of about ``chunk_bytes`` in ``workers`` processes (default: the usable CPUs),
    or in this process when one worker or one chunk is enough."""

    workers: int | None = None
    chunk_bytes: int = DEFAULT_CHUNK_BYTES

    def count(self, path: Path, special_tokens: Sequence[str], pattern: str, on_progress: ProgressCallback) -> dict[bytes, int]:
        boundaries = chunk_boundaries(path, special_tokens, self.chunk_bytes)
        chunks = list(zip(boundaries, boundaries[1:]))
        workers = min(self.workers or default_workers(), len(chunks))
        if workers <= 1:
            return _count_chunks(path, chunks, special_tokens, pattern, on_progress)
        return _count_in_processes(path, chunks, special_tokens, pattern, workers, on_progress)


def _count_in_processes(path, chunks, special_tokens, pattern, workers, on_progress) -> dict[bytes, int]:
    context = process_context()
    tasks = context.Queue()
    results = context.Queue()
    for chunk in chunks:
        tasks.put(chunk)
    for _ in range(workers):
        tasks.put(None)
    processes = [
        context.Process(target=_worker, args=(str(path), tuple(special_tokens), pattern, tasks, results), daemon=True)
        for _ in range(workers)
    ]
    for process in processes:
        process.start()
    partial_counts: list[dict[bytes, int]] = []
    try:
        while len(partial_counts) < workers:
            try:
                kind, payload = results.get(timeout=1.0)
            except queue_module.Empty:
                if any(process.exitcode not in (None, 0) for process in processes):
                    raise RuntimeError("a pre-tokenization worker died unexpectedly") from None
                continue
            if kind == "progress":
                on_progress(payload)
            elif kind == "done":
                partial_counts.append(payload)
            elif isinstance(payload, CorpusDecodeError):
                # Workers run ahead of each other: report the first bad byte of the file, always.
                raise first_decode_error(path, payload.offset) or payload
            else:
                raise payload
    finally:
        for process in processes:
            if process.is_alive() and len(partial_counts) < workers:
                process.terminate()
            process.join()
    partial_counts.sort(key=len, reverse=True)
    total = partial_counts[0]  # the biggest, so that the fewest entries are added one by one
    get = total.get
    for counts in partial_counts[1:]:
        for token, count in counts.items():
            total[token] = get(token, 0) + count
    return total
