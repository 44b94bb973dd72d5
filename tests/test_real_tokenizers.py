"""Real tokenizer.json files, as their models publish them (``../shared/tokenizers``): those bpestore
can hold import and encode exactly as Hugging Face ``tokenizers`` (the oracle, built from the same
file), on English running text and on text in many scripts; the others are refused in one line
that names the model or component, never "Internal error".
"""

from __future__ import annotations

import json
import unicodedata

import pytest

from conftest import shared_dir
from test_cli import invoke

tokenizers = pytest.importorskip("tokenizers")

# Text in many scripts and of odd shapes: real sentences (each a line), whitespace of every kind,
# digits, emoji sequences, and text that changes under NFC/NFKC.
MANY_SCRIPTS = [
    "The quick brown fox jumps over the lazy dog; it's 3.14159 o'clock.",
    "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich.",
    "Le cœur déçu mais l'âme plutôt naïve, Louÿs rêva de crapaüter en canoë.",
    "Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Pchnąć w tę łódź jeża lub ośm skrzyń fig.",
    "Árvíztűrő tükörfúrógép.",
    "Pijamalı hasta yağız şoföre çabucak güvendi.",
    "Tiếng Việt có dấu: Chào mừng bạn đến với thế giới.",
    "Τάχιστη αλώπηξ βαφής ψημένη γη, δρασκελίζει υπέρ νωθρού κυνός.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Чуєш їх, доцю, га? Кумедна ж ти, прощайся без ґольфів!",
    "Բարեւ աշխարհ, ինչպե՞ս ես։",
    "გამარჯობა, როგორ ხარ?",
    "שלום עולם, מה שלומך היום?",
    "مرحبا بالعالم، كيف حالك اليوم؟",
    "سلام دنیا، حال شما چطور است؟",
    "नमस्ते दुनिया, आप कैसे हैं?",
    "হ্যালো বিশ্ব, আপনি কেমন আছেন?",
    "வணக்கம் உலகம், நீங்கள் எப்படி இருக்கிறீர்கள்?",
    "హలో ప్రపంచం, మీరు ఎలా ఉన్నారు?",
    "ಹಲೋ ಪ್ರಪಂಚ, ನೀವು ಹೇಗಿದ್ದೀರಿ?",
    "ഹലോ ലോകം, സുഖമാണോ?",
    "ਸਤਿ ਸ੍ਰੀ ਅਕਾਲ ਦੁਨੀਆ",
    "સ્વાગત છે, તમે કેમ છો?",
    "สวัสดีชาวโลก คุณสบายดีไหม",
    "ສະບາຍດີໂລກ",
    "សួស្តី​ពិភពលោក",
    "မင်္ဂလာပါ ကမ္ဘာ",
    "你好，世界！今天天气很好。",
    "こんにちは世界、お元気ですか？カタカナとひらがな。",
    "안녕하세요 세계, 잘 지내세요?",
    "ሰላም ዓለም፣ እንዴት ነህ?",
    "ᐊᐃᖓᐃ ᓄᓇ",
    "Ꮳ ᎣᏏᏲ ᎡᎶᎯ",
    "ܫܠܡܐ ܥܠܡܐ",
    "ཀུ་ཟུ་ཟང་པོ་ལགས།",
    "ආයුබෝවන් ලෝකය",
    "ᠰᠠᠢᠨ ᠪᠠᠢᠨ᠎ᠠ ᠤᠤ",
    "ⴰⵣⵓⵍ ⴰⵎⴰⴹⵍ",
    "ନମସ୍କାର ବିଶ୍ୱ",
    "ދިވެހި ބަސް",
    "Сәлем әлем; Salam dünya; Habari dunia; Sawubona mhlaba.",
    "emoji: 👩‍👩‍👧‍👦 🏳️‍🌈 👍🏽 🇯🇵 ❤️",
    "whitespace:\u3000ideographic,\u00a0no-break,\ttab,\r\nCRLF,\u2028line sep, trailing   ",
    "combining: e\u0301 a\u0308 n\u0303 ﬁ ﬀ ① ㎏ Å Ω ½ x\u00b2",
    "digits: 1234567890 ١٢٣٤٥ १२३४५ ４５６ 12,345.67 0x1F",
    "code: def f(x):\n    return x**2  # square\n\n\n",
]
assert len({unicodedata.name(ch, "").split(" ")[0] for line in MANY_SCRIPTS for ch in line if ch.isalpha()}) >= 30


def _lines(limit_per_corpus: int = 400) -> list[str]:
    lines = list(MANY_SCRIPTS)
    corpora = shared_dir() / "corpora"
    for name in ("wiki_en_57M.txt", "reuters_17M.txt", "sotu_11M.txt"):
        path = corpora / name
        if path.is_file():
            with open(path, encoding="utf-8") as file:
                lines += [line for _, line in zip(range(limit_per_corpus), file)]
    return lines


IMPORTED = ["llama3.2", "olmo2-dolma2", "gpt-neox-20b", "roberta-base", "falcon", "smollm"]
REFUSED = {
    "t5-small": "a Unigram model (T5",
    "bert-base-uncased": "a WordPiece model (BERT",
    "llama2": "merge 18917 is '   '",
}


def _file(family: str):
    path = shared_dir() / "tokenizers" / family / "tokenizer.json"
    if not path.is_file():
        pytest.skip(f"{path} not found (set BPESTORE_SHARED to the directory holding tokenizers/)")
    return path


@pytest.mark.parametrize("family", IMPORTED)
def test_an_imported_tokenizer_encodes_exactly_as_hugging_face(family, tmp_path):
    path = _file(family)
    db = tmp_path / "store.db"
    result = invoke("import", "hf", path, "--name", "t", "--db", db)
    assert result.exit_code == 0, result.stderr
    from bpestore import Tokenizer

    ours = Tokenizer.from_db(db, "t")
    oracle = tokenizers.Tokenizer.from_file(str(path))
    oracle.no_truncation()  # (bpestore keeps neither, and says so at import)
    oracle.no_padding()
    differ = [line for line in _lines() if ours.encode(line) != oracle.encode(line, add_special_tokens=False).ids]
    assert not differ, f"{len(differ)} lines differ, first {differ[0][:80]!r}"
    # and the text comes back as Hugging Face's decoder gives it (normalized, for a tokenizer
    # that normalizes: NeoX composes "e\u0301" to "\u00e9")
    for line in MANY_SCRIPTS:
        ids = ours.encode(line)
        assert ours.decode(ids) == oracle.decode(ids, skip_special_tokens=False)
        if ours.model.normalizer is None:
            assert ours.decode(ids) == line


# DeepSeek-V3's pre-tokenizer as its tokenizer.json writes it (\r and \n as the characters)
DEEPSEEK_V3_PRE_TOKENIZER = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
    {"type": "Split", "pattern": {"Regex": "[一-龥\u3040-ゟ゠-ヿ]+"}, "behavior": "Isolated", "invert": False},
    {"type": "Split", "pattern": {"Regex": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
     "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
]}


def test_deepseek_v3s_pre_tokenizer_on_a_real_vocabulary_encodes_as_hugging_face(tmp_path):
    # (no DeepSeek file among the shared ones: its pre-tokenizer, which bpestore runs on a scanner
    # of its own, on Llama-3.2's vocabulary)
    document = json.loads(_file("llama3.2").read_text(encoding="utf-8"))
    document["pre_tokenizer"] = DEEPSEEK_V3_PRE_TOKENIZER
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    from bpestore import Tokenizer, formats

    ours = Tokenizer.from_model(formats.read("hf", path).model)
    oracle = tokenizers.Tokenizer.from_file(str(path))
    lines = [*_lines(), "ニカ・ニサヌ・カイル (1987) 一、二、三 ゛゜ か\u3099 $5 (the 'll  x\n\n\t y"]
    differ = [line for line in lines if ours.encode(line) != oracle.encode(line, add_special_tokens=False).ids]
    assert not differ, f"{len(differ)} lines differ, first {differ[0][:80]!r}"
    # and the pieces themselves (different pieces may still merge to the same ids); one text, as
    # each call of pieces() builds the pipeline
    from bpestore.pre_tokenizer import PreTokenizer

    text = "\n".join([*MANY_SCRIPTS, lines[-1], *lines[len(MANY_SCRIPTS):][::10]])
    ours_pieces = PreTokenizer.from_hf(DEEPSEEK_V3_PRE_TOKENIZER).pieces(text)
    assert ours_pieces == [piece for piece, _ in oracle.pre_tokenizer.pre_tokenize_str(text)]


def test_a_post_processor_is_said_not_applied_not_dropped_silently(tmp_path):
    path = _file("llama3.2")
    result = invoke("import", "hf", path, "--name", "t", "--db", tmp_path / "store.db")
    assert result.exit_code == 0
    assert "post_processor" in result.stderr and "add_special_tokens=False" in result.stderr


@pytest.mark.parametrize("family", sorted(REFUSED))
def test_what_bpestore_cannot_hold_is_refused_by_name(family, tmp_path):
    path = _file(family)
    result = invoke("import", "hf", path, "--name", "t", "--db", tmp_path / "store.db")
    assert result.exit_code == 1, (result.exit_code, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Internal error" not in lines[0], result.stderr
    assert REFUSED[family] in lines[0], lines[0]
    assert not (tmp_path / "store.db").exists() or "t@" not in invoke("list", "--db", tmp_path / "store.db").stdout


def test_ignore_merges_with_merges_out_of_id_order_is_refused(tmp_path):
    """The whole-token rule is HF's BPE only when merges come in the order of the tokens they make."""
    from tokenizers import Tokenizer as HF, models, pre_tokenizers

    vocab = {chr(c) if chr(c).isprintable() and c < 127 and c > 32 else f"<{c}>": c for c in range(256)}
    byte_level = {token for token in pre_tokenizers.ByteLevel.alphabet()}
    vocab = {token: index for index, token in enumerate(sorted(byte_level))}
    vocab["ab"], vocab["abc"], vocab["bc"] = 256, 257, 258
    merges = [("b", "c"), ("a", "b"), ("ab", "c")]  # "bc" (258) first: out of id order
    hf = HF(models.BPE(vocab, merges, ignore_merges=True))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    assert json.loads(path.read_text())["model"]["ignore_merges"] is True
    result = invoke("import", "hf", path, "--name", "t", "--db", tmp_path / "store.db")
    assert result.exit_code == 1 and "ignore_merges" in result.stderr and "merge 1" in result.stderr, result.stderr


@pytest.mark.parametrize("merges, first_out_of_order", [
    ([(b"a", b"b"), (b"b", b"b"), (b"ab", b"b")], None),
    ([(b"a", b"b"), (b"a", b"b"), (b"b", b"b")], None),  # (a token made twice, as Llama-3's file lists some)
    ([(b"b", b"b"), (b"a", b"b")], 1),  # "ab" (256) after "bb" (257)
    ([(b"a", b"b"), (b"a", b"a")], 1),  # "aa" is no token
    ([], None),
])
def test_the_merges_id_order_is_checked_merge_by_merge(merges, first_out_of_order):
    from bpestore.engine import first_merge_out_of_id_order

    vocab = {byte: bytes([byte]) for byte in range(256)} | {256: b"ab", 257: b"bb", 258: b"abb"}
    assert first_merge_out_of_id_order(vocab, merges) == first_out_of_order


def test_eval_and_diff_compare_a_trained_tokenizer_with_imported_ones(tmp_path):
    """A user's tokenizer beside the ones real models ship, on the same text: eval's token counts
    are Hugging Face's ids for the file, diff names what the vocabularies share."""
    families = [family for family in ("gpt-neox-20b", "falcon", "llama3.2") if (shared_dir() / "tokenizers" / family).is_dir()]
    if not families:
        pytest.skip("no shared tokenizers")
    corpus = shared_dir() / "fixtures" / "corpus.en"
    db = tmp_path / "store.db"
    assert invoke("train", corpus, "--name", "mine", "--vocab-size", "600", "--db", db, "-q").exit_code == 0
    for family in families:
        assert invoke("import", "hf", _file(family), "--name", family, "--db", db).exit_code == 0
    result = invoke("eval", "mine", *families, "--corpus", corpus, "--json", "--db", db)
    assert result.exit_code == 0, result.stderr
    rows = {row["tokenizer"].split("@")[0]: row for row in json.loads(result.stdout)["rows"]}
    text = corpus.read_text(encoding="utf-8")
    for family in families:
        oracle = tokenizers.Tokenizer.from_file(str(_file(family)))
        oracle.no_truncation()
        oracle.no_padding()
        assert rows[family]["tokens"] == len(oracle.encode(text, add_special_tokens=False).ids), family
    assert rows["mine"]["tokens"] > max(rows[family]["tokens"] for family in families)  # (600 tokens against 50k+)
    diff = invoke("diff", "mine", families[0], "--db", db)
    assert diff.exit_code == 0 and "shared tokens" in diff.stdout, diff.stderr
