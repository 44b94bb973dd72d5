"""``Tokenizer``: encode text to ids and back with a byte-level BPE vocabulary.

Encoding and decoding run in the Rust engine (``bpestore._engine.Encoder``, crates/encode): it
cuts the text at special tokens, pre-tokenizes it with a hand-written scanner for the known
patterns (a regex for others), and merges each distinct pre-token once, by either merge rule,
remembering the ids of the pre-tokens it has seen. It is thread-safe and releases the GIL.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence, Set as AbstractSet
from numbers import Integral
from typing import TYPE_CHECKING, Any, Literal, TypeVar, TypeVarTuple

from ..collector import collector_paused
from ..engine import DEFAULT_CACHE_ENTRIES, Encoder
from ..decoder import fallback_spellings
from ..errors import DisallowedSpecialTokenError
from ..model import BPEModel, MergeRule, PackedMerges
from ..pretokenize.patterns import GPT2_PATTERN
from .engine import EncoderEngine

if TYPE_CHECKING:
    import numpy as np  # (imported where it runs: commands that do not encode, `train` among them, never load it)
    import numpy.typing as npt

    from ..store.database import ModelStore

_T = TypeVar("_T")
_Args = TypeVarTuple("_Args")

# Distinct pre-tokens remembered by each of the engine's caches (one per thread encoding at
# once); a cache that is full starts afresh. (The engine's default: it sizes its tables for it.)
DEFAULT_CACHE_SIZE = DEFAULT_CACHE_ENTRIES
ENDOFTEXT = "<|endoftext|>"
# encode_blocks gathers about this many characters before encoding them.
_BLOCK_CHARS = 1 << 20


class Tokenizer:
    """A byte-level BPE tokenizer.

    Args:
        vocab: id -> token bytes; must hold all 256 single bytes.
        merges: the merges in rank order, each ``(left bytes, right bytes)``.
        special_tokens: strings always encoded as one token, matched longest first; one missing
            from the vocab gets the next free id.
        pattern: the pre-tokenizer regex (GPT-2's by default).
        merge_rule: ``"pair"`` (GPT-2, CS336, Hugging Face: lowest-ranked *merge* first) or
            ``"token"`` (tiktoken: lowest-ranked resulting *token* first, whole pre-token looked up
            first; ``merges`` is then unused and a token's rank is its id).
        added_tokens: user-defined ordinary tokens (Hugging Face's non-special added tokens):
            always cut out of the text and encoded whole, as special tokens are, whatever the
            special-token policy (``allowed_special=set()`` and :meth:`encode_ordinary` too).
        cache_size: how many distinct pre-tokens each encoding thread remembers.

    A tokenizer may be used from several threads at once.
    """

    def __init__(
        self,
        vocab: Mapping[int, bytes],
        merges: Sequence[tuple[bytes, bytes]],
        special_tokens: Iterable[str] | None = None,
        *,
        pattern: str = GPT2_PATTERN,
        merge_rule: MergeRule = "pair",
        added_tokens: Iterable[str] | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ):
        self._start(BPEModel(vocab, merges, special_tokens, pattern, merge_rule, added_tokens), cache_size)

    @classmethod
    def from_model(cls, model: BPEModel, *, cache_size: int = DEFAULT_CACHE_SIZE) -> Tokenizer:
        """A tokenizer that encodes with ``model`` (checked when it was made, not again).

        >>> from bpestore import BPEModel, Tokenizer
        >>> model = BPEModel({i: bytes([i]) for i in range(256)} | {256: b"hi"}, [(b"h", b"i")])
        >>> Tokenizer.from_model(model).encode("hi hi")
        [256, 32, 256]
        """
        tokenizer = cls.__new__(cls)
        tokenizer._start(model, cache_size)
        return tokenizer

    def _start(self, model: BPEModel, cache_size: int) -> None:
        self.model = model
        self.vocab: dict[int, bytes] = model.vocab
        self.pattern = model.pattern
        self.merge_rule: MergeRule = model.merge_rule
        self.special_tokens: list[str] = model.special_tokens
        self.special_ids: dict[str, int] = model.special_ids
        self.added_tokens: list[str] = model.added_tokens
        self.added_ids: dict[str, int] = model.added_ids
        self._special_set = frozenset(self.special_tokens)
        self._special_id_set = frozenset(self.special_ids.values())
        # The added tokens are always recognised: every set of tokens the engine is told to
        # recognise holds them (and encode_ordinary's "none" is exactly them).
        self._added_set = frozenset(self.added_tokens)
        self._ordinary: tuple[str, ...] = tuple(self.added_tokens)
        # The model's vocab holds the special tokens too, at their ids. The engine may treat
        # them as ordinary tokens as well: every occurrence of one in the text is cut out before
        # BPE, so no pre-token ever holds its bytes. The engine's "special tokens" are the
        # special and the added tokens: it cuts both out of the text alike; the difference (the
        # policy below never refuses an added token nor encodes it as text) is this class's.
        # The seam of the encoder's BPE (see bpestore.encode.engine for its contract).
        # The token rule merges by the tokens' ranks alone: its merges are not the engine's to read
        # (nor, for a model that derives them, worth computing here).
        merges: list[tuple[bytes, bytes]] | bytes = []
        if model.merge_rule == "pair":
            # (a model read from a store's packed copy has not made its merges' list: the engine
            # reads them in the copy, with no Python object per merge)
            deferred = model.deferred_merges()
            merges = deferred.data if isinstance(deferred, PackedMerges) else model.merges
        # A normalizer runs in the engine on the text between special tokens; the added tokens
        # marked normalized are found in its output, the others (and the special tokens) before it.
        whole = model.whole_ids
        # (lowest id first: of two tokens the normalizer writes alike, the engine finds the first)
        normalized = {token: whole.pop(token) for token in sorted(model.normalized_tokens, key=whole.__getitem__)}
        steps = model.normalizer.engine_steps() if model.normalizer is not None else None
        options = [(token, ",".join(sorted(named))) for token, named in model.token_options.items()]
        vocab, extra_ids = model.bpe_vocab()
        self._engine: EncoderEngine = Encoder(
            vocab, merges, whole, self.pattern, self.merge_rule, cache_size, steps, normalized or None, options or None,
            model.pre_tokenizer.engine_stages() if model.pre_tokenizer is not None else None,
            sorted(model.dropped_bytes) or None, model.byte_fallback, extra_ids or None,
        )
        self._warm_table: bytes | None = None  # (kept for pickling: a worker's copy starts warm too)

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """The merges in rank order (the model's)."""
        return self.model.merges

    def __reduce__(self) -> tuple[Callable[[BPEModel, bytes | None], Tokenizer], tuple[BPEModel, bytes | None]]:
        # The engine is rebuilt from the model (for pickling, e.g. into worker processes), with
        # its warm table if it has one.
        return _unpickled, (self.model, self._warm_table)

    # -- construction from files --------------------------------------------------------------

    @classmethod
    def from_files(
        cls,
        vocab_filepath: str | os.PathLike[str],
        merges_filepath: str | os.PathLike[str],
        special_tokens: Iterable[str] | None = None,
    ) -> Tokenizer:
        """A tokenizer from GPT-2's ``vocab.json`` and ``merges.txt`` (byte-to-unicode encoded)."""
        from ..formats import gpt2

        special_tokens = list(special_tokens or ())
        with collector_paused():  # (the many objects of the two files hold no cycles)
            vocab = gpt2.read_vocab(vocab_filepath, literal_tokens=special_tokens)
            merges = gpt2.read_merges(merges_filepath)
            return cls(vocab, merges, special_tokens)

    @classmethod
    def from_format(cls, format: str, *paths: str | os.PathLike[str], **options: Any) -> Tokenizer:
        """A tokenizer from another tool's files, read by :func:`bpestore.formats.read` (the
        function ``bpestore import`` calls: the same checks, the same errors).

        >>> Tokenizer.from_format("hf", "tokenizer.json")  # doctest: +SKIP
        >>> Tokenizer.from_format("gpt2", "vocab.json", "merges.txt", special_tokens=["<|endoftext|>"])  # doctest: +SKIP
        >>> Tokenizer.from_format("tiktoken", "cl100k_base.tiktoken", "cl100k_base")  # doctest: +SKIP

        Raises:
            FormatError: (a ValueError) the files cannot be represented exactly.
            ValueError: ``format`` is not a known format.
            OSError: a file cannot be read.
        """
        from .. import formats

        return cls.from_model(formats.read(format, *paths, **options).model)

    def export(self, format: str, output: str | os.PathLike[str]) -> list[str]:
        """Write this tokenizer in ``format`` by :func:`bpestore.formats.export` (what ``bpestore
        export`` calls); returns notes for the user. ``gpt2`` writes ``vocab.json`` and
        ``merges.txt`` into the directory ``output``; ``hf`` and ``tiktoken`` write the file
        ``output``. :meth:`from_format` reads them back."""
        from .. import formats

        return formats.export(self, format, output)

    @classmethod
    def from_db(cls, path_or_url: str | os.PathLike[str] | ModelStore, name: str, *, warm: bool = True) -> Tokenizer:
        """The tokenizer stored as ``name`` (latest version) or ``name@N`` in a bpestore database
        (a SQLite file, a SQLAlchemy URL, or a store already open).

        Its caches start warm: the ids of the pre-tokens it will mostly meet (its training
        corpus's most frequent, by default; see :mod:`bpestore.encode.warm`) were worked out when
        it was stored, and are looked up instead of merged. The ids are the same either way;
        ``warm=False`` leaves the stored table unread.

        Raises:
            StoreError: as :func:`bpestore.store.loader.load_model`; also a stored warm table that
                is damaged (the message says how to remove it).
        """
        from ..store import loader
        from . import warm as warming

        model, stored = loader.load_with_warm(path_or_url, name, warm=warm)
        tokenizer = cls.from_model(model)
        location = os.fspath(path_or_url) if isinstance(path_or_url, (str, os.PathLike)) else path_or_url.location
        warming.apply_stored(tokenizer, stored, name, location)
        return tokenizer

    # -- the warm table (bpestore/encode/warm.py) ----------------------------------------------

    @property
    def fingerprint(self) -> str:
        """The fingerprint of what this tokenizer's ids of a pre-token depend on (its tokens,
        merges and rule), as 16 hex digits: a warm table made for another is not used."""
        return self._engine.fingerprint

    @property
    def warm_entries(self) -> int:
        """How many pre-tokens this tokenizer's warm table holds (0 without one)."""
        return self._engine.warm_len

    def pack_warm(self, pieces: Sequence[bytes], entries: int) -> tuple[bytes, int]:
        """The engine's warm table of ``pieces`` (pre-tokens, most useful first; the first
        ``entries`` of 2 to 64 bytes, each once), each merged as in a text; and how many it holds.
        :mod:`bpestore.encode.warm` makes and stores them."""
        return self._engine.pack_warm(list(pieces), entries)

    def load_warm(self, data: bytes) -> int:
        """Take the warm table ``data`` (made by :meth:`pack_warm` of a tokenizer of the same
        model): its pre-tokens' ids are looked up, not merged, from now on, by every thread.
        Returns how many it holds. ValueError saying what is wrong (not a warm table, made for
        another model, damaged, or this tokenizer has one already)."""
        held = self._engine.load_warm(data)
        self._warm_table = data
        return held

    # -- encoding -------------------------------------------------------------------------------
    #
    # The special-token policy is tiktoken's, with one different default. ``allowed_special``:
    # the special tokens encoded as such ("all", or a set; the others are text). Then
    # ``disallowed_special``: the strings that must not occur in the text at all ("all" means every
    # special token not allowed; a set; or empty to check nothing); if one does, encoding raises
    # DisallowedSpecialTokenError (a ValueError) naming it and its character position. tiktoken's
    # default is ``allowed_special=set()``: a special token's string in the text raises. Ours is
    # ``allowed_special="all"`` (CS336's: the special tokens given to the constructor are always
    # recognised), so nothing is disallowed by default.
    #
    # Added tokens (``added_tokens``, ``bpestore add-tokens``) are ordinary: they are encoded
    # whole whatever the policy, as Hugging Face encodes its non-special added tokens in every
    # mode. ``allowed_special="all"`` and ``disallowed_special="all"`` mean the special tokens
    # only; a string named in ``disallowed_special`` explicitly is refused, added token or not.

    def encode(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = "all",
        disallowed_special: Literal["all"] | Collection[str] = "all",
        dropout: float | None = None,
        seed: int = 0,
        add_special_tokens: bool = False,
    ) -> list[int]:
        """The ids of ``text``; the special tokens ``allowed_special`` become their own ids.

        ``add_special_tokens=True`` puts the special tokens of the tokenizer's post-processor
        around them (a tokenizer imported from Hugging Face with one: Llama-3's
        ``<|begin_of_text|>`` before, RoBERTa's ``<s>`` and ``</s>`` around), as Hugging Face's
        ``encode(text, add_special_tokens=True)`` does; without a post-processor it changes
        nothing. The default, False, gives the text's own ids (tiktoken's and CS336's encode).

        By default every special token is recognised (CS336). For text from users that must not
        produce special tokens, ``encode(text, allowed_special=set())`` raises on any special
        token's string (tiktoken's default) and :meth:`encode_ordinary` encodes it as plain text.

        ``dropout=p`` encodes with BPE-dropout (Provilkov et al., 2020): while a pre-token is
        merged, each merge the rule would make next is skipped with probability ``p`` (in
        [0, 1)), so the same text gets other segmentations into the same vocabulary, a
        regularisation for training a model. Exact and seeded: the same ``seed`` (an int in
        [0, 2**64)) gives the same ids, ``p = 0`` gives exactly ``encode(text)``, every output
        decodes to the text, and special tokens are never split. Both merge rules; the rule is
        spelt out in crates/encode/src/dropout.rs (and tests/reference.py). Only a pre-token whose
        draws drop none of its merges can take its ids from the cache, so it is slower than plain
        encoding (about half its speed at p = 0.1).

        >>> tok.encode("lowest", dropout=0.5, seed=1) != tok.encode("lowest", dropout=0.5, seed=2)  # doctest: +SKIP
        True

        Raises:
            DisallowedSpecialTokenError: (a ValueError) the text holds a disallowed string.
            PatternError: (a ValueError) a custom pattern failed on the text: it gave up on a match
                at the regex engine's backtracking limit, or no match covers some of the text
                (which would otherwise be dropped); the message names the byte offset in ``text``
                (in text I of a batch, in the stream of :meth:`encode_iterable`). The known
                patterns never do.
            TypeError: ``text`` is not a str.
            ValueError: ``dropout`` is outside [0, 1), or ``seed`` outside [0, 2**64).
        """
        if add_special_tokens and self.model.post_processor is not None:
            ids = self.encode(text, allowed_special=allowed_special, disallowed_special=disallowed_special, dropout=dropout, seed=seed)
            return self.model.post_processor.around(ids)
        if dropout is not None:
            self._check_dropout()
            allowed = self._policy(text, allowed_special, disallowed_special)
            return self._call(self._engine.encode_dropout, text, dropout, seed, allowed)
        if allowed_special == "all" and disallowed_special == "all":  # the default, kept lean
            try:
                return self._engine.encode(text)
            except TypeError:
                _check_str(text, "encode")
                raise
        allowed = self._policy(text, allowed_special, disallowed_special)
        return self._call(self._engine.encode, text, allowed)

    def _check_dropout(self) -> None:
        """ValueError for BPE-dropout on a SentencePiece-style tokenizer (its merges start from
        characters, the dropout walk from bytes)."""
        if self.model.byte_fallback:
            raise ValueError("BPE-dropout is not available for a SentencePiece-style tokenizer (byte_fallback)")

    def encode_ordinary(self, text: str) -> list[int]:
        """The ids of ``text`` with special tokens' strings encoded as ordinary text (tiktoken's
        ``encode_ordinary``; ``encode(text, allowed_special=set(), disallowed_special=())``).
        Added tokens are ordinary tokens: still encoded whole."""
        return self._call(self._engine.encode, text, self._ordinary)

    def encode_to_array(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = "all",
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> npt.NDArray[np.uint32]:
        """The ids of ``text`` as a NumPy array (uint32), skipping the list of Python ints
        (tiktoken's ``encode_to_numpy``); the special-token policy of :meth:`encode`."""
        import numpy as np
        allowed = self._policy(text, allowed_special, disallowed_special)
        ids = self._call(self._engine.encode_to_buffer, text, allowed)
        return np.frombuffer(ids, dtype=np.uint32)  # (the engine's own ids: writable, no copy)

    def encode_batch(
        self,
        texts: Iterable[str],
        num_threads: int | None = None,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = "all",
        disallowed_special: Literal["all"] | Collection[str] = "all",
        dropout: float | None = None,
        seed: int = 0,
        add_special_tokens: bool = False,
    ) -> list[list[int]]:
        """The ids of each text, encoded on ``num_threads`` threads (default: the CPUs), in order;
        the special-token policy of :meth:`encode` (the first text holding a disallowed string
        raises, before any is encoded). ``dropout`` and ``seed``: BPE-dropout, as for
        :meth:`encode`; each text's draws are seeded by ``seed`` and its index in ``texts``
        (the first text's ids are ``encode(texts[0], dropout=p, seed=seed)``), so the ids do
        not depend on ``num_threads``. ``add_special_tokens``: as for :meth:`encode`, around
        each text's ids."""
        if add_special_tokens and self.model.post_processor is not None:
            processor = self.model.post_processor
            batch = self.encode_batch(
                texts, num_threads, allowed_special=allowed_special, disallowed_special=disallowed_special, dropout=dropout, seed=seed
            )
            return [processor.around(ids) for ids in batch]
        if isinstance(texts, (str, bytes)):
            raise TypeError(f"encode_batch() takes an iterable of str, not a single {type(texts).__name__}")
        texts = texts if isinstance(texts, list) else list(texts)
        allowed, disallowed = self._resolve(allowed_special, disallowed_special)
        if disallowed:
            for text in texts:
                _check_str(text, "encode_batch")
                _refuse_disallowed(text, disallowed)
        try:
            if dropout is not None:
                self._check_dropout()
                return self._engine.encode_batch_dropout(texts, dropout, seed, num_threads, allowed)
            return self._engine.encode_batch(texts, num_threads, allowed)
        except TypeError:
            for text in texts:
                _check_str(text, "encode_batch")
            raise

    def encode_ordinary_batch(self, texts: Iterable[str], num_threads: int | None = None) -> list[list[int]]:
        """:meth:`encode_ordinary` of each text, on ``num_threads`` threads, in order."""
        if isinstance(texts, (str, bytes)):
            raise TypeError(f"encode_ordinary_batch() takes an iterable of str, not a single {type(texts).__name__}")
        texts = texts if isinstance(texts, list) else list(texts)
        try:
            return self._engine.encode_batch(texts, num_threads, self._ordinary)
        except TypeError:
            for text in texts:
                _check_str(text, "encode_ordinary_batch")
            raise

    def encode_with_offsets(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = "all",
        disallowed_special: Literal["all"] | Collection[str] = "all",
        add_special_tokens: bool = False,
    ) -> tuple[list[int], list[tuple[int, int]]]:
        """The ids of ``text`` and, for each, the ``(start, end)`` character span it covers in
        ``text``: Hugging Face ``tokenizers``' ``Encoding.offsets`` for the same tokenizer. A
        leading space is part of its token's span, unless the tokenizer's post-processor trims
        offsets (``trim_offsets``), as Hugging Face's does. ``add_special_tokens``: the ids as
        :meth:`encode` gives them, each token the post-processor adds spanning ``(0, 0)``.

        A tokenizer that normalizes its text or writes a prefix into it maps each token back to
        the characters it came from, as ``tokenizers`` does: a prefix spans the first character
        after it, a character one character became (NFKC, lowercasing) spans that character, and
        a string that ``Replace`` wrote spans the last character of what it replaced.

        Byte-level BPE may cut a character's UTF-8 bytes into several tokens; each of them then
        spans the whole character (as in ``tokenizers``), so consecutive spans can overlap by that
        one character, and ``start`` may equal the previous token's ``start``. Spans never go
        backwards; the first starts at 0 and the last ends at ``len(text)`` unless the text starts
        or ends with a byte the vocab lacks.

        A byte the vocab lacks (see :attr:`BPEModel.dropped_bytes`) is left out of the encoding,
        and ``tokenizers`` places each later token of the same pre-token as if it were not there,
        in the bytes its ``ByteLevel`` writes: those spans start (and may end) earlier, on the
        left-out byte or the characters before it. They are given as ``tokenizers`` gives them.
        """
        allowed = self._policy(text, allowed_special, disallowed_special)
        processor = self.model.post_processor
        trim = processor.trims_offsets if processor is not None else None
        ids, offsets = self._call(self._engine.encode_with_offsets, text, allowed, trim)
        if add_special_tokens and processor is not None:
            return processor.around(ids), processor.around_offsets(offsets)
        return ids, offsets

    def _call(self, method: Callable[[str, *_Args], _T], text: str, *args: *_Args) -> _T:
        """``method(text, *args)``; a TypeError that says what ``text`` should be if it is no str."""
        try:
            return method(text, *args)
        except TypeError:
            _check_str(text, "encode")
            raise

    def _policy(
        self, text: str, allowed_special: Literal["all"] | AbstractSet[str], disallowed_special: Literal["all"] | Collection[str]
    ) -> frozenset[str] | None:
        """What to tell the engine to recognise (None: every special token) after checking that
        ``text`` holds no disallowed string."""
        allowed, disallowed = self._resolve(allowed_special, disallowed_special)
        if disallowed:
            _check_str(text, "encode")
            _refuse_disallowed(text, disallowed)
        return allowed

    def _resolve(
        self, allowed_special: Literal["all"] | AbstractSet[str], disallowed_special: Literal["all"] | Collection[str]
    ) -> tuple[frozenset[str] | None, frozenset[str]]:
        """The tokens the engine recognises (None: all of them, the added tokens among them) and
        the strings to refuse, by tiktoken's rules; the added tokens are always recognised."""
        specials = self._special_set
        if allowed_special == "all":
            allowed = specials
        else:
            allowed = frozenset(_token_collection(allowed_special, "allowed_special"))
        if disallowed_special == "all":
            disallowed = specials - allowed
        else:
            disallowed = frozenset(_token_collection(disallowed_special, "disallowed_special"))
        return (None if allowed >= specials else (allowed & specials) | self._added_set), disallowed

    def encode_iterable(
        self,
        iterable: Iterable[str],
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = "all",
        disallowed_special: Literal["all"] | Collection[str] = "all",
        dropout: float | None = None,
        seed: int = 0,
    ) -> Iterator[int]:
        """Lazily encode a stream of text (for example a file object, line by line).

        The result equals ``encode("".join(iterable))`` (with the same special-token policy)
        however the stream is cut. Memory stays small and constant: text is encoded a few
        kilobytes at a time, each time up to the last place where what follows cannot change the
        ids, with a small cache of its own. The iterator is the engine's own; pieces are read from
        ``iterable`` only as the ids are used. A piece that is not a str raises TypeError; a
        disallowed string raises DisallowedSpecialTokenError (its position counted from the start
        of the stream) when the stream reaches it, after the ids before it. ``dropout`` and
        ``seed``: BPE-dropout as for :meth:`encode` (each pre-token's draws seeded by its byte
        offset in the stream, so the ids equal ``encode(whole text, dropout=p, seed=s)``).
        """
        allowed, disallowed = self._resolve(allowed_special, disallowed_special)
        if disallowed:
            iterable = _checked_pieces(iterable, disallowed, "encode_iterable")
        return self._engine.iter_ids(iterable, allowed_special=allowed, dropout=dropout, seed=seed)

    def encode_blocks(
        self,
        iterable: Iterable[str],
        block_chars: int = _BLOCK_CHARS,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = "all",
        disallowed_special: Literal["all"] | Collection[str] = "all",
        dropout: float | None = None,
        seed: int = 0,
    ) -> Iterator[npt.NDArray[np.uint32]]:
        """Like :meth:`encode_iterable`, but yields the ids a block at a time as arrays (uint32):
        the fast way through big streams."""
        import numpy as np
        allowed, disallowed = self._resolve(allowed_special, disallowed_special)
        if disallowed:
            iterable = _checked_pieces(iterable, disallowed, "encode_blocks")
        stream = self._engine.stream(block_bytes=block_chars, allowed_special=allowed, dropout=dropout, seed=seed)
        for text in iterable:
            ids = stream.feed(text)
            if ids:
                yield np.array(ids, dtype=np.uint32)
        yield np.array(stream.finish(), dtype=np.uint32)

    # -- decoding -------------------------------------------------------------------------------

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of ``ids`` joined; ValueError naming the first id outside the vocabulary,
        TypeError for anything that is not a sequence of integers."""
        if isinstance(ids, (str, bytes, bytearray)):
            raise TypeError(f"decode takes a sequence of int ids, not {type(ids).__name__}")
        return self._engine.decode_bytes(ids)

    def decode(self, ids: Iterable[int], errors: str = "replace") -> str:
        """The text of ``ids``; bytes that are not valid UTF-8 become U+FFFD (``errors`` as for
        :meth:`bytes.decode`: ``"strict"`` raises instead). A tokenizer with a decoder (one
        imported from a SentencePiece-style BPE) then applies it, as Hugging Face's
        ``decode(ids, skip_special_tokens=False)`` does: its ``▁`` become spaces, the first one
        stripped. :meth:`decode_bytes` gives the tokens' bytes as they are."""
        if self.model.decoder is None:
            spelt = self._byte_level_spellings()
            if not spelt:
                return self.decode_bytes(ids).decode("utf-8", errors=errors)
            ids = list(ids)
            self.decode_bytes(ids)  # (the same errors for an id outside the vocabulary)
            return b"".join(spelt.get(token_id) or self.model.token_bytes(token_id) for token_id in ids).decode("utf-8", errors=errors)
        # The decoder runs on the tokens' strings, as Hugging Face's does: a fallback byte is its
        # <0xNN> token, and a token found in normalized text is as the normalizer wrote it
        # (Llama-2's "<s>" as "▁<s>").
        ids = list(ids)
        self.decode_bytes(ids)  # (the same errors for an id outside the vocabulary)
        spellings = self._decoder_spellings()
        return self.model.decoder.apply(
            [spellings.get(token_id) or self.model.token_bytes(token_id).decode("utf-8", errors=errors) for token_id in ids]
        )

    def _decoder_spellings(self) -> dict[int, str]:
        """The tokens a decoder sees spelt otherwise than as their bytes (see :meth:`decode`)."""
        spellings: dict[int, str] | None = getattr(self, "_spellings", None)
        if spellings is None:
            spellings = {
                **fallback_spellings(self.model.vocab, self.model.merges),
                **{token_id: data.decode("utf-8") for token_id, data in self._normalized_spellings().items()},
            }
            self._spellings = spellings
        return spellings

    def _byte_level_spellings(self) -> dict[int, bytes]:
        """The bytes Hugging Face's ByteLevel decoder gives the tokens found in normalized text that
        the normalizer writes otherwise (``"  "`` under ``Prepend("> ")`` is ``">   "``): it
        decodes a token's string through GPT-2's byte alphabet if every character is in it, else
        as its UTF-8."""
        spellings: dict[int, bytes] | None = getattr(self, "_byte_spellings", None)
        if spellings is None:
            # (here, not at the top: importing the formats costs a fresh process's load 20 ms)
            from ..formats.gpt2 import byte_level_bytes

            spellings = {}
            for token_id, data in self._normalized_spellings().items():
                spelt = byte_level_bytes(data.decode("utf-8")) or data
                if spelt != self.model.vocab[token_id]:
                    spellings[token_id] = spelt
            self._byte_spellings = spellings
        return spellings

    def _normalized_spellings(self) -> dict[int, bytes]:
        """The ids of the tokens found in normalized text that the normalizer writes otherwise,
        with those bytes."""
        model = self.model
        if model.normalizer is None or not model.normalized_tokens:
            return {}
        whole = model.whole_ids
        spelt = {whole[token]: model.normalizer.normalize(token).encode("utf-8") for token in model.normalized_tokens}
        return {token_id: data for token_id, data in spelt.items() if data != model.vocab[token_id]}

    def decode_batch(self, batch: Iterable[Iterable[int]], *, errors: str = "replace") -> list[str]:
        """:meth:`decode` of each sequence of ids, in order."""
        if isinstance(batch, (str, bytes, bytearray)):
            raise TypeError(f"decode_batch takes sequences of int ids, not {type(batch).__name__}")
        return [self.decode(ids, errors=errors) for ids in batch]

    def decode_bytes_batch(self, batch: Iterable[Iterable[int]]) -> list[bytes]:
        """:meth:`decode_bytes` of each sequence of ids, in order."""
        if isinstance(batch, (str, bytes, bytearray)):
            raise TypeError(f"decode_bytes_batch takes sequences of int ids, not {type(batch).__name__}")
        return [self.decode_bytes(ids) for ids in batch]

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one token, special tokens and aliases included; KeyError if no token has
        that id (as tiktoken)."""
        # (Integral: Python's ints and NumPy's, which register as such, without importing NumPy.)
        if isinstance(token, bool) or not isinstance(token, Integral):
            raise TypeError(f"a token id must be an int, not {type(token).__name__}")
        return self.model.token_bytes(int(token))

    def decode_tokens_bytes(self, tokens: Iterable[int]) -> list[bytes]:
        """The bytes of each token (tiktoken's ``decode_tokens_bytes``): how a text was cut."""
        return [self.decode_single_token_bytes(token) for token in tokens]

    # -- the vocabulary, as tiktoken's Encoding shows it ------------------------------------------

    @property
    def special_tokens_set(self) -> frozenset[str]:
        """The special tokens' strings."""
        return self._special_set

    @property
    def eot_token(self) -> int | None:
        """The id of ``<|endoftext|>``, or None if it is not one of the special tokens (tiktoken
        raises KeyError then; a tokenizer trained without special tokens has none)."""
        return self.special_ids.get(ENDOFTEXT)

    @property
    def max_token_value(self) -> int:
        """The highest id, special tokens included."""
        return self._engine.max_id

    @property
    def n_vocab(self) -> int:
        """``max_token_value + 1``, as tiktoken's ``n_vocab`` (equals :attr:`vocab_size` when the
        ids have no gaps, as for every tokenizer bpestore trains)."""
        return self._engine.max_id + 1

    def token_byte_values(self) -> list[bytes]:
        """Every ordinary (not special) token's bytes, sorted (tiktoken's ``token_byte_values``)."""
        special = set(self.special_ids.values())
        return sorted(token for token_id, token in self.vocab.items() if token_id not in special)

    def is_special_token(self, token: int) -> bool:
        """Whether ``token`` is the id of a special token (an added token's is not: it is ordinary)."""
        return token in self._special_id_set

    # -- misc -----------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def __repr__(self) -> str:
        added = f", added_tokens={self.added_tokens!r}" if self.added_tokens else ""
        return (
            f"Tokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)}, "
            f"special_tokens={self.special_tokens!r}{added}, merge_rule={self.merge_rule!r})"
        )


def _check_str(text: object, method: str) -> None:
    if not isinstance(text, str):
        hint = " (decode bytes first, e.g. data.decode('utf-8'))" if isinstance(text, (bytes, bytearray)) else ""
        raise TypeError(f"{method}() takes text as a str, not {type(text).__name__}{hint}")


def _token_collection(tokens: object, name: str) -> Collection[str]:
    """``tokens`` if it is a collection of str; TypeError/ValueError saying what was expected."""
    if isinstance(tokens, str):
        raise ValueError(f"{name} must be 'all' or a collection of special tokens, not {tokens!r}")
    if isinstance(tokens, (bytes, bytearray)) or not isinstance(tokens, Iterable):
        raise TypeError(f"{name} must be 'all' or a collection of str, not {type(tokens).__name__}")
    tokens = list(tokens)
    for token in tokens:
        if not isinstance(token, str):
            raise TypeError(f"{name} must hold str, not {type(token).__name__} ({token!r})")
    return tokens


def _refuse_disallowed(text: str, disallowed: frozenset[str]) -> None:
    """DisallowedSpecialTokenError for the first disallowed string in ``text`` (the longest of
    those that start there), if there is one."""
    first = -1
    for token in disallowed:
        if not token:
            continue
        position = text.find(token, 0, None if first < 0 else first + len(token))
        if position >= 0 and (first < 0 or position <= first):
            first = position
    if first < 0:
        return
    token = max((t for t in disallowed if t and text.startswith(t, first)), key=len)
    raise DisallowedSpecialTokenError(token, first)


def _checked_pieces(pieces: Iterable[str], disallowed: frozenset[str], method: str) -> Iterator[str]:
    """``pieces`` unchanged, after checking that no disallowed string starts in each (found across
    the cuts too); positions count characters from the start of the stream."""
    longest = max((len(token) for token in disallowed), default=0)
    if not longest:
        yield from pieces
        return
    tail = ""  # the end of the text so far that a disallowed string may still start in
    before_tail = 0  # the characters before ``tail``
    for piece in pieces:
        _check_str(piece, method)
        window = tail + piece
        try:
            _refuse_disallowed(window, disallowed)
        except DisallowedSpecialTokenError as error:
            raise DisallowedSpecialTokenError(error.token, before_tail + error.position) from None
        tail = window[len(window) - min(len(window), longest - 1) :] if longest > 1 else ""
        before_tail += len(window) - len(tail)
        yield piece


def _unpickled(model: BPEModel, warm_table: bytes | None = None) -> Tokenizer:
    """A pickled :class:`Tokenizer`: rebuilt from its model, with its warm table if it had one."""
    tokenizer = Tokenizer.from_model(model)
    if warm_table is not None:
        tokenizer.load_warm(warm_table)
    return tokenizer
