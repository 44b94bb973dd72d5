"""Added tokens that take their surroundings (Hugging Face's ``lstrip``, ``rstrip``,
``single_word``: RoBERTa's ``<mask>`` takes the whitespace before it), against Hugging Face
``tokenizers`` as the oracle: any text, the tokens at the edges of whitespace and words, through
encode, batches, streams and files cut into parts, and kept by the store and by export."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpestore import Store, Tokenizer, formats
from strategies import texts
from tiers import examples

tokenizers = pytest.importorskip("tokenizers", reason="Hugging Face tokenizers is the oracle for added tokens")
from tokenizers import AddedToken, models, normalizers, pre_tokenizers, trainers  # noqa: E402

TRAINING_TEXT = ["Hello world, hello World! The mask of Zorro; numbers 12345.", "日本語のテキスト 한국어  double  spaces\n"] * 20
TOKENS = [
    AddedToken("<mask>", lstrip=True, special=True, normalized=False),
    AddedToken("<r>", rstrip=True, special=True, normalized=False),
    AddedToken("<both>", lstrip=True, rstrip=True, special=False, normalized=False),
    AddedToken("word", single_word=True, special=False, normalized=False),
    AddedToken("<sw>", single_word=True, lstrip=True, special=True, normalized=False),
]
PIECES = ["<mask>", "<r>", "<both>", "word", "<sw>", "full", "ｆｕｌｌ", " ", "  ", "\t", "\n", "\u3000", "a", "é", "_", "x1", ".", "<|endoftext|>"]


def trained(normalizer: normalizers.Normalizer | None = None) -> tokenizers.Tokenizer:
    tokenizer = tokenizers.Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator(TRAINING_TEXT, trainer)
    if normalizer is not None:
        tokenizer.normalizer = normalizer
    for token in TOKENS:
        (tokenizer.add_special_tokens if token.special else tokenizer.add_tokens)([token])
    return tokenizer


@pytest.fixture(scope="module", params=["plain", "NFKC", "normalized"])
def pair(request, tmp_path_factory):
    reference = trained(normalizers.NFKC() if request.param != "plain" else None)
    if request.param == "normalized":  # (an added token found in normalized text, with options)
        reference.add_tokens([AddedToken("ｆｕｌｌ", normalized=True, lstrip=True, rstrip=True)])
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    reference.save(str(path))
    return Tokenizer.from_model(formats.read("hf", path).model), reference


text_with_tokens = st.lists(st.one_of(st.sampled_from(PIECES), texts(max_pieces=2, special_pieces=False, assigned_only=True)), max_size=14).map("".join)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=text_with_tokens)
def test_tokens_take_their_surroundings_as_in_hugging_face(pair, text):
    ours, reference = pair
    assert ours.encode(text) == reference.encode(text, add_special_tokens=False).ids


def test_the_options_of_roberta_shape(pair):
    ours, reference = pair
    for text in ["a   <mask>b", "<mask>", "x<r>   y", " <both> ", "a word b", "awordb", "word", "_word", "x <sw> y", "x<sw>y"]:
        assert ours.encode(text) == reference.encode(text, add_special_tokens=False).ids, text


def test_text_cut_into_parts_gives_the_whole_texts_ids(pair, tmp_path):
    """Streams and files are encoded in parts, cut where nothing is lost: never next to a token
    that takes its surroundings."""
    ours, reference = pair
    text = ("Hello world  <mask> word x<r>   y <both>\n" * 2000) + "<|endoftext|>" + ("awordb  <sw> a\t<mask>\n" * 2000)
    expected = reference.encode(text, add_special_tokens=False).ids
    assert ours.encode(text) == expected
    assert list(ours.encode_iterable(iter(text.splitlines(keepends=True)))) == expected
    import numpy

    from bpestore.encode.files import encode_file_to_npy

    (tmp_path / "text.txt").write_bytes(text.encode("utf-8"))
    encode_file_to_npy(ours, tmp_path / "text.txt", tmp_path / "ids.npy", workers=2, chunk_bytes=1024)
    assert numpy.load(tmp_path / "ids.npy").tolist() == expected


def test_the_store_and_export_keep_the_options(pair, tmp_path):
    ours, reference = pair
    store = Store(tmp_path / "store.db")
    ref = store.save("options", ours.model)
    loaded = Tokenizer.from_db(tmp_path / "store.db", ref)
    assert loaded.model.token_options == ours.model.token_options == {
        token.content: frozenset(name for name in ("lstrip", "rstrip", "single_word") if getattr(token, name))
        for token in [*TOKENS, *([AddedToken("ｆｕｌｌ", lstrip=True, rstrip=True)] if "ｆｕｌｌ" in ours.model.added_tokens else [])]
    }
    loaded.export("hf", tmp_path / "out.json")
    again = tokenizers.Tokenizer.from_file(str(tmp_path / "out.json"))
    text = "a   <mask>b x<r>  y word awordb"
    assert again.encode(text, add_special_tokens=False).ids == reference.encode(text, add_special_tokens=False).ids
