"""Post-processors, against Hugging Face ``tokenizers`` as the oracle: the special tokens a
tokenizer puts around a text's ids when asked (``add_special_tokens=True``), kept by the store,
written back on export, and applied by ``bpestore encode --add-special-tokens``."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from bpestore import Store, Tokenizer, formats
from bpestore.post_processor import PostProcessor, PostProcessorError
from strategies import texts
from test_cli import invoke
from tiers import examples

tokenizers = pytest.importorskip("tokenizers", reason="Hugging Face tokenizers is the oracle for post-processors")
from tokenizers import models, pre_tokenizers, processors, trainers  # noqa: E402

TRAINING_TEXT = ["Hello world, hello World! The café's résumé; numbers 12345 and 3.14159.", "日本語のテキスト 한국어"] * 20
SPECIALS = ["<s>", "</s>", "[CLS]", "[SEP]", "<|begin_of_text|>"]


def base() -> tokenizers.Tokenizer:
    tokenizer = tokenizers.Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(TRAINING_TEXT, trainer)
    return tokenizer


def with_processor(name: str) -> tokenizers.Tokenizer:
    tokenizer = base()
    ids = {token: tokenizer.token_to_id(token) for token in SPECIALS}
    made = {
        "roberta": processors.RobertaProcessing(("</s>", ids["</s>"]), ("<s>", ids["<s>"]), add_prefix_space=False),
        "bert": processors.BertProcessing(("[SEP]", ids["[SEP]"]), ("[CLS]", ids["[CLS]"])),
        "template": processors.TemplateProcessing(
            single="<|begin_of_text|> $A </s>", pair="<|begin_of_text|> $A </s> $B:1 </s>:1",
            special_tokens=[("<|begin_of_text|>", ids["<|begin_of_text|>"]), ("</s>", ids["</s>"])],
        ),
        "llama3-sequence": processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", ids["<|begin_of_text|>"])]),
        ]),
        "bytelevel": processors.ByteLevel(trim_offsets=True),
    }[name]
    tokenizer.post_processor = made
    return tokenizer


@pytest.fixture(scope="module", params=["roberta", "bert", "template", "llama3-sequence", "bytelevel"])
def processed(request, tmp_path_factory):
    reference = with_processor(request.param)
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    reference.save(str(path))
    return Tokenizer.from_model(formats.read("hf", path).model), reference, path


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts(max_pieces=8, assigned_only=True))
def test_add_special_tokens_gives_hugging_face_ids(processed, text):
    ours, reference, _ = processed
    assert ours.encode(text, add_special_tokens=True) == reference.encode(text).ids
    assert ours.encode(text) == reference.encode(text, add_special_tokens=False).ids


def test_a_batch_gets_them_around_each_text(processed):
    ours, reference, _ = processed
    lines = ["", "hello world", "Hello<s>World</s>", "日本語"]
    assert ours.encode_batch(lines, add_special_tokens=True) == [encoding.ids for encoding in reference.encode_batch(lines)]


def test_the_store_keeps_it_and_export_writes_it_back(processed, tmp_path):
    ours, reference, _ = processed
    store = Store(tmp_path / "store.db")
    ref = store.save("processed", ours.model)
    loaded = Tokenizer.from_db(tmp_path / "store.db", ref)
    assert loaded.model.post_processor == ours.model.post_processor
    text = "Hello world, 12345"
    assert loaded.encode(text, add_special_tokens=True) == reference.encode(text).ids
    loaded.export("hf", tmp_path / "out.json")
    again = tokenizers.Tokenizer.from_file(str(tmp_path / "out.json"))
    assert again.encode(text).ids == reference.encode(text).ids


def test_the_cli_adds_them_on_request(processed, tmp_path):
    ours, reference, path = processed
    db = tmp_path / "store.db"
    assert invoke("import", "hf", path, "--name", "p", "--db", db).exit_code == 0
    text = tmp_path / "text.txt"
    text.write_text("Hello world", encoding="utf-8")
    added = invoke("encode", "p", text, "--add-special-tokens", "--db", db)
    plain = invoke("encode", "p", text, "--db", db)
    assert added.exit_code == 0 and plain.exit_code == 0, added.stderr
    assert [int(i) for i in added.stdout.split()] == reference.encode("Hello world").ids
    assert [int(i) for i in plain.stdout.split()] == reference.encode("Hello world", add_special_tokens=False).ids
    refused = invoke("encode", "p", text, "--add-special-tokens", "--count", "--db", db)
    assert refused.exit_code == 2 and "--add-special-tokens" in refused.stderr


@pytest.mark.parametrize(
    ("document", "named"),
    [
        ({"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}], "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}}, "post_processor.single: the template has no $A"),
        ({"type": "RobertaProcessing", "sep": ["</s>"], "cls": ["<s>", 0]}, "post_processor: RobertaProcessing needs cls and sep"),
        ({"type": "Sequence", "processors": [{"type": "Fancy"}]}, 'post_processor.processors[0]: "Fancy" is not supported'),
    ],
)
def test_a_post_processor_bpestore_cannot_apply_is_named(document, named):
    with pytest.raises(PostProcessorError) as raised:
        PostProcessor.from_hf(document)
    assert str(raised.value).startswith(named), str(raised.value)


def test_one_it_cannot_apply_is_a_warning_and_not_kept(tmp_path):
    source = json.loads(with_processor("bytelevel").to_str())
    source["post_processor"] = {"type": "Fancy"}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(source), encoding="utf-8")
    imported = formats.read("hf", path)
    assert imported.model.post_processor is None
    assert any(note.startswith("warning: post_processor: \"Fancy\" is not supported") and "add_special_tokens=False" in note for note in imported.notes)
