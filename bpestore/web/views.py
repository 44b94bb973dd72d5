"""The explorer's pages: tokenizers, one tokenizer (vocab, merges), versions of a name, the
playground and the diff. Every page only reads the store; tokenizers are named by ``?ref=`` (names
may hold any character but ``@`` and spaces, ``/`` included)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask import Blueprint, current_app, render_template, request

from ..encode.tokenizer import Tokenizer
from ..errors import BpestoreError, TokenizerNotFoundError
from ..metrics import Measurement, measure_counts, measure_file, measure_text
from ..pretokenize.inputs import short_corpus_path, stored_corpus_paths
from ..store.database import TokenizerInfo
from ..workflow import diff_tokenizers, token_text
from . import svg
from .data import CorpusCounts, Explorer

pages = Blueprint("pages", __name__)

MAX_TEXT_CHARS = 200_000  # pasted text beyond this is cut (the page would be unreadable anyway)
MAX_SIDE_BY_SIDE = 4
DIFFERING_CANDIDATES = 5000  # the most frequent words (pre-tokens) searched for different splits
PAGE_SIZE = 100
DEFAULT_TEXT = "Hello world! Tokenizers split text into pieces: naïve café, 中文, emoji 👍🏽 and <|endoftext|> too."
_WORD = re.compile(r"\s?\S+")  # a word with the space before it, as GPT-2's pre-tokens carry it


def explorer() -> Explorer:
    found: Explorer = current_app.extensions["bpestore_explorer"]  # (create_app put it there)
    return found


@dataclass(frozen=True)
class Piece:
    """One token as the playground shows it."""

    id: int
    text: str
    special: bool
    not_utf8: bool
    num_bytes: int


def show_token(token: bytes) -> str:
    """A token's text for people (escapes as in ``bpestore show``; invalid UTF-8 as ``\\xNN``)."""
    return token_text(token)


def is_utf8(token: bytes) -> bool:
    try:
        token.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def pieces(tokenizer: Tokenizer, ids: list[int]) -> list[Piece]:
    special_ids = set(tokenizer.special_ids.values())
    result = []
    for token_id in ids:
        token = tokenizer.vocab[token_id]
        special = token_id in special_ids
        result.append(Piece(token_id, token.decode("utf-8") if special else show_token(token), special, not special and not is_utf8(token), len(token)))
    return result


def _text_argument() -> str:
    """The pasted text. Browsers send a text area's line breaks as CRLF whatever the text held
    (its value, as the user sees it, has LF): undo that, so that the ids are those of the text shown."""
    return request.values.get("text", "").replace("\r\n", "\n")[:MAX_TEXT_CHARS]


# The largest number a page, id or rank argument may hold: ids and ranks are 32-bit in the store,
# and a page beyond it would ask the database for an offset past what its integers hold (SQLite
# refuses a Python int above 2**63 with OverflowError: a 500 before this bound).
MAX_NUMBER_ARGUMENT = 2**31 - 1


def _int_argument(name: str) -> int | None:
    """The query argument ``name`` as a whole number from 0 to :data:`MAX_NUMBER_ARGUMENT`, None
    when absent or blank; a ValueError (a 400 page) naming it otherwise."""
    text = request.args.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_NUMBER_ARGUMENT:
        raise ValueError(f"{name} must be a whole number from 0 to {MAX_NUMBER_ARGUMENT:,}, got {text[:40]!r}")
    return value


def _lineage(infos: list[TokenizerInfo]) -> dict[str, list[str]]:
    """For each tokenizer, the other tokenizers trained on the same corpus (same content)."""
    by_corpus: dict[str, list[str]] = {}
    for info in infos:
        if info.corpus_sha256:
            by_corpus.setdefault(info.corpus_sha256, []).append(info.ref)
    return {info.ref: [ref for ref in by_corpus.get(info.corpus_sha256 or "", []) if ref != info.ref] for info in infos}


def _continues(infos: list[TokenizerInfo], known: set[str]) -> dict[str, tuple[str, bool]]:
    """For each continued tokenizer: its base's ref, and whether the base is still in the store
    (a deleted base is named but not linked)."""
    found = {}
    for info in infos:
        base = info.base_ref
        if base is not None:
            found[info.ref] = (base, base in known)
    return found


@pages.app_template_filter("short_corpus")
def _short_corpus(info: TokenizerInfo) -> str:
    """A tokenizer's corpus for a table: ``a.txt``, ``a.txt +2 files``, ``counts: c.parquet``."""
    return short_corpus_path(info.corpus_path or "", info.corpus_origin)


@pages.app_template_filter("corpus_files")
def _corpus_files(info: TokenizerInfo) -> tuple[str, list[str]]:
    """A tokenizer's corpus as its marker (``counts: ``..., from its origin) and its files."""
    return stored_corpus_paths(info.corpus_path or "", info.corpus_origin)


@pages.app_errorhandler(BpestoreError)
def _store_error(error: BpestoreError) -> tuple[str, int]:
    return render_template("error.html", message=str(error)), 404


@pages.app_errorhandler(ValueError)
def _bad_argument(error: ValueError) -> tuple[str, int]:
    return render_template("error.html", message=str(error)), 400


# -- the tokenizers --------------------------------------------------------------------------------


@pages.route("/")
def index() -> str:
    query = request.args.get("q", "").strip()
    infos = explorer().list()
    lineage = _lineage(infos)
    shown = [info for info in infos if query.lower() in info.name.lower()]
    names = sorted({info.name for info in infos})
    continues = _continues(infos, {info.ref for info in infos})
    return render_template(
        "index.html", infos=shown, total=len(infos), query=query, lineage=lineage, continues=continues, names=names,
    )


@pages.route("/tokenizer")
def tokenizer_page() -> str:
    info = explorer().info(request.args.get("ref", ""))
    kinds, lengths = explorer().kinds_and_lengths(info)
    longest = explorer().longest_tokens(info, 25)
    histogram = svg.bar_chart(
        [(str(length), count) for length, count in sorted(lengths.items())],
        title="token lengths", x_label="bytes per token", y_label="tokens",
    )
    versions = explorer().store.list(info.name)
    base = info.base_ref
    continues = None
    if base is not None:
        continues = (base, _is_stored(base))
    return render_template(
        "tokenizer.html", info=info, kinds=kinds, longest=longest, histogram=histogram, show_token=show_token,
        versions=versions, mean_length=_mean_length(lengths), continues=continues,
    )


def _is_stored(ref: str) -> bool:
    try:
        explorer().info(ref)
    except TokenizerNotFoundError:  # deleted since (the lineage keeps its name)
        return False
    return True


def _mean_length(lengths: dict[int, int]) -> float | None:
    count = sum(lengths.values())
    return sum(length * n for length, n in lengths.items()) / count if count else None


@pages.route("/vocab")
def vocab_page() -> str:
    info = explorer().info(request.args.get("ref", ""))
    text = request.args.get("q", "")
    id_text = request.args.get("id", "").strip()
    hex_text = request.args.get("hex", "").strip()
    token_id = _int_argument("id")
    try:
        hex_bytes = bytes.fromhex(hex_text) if hex_text else None
    except ValueError:
        raise ValueError(f"not hexadecimal bytes: {hex_text!r} (e.g. 'e4b8ad' or 'e4 b8 ad')") from None
    page = _int_argument("page") or 0
    total, rows = explorer().vocab_page(info, text=text, token_id=token_id, hex_bytes=hex_bytes, offset=page * PAGE_SIZE, limit=PAGE_SIZE)
    return render_template(
        "vocab.html", info=info, rows=rows, total=total, page=page, page_size=PAGE_SIZE, q=text, id=id_text, hex=hex_text,
        show_token=show_token,
    )


@pages.route("/merges")
def merges_page() -> str:
    info = explorer().info(request.args.get("ref", ""))
    text = request.args.get("q", "")
    rank_text = request.args.get("rank", "").strip()
    page = _int_argument("page") or 0
    rank = _int_argument("rank")
    total, rows = explorer().merges_page(info, text=text, rank=rank, offset=page * PAGE_SIZE, limit=PAGE_SIZE)
    return render_template(
        "merges.html", info=info, rows=rows, total=total, page=page, page_size=PAGE_SIZE, q=text, rank=rank_text, show_token=show_token,
    )


def _corpus_of(infos: list[TokenizerInfo]) -> tuple[TokenizerInfo, CorpusCounts] | None:
    """The first of ``infos`` trained on a stored corpus, with the corpus's pre-tokens."""
    for info in infos:
        corpus = explorer().corpus_counts(info)
        if corpus is not None:
            return info, corpus
    return None


def _measure_on_counts(info: TokenizerInfo, corpus: CorpusCounts) -> Measurement:
    key = ("counts", info.ref, corpus.corpus_id, corpus.path, len(corpus.counts))
    return explorer().cached(key, lambda: measure_counts(explorer().tokenizer(info.ref)[1], corpus.counts))


def _corpus_note(owner: TokenizerInfo, corpus: CorpusCounts, measured: list[TokenizerInfo]) -> dict[str, Any]:
    """What the page says about measuring on ``corpus`` (``owner``'s): which, how much of it, and
    which tokenizers pre-tokenize otherwise (their numbers are estimates)."""
    return {
        "ref": owner.ref,
        "path": corpus.path,
        "label": short_corpus_path(corpus.path, corpus.origin),
        "complete": corpus.complete,
        "used": len(corpus.counts),
        "distinct": corpus.distinct_pretokens,
        "covered": corpus.covered_share,
        "unreadable": corpus.unreadable,
        "other_pattern": [info.ref for info in measured if info.pattern != corpus.pattern],
    }


@pages.route("/versions", methods=["GET", "POST"])
def versions_page() -> str:
    """The versions of one name, and how their compression grows with the vocab size: on a
    pasted text, else on the corpus of the latest version trained on one (from its stored
    pre-token counts)."""
    name = request.values.get("name", "")
    infos = explorer().store.list(name)
    if not infos:
        raise BpestoreError(f"no tokenizer named {name!r}")
    text = _text_argument()
    rows, corpus = [], None
    if text:
        for info in infos:
            # (type: ignore: mypy cannot infer a lambda with a default argument, info=info binding this loop's info)
            measured = explorer().cached(("text", info.ref, text), lambda info=info: measure_text(explorer().tokenizer(info.ref)[1], text))  # type: ignore[misc]
            rows.append((info, measured))
    elif (found := _corpus_of(list(reversed(infos)))) is not None:
        owner, counts = found
        rows = [(info, _measure_on_counts(info, counts)) for info in infos]
        corpus = _corpus_note(owner, counts, infos)
    chart = svg.line_chart(
        [(name, [(info.vocab_size, m.bytes_per_token or 0) for info, m in rows])],
        title=f"bytes per token against vocab size ({name})", x_label="vocab size", y_label="bytes per token",
    )
    return render_template("versions.html", name=name, infos=infos, rows=rows, chart=chart, text=text, corpus=corpus)


# -- playground --------------------------------------------------------------------------------------


@pages.route("/playground", methods=["GET", "POST"])
def playground() -> str:
    infos = explorer().list()
    refs = [ref for ref in request.values.getlist("t") if ref][:MAX_SIDE_BY_SIDE]
    if not refs and infos:
        refs = [infos[-1].ref]
    text = _text_argument() if "text" in request.values else DEFAULT_TEXT
    columns = []
    for ref in refs:
        info, tokenizer = explorer().tokenizer(ref)
        ids = tokenizer.encode(text)
        measured = measure_text(tokenizer, text)
        columns.append({"info": info, "ids": ids, "pieces": pieces(tokenizer, ids), "measured": measured})
    return render_template("playground.html", infos=infos, refs=refs, text=text, columns=columns, max_side_by_side=MAX_SIDE_BY_SIDE)


# -- diff --------------------------------------------------------------------------------------------


def differing_words(
    a: Tokenizer, b: Tokenizer, counted: list[tuple[str, int]], limit: int = 40, *, special_tokens: bool = True
) -> list[dict[str, Any]]:
    """The first of ``counted`` (words or pre-tokens with their counts, most frequent first) that
    ``a`` and ``b`` split differently, with both splits; at most ``limit``. ``special_tokens``:
    whether special tokens' strings are encoded as such (as in a text) or as ordinary text (as
    in a corpus's pre-tokens, which hold none)."""
    words = [word for word, _ in counted]
    if special_tokens:
        ids_a, ids_b = a.encode_batch(words), b.encode_batch(words)
    else:
        ids_a, ids_b = a.encode_ordinary_batch(words), b.encode_ordinary_batch(words)
    found = []
    for (word, count), one, other in zip(counted, ids_a, ids_b):
        split_a, split_b = [a.vocab[i] for i in one], [b.vocab[i] for i in other]
        if split_a != split_b:
            found.append({"word": word, "count": count, "a": pieces(a, one), "b": pieces(b, other)})
            if len(found) == limit:
                break
    return found


def text_words(text: str, candidates: int = DIFFERING_CANDIDATES) -> list[tuple[str, int]]:
    """The most frequent words of ``text`` (with the space before them, as GPT-2's pre-tokens
    carry it), with their counts."""
    return Counter(_WORD.findall(text)).most_common(candidates)


def _measure_file_cached(ref: str, tokenizer: Tokenizer, path: str) -> Measurement:
    stat = Path(path).stat()
    return explorer().cached(("file", ref, path, stat.st_mtime_ns, stat.st_size), lambda: measure_file(tokenizer, path))


@pages.route("/diff", methods=["GET", "POST"])
def diff_page() -> str:
    infos = explorer().list()
    ref_a, ref_b = request.values.get("a", ""), request.values.get("b", "")
    if not (ref_a and ref_b):
        if len(infos) >= 2:
            ref_a, ref_b = ref_a or infos[-2].ref, ref_b or infos[-1].ref
        else:
            return render_template("diff.html", infos=infos, result=None)
    info_a, tok_a = explorer().tokenizer(ref_a)
    info_b, tok_b = explorer().tokenizer(ref_b)
    result = explorer().cached(("diff", info_a.ref, info_b.ref), lambda: diff_tokenizers(info_a.ref, tok_a, info_b.ref, tok_b))
    text = _text_argument()
    compared, corpus = None, None
    if text:
        compared = {"a": measure_text(tok_a, text), "b": measure_text(tok_b, text), "words": differing_words(tok_a, tok_b, text_words(text))}
    elif (found := _corpus_of([info_a, info_b])) is not None:
        owner, counts = found
        corpus = _corpus_note(owner, counts, [info_a, info_b])
        candidates = [(pretoken.decode("utf-8"), count) for pretoken, count in counts.counts[:DIFFERING_CANDIDATES]]
        compared = {
            "a": _measure_on_counts(info_a, counts),
            "b": _measure_on_counts(info_b, counts),
            "words": explorer().cached(("differing", info_a.ref, info_b.ref, counts.corpus_id), lambda: differing_words(tok_a, tok_b, candidates, special_tokens=False)),
        }
    files = [
        {"path": path, "a": _measure_file_cached(info_a.ref, tok_a, path), "b": _measure_file_cached(info_b.ref, tok_b, path)}
        for path in current_app.config["BPESTORE_CORPORA"]
    ]
    totals = None
    if len(files) > 1:
        totals = {"a": Measurement.combine([f["a"] for f in files]), "b": Measurement.combine([f["b"] for f in files])}
    overlap = svg.overlap_bar(len(result.only_a), result.shared_tokens, len(result.only_b), name_a=info_a.ref, name_b=info_b.ref)
    return render_template(
        "diff.html", infos=infos, result=result, info_a=info_a, info_b=info_b, text=text, corpus=corpus, compared=compared, files=files, totals=totals, overlap=overlap, show_token=show_token,
        shown=200,
    )
