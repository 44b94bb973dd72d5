"""The explorer's parts that need no browser nor server (bpestore/web/tokens.py, svg.py,
numbers.py): a token's rendering gives its bytes back, axes have round ticks."""

from __future__ import annotations

import math
import re
from html import unescape

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

pytest.importorskip("markupsafe", reason="the web extra is not installed (pip install -e '.[web]')")

from bpestore import Tokenizer  # noqa: E402
from bpestore.web import svg  # noqa: E402
from bpestore.web.numbers import number  # noqa: E402
from bpestore.web.tokens import WHITESPACE_CLASS, TokenSpans, token_html  # noqa: E402
from strategies import texts  # noqa: E402
from tiers import examples  # noqa: E402

_PIECE = re.compile(r'<span class="([a-z ]+)"(?: title="[^"]*")?>([^<]*)</span>|([^<]+)')
_WHITESPACE = {kind: char for char, kind in WHITESPACE_CLASS.items()}
_SHORT = {"\\r": "\r", "\\v": "\x0b", "\\f": "\x0c"}


def undo_token_html(html: str) -> bytes:
    """The bytes a token's rendering (tokens.token_html) stands for: each piece says what it is."""
    out = bytearray()
    position = 0
    for match in _PIECE.finditer(html):
        assert match.start() == position, f"not a token's rendering at {position}: {html!r}"
        position = match.end()
        kind, shown, plain = match.groups()
        if plain is not None:
            out += unescape(plain).encode("utf-8", errors="surrogatepass")
        elif kind == "byte":
            assert re.fullmatch(r"\\x[0-9a-f]{2}", shown), shown
            out.append(int(shown[2:], 16))
        elif kind.startswith("ws "):
            assert shown == _WHITESPACE[kind[3:]], (kind, shown)
            out += shown.encode()
        elif kind == "esc":
            char = _SHORT.get(shown) or chr(int(shown[2:], 16))
            assert not char.isprintable() and char not in WHITESPACE_CLASS, shown
            out += char.encode("utf-8", errors="surrogatepass")
        else:
            raise AssertionError(f"unknown piece {kind!r} in {html!r}")
    assert position == len(html), html
    return bytes(out)


def visible(html: str) -> str:
    """What a reader sees of a rendering with whitespace shown (the stylesheet's marks)."""
    marks = {"sp": "␣", "tab": "→", "nl": "↵"}
    return unescape(re.sub(r'<span class="(?:ws (\w+)|[a-z]+)"[^>]*>([^<]*)</span>', lambda m: marks[m.group(1)] if m.group(1) else m.group(2), html))


# A tokenizer whose tokens split characters: bytes, a few merges across UTF-8 boundaries.
_VOCAB = {i: bytes([i]) for i in range(256)}
for _token in (b"\xe4\xb8", b" \xe4", b"  ", b"\n\n", b"\xe4\xb8\xad", b"th", b"the", b" the", b"\xf0\x9f", b"\xf0\x9f\x98"):
    _VOCAB[len(_VOCAB)] = _token
_MERGES = [(b"\xe4", b"\xb8"), (b" ", b"\xe4"), (b" ", b" "), (b"\n", b"\n"), (b"\xe4\xb8", b"\xad"), (b"t", b"h"), (b"th", b"e"), (b" ", b"the"), (b"\xf0", b"\x9f"), (b"\xf0\x9f", b"\x98")]
TOKENIZER = Tokenizer(_VOCAB, _MERGES, ["<|endoftext|>", "<| sep |>"])


@settings(max_examples=examples(300), deadline=None)
@given(text=texts() | st.text())
def test_the_rendering_of_tokens_undone_gives_the_text_back(text):
    """For any text: each token's rendering gives the token's bytes back, so the tokens' renderings
    give the text back; a rendering holds only characters of the text, marks and escapes (no \\xNN
    for a whole character)."""
    ids = TOKENIZER.encode(text, allowed_special="all")
    rendered = [token_html(TOKENIZER.vocab[i]) for i in ids]
    assert b"".join(undo_token_html(html) for html in rendered) == text.encode("utf-8", errors="surrogatepass")
    for i, html in zip(ids, rendered):
        token = TOKENIZER.vocab[i]
        try:
            token.decode("utf-8")
        except UnicodeDecodeError:
            continue
        assert 'class="byte"' not in html, (token, html)  # whole characters are shown as characters
    # the playground's spans, put together, hold the same
    spans = TokenSpans(TOKENIZER).html(ids)
    inner = re.findall(r'<span class="tok c\d[^"]*" data-id="(\d+)" title="[^"]*">((?:[^<]|<span[^>]*>[^<]*</span>)*)</span>', spans)
    assert [int(i) for i, _ in inner] == ids
    assert b"".join(undo_token_html(html) for _, html in inner) == text.encode("utf-8", errors="surrogatepass")


def test_token_rendering_examples():
    assert token_html("中".encode()) == "中"  # a whole character: as it is, never \xe4\xb8\xad
    assert token_html(b"\xe4\xb8") == '<span class="byte" title="byte">\\xe4</span><span class="byte" title="byte">\\xb8</span>'
    assert undo_token_html(str(token_html(" 中\xe4".encode() + b"\xe4"))) == " 中\xe4".encode() + b"\xe4"
    assert visible(str(token_html(b" a\tb\n"))) == "␣a→b↵"
    assert visible(str(token_html("\r\u200b\x00".encode()))) == "\\r\\u200b\\u0000"
    assert token_html(b"<script>&") == "&lt;script&gt;&amp;"
    assert token_html(b"\\x41") == "\\x41"  # a backslash is text; a byte is a marked piece
    spans = TokenSpans(TOKENIZER)
    assert spans.describe(256 + 7) == "id 263 · 4 bytes: 20 74 68 65 · rank 7"  # " the"
    assert spans.describe(ord("a")) == "id 97 · 1 byte: 61 · a single byte"
    assert spans.describe(TOKENIZER.special_ids["<|endoftext|>"]).endswith("special token")


def test_numbers_are_written_one_way():
    assert [number(12345), number(12345.0), number(4.38512), number(0.5, 1), number(None), number(1234.5, 2)] == [
        "12,345", "12,345", "4.385", "0.5", "–", "1,234.50",
    ]


@pytest.mark.parametrize(
    ("low", "high", "whole", "want"),
    [
        (0, 4.385, False, [0, 1, 2, 3, 4, 5]),
        (0, 9731, True, [0, 2000, 4000, 6000, 8000, 10000]),
        (0, 1, True, [0, 1]),
        (0, 3, True, [0, 1, 2, 3]),
        (0, 0.37, False, [0, 0.1, 0.2, 0.3, 0.4]),
        (2.9, 3.7, False, [2.8, 3.0, 3.2, 3.4, 3.6, 3.8]),
        (0, 0, True, [0, 1]),
    ],
)
def test_nice_ticks(low, high, whole, want):
    assert svg.nice_ticks(low, high, whole=whole) == want


@settings(max_examples=examples(200), deadline=None)
@given(low=st.floats(0, 1e9), span=st.floats(1e-6, 1e9), whole=st.booleans())
def test_nice_ticks_cover_the_range_in_round_even_steps(low, span, whole):
    assume(span > low * 1e-6)  # (a chart's range; ticks are exact to 12 digits)
    high = low + span
    ticks = svg.nice_ticks(low, high, whole=whole)
    assert ticks[0] <= low * (1 + 1e-9) and ticks[-1] >= high * (1 - 1e-9)
    assert 3 <= len(ticks) <= 12 or (whole and span < 3)
    steps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:])}
    step = svg.nice_step(high - low, whole=whole)
    assert all(math.isclose(s, step, rel_tol=1e-6, abs_tol=1e-9 * max(1.0, high)) for s in steps), (ticks, steps)
    mantissa = step / 10 ** math.floor(math.log10(step) + 1e-12)
    assert any(math.isclose(mantissa, m, rel_tol=1e-6) for m in (1, 2, 5, 10)), step
    if whole:
        assert all(t == int(t) for t in ticks)


def test_log_ticks():
    assert svg.log_ticks(256, 50257) == [100, 1000, 10000, 100000]
    assert svg.log_ticks(1000, 8000) == [1000, 2000, 5000, 10000]
    assert svg.log_ticks(300, 600) == [200, 500, 1000]
    assert svg.log_ticks(500, 500) == [200, 500, 1000]
    with pytest.raises(ValueError):
        svg.log_ticks(0, 10)


def tick_labels(chart: str, axis: str) -> list[str]:
    return re.findall(rf'<text class="tick {axis}-tick"[^>]*>([^<]*)</text>', chart)


def test_histogram_has_a_bar_for_every_length_and_round_ticks():
    chart = str(svg.histogram({1: 256, 2: 3000, 5: 10, 9: 1}, title="t", x_label="token length (bytes)", y_label="tokens"))
    bars = re.findall(r"<rect [^>]*><title>(\d+): ([\d,]+)</title></rect>", chart)
    assert bars == [(str(n), count) for n, count in [(1, "256"), (2, "3,000"), (3, "0"), (4, "0"), (5, "10"), (6, "0"), (7, "0"), (8, "0"), (9, "1")]]
    assert tick_labels(chart, "y") == ["0", "1,000", "2,000", "3,000"]
    assert tick_labels(chart, "x") == ["2", "4", "6", "8"]  # (every second length: about five ticks)
    assert "token length (bytes)" in chart and ">tokens<" in chart


def test_line_chart_axes_start_at_zero_and_name_every_series():
    chart = str(svg.line_chart(
        [("en", [(300, 2.9), (600, 3.7)]), ("de", [(500, 2.5)])], title="t", x_label="vocab size", y_label="bytes per token", log_x=True,
    ))
    assert tick_labels(chart, "y") == ["0", "1", "2", "3", "4"]
    assert tick_labels(chart, "x") == ["200", "500", "1,000"]
    assert re.findall(r'<text class="legend"[^>]*>([^<]*)</text>', chart) == ["en", "de"]
    assert chart.count("<polyline") == 1  # de has one point
    assert svg.line_chart([], title="t", x_label="x", y_label="y") == ""


def test_a_long_text_is_cut_into_blocks_at_line_ends():
    """Past CHUNK_TOKENS tokens the spans are grouped in blocks (which the browser may skip laying
    out off screen), each ending with a token that ends a line, so no line is cut in two."""
    from bpestore.web.tokens import CHUNK_TOKENS

    text = "".join(f"line {n} the the the\n" for n in range(400)) + "end"
    ids = TOKENIZER.encode(text)
    html = str(TokenSpans(TOKENIZER).html(ids))
    blocks = re.findall(r'<div class="chunk">(.*?)</div>', html, re.S)
    assert len(blocks) > 2 and "".join(f'<div class="chunk">{b}</div>' for b in blocks) == html
    for block in blocks[:-1]:
        token_ids = [int(i) for i in re.findall(r'data-id="(\d+)"', block)]
        assert len(token_ids) >= CHUNK_TOKENS and TOKENIZER.vocab[token_ids[-1]].endswith(b"\n")
    assert "chunk" not in str(TokenSpans(TOKENIZER).html(ids[:CHUNK_TOKENS]))


def test_horizontal_bars_have_an_axis_from_zero():
    chart = str(svg.horizontal_bars([("a@1", 1.2), ("<b>@1", 3.4)], title="t", x_label="bytes per token"))
    assert chart.count('class="bar"') == 2 and "&lt;b&gt;@1" in chart and "<b>" not in chart
    ticks = re.findall(r'class="tick x-tick"[^>]*>([^<]*)<', chart)
    assert ticks[0] == "0" and float(ticks[-1]) >= 3.4  # round ticks from 0 past the longest bar
    assert svg.horizontal_bars([], title="t", x_label="x") == ""


def test_heat_map_colours_by_value_neutral_at_one():
    assert svg.diverging_colour(1.0, 4.0) == "#f7f7f7"
    assert svg.diverging_colour(4.0, 4.0) == svg.diverging_colour(9.0, 4.0) == "#b2182b"  # the end, then clamped
    assert svg.diverging_colour(0.25, 4.0) == "#2166ac"
    chart = str(svg.heat_map(["t@1", "u@1"], ["en", "de"], [[1.0, 1.5], [1.0, None]], title="parity", legend_label="parity"))
    assert chart.count('class="cell"') == 3 and chart.count('class="cell empty"') == 1
    assert re.findall(r'data-row="t@1" data-column="de"[^>]*>([^<]*)</text>', chart) == ["1.50"]
    assert chart.count('class="legend-swatch"') == 7 and ">1.00</text>" in chart
