"""Pre-tokenizer pipelines (Hugging Face's pre-tokenizers in a sequence, run stage by stage in the
engine), against Hugging Face ``tokenizers`` as the oracle: hypothesis builds sequences of
``Split`` (every behavior, inverted or not, by a regex or a string), ``Digits``, ``Punctuation``,
``Whitespace``, ``WhitespaceSplit`` and ``ByteLevel`` with HF's Python API, and bpestore's pieces
of any text equal HF's ``pre_tokenize_str``; whole tokenizers with such pipelines encode as HF."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpestore import Tokenizer, formats
from bpestore.pre_tokenizer import PreTokenizer, PreTokenizerError
from strategies import texts
from tiers import examples

tokenizers = pytest.importorskip("tokenizers", reason="Hugging Face tokenizers is the oracle for pre-tokenizers")
from tokenizers import Regex, models, pre_tokenizers, trainers  # noqa: E402

BEHAVIORS = ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]
# DeepSeek-V3's word regex: its `\s+(?!\S)|\s+` ending runs without a backtracking engine
DEEPSEEK_WORDS = (
    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
    r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
REGEXES = [r"\s+", r"\p{N}{1,3}", r"[0-9][0-9][0-9]", r"\w+|[^\w\s]+", r"(?i:'s|'t)|\p{L}+", r" ?\p{P}+", "é|ò", DEEPSEEK_WORDS, r"\b\w|\s+(?!\S)|\s+"]


@st.composite
def steps(draw: st.DrawFn) -> pre_tokenizers.PreTokenizer:
    kind = draw(st.sampled_from(["split", "split-string", "digits", "punctuation", "whitespace", "whitespace-split"]))
    behavior = draw(st.sampled_from(BEHAVIORS))
    if kind == "split":
        return pre_tokenizers.Split(Regex(draw(st.sampled_from(REGEXES))), behavior, invert=draw(st.booleans()))
    if kind == "split-string":
        return pre_tokenizers.Split(draw(st.sampled_from([" ", "-", "a.b", "\n"])), behavior, invert=draw(st.booleans()))
    if kind == "digits":
        return pre_tokenizers.Digits(individual_digits=draw(st.booleans()))
    if kind == "punctuation":
        return pre_tokenizers.Punctuation(behavior)
    return pre_tokenizers.Whitespace() if kind == "whitespace" else pre_tokenizers.WhitespaceSplit()


@st.composite
def pipelines(draw: st.DrawFn) -> pre_tokenizers.Sequence:
    before, after = draw(st.lists(steps(), max_size=2)), draw(st.lists(steps(), max_size=2))
    # (a step that writes into the text first: Metaspace, or ByteLevel's prefix space, which must
    # come first; else ByteLevel anywhere)
    first = draw(st.sampled_from(["none", "metaspace", "prefix-space"]))
    if first == "metaspace":
        scheme = draw(st.sampled_from(["always", "first", "never"]))
        before = [pre_tokenizers.Metaspace(replacement=draw(st.sampled_from(["\u2581", "_"])), prepend_scheme=scheme, split=draw(st.booleans()))]
    elif first == "prefix-space":
        before = []
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=first == "prefix-space", use_regex=draw(st.booleans()))
    return pre_tokenizers.Sequence([*before, byte_level, *after])


def as_json(pre_tokenizer: pre_tokenizers.PreTokenizer) -> dict:
    tokenizer = tokenizers.Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizer
    return json.loads(tokenizer.to_str())["pre_tokenizer"]


some_text = st.lists(
    st.one_of(texts(max_pieces=3, special_pieces=False, assigned_only=True), st.sampled_from(["12345", "ò²", "a-b", "a.b", " \n ", "x's", "ニカ・ニサヌ", "一、二"])),
    max_size=8,
).map("".join)


@settings(max_examples=examples(400), deadline=None)
@given(pipeline=pipelines(), text=some_text)
def test_a_pipeline_makes_hugging_faces_pieces(pipeline, text):
    ours = PreTokenizer.from_hf(as_json(pipeline))
    assert ours.pieces(text) == [piece for piece, _ in pipeline.pre_tokenize_str(text)]


FALCON = pre_tokenizers.Sequence([pre_tokenizers.Punctuation("contiguous"), pre_tokenizers.ByteLevel(add_prefix_space=False), pre_tokenizers.Digits(individual_digits=False), pre_tokenizers.Split(Regex("[0-9][0-9][0-9]"), "isolated")])
# (numbers of every length; characters whose UTF-8 holds a byte GPT-2's alphabet writes as a numeric:
# ò C3 B2, ′ E2 80 B2, ½ C2 BD; punctuation of Unicode's categories, beside spaces and letters)
FALCON_PARTS = ["1234567", "12", "′2", "½1", "ò3", "²³", "—", "a—b", "«a»", "…", " (x", "a  .", "$5", "x's", "、"]


@settings(max_examples=examples(400), deadline=None)
@given(text=st.lists(st.one_of(some_text, st.sampled_from(FALCON_PARTS)), max_size=8).map("".join))
def test_falcons_pre_tokenizer_makes_hugging_faces_pieces(text):
    """Falcon's four pre-tokenizers, which the engine runs in a pass of their own."""
    ours = PreTokenizer.from_hf(as_json(FALCON))
    assert ours.pieces(text) == [piece for piece, _ in FALCON.pre_tokenize_str(text)]


TRAINING = ["Hello world, hello World! 12345 and 3.14159; the café's résumé.", "日本語のテキスト 한국어 - tabs\tand\nnewlines"] * 20


@pytest.fixture(scope="module", params=range(7))
def whole(request, tmp_path_factory):
    """A small byte-level BPE trained by HF with a pipeline drawn from a fixed list."""
    chosen = [
        FALCON,
        pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
        pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r"\p{N}{1,3}"), "isolated"), pre_tokenizers.Split(Regex(r" ?\p{L}+|\s+|."), "merged_with_next"), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
        pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r"\w+"), "removed", invert=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]),
        pre_tokenizers.ByteLevel(add_prefix_space=True),
        pre_tokenizers.Sequence([pre_tokenizers.Metaspace(prepend_scheme="first"), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
        # (DeepSeek-V3's pre-tokenizer)
        pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r"\p{N}{1,3}"), "isolated"), pre_tokenizers.Split(Regex("[一-龥\u3040-ゟ゠-ヿ]+"), "isolated"), pre_tokenizers.Split(Regex(DEEPSEEK_WORDS), "isolated"), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
    ][request.param]
    tokenizer = tokenizers.Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = chosen
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(TRAINING, trainer)
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    tokenizer.save(str(path))
    return Tokenizer.from_model(formats.read("hf", path).model), tokenizer


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(st.one_of(some_text, st.just("<|endoftext|>")), max_size=4).map("".join))
def test_a_tokenizer_with_a_pipeline_encodes_as_hugging_face(whole, text):
    ours, reference = whole
    assert ours.encode(text) == reference.encode(text, add_special_tokens=False).ids


def test_text_cut_into_parts_gives_the_whole_texts_ids(whole, tmp_path):
    ours, reference = whole
    text = ("Hello, world!! 1234567 café's\n" * 3000) + "<|endoftext|>" + ("tabs\tand  spaces 3.14159\n" * 3000)
    expected = reference.encode(text, add_special_tokens=False).ids
    assert ours.encode(text) == expected
    assert list(ours.encode_iterable(iter(text.splitlines(keepends=True)))) == expected
    assert ours.encode_batch([text[:5000], text]) == [reference.encode(text[:5000], add_special_tokens=False).ids, expected]


@pytest.mark.parametrize(
    ("document", "named"),
    [
        ({"type": "Sequence", "pretokenizers": [{"type": "ByteLevel"}, {"type": "Metaspace", "replacement": "▁"}]}, "pre_tokenizer.pretokenizers[1]: Metaspace after another pre-tokenizer"),
        ({"type": "Metaspace", "replacement": "▁", "add_prefix_space": False}, "pre_tokenizer: add_prefix_space does not match declared prepend_scheme"),
        ({"type": "Sequence", "pretokenizers": [{"type": "BertPreTokenizer"}, {"type": "ByteLevel"}]}, 'pre_tokenizer.pretokenizers[0]: "BertPreTokenizer" is not supported'),
        ({"type": "Sequence", "pretokenizers": [{"type": "Digits"}]}, "pre_tokenizer: no ByteLevel step"),
        ({"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways", "invert": False}, 'pre_tokenizer: behavior "Sideways"'),
    ],
)
def test_a_pre_tokenizer_bpestore_does_not_run_is_named(document, named):
    with pytest.raises(PreTokenizerError) as raised:
        PreTokenizer.from_hf(document)
    assert str(raised.value).startswith(named), str(raised.value)
