"""The typed face of ``bpestore._engine``, the Rust engine (crates/ in the repository).

Users do not import this module: the public API (``bpestore.Tokenizer``, ``bpestore.train_bpe``,
``bpestore.Store``) calls it. Each stage's bindings add their part below.
"""

from collections.abc import Callable, Iterable, Iterator, Mapping
from os import PathLike
from typing import final

# (Checked against the compiled module by `python3 -m mypy.stubtest bpestore._engine`, in .ci/run:
# PyO3's classes cannot be subclassed, hence @final on each.)
__all__ = [
    "__version__",
    "register_errors",
    "Pretokenizer",
    "utf8_error",
    "GPT2_PATTERN",
    "CL100K_PATTERN",
    "O200K_PATTERN",
    "LLAMA3_PATTERN",
    "QWEN2_PATTERN",
    "GPT2_DIGITS_PATTERN",
    "GPT2_DIGIT_RUNS_PATTERN",
    "SUPERBPE_PATTERN",
    "PretokenCounts",
    "SortedRows",
    "count_file",
    "count_texts",
    "file_chunk_boundaries",
    "learn_merges",
    "learn_parity_merges",
    "normalize",
    "pipeline_spans",
    "Encoder",
    "StreamEncoder",
    "NpyWriter",
    "IdBuffer",
    "check_model",
    "token_ids",
    "PARTIAL_NPY_MARK",
    "DEFAULT_CACHE_ENTRIES",
    "IdIterator",
    "pack_model",
    "pair_merges_from_ranks",
    "read_tiktoken",
    "unpack_model",
    "unpack_vocab",
    "byte_level_tokens",
    "byte_level_merges",
    "byte_level_vocab_json",
    "first_merge_out_of_id_order",
]

__version__: str

def register_errors(pattern_error: type[Exception], corpus_decode_error: type[Exception]) -> None:
    """Hands the engine the project's exception classes (bpestore.engine does, once):
    ``pattern_error(message)`` and ``corpus_decode_error(path, offset, reason)``."""

# -- pretokenize (crates/pretokenize, crates/python/src/pretokenize.rs) ---------------------------

GPT2_PATTERN: str
"""The GPT-2 pattern, byte for byte ``bpestore.pretokenize.GPT2_PATTERN``."""
CL100K_PATTERN: str
O200K_PATTERN: str
LLAMA3_PATTERN: str
"""Llama-3's pattern, byte for byte ``bpestore.pretokenize.LLAMA3_PATTERN``."""
QWEN2_PATTERN: str
"""Qwen2's pattern, byte for byte ``bpestore.pretokenize.QWEN2_PATTERN``."""
GPT2_DIGITS_PATTERN: str
"""GPT-2's after Digits, byte for byte ``bpestore.pretokenize.patterns.GPT2_DIGITS_PATTERN``."""
GPT2_DIGIT_RUNS_PATTERN: str
"""The same for runs of numbers (``GPT2_DIGIT_RUNS_PATTERN``)."""
SUPERBPE_PATTERN: str
"""SuperBPE's stage 2, byte for byte ``bpestore.pretokenize.patterns.SUPERBPE_PATTERN``."""

@final
class Pretokenizer:
    """A pre-tokenizer with its special tokens: ``regex.findall(pattern, text)`` on the text
    between special tokens (found longest first), each special token a piece of its own.
    Hand-written scanners run the three known patterns; any other runs on fancy_regex.
    ValueError for an invalid pattern, one too big to compile, one with capture groups, one that
    backtracks catastrophically on short probe texts or whose matches do not cover all of one (they
    must tile any text: a character no match covers would be dropped), or an empty special token;
    ``pretokenize`` and ``piece_count`` raise ``bpestore.errors.PatternError`` (a ValueError) if the
    pattern hits the backtracking limit on ``text`` or leaves some of it uncovered."""

    def __new__(cls, pattern: str, special_tokens: list[str] = ..., *, regex_engine: bool = False) -> Pretokenizer:
        """``regex_engine=True`` runs fancy_regex even for the three known patterns (tests, benchmarks)."""
    @property
    def uses_scanner(self) -> bool:
        """Whether a hand-written scanner (not the regex engine) splits the text."""
    def piece_count(self, text: str) -> int:
        """``len(self.pretokenize(text))`` without building the pieces (for benchmarks)."""
    @property
    def pattern(self) -> str: ...
    @property
    def special_tokens(self) -> list[str]: ...
    @property
    def split_safe(self) -> bool:
        """Whether a space between two non-whitespace characters is a safe cut."""
    def pretokenize(self, text: str) -> list[str]:
        """The pre-tokens of ``text``, special tokens as pieces of their own."""
    def last_safe_cut(self, text: str) -> int:
        """The last str index where ``text``, the start of a longer stream, can be cut without
        changing its pieces whatever follows; 0 if there is none."""
    def next_safe_cut(self, window: bytes, start: int) -> int | None:
        """The first safe cut (byte offset) at or after ``start`` in ``window``, UTF-8 bytes of a
        file (possibly cut mid-character at its ends); None if there is none."""
    def find_cut(self, size: int, target: int, read: Callable[[int, int], bytes]) -> int:
        """The first safe cut at or after byte ``target`` of a UTF-8 text of ``size`` bytes that
        ``read(start, end)`` returns bytes ``start..end`` of (a window of about 64 KiB at a time);
        0 for a target at or before the start, ``size`` where no cut follows it. The rule of the
        engine's own chunks of a file. ValueError if ``read`` returns another number of bytes."""

def utf8_error(data: bytes) -> tuple[int, str] | None:
    """``(offset, reason)`` of the first invalid UTF-8 in ``data`` as Python's decoder names it
    ("invalid start byte", "invalid continuation byte", "unexpected end of data"); None if valid."""


# -- train: counting pre-tokens and the merge loop (crates/train, crates/python/src/train.rs) --------


@final
class PretokenCounts(Mapping[bytes, int]):
    """How often each pre-token occurs (pre-token bytes -> count, 64-bit); special tokens are
    never counted. A read-only mapping (registered as one by ``bpestore.train.trainer``), equal to
    any mapping of the same counts."""

    def __init__(self) -> None: ...
    @staticmethod
    def from_dict(counts: Mapping[bytes, int]) -> PretokenCounts: ...
    def __len__(self) -> int: ...
    @property
    def total(self) -> int:
        """The number of pre-token occurrences (the sum of the counts)."""
    @property
    def pretoken_bytes(self) -> int:
        """The total length of the distinct pre-tokens, in bytes."""
    def __eq__(self, other: object, /) -> bool: ...
    @staticmethod
    def unpack(*parts: bytes) -> PretokenCounts:
        """Counts from their packed copy: the parts ``SortedRows.pack`` made, in order
        (layout in crates/train/src/stored.rs); ValueError ("damaged packed counts: ...")."""
    @staticmethod
    def from_copy(data: bytes) -> PretokenCounts:
        """Counts from a PostgreSQL ``COPY (SELECT pretoken, count ...) TO STDOUT (FORMAT
        BINARY)``; ValueError naming the row for NULLs, negative counts or a damaged stream."""
    @staticmethod
    def from_rows(rows: Iterable[tuple[bytes, int]]) -> PretokenCounts:
        """Counts from rows ``(pre-token bytes, count)`` (a database cursor); a pre-token given
        twice gets the sum; ValueError naming the row for anything else."""
    def sorted_rows(self, order: str = "bytes") -> SortedRows:
        """These counts' rows in byte order of the pre-tokens (``"bytes"``), or in order of their
        SHA-256 (``"sha256"``: PostgreSQL's key), to be written in batches."""
    def get(self, pretoken: bytes, default: int | None = None) -> int | None: ...  # type: ignore[override]  # (Mapping's get has overloads)
    def __getitem__(self, pretoken: bytes, /) -> int: ...
    def __contains__(self, pretoken: object, /) -> bool: ...
    def __iter__(self) -> Iterator[bytes]: ...
    def keys(self) -> list[bytes]: ...  # type: ignore[override]  # (a list: the engine's own order, made once)
    def most_common(self, n: int, min_len: int = 1, max_len: int = ..., min_count: int = 1) -> list[bytes]:
        """The ``n`` most frequent pre-tokens of ``min_len`` to ``max_len`` bytes counted
        ``min_count`` times or more, most frequent first (equal counts in byte order)."""
    def values(self) -> list[int]:  # type: ignore[override]
        """Every count, in the order of ``keys()``."""
    def items(self) -> list[tuple[bytes, int]]:  # type: ignore[override]
        """Every (pre-token, count), in no particular order."""
    def to_dict(self) -> dict[bytes, int]: ...
    def merge(self, other: PretokenCounts) -> None:
        """Adds ``other``'s counts to these."""
    def clear(self) -> None:
        """Forgets every count, freeing their memory."""
    def to_arrays(self, sorted: bool = False) -> tuple[bytes, bytes, bytes]:
        """``(data, offsets, counts)``: the pre-tokens end to end, ``len + 1`` offsets into them
        and the counts (both little-endian 64-bit integers); ``sorted``: in byte order."""
    @staticmethod
    def from_arrays(data: bytes | bytearray, offsets: bytes | bytearray, counts: bytes | bytearray) -> PretokenCounts:
        """Counts from ``to_arrays``'s arrays (a pre-token given twice gets the sum); ValueError
        for arrays that do not fit together."""
    def copy(self) -> PretokenCounts:
        """A copy of these counts."""
    def pruned(self, min_count: int) -> PretokenCounts:
        """New counts without the pre-tokens counted fewer than ``min_count`` times."""
    def split(self, parts: int) -> list[PretokenCounts]:
        """These counts in ``parts`` disjoint parts by a hash of each pre-token (the same
        pre-token always lands in the same part)."""

@final
class SortedRows:
    """Pre-token counts' rows in byte order of the pre-tokens, for writing them into a database
    in batches; holds the counts and their order (4 bytes a row), not a copy. Every method raises
    ValueError if the counts changed since the order was taken."""

    def __len__(self) -> int: ...
    def piece_ends(self, max_rows: int, max_bytes: int) -> list[int]:
        """Where to cut the rows into pieces of at most ``max_rows`` rows and about ``max_bytes``
        bytes of pre-tokens (at least a row each): the end of each piece, the last ``len()``."""
    def flat_rows(self, start: int, end: int) -> list[bytearray | int]:
        """Rows ``start..end`` as one flat list: a pre-token (bytearray), its count, ..."""
    def pack(self, start: int, end: int) -> bytes:
        """Rows ``start..end`` packed, with a checksum (one part of a packed copy)."""
    def copy_rows(self, corpus_id: int, start: int, end: int) -> bytes:
        """Rows ``start..end`` as PostgreSQL binary COPY data of ``(corpus_id, pretoken, count)``,
        the header with the first rows and the trailer with the last."""

def count_file(
    path: str | PathLike[str],
    pattern: str,
    special_tokens: list[str],
    threads: int | None = None,
    progress: Callable[[int], object] | None = None,
    *,
    chunk_bytes: int | None = None,
    max_memory: int | None = None,
    spill_dir: str | PathLike[str] | None = None,
    min_count: int | None = None,
) -> PretokenCounts:
    """The pre-token counts of a UTF-8 file, cut at ``special_tokens`` (not counted), counted by
    ``threads`` threads (None: one per CPU) over chunks of about ``chunk_bytes`` (default 4 MiB)
    cut where a cut changes nothing. ``progress(n)`` gets the bytes counted since its last call
    (at most every 0.1 s). Raises FileNotFoundError, ``bpestore.errors.CorpusDecodeError`` (the
    first bad byte's offset), ValueError (bad pattern, empty special token),
    ``bpestore.errors.PatternError`` (``"PATH: ..."``: the pattern failed on the text, at a byte
    offset in the file).

    ``max_memory``: count in bounded memory, the threads' tables of counts holding about that
    many bytes at most (the chunk buffers and the result on top): a thread whose table grows
    above its share writes it sorted to a run file, in a directory of its own made in
    ``spill_dir`` (None: the system's temporary directory) and removed at the end, and the runs
    are merged k ways. ``min_count`` (only with ``max_memory``) keeps the pre-tokens counted at
    least that many times in all. The counts are the same as without ``max_memory`` (pruned to
    ``min_count``). OSError (``"[Errno N] spilling pre-token counts failed: ...: 'DIR'"``) if
    the runs cannot be written or read."""

def file_chunk_boundaries(
    path: str | PathLike[str], pattern: str, special_tokens: list[str], chunk_bytes: int
) -> list[int]:
    """The offsets ``[0, ..., size]`` at which ``count_file`` cuts the file into chunks."""

def count_texts(texts: Iterable[str], pattern: str, special_tokens: list[str]) -> PretokenCounts:
    """The pre-token counts of some texts, each cut at ``special_tokens`` (not counted);
    ``bpestore.errors.PatternError`` (``"text I: ..."``) if the pattern fails on text I."""

def learn_merges(
    counts: PretokenCounts,
    max_merges: int,
    progress: Callable[[int], object] | None = None,
    *,
    consume: bool = False,
    base: list[tuple[bytes, bytes]] | None = None,
    base_ranks: list[tuple[int, bytes]] | None = None,
    tie_break: str = "cs336",
    max_words: int | None = None,
) -> list[tuple[bytes, bytes]]:
    """Up to ``max_merges`` merges, best first: CS336's merge loop (the most frequent pair, ties to
    the lexicographically greatest (left bytes, right bytes)); stops early when no pair is left.
    ``tie_break="huggingface"``: ties to Hugging Face ``BpeTrainer``'s smallest pair of ids (bytes
    by their byte-level characters, then merged tokens in order made); with ``base`` too (its tokens numbered in the order of its
    merges), not with ``base_ranks``. ``max_words``: no new token holds more than this many words
    (runs of bytes other than the space).
    Fewer merges give a prefix. ``progress(n)`` gets the merges done since its last call (at most
    every 0.1 s); ``consume=True`` empties ``counts`` once read, to free their memory. ``base``:
    a base tokenizer's merges, each applied in order to every word before the loop starts
    (continued training); only the merges after them are returned. ``base_ranks`` (instead of
    ``base``): a token-rule base's vocabulary as (id, bytes), ids being ranks; each word is first
    split as tiktoken's rule encodes it. ValueError if both are given."""

def learn_parity_merges(
    train: list[PretokenCounts],
    max_merges: int,
    progress: Callable[[int], object] | None = None,
    *,
    dev: list[PretokenCounts] | None = None,
    ratio: list[float] | None = None,
    variant: str = "base",
    window_size: int = 100,
    alpha: float = 2.0,
    global_merges: int = 0,
    tie_break: str = "cs336",
) -> tuple[list[tuple[bytes, bytes]], list[int | None]]:
    """Up to ``max_merges`` merges of parity-aware BPE from one count table per language
    (``train``), best first, and for each the index of the language it was chosen for (None: a
    global merge); stops early when every language is spent. The language of each merge is the
    one whose part of the parallel development set ``dev`` (a table per language) takes the most
    tokens; with ``ratio`` (a float per language) instead, the one least compressed for its
    ratio; with neither, the one whose training text takes the most tokens. ``variant``:
    ``"base"`` or ``"window"`` (``window_size``, ``alpha``); ``global_merges``: the first merges
    are plain BPE's on all languages together; ``tie_break``: ``"cs336"`` or ``"huggingface"``
    (``ParityBpeTrainer``'s: the greatest pair of byte-level strings). ``progress`` as for
    :func:`learn_merges`. ValueError for settings that are not these."""

# ---------------------------------------------------------------- encode (crates/python/src/encode.rs)

def normalize(steps: list[tuple[str, str, str]], text: str) -> str:
    """``text`` normalized by ``steps`` as an :class:`Encoder` normalizes the text between special
    tokens: ``(kind, a, b)`` with kind ``NFC``, ``NFD``, ``NFKC``, ``NFKD``, ``Lowercase`` (a and b
    unused), ``Replace`` (the literal a by b), ``Prepend`` (a) or ``Strip`` (a, b: ``"1"`` to strip
    whitespace on the left, on the right). ValueError for another kind."""

def pipeline_spans(stages: list[tuple[str, str, str, bool]], text: str) -> tuple[str, list[tuple[int, int]]]:
    """``text`` as a pre-tokenizer pipeline writes it and the byte spans of the pieces it makes of
    that: stages ``(kind, regex, behavior, invert)``, kind ``Split`` (by the regex), ``Numeric``,
    ``Punctuation``, ``Whitespace`` (by the characters named), or ``ByteLevel`` (regex ``"gpt2"``:
    GPT-2's regex first; later stages see GPT-2's byte alphabet); a first stage ``("Prefix",
    text, "always" | "first" | "never", replaces_spaces)`` writes a prefix (and, for Metaspace,
    its spaces) into the text first. ValueError for a bad stage."""

@final
class Encoder:
    """A byte-level BPE encoder: ids from text and bytes from ids, thread-safe, GIL released.

    ``vocab``: id -> bytes, every single byte among them, no token twice (special tokens that have
    ids of their own left out); ``merges`` in rank order (unused by the token rule), or a store's
    packed copy of the model (``pack_model``'s bytes), whose merges are read there;
    ``special_tokens``: token -> id; ``merge_rule``: ``"pair"`` (GPT-2, CS336, Hugging Face) or
    ``"token"`` (tiktoken). Bad input raises ValueError with bpestore's messages.

    A custom pattern (not one of the three known ones) that fails on a text while encoding (it
    gives up on a match at the regex engine's backtracking limit, or no match covers some of the
    text, which would otherwise be dropped) raises ``bpestore.errors.PatternError`` (a ValueError)
    naming the pattern and a byte offset (where that match started, or the first byte uncovered):
    in the text (``encode_batch``: ``"text I: ..."``, in text I), in the stream (``iter_ids``,
    ``stream``), or in the file (``encode_file_to_npy``: ``"PATH: ..."``).
    """

    def __new__(
        cls,
        vocab: dict[int, bytes],
        merges: Iterable[tuple[bytes, bytes]] | bytes,
        special_tokens: dict[str, int],
        pattern: str,
        merge_rule: str = "pair",
        cache_entries: int = ...,
        normalizer: list[tuple[str, str, str]] | None = None,
        normalized_tokens: dict[str, int] | None = None,
        token_options: list[tuple[str, str]] | None = None,
        pre_tokenizer: list[tuple[str, str, str, bool]] | None = None,
        dropped_bytes: list[int] | None = None,
        chars_first: bool = False,
        extra_ids: dict[int, bytes] | None = None,
    ) -> Encoder:
        """``normalizer``: steps ``(kind, a, b)`` run on the text between special tokens before it
        is pre-tokenized (see :func:`normalize`); ``normalized_tokens``: token -> id, tokens found
        in the normalized text (not among ``special_tokens``); ``token_options``: (token,
        ``"lstrip,rstrip,single_word"`` or some of them), how a token takes its surroundings
        (Hugging Face's added-token options); ``pre_tokenizer``: stages (see
        :func:`pipeline_spans`) that make the pieces instead of ``pattern``; ``dropped_bytes``:
        bytes left out of every piece before it is merged (Hugging Face's BPE leaves out a
        character its vocab lacks), each a token of ``vocab`` all the same; ``chars_first``: pieces
        are merged from their characters (each the vocab's token for it, else its bytes), as a
        SentencePiece-style BPE with byte fallback merges (Llama-2, Mistral)."""
    def encode(self, text: str, allowed_special: str | Iterable[str] | None = None) -> list[int]:
        """The ids of ``text``; ``allowed_special`` None or "all": every special token is
        recognised; a collection: only those (the others are ordinary text)."""
    def encode_to_buffer(self, text: str, allowed_special: str | Iterable[str] | None = None) -> memoryview:
        """The ids: a view of the engine's own vector of them, an :class:`IdBuffer`
        (``numpy.frombuffer(view, dtype=numpy.uint32)`` makes a writable array of them without a
        copy)."""
    def encode_batch(
        self, texts: Iterable[str], num_threads: int | None = None, allowed_special: str | Iterable[str] | None = None
    ) -> list[list[int]]:
        """The ids of each text, on ``num_threads`` threads (default: the CPUs), in order;
        ``allowed_special`` as for ``encode``."""
    def encode_dropout(
        self, text: str, dropout: float, seed: int, allowed_special: str | Iterable[str] | None = None, text_index: int = 0
    ) -> list[int]:
        """The ids of ``text`` with BPE-dropout: each merge considered is skipped with probability
        ``dropout`` (in [0, 1); 0 is ``encode`` exactly), the draws seeded by ``seed`` (in
        [0, 2**64)) and ``text_index`` (a text's index in its batch)."""
    def encode_batch_dropout(
        self,
        texts: Iterable[str],
        dropout: float,
        seed: int,
        num_threads: int | None = None,
        allowed_special: str | Iterable[str] | None = None,
    ) -> list[list[int]]:
        """``encode_dropout`` of each text (its index in the batch seeding its draws), on
        ``num_threads`` threads: the ids do not depend on the number of threads."""
    def encode_with_offsets(
        self, text: str, allowed_special: str | Iterable[str] | None = None, trim_offsets: bool | None = None
    ) -> tuple[list[int], list[tuple[int, int]]]:
        """The ids of ``text`` and each one's ``(start, end)`` character span, as Hugging Face's
        ``tokenizers`` gives them: a token holding part of a character's bytes spans all of it.
        ``trim_offsets``: None, or the ``add_prefix_space`` of a post-processor that trims them."""
    def pack_warm(self, pieces: list[bytes], limit: int) -> tuple[bytes, int]:
        """The packed warm table of ``pieces`` (pre-tokens, most useful first), each merged by
        this encoder: the first ``limit`` of them that are 2 to 64 bytes long (each once); and
        how many pieces it holds."""
    def load_warm(self, data: bytes) -> int:
        """Takes a warm table made by ``pack_warm`` of the same model (every thread then finds its
        pieces there); returns how many pieces it holds. ValueError saying what is wrong."""
    @property
    def warm_len(self) -> int:
        """How many pieces the warm table holds (0 without one)."""
    @property
    def fingerprint(self) -> str:
        """The model's fingerprint that a warm table carries (16 hex digits)."""
    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The tokens' bytes joined; ValueError naming the first id not in the vocabulary,
        TypeError for an item that is not an integer."""
    def iter_ids(
        self, iterable: Iterable[str], block_bytes: int = ..., allowed_special: str | Iterable[str] | None = None,
        dropout: float | None = None, seed: int | None = None,
    ) -> IdIterator:
        """The ids of the text pieces ``iterable`` yields, one at a time, in constant memory:
        those of ``encode`` of their concatenation (``allowed_special`` as there). TypeError for
        a piece that is not a str."""
    def stream(
        self, block_bytes: int = ..., allowed_special: str | Iterable[str] | None = None, dropout: float | None = None,
        seed: int | None = None,
    ) -> StreamEncoder:
        """An encoder for a stream of text pieces, in constant memory (``allowed_special`` as for
        ``encode``)."""
    def npy_writer(self, path: str | PathLike[str]) -> NpyWriter:
        """A new ``.npy`` file at ``path`` (FileExistsError if one exists) for this vocabulary's
        ids, written a block at a time."""
    def encode_file_to_npy(
        self,
        path: str | PathLike[str],
        output: str | PathLike[str],
        threads: int | None = None,
        progress: Callable[[int], object] | None = None,
        chunk_bytes: int = ...,
        dropout: float | None = None,
        seed: int | None = None,
    ) -> int:
        """A UTF-8 file's ids into a 1-D ``.npy`` (dtype ``npy_dtype``), via a hidden
        ``.NAME.PID-HEX.partial`` beside it (not a ``.npy`` until complete) and a rename; returns
        the number of ids. ``progress(n)``: n more input bytes done. Invalid UTF-8:
        ``bpestore.errors.CorpusDecodeError``; a pattern that fails on the text:
        ``bpestore.errors.PatternError`` (the offset in the file). Nothing is left on failure."""
    @property
    def max_id(self) -> int:
        """The highest id, special tokens included."""
    @property
    def npy_dtype(self) -> str:
        """``"uint16"`` when every id fits, else ``"uint32"``."""

PARTIAL_NPY_MARK: bytes
"""The first bytes of a ``.npy`` still being written, or left by a writer that was stopped."""

DEFAULT_CACHE_ENTRIES: int
"""The distinct pre-tokens each encoding thread's cache remembers by default (``Encoder``'s
``cache_entries``)."""

@final
class IdBuffer:
    """Ids made by the engine (``Encoder.encode_to_buffer`` returns a view of one), lent through
    the buffer protocol as the bytes of native uint32s, writable: ``numpy.frombuffer(view,
    dtype=numpy.uint32)`` wraps them without a copy, and keeps them alive while the array is."""

    def __len__(self) -> int:
        """The number of ids."""

@final
class NpyWriter:
    """A 1-D ``.npy`` array of ids being written (``Encoder.npy_writer``): not a ``.npy`` until
    :meth:`finish` writes its header (``numpy.load`` refuses the file of a writer that was
    stopped). Write errors are ``OSError(errno, strerror)``, naming no file."""

    def write(self, ids: bytes) -> None:
        """Appends ids given as the bytes of little-endian uint32s (``array.tobytes()``);
        ValueError for an id past the vocabulary's last."""
    def finish(self) -> int:
        """Writes the header, puts the file on disk, and returns the number of ids."""

@final
class StreamEncoder:
    """Feeds text to an :class:`Encoder` piece by piece; all the ids returned equal those of the
    whole text, however it is cut."""

    def feed(self, text: str) -> list[int]:
        """The ids of the text up to the last place that what follows cannot change."""
    def finish(self) -> list[int]:
        """The ids of the rest: the end of the stream."""

@final
class IdIterator(Iterator[int]):
    """The ids of ``Encoder.iter_ids``: pulls pieces from its source only as ids are used."""

    def __iter__(self) -> IdIterator: ...
    def __next__(self) -> int: ...

# -- models: checked, made from ranks, read from a .tiktoken file (crates/python/src/encode.rs) --

def token_ids(vocab: Mapping[int, bytes], tokens: list[bytes]) -> dict[bytes, int]:
    """``{token: id}`` for each of ``tokens`` that ``vocab`` holds, with the id of its first entry
    in the dict's order (one pass over the vocab)."""

def check_model(vocab: Mapping[int, bytes], merges: Iterable[tuple[bytes, bytes]], check_merges: bool = True) -> None:
    """ValueError, naming the first problem, unless ``vocab`` and (with ``check_merges``)
    ``merges`` make a byte-level BPE model: no token under two ids, all 256 single bytes, every
    merge's two tokens and their concatenation in the vocab, no merge twice (the rules an
    :class:`Encoder` is built by)."""

def pair_merges_from_ranks(
    ranks: Mapping[bytes, int], on_tokens: Callable[[int], object] | None = None
) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
    """A merges list from token ranks (a tiktoken vocabulary): for each multi-byte token, in rank
    order, tiktoken's rule on its bytes with only the tokens ranked below it; two parts at the end
    are its merge. Returns the merges in rank order and the tokens no pair merge reaches.
    ``on_tokens(n)``: told of each n more tokens done. ValueError for a rank past 32 bits."""

def read_tiktoken(data: bytes, source: str) -> dict[int, bytes]:
    """``{rank: token}`` from a ``.tiktoken`` file's contents (not gzip'd), in the file's order:
    one ``base64(token) rank`` per line (base64 as ``b64decode(validate=True)`` reads it), blank
    lines skipped, ranks in ASCII digits from 0 to 2**31-1, no token and no rank twice, at least
    one token; and the tokens a vocabulary :func:`check_model` accepts (all 256 single bytes).
    ValueError for the first line that breaks a rule, naming ``source`` and the line
    (``"SOURCE, line 3: negative rank -1"``), or for a vocabulary that breaks one
    (``"SOURCE: the vocab lacks ..."``)."""

# -- formats: byte-level tokens decoded for the readers (crates/python/src/formats.rs) --

def byte_level_tokens(texts: list[str]) -> list[bytes] | None:
    """The bytes of each string (a token written in GPT-2's byte-to-unicode alphabet), or None if
    one is not a ``str`` or has a character outside the alphabet."""

def byte_level_merges(lines: list[str]) -> list[tuple[bytes, bytes]] | None:
    """Each ``"left right"`` (a merge, both parts non-empty and in GPT-2's alphabet) as a pair of
    bytes, or None if one is not so."""

def byte_level_vocab_json(data: bytes, max_id: int) -> dict[int, bytes] | None:
    """A whole ``vocab.json`` (``{token in GPT-2's alphabet: id}``) as ``{id: bytes}``, or None
    unless it is exactly that: valid JSON, at least one token, each id an integer from 0 to
    ``max_id`` given once, each token byte-level and given once."""

def first_merge_out_of_id_order(vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]]) -> int | None:
    """The rank of the first merge whose joined token is not in ``vocab`` or has an id below the
    previous merge's (merges in the order of their tokens' ids, as Llama-3's are), or None."""

# -- store: a stored tokenizer's packed copy (crates/encode/src/packed.rs, crates/python/src/store.rs) --

def pack_model(vocab: Mapping[int, bytes], merges: Iterable[tuple[bytes, bytes]]) -> bytes:
    """``vocab`` (``{id: token}``) and ``merges`` (in rank order) packed, ids ascending: what
    :func:`unpack_model` reads. ValueError for an id or a length past 32 bits."""

def unpack_model(data: bytes) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """``(vocab, merges)`` from a packed copy (layout in ``bpestore/store/packed.py``): id -> token,
    and the merges in rank order. ValueError ("damaged packed data: ...") if it is not well formed
    or gives an id twice; whether the tokens make a usable vocabulary is not checked here."""

def unpack_vocab(data: bytes) -> dict[int, bytes]:
    """The vocab alone (id -> token) from a packed copy, all of which is checked as
    :func:`unpack_model` checks it: a token-rule model encodes without its merges."""
