"""Real ``tokenizer.json`` files of published models (``$BPESTORE_SHARED/tokenizers``), against
Hugging Face ``tokenizers`` as the oracle.

- Those bpestore can run exactly import, and encode every line tried as Hugging Face's
  ``Tokenizer.from_file(path).encode(line, add_special_tokens=False)`` does: lines of the shared
  corpora and of ``tests/data/multilingual_scripts.txt`` (sentences in more than 30 scripts, text
  that NFC changes, combining marks, CRLF, U+3000, U+00A0, emoji ZWJ sequences).
- The others are refused in one line that names what in the file bpestore cannot run (a Unigram
  model, a SentencePiece-style BPE, a component at its JSON path), with exit status 1.
- What the file holds but bpestore does not keep (a post-processor that adds tokens, truncation,
  padding) is said in one warning line, never dropped silently.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import regex
from hypothesis import strategies as st
from hypothesis import HealthCheck, given, settings

from bpestore import Tokenizer, formats
from bpestore.errors import FormatError
from conftest import shared_dir
from strategies import texts
from tiers import examples

tokenizers = pytest.importorskip("tokenizers", reason="Hugging Face tokenizers is the oracle for tokenizer.json files")

MULTILINGUAL = Path(__file__).parent / "data" / "multilingual_scripts.txt"
CORPORA = ["reuters_17M.txt", "sotu_11M.txt", "tinystories_800K.txt", "wiki_en_57M.txt"]
LINES_PER_CORPUS = 1500


def real_file(name: str) -> Path:
    path = shared_dir() / "tokenizers" / name / "tokenizer.json"
    if not path.is_file():
        pytest.skip(f"{path} not found (set BPESTORE_SHARED to the directory holding tokenizers/)")
    return path


def lines_to_try() -> list[str]:
    """Lines (with their line ends, as they are in the files) of the corpora found and of the
    multilingual text."""
    lines = []
    for name in CORPORA:
        path = shared_dir() / "corpora" / name
        if path.is_file():
            with path.open(encoding="utf-8", newline="") as corpus:
                lines += itertools.islice(corpus, LINES_PER_CORPUS)
    with MULTILINGUAL.open(encoding="utf-8", newline="") as text:
        lines += list(text)
    return lines


def test_the_multilingual_text_has_what_it_promises():
    text = MULTILINGUAL.read_text(encoding="utf-8")
    scripts = [
        "Latin", "Greek", "Cyrillic", "Armenian", "Georgian", "Hebrew", "Arabic", "Syriac", "Thaana", "Devanagari",
        "Bengali", "Gurmukhi", "Gujarati", "Oriya", "Tamil", "Telugu", "Kannada", "Malayalam", "Sinhala", "Thai", "Lao",
        "Tibetan", "Myanmar", "Khmer", "Ethiopic", "Cherokee", "Canadian_Aboriginal", "Mongolian", "Han", "Hiragana",
        "Katakana", "Hangul", "Yi", "Javanese", "Runic", "Gothic", "Ogham", "Tifinagh", "Nko", "Vai",
    ]
    found = [script for script in scripts if regex.search(rf"\p{{Script={script}}}", text)]
    assert len(found) >= 30, found
    import unicodedata

    assert unicodedata.normalize("NFC", text) != text
    for needle in ["\r\n", "\u3000", "\u00a0", "\u200d", "\u0301"]:
        assert needle in MULTILINGUAL.read_bytes().decode("utf-8"), repr(needle)


# -- imported, and exact ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["olmo2-dolma2", "llama3.2", "gpt-neox-20b", "roberta-base", "falcon", "smollm"])
def test_real_file_encodes_every_line_as_hugging_face(name):
    """OLMo-2: ``Split`` with ``Removed`` and ``invert`` (each regex match a piece, as
    ``Isolated`` makes them, the regex covering the text). Llama-3.2: ``ignore_merges`` (run by
    tiktoken's rule, which looks a whole pre-token up first). GPT-NeoX: the ``NFC`` normalizer,
    added tokens (runs of spaces) found in the normalized text that repeat vocab tokens under
    other ids, and a vocab without the bytes UTF-8 never holds. RoBERTa: ``<mask>`` with
    ``lstrip``. Falcon: a ``Sequence`` of ``Punctuation``, ``ByteLevel``, ``Digits`` and ``Split``,
    run stage by stage. Falcon and SmolLM: vocabs without some control characters, which the text
    loses. (Truncation and padding, which bpestore does not keep, are turned off in the oracle.)"""
    path = real_file(name)
    ours = Tokenizer.from_model(formats.read("hf", path).model)
    reference = tokenizers.Tokenizer.from_file(str(path))
    reference.no_truncation()
    reference.no_padding()
    lines = lines_to_try()
    expected = [encoding.ids for encoding in reference.encode_batch(lines, add_special_tokens=False)]
    got = ours.encode_batch(lines)
    different = [line for line, mine, theirs in zip(lines, got, expected) if mine != theirs]
    assert different == [], f"{len(different)} of {len(lines)} lines differ, first {different[0]!r}"
    for line in lines[-60:]:  # decoding gives the text back as Hugging Face's decoder does
        ids = ours.encode(line)
        assert ours.decode(ids) == reference.decode(ids, skip_special_tokens=False)


@pytest.fixture(scope="module", params=["olmo2-dolma2", "llama3.2", "gpt-neox-20b", "roberta-base", "falcon", "smollm"])
def imported_and_reference(request):
    path = real_file(request.param)
    reference = tokenizers.Tokenizer.from_file(str(path))
    reference.no_truncation()
    reference.no_padding()
    return Tokenizer.from_model(formats.read("hf", path).model), reference


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=texts(special_pieces=False, assigned_only=True))
def test_real_file_encodes_any_text_as_hugging_face(imported_and_reference, text):
    ours, reference = imported_and_reference
    assert ours.encode(text) == reference.encode(text, add_special_tokens=False).ids


def test_llama3_post_processor_is_kept_and_applied_on_request():
    path = real_file("llama3.2")
    imported = formats.read("hf", path)
    notes = [note for note in imported.notes if "post_processor" in note]
    assert len(notes) == 1 and "kept" in notes[0] and "<|begin_of_text|>" in notes[0], notes
    ours, reference = Tokenizer.from_model(imported.model), tokenizers.Tokenizer.from_file(str(path))
    lines = lines_to_try()[:200] + [""]
    assert [ours.encode(line, add_special_tokens=True) for line in lines] == [encoding.ids for encoding in reference.encode_batch(lines)]
    assert ours.encode_batch(lines, add_special_tokens=True) == [encoding.ids for encoding in reference.encode_batch(lines)]
    assert ours.encode("hello") == reference.encode("hello", add_special_tokens=False).ids  # (not asked: not added)


def test_truncation_padding_and_post_processor_are_warned_of(tmp_path):
    source = json.loads(real_file("olmo2-dolma2").read_text(encoding="utf-8"))
    source["truncation"] = {"direction": "Right", "max_length": 192, "strategy": "LongestFirst", "stride": 0}
    source["padding"] = {"strategy": "BatchLongest", "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0, "pad_type_id": 0, "pad_token": "<|pad|>"}
    source["post_processor"] = {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0], "trim_offsets": True}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(source), encoding="utf-8")
    imported = formats.read("hf", path)
    notes = imported.notes
    assert any(note.startswith("warning: truncation ") and "kept as a setting" in note for note in notes), notes
    assert any(note.startswith("warning: padding ") for note in notes), notes
    assert any("post_processor RobertaProcessing" in note and "<s>, </s>" in note for note in notes), notes
    # kept, never dropped silently: written back on export, which HF reads to the same settings
    assert imported.model.config["truncation"] == source["truncation"] and imported.model.config["padding"] == source["padding"]
    out = tmp_path / "out.json"
    Tokenizer.from_model(imported.model).export("hf", out)
    written = tokenizers.Tokenizer.from_file(str(out))
    original = tokenizers.Tokenizer.from_file(str(path))
    assert written.truncation == original.truncation and written.padding == original.padding
    assert written.truncation["max_length"] == 192


# -- refused by name --------------------------------------------------------------------------------

REFUSED = {
    "t5-small": "model: a Unigram model (T5, ALBERT, XLM-R): bpestore stores BPE tokenizers only",
    "bert-base-uncased": "model: a WordPiece model (BERT, DistilBERT): bpestore stores BPE tokenizers only",
    # (the shared file lists three merges of spaces that cannot be read as "a b": HF refuses it too)
    "llama2": "merge 18917 is '   ', expected 'a b' or ['a', 'b']",
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_real_file_is_refused_by_name(tmp_path, name):
    from click.testing import CliRunner

    from bpestore.cli import main

    path = real_file(name)
    with pytest.raises(FormatError) as raised:
        formats.read("hf", path)
    assert str(raised.value) == f"{path}: {REFUSED[name]}" or str(raised.value).startswith(f"{path}: {REFUSED[name]}")
    assert "None" not in str(raised.value)
    try:
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        runner = CliRunner()
    result = runner.invoke(main, ["import", "hf", str(path), "--name", "x", "--db", str(tmp_path / "s.db")], env={"BPESTORE_DEBUG": None})
    assert result.exit_code == 1, (result.exit_code, result.stderr)
    message = result.stderr.strip()
    assert "\n" not in message and "Traceback" not in message
    assert REFUSED[name] in message


@pytest.mark.parametrize(("behavior", "invert"), [("Isolated", False), ("Removed", True)])
def test_a_split_regex_that_leaves_text_uncovered_runs_as_hugging_face_runs_it(tmp_path, behavior, invert):
    """What Hugging Face does with the text between matches (split.rs: ``Invert`` flips which
    stretches are matches; ``Removed`` then drops the flipped ones; ``Isolated`` keeps each a
    piece) is what bpestore does: such a Split runs stage by stage, not as one regex."""
    source = json.loads(real_file("olmo2-dolma2").read_text(encoding="utf-8"))
    source["pre_tokenizer"]["pretokenizers"][0].update(pattern={"Regex": r"\w+"}, behavior=behavior, invert=invert)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(source), encoding="utf-8")
    reference = tokenizers.Tokenizer.from_file(str(path))
    pieces = [piece for piece, _ in reference.pre_tokenizer.pre_tokenize_str("ab, cd")]
    assert pieces == (["ab", ",Ġ", "cd"] if behavior == "Isolated" else ["ab", "cd"])  # the oracle's behaviour
    imported = formats.read("hf", path)
    assert imported.model.pre_tokenizer is not None
    ours = Tokenizer.from_model(imported.model)
    for line in lines_to_try()[-40:] + ["ab, cd", "x² ò"]:
        assert ours.encode(line) == reference.encode(line, add_special_tokens=False).ids, line


# -- Digits then ByteLevel, as one regex ------------------------------------------------------------


@pytest.mark.parametrize("individual", [True, False])
@settings(max_examples=examples(300), deadline=None)
@given(text=texts(special_pieces=False, assigned_only=True))
def test_digits_then_byte_level_is_one_regex(individual, text):
    """HF's ``Sequence([Digits, ByteLevel])`` (SmolLM, StarCoder) makes the pieces that bpestore's
    engine makes with the one regex the import gives it."""
    from tokenizers import pre_tokenizers

    from bpestore._engine import Pretokenizer
    from bpestore.formats.gpt2 import unicode_to_byte
    from bpestore.formats.hf import DIGIT_RUNS_THEN_GPT2_PATTERN, DIGITS_THEN_GPT2_PATTERN

    reference = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=individual), pre_tokenizers.ByteLevel(add_prefix_space=False)])
    alphabet = unicode_to_byte()
    expected = [bytes(alphabet[c] for c in piece).decode("utf-8") for piece, _ in reference.pre_tokenize_str(text)]
    pattern = DIGITS_THEN_GPT2_PATTERN if individual else DIGIT_RUNS_THEN_GPT2_PATTERN
    assert Pretokenizer(pattern).pretokenize(text) == expected


def test_digits_then_byte_level_file_encodes_as_hugging_face(tmp_path):
    """SmolLM's file, its vocab completed with the 21 single bytes it lacks (which bpestore refuses
    to guess about), encodes every line as Hugging Face does."""
    source = json.loads(real_file("smollm").read_text(encoding="utf-8"))
    vocab = source["model"]["vocab"]
    from bpestore.formats.gpt2 import unicode_to_byte

    next_id = max([*vocab.values(), *(token["id"] for token in source["added_tokens"])]) + 1
    for character in unicode_to_byte():
        if character not in vocab:
            vocab[character], next_id = next_id, next_id + 1
    source["truncation"] = source["padding"] = None
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(source), encoding="utf-8")
    ours = Tokenizer.from_model(formats.read("hf", path).model)
    reference = tokenizers.Tokenizer.from_file(str(path))
    lines = lines_to_try()
    expected = [encoding.ids for encoding in reference.encode_batch(lines, add_special_tokens=False)]
    different = [line for line, mine, theirs in zip(lines, ours.encode_batch(lines), expected) if mine != theirs]
    assert different == [], f"{len(different)} of {len(lines)} lines differ, first {different[0]!r}"


def test_bytes_a_vocab_lacks_are_left_out_of_the_text_as_in_hugging_face():
    """SmolLM's and Falcon's vocabs lack some control characters: Hugging Face's BPE leaves such
    a character out of the piece it merges (the bytes either side become neighbours)."""
    for name, lacks in [("smollm", 21), ("falcon", 28)]:
        path = real_file(name)
        imported = formats.read("hf", path)
        assert len(imported.model.dropped_bytes) == lacks
        assert any(f"the vocab lacks {lacks} single bytes" in note for note in imported.notes)
        ours, reference = Tokenizer.from_model(imported.model), tokenizers.Tokenizer.from_file(str(path))
        reference.no_truncation()
        reference.no_padding()
        for text in ["a\x04b", "\x04", "ab\x13\x14cd efg", "x\x0b\x0by 12345", "Hello\x04 world\x1d!"]:
            assert ours.encode(text) == reference.encode(text, add_special_tokens=False).ids, (name, text)


# -- SentencePiece-style BPE (Llama-2) --------------------------------------------------------------


@pytest.fixture(scope="module")
def llama2(tmp_path_factory):
    """The shared Llama-2 file without its three merges of spaces that neither library can read
    ("   " is no "a b"; no text holds a space once the normalizer has made it "▁")."""
    source = json.loads(real_file("llama2").read_text(encoding="utf-8"))
    source["model"]["merges"] = [merge for merge in source["model"]["merges"] if merge.count(" ") == 1]
    path = tmp_path_factory.mktemp("llama2") / "tokenizer.json"
    path.write_text(json.dumps(source, ensure_ascii=False), encoding="utf-8")
    return Tokenizer.from_model(formats.read("hf", path).model), tokenizers.Tokenizer.from_file(str(path))


def test_llama2_encodes_and_decodes_every_line_as_hugging_face(llama2):
    ours, reference = llama2
    assert ours.model.byte_fallback
    lines = lines_to_try()
    expected = [encoding.ids for encoding in reference.encode_batch(lines, add_special_tokens=False)]
    different = [line for line, mine, theirs in zip(lines, ours.encode_batch(lines), expected) if mine != theirs]
    assert different == [], f"{len(different)} of {len(lines)} lines differ, first {different[0]!r}"
    assert [ours.encode(line, add_special_tokens=True) for line in lines[:200]] == [e.ids for e in reference.encode_batch(lines[:200])]
    for line in [*lines[-60:], "<s>Hello</s> world <s> x", "  two  spaces "]:
        ids = ours.encode(line)
        assert ours.decode(ids) == reference.decode(ids, skip_special_tokens=False), line


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=texts(special_pieces=False, assigned_only=True))
def test_llama2_encodes_any_text_as_hugging_face(llama2, text):
    """Characters its vocab lacks fall back to their bytes (<0xNN>); the rest merge from characters."""
    ours, reference = llama2
    assert ours.encode(text) == reference.encode(text, add_special_tokens=False).ids


# -- Metaspace (Mistral) and ByteLevel with a prefix space --------------------------------------------

# Mistral's files (as transformers writes them since it left SentencePiece's "legacy" behaviour):
# Llama-2's model and decoder, no normalizer, and a Metaspace pre-tokenizer that puts "▁" before
# the first stretch only and keeps each stretch one piece. The other settings are tried too.
METASPACES = [
    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": True},
    {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True},
]
# (the last two also decode through a Metaspace decoder, after ByteFallback and alone)
METASPACE_DECODERS = [
    None,
    None,
    {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never"}]},
    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"},
]


@pytest.fixture(scope="module", params=range(len(METASPACES)), ids=["mistral", "always-split", "never-split", "legacy-keys"])
def metaspace(request, tmp_path_factory):
    source = json.loads(real_file("llama2").read_text(encoding="utf-8"))
    source["model"]["merges"] = [merge for merge in source["model"]["merges"] if merge.count(" ") == 1]
    source["normalizer"] = None
    source["pre_tokenizer"] = METASPACES[request.param]
    if METASPACE_DECODERS[request.param] is not None:
        source["decoder"] = METASPACE_DECODERS[request.param]
    path = tmp_path_factory.mktemp("metaspace") / "tokenizer.json"
    path.write_text(json.dumps(source, ensure_ascii=False), encoding="utf-8")
    return Tokenizer.from_model(formats.read("hf", path).model), tokenizers.Tokenizer.from_file(str(path))


def test_metaspace_encodes_every_line_as_hugging_face(metaspace):
    ours, reference = metaspace
    lines = [*lines_to_try()[:3000], "<s>Hello</s> world <s> x", "  two  spaces ", " lead", "<s> after", "</s>"]
    expected = [encoding.ids for encoding in reference.encode_batch(lines, add_special_tokens=False)]
    different = [line for line, mine, theirs in zip(lines, ours.encode_batch(lines), expected) if mine != theirs]
    assert different == [], f"{len(different)} of {len(lines)} lines differ, first {different[0]!r}"
    assert [ours.encode(line, add_special_tokens=True) for line in lines[:100]] == [e.ids for e in reference.encode_batch(lines[:100])]
    for line in lines[-60:]:
        ids = ours.encode(line)
        assert ours.decode(ids) == reference.decode(ids, skip_special_tokens=False), line


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=texts(assigned_only=True))
def test_metaspace_encodes_any_text_as_hugging_face(metaspace, text):
    ours, reference = metaspace
    assert ours.encode(text) == reference.encode(text, add_special_tokens=False).ids


def test_a_stored_metaspace_tokenizer_encodes_as_the_file(metaspace, tmp_path):
    from bpestore import Store

    ours, reference = metaspace
    with Store(tmp_path / "store.db") as store:
        store.save("mistralish", ours.model)
    again = Tokenizer.from_db(tmp_path / "store.db", "mistralish")
    text = "<s>[INST] Hello  world [/INST] Sure:\n  indented </s>"
    assert again.encode(text) == ours.encode(text) == reference.encode(text, add_special_tokens=False).ids


@pytest.fixture(scope="module")
def roberta_with_prefix(tmp_path_factory):
    """RoBERTa's file with ByteLevel's add_prefix_space on (as BART-style and some GPT-2 ports
    ship it): a space goes before each stretch of text between added tokens."""
    source = json.loads(real_file("roberta-base").read_text(encoding="utf-8"))
    source["pre_tokenizer"]["add_prefix_space"] = True
    path = tmp_path_factory.mktemp("prefix") / "tokenizer.json"
    path.write_text(json.dumps(source, ensure_ascii=False), encoding="utf-8")
    return Tokenizer.from_model(formats.read("hf", path).model), tokenizers.Tokenizer.from_file(str(path))


def test_byte_level_with_a_prefix_space_encodes_as_hugging_face(roberta_with_prefix):
    ours, reference = roberta_with_prefix
    lines = [*lines_to_try()[:3000], "<s>Hello</s> world", " already spaced", "x<mask> y", "<mask>"]
    expected = [encoding.ids for encoding in reference.encode_batch(lines, add_special_tokens=False)]
    different = [line for line, mine, theirs in zip(lines, ours.encode_batch(lines), expected) if mine != theirs]
    assert different == [], f"{len(different)} of {len(lines)} lines differ, first {different[0]!r}"
    for line in lines[-40:]:
        ids = ours.encode(line)
        assert ours.decode(ids) == reference.decode(ids, skip_special_tokens=False), line


def test_offsets_where_the_text_is_rewritten_are_hugging_faces(metaspace, roberta_with_prefix):
    """A prefix written into the text (▁ or a space) spans the character after it, as in
    ``tokenizers`` (more in test_hf_offsets.py, which also covers a byte the vocab lacks)."""
    for ours, reference in (metaspace, roberta_with_prefix):
        for text in ("Hello world", " Hello  wörld ", "<s>x</s> y"):
            assert ours.encode_with_offsets(text)[1] == reference.encode(text, add_special_tokens=False).offsets


@pytest.fixture(params=["llama2", "metaspace"])
def sentencepiece_style(request, llama2, metaspace):
    return llama2 if request.param == "llama2" else metaspace


def test_a_sentencepiece_style_bpe_exports_a_file_hugging_face_encodes_the_same(sentencepiece_style, tmp_path):
    """Llama-2 and Mistral written back: the vocab's strings (``<0xNN>`` for fallback bytes), the
    merges, normalizer, pre-tokenizer, post-processor and decoder; HF reads the file to the same
    ids and text, and bpestore reads it back to the same model."""
    ours, _ = sentencepiece_style
    path = tmp_path / "tokenizer.json"
    ours.export("hf", path)
    written = tokenizers.Tokenizer.from_file(str(path))
    lines = [*lines_to_try()[:1500], *lines_to_try()[-300:], "<s>Hello</s> world <s> x", "  two  spaces ", "\t\ttabs\n"]
    expected = [encoding.ids for encoding in written.encode_batch(lines, add_special_tokens=False)]
    mine = ours.encode_batch(lines)
    different = [line for line, a, b in zip(lines, mine, expected) if a != b]
    assert different == [], f"{len(different)} of {len(lines)} lines differ, first {different[0]!r}"
    assert [ours.encode(line, add_special_tokens=True) for line in lines[:50]] == [e.ids for e in written.encode_batch(lines[:50])]
    for ids in mine[-60:]:
        assert written.decode(ids, skip_special_tokens=False) == ours.decode(ids)
    again = formats.read("hf", path).model
    assert again.vocab == ours.model.vocab and again.merges == ours.model.merges and again.byte_fallback


@pytest.fixture(scope="module")
def qwen2_shaped(tmp_path_factory):
    """Qwen2's published settings on Llama-3.2's vocab: an NFC normalizer and Qwen2's Split regex
    (Llama-3's with each number a piece), which bpestore runs on a hand-written scanner."""
    from bpestore.pretokenize import QWEN2_PATTERN

    source = json.loads(real_file("llama3.2").read_text(encoding="utf-8"))
    source["normalizer"] = {"type": "NFC"}
    split = source["pre_tokenizer"]["pretokenizers"][0]
    split["pattern"]["Regex"] = QWEN2_PATTERN
    path = tmp_path_factory.mktemp("qwen2") / "tokenizer.json"
    path.write_text(json.dumps(source, ensure_ascii=False), encoding="utf-8")
    model = formats.read("hf", path).model
    assert model.pattern == QWEN2_PATTERN and model.pre_tokenizer is None
    return Tokenizer.from_model(model), tokenizers.Tokenizer.from_file(str(path))


def test_qwen2_shaped_encodes_every_line_as_hugging_face(qwen2_shaped):
    ours, reference = qwen2_shaped
    lines = [*lines_to_try(), "12345 and 3.14159\n\n  ", "a\n  "]
    expected = [encoding.ids for encoding in reference.encode_batch(lines, add_special_tokens=False)]
    different = [line for line, mine, theirs in zip(lines, ours.encode_batch(lines), expected) if mine != theirs]
    assert different == [], f"{len(different)} of {len(lines)} lines differ, first {different[0]!r}"


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=texts(assigned_only=True))
def test_qwen2_shaped_encodes_any_text_as_hugging_face(qwen2_shaped, text):
    ours, reference = qwen2_shaped
    assert ours.encode(text) == reference.encode(text, add_special_tokens=False).ids


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.integers(min_value=0, max_value=2**20), max_size=12))
def test_any_ids_decode_as_hugging_face_decodes_them(sentencepiece_style, picks):
    """Through each decoder, token by token as tokenizers runs it: fallback bytes (runs of them,
    cut characters: one U+FFFD per byte), spaces written as "▁", special tokens, in any order."""
    ours, reference = sentencepiece_style
    known = sorted(ours.model.vocab)
    single_bytes = sorted(token_id for token_id, token in ours.model.vocab.items() if len(token) == 1)
    # (odd picks a single byte, mostly fallback bytes, so that runs of them and cut characters come up)
    ids = [single_bytes[pick // 2 % len(single_bytes)] if pick % 2 else known[pick // 2 % len(known)] for pick in picks]
    assert ours.decode(ids) == reference.decode(ids, skip_special_tokens=False)
