"""The package's shape: its import contracts (``[tool.importlinter]`` in pyproject.toml, checked by
import-linter), its public API, and the examples in its docstrings."""

from __future__ import annotations

import doctest
import importlib
import importlib.metadata
import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import bpestore

REPO_ROOT = Path(__file__).resolve().parent.parent


# import-linter's `lint-imports`, run by this Python whatever the scripts directory is.
LINT_IMPORTS = [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()", "--no-cache"]


def contracts() -> list[dict]:
    with open(REPO_ROOT / "pyproject.toml", "rb") as file:
        return tomllib.load(file)["tool"]["importlinter"]["contracts"]


def test_the_import_contracts_hold():
    """No import cycle anywhere in bpestore/, the store independent of training and encoding, the
    command line on the public API and the workflow module only, the pipeline's layers."""
    result = subprocess.run(LINT_IMPORTS, cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    names = [contract["name"] for contract in contracts()]
    assert len(names) >= 4
    for name in names:
        assert f"{name} KEPT" in result.stdout, result.stdout
    assert f"Contracts: {len(names)} kept, 0 broken." in result.stdout, result.stdout


def test_a_broken_contract_is_reported(tmp_path):
    """The check can fail: a copy of the package in which the store imports the encoder breaks the
    store's contract."""
    copy = tmp_path / "bpestore"
    source = Path(bpestore.__file__).parent
    for path in source.rglob("*.py"):
        target = copy / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    refs = copy / "store" / "refs.py"
    refs.write_text(refs.read_text(encoding="utf-8") + "\nfrom ..encode import tokenizer  # noqa\n", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_bytes((REPO_ROOT / "pyproject.toml").read_bytes())
    result = subprocess.run(LINT_IMPORTS, cwd=tmp_path, capture_output=True, text=True, env={"PYTHONPATH": str(tmp_path)})
    assert result.returncode != 0, result.stdout
    assert "bpestore.store.refs -> bpestore.encode.tokenizer" in result.stdout, result.stdout


def test_the_public_api():
    expected = {"BPEModel", "Tokenizer", "train_bpe", "Store", "errors", "formats", "CorpusDecodeError", "FormatError",
                "TokenizerNotFoundError", "BpestoreError", "StoreError"}
    assert expected <= set(bpestore.__all__)
    for name in bpestore.__all__:
        assert getattr(bpestore, name) is not None, name
    assert (Path(bpestore.__file__).parent / "py.typed").exists()


def test_one_version_string():
    """The version comes from Cargo.toml (maturin) and is the same seen from the package metadata,
    the package and the compiled engine."""
    assert bpestore.__version__ == importlib.metadata.version("bpestore") == bpestore._engine.__version__


def all_modules() -> list[str]:
    return ["bpestore"] + [module.name for module in pkgutil.walk_packages(bpestore.__path__, "bpestore.")]


def test_the_docstring_examples():
    """Every example in a docstring of bpestore runs as shown (doctest)."""
    attempted, failures = 0, []
    for name in all_modules():
        module = importlib.import_module(name)
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False, report=False)
        attempted += result.attempted
        if result.failed:
            failures.append(name)
    assert not failures, f"doctest failures in {failures} (run python -m doctest -v on them)"
    assert attempted >= 8, attempted
