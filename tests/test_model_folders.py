"""Model folders in and out: ``bpestore import hf DIR`` keeps what ``tokenizer_config.json`` says
(roles of tokens, chat template, maximum length), and ``bpestore export REF --format hf --output
DIR/`` writes a folder that ``transformers.AutoTokenizer.from_pretrained`` loads and that encodes
as bpestore does: for a tokenizer bpestore trained and for imported ones (a normalizer, a
post-processor, a pre-tokenizer pipeline)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bpestore import Tokenizer
from conftest import shared_dir
from test_cli import invoke

transformers = pytest.importorskip("transformers", reason="transformers is the client a model folder is for")
MULTILINGUAL = (Path(__file__).parent / "data" / "multilingual_scripts.txt").read_text(encoding="utf-8").splitlines()


def shared_file(family: str) -> Path:
    path = shared_dir() / "tokenizers" / family / "tokenizer.json"
    if not path.is_file():
        pytest.skip(f"{path} not found (set BPESTORE_SHARED to the directory holding tokenizers/)")
    return path


def test_a_model_folder_is_imported_with_its_config(tmp_path):
    folder = tmp_path / "Llama-3.2"
    folder.mkdir()
    shutil.copy(shared_file("llama3.2"), folder / "tokenizer.json")
    template = "{% for message in messages %}{{ message['content'] }}{% endfor %}"
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|eot_id|>", "special": True},
        "chat_template": template, "model_max_length": 131072, "tokenizer_class": "PreTrainedTokenizerFast",
    }), encoding="utf-8")
    (folder / "special_tokens_map.json").write_text(json.dumps({"pad_token": "<|end_of_text|>"}), encoding="utf-8")
    db = tmp_path / "store.db"
    result = invoke("import", "hf", folder, "--name", "llama", "--db", db)
    assert result.exit_code == 0, result.stderr
    config = Tokenizer.from_db(db, "llama").model.config
    assert config == {
        "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "pad_token": "<|end_of_text|>",
        "chat_template": template, "model_max_length": 131072,
    }
    shown = invoke("show", "llama", "--db", db).stdout
    assert "eos token" in shown and "<|eot_id|>" in shown and "chat template" in shown and "131072" in shown
    # and written back: transformers reads the roles and the template
    out = tmp_path / "out"
    assert invoke("export", "llama", "--format", "hf", "--output", f"{out}/", "--db", db).exit_code == 0
    loaded = transformers.AutoTokenizer.from_pretrained(str(out))
    assert (loaded.bos_token, loaded.eos_token, loaded.pad_token) == ("<|begin_of_text|>", "<|eot_id|>", "<|end_of_text|>")
    assert loaded.chat_template == template and loaded.model_max_length == 131072


def test_a_folder_without_tokenizer_json_is_refused_in_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    result = invoke("import", "hf", tmp_path / "empty", "--name", "x", "--db", tmp_path / "store.db")
    assert result.exit_code == 1 and "without tokenizer.json" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("source", ["trained", "gpt-neox-20b", "roberta-base", "falcon", "olmo2-dolma2", "llama3.2", "smollm"])
def test_an_exported_folder_loads_in_transformers_and_encodes_as_bpestore(tmp_path, source):
    db = tmp_path / "store.db"
    if source == "trained":
        corpus = tmp_path / "corpus.txt"
        corpus.write_text("\n".join(MULTILINGUAL * 3), encoding="utf-8")
        assert invoke("train", corpus, "--name", "t", "--vocab-size", "600", "--special-token", "<|endoftext|>", "--db", db, "-q").exit_code == 0
    else:
        assert invoke("import", "hf", shared_file(source), "--name", "t", "--db", db).exit_code == 0
    out = tmp_path / "folder"
    result = invoke("export", "t", "--format", "hf", "--output", f"{out}/", "--db", db)
    assert result.exit_code == 0, result.stderr
    assert sorted(path.name for path in out.iterdir()) == ["special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]
    ours = Tokenizer.from_db(db, "t")
    loaded = transformers.AutoTokenizer.from_pretrained(str(out))
    for line in [*MULTILINGUAL, "a<|endoftext|>b  <mask> x"]:
        assert loaded(line, add_special_tokens=False)["input_ids"] == ours.encode(line), line
        assert loaded(line)["input_ids"] == ours.encode(line, add_special_tokens=True), line
        ids = ours.encode(line)
        assert loaded.decode(ids) == ours.decode(ids), line
