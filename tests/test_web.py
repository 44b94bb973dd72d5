"""Tests of the web explorer (``bpestore serve``, bpestore/web/).

Two kinds: Flask's test client for what needs no browser (every page answers, the store's bytes
are unchanged, escaping, the host checks), and a real headless Chromium driven by Selenium for what
a person sees: no console errors on any page, the playground's ids equal ``Tokenizer.encode``'s,
the diff page agrees with ``Store.diff``, a token holding ``<script>`` is shown and not run. The
browser tests skip, saying why, where Chromium or chromedriver is not installed (Debian:
``apt-get install chromium chromium-driver``).

Screenshots of the playground and the diff page go to ``$BPESTORE_SCREENSHOTS`` when it is set
(those of docs/howto/compare-evaluate.md are made so: ``BPESTORE_SCREENSHOTS=docs python3 -m pytest tests/test_web.py``).
"""

from __future__ import annotations

import gzip
import hashlib
import html
import os
import re
import time
import tomllib
import shutil
import threading
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings

pytest.importorskip("flask", reason="the web extra is not installed (pip install -e '.[web]')")

from bpestore import BPEModel, Store  # noqa: E402
from bpestore.metrics import renyi_efficiency  # noqa: E402
from bpestore.web import check_host, close_app, create_app, make_server  # noqa: E402
from conftest import shared_dir  # noqa: E402
from reference import reference_pretoken_counts  # noqa: E402
from strategies import texts  # noqa: E402
from test_web_render import undo_token_html  # noqa: E402
from tiers import examples

# The slow tier (python3 -m pytest -m 'not slow' leaves it out): a browser and a server.
pytestmark = pytest.mark.slow

ENDOFTEXT = "<|endoftext|>"
OTHER_PATTERN = r"\S+|\s+"  # not GPT-2's: measures on a GPT-2-counted corpus are estimates for it
SCRIPT_TOKEN = b"<script>document.title='pwned'</script>"
SCRIPT_SPECIAL = "<img src=x onerror=\"document.title='pwned'\">"
# Special tokens, multi-byte characters (2, 3 and 4 bytes, emoji sequences), odd whitespace.
NASTY_TEXT = (
    f"Hello world!{ENDOFTEXT}naïve café 中文字 😀👍🏽 👨‍👩‍👧\n\n  tabs\tand  spaces {ENDOFTEXT}{ENDOFTEXT}"
    "Grüße aus München, Привет мир, مرحبا\r\nend"
)


def shared_text(name: str) -> str:
    """A shared fixture's text, when it is there: more natural text makes the screenshots more
    telling; the tests hold either way."""
    path = shared_dir() / "fixtures" / name
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def is_utf8(token: bytes) -> bool:
    try:
        token.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    """A store with en@1, en@2 (one corpus), de@1 (another), evil@1, whose vocab holds a
    token that is a script element and a special token that is an HTML tag (and which
    pre-tokenizes with another pattern), two continued trainings (en-more@1 continues en@1,
    orphan@1 continues gone@1, since deleted), and mix@1, trained on two files, one gzipped."""
    folder = tmp_path_factory.mktemp("web")
    english = folder / "en.txt"
    english.write_text(("the cat sat on the mat. hello world, tokens are fun! " * 120 + ENDOFTEXT) * 3 + shared_text("tinystories_sample.txt"), encoding="utf-8")
    german = folder / "de.txt"
    german.write_text("Die Katze saß auf der Matte. Grüße aus München! 中文 " * 150 + shared_text("german.txt"), encoding="utf-8")
    db = folder / "store.db"
    with Store(db) as store:
        store.train(english, "en", [300, 600], [ENDOFTEXT], workers=1)
        store.train(german, "de", [500], [ENDOFTEXT], workers=1)
        vocab = {i: bytes([i]) for i in range(256)} | {256: b"sc", 257: SCRIPT_TOKEN}
        store.save("evil", BPEModel(vocab, [(b"s", b"c")], [SCRIPT_SPECIAL], pattern=OTHER_PATTERN))
        store.train(english, "en-more", [400], [ENDOFTEXT], base="en@1")
        store.train(german, "gone", [300], [ENDOFTEXT])
        store.train(german, "orphan", [320], [ENDOFTEXT], base="gone@1")
        store.delete("gone@1")
        gzipped = folder / "de.txt.gz"
        gzipped.write_bytes(gzip.compress(german.read_bytes()))
        store.train([english, gzipped], "mix", [280], [ENDOFTEXT], workers=1)
    return db


@pytest.fixture(scope="module")
def client(store_path):
    app = create_app(store_path, corpora=[store_path.parent / "en.txt", store_path.parent / "de.txt"], allowed_hosts=["localhost"])
    return app.test_client()


def page_urls() -> list[str]:
    """One URL of every kind of page, with searches."""
    return [
        "/", "/?q=en",
        "/tokenizer?ref=en@2", "/tokenizer?ref=evil", "/tokenizer?ref=en-more", "/tokenizer?ref=orphan",
        "/vocab?ref=en@2", "/vocab?ref=en@2&q=th", "/vocab?ref=en@1&id=257", "/vocab?ref=de@1&hex=c3", "/vocab?ref=en@2&page=1",
        "/vocab?ref=evil&q=script",
        "/merges?ref=en@2", "/merges?ref=en@2&q=at", "/merges?ref=en@2&rank=5",
        "/versions?name=en", "/versions?name=mix", "/versions?name=evil", "/versions", "/versions?name=en&name=de&name=en-more",
        f"/playground?t=en@2&t=de@1&t=evil&text={quote(NASTY_TEXT)}",
        "/diff?a=en@1&b=en@2", "/diff?a=en@2&b=de@1", "/diff?a=en@2&b=evil", "/diff?a=evil&b=mix",
        "/leaderboard",
    ]


# -- without a browser ---------------------------------------------------------------------------


def test_every_page_answers_and_the_store_is_unchanged(store_path, client):
    before = sha256(store_path)
    for url in page_urls():
        response = client.get(url, headers={"Host": "localhost"})
        assert response.status_code == 200, (url, response.data[:500])
        assert response.headers["Content-Security-Policy"].startswith("default-src 'none'")
    # a POST (the forms' method) reads too
    response = client.post("/playground", data={"t": "en@2", "text": "hello"}, headers={"Host": "localhost"})
    assert response.status_code == 200
    assert client.get("/tokenizer?ref=nope", headers={"Host": "localhost"}).status_code == 404
    assert client.get("/vocab?ref=en@1&hex=zz", headers={"Host": "localhost"}).status_code == 400
    assert sha256(store_path) == before


def test_the_tokenizer_page_shows_its_recipe(client):
    """A trained tokenizer's page shows the TOML recipe that reproduces it (its inputs, pattern,
    vocab size, base), escaped; a tokenizer saved without one has no recipe row."""

    def get(url: str) -> str:
        response = client.get(url, headers={"Host": "localhost"})
        assert response.status_code == 200, url
        return response.data.decode()

    recipe = html.unescape(re.search(r'<pre class="recipe">(.*?)</pre>', get("/tokenizer?ref=en-more@1"), re.S).group(1))
    data = tomllib.loads(recipe)
    assert data["base"] == "en@1" and data["stages"] == [{"pattern": "gpt2", "vocab_size": 400}]
    assert data["special_tokens"] == [ENDOFTEXT] and data["inputs"][0]["path"].endswith("en.txt")
    mixed = tomllib.loads(html.unescape(re.search(r'<pre class="recipe">(.*?)</pre>', get("/tokenizer?ref=mix"), re.S).group(1)))
    assert [Path(item["path"]).name for item in mixed["inputs"]] == ["en.txt", "de.txt.gz"]
    assert 'id="recipe"' not in get("/tokenizer?ref=evil")


def test_continued_training_links_to_its_base(client):
    """The lineage of `train --from`: the index and the tokenizer page say which tokenizer a
    training continued, linking to the base's page while it is stored."""

    def get(url: str) -> str:
        response = client.get(url, headers={"Host": "localhost"})
        assert response.status_code == 200, url
        return response.data.decode()

    index = get("/")
    rows = dict(re.findall(r'<tr data-name="([^"]*)">(.*?)</tr>', index, re.S))
    assert set(rows) == {"de", "en", "en-more", "evil", "mix", "orphan"}
    links = {name: re.findall(r'<span class="continues">continues (.*?)</span>(?=;|</td>)', row, re.S) for name, row in rows.items()}
    assert {name: found for name, found in links.items() if found} == {
        "en-more": ['<a href="/tokenizer?ref=en@1">en@1</a>'],
        "orphan": ['gone@1 <span class="muted">(deleted)</span>'],
    }
    for url in ("/tokenizer?ref=en-more@1", "/tokenizer?ref=orphan"):
        assert re.search(r'<tr id="continues"><th>lineage</th><td>continues ', get(url))
    page = get("/tokenizer?ref=en-more@1")
    target = re.search(r'<tr id="continues"><th>lineage</th><td>continues <a href="([^"]+)">en@1</a>', page).group(1)
    assert re.search(r"<h1>en@1</h1>", get(target))  # the link leads to the base's page
    assert "(deleted from the store)" in get("/tokenizer?ref=orphan")
    assert "<a" not in re.search(r'<tr id="continues">(.*?)</tr>', get("/tokenizer?ref=orphan"), re.S).group(1)
    for url in ("/tokenizer?ref=en@1", "/tokenizer?ref=evil"):  # not continued: no lineage row
        assert 'id="continues"' not in get(url)


def corpus_text(store_path: Path, *names: str) -> list[str]:
    folder = store_path.parent
    return [(folder / name).read_text(encoding="utf-8") for name in names]


def expected_on_counts(tokenizer, counts: dict[bytes, int]) -> tuple[int, int, str, str]:
    """Bytes, tokens, bytes per token and Rényi efficiency (as the pages print them) of a corpus
    given by its pre-token counts: each pre-token encoded by Tokenizer.encode, times its count."""
    ids_of = {pretoken: tokenizer.encode(pretoken.decode("utf-8")) for pretoken in counts}
    num_bytes = sum(len(pretoken) * count for pretoken, count in counts.items())
    tokens = sum(len(ids_of[pretoken]) * count for pretoken, count in counts.items())
    per_id: dict[int, int] = {}
    for pretoken, count in counts.items():
        for i in ids_of[pretoken]:
            per_id[i] = per_id.get(i, 0) + count
    return num_bytes, tokens, f"{num_bytes / tokens:.3f}", f"{renyi_efficiency(list(per_id.values()), tokenizer.vocab_size):.3f}"


def table_rows(html: str, table_id: str) -> list[list[str]]:
    body = re.search(rf'<table id="{table_id}">.*?<tbody>(.*?)</tbody>', html, re.S).group(1)
    return [[re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)] for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


def as_int(text: str) -> int:
    """A number as the pages write it (12,345)."""
    return int(text.replace(",", ""))


def differing_words_shown(html: str) -> list[tuple[str, int]]:
    """The diff page's words split differently, with their counts, as text (their rendering undone)."""
    body = re.search(r'<table id="differing-words">.*?<tbody>(.*?)</tbody>', html, re.S).group(1)
    return [
        (undo_token_html(word).decode("utf-8"), as_int(count))
        for word, count in re.findall(r'<tr><td><code class="token">(.*?)</code></td><td class="num">([\d,]+)</td>', body, re.S)
    ]



def test_versions_are_measured_on_the_stored_pre_token_counts(store_path, client):
    """No corpus file is read: the numbers are those of the corpus's pre-token counts (the
    reference's), for a single file and for a corpus of two files, one of them gzipped."""
    english, german = corpus_text(store_path, "en.txt", "de.txt")
    with Store(store_path) as store:
        for name, counts in (
            ("en", reference_pretoken_counts(english, [ENDOFTEXT])),
            ("mix", reference_pretoken_counts(english, [ENDOFTEXT]) + reference_pretoken_counts(german, [ENDOFTEXT])),
        ):
            html = client.get(f"/versions?name={name}", headers={"Host": "localhost"}).data.decode()
            refs = [info.ref for info in store.list(name)]
            rows = table_rows(html, "versions")
            assert [row[0] for row in rows] == refs
            points = []
            for ref, row in zip(refs, rows):
                tokenizer = store.load(ref)
                num_bytes, tokens, per_token, renyi = expected_on_counts(tokenizer, counts)
                assert (int(row[2].replace(",", "")), row[3], row[4], row[5]) == (tokens, per_token, "–", renyi), ref
                points.append(f"{name}: {tokenizer.vocab_size:,}, {num_bytes / tokens:,.3f}")
            note = re.search(r'<p class="muted" id="corpus-note">(.*?)</p>', html, re.S).group(1)
            assert re.search(rf'all <span class="used">{len(counts):,}</span> distinct pre-tokens', note)
            # the chart of bytes per token against vocab size: a point per version, at its values
            assert re.findall(r"<circle [^>]*><title>([^<]*)</title></circle>", html) == points
    assert "en.txt +1 file" in client.get("/versions?name=mix", headers={"Host": "localhost"}).data.decode()
    index = client.get("/", headers={"Host": "localhost"}).data.decode()
    assert re.search(r'<tr data-name="mix">.*?<span class="corpus" title="\[[^"]*">en.txt \+1 file</span>', index, re.S)
    # a pasted text instead (the form posts)
    response = client.post("/versions?name=en", data={"text": "the cat sat on the mat"}, headers={"Host": "localhost"})
    assert response.status_code == 200
    html = response.data.decode()
    assert "Measured on the pasted text" in html and 'id="corpus-note"' not in html
    with Store(store_path) as store:
        assert [int(row[2]) for row in table_rows(html, "versions")] == [len(store.load(ref).encode("the cat sat on the mat")) for ref in ("en@1", "en@2")]
    # a tokenizer with no stored corpus, alone under its name: nothing to measure on
    assert "paste a text to measure them on" in client.get("/versions?name=evil", headers={"Host": "localhost"}).data.decode()


def test_versions_of_several_names_share_one_chart(store_path, client):
    """A line per name (a name with one version: a point), a legend entry each, every version
    measured on one corpus (the first name's latest), on a log vocab-size axis from round ticks."""
    html = client.get("/versions?name=en&name=de&name=en-more", headers={"Host": "localhost"}).data.decode()
    with Store(store_path) as store:
        refs = [info.ref for name in ("en", "de", "en-more") for info in store.list(name)]
    assert [row[0] for row in table_rows(html, "versions")] == refs
    assert re.findall(r'<text class="legend"[^>]*>([^<]*)</text>', html) == ["en", "de", "en-more"]
    assert html.count("<polyline") == 1 and len(re.findall(r"<circle ", html)) == len(refs)
    assert re.findall(r'<text class="tick x-tick"[^>]*>([^<]*)</text>', html) == ["200", "500", "1,000"]
    assert re.findall(r'<text class="tick y-tick"[^>]*>([^<]*)</text>', html)[0] == "0"
    assert "Measured on the corpus of en@2" in html
    # without a name: every name
    html = client.get("/versions", headers={"Host": "localhost"}).data.decode()
    assert re.findall(r'<text class="legend"[^>]*>([^<]*)</text>', html) == ["de", "en", "en-more", "evil", "mix", "orphan"]


def test_diff_measures_and_differing_pre_tokens_come_from_the_stored_counts(store_path, client):
    english, german = corpus_text(store_path, "en.txt", "de.txt")
    counts = reference_pretoken_counts(english, [ENDOFTEXT])
    html = client.get("/diff?a=en@2&b=de@1", headers={"Host": "localhost"}).data.decode()
    with Store(store_path) as store:
        tok_a, tok_b = store.load("en@2"), store.load("de@1")
    rows = table_rows(html, "compression")
    for row, tokenizer in zip(rows, (tok_a, tok_b), strict=True):
        num_bytes, tokens, per_token, renyi = expected_on_counts(tokenizer, counts)
        assert (as_int(row[1]), row[2], as_int(row[3]), row[4], row[5], row[6]) == (num_bytes, "–", tokens, per_token, "–", renyi)
    # the most frequent pre-tokens the two split differently, most frequent first
    by_count = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    differing = [
        (pretoken.decode(), count) for pretoken, count in by_count
        if [tok_a.vocab[i] for i in tok_a.encode(pretoken.decode())] != [tok_b.vocab[i] for i in tok_b.encode(pretoken.decode())]
    ][:40]
    assert differing and differing_words_shown(html) == differing
    # evil pre-tokenizes otherwise: its numbers on en@2's corpus are called estimates
    html = client.get("/diff?a=en@2&b=evil", headers={"Host": "localhost"}).data.decode()
    assert re.search(r'<span class="other-pattern">evil@1 pre-tokenizes with another pattern', html)
    assert 'class="other-pattern"' not in client.get("/diff?a=en@1&b=en@2", headers={"Host": "localhost"}).data.decode()


def test_a_big_corpus_is_measured_on_its_most_frequent_pre_tokens(store_path, monkeypatch):
    """Past MAX_PRETOKENS distinct pre-tokens, the most frequent ones, and the page says how
    much of the corpus they hold."""
    from bpestore.web import data

    monkeypatch.setattr(data, "MAX_PRETOKENS", 50)
    (english,) = corpus_text(store_path, "en.txt")
    counts = reference_pretoken_counts(english, [ENDOFTEXT])
    top = dict(sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:50])
    app = create_app(store_path, allowed_hosts=["localhost"])
    try:
        html = app.test_client().get("/versions?name=en", headers={"Host": "localhost"}).data.decode()
    finally:
        close_app(app)
    note = re.search(r'<p class="muted" id="corpus-note">(.*?)</p>', html, re.S).group(1)
    covered = sum(len(pretoken) * count for pretoken, count in top.items()) / len(english.encode())
    assert re.search(rf'the\s+<span class="used">50</span> most frequent of {len(counts):,} distinct pre-tokens, covering\s+<span class="covered">{covered * 100:.1f}</span>% of its bytes', note), note
    with Store(store_path) as store:
        for row in table_rows(html, "versions"):
            assert int(row[2].replace(",", "")) == expected_on_counts(store.load(row[0]), top)[1]


def test_the_token_length_chart_counts_the_vocab(store_path, client):
    """/tokenizer's bar chart: a bar per length in bytes, from 1 to the longest (none left out),
    its height the number of non-special tokens of that length."""
    html = client.get("/tokenizer?ref=de@1", headers={"Host": "localhost"}).data.decode()
    with Store(store_path) as store:
        tokenizer = store.load("de@1")
    specials = set(tokenizer.special_ids.values())
    lengths = Counter(len(token) for i, token in tokenizer.vocab.items() if i not in specials)
    bars = re.findall(r"<rect [^>]*><title>(\d+): ([\d,]+)</title></rect>", html)
    assert [(int(length), as_int(count)) for length, count in bars] == [(n, lengths.get(n, 0)) for n in range(1, max(lengths) + 1)]
    assert any(lengths.get(n, 0) == 0 for n in range(1, max(lengths) + 1)), "a length with no token is shown too"
    assert "token length (bytes)" in html


def test_playground_and_diff_numbers_on_a_pasted_text(store_path, client):
    """On a pasted text: the playground's bytes per token and tokens per word, the diff page's
    compression table, its overlap chart and the words split differently, from Tokenizer.encode
    and the text itself (UTF-8 bytes, str.split() words)."""
    # (a text area sends line breaks as CRLF and the pages take them back to LF: see above)
    text = NASTY_TEXT.replace("\r\n", "\n") + " the cat sat on the mat, Katze und Matte! " * 3
    with Store(store_path) as store:
        tok_a, tok_b = store.load("en@2"), store.load("de@1")
        diffed = store.diff("en@2", "de@1")
    num_bytes, words = len(text.encode()), len(text.split())
    html = client.post("/playground", data={"t": ["en@2", "de@1"], "text": text}, headers={"Host": "localhost"}).data.decode()
    stats = re.findall(r'<p class="stats"><span class="count">([\d,]+)</span> tokens · ([\d,]+) bytes · ([\d.]+) bytes/token · ([\d.]+) tokens/word</p>', html)
    want = [(len(ids), num_bytes, f"{num_bytes / len(ids):.3f}", f"{len(ids) / words:.3f}") for ids in (tok_a.encode(text), tok_b.encode(text))]
    assert [(as_int(n), as_int(b), per_token, per_word) for n, b, per_token, per_word in stats] == want

    html = client.post("/diff", data={"a": "en@2", "b": "de@1", "text": text}, headers={"Host": "localhost"}).data.decode()
    assert "<h2>On the pasted text</h2>" in html and 'id="corpus-note"' not in html
    for row, tokenizer in zip(table_rows(html, "compression"), (tok_a, tok_b), strict=True):
        ids = tokenizer.encode(text)
        per_id = Counter(ids)
        renyi = renyi_efficiency(list(per_id.values()), tokenizer.vocab_size)
        share = len(per_id) / tokenizer.vocab_size * 100
        assert row[1:] == [f"{num_bytes:,}", f"{words:,}", f"{len(ids):,}", f"{num_bytes / len(ids):.3f}", f"{len(ids) / words:.3f}", f"{renyi:.3f}", f"{share:.1f}%"]
    # the words (with the space before them) split differently, most frequent first, ties in order of appearance
    counted = Counter(re.findall(r"\s?\S+", text))
    differing = [
        (word, count) for word, count in counted.most_common()
        if [tok_a.vocab[i] for i in tok_a.encode(word)] != [tok_b.vocab[i] for i in tok_b.encode(word)]
    ][:40]
    assert differing and differing_words_shown(html) == differing
    # the vocabulary overlap chart
    assert re.findall(r"<rect [^>]*><title>([^<]*)</title></rect>", html) == [
        f"only in en@2: {len(diffed.only_a):,}", f"shared: {diffed.shared_tokens:,}", f"only in de@1: {len(diffed.only_b):,}",
    ]


def test_short_corpus_paths(store_path, client):
    from bpestore.pretokenize.inputs import short_corpus_path
    from test_cli import invoke

    listed = invoke("list", "--db", store_path)
    assert listed.exit_code == 0 and re.search(r"^mix +1 +280 +<\|endoftext\|> +en\.txt \+1 file ", listed.output, re.M), listed.output

    assert short_corpus_path("/data/a.txt") == "a.txt"
    assert short_corpus_path('["/data/a.txt", "/data/b.txt.gz", "/x/c.zst"]') == "a.txt +2 files"
    assert short_corpus_path('["/data/a.txt", "/data/b.txt.gz"]') == "a.txt +1 file"
    assert short_corpus_path("/data/c.parquet", "counts") == "counts: c.parquet"
    assert short_corpus_path("/data/a b.txt s3://bucket/x.txt /data/c.txt", "dask") == "counts: dask: a b.txt +2 files"
    assert short_corpus_path("/data/a b.txt", "files") == "a b.txt"  # the origin, not the text, says it is several
    assert short_corpus_path("[not json") == "[not json"
    # the tokenizer page lists a corpus's files
    html = client.get("/tokenizer?ref=mix", headers={"Host": "localhost"}).data.decode()
    files = re.search(r'<tr id="corpus"><th>corpus</th><td>2 files:<ul class="files">(.*?)</ul>', html, re.S).group(1)
    assert re.findall(r"<li>([^<]*)</li>", files) == [str(store_path.parent / "en.txt"), str(store_path.parent / "de.txt.gz")]  # in the order given


def test_the_list_shortens_import_paths_and_keeps_dates_on_one_line(tmp_path):
    """An import's absolute paths pushed the date column to three lines: the list shows the
    files' names (the full paths in the cell's title), and dates do not wrap."""
    import bpestore.web
    from bpestore.workflow import import_into_store

    deep = tmp_path / ("a-folder-with-a-rather-long-name-" * 3)
    deep.mkdir()
    vocab, merges = (shutil.copy(shared_dir() / "fixtures" / name, deep / name) for name in ("gpt2_vocab.json", "gpt2_merges.txt"))
    import_into_store(tmp_path / "s.db", "gpt2", "gpt2", vocab, merges, special_tokens=[ENDOFTEXT], warm_entries=0)
    app = create_app(tmp_path / "s.db")
    try:
        html = app.test_client().get("/", headers={"Host": "localhost"}).data.decode()
    finally:
        close_app(app)
    row = re.search(r'<tr data-name="gpt2">(.*?)</tr>', html, re.S).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    source = next(cell for cell in cells if "gpt2_vocab.json" in cell)
    assert re.sub(r"<[^>]+>", "", source) == "imported from gpt2 gpt2_vocab.json gpt2_merges.txt"
    assert f'title="imported from gpt2 {vocab} {merges}"' in source  # the whole paths, on hover
    assert re.search(r'<td class="date">\d{4}-\d\d-\d\d \d\d:\d\d</td>', row)
    css = (Path(bpestore.web.__file__).parent / "static" / "style.css").read_text(encoding="utf-8")
    assert re.search(r"td\.date\s*\{[^}]*white-space:\s*nowrap", css)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts())
def test_playground_ids_equal_encode_for_nasty_text(store_path, client, text):
    """Without a browser: the ids the playground shows for awkward texts (special tokens at every
    edge, every kind of whitespace, any script) are Tokenizer.encode's. A text area sends line
    breaks as CRLF, which the page takes back to LF (the text area's value)."""
    response = client.post("/playground", data={"t": ["en@2", "de@1"], "text": text}, headers={"Host": "localhost"})
    assert response.status_code == 200
    shown = re.findall(r'<pre class="ids">([^<]*)</pre>', response.data.decode())
    with Store(store_path) as store:
        want = [store.load(ref).encode(text.replace("\r\n", "\n")) for ref in ("en@2", "de@1")]
    assert [[int(i) for i in ids.split()] for ids in shown] == want


def test_a_sqlite_url_is_opened_read_only_too(store_path):
    before = sha256(store_path)
    app = create_app(f"sqlite:///{store_path}", allowed_hosts=["localhost"])
    assert app.test_client().get("/tokenizer?ref=en@1", headers={"Host": "localhost"}).status_code == 200
    assert sha256(store_path) == before


def test_browsing_leaves_the_store_as_it_was(store_path, tmp_path):
    """Bytes unchanged, and no -wal/-shm files left behind once the explorer is closed."""
    copy = tmp_path / "copy.db"
    copy.write_bytes(store_path.read_bytes())
    before = sha256(copy)
    app = create_app(copy, allowed_hosts=["localhost"])
    for url in page_urls():
        assert app.test_client().get(url, headers={"Host": "localhost"}).status_code == 200
    close_app(app)
    assert sha256(copy) == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["copy.db"]


def test_vocab_and_merges_searches_find_what_the_model_holds(store_path, client):
    """The counts the pages report for each search, against the tokenizer's own vocab and merges."""
    with Store(store_path) as store:
        tokenizer = store.load("en@2")

    def found(url: str) -> int:
        html = client.get(url, headers={"Host": "localhost"}).data.decode()
        return int(re.search(r'class="pager">([\d,]+) found', html).group(1).replace(",", ""))

    vocab, merges = tokenizer.vocab, tokenizer.merges
    assert found("/vocab?ref=en@2") == len(vocab)
    assert found("/vocab?ref=en@2&q=th") == sum("th" in t.decode("utf-8", errors="replace") for t in vocab.values())
    assert found("/vocab?ref=en@2&hex=c3") == sum(b"\xc3" in t for t in vocab.values())
    assert found("/vocab?ref=en@2&id=260") == 1
    assert found("/merges?ref=en@2") == len(merges)
    assert found("/merges?ref=en@2&q=at") == sum("at" in (a + b).decode("utf-8", errors="replace") for a, b in merges)
    html = client.get("/merges?ref=en@2&rank=5", headers={"Host": "localhost"}).data.decode()
    assert found("/merges?ref=en@2&rank=5") == 1 and '<td class="num">5</td>' in html

    # what a page holds: the second page of the vocab is ids 100-199 with their bytes (hex), and
    # of the merges, ranks 100-199 with the id each makes
    html = client.get("/vocab?ref=en@2&page=1", headers={"Host": "localhost"}).data.decode()
    rows = re.findall(r'<tr><td class="num">(\d+)</td>.*?<code class="hex">([0-9a-f ]*)</code>', html)
    assert [(int(i), bytes.fromhex(h)) for i, h in rows] == [(i, vocab[i]) for i in sorted(vocab)[100:200]]
    html = client.get("/merges?ref=en@2&page=1", headers={"Host": "localhost"}).data.decode()
    rows = re.findall(r'<tr><td class="num">(\d+)</td>.*?<td class="num">(\d+)</td></tr>', html)
    id_of = {token: i for i, token in vocab.items()}
    assert [(int(rank), int(made)) for rank, made in rows] == [(rank, id_of[a + b]) for rank, (a, b) in enumerate(merges)][100:200]


def test_untrusted_text_is_escaped(client):
    for url in ("/vocab?ref=evil&q=script", "/tokenizer?ref=evil", "/diff?a=en@2&b=evil", f"/playground?t=evil&text={quote(SCRIPT_SPECIAL)}"):
        html = client.get(url, headers={"Host": "localhost"}).data.decode()
        assert "<script>document" not in html and "<img src=x" not in html, url
        assert "&lt;script&gt;document.title=" in html or "&lt;img src=x" in html, url


def test_requests_for_other_hosts_are_refused(client):
    # DNS rebinding: a page of another site whose name now resolves to 127.0.0.1
    assert client.get("/", headers={"Host": "evil.example:8000"}).status_code == 421
    assert client.get("/", headers={"Host": "localhost:8000"}).status_code == 200


def test_only_loopback_unless_allowed():
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        check_host(host, allow_remote=False)
    for host in ("0.0.0.0", "::", "8.8.8.8", "192.168.1.10"):
        with pytest.raises(ValueError, match="--allow-remote"):
            check_host(host, allow_remote=False)
        check_host(host, allow_remote=True)


def test_cli_serve_refuses_a_remote_host_and_a_missing_store(store_path, tmp_path):
    from test_cli import assert_user_error, invoke

    assert_user_error(invoke("serve", "--host", "0.0.0.0", "--db", store_path), "--allow-remote")
    missing = tmp_path / "missing.db"
    assert_user_error(invoke("serve", "--db", missing, "--port", "0"), "missing.db")
    assert not missing.exists()  # never created


def test_cli_serve_serves_until_interrupted(store_path):
    """`bpestore serve --port 0` in a process: it says where it listens, answers, stops on SIGINT."""
    import signal
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    # (without colorama, as where it is not installed: colorama strips the codes for a non-terminal itself)
    no_colorama = "import runpy, sys; sys.modules['colorama'] = None; runpy.run_module('bpestore.cli', run_name='__main__')"
    process = subprocess.Popen(
        [sys.executable, "-c", no_colorama, "serve", "--port", "0", "--db", str(store_path)],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )
    try:
        line = process.stderr.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, line
        with urllib.request.urlopen(f"http://127.0.0.1:{match.group(1)}/?q=en", timeout=30) as response:
            html = response.read().decode()
        assert "en@1" in html and "de@1" not in html
        with pytest.raises(urllib.error.HTTPError) as missing:  # a 404, which Werkzeug logs in yellow on a terminal
            urllib.request.urlopen(f"http://127.0.0.1:{match.group(1)}/no-such-page", timeout=30)
        assert missing.value.code == 404
        missing.value.close()  # (its connection)
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        log = process.stderr.read()
        process.stderr.close()
    # stderr is a pipe here, not a terminal: the request log is plain text
    assert '"GET /no-such-page HTTP/1.1" 404' in log and "\x1b[" not in log, log
    assert log.endswith("\nstopped\n"), log  # as Ctrl-C said it would be (Werkzeug's loop swallows the KeyboardInterrupt)


def test_cli_serve_on_a_busy_port_says_so_in_one_line(store_path):
    import socket

    from test_cli import assert_user_error, invoke

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = invoke("serve", "--port", port, "--db", store_path)
    message = assert_user_error(result, "Error: ", f"port {port}", "in use")
    assert result.exit_code == 1, message


def test_an_unknown_address_gets_the_explorers_404_page(client):
    response = client.get("/no-such-page", headers={"Host": "localhost"})
    assert response.status_code == 404
    html = response.data.decode()
    assert 'href="/static/style.css"' in html and "<nav>" in html  # the explorer's look and navigation
    assert "There is no page at this address." in html and "404 Not Found" in html
    assert client.post("/vocab", headers={"Host": "localhost"}).status_code == 405


@pytest.mark.parametrize("held", ["half a request", "an idle keep-alive connection"])
def test_cli_serve_stops_on_sigint_with_a_connection_held_open(store_path, held):
    """A client that holds its connection open (half a request; a keep-alive connection after an
    answer) does not keep the server from stopping: SIGINT ends it at once, every time. The
    timeout is a hang guard (it used to wait for the client), not a speed threshold."""
    import signal
    import socket
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, "-m", "bpestore.cli", "serve", "--port", "0", "--db", str(store_path)],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )
    client = None
    try:
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", process.stderr.readline())
        assert match
        client = socket.create_connection(("127.0.0.1", int(match.group(1))), timeout=30)
        if held == "half a request":
            client.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no blank line: the server waits for more
        else:
            client.sendall(b"GET /?q=en HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n")
            assert client.recv(100).startswith(b"HTTP/1.1 200")
        time.sleep(0.3)  # the handler thread is now waiting on the client
    finally:
        process.send_signal(signal.SIGINT)
        try:
            assert process.wait(timeout=10) == 0
        finally:
            process.kill()
            process.stderr.close()
            if client is not None:
                client.close()


def test_a_store_at_another_revision_is_refused_not_upgraded(tmp_path):
    import sqlite3

    from bpestore.errors import StoreError

    db = tmp_path / "old.db"
    with Store(db):
        pass
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE alembic_version SET version_num = '0001'")
    connection.close()
    before = sha256(db)
    with pytest.raises(StoreError, match="do not match its recorded schema revision '0001'"):
        create_app(db)
    assert sha256(db) == before


# -- the leaderboard (stored evaluations) --------------------------------------------------------------

PARALLEL = Path(__file__).resolve().parent / "data" / "parallel"
EVALUATED = ["en.txt", "de.txt", "ru.txt"]
_CELL = re.compile(r'<td[^>]* data-key="([a-z_]+)" data-value="([^"]*)"')


@pytest.fixture(scope="module")
def eval_store(tmp_path_factory) -> Path:
    """A store where latin@1 (trained on four Latin-script files) and cyr@1 (on Russian) were
    evaluated on three of tests/data/parallel's files, and a third tokenizer never was."""
    db = tmp_path_factory.mktemp("board") / "store.db"
    with Store(db) as store:
        store.train([PARALLEL / f"{lang}.txt" for lang in ("en", "de", "fr", "es")], "latin", [300], [], workers=1)
        store.train(PARALLEL / "ru.txt", "cyr", [290], [], workers=1)
        store.train(PARALLEL / "en.txt", "unevaluated", [270], [], workers=1)
        store.evaluate(["latin", "cyr"], [PARALLEL / name for name in EVALUATED])
    return db


@pytest.fixture(scope="module")
def board_client(eval_store):
    return create_app(eval_store, allowed_hosts=["localhost"]).test_client()


def leaderboard_rows(page: str) -> list[dict[str, str]]:
    """The leaderboard table's rows, each its cells' data-value by column."""
    body = page.split('<table id="leaderboard"', 1)[1].split("</table>", 1)[0]
    return [dict(_CELL.findall(row)) for row in body.split("<tr data-index")[1:]]


def heat_map_cells(page: str) -> dict[tuple[str, str], str]:
    """The parity heat map's shown values, by (tokenizer, file)."""
    found = re.findall(r'<text class="cell-value [a-z-]+" data-row="([^"]*)" data-column="([^"]*)"[^>]*>([^<]*)</text>', page)
    return {(row, column): value for row, column, value in found}


def test_leaderboard_lists_every_stored_evaluation(eval_store, board_client):
    before = sha256(eval_store)
    response = board_client.get("/leaderboard", headers={"Host": "localhost"})
    assert response.status_code == 200
    page = response.data.decode()
    assert '<a href="/leaderboard" aria-current="page">Leaderboard</a>' in page  # in the navigation
    rows = leaderboard_rows(page)
    assert sorted((r["tokenizer"], r["file"]) for r in rows) == sorted((t, f) for t in ("latin@1", "cyr@1") for f in EVALUATED)
    assert "unevaluated@1" not in page
    with Store(eval_store) as store:
        for stored in store.evaluations():
            row = next(r for r in rows if (r["tokenizer"], r["file"]) == (stored.ref, stored.label))
            assert float(row["bytes_per_token"]) == pytest.approx(stored.bytes_per_token)
            assert float(row["fertility"]) == pytest.approx(stored.fertility)
            assert float(row["single_token_word_rate"]) == pytest.approx(stored.single_token_word_rate)
    # the numbers are shown in the page's one format, and both charts are there with real axes
    assert re.search(r'<td class="num" data-key="bytes_per_token" data-value="[^"]+">\d\.\d{3}</td>', page)
    assert page.count('class="bar"') == 2 and 'class="tick x-tick"' in page
    assert sha256(eval_store) == before


def test_leaderboard_sorts_by_a_column(board_client):
    for column in ("bytes_per_token", "fertility", "parity", "tokenizer"):
        for order in ("asc", "desc"):
            page = board_client.get(f"/leaderboard?sort={column}&order={order}", headers={"Host": "localhost"}).data.decode()
            values = [r[column] for r in leaderboard_rows(page)]
            assert len(values) == 6
            key = (lambda v: v.lower()) if column == "tokenizer" else float
            assert values == sorted(values, key=key, reverse=order == "desc"), (column, order, values)
            assert f'data-sort="{column}"' in page and ("descending" if order == "desc" else "ascending") in page
    assert board_client.get("/leaderboard?sort=nope", headers={"Host": "localhost"}).status_code == 400
    assert board_client.get("/leaderboard?order=up", headers={"Host": "localhost"}).status_code == 400


def test_leaderboard_parity_heat_map(eval_store, board_client):
    page = board_client.get("/leaderboard", headers={"Host": "localhost"}).data.decode()
    assert '<strong id="reference">en.txt</strong>' in page  # the default: the en* file
    cells = heat_map_cells(page)
    assert set(cells) == {(t, f) for t in ("latin@1", "cyr@1") for f in EVALUATED}
    assert cells[("latin@1", "en.txt")] == cells[("cyr@1", "en.txt")] == "1.00"
    with Store(eval_store) as store:
        tokens = {(e.ref, e.label): e.tokens for e in store.evaluations()}
    assert cells[("latin@1", "ru.txt")] == f"{tokens[('latin@1', 'ru.txt')] / tokens[('latin@1', 'en.txt')]:.2f}"
    # another reference
    page = board_client.get("/leaderboard?reference=ru.txt", headers={"Host": "localhost"}).data.decode()
    cells = heat_map_cells(page)
    assert cells[("latin@1", "ru.txt")] == cells[("cyr@1", "ru.txt")] == "1.00"
    assert cells[("cyr@1", "en.txt")] == f"{tokens[('cyr@1', 'en.txt')] / tokens[('cyr@1', 'ru.txt')]:.2f}"
    assert 'class="legend-swatch"' in page
    assert board_client.get("/leaderboard?reference=xx.txt", headers={"Host": "localhost"}).status_code == 400


def test_leaderboard_parity_summary(eval_store, board_client):
    """Each tokenizer's parity over its files: the cheapest and the dearest against the reference,
    and the Gini coefficient of its token counts, worked out here from the stored counts."""
    page = board_client.get("/leaderboard?reference=ru.txt", headers={"Host": "localhost"}).data.decode()
    body = page.split('<table id="parity-summary">', 1)[1].split("</table>", 1)[0]
    with Store(eval_store) as store:
        tokens = {(e.ref, e.label): e.tokens for e in store.evaluations()}
    for ref in ("latin@1", "cyr@1"):
        row = body.split(f'ref={ref}">{ref}</a>', 1)[1].split("</tr>", 1)[0]
        counts = [tokens[(ref, label)] for label in EVALUATED]
        parities = {label: tokens[(ref, label)] / tokens[(ref, "ru.txt")] for label in EVALUATED}
        lowest, highest = min(parities, key=parities.__getitem__), max(parities, key=parities.__getitem__)
        mean = sum(counts) / len(counts)
        expected_gini = sum(abs(a - b) for a in counts for b in counts) / (2 * len(counts) ** 2 * mean)
        assert f"{parities[lowest]:.3f} ({lowest})" in row and f"{parities[highest]:.3f} ({highest})" in row
        assert f">{expected_gini:.3f}</td>" in row


def test_leaderboard_of_a_store_without_evaluations(client, tmp_path):
    """The explorer's store has tokenizers but no evaluations; an empty store neither: both say how."""
    page = client.get("/leaderboard", headers={"Host": "localhost"}).data.decode()
    assert 'id="no-evaluations"' in page and "bpestore eval REF... --corpus FILE..." in page
    with Store(tmp_path / "empty.db"):
        pass
    app = create_app(tmp_path / "empty.db", allowed_hosts=["localhost"])
    try:
        response = app.test_client().get("/leaderboard", headers={"Host": "localhost"})
    finally:
        close_app(app)
    assert response.status_code == 200 and 'id="no-evaluations"' in response.data.decode()


# -- in a real browser ------------------------------------------------------------------------------


def _browser_paths() -> tuple[str, str]:
    browser = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)), None)
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.skip(
            "no headless browser: the browser tests need Chromium and chromedriver on PATH "
            "(Debian: apt-get install chromium chromium-driver)"
        )
    return browser, driver


@pytest.fixture(scope="module")
def server(store_path):
    """The explorer on a free loopback port, in a thread; yields its base URL."""
    httpd = make_server(store_path, "127.0.0.1", 0, corpora=[store_path.parent / "en.txt", store_path.parent / "de.txt"])
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    httpd.server_close()
    close_app(httpd.app)
    thread.join(5)


@pytest.fixture(scope="module")
def browser():
    browser_path, driver_path = _browser_paths()
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser_path
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900", "--lang=en-US"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def console_errors(driver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]


def visit(driver, url: str) -> None:
    driver.get(url)
    assert driver.execute_script("return document.readyState") == "complete"


def submit(driver, button_id: str) -> None:
    """Click a form's button and wait for the next page (the click returns before it loads)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    old_page = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.ID, button_id).click()
    WebDriverWait(driver, 30).until(expected_conditions.staleness_of(old_page))
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")


def tokenize(driver, action) -> None:
    """Do ``action`` (type, click Tokenize) and wait for the playground's script to put the
    results it caused in the page (app.js counts them in #results's data-updates)."""
    from selenium.webdriver.support.ui import WebDriverWait

    def updates() -> int:
        return int(driver.execute_script("return document.getElementById('results').dataset.updates || '0'"))

    before = updates()
    action()
    WebDriverWait(driver, 30).until(lambda d: updates() > before)
    # a later keystroke's request may still be on its way: wait until none is
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return !document.getElementById('results').dataset.pending"))


def shown_ids(driver) -> dict[str, list[int]]:
    """The ids each playground column shows, by tokenizer, from its token spans."""
    return driver.execute_script(
        "const found = {};"
        "document.querySelectorAll('section.column').forEach((c) => {"
        "  found[c.dataset.ref] = Array.from(c.querySelectorAll('.tokens .tok'), (t) => Number(t.dataset.id)); });"
        "return found;"
    )


def screenshot(driver, name: str) -> None:
    folder = os.environ.get("BPESTORE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / name))


def own_scripts_only(driver) -> None:
    sources = driver.execute_script("return Array.from(document.scripts).map(s => s.getAttribute('src'))")
    assert sources == ["/static/app.js"], sources


def test_every_page_renders_without_console_errors(browser, server, store_path):
    from selenium.webdriver.common.by import By

    before = sha256(store_path)
    console_errors(browser)  # clear
    for url in page_urls():
        visit(browser, server + url)
        assert browser.find_element(By.TAG_NAME, "h1").text, url
        assert "Cannot show that" not in browser.page_source, url
        assert console_errors(browser) == [], url
        own_scripts_only(browser)
        assert "pwned" not in browser.title
    assert sha256(store_path) == before


def test_playground_ids_equal_encode(browser, server, store_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    visit(browser, server + "/playground")
    # ChromeDriver cannot type characters outside the BMP (emoji): set the text area's value
    area = browser.find_element(By.ID, "text")
    browser.execute_script("arguments[0].value = arguments[1]", area, NASTY_TEXT)
    selects = browser.find_elements(By.CSS_SELECTOR, "#playground-form select")
    Select(selects[0]).select_by_value("en@2")
    Select(selects[1]).select_by_value("de@1")
    Select(selects[2]).select_by_value("evil@1")
    tokenize(browser, lambda: browser.find_element(By.ID, "encode").click())
    columns = browser.find_elements(By.CSS_SELECTOR, "section.column")
    assert [column.get_attribute("data-ref") for column in columns] == ["en@2", "de@1", "evil@1"]
    # what the page holds is the text as typed (a text area's value has LF line breaks)
    text = browser.find_element(By.ID, "text").get_property("value")
    assert text == NASTY_TEXT.replace("\r\n", "\n")
    with Store(store_path) as store:
        for column in columns:
            tokenizer = store.load(column.get_attribute("data-ref"))
            want = tokenizer.encode(text)
            shown_ids = [int(i) for i in column.find_element(By.CSS_SELECTOR, "pre.ids").get_property("textContent").split()]
            assert shown_ids == want
            spans = column.find_elements(By.CSS_SELECTOR, ".tokens .tok")
            assert [int(span.get_attribute("data-id")) for span in spans] == want
            assert int(column.find_element(By.CSS_SELECTOR, ".stats .count").text) == len(want)
            specials = [int(span.get_attribute("data-id")) for span in column.find_elements(By.CSS_SELECTOR, ".tok.special")]
            assert specials == [i for i in want if i in tokenizer.special_ids.values()]
            if ENDOFTEXT in tokenizer.special_tokens:
                assert specials, "special tokens are marked"
            # a token that is not UTF-8 on its own is shown as bytes (\xNN), and only such a token
            shown_as_bytes = {int(span.get_attribute("data-id")): span.get_property("textContent") for span in column.find_elements(By.CSS_SELECTOR, ".tok.bytes")}
            not_utf8 = {i for i in want if i not in tokenizer.special_ids.values() and not is_utf8(tokenizer.vocab[i])}
            assert set(shown_as_bytes) == not_utf8
            for token_id, shown in shown_as_bytes.items():
                assert shown == tokenizer.vocab[token_id].decode("utf-8", errors="backslashreplace")
    assert not_utf8, "the text has characters the last tokenizer splits into bytes"
    assert console_errors(browser) == []
    screenshot(browser, "playground.png")


def test_diff_page_agrees_with_store_diff(browser, server, store_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    visit(browser, server + "/diff")
    Select(browser.find_element(By.NAME, "a")).select_by_value("en@2")
    Select(browser.find_element(By.NAME, "b")).select_by_value("de@1")
    submit(browser, "compare")
    with Store(store_path) as store:
        want = store.diff("en@2", "de@1")
        tok_a, tok_b = store.load("en@2"), store.load("de@1")

    def cells(row_id: str) -> list[str]:
        return [cell.text for cell in browser.find_elements(By.CSS_SELECTOR, f"#{row_id} td")]

    assert cells("vocab-size") == [str(want.vocab_size_a), str(want.vocab_size_b)]
    assert cells("merges-count") == [str(want.merges_a), str(want.merges_b)]
    assert cells("only-here") == [str(len(want.only_a)), str(len(want.only_b))]
    assert cells("shared-tokens") == [str(want.shared_tokens)]
    assert cells("shared-merges") == [str(want.shared_merges)]
    assert cells("common-prefix") == [str(want.common_merge_prefix)]
    assert browser.find_element(By.CSS_SELECTOR, "#first-different .rank").text == str(want.first_different_merge["rank"])
    for index, only in ((1, want.only_a), (2, want.only_b)):
        items = browser.find_elements(By.CSS_SELECTOR, f"#only-{index} li")
        assert [int(item.get_attribute("data-id")) for item in items] == [i for i, _ in only[: len(items)]]
        assert len(items) == min(len(only), 200)
    # the per-file table: tokens of each file with each tokenizer, as Tokenizer.encode counts them
    rows = browser.find_elements(By.CSS_SELECTOR, "#files tbody tr")
    counts = [int(row.find_elements(By.CSS_SELECTOR, "td.num")[2].text.replace(",", "")) for row in rows]
    for position, name in enumerate(("en.txt", "de.txt")):
        text = (store_path.parent / name).read_text(encoding="utf-8")
        assert counts[2 * position : 2 * position + 2] == [len(tok_a.encode(text)), len(tok_b.encode(text))]
    assert console_errors(browser) == []
    screenshot(browser, "diff.png")


def test_script_in_a_token_is_shown_not_run(browser, server):
    from selenium.webdriver.common.by import By

    for url in ("/vocab?ref=evil&q=script", "/tokenizer?ref=evil", "/diff?a=en@2&b=evil", f"/playground?t=evil&text={quote(SCRIPT_TOKEN.decode() + SCRIPT_SPECIAL)}"):
        visit(browser, server + url)
        body = browser.find_element(By.TAG_NAME, "body").text
        assert SCRIPT_TOKEN.decode() in body, url  # shown as text
        if "playground" in url:
            assert SCRIPT_SPECIAL in body
            assert browser.find_elements(By.CSS_SELECTOR, "img") == []
        assert browser.title != "pwned" and "pwned" not in browser.title
        own_scripts_only(browser)
        assert console_errors(browser) == [], url
    assert re.search(r"bpestore", browser.title)


def test_playground_tokenizes_as_you_type_and_its_url_reproduces_the_view(browser, server, store_path):
    """Typing updates the tokens (no submit), the address bar then holds a URL that, opened in a
    fresh page, shows the same text and the same tokens; hovering a token says what it is and
    lights it up in its own column only."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    visit(browser, server + "/playground?t=en@2&t=de@1")
    console_errors(browser)
    area = browser.find_element(By.ID, "text")
    area.clear()
    typed = "the cat sat on the mat.\nthe end.  Grüße, 中文 naïve"  # (a tab key would leave the text area)
    tokenize(browser, lambda: area.send_keys(typed))
    with Store(store_path) as store:
        want = {ref: store.load(ref).encode(typed) for ref in ("en@2", "de@1")}
    assert shown_ids(browser) == want
    assert browser.find_element(By.CSS_SELECTOR, "section.column .count").text == f"{len(want['en@2']):,}"
    url = browser.current_url
    assert "/playground?" in url and "t=en@2&t=de@1" in url and "text=the+cat+sat" in url

    # hovering: the token's id, bytes and rank, and the same token lit in its column only
    column = browser.find_element(By.CSS_SELECTOR, 'section.column[data-ref="en@2"]')
    the = next(span for span in column.find_elements(By.CSS_SELECTOR, ".tok") if span.get_property("textContent") == "the")
    ActionChains(browser).move_to_element(the).perform()
    token_id = int(the.get_attribute("data-id"))
    assert column.find_element(By.CSS_SELECTOR, ".hover-info").text.startswith(f"id {token_id:,} · 3 bytes: 74 68 65 · rank ")
    lit = browser.find_elements(By.CSS_SELECTOR, ".tok.lit")
    assert len(lit) == want["en@2"].count(token_id) == 2
    assert all(span.find_element(By.XPATH, "ancestor::section").get_attribute("data-ref") == "en@2" for span in lit)

    # the URL, in a fresh page: the same text, tokenizers and tokens
    visit(browser, "about:blank")
    visit(browser, url)
    assert browser.find_element(By.ID, "text").get_property("value") == typed
    assert shown_ids(browser) == want
    assert console_errors(browser) == []


def selected_refs(html: str) -> list[str]:
    """The refs the playground's dropdowns select, in order ("" for none)."""
    selects = re.findall(r'<select name="t">(.*?)</select>', html, flags=re.S)
    return [(re.findall(r'<option value="([^"]*)" selected>', select) or [""])[0] for select in selects]


def test_playground_bare_names_are_their_latest_versions_selected_in_the_dropdowns(client):
    """/playground?t=en&t=de@1&t=mix: each bare name is its latest version, shown and selected
    in its dropdown, in the order asked; the form (what app.js posts as you type) asks for the
    same three, where the first dropdown used to fall back to its first option."""
    html = client.get("/playground?text=hello&t=en&t=de@1&t=mix", headers={"Host": "localhost"}).data.decode()
    assert re.findall(r'<section class="column" data-ref="([^"]+)"', html) == ["en@2", "de@1", "mix@1"]
    assert selected_refs(html) == ["en@2", "de@1", "mix@1", ""]
    fragment = client.post("/playground/tokens", data={"text": "hello", "t": ["en", "de@1", "mix"]}, headers={"Host": "localhost"})
    assert parse_qs(urlsplit(fragment.headers["X-Playground-Url"]).query)["t"] == ["en@2", "de@1", "mix@1"]


def test_whitespace_marks_cannot_be_read_as_text(client):
    """A space is marked with an open box (␣), which no text is mistaken for; a middle dot (·)
    sat on the baseline and read as a period."""
    html = client.get("/playground?text=a+b&t=en@2&ws=1", headers={"Host": "localhost"}).data.decode()
    assert 'space <span class="mark">␣</span>' in html and '<span class="mark">·</span>' not in html
    assert re.search(r'<span class="ws sp"[^>]*> </span>', html)  # the space itself stays, for copying
    with client.get("/static/style.css", headers={"Host": "localhost"}) as response:  # (closes the file it sends)
        css = response.data.decode()
    rule = re.search(r"\.show-ws \.ws\.sp::before[^{]*\{([^}]*)\}", css)
    assert rule and 'content: "␣"' in rule.group(1), css


def test_typing_keeps_the_comparison_the_url_asked_for(browser, server):
    """Bare names in the URL: typing a character keeps the same three tokenizers, in the same
    order (it used to become the first dropdown's first option, another tokenizer, silently)."""
    from selenium.webdriver.common.by import By

    def columns() -> list[str]:
        return browser.execute_script("return Array.from(document.querySelectorAll('section.column'), (c) => c.dataset.ref)")

    visit(browser, server + "/playground?text=hello&t=en&t=de@1&t=mix")
    assert columns() == ["en@2", "de@1", "mix@1"]
    area = browser.find_element(By.ID, "text")
    tokenize(browser, lambda: area.send_keys("!"))
    assert columns() == ["en@2", "de@1", "mix@1"]
    query = parse_qs(urlsplit(browser.current_url).query)
    assert query["t"] == ["en@2", "de@1", "mix@1"] and query["text"] == ["hello!"]
    assert console_errors(browser) == []


def test_playground_whitespace_toggle(browser, server):
    """The toggle marks spaces, newlines and tabs (␣, ↵, →) without changing the text, and is
    kept in the URL."""
    from selenium.webdriver.common.by import By

    visit(browser, server + "/playground?t=en@2&text=" + quote("a b\n\tc"))

    def marks() -> list[str]:
        return browser.execute_script(
            "return Array.from(document.querySelectorAll('#results .tokens .ws'), (el) => getComputedStyle(el, '::before').content)"
        )

    assert marks() == ["none", "none", "none"]
    text = browser.find_element(By.CSS_SELECTOR, "#results .tokens").get_property("textContent")
    assert text == "a b\n\tc"
    browser.find_element(By.ID, "show-ws").click()
    assert marks() == ['"␣"', '"↵"', '"→"']
    assert browser.find_element(By.CSS_SELECTOR, "#results .tokens").get_property("textContent") == text  # marks are not text
    assert "ws=1" in browser.current_url
    visit(browser, browser.current_url)  # kept by the URL
    assert browser.find_element(By.ID, "show-ws").is_selected() and marks() == ['"␣"', '"↵"', '"→"']
    browser.find_element(By.ID, "show-ws").click()
    assert marks() == ["none", "none", "none"] and "ws=1" not in browser.current_url
    # tables always mark whitespace: the vocab's space and newline tokens
    visit(browser, server + "/vocab?ref=en@2&hex=0a")
    assert "↵" in browser.execute_script(
        "return Array.from(document.querySelectorAll('#vocab code.token .ws'), (el) => getComputedStyle(el, '::before').content).join()"
    )
    assert console_errors(browser) == []


def test_playground_cuts_a_long_text_and_says_so(browser, server, store_path):
    """Past MAX_TEXT_BYTES the text is cut at a character boundary and the page says how much was cut."""
    from selenium.webdriver.common.by import By

    from bpestore.web.views import MAX_TEXT_BYTES

    visit(browser, server + "/playground?t=en@2")
    long_text = "中文 and more text. " * (MAX_TEXT_BYTES // 10)
    area = browser.find_element(By.ID, "text")
    tokenize(browser, lambda: browser.execute_script(
        "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input', {bubbles: true}))", area, long_text,
    ))
    note = browser.find_element(By.ID, "cut-note")
    data = long_text.encode()
    kept = data[:MAX_TEXT_BYTES].decode("utf-8", errors="ignore")
    assert note.find_element(By.CSS_SELECTOR, ".total-bytes").text == f"{len(data):,}"
    assert note.find_element(By.CSS_SELECTOR, ".kept-bytes").text == f"{len(kept.encode()):,}"
    assert note.find_element(By.CSS_SELECTOR, ".cut-bytes").text == f"{len(data) - len(kept.encode()):,}"
    with Store(store_path) as store:
        assert shown_ids(browser) == {"en@2": store.load("en@2").encode(kept)}
    assert console_errors(browser) == []


def test_a_megabyte_of_text_is_cut_quickly(client, store_path):
    """Without a browser: 1 MB of text (the form, or the script's request) is cut, not tokenized
    whole; the fragment's X-Playground-Url holds the text as cut."""
    import time

    from bpestore.web.views import MAX_TEXT_BYTES

    def post(text: str) -> tuple[float, Any]:
        started = time.perf_counter()
        response = client.post("/playground/tokens", data={"t": ["en@2", "de@1"], "text": text}, headers={"Host": "localhost"})
        return time.perf_counter() - started, response

    # Relative to this machine: as long as a text of MAX_TEXT_BYTES, the most that is tokenized,
    # within a generous factor; tokenized and shown whole, 1 MB (50 times more) took far longer.
    alone = min(post("x" * MAX_TEXT_BYTES)[0] for _ in range(3))
    text = "x" * 1_000_000
    seconds, response = post(text)
    assert seconds < 10 * alone + 0.05, (seconds, alone)
    html = response.data.decode()
    assert response.status_code == 200 and 'id="cut-note"' in html and "<html" not in html
    assert re.search(rf'<span class="cut-bytes">{1_000_000 - MAX_TEXT_BYTES:,}</span>', html)
    url = urlsplit(response.headers["X-Playground-Url"])
    assert url.path == "/playground" and parse_qs(url.query) == {"text": ["x" * MAX_TEXT_BYTES], "t": ["en@2", "de@1"]}
    page = client.get(response.headers["X-Playground-Url"], headers={"Host": "localhost"}).data.decode()
    assert 'id="cut-note"' not in page and page.count("x") >= MAX_TEXT_BYTES


def test_leaderboard_sorts_when_a_heading_is_clicked(browser, eval_store):
    """app.js sorts the table in the page, in the server's order, and puts the sorted view's URL
    in the address bar; no console errors."""
    from selenium.webdriver.common.by import By

    httpd = make_server(eval_store, "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{httpd.server_port}"
    try:
        console_errors(browser)  # clear
        visit(browser, base + "/leaderboard")

        def column(key: str) -> list[str]:
            return [cell.get_attribute("data-value") for cell in browser.find_elements(By.CSS_SELECTOR, f'#leaderboard tbody td[data-key="{key}"]')]

        def click(key: str) -> None:
            browser.find_element(By.CSS_SELECTOR, f'#leaderboard th[data-sort="{key}"] a').click()

        assert browser.execute_script("return document.readyState") == "complete"
        click("bytes_per_token")
        values = [float(v) for v in column("bytes_per_token")]
        assert len(values) == 6 and values == sorted(values)
        assert urlsplit(browser.current_url).query.startswith("sort=bytes_per_token&order=asc")
        click("bytes_per_token")  # again: the other way
        descending = column("bytes_per_token")
        assert [float(v) for v in descending] == sorted(values, reverse=True)
        assert browser.find_element(By.CSS_SELECTOR, 'th[data-sort="bytes_per_token"]').get_attribute("aria-sort") == "descending"
        # the same order as the server's for the URL now in the address bar
        page = browser.current_url
        visit(browser, page)
        assert column("bytes_per_token") == descending
        click("file")
        assert column("file") == sorted(column("file"))
        screenshot(browser, "page-leaderboard.png")
        assert console_errors(browser) == []
        own_scripts_only(browser)
    finally:
        httpd.shutdown()
        httpd.server_close()
        close_app(httpd.app)
        thread.join(5)


def test_screenshots_of_every_page(browser, server):
    """With BPESTORE_SCREENSHOTS=DIR: a PNG of every page (and of the playground in the dark
    theme) in DIR, to look at; those of docs/howto/compare-evaluate.md, in docs/, are among them."""
    folder = os.environ.get("BPESTORE_SCREENSHOTS")
    if not folder:
        pytest.skip("set BPESTORE_SCREENSHOTS=DIR to take screenshots of every page")
    def whole_page(name: str) -> None:
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(1280, min(max(height, 900), 4000))
        try:
            screenshot(browser, name)
        finally:
            browser.set_window_size(1280, 900)

    names = []
    for url in page_urls():
        visit(browser, server + url)
        name = re.sub(r"[^A-Za-z0-9@.-]+", "_", url.strip("/").split("&text=")[0]) or "index"
        whole_page(f"page-{name}.png")
        names.append(name)
    assert len(set(names)) == len(names)
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    try:
        visit(browser, server + f"/playground?t=en@2&t=de@1&ws=1&text={quote(NASTY_TEXT)}")
        whole_page("page-playground-dark.png")
        visit(browser, server + "/versions")
        whole_page("page-versions-dark.png")
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    assert console_errors(browser) == []
