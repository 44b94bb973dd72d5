"""``BPEModel``: a byte-level BPE tokenizer as plain data, the one object the stages exchange.

Trainers produce it, the store saves and loads it, formats read and write it, and a
:class:`~bpestore.Tokenizer` is built from it. It is checked once, when it is made: after that,
every stage may rely on it being consistent.

>>> model = BPEModel({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")], ["<|endoftext|>"])
>>> model.vocab_size, model.special_ids
(258, {'<|endoftext|>': 257})
>>> BPEModel({0: b"a"}, [])
Traceback (most recent call last):
...
ValueError: the vocab lacks 255 single-byte tokens (0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07 ...); byte-level BPE needs all 256
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from typing import Any, Literal

from .collector import collector_paused
from .normalizer import Normalizer
from .decoder import Decoder
from .post_processor import PostProcessor
from .pre_tokenizer import PreTokenizer
from .pretokenize.patterns import GPT2_PATTERN, SPLIT_SAFE_PATTERNS

MergeRule = Literal["pair", "token"]
MERGE_RULES: tuple[str, ...] = ("pair", "token")

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]

TOKEN_OPTIONS = frozenset({"lstrip", "rstrip", "single_word"})
"""How a special or added token may take its surroundings (see :class:`BPEModel`'s ``token_options``)."""

MAX_TOKEN_ID = 2**31 - 1
"""The largest id a token may have: ids are stored as 32-bit integers by the engine, NumPy
arrays of ids and most consumers (``int32`` tensors), and the top of the unsigned range marks
"no token" inside the engine."""


@dataclass(frozen=True, eq=False, init=False)
class BPEModel:
    """A byte-level BPE tokenizer's data, validated.

    Args:
        vocab: id -> token bytes; must hold all 256 single bytes, each token once, ids from 0 to
            :data:`MAX_TOKEN_ID`.
        merges: the merges in rank order, each ``(left bytes, right bytes)``; with the ``"pair"``
            rule each part and the merged token must be in the vocab, and no merge may repeat
            (GPT-2's and Hugging Face's code would silently rank a repeat by its last place).
        special_tokens: non-empty strings always encoded as one token (repeats are dropped); one
            missing from the vocab gets the next free id. One whose bytes are already a token of
            the vocab (a single byte such as ``"!"``, or a merged token) takes that token's id: a
            token has one id here. (Hugging Face does the same when its vocab spells the token
            the same way, as for ``"!"``, but adds a new id when GPT-2's byte alphabet spells it
            differently, as for ``" "``, written ``"Ġ"``.)
        pattern: the pre-tokenizer regex (GPT-2's by default), in the syntax of Python's
            ``regex`` module; a pre-token is a whole match, and the matches must tile any text.
            Refused: an invalid pattern, one with capture groups (write ``(?:...)``), and one that
            backtracks catastrophically on short probe texts or whose matches leave a character
            of one uncovered (see :func:`check_pattern`).
        merge_rule: ``"pair"`` (GPT-2, CS336, Hugging Face: lowest-ranked merge first) or
            ``"token"`` (tiktoken: lowest-ranked resulting token first; a token's rank is its id).
        added_tokens: user-defined tokens (Hugging Face's non-special "added tokens", ``bpestore
            add-tokens``): non-empty strings that encoding always cuts out of the text and encodes
            whole, as it does special tokens (longest first, before pre-tokenization), but that
            are ordinary: no special-token policy refuses them or encodes them as text. Ids as for
            special tokens, after theirs: a token whose bytes are already in the vocab keeps that
            id, another gets the next free id, in the order given. Repeats are dropped; one that is
            also a special token is refused.
        normalizer: what the text between special tokens goes through before it is
            pre-tokenized (a :class:`~bpestore.normalizer.Normalizer`; None: nothing), as in a
            Hugging Face tokenizer's pipeline. bpestore's own trainings have none.
        normalized_tokens: those of the special and added tokens found in the text once it is normalized,
            as the normalizer writes them (Hugging Face's ``"normalized": true``), rather than
            in the text as given.
        post_processor: the special tokens put around a text's ids when encoding is asked to add
            them (a :class:`~bpestore.post_processor.PostProcessor`; Hugging Face's
            ``add_special_tokens=True``); its ids must be in the vocab.
        pre_tokenizer: Hugging Face pre-tokenizers in a sequence that make the pieces instead of
            ``pattern`` (a :class:`~bpestore.pre_tokenizer.PreTokenizer`; Falcon's), for a
            tokenizer whose pre-tokenization no one regex gives.
        dropped_bytes: bytes left out of every pre-token before it is merged, as Hugging Face's
            BPE leaves out a character its vocab lacks (Falcon's and SmolLM's vocabs lack some
            control characters): each is still a single-byte token of the vocab, at an id no
            encoding gives.
        byte_fallback: a SentencePiece-style BPE (Llama-2, Mistral): a pre-token is merged from its
            characters, each the vocab's token for it or else its bytes (the vocab's single-byte
            tokens are its byte-fallback tokens), not from its bytes.
        decoder: what the joined text of the tokens goes through to give the text back (a
            :class:`~bpestore.decoder.Decoder`; SentencePiece's ``▁`` back to spaces).
        config: what a model folder says of its tokenizer beside ``tokenizer.json``
            (``tokenizer_config.json``: the bos/eos/pad/unk tokens, the chat template, the
            model's maximum length), kept to be shown and written back, not used to encode.
        token_options: how special or added tokens take their surroundings, token -> a set of
            ``"lstrip"`` (the whitespace before is part of the token), ``"rstrip"`` (the
            whitespace after), ``"single_word"`` (found only where no word character touches
            it), as Hugging Face's added tokens (RoBERTa's ``<mask>`` takes the space before it).
        aliases: ids beside the vocab, id -> bytes, that a Hugging Face file gives to tokens a
            vocab of one id per token cannot hold: a vocab entry with the bytes of an added token
            of another id (GPT-NeoX's ``ĠĠ`` at 245 beside the added token ``"  "`` at 50276),
            and an entry that is not byte-level (kept as its UTF-8). Decoding gives their bytes.
            Encoding gives an alias only where Hugging Face's BPE model would: one with the bytes
            of a special or added token (its *twin*) is the model's id for those bytes, given
            when the merges make them, which happens only where a normalizer wrote them after
            the token was looked for; any other alias is never given. Each id is outside the
            vocab, and no id goes to a new token.

    Raises:
        TypeError: an argument (or a token, id or merge in it) of the wrong type, named.
        ValueError: anything inconsistent, with a message naming it.

    Two models are equal when all of the above are. :meth:`with_derived_merges` makes a
    ``"token"`` model whose merges are computed only when first asked for.
    """

    vocab: Vocab
    special_tokens: list[str] = field(default_factory=list)
    pattern: str = GPT2_PATTERN
    merge_rule: MergeRule = "pair"
    added_tokens: list[str] = field(default_factory=list)
    normalizer: Normalizer | None = None
    normalized_tokens: frozenset[str] = frozenset()
    post_processor: PostProcessor | None = None
    token_options: dict[str, frozenset[str]] = field(default_factory=dict)
    pre_tokenizer: PreTokenizer | None = None
    dropped_bytes: frozenset[int] = frozenset()
    byte_fallback: bool = False
    decoder: Decoder | None = None
    config: dict[str, Any] = field(default_factory=dict)
    aliases: dict[int, bytes] = field(default_factory=dict)
    special_ids: dict[str, int] = field(init=False, compare=False)
    added_ids: dict[str, int] = field(init=False, compare=False)
    # The merges (a property): the list, or None until _derive_merges(self) makes it.
    _merges: Merges | None = field(init=False, repr=False)
    _derive_merges: Callable[[BPEModel], Merges] | None = field(init=False, repr=False)

    def __init__(
        self,
        vocab: Mapping[int, bytes],
        merges: Iterable[tuple[bytes, bytes]],
        special_tokens: Iterable[str] | None = None,
        pattern: str = GPT2_PATTERN,
        merge_rule: MergeRule = "pair",
        added_tokens: Iterable[str] | None = None,
        *,
        normalizer: Normalizer | None = None,
        normalized_tokens: Iterable[str] = (),
        post_processor: PostProcessor | None = None,
        token_options: Mapping[str, Iterable[str]] | None = None,
        pre_tokenizer: PreTokenizer | None = None,
        dropped_bytes: Iterable[int] = (),
        byte_fallback: bool = False,
        decoder: Decoder | None = None,
        config: Mapping[str, Any] | None = None,
        aliases: Mapping[int, bytes] | None = None,
        _checked: bool = False,
        _derive_merges: Callable[[BPEModel], Merges] | None = None,
    ):
        if not isinstance(vocab, Mapping):
            raise TypeError(f"vocab must be a mapping of int ids to bytes, not {type(vocab).__name__}")
        if isinstance(merges, (str, bytes, bytearray)) or not isinstance(merges, Iterable):
            raise TypeError(f"merges must be a list of (bytes, bytes) pairs, not {type(merges).__name__}")
        vocab = dict(vocab)
        merges = [tuple(merge) for merge in merges]  # type: ignore[misc]  # (each checked to be a pair below)
        specials = check_special_tokens(special_tokens, repeats="drop")
        added = check_added_tokens(added_tokens, specials, repeats="drop")
        if not isinstance(merge_rule, str):
            raise TypeError(f"merge_rule must be 'pair' or 'token', not {type(merge_rule).__name__}")
        if merge_rule not in MERGE_RULES:
            raise ValueError(f"merge_rule must be 'pair' or 'token', not {merge_rule!r}")
        check_pattern(pattern)
        if normalizer is not None and not isinstance(normalizer, Normalizer):
            raise TypeError(f"normalizer must be a Normalizer or None, not {type(normalizer).__name__}")
        if normalizer is not None and not normalizer.steps:
            normalizer = None
        normalized = frozenset(normalized_tokens)
        if not normalized <= set(added) | set(specials):
            stray = sorted(normalized - set(added) - set(specials))[0]
            raise ValueError(f"normalized token {shown(stray)} is neither a special nor an added token")
        if _checked:  # see stored()
            id_of = ids_of(vocab, [token.encode("utf-8") for token in [*specials, *added]])
        else:
            _check_types(vocab)
            if merge_rule == "pair":
                _check_merge_types(merges)
            # The engine's rules (an Encoder is built by them): no token twice, all 256 bytes,
            # every merge's tokens in the vocab and no merge twice.
            from .engine import check_model  # (here: `import bpestore` loads no engine)

            check_model(vocab, merges, check_merges=merge_rule == "pair")
            id_of = ids_of(vocab, [token.encode("utf-8") for token in [*specials, *added]])
        alias_of = _checked_aliases(aliases, vocab)
        special_ids: dict[str, int] = {}
        added_ids: dict[str, int] = {}
        next_id = None  # (found when first needed: a pass over a 200k vocab)
        for kind, tokens, ids in (("special", specials, special_ids), ("added", added, added_ids)):
            for token in tokens:
                token_id = id_of.get(token.encode("utf-8"))
                if token_id is None:
                    if next_id is None:
                        next_id = max(chain(vocab, alias_of), default=-1) + 1
                    if next_id > MAX_TOKEN_ID:
                        raise ValueError(
                            f"no id is left for {kind} token {shown(token)}: the vocab uses id {MAX_TOKEN_ID}, the largest allowed"
                        )
                    token_id, next_id = next_id, next_id + 1
                    vocab[token_id] = token.encode("utf-8")
                    id_of[token.encode("utf-8")] = token_id
                ids[token] = token_id
        set_field = object.__setattr__  # frozen: fields are set once, here
        set_field(self, "vocab", vocab)
        set_field(self, "_merges", merges if _derive_merges is None else None)
        set_field(self, "_derive_merges", _derive_merges)
        set_field(self, "special_tokens", specials)
        set_field(self, "pattern", pattern)
        set_field(self, "merge_rule", merge_rule)
        set_field(self, "added_tokens", added)
        set_field(self, "normalizer", normalizer)
        set_field(self, "normalized_tokens", normalized)
        if post_processor is not None:
            if not isinstance(post_processor, PostProcessor):
                raise TypeError(f"post_processor must be a PostProcessor or None, not {type(post_processor).__name__}")
            absent = [token_id for token_id in (*post_processor.prefix, *post_processor.suffix) if token_id not in vocab]
            if absent:
                raise ValueError(f"the post-processor adds id {absent[0]}, which no token has")
        set_field(self, "post_processor", post_processor)
        options = {token: frozenset(named) for token, named in (token_options or {}).items() if named}
        for token, named in options.items():
            if token not in specials and token not in added:
                raise ValueError(f"token options for {shown(token)}, which is neither a special nor an added token")
            if not named <= TOKEN_OPTIONS:
                raise ValueError(f"token options for {shown(token)} must be among {sorted(TOKEN_OPTIONS)}, not {sorted(named)}")
        set_field(self, "token_options", options)
        if pre_tokenizer is not None and not isinstance(pre_tokenizer, PreTokenizer):
            raise TypeError(f"pre_tokenizer must be a PreTokenizer or None, not {type(pre_tokenizer).__name__}")
        set_field(self, "pre_tokenizer", pre_tokenizer)
        dropped = frozenset(dropped_bytes)
        if not all(isinstance(byte, int) and not isinstance(byte, bool) and 0 <= byte < 256 for byte in dropped):
            raise ValueError(f"dropped_bytes must be bytes (integers from 0 to 255), not {sorted(map(repr, dropped))[:4]}")
        set_field(self, "dropped_bytes", dropped)
        if not isinstance(byte_fallback, bool) or (byte_fallback and merge_rule != "pair"):
            raise ValueError("byte_fallback is True or False, and True only with the pair rule")
        if decoder is not None and not isinstance(decoder, Decoder):
            raise TypeError(f"decoder must be a Decoder or None, not {type(decoder).__name__}")
        set_field(self, "byte_fallback", byte_fallback)
        set_field(self, "decoder", decoder)
        set_field(self, "config", dict(config or {}))
        set_field(self, "aliases", alias_of)
        set_field(self, "special_ids", special_ids)
        set_field(self, "added_ids", added_ids)

    @classmethod
    def stored(
        cls,
        vocab: Mapping[int, bytes],
        merges: Iterable[tuple[bytes, bytes]] | Callable[[BPEModel], Merges],
        special_tokens: Iterable[str],
        pattern: str,
        merge_rule: MergeRule,
        added_tokens: Iterable[str] = (),
        *,
        normalizer: Normalizer | None = None,
        normalized_tokens: Iterable[str] = (),
        post_processor: PostProcessor | None = None,
        token_options: Mapping[str, Iterable[str]] | None = None,
        pre_tokenizer: PreTokenizer | None = None,
        dropped_bytes: Iterable[int] = (),
        byte_fallback: bool = False,
        decoder: Decoder | None = None,
        config: Mapping[str, Any] | None = None,
        aliases: Mapping[int, bytes] | None = None,
    ) -> BPEModel:
        """A model read back from the store, which only ever saves models that passed the checks:
        the vocab and merges are not checked a second time (a tenth of ``Tokenizer.from_db``'s
        time for GPT-2); the cheap checks still run. ``merges`` may be a function of the model
        that reads them when first asked for, as :meth:`with_derived_merges` takes (such as
        :class:`PackedMerges`, which the encoder reads without making the list)."""
        derive_merges = None
        if callable(merges):
            derive_merges, merges = merges, []
        return cls(
            vocab, merges, special_tokens, pattern, merge_rule, added_tokens,
            normalizer=normalizer, normalized_tokens=normalized_tokens, post_processor=post_processor,
            token_options=token_options, pre_tokenizer=pre_tokenizer, dropped_bytes=dropped_bytes, byte_fallback=byte_fallback,
            decoder=decoder, config=config, aliases=aliases, _checked=True, _derive_merges=derive_merges,
        )

    @classmethod
    def with_derived_merges(
        cls,
        vocab: Mapping[int, bytes],
        derive_merges: Callable[[BPEModel], Merges],
        special_tokens: Iterable[str] | None = None,
        pattern: str = GPT2_PATTERN,
        added_tokens: Iterable[str] | None = None,
        *,
        normalizer: Normalizer | None = None,
        normalized_tokens: Iterable[str] = (),
        post_processor: PostProcessor | None = None,
        token_options: Mapping[str, Iterable[str]] | None = None,
        pre_tokenizer: PreTokenizer | None = None,
        dropped_bytes: Iterable[int] = (),
        decoder: Decoder | None = None,
        config: Mapping[str, Any] | None = None,
        aliases: Mapping[int, bytes] | None = None,
        _checked: bool = False,
    ) -> BPEModel:
        """A ``"token"``-rule model (checked as the constructor checks one) whose merges are
        ``derive_merges(model)``, computed when first asked for: the token rule encodes by the
        tokens' ranks alone, and reconstructing the merges of a 200k-token tiktoken vocabulary
        takes longer than all the rest of loading it. ``derive_merges`` must be picklable (a
        module's function or a ``functools.partial`` of one) for the model to be. (``_checked``:
        the vocab is one the engine has checked already, as :meth:`stored`'s.)"""
        return cls(
            vocab, [], special_tokens, pattern, "token", added_tokens, normalizer=normalizer, normalized_tokens=normalized_tokens,
            post_processor=post_processor, token_options=token_options,
            pre_tokenizer=pre_tokenizer, dropped_bytes=dropped_bytes, decoder=decoder, config=config, aliases=aliases,
            _checked=_checked,
            _derive_merges=derive_merges,
        )

    def deferred_merges(self) -> Callable[[BPEModel], Merges] | None:
        """What makes the merges when they are first asked for (a model read from a store holds a
        :class:`PackedMerges`), or None: a model given them, or one that has made them."""
        return self._derive_merges if self._merges is None else None

    @property
    def merges(self) -> Merges:
        """The merges in rank order, each ``(left bytes, right bytes)``."""
        if self._merges is None:
            assert self._derive_merges is not None  # (the one way to leave _merges None)
            # Two threads may both compute them: the same list, and either one is kept.
            object.__setattr__(self, "_merges", self._derive_merges(self))
        assert self._merges is not None
        return self._merges

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BPEModel):
            return NotImplemented
        return (self.vocab, self.special_tokens, self.pattern, self.merge_rule, self.added_tokens, self.pipeline) == (
            other.vocab, other.special_tokens, other.pattern, other.merge_rule, other.added_tokens, other.pipeline
        ) and self.merges == other.merges

    @property
    def pipeline(self) -> dict[str, Any]:
        """What the text goes through around the BPE model, as keyword arguments of this class
        (for a model derived from this one: trimmed, with tokens added, trained further)."""
        return {
            "normalizer": self.normalizer, "normalized_tokens": self.normalized_tokens, "post_processor": self.post_processor,
            "token_options": self.token_options, "pre_tokenizer": self.pre_tokenizer, "dropped_bytes": self.dropped_bytes,
            "byte_fallback": self.byte_fallback, "decoder": self.decoder, "config": self.config, "aliases": self.aliases,
        }

    __hash__ = None  # type: ignore[assignment]  # (a model holds dicts: unhashable, as before)

    @property
    def vocab_size(self) -> int:
        """The number of ids (special and added tokens included)."""
        return len(self.vocab)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of an id of the vocab or an alias (KeyError for another id)."""
        found = self.vocab.get(token_id)
        return found if found is not None else self.aliases[token_id]

    @property
    def twin_ids(self) -> dict[int, int]:
        """Each alias that is the twin of a special or added token (see ``aliases``), with that
        token's id."""
        if not self.aliases:
            return {}
        whole = {self.vocab[token_id]: token_id for token_id in self.whole_ids.values()}
        return {alias: whole[data] for alias, data in self.aliases.items() if data in whole}

    def bpe_vocab(self) -> tuple[dict[int, bytes], dict[int, bytes]]:
        """The vocab BPE merges to, and the ids beside it: each twin alias is the ordinary token of
        its bytes (the id Hugging Face's model gives them) and its special or added token keeps
        its own id beside, with the other aliases, which are only decoded (see ``aliases``).
        Without aliases, the vocab itself and nothing beside."""
        if not self.aliases:
            return self.vocab, {}
        vocab, beside = dict(self.vocab), dict(self.aliases)
        for alias, token_id in self.twin_ids.items():
            beside[token_id] = vocab.pop(token_id)
            vocab[alias] = beside.pop(alias)
        return vocab, beside

    @property
    def whole_ids(self) -> dict[str, int]:
        """Every string encoding cuts out of the text and encodes whole: the special tokens and
        the added tokens, with their ids (what the engine is given as its "special tokens")."""
        return {**self.special_ids, **self.added_ids}

    def __repr__(self) -> str:
        added = f", added_tokens={self.added_tokens!r}" if self.added_tokens else ""
        if self.normalizer is not None:
            added += f", normalizer={str(self.normalizer)!r}"
        return (
            f"BPEModel(vocab_size={self.vocab_size}, merges={len(self.merges)}, "
            f"special_tokens={self.special_tokens!r}{added}, merge_rule={self.merge_rule!r})"
        )


@dataclass(frozen=True, eq=False)
class PackedMerges:
    """The merges of a model packed by the engine (a store's packed copy of its vocab and merges,
    ``bpestore.engine.pack_model``'s bytes, checked whole when the model was read from it), made
    into a list only when first asked for (:meth:`BPEModel.merges`): a tokenizer's encoder reads
    them in ``data`` itself, and making 50,000 to 200,000 merge tuples that encoding never reads
    was a third of loading a tokenizer from a store. Picklable, as a model's merges function must
    be."""

    data: bytes

    def __call__(self, model: BPEModel) -> Merges:
        from .engine import unpack_model  # (here: `import bpestore` loads no engine)

        with collector_paused():  # (acyclic objects: see bpestore.store.packed)
            return unpack_model(self.data)[1]


def _checked_aliases(aliases: Mapping[int, bytes] | None, vocab: Mapping[int, bytes]) -> dict[int, bytes]:
    """``aliases`` as a dict, checked: ids from 0 to :data:`MAX_TOKEN_ID` outside ``vocab``,
    each with non-empty bytes."""
    if aliases is None:
        return {}
    if not isinstance(aliases, Mapping):
        raise TypeError(f"aliases must be a mapping of int ids to bytes, not {type(aliases).__name__}")
    checked: dict[int, bytes] = {}
    for token_id, data in aliases.items():
        if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id <= MAX_TOKEN_ID:
            raise ValueError(f"alias id {token_id!r} is not an id (an integer from 0 to {MAX_TOKEN_ID})")
        if not isinstance(data, bytes) or not data:
            raise TypeError(f"alias {token_id} must be non-empty bytes, not {shown(data)}")
        if token_id in vocab:
            raise ValueError(f"alias id {token_id} is also the vocab's token {shown(vocab[token_id])}")
        checked[token_id] = data
    return checked


def shown(token: object, limit: int = 60) -> str:
    """``repr(token)`` for a message, shortened past ``limit`` characters (a token may be a
    megabyte long: a message names it, it does not echo it)."""
    text = repr(token)
    if len(text) <= limit:
        return text
    size = f" ({len(token):,} characters)" if isinstance(token, str) else ""
    return f"{text[: limit - 1]}…{size}"


def check_special_tokens(special_tokens: Iterable[str] | None, *, repeats: Literal["drop", "refuse"]) -> list[str]:
    """The special tokens as a list; ValueError for empty strings, TypeError for non-strings and
    for one string or bytes (not a list of them: ``"abc"`` would otherwise be three special tokens).
    A token given twice is dropped the second time (a tokenizer) or refused (training, where the
    order gives ids).

    >>> check_special_tokens(["<a>", "<b>", "<a>"], repeats="drop")
    ['<a>', '<b>']
    >>> check_special_tokens(["<a>", ""], repeats="drop")
    Traceback (most recent call last):
    ...
    ValueError: special tokens must be non-empty strings, got ''
    """
    if isinstance(special_tokens, (str, bytes, bytearray)):
        raise TypeError(f"special_tokens must be a list of strings, not one {type(special_tokens).__name__} ({special_tokens!r})")
    if special_tokens is not None and not isinstance(special_tokens, Iterable):
        raise TypeError(f"special_tokens must be a list of strings, not {type(special_tokens).__name__}")
    tokens = list(special_tokens or ())
    for token in tokens:
        if not isinstance(token, str):
            raise TypeError(f"special tokens must be strings, not {type(token).__name__} ({shown(token)})")
        if not token:
            raise ValueError(f"special tokens must be non-empty strings, got {shown(token)}")
    unique = list(dict.fromkeys(tokens))
    if repeats == "refuse" and len(unique) != len(tokens):
        duplicates = sorted({token for token in tokens if tokens.count(token) > 1})
        raise ValueError(f"duplicate special tokens: {', '.join(map(repr, duplicates))}")
    return unique


def check_added_tokens(
    added_tokens: Iterable[str] | None, special_tokens: Iterable[str], *, repeats: Literal["drop", "refuse"]
) -> list[str]:
    """The added tokens as a list, checked as special tokens are (:func:`check_special_tokens`,
    with their messages saying "added tokens"), and ValueError for one that is also a special
    token (a string is encoded whole either as a special token or as an ordinary one, not both).

    >>> check_added_tokens(["<tool>", "<|endoftext|>"], ["<|endoftext|>"], repeats="drop")
    Traceback (most recent call last):
    ...
    ValueError: added token '<|endoftext|>' is a special token of the tokenizer
    """
    if isinstance(added_tokens, (str, bytes, bytearray)):
        raise TypeError(f"added_tokens must be a list of strings, not one {type(added_tokens).__name__} ({added_tokens!r})")
    if added_tokens is not None and not isinstance(added_tokens, Iterable):
        raise TypeError(f"added_tokens must be a list of strings, not {type(added_tokens).__name__}")
    tokens = list(added_tokens or ())
    for token in tokens:
        if not isinstance(token, str):
            raise TypeError(f"added tokens must be strings, not {type(token).__name__} ({shown(token)})")
        if not token:
            raise ValueError(f"added tokens must be non-empty strings, got {shown(token)}")
    unique = list(dict.fromkeys(tokens))
    if repeats == "refuse" and len(unique) != len(tokens):
        duplicates = sorted({token for token in tokens if tokens.count(token) > 1})
        raise ValueError(f"added token {shown(duplicates[0])} is given twice")
    specials = set(special_tokens)
    for token in unique:
        if token in specials:
            raise ValueError(f"added token {shown(token)} is a special token of the tokenizer")
    return unique


def check_pattern(pattern: object) -> None:
    r"""ValueError unless ``pattern`` can be a pre-tokenizer: a regex string that the engine
    compiles, without capture groups (tools disagree on what such a pattern's pre-tokens are:
    tiktoken, Hugging Face and ``re.finditer`` take whole matches, ``regex.findall`` takes the
    groups and drops the rest of the text), that is not too big to compile, that does not
    backtrack catastrophically on short probe texts (such a pattern makes encoding exponential in
    the length of a word), and whose non-empty matches tile each probe text: every character of
    every kind (letters of many scripts, digits, whitespace, punctuation, symbols, emoji, marks,
    controls, ..., and those the pattern names) is in some match, else encoding would drop it
    (``\w+``, ``(?=a)`` and the empty pattern are refused). Encoding checks tiling again and raises
    :class:`~bpestore.errors.PatternError` for a text the probes did not foresee. The known
    patterns pass at no cost; another is checked once per process.

    >>> check_pattern(r"(\w+)|\s+")
    Traceback (most recent call last):
    ...
    ValueError: pre-tokenizer pattern "(\\w+)|\\s+" has 1 capture group; write each group as a non-capturing (?:...) group (a pre-token is the whole match)
    """
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a regex string, not {type(pattern).__name__} ({pattern!r})")
    if pattern not in SPLIT_SAFE_PATTERNS:
        _check_custom_pattern(pattern)


@lru_cache(maxsize=64)
def _check_custom_pattern(pattern: str) -> None:
    from .engine import Pretokenizer  # the engine runs the pattern: it is the one to ask

    Pretokenizer(pattern)


def ids_of(vocab: dict[int, bytes], tokens: list[bytes]) -> dict[bytes, int]:
    """token -> id for those of ``tokens`` in ``vocab``, the first id in the dict's order for each,
    found by the engine in one pass (a reverse map of a whole 50k vocab cost a tenth of
    ``Tokenizer.from_db``, and a search in Python for each of cl100k_base's five special tokens as
    long again).

    >>> ids_of({0: b"a", 1: b"b", 2: b"<s>", 3: b"a"}, [b"<s>", b"a", b"z"])
    {b'a': 0, b'<s>': 2}
    """
    if not tokens:
        return {}
    from .engine import token_ids  # (here: `import bpestore` loads no engine)

    return token_ids(vocab, tokens)


def _check_types(vocab: dict[int, bytes]) -> None:
    """TypeError (ValueError for an id out of range) unless ``vocab`` maps ids from 0 to
    :data:`MAX_TOKEN_ID` to bytes; the model's other rules are the engine's (``check_model``)."""
    # Whole-collection checks at C speed first (a 200k vocab is checked in milliseconds); the
    # loops below only run to name what is wrong.
    id_types, token_types = set(map(type, vocab)), set(map(type, vocab.values()))
    if not id_types <= {int} or (vocab and (min(vocab) < 0 or max(vocab) > MAX_TOKEN_ID)):
        bad = next(token_id for token_id in vocab if type(token_id) is not int or not 0 <= token_id <= MAX_TOKEN_ID)
        wrong = TypeError if type(bad) is not int else ValueError  # not an int at all, or out of range
        raise wrong(f"token ids must be integers from 0 to {MAX_TOKEN_ID} (2**31-1), got {bad!r}")
    if not token_types <= {bytes}:
        bad_id = next(token_id for token_id, token in vocab.items() if type(token) is not bytes)
        raise TypeError(f"token {bad_id} must be bytes, got {vocab[bad_id]!r}")


def _check_merge_types(merges: Sequence[tuple[bytes, bytes]]) -> None:
    """TypeError (ValueError for a tuple of another length) unless each merge is a pair of bytes."""
    if set(map(len, merges)) <= {2} and set(map(type, chain.from_iterable(merges))) <= {bytes}:
        return
    for rank, merge in enumerate(merges):  # name the first bad merge
        if not all(isinstance(part, bytes) for part in merge):
            raise TypeError(f"merge {rank} must be a pair of bytes, got {merge!r}")
        if len(merge) != 2:
            raise ValueError(f"merge {rank} must be a pair of bytes, got {merge!r}")
