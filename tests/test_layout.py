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

import pytest

import bpestore

REPO_ROOT = Path(__file__).resolve().parent.parent


# import-linter's `lint-imports`, run by this Python whatever the scripts directory is.
LINT_IMPORTS = [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()", "--no-cache"]


def contracts() -> list[dict]:
    with open(REPO_ROOT / "pyproject.toml", "rb") as file:
        return tomllib.load(file)["tool"]["importlinter"]["contracts"]


@pytest.mark.slow
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


@pytest.mark.slow
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


# The command line's allowed imports (issue 11: "the CLI importing only the public API and the
# workflow module", with the two front ends above workflow). pyproject's CLI contract forbids the rest.
CLI_MAY_IMPORT = {"bpestore.errors", "bpestore.formats", "bpestore.workflow", "bpestore.web", "bpestore.distributed"}
PACKAGE_DIR = Path(bpestore.__file__).parent


def python_modules(folder: Path, prefix: str) -> set[str]:
    """The modules and packages directly in ``folder``, as import-linter names them (Python source
    only: the compiled engine is not in its graph)."""
    names = {f"{prefix}.{path.stem}" for path in folder.glob("*.py") if path.stem != "__init__"}
    names |= {f"{prefix}.{path.name}" for path in folder.iterdir() if (path / "__init__.py").is_file()}
    return names


def cli_contract() -> dict:
    (contract,) = [c for c in contracts() if c.get("source_modules") == ["bpestore.cli"]]
    return contract


def test_every_module_is_allowed_or_forbidden_for_the_cli():
    """Each top-level module and subpackage of bpestore/ is either one the CLI may import or
    forbidden to it by pyproject's contract (not both): a new module cannot slip through unchecked.
    The format modules behind ``bpestore.formats`` are forbidden one by one."""
    contract = cli_contract()
    forbidden = set(contract["forbidden_modules"])
    top_level = python_modules(PACKAGE_DIR, "bpestore") - {"bpestore.cli"}
    assert not CLI_MAY_IMPORT & forbidden
    unchecked = top_level - CLI_MAY_IMPORT - forbidden
    assert not unchecked, f"add {sorted(unchecked)} to the CLI contract's forbidden_modules in pyproject.toml (or to CLI_MAY_IMPORT)"
    assert CLI_MAY_IMPORT <= top_level, "an allowed module no longer exists"
    format_modules = python_modules(PACKAGE_DIR / "formats", "bpestore.formats")
    assert format_modules and format_modules <= forbidden, sorted(format_modules - forbidden)
    assert forbidden <= top_level | format_modules, "the contract forbids a module that does not exist"


def test_only_the_engine_module_imports_the_compiled_engine():
    """One door to the extension (issue 24.2): bpestore/engine.py, which also hands it the
    project's exception classes. import-linter does not see an extension module, so this is
    checked on every module's source."""
    import ast

    importers = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [alias.name for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if any(name.split(".")[-1] == "_engine" for name in names):
                importers.append(str(path.relative_to(PACKAGE_DIR)))
    assert importers == ["engine.py"], importers


def test_the_engine_raises_the_projects_errors_without_importing_them(tmp_path):
    """The bindings import no module of the project: their sources name none, and the classes
    they raise are the ones bpestore.engine handed over."""
    crates = PACKAGE_DIR.parent / "crates" / "python" / "src"
    for path in crates.glob("*.rs"):
        assert 'import("bpestore' not in path.read_text(encoding="utf-8"), path
    from bpestore import _engine
    from bpestore.errors import CorpusDecodeError, PatternError

    with pytest.raises(PatternError, match="byte 3"):
        _engine.Pretokenizer(r"[^\p{Braille}]+").pretokenize("ab \u2801 c")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine text \xff more")
    with pytest.raises(CorpusDecodeError) as raised:
        _engine.count_file(str(bad), _engine.GPT2_PATTERN, [])
    assert raised.value.offset == 10 and raised.value.path == str(bad)


# -- the layout tree of docs/development.md ("How the code is laid out"; README points there) --------

CONTINUATION_INDENT = 16
"""A line of the tree indented this far or more continues the description above it."""


def layout_tree() -> list[tuple[str, bool]]:
    """The paths the layout tree of docs/development.md names, relative to the repository root, each with whether it
    is a folder listed without any entry under it (which then stands for everything inside it)."""
    text = (REPO_ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    section = text.split("## How the code is laid out", 1)[1]
    block = section.split("```", 2)[1]
    entries: list[tuple[int, str]] = []  # (depth, path)
    folders: list[str] = []  # the folder at each depth above the current line
    for line in block.splitlines()[1:]:  # the first line is the fence's info string
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent >= CONTINUATION_INDENT:
            continue
        assert indent % 2 == 0, f"odd indentation in docs/development.md's tree: {line!r}"
        depth = indent // 2
        names_field = line.strip().split("  ")[0]  # names, then two or more spaces, then the description
        del folders[depth:]
        assert len(folders) == depth, f"docs/development.md's tree skips a level at {line!r}"
        names = [name.strip() for name in names_field.split(",")]
        for name in names:
            entries.append((depth, "".join(folders) + name))
        if len(names) == 1 and names[0].endswith("/"):
            folders.append(names[0])
    named = []
    for index, (depth, path) in enumerate(entries):
        has_children = any(other.startswith(path) and other != path for _, other in entries[index + 1:]) if path.endswith("/") else False
        named.append((path, path.endswith("/") and not has_children))
    return named


def expand(path: str) -> list[str]:
    """``bpestore/_engine.*.so/.pyi`` -> ``bpestore/_engine.*.so`` and ``bpestore/_engine.pyi``."""
    if "/." not in path:
        return [path]
    first, other_suffix = path.rsplit("/.", 1)
    folder, _, file = first.rpartition("/")
    return [first, f"{folder}/{file.split('.')[0]}.{other_suffix}"]


def test_the_layout_tree_names_every_module_and_crate():
    """Every module of bpestore/ (a folder listed without entries under it stands for its files)
    and every crate is in the layout tree of docs/development.md, and everything the tree names exists."""
    named = layout_tree()
    paths = {path for path, _ in named}
    leaf_folders = [path for path, leaf in named if leaf]
    assert "bpestore/workflow.py" in paths and "crates/" in paths, sorted(paths)  # the parser found the tree
    modules = {
        path.relative_to(REPO_ROOT).as_posix()
        for path in PACKAGE_DIR.rglob("*.py")
        if not (path.name == "__init__.py" and path.parent != PACKAGE_DIR)  # a package is its folder
    }
    packages = {path.parent.relative_to(REPO_ROOT).as_posix() + "/" for path in PACKAGE_DIR.rglob("__init__.py")}
    crates = {path.parent.relative_to(REPO_ROOT).as_posix() + "/" for path in (REPO_ROOT / "crates").glob("*/Cargo.toml")}
    assert crates, "no crates found"
    missing = sorted(
        path for path in modules | packages | crates
        if path not in paths and not any(path.startswith(folder) and path != folder for folder in leaf_folders)
    )
    assert not missing, f"docs/development.md's 'How the code is laid out' does not name {missing}"
    absent = sorted(path for path in paths for pattern in expand(path) if not list(REPO_ROOT.glob(pattern.rstrip("/"))))
    assert not absent, f"docs/development.md's 'How the code is laid out' names what does not exist: {absent}"


@pytest.mark.slow
def test_training_through_the_cli_never_imports_numpy(tmp_path):
    """NumPy costs a process 0.14 s and 14 MB to import: the commands that encode nothing
    (``train`` here, on a fresh store) never load it, so that a short training's start stays short."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("low lower lowest newer wider\n" * 50, encoding="utf-8")
    program = (
        "import runpy, sys\n"
        "try:\n"
        "    runpy.run_module('bpestore.cli', run_name='__main__')\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'numpy'))\n"
    )
    argv = ["bpestore", "--db", str(tmp_path / "store.db"), "train", str(corpus), "--name", "t", "--vocab-size", "270", "-q"]
    result = subprocess.run([sys.executable, "-c", f"import sys; sys.argv = {argv!r}\n" + program], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"
