"""A model folder's tokenizer files beside ``tokenizer.json``: ``tokenizer_config.json`` and
``special_tokens_map.json``, as ``transformers`` writes and reads them.

Importing a folder keeps what they say of the tokenizer (its bos/eos/pad/unk... tokens, its chat
template, the model's maximum length) with the stored tokenizer, to be shown and written back;
exporting to a folder writes them, so that ``transformers.AutoTokenizer.from_pretrained(folder)``
loads the tokenizer as a ``PreTrainedTokenizerFast`` that encodes as bpestore does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import FormatError

__all__ = ["CONFIG_FILE", "SPECIAL_TOKENS_FILE", "TOKEN_KEYS", "config_of_folder", "folder_files"]

CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_FILE = "special_tokens_map.json"
#: The tokens a model folder names by role.
TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
#: What else of tokenizer_config.json is kept.
OTHER_KEYS = ("chat_template", "model_max_length", "add_bos_token", "add_eos_token", "clean_up_tokenization_spaces")


def _json_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise FormatError(f"{path}: not a JSON object ({type(error).__name__})") from None
    if not isinstance(data, dict):
        raise FormatError(f"{path}: not a JSON object")
    return data


def _token_text(path: Path, key: str, value: Any) -> str | None:
    """A role's token as its text (``transformers`` writes ``"<s>"`` or ``{"content": "<s>", ...}``)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    raise FormatError(f"{path}: {key} must be a string or an object with a content, not {json.dumps(value)[:60]}")


def config_of_folder(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """What ``folder``'s ``tokenizer_config.json`` and ``special_tokens_map.json`` (either may be
    absent) say of the tokenizer: the tokens by role, the chat template, the maximum length."""
    folder = Path(folder)
    config: dict[str, Any] = {}
    for name in (SPECIAL_TOKENS_FILE, CONFIG_FILE):  # (tokenizer_config.json wins)
        path = folder / name
        if not path.is_file():
            continue
        data = _json_file(path)
        for key in TOKEN_KEYS:
            if key in data and (token := _token_text(path, key, data[key])) is not None:
                config[key] = token
        if name == CONFIG_FILE:
            for key in OTHER_KEYS:
                if key in data:
                    config[key] = data[key]
    length = config.get("model_max_length")
    if isinstance(length, float) and length > 2**62:  # (transformers' "no limit": 1e30)
        del config["model_max_length"]
    return config


def folder_files(config: dict[str, Any], special_tokens: list[str]) -> dict[str, dict[str, Any]]:
    """``tokenizer_config.json`` and ``special_tokens_map.json`` for a model folder: the kept
    config, loaded by ``transformers`` as a ``PreTrainedTokenizerFast``."""
    tokens = {key: config[key] for key in TOKEN_KEYS if key in config}
    others = {key: config[key] for key in OTHER_KEYS if key in config}
    tokenizer_config = {"tokenizer_class": "PreTrainedTokenizerFast", **tokens, **others}
    tokenizer_config.setdefault("clean_up_tokenization_spaces", False)
    special_map = dict(tokens)
    extra = [token for token in special_tokens if token not in tokens.values()]
    if extra:
        special_map["additional_special_tokens"] = extra
    return {CONFIG_FILE: tokenizer_config, SPECIAL_TOKENS_FILE: special_map}
