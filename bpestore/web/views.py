"""The explorer's pages: tokenizers, one tokenizer (vocab, merges), versions of names, the
playground, the diff and the leaderboard of stored evaluations. Every page only reads the store; tokenizers are named by ``?ref=`` (names
may hold any character but ``@`` and spaces, ``/`` included).

A page is added to the navigation bar by adding its endpoint to :data:`NAVIGATION`."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, current_app, render_template, request, url_for
from werkzeug.exceptions import HTTPException

from ..encode.tokenizer import Tokenizer
from ..errors import BpestoreError, TokenizerNotFoundError
from ..metrics import Measurement, measure_counts, measure_file, measure_text
from ..pretokenize.inputs import short_corpus_path, stored_corpus_paths
from ..store.database import TokenizerInfo
from ..workflow import diff_tokenizers, recipe_from_dict
from . import svg
from .leaderboard import COLUMNS, leaderboard
from .data import CorpusCounts, Explorer
from .numbers import number
from .tokens import TokenSpans, token_html

pages = Blueprint("pages", __name__)

MAX_TEXT_CHARS = 200_000  # text pasted to measure on (diff, versions) beyond this is cut
# The playground tokenizes and shows at most this many bytes of text (UTF-8) per request, and says
# what it cut: every token is an element of the page, and a browser takes seconds to lay out a
# page of 100 KB of text (some 25,000 tokens per tokenizer). It also keeps a playground URL, with
# its text percent-encoded (at most 3 characters per byte), under the 64 KiB request line that
# the server reads (Werkzeug's, as Python's http.server: longer is refused, 414).
MAX_TEXT_BYTES = 20_000
MAX_SIDE_BY_SIDE = 4
MAX_VERSION_NAMES = len(svg.PALETTE)  # names in one versions chart (a colour each)
# The navigation bar: (endpoint, label). A page that needs arguments (versions) must answer
# without them too.
NAVIGATION = [
    ("pages.index", "Tokenizers"),
    ("pages.playground", "Playground"),
    ("pages.diff_page", "Diff"),
    ("pages.versions_page", "Versions"),
    ("pages.leaderboard_page", "Leaderboard"),
]
DIFFERING_CANDIDATES = 5000  # the most frequent words (pre-tokens) searched for different splits
PAGE_SIZE = 100
DEFAULT_TEXT = "Hello world! Tokenizers split text into pieces: naïve café, 中文, emoji 👍🏽 and <|endoftext|> too."
_WORD = re.compile(r"\s?\S+")  # a word with the space before it, as GPT-2's pre-tokens carry it


def explorer() -> Explorer:
    found: Explorer = current_app.extensions["bpestore_explorer"]  # (create_app put it there)
    return found


@pages.app_context_processor
def _navigation() -> dict[str, Any]:
    return {"navigation": NAVIGATION}


pages.add_app_template_global(token_html, "token_html")  # (a global: macros imported by pages see it)


@pages.app_template_filter("number")
def _number(value: float | None, digits: int | None = None) -> str:
    """Every number a page shows: ``{{ n|number }}``, ``{{ x|number(3) }}`` (see numbers.py)."""
    return number(value, digits)


def spans(ref: str, tokenizer: Tokenizer) -> TokenSpans:
    """The token spans of a stored tokenizer (made once while the server runs)."""
    return explorer().cached(("spans", ref), lambda: TokenSpans(tokenizer))


def _text_argument(limit: int | None = MAX_TEXT_CHARS) -> str:
    """The pasted text (its first ``limit`` characters). Browsers send a text area's line breaks
    as CRLF whatever the text held (its value, as the user sees it, has LF): undo that, so that
    the ids are those of the text shown."""
    return request.values.get("text", "").replace("\r\n", "\n")[:limit]


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


@pages.app_template_filter("short_source")
def _short_source(info: TokenizerInfo) -> str:
    """Where a tokenizer came from, for a table: an import's files by their names (``imported
    from gpt2 vocab.json merges.txt``), not their absolute paths (the cell's title has those)."""
    if info.source_format is None:
        return info.source
    return f"imported from {info.source_format} " + " ".join(Path(path).name for path in info.source_paths or [])


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


@pages.app_errorhandler(HTTPException)
def _http_error(error: HTTPException) -> tuple[str, int]:
    """An unknown address (404), a method a page does not take (405), ...: the explorer's own page
    with its navigation, not Werkzeug's plain one."""
    code = error.code or 500
    message = "There is no page at this address." if code == 404 else (error.description or "")
    return render_template("error.html", message=message, title=f"{code} {error.name}"), code


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
    histogram = svg.histogram(lengths, title="token lengths (special tokens left out)", x_label="token length (bytes)", y_label="tokens")
    versions = explorer().store.list(info.name)
    base = info.base_ref
    continues = None
    if base is not None:
        continues = (base, _is_stored(base))
    return render_template(
        "tokenizer.html", info=info, kinds=kinds, longest=longest, histogram=histogram,
        versions=versions, mean_length=_mean_length(lengths), continues=continues, recipe=_recipe_toml(info),
    )


def _recipe_toml(info: TokenizerInfo) -> str | None:
    """The TOML recipe that reproduces the tokenizer (``bpestore show REF --recipe``), or None."""
    data = (info.training_params or {}).get("recipe")
    if data is None:
        return None
    try:
        toml: str = recipe_from_dict(data, f"the recipe stored with {info.ref}").to_toml()
    except BpestoreError:
        return None  # (a damaged one is bpestore check's to report, not the page's to fail on)
    return toml


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
        "merges.html", info=info, rows=rows, total=total, page=page, page_size=PAGE_SIZE, q=text, rank=rank_text,
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
    """The versions of one or more names (``?name=a&name=b``; none: every name, up to
    :data:`MAX_VERSION_NAMES`), and how their compression grows with the vocab size: on a pasted
    text, else on the corpus of the latest version trained on one, of the first name that has
    one (from its stored pre-token counts), the same for every name."""
    all_names = sorted({info.name for info in explorer().list()})
    names = [name for name in dict.fromkeys(request.values.getlist("name")) if name]
    if not names:
        names = all_names[:MAX_VERSION_NAMES]
    names = names[:MAX_VERSION_NAMES]
    by_name = {name: explorer().store.list(name) for name in names}
    for name, found in by_name.items():
        if not found:
            raise BpestoreError(f"no tokenizer named {name!r}")
    infos = [info for found in by_name.values() for info in found]
    text = _text_argument()
    rows, corpus = [], None
    if text:
        for info in infos:
            # (type: ignore: mypy cannot infer a lambda with a default argument, info=info binding this loop's info)
            measured = explorer().cached(("text", info.ref, text), lambda info=info: measure_text(explorer().tokenizer(info.ref)[1], text))  # type: ignore[misc]
            rows.append((info, measured))
    else:
        found_corpus = None
        for name in names:
            if (found_corpus := _corpus_of(list(reversed(by_name[name])))) is not None:
                break
        if found_corpus is not None:
            owner, counts = found_corpus
            rows = [(info, _measure_on_counts(info, counts)) for info in infos]
            corpus = _corpus_note(owner, counts, infos)
    chart = svg.line_chart(
        [(name, [(info.vocab_size, m.bytes_per_token or 0) for info, m in rows if info.name == name]) for name in names],
        title="bytes per token against vocab size", x_label="vocab size (tokens, log scale)", y_label="bytes per token", log_x=True,
    )
    return render_template(
        "versions.html", names=names, all_names=all_names, infos=infos, rows=rows, chart=chart, text=text, corpus=corpus,
        max_names=MAX_VERSION_NAMES,
    )


# -- leaderboard ---------------------------------------------------------------------------------


def _float_argument(name: str) -> float | None:
    text = request.args.get(name, "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {text[:40]!r}") from None


@pages.route("/leaderboard")
def leaderboard_page() -> str:
    """Every stored evaluation (``bpestore eval``): a row per tokenizer and file, sorted by
    ``?sort=COLUMN&order=asc|desc`` (app.js sorts in the page too); each tokenizer's bytes per
    token averaged over its files, as bars; and each file's parity against ``?reference=LABEL``
    as a heat map. ``?alpha=`` picks the Rényi order when several are stored."""
    order = request.args.get("order", "asc")
    if order not in ("asc", "desc"):
        raise ValueError(f"order must be asc or desc, got {order[:40]!r}")
    board = leaderboard(
        explorer().store.evaluations(), alpha=_float_argument("alpha"), reference=request.args.get("reference") or None,
        sort=request.args.get("sort") or "tokenizer", descending=order == "desc",
    )
    bars = svg.horizontal_bars(
        [(ref, mean) for ref, mean, _ in board.mean_bytes_per_token],
        title="bytes per token, mean over the files each tokenizer was evaluated on", x_label="bytes per token (higher: shorter sequences)",
    )
    heat_map = svg.heat_map(
        board.tokenizers, board.files, board.parity, title=f"parity: tokens over {board.reference}'s, same tokenizer",
        legend_label="parity (blue: fewer tokens, red: more)",
    )
    return render_template("leaderboard.html", board=board, columns=COLUMNS, bars=bars, heat_map=heat_map)


# -- playground --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cut:
    """What the playground's size guard left out of a text."""

    kept_bytes: int
    kept_chars: int
    total_bytes: int
    total_chars: int
    limit: int


def cut_text(text: str, limit: int) -> tuple[str, Cut | None]:
    """``text`` cut to at most ``limit`` bytes of UTF-8, at a character boundary, and what was
    cut (None: nothing)."""
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= limit:
        return text, None
    kept = data[:limit].decode("utf-8", errors="ignore")  # (ignore: the character cut in two)
    return kept, Cut(len(kept.encode("utf-8", errors="surrogatepass")), len(kept), len(data), len(text), limit)


def _playground_state() -> dict[str, Any]:
    """What the playground shows for the request's text (``text``; the default text without
    one), tokenizers (``t``, up to :data:`MAX_SIDE_BY_SIDE`) and whitespace toggle (``ws``)."""
    infos = explorer().list()
    refs = [ref for ref in request.values.getlist("t") if ref][:MAX_SIDE_BY_SIDE]
    if not refs and infos:
        refs = [infos[-1].ref]
    full = _text_argument(limit=None) if "text" in request.values else DEFAULT_TEXT
    text, cut = cut_text(full, MAX_TEXT_BYTES)
    show_whitespace = request.values.get("ws", "") not in ("", "0")
    columns, shown = [], []
    for ref in refs:
        info, tokenizer = explorer().tokenizer(ref)
        ids = tokenizer.encode(text)
        measured = measure_text(tokenizer, text)
        columns.append({"info": info, "ids": ids, "tokens": spans(info.ref, tokenizer).html(ids), "measured": measured})
        shown.append(info.ref)
    arguments: dict[str, Any] = {"text": text, "t": shown}
    if show_whitespace:
        arguments["ws"] = "1"
    url = url_for("pages.playground", **arguments)
    # The dropdowns select the refs as resolved ("gpt2" is its latest version, "gpt2@1"): the
    # form, which app.js posts as you type, then asks for what the URL asked for.
    return {
        "infos": infos, "refs": shown, "text": text, "cut": cut, "columns": columns,
        "show_whitespace": show_whitespace, "url": url, "max_side_by_side": MAX_SIDE_BY_SIDE, "max_text_bytes": MAX_TEXT_BYTES,
    }


@pages.route("/playground", methods=["GET", "POST"])
def playground() -> str:
    """The playground: a GET form (its URL reproduces the view); app.js tokenizes as you type
    through :func:`playground_tokens`."""
    return render_template("playground.html", **_playground_state())


@pages.route("/playground/tokens", methods=["GET", "POST"])
def playground_tokens() -> Response:
    """The playground's results alone (an HTML fragment), for app.js to put in the page; the
    ``X-Playground-Url`` header is the URL of the whole page for the same text and tokenizers
    (the text cut as shown), which the script puts in the address bar."""
    state = _playground_state()
    response = Response(render_template("playground_results.html", **state), mimetype="text/html")
    response.headers["X-Playground-Url"] = state["url"]
    response.headers["Cache-Control"] = "no-store"
    return response


# -- diff --------------------------------------------------------------------------------------------


def differing_words(
    a: Tokenizer, b: Tokenizer, counted: list[tuple[str, int]], limit: int = 40, *, special_tokens: bool = True
) -> list[dict[str, Any]]:
    """The first of ``counted`` (words or pre-tokens with their counts, most frequent first) that
    ``a`` and ``b`` split differently, with both splits (ids); at most ``limit``. ``special_tokens``:
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
            found.append({"word": word, "count": count, "a": one, "b": other})
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
    first_merges: dict[str, tuple[bytes, bytes] | None] = {"a": None, "b": None}
    if result.first_different_merge is not None:  # (its bytes, for the one token rendering)
        rank = result.first_different_merge["rank"]
        first_merges = {side: tok.merges[rank] if rank < len(tok.merges) else None for side, tok in (("a", tok_a), ("b", tok_b))}
    return render_template(
        "diff.html", infos=infos, result=result, info_a=info_a, info_b=info_b, text=text, corpus=corpus, compared=compared, files=files, totals=totals, overlap=overlap, first_merges=first_merges,
        spans_a=spans(info_a.ref, tok_a), spans_b=spans(info_b.ref, tok_b), shown=200,
    )
