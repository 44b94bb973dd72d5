"""Import and export (``bpestore.formats``), checked against the tools the files belong to.

* ``cl100k_base`` and ``o200k_base`` from the files shipped in ``bpe-openai`` give the ids of
  tiktoken's own Encoding, built from the same file with tiktoken's own constructor (its pattern
  and special tokens, and its check of the file's hash).
* GPT-2 from the fixture files, exported to every format and imported again, is the same
  tokenizer; the exported files load in ``tokenizers`` and in tiktoken and give the same ids.
* A tokenizer trained by bpestore and exported to ``tokenizer.json`` encodes the same in
  ``tokenizers``.
* Input that bpestore cannot reproduce exactly is refused with a FormatError naming the file, and
  nothing is stored.

Expected ids always come from tiktoken, ``tokenizers`` or bpestore's own ``Tokenizer.encode``.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import random
from pathlib import Path

import pytest
import regex
import tiktoken
import tiktoken.load
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpestore import Tokenizer, train_bpe
from bpestore.cli import main
from bpestore.errors import FormatError
from bpestore import formats
from bpestore.pretokenize import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN
from bpestore import Store
from bpestore.engine import pair_merges_from_ranks
from conftest import shared_file
from gpt2_tiktoken import ENDOFTEXT, ENDOFTEXT_ID, R50K_PATTERN, gpt2_vocab_and_merges, read_merges_txt, read_vocab_json
from reference import reference_pair_merges_from_ranks
from tiers import examples

FIXTURE_TEXTS = ["address.txt", "german.txt", "tinystories_sample.txt", "corpus.en"]
CORPORA = ["wiki_en_57M.txt", "reuters_17M.txt", "sotu_11M.txt", "tinystories_800K.txt"]
CORPUS_PREFIX_CHARS = 1_000_000
OPENAI_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"

HYPOTHESIS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- helpers --------------------------------------------------------------------------------------


def read_text(path: Path, limit: int | None = None) -> str:
    """The text of a file exactly (no newline translation), at most ``limit`` characters."""
    with open(path, encoding="utf-8", newline="") as file:
        return file.read(limit) if limit else file.read()


def fixture_text(name: str) -> str:
    return read_text(shared_file("fixtures", name))


def sample_text(specials: list[str]) -> str:
    return (
        "Hello wörld!\r\nDON'T we'LL I'M café's 日本語 😀 👨‍👩‍👧 ٣٤ 12345\t\t  end"
        + "".join(f"{token} x{token}" for token in specials)
        + "\u2028 after  \n\n"
    )


def runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()


def invoke(*args, input=None):
    return runner().invoke(main, [str(arg) for arg in args], input=input, env={"BPESTORE_DEBUG": None})


def stored_refs(db: Path) -> list[str]:
    if not db.exists():
        return []
    with Store(db) as store:
        return store.refs()


def parse_tiktoken_file(path: Path) -> dict[bytes, int]:
    """A local ``.tiktoken`` file's ranks, read by tiktoken's own reader (with its cache off)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_CACHE_DIR", "")
        return tiktoken.load.load_tiktoken_bpe(str(path))


# -- text strategies ------------------------------------------------------------------------------

WHITESPACE = [
    " ", "  ", "   ", "\t", "\t\t", " \t ", "\n", "\n\n", "\r\n", "\r", "\r\n\r\n", " \n", "  \n", "\n ",
    "\u2028", "\u2029", "\xa0", "\u3000", "\x0b", "\x0c", "\x85", "\u2009", " \u3000 ", "\x1c",
]
FRAGMENTS = [
    # contractions in every case: cl100k's and o200k's are case-insensitive, GPT-2's are not
    "DON'T", "don't", "Don'T", "I'M", "i'm", "we'LL", "You'Re", "they'VE", "she'D", "'S", "'s", "'t", "'ll",
    "''s", "' s", "’s", "it'S.", "O'NEIL's",
    # words, upper/lower/title case runs (o200k splits CamelCase), other scripts, combining marks
    "Hello", " world", "HTTPServer", "camelCaseWord", "ALLCAPS", "Straße", "naïve", "e\u0301", "a\u0308\u0301",
    "\u0301", "日本語", " 中文字", "한국어", "Привет", "ΑΒΓ", "مرحبا", "עברית", "हिन्दी",
    # emoji, some of them several code points
    "😀", " 👍🏽", "👨‍👩‍👧", "🇩🇪", "\u200d", "\ufeff",
    # digits: ASCII runs (cut in threes), Arabic-Indic, Bengali, Devanagari, fullwidth, superscript
    "1", "12", "123", "1234", "1234567", " 42", "3.14159", "٣٤٥", "١٢٣٤", "৩৪", "४२", "１２３", "²", "Ⅻ",
    # punctuation, code
    "!", "...", " —", "“quoted”", "$", " (", "\\", "//", "/*", "*/", "::", "->", "\x00", "<", ">", "|",
]


def texts(specials: list[str]) -> st.SearchStrategy[str]:
    """Texts of the fragments above, whitespace runs, special tokens (whole and cut short) and
    arbitrary Unicode assigned in Python's tables (tiktoken's and tokenizers' tables are newer, and
    classify some newer code points differently: not what is tested here)."""
    near_misses = [token[:-1] for token in specials] + [token[1:] for token in specials] + ["<|", "|>"]
    assigned = st.characters(exclude_categories=("Cs", "Cn"))
    pieces = [
        st.sampled_from(FRAGMENTS),
        st.sampled_from(WHITESPACE),
        st.text(assigned, max_size=8),
        st.builds(lambda s, n: s * n, st.sampled_from(["a", " ", "\n", "7", "中", "😀", "!?", " \n"]), st.integers(2, 40)),
    ]
    if specials:
        pieces.append(st.sampled_from(specials + near_misses))
    return st.lists(st.one_of(pieces), max_size=40).map("".join)


# -- cl100k_base and o200k_base -------------------------------------------------------------------


def bpe_openai_file(name: str) -> Path:
    package = pytest.importorskip("bpe_openai", reason="the bpe-openai package ships the .tiktoken files")
    path = Path(package.__file__).parent / "data" / f"{name}.tiktoken.gz"
    if not path.is_file():
        pytest.skip(f"{path} not found in the installed bpe-openai")
    return path


def tiktoken_encoding(name: str, gz_path: Path, cache_dir: Path) -> tiktoken.Encoding:
    """tiktoken's own ``name`` Encoding (pattern, special tokens, hash check), from the local file.

    The decompressed file is put in a private tiktoken cache under the key of OpenAI's URL, so
    tiktoken's constructor reads it there; if the hash did not match tiktoken would download, which
    is turned into an error."""
    import tiktoken_ext.openai_public as openai_public

    url = OPENAI_URL.format(name)
    (cache_dir / hashlib.sha1(url.encode()).hexdigest()).write_bytes(gzip.decompress(gz_path.read_bytes()))

    def no_download(blobpath):
        raise AssertionError(f"tiktoken tried to download {blobpath}: the bpe-openai file is not OpenAI's")

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_CACHE_DIR", str(cache_dir))
        patch.setattr(tiktoken.load, "read_file", no_download)
        spec = openai_public.ENCODING_CONSTRUCTORS[name]()
    return tiktoken.Encoding(**spec)


class OpenAIEncoding:
    def __init__(self, name, path, encoding, report):
        self.name = name
        self.path = path
        self.encoding: tiktoken.Encoding = encoding
        self.report = report
        self.tokenizer: Tokenizer = Tokenizer.from_model(report.model)
        self.specials = sorted(encoding.special_tokens_set)

    def expected(self, text: str) -> list[int]:
        return self.encoding.encode(text, allowed_special="all")


# (o200k_base, twice the size: the full suite's; cl100k_base covers the same path in the fast tier)
@pytest.fixture(scope="module", params=["cl100k_base", pytest.param("o200k_base", marks=pytest.mark.slow)])
def openai(request, tmp_path_factory) -> OpenAIEncoding:
    name = request.param
    path = bpe_openai_file(name)
    encoding = tiktoken_encoding(name, path, tmp_path_factory.mktemp("tiktoken-cache"))
    return OpenAIEncoding(name, path, encoding, formats.read("tiktoken", path, name))


def test_imported_vocab_and_special_tokens(openai):
    tokenizer, encoding = openai.tokenizer, openai.encoding
    special_ids = encoding._special_tokens
    assert tokenizer.special_ids == special_ids
    assert tokenizer.merge_rule == "token"
    assert tokenizer.pattern == encoding._pat_str
    ranks = encoding._mergeable_ranks
    assert {token_id: token for token_id, token in tokenizer.vocab.items() if token_id not in special_ids.values()} == {
        rank: token for token, rank in ranks.items()
    }
    assert tokenizer.vocab_size == len(ranks) + len(special_ids)
    assert max(tokenizer.vocab) == encoding.max_token_value


def test_bpestore_patterns_are_tiktokens(openai):
    assert {"cl100k_base": CL100K_PATTERN, "o200k_base": O200K_PATTERN}[openai.name] == openai.encoding._pat_str


@pytest.mark.parametrize("name", FIXTURE_TEXTS)
def test_fixture_texts_encode_like_tiktoken(openai, name):
    text = fixture_text(name)
    ids = openai.tokenizer.encode(text)
    assert ids == openai.expected(text)
    assert openai.tokenizer.decode(ids) == text


@pytest.mark.parametrize("name", CORPORA)
def test_corpus_samples_encode_like_tiktoken(openai, name):
    text = read_text(shared_file("corpora", name), CORPUS_PREFIX_CHARS)
    assert openai.tokenizer.encode(text) == openai.expected(text)


def test_special_tokens_in_text(openai):
    text = sample_text(openai.specials) + "".join(openai.specials) + " ".join(openai.specials)
    ids = openai.tokenizer.encode(text)
    assert ids == openai.expected(text)
    assert all(openai.encoding._special_tokens[token] in ids for token in openai.specials)
    assert openai.tokenizer.decode(ids) == text


@pytest.mark.parametrize("text", ["\n  a", " a\n  b", "x\n\t a", "a \n b", "\t\t b c", "end\n\n"])
def test_whitespace_before_a_space_encodes_like_tiktoken(openai, text):
    """Ids match tiktoken where whitespace comes before a space, the edge of the split rule
    (cl100k's \\s++$ makes the character before the space matter there)."""
    tokenizer = openai.tokenizer
    for context in ("", " the", " b"):  # also once the caches hold the segments
        tokenizer.encode(context)
        assert tokenizer.encode(text) == openai.expected(text)


def test_generated_text_encodes_like_tiktoken(openai):
    @HYPOTHESIS
    @given(text=texts(openai.specials))
    def check(text):
        ids = openai.tokenizer.encode(text)
        assert ids == openai.expected(text)
        assert openai.tokenizer.decode_bytes(ids) == openai.encoding.decode_bytes(ids) == text.encode("utf-8")

    check()


def test_streaming_encode_like_tiktoken(openai):
    text = fixture_text("tinystories_sample.txt") + sample_text(openai.specials) * 3
    pieces = [text[i : i + 37] for i in range(0, len(text), 37)]
    assert list(openai.tokenizer.encode_iterable(pieces)) == openai.expected(text)


def independent_pair_merges(ranks: dict[bytes, int]) -> tuple[list[tuple[int, int]], list[bytes]]:
    """For each multi-byte token in rank order, run tiktoken's educational BPE (lowest-ranked
    resulting token first, no whole-piece lookup) on its bytes with the tokens ranked below it.
    Two parts left: that pair merge reaches the token; more: none does."""
    from tiktoken._educational import bpe_encode

    below = {token: rank for token, rank in ranks.items() if len(token) == 1}
    merges, unreachable = [], []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) > 1:
            parts = bpe_encode(below, token, visualise=None)  # the ranks of the parts
            if len(parts) == 2:
                merges.append(tuple(parts))
            else:
                unreachable.append(token)
            below[token] = rank
    return merges, unreachable


@pytest.mark.slow  # (over 2 s here: the full suite's)
def test_import_reports_the_tokens_no_pair_merge_reaches(openai):
    ranks = openai.encoding._mergeable_ranks
    token_of = {rank: token for token, rank in ranks.items()}
    merge_ids, unreachable = independent_pair_merges(ranks)
    merges = [(token_of[a], token_of[b]) for a, b in merge_ids]
    assert openai.tokenizer.merges == merges
    assert any(f"{len(unreachable)} tokens are not reached by any pair merge" in note for note in openai.report.notes), openai.report.notes
    assert len(merges) + len(unreachable) == sum(1 for token in ranks if len(token) > 1)


def test_unreachable_tokens_are_counted(tmp_path):
    """A hand-made .tiktoken file where 'abc' comes before 'ab' and 'bc': no pair merge makes it."""
    ranks = {bytes([b]): b for b in range(256)}
    ranks.update({b"abc": 256, b"ab": 257, b"xy": 258, b"xyz": 259, b"abcxyz": 260})
    path = tmp_path / "tiny.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(token) + b" %d\n" % rank for token, rank in ranks.items()))
    report = formats.read("tiktoken", path, GPT2_PATTERN, {})
    merge_ids, unreachable = independent_pair_merges(ranks)
    token_of = {rank: token for token, rank in ranks.items()}
    assert unreachable == [b"abc"]
    assert report.model.merges == [(token_of[a], token_of[b]) for a, b in merge_ids] == [(b"a", b"b"), (b"x", b"y"), (b"xy", b"z"), (b"abc", b"xyz")]
    assert any("1 tokens are not reached" in note or "1 token is not reached" in note for note in report.notes), report.notes
    # tiktoken still encodes 'abc' as one token (whole pre-token lookup), and so does bpestore
    encoding = tiktoken.Encoding(name="tiny", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={})
    for text in ["abc", "abcxyz", " abcab", "xyzabc abc"]:
        assert Tokenizer.from_model(report.model).encode(text) == encoding.encode(text)


@settings(max_examples=examples(100), deadline=None)
@given(
    extra=st.lists(st.lists(st.sampled_from([b"a", b"b", b"c", b" "]), min_size=2, max_size=6).map(b"".join), max_size=30, unique=True),
    seed=st.integers(0, 2**32 - 1),
    special_at=st.sampled_from(["own id", "a token of the file's"]),
    text=st.text(alphabet="abc x<|>", max_size=40),
)
def test_merges_derived_when_asked_equal_those_reconstructed_at_once(tmp_path_factory, extra, seed, special_at, text):
    """A .tiktoken file read from Python (``Tokenizer.from_format``) reconstructs its merges only
    when asked for them; ``bpestore import`` (progress) reconstructs them at once. Both give the
    same model, merges (the engine's reconstruction of the file's ranks), notes and ids, and
    tiktoken's ids; loading and encoding never reconstruct them."""
    rng = random.Random(seed)
    tokens = [bytes([b]) for b in range(256)] + [token for token in extra if len(token) > 1]
    ranks = dict(zip(tokens, rng.sample(range(2 * len(tokens)), len(tokens))))
    # A special token with an id of its own, or one the file gives to the same bytes.
    shared = next((token for token in reversed(tokens) if len(token) > 1), b"a")
    special = "<|x|>" if special_at == "own id" else shared.decode()
    special_id = 2 * len(tokens) if special_at == "own id" else ranks[shared]
    path = tmp_path_factory.mktemp("lazy") / "x.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(token) + b" %d\n" % rank for token, rank in ranks.items()))
    lazy = formats.read("tiktoken", path, GPT2_PATTERN, {special: special_id})
    tokenizer = Tokenizer.from_model(lazy.model)
    ids = tokenizer.encode(text)
    assert lazy.model._merges is None  # (not reconstructed by loading nor by encoding)
    eager = formats.read("tiktoken", path, GPT2_PATTERN, {special: special_id}, progress=True)
    assert eager.model._merges is not None
    assert tokenizer.merges == eager.model.merges == pair_merges_from_ranks(ranks)[0]
    assert lazy.model == eager.model and lazy.notes == eager.notes
    assert ids == Tokenizer.from_model(eager.model).encode(text)
    encoding = tiktoken.Encoding(name="x", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={special: special_id})
    assert ids == encoding.encode(text, allowed_special="all")


@pytest.mark.parametrize("progress", [False, True])
def test_a_special_token_the_file_holds_under_another_id_is_refused(tmp_path, progress):
    """The file's tokens are checked by the engine and the model is not checked again: a special
    token whose bytes the file gives another id (a token twice) is still refused, naming the file."""
    ranks = {bytes([b]): b for b in range(256)} | {b"<|x|>": 256}
    path = tmp_path / "x.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(token) + b" %d\n" % rank for token, rank in ranks.items()))
    with pytest.raises(FormatError, match=r"x\.tiktoken: special token '<\|x\|>' has id 300, but the file gives its bytes the id 256"):
        formats.read("tiktoken", path, GPT2_PATTERN, {"<|x|>": 300}, progress=progress)
    for bad in (2**31, -1, True):
        with pytest.raises(FormatError, match=r"x\.tiktoken: token ids must be integers"):
            formats.read("tiktoken", path, GPT2_PATTERN, {"<|y|>": bad}, progress=progress)
    assert formats.read("tiktoken", path, GPT2_PATTERN, {"<|x|>": 256}, progress=progress).model.special_ids == {"<|x|>": 256}


def test_a_model_that_derives_its_merges_pickles(tmp_path):
    import pickle

    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": 257}
    path = tmp_path / "x.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(token) + b" %d\n" % rank for token, rank in ranks.items()))
    tokenizer = Tokenizer.from_format("tiktoken", path, GPT2_PATTERN)
    copy = pickle.loads(pickle.dumps(tokenizer))
    assert copy.encode("abcab") == tokenizer.encode("abcab") == [257, 256]
    assert copy.merges == tokenizer.merges == [(b"a", b"b"), (b"ab", b"c")]


@pytest.mark.slow  # (imports cl100k_base through the CLI: ~4 s)
def test_cli_import_of_cl100k(tmp_path):
    """cl100k_base imported through the command line, then used by ``bpestore encode``."""
    path = bpe_openai_file("cl100k_base")
    encoding = tiktoken_encoding("cl100k_base", path, tmp_path)
    specials = encoding._special_tokens
    db = tmp_path / "store.db"
    result = invoke("import", "tiktoken", path, "--name", "cl100k", "--pattern", "cl100k_base", "--db", db)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("cl100k@1")
    assert "0 tokens are not reached" in result.stderr
    (info,) = json.loads(invoke("list", "--json", "--db", db).stdout)
    assert info["vocab_size"] == len(encoding._mergeable_ranks) + len(specials)
    assert info["special_tokens"] == sorted(specials, key=specials.get)
    text = sample_text(sorted(specials)) + fixture_text("german.txt")
    encoded = invoke("encode", "cl100k", "--db", db, input=text.encode("utf-8"))
    assert encoded.exit_code == 0, encoded.stderr
    assert [int(word) for word in encoded.stdout.split()] == encoding.encode(text, allowed_special="all")


# -- GPT-2: import, export to every format, import again -------------------------------------------


@pytest.fixture(scope="module")
def gpt2():
    report = formats.read("gpt2", shared_file("fixtures", "gpt2_vocab.json"), shared_file("fixtures", "gpt2_merges.txt"), [ENDOFTEXT])
    return Tokenizer.from_model(report.model)


@pytest.fixture(scope="module")
def gpt2_exports(gpt2, tmp_path_factory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("gpt2-exports")
    paths = {"gpt2": directory / "gpt2-files", "hf": directory / "tokenizer.json", "tiktoken": directory / "gpt2.tiktoken"}
    for export_format, path in paths.items():
        notes = formats.export(gpt2, export_format, path)
        assert all(isinstance(note, str) for note in notes)
    return paths


def gpt2_texts() -> list[str]:
    return [fixture_text(name) for name in FIXTURE_TEXTS] + [sample_text([ENDOFTEXT])]


def test_gpt2_import_reads_the_files_exactly(gpt2):
    from gpt2_tiktoken import gpt2_encoding

    vocab, merges = gpt2_vocab_and_merges()
    assert gpt2.vocab == vocab
    assert gpt2.merges == merges
    assert gpt2.special_ids == {ENDOFTEXT: ENDOFTEXT_ID}
    for text in gpt2_texts():
        assert gpt2.encode(text) == gpt2_encoding().encode(text, allowed_special="all")


def reimport(export_format: str, path: Path):
    if export_format == "gpt2":
        return formats.read("gpt2", path / "vocab.json", path / "merges.txt", [ENDOFTEXT])
    if export_format == "hf":
        return formats.read("hf", path)
    return formats.read("tiktoken", path, "r50k_base")


@pytest.mark.parametrize("export_format", ["gpt2", "hf", "tiktoken"])
def test_gpt2_export_and_import_again(gpt2, gpt2_exports, export_format):
    again = Tokenizer.from_model(reimport(export_format, gpt2_exports[export_format]).model)
    assert again.vocab == gpt2.vocab
    assert again.merges == gpt2.merges
    assert again.special_ids == gpt2.special_ids
    assert again.pattern == gpt2.pattern
    assert again.merge_rule == ("token" if export_format == "tiktoken" else "pair")
    for text in gpt2_texts():
        assert again.encode(text) == gpt2.encode(text)


def test_gpt2_files_written_are_gpt2s(gpt2_exports):
    """Read back with the tests' own reader of GPT-2 files, not bpestore's."""
    directory = gpt2_exports["gpt2"]
    vocab, merges = gpt2_vocab_and_merges()
    assert read_vocab_json(directory / "vocab.json") == vocab
    assert read_merges_txt(directory / "merges.txt") == merges
    assert json.loads((directory / "vocab.json").read_text(encoding="utf-8")) == json.loads(
        shared_file("fixtures", "gpt2_vocab.json").read_text(encoding="utf-8")
    )


def test_merges_reconstructed_from_the_tiktoken_export_are_gpt2s(gpt2_exports):
    report = formats.read("tiktoken", gpt2_exports["tiktoken"], "r50k_base")
    assert report.model.merges == read_merges_txt(shared_file("fixtures", "gpt2_merges.txt"))
    assert any("0 tokens are not reached" in note for note in report.notes), report.notes


def test_tiktoken_export_loads_in_tiktoken(gpt2, gpt2_exports):
    ranks = parse_tiktoken_file(gpt2_exports["tiktoken"])
    vocab, _ = gpt2_vocab_and_merges()
    assert ranks == {token: token_id for token_id, token in vocab.items() if token_id != ENDOFTEXT_ID}
    encoding = tiktoken.Encoding(name="gpt2-export", pat_str=R50K_PATTERN, mergeable_ranks=ranks, special_tokens={ENDOFTEXT: ENDOFTEXT_ID})
    for text in gpt2_texts():
        assert encoding.encode(text, allowed_special="all") == gpt2.encode(text)

    @HYPOTHESIS
    @given(text=texts([ENDOFTEXT]))
    def check(text):
        assert encoding.encode(text, allowed_special="all") == gpt2.encode(text)

    check()


@pytest.fixture(scope="module")
def hf_tokenizers():
    return pytest.importorskip("tokenizers", reason="Hugging Face tokenizers is needed to check tokenizer.json exports")


def test_hf_export_of_gpt2_loads_in_tokenizers(gpt2, gpt2_exports, hf_tokenizers):
    loaded = hf_tokenizers.Tokenizer.from_file(str(gpt2_exports["hf"]))
    assert loaded.get_vocab_size(with_added_tokens=True) == gpt2.vocab_size
    for text in gpt2_texts():
        assert loaded.encode(text).ids == gpt2.encode(text)

    @HYPOTHESIS
    @given(text=texts([ENDOFTEXT]))
    def check(text):
        assert loaded.encode(text).ids == gpt2.encode(text)

    check()


# -- a tokenizer trained by bpestore, in tokenizers -------------------------------------------------


def hf_pretokens(loaded, text: str) -> list[str]:
    """The pre-tokens of ``text`` by a loaded byte-level ``tokenizers.Tokenizer``, as text."""
    unicode_to_byte = {c: b for b, c in enumerate(_byte_to_unicode())}
    pieces = loaded.pre_tokenizer.pre_tokenize_str(text)
    return [bytes(unicode_to_byte[c] for c in piece).decode("utf-8", errors="replace") for piece, _ in pieces]


def _byte_to_unicode() -> list[str]:
    """GPT-2's byte-to-unicode table as a list indexed by byte (written out again, not bpestore's)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


@pytest.fixture(scope="module")
def trained() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    return train_bpe(shared_file("fixtures", "corpus.en"), 1000, [ENDOFTEXT])


@pytest.mark.parametrize("pattern", [GPT2_PATTERN, CL100K_PATTERN, O200K_PATTERN], ids=["gpt2", "cl100k", "o200k"])
def test_trained_tokenizer_exported_to_hf_encodes_the_same(trained, tmp_path, hf_tokenizers, pattern):
    vocab, merges = trained
    tokenizer = Tokenizer(vocab, merges, [ENDOFTEXT], pattern=pattern)
    path = tmp_path / "tokenizer.json"
    formats.export(tokenizer, "hf", path)
    loaded = hf_tokenizers.Tokenizer.from_file(str(path))
    for text in gpt2_texts():
        # The pattern means the same to tokenizers' regex engine (Oniguruma) as to `regex`...
        for piece in text.split(ENDOFTEXT):
            assert hf_pretokens(loaded, piece) == regex.findall(pattern, piece)
        # ...and the ids are the same.
        assert loaded.encode(text).ids == tokenizer.encode(text)
        assert loaded.decode(tokenizer.encode(text), skip_special_tokens=False) == text

    again = Tokenizer.from_model(formats.read("hf", path).model)
    assert (again.vocab, again.merges, again.special_ids, again.pattern) == (
        tokenizer.vocab, tokenizer.merges, tokenizer.special_ids, tokenizer.pattern
    )

    @HYPOTHESIS
    @given(text=texts([ENDOFTEXT]))
    def check(text):
        assert loaded.encode(text).ids == tokenizer.encode(text)

    check()


# -- refused input --------------------------------------------------------------------------------


def small_bpe_json(tmp_path: Path, trained) -> Path:
    vocab, merges = trained
    path = tmp_path / "base.json"
    formats.export(Tokenizer(vocab, merges[:100], [ENDOFTEXT]), "hf", path)
    return path


def edited_json(source: Path, target: Path, edit) -> Path:
    document = json.loads(source.read_text(encoding="utf-8"))
    edit(document)
    target.write_text(json.dumps(document), encoding="utf-8")
    return target


def refused_hf_files(tmp_path: Path, trained, tokenizers) -> dict[str, tuple[Path, list[str]]]:
    """name -> (a tokenizer.json bpestore must refuse, words its message must contain)."""
    from tokenizers import models, normalizers, pre_tokenizers

    base = small_bpe_json(tmp_path, trained)
    files = {}

    wordpiece = tokenizers.Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2}, unk_token="[UNK]"))
    wordpiece.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    wordpiece.save(str(tmp_path / "wordpiece.json"))
    files["wordpiece"] = (tmp_path / "wordpiece.json", ["model: a WordPiece model (BERT", "bpestore stores BPE tokenizers only"])

    unigram = tokenizers.Tokenizer(models.Unigram([("<unk>", 0.0), ("a", -1.0), ("b", -2.0)], 0))
    unigram.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    unigram.save(str(tmp_path / "unigram.json"))
    files["unigram"] = (tmp_path / "unigram.json", ["model: a Unigram model (T5, ALBERT, XLM-R): bpestore stores BPE tokenizers only"])

    wordlevel = tokenizers.Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    wordlevel.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    wordlevel.save(str(tmp_path / "wordlevel.json"))
    files["wordlevel"] = (tmp_path / "wordlevel.json", ["model: a WordLevel model", "bpestore stores BPE tokenizers only"])

    tokenizer = tokenizers.Tokenizer.from_file(str(base))
    # (Punctuation, Digits, Split of every behavior and the like in a sequence run stage by stage:
    # tests/test_pre_tokenizers.py)
    # (Metaspace first, then ByteLevel, runs: tests/test_pre_tokenizers.py; after it, it does not)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.ByteLevel(add_prefix_space=False), pre_tokenizers.Metaspace()])
    tokenizer.save(str(tmp_path / "metaspace.json"))
    files["metaspace-in-sequence"] = (tmp_path / "metaspace.json", ["pre_tokenizer.pretokenizers[1]", "Metaspace after another pre-tokenizer"])

    # (NFKC, Lowercase and the others bpestore runs: tests/test_normalizers.py)
    for name, normalizer in [("StripAccents", normalizers.StripAccents()), ("Nmt", normalizers.Nmt())]:
        tokenizer = tokenizers.Tokenizer.from_file(str(base))
        tokenizer.normalizer = normalizer
        tokenizer.save(str(tmp_path / f"normalizer-{name}.json"))
        files[f"normalizer-{name}"] = (tmp_path / f"normalizer-{name}.json", ["normalizer", name])

    # (ByteLevel with add_prefix_space first runs: tests/test_hf_real_files.py, test_pre_tokenizers.py)
    tokenizer = tokenizers.Tokenizer.from_file(str(base))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "whitespace.json"))
    files["whitespace-pre-tokenizer"] = (tmp_path / "whitespace.json", ["pre_tokenizer: Whitespace"])

    def dropout(document):
        document["model"]["dropout"] = 0.1

    files["dropout"] = (edited_json(base, tmp_path / "dropout.json", dropout), ["dropout"])

    def byte_fallback(document):
        document["model"]["byte_fallback"] = True

    files["byte_fallback"] = (edited_json(base, tmp_path / "byte-fallback.json", byte_fallback), ["ByteLevel in a SentencePiece-style BPE"])

    # (added tokens' lstrip, rstrip and single_word are run: tests/test_token_options.py)
    def prefix_space_in_sequence(document):
        document["pre_tokenizer"] = {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Digits", "individual_digits": True},
                {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            ],
        }

    files["prefix-space-in-sequence"] = (
        edited_json(base, tmp_path / "prefix.json", prefix_space_in_sequence), ["pre_tokenizer.pretokenizers[1]", "add_prefix_space"]
    )

    (tmp_path / "not-json.json").write_text('{"model": {"type": "BPE",', encoding="utf-8")
    files["not-json"] = (tmp_path / "not-json.json", ["tokenizer.json"])
    return files


HF_REFUSALS = [
    "wordpiece", "unigram", "wordlevel", "metaspace-in-sequence", "normalizer-StripAccents", "normalizer-Nmt", "whitespace-pre-tokenizer",
    "dropout", "byte_fallback", "prefix-space-in-sequence", "not-json",
]


@pytest.mark.parametrize("case", HF_REFUSALS)
def test_unsupported_tokenizer_json_is_refused(tmp_path, trained, hf_tokenizers, case):
    path, words = refused_hf_files(tmp_path, trained, hf_tokenizers)[case]
    with pytest.raises(FormatError) as raised:
        formats.read("hf", path)
    message = str(raised.value)
    assert str(path) in message or path.name in message
    for word in words:
        assert word in message, (word, message)
    check_cli_refuses(tmp_path, ["import", "hf", path, "--name", "x"], path, words)


def check_cli_refuses(tmp_path: Path, args: list, path: Path, words: list[str]) -> None:
    db = tmp_path / "store.db"
    with Store(db) as store:  # a store that already holds something
        store.save("keep", Tokenizer({b: bytes([b]) for b in range(256)}, []))
    result = invoke(*args, "--db", db)
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    message = result.stderr.strip()
    assert "\n" not in message and "Traceback" not in result.stderr + result.stdout
    assert path.name in message
    for word in words:
        assert word in message
    assert result.stdout == ""
    assert stored_refs(db) == ["keep@1"]


def gpt2_like_files(tmp_path: Path) -> tuple[Path, Path]:
    """A small vocab.json and merges.txt, written by bpestore from a hand-made tokenizer."""
    vocab = {b: bytes([b]) for b in range(256)}
    merges = [(b"h", b"e"), (b" ", b"t"), (b" t", b"he")]
    for left, right in merges:
        vocab[len(vocab)] = left + right
    formats.export(Tokenizer(vocab, merges), "gpt2", tmp_path / "files")
    return tmp_path / "files" / "vocab.json", tmp_path / "files" / "merges.txt"


MERGES_REFUSALS = {
    "three-tokens": ("#version: 0.2\nh e\nĠ t x\n", ["line 3"]),
    "one-token": ("#version: 0.2\nh e\nĠt\n", ["line 3"]),
    "two-spaces": ("h e\nĠ  t\n", ["line 2"]),
    "foreign-character": ("h e\nĠ 中\n", ["line 2", "中"]),
}


@pytest.mark.parametrize("case", sorted(MERGES_REFUSALS))
def test_malformed_merges_txt_is_refused(tmp_path, case):
    vocab_json, merges_txt = gpt2_like_files(tmp_path)
    formats.read("gpt2", vocab_json, merges_txt)  # the files as written are fine
    content, words = MERGES_REFUSALS[case]
    merges_txt.write_text(content, encoding="utf-8")
    with pytest.raises(FormatError) as raised:
        formats.read("gpt2", vocab_json, merges_txt)
    message = str(raised.value)
    assert "merges.txt" in message
    for word in words:
        assert word in message
    check_cli_refuses(tmp_path, ["import", "gpt2", vocab_json, merges_txt, "--name", "x"], merges_txt, words)


VOCAB_REFUSALS = {
    "not-json": ('{"a": 0, "b": ', ["JSON"]),
    "a-list": ('["a", "b"]', ["JSON object"]),
    "id-not-integer": ('{"a": "zero"}', ["'a'"]),
}


@pytest.mark.parametrize("case", sorted(VOCAB_REFUSALS))
def test_malformed_vocab_json_is_refused(tmp_path, case):
    vocab_json, merges_txt = gpt2_like_files(tmp_path)
    content, words = VOCAB_REFUSALS[case]
    vocab_json.write_text(content, encoding="utf-8")
    with pytest.raises(FormatError) as raised:
        formats.read("gpt2", vocab_json, merges_txt)
    message = str(raised.value)
    assert "vocab.json" in message
    for word in words:
        assert word in message
    check_cli_refuses(tmp_path, ["import", "gpt2", vocab_json, merges_txt, "--name", "x"], vocab_json, words)


def test_merge_of_tokens_missing_from_the_vocab_is_refused(tmp_path):
    vocab_json, merges_txt = gpt2_like_files(tmp_path)
    merges_txt.write_text("#version: 0.2\nh e\nĠ t\nĠt he\nx y\n", encoding="utf-8")
    with pytest.raises(FormatError) as raised:
        formats.read("gpt2", vocab_json, merges_txt)
    assert "merges.txt" in str(raised.value)
    check_cli_refuses(tmp_path, ["import", "gpt2", vocab_json, merges_txt, "--name", "x"], merges_txt, [])


def tiktoken_lines(extra: bytes) -> bytes:
    lines = [base64.b64encode(bytes([b])) + b" %d" % b for b in range(256)]
    return b"\n".join(lines) + b"\n" + extra


TIKTOKEN_REFUSALS = {
    "bad-base64": (b"!!notbase64!! 256\n", ["line 257"]),
    "missing-rank": (base64.b64encode(b"ab") + b"\n", ["line 257"]),
    "rank-not-a-number": (base64.b64encode(b"ab") + b" two\n", ["line 257"]),
    "three-fields": (base64.b64encode(b"ab") + b" 256 257\n", ["line 257"]),
    "duplicate-rank": (base64.b64encode(b"ab") + b" 255\n", ["line 257", "255"]),
    "duplicate-token": (base64.b64encode(b"a") + b" 256\n", ["line 257"]),
}


@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("case", sorted(TIKTOKEN_REFUSALS))
def test_malformed_tiktoken_file_is_refused(tmp_path, case, gzipped):
    extra, words = TIKTOKEN_REFUSALS[case]
    data = tiktoken_lines(extra)
    path = tmp_path / ("bad.tiktoken.gz" if gzipped else "bad.tiktoken")
    path.write_bytes(gzip.compress(data) if gzipped else data)
    with pytest.raises(FormatError) as raised:
        formats.read("tiktoken", path, "r50k_base", {})
    message = str(raised.value)
    assert path.name in message
    for word in words:
        assert word in message
    check_cli_refuses(tmp_path, ["import", "tiktoken", path, "--name", "x", "--pattern", "r50k_base"], path, words)


def test_tiktoken_file_that_is_not_gzip_or_text(tmp_path):
    path = tmp_path / "broken.tiktoken.gz"
    path.write_bytes(gzip.compress(tiktoken_lines(b""))[:100])  # cut short
    with pytest.raises(FormatError) as raised:
        formats.read("tiktoken", path, "r50k_base")
    assert path.name in str(raised.value)
    check_cli_refuses(tmp_path, ["import", "tiktoken", path, "--name", "x", "--pattern", "r50k_base"], path, [])


def test_format_error_is_a_value_error():
    assert issubclass(FormatError, ValueError)


# -- merges from ranks: the engine against the obvious reconstruction ------------------------------

_rank_alphabet = st.sampled_from([b"a", b"b", b"c", b" ", b"\xe4", b"\xb8"])


@settings(max_examples=examples(300), deadline=None)
@given(
    extra=st.lists(st.lists(_rank_alphabet, min_size=2, max_size=7).map(b"".join), max_size=40, unique=True),
    seed=st.integers(0, 2**32 - 1),
)
def test_merges_from_ranks_equal_the_reference_reconstruction(extra, seed):
    """tiktoken vocabularies become pair merges in the engine (Import of a .tiktoken file, the
    check of an export): exactly the obvious reconstruction's merges and unreachable tokens, in
    order, whatever the ranks (shuffled, with gaps)."""
    rng = random.Random(seed)
    tokens = [bytes([b]) for b in range(256)] + [token for token in extra if len(token) > 1]
    ranks = rng.sample(range(3 * len(tokens)), len(tokens))
    table = dict(zip(tokens, ranks))
    told: list[int] = []
    merges, unreachable = pair_merges_from_ranks(table, told.append)
    assert (merges, unreachable) == reference_pair_merges_from_ranks(table)
    assert sum(told) == len(table)


def test_exporting_a_token_rule_model_notes_what_differs_only_where_it_does(tmp_path):
    """A token-rule model whose "abcd" no pair merge makes ("abc" and "bcd" come first, so that
    tiktoken's rule joins "ab" + "cd" by rank while no listed pair does): the GPT-2 files' tools
    merge by pair rank and may encode it differently, which the export says; HF's file is written
    with ``ignore_merges`` and every split, which encodes as bpestore, and needs no note."""
    tokenizers = pytest.importorskip("tokenizers", reason="Hugging Face tokenizers reads the export back")
    vocab = {i: bytes([i]) for i in range(256)}
    for token in [b"ab", b"cd", b"abc", b"bcd", b"abcd"]:
        vocab[len(vocab)] = token
    merges = [(b"a", b"b"), (b"c", b"d"), (b"ab", b"c"), (b"b", b"cd"), (b"ab", b"cd")]
    model = formats.BPEModel(vocab, merges, [], merge_rule="token")
    ours = Tokenizer.from_model(model)
    gpt2_notes = formats.export(model, "gpt2", tmp_path / "gpt2")
    assert any("merges by token rank" in note for note in gpt2_notes), gpt2_notes
    hf_notes = formats.export(model, "hf", tmp_path / "tokenizer.json")
    assert not any("merges by token rank" in note for note in hf_notes), hf_notes
    reference = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for text in ["abcd", "xabcdx abc bcd", "ab cd abcdabcd"]:
        assert ours.encode(text) == reference.encode(text, add_special_tokens=False).ids
