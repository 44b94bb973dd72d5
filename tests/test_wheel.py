"""The wheel carries everything an installed bpestore needs, the migrations above all.

The wheel is built from the repository (``pip wheel``: maturin, through build isolation, compiles the Rust engine), then
installed into a fresh virtual environment outside the repository. That environment sees the
current environment's dependencies (SQLAlchemy, alembic, ...) through a ``.pth`` file naming a
directory of links to them, from which bpestore itself (its editable install, its metadata) is left
out; a check proves bpestore cannot be imported there before the wheel is installed. Everything
then runs with the working directory outside the repository.

Slow (~20-40 s, most of it building the wheel); deselect with ``-k "not wheel"``.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import re
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from conftest import REPO_ROOT

# The slow tier (python3 -m pytest -m 'not slow' leaves it out): a wheel built and installed.
pytestmark = pytest.mark.slow

TIMEOUT = 600


def run(args: list, *, cwd: Path, check: bool = True, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", "PYTHONHOME", "BPESTORE_DB"}}
    env["PYTHONNOUSERSITE"] = "1"
    result = subprocess.run([str(arg) for arg in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check:
        shown = " ".join(str(arg) if len(str(arg)) < 200 else str(arg)[:60] + "..." for arg in args)
        assert result.returncode == 0, f"{shown} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def outside_repo(path: Path) -> bool:
    return REPO_ROOT.resolve() not in path.resolve().parents and path.resolve() != REPO_ROOT.resolve()


def repo_head() -> str:
    return ScriptDirectory(str(REPO_ROOT / "bpestore" / "store" / "migrations")).get_current_head()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory, worker_id: str) -> Path:
    """The wheel, built once per test run. Under pytest-xdist each worker runs this fixture, and
    two maturin builds at once in the repository's one target directory trample each other's
    files (one read ``lib_engine.so`` as the other replaced it): the workers share a directory
    (their base temps' parent, this run's own), and the first to take its lock builds there."""
    if worker_id == "master":  # (no xdist: this process alone)
        return build_wheel(tmp_path_factory.mktemp("dist"))
    shared = tmp_path_factory.getbasetemp().parent / "bpestore-wheel"
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # (released when the file closes)
        built = list(shared.glob("bpestore-*.whl"))
        return built[0] if built else build_wheel(shared)


def build_wheel(dist: Path) -> Path:
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", dist, REPO_ROOT], cwd=dist)
    wheels = list(dist.glob("bpestore-*.whl"))
    assert len(wheels) == 1, list(dist.iterdir())
    return wheels[0]


def current_site_dirs() -> list[Path]:
    paths = sysconfig.get_paths()
    return list(dict.fromkeys(Path(paths[key]) for key in ("purelib", "platlib")))


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """(python, bin dir, root): a fresh venv outside the repository with the wheel installed."""
    root = tmp_path_factory.mktemp("wheel_env")
    assert outside_repo(root)
    venv_dir = root / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv_dir], cwd=root)
    python = venv_dir / "bin" / "python"
    purelib = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=root).stdout.strip())

    # The current environment's packages, bpestore and every .pth file (the editable install's
    # finder lives in one) left out.
    deps = root / "deps"
    deps.mkdir()
    for site_dir in current_site_dirs():
        for entry in site_dir.iterdir():
            lowered = entry.name.lower()
            if lowered.startswith(("bpestore", "_editable_impl_bpestore", "__editable__")) or entry.suffix == ".pth":
                continue
            if not (deps / entry.name).exists():
                (deps / entry.name).symlink_to(entry)
    (purelib / "_current_env_dependencies.pth").write_text(f"{deps}\n")

    probe = textwrap.dedent(
        """
        import importlib.util, json, sys
        import sqlalchemy, alembic, regex, click, numpy, tqdm
        print(json.dumps({"bpestore": importlib.util.find_spec("bpestore") is not None, "path": sys.path}))
        """
    )
    before = json.loads(run([python, "-c", probe], cwd=root).stdout)
    assert before["bpestore"] is False, "bpestore is importable in the new venv before the wheel is installed"
    assert not any(entry and not outside_repo(Path(entry)) for entry in before["path"]), before["path"]

    run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel], cwd=root)
    yield python, venv_dir / "bin", root


def test_the_wheel_carries_the_package_the_migrations_and_the_script(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next((archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt")), "")
    assert "bpestore/__init__.py" in names and "bpestore/store/database.py" in names
    migrations = REPO_ROOT / "bpestore" / "store" / "migrations"
    for path in [migrations / "env.py", migrations / "script.py.mako", migrations / "sqlite_head.sql", *sorted((migrations / "versions").glob("*.py"))]:
        assert f"bpestore/store/migrations/{path.relative_to(migrations).as_posix()}" in names, path
    assert not any(name.startswith("tests/") for name in names)
    assert re.search(r"^bpestore\s*=\s*bpestore\.cli:main$", entry_points, re.MULTILINE), entry_points
    # the Rust engine is inside the package, as the extension module bpestore._engine
    assert any(re.fullmatch(r"bpestore/_engine\.[\w.-]*(so|pyd)", name) for name in names), sorted(names)
    assert "bpestore/_engine.pyi" in names and "bpestore/py.typed" in names


STORE_SCRIPT = """
import json, sqlite3, sys
from pathlib import Path
import bpestore
from bpestore import Tokenizer
from bpestore.store.migrate import migrations_dir
from bpestore import Store

db, corpus = sys.argv[1], sys.argv[2]
vocab = {b: bytes([b]) for b in range(256)}
merges = [(b"h", b"e"), (b"l", b"l"), (b"he", b"ll"), (b" ", b"w")]
for left, right in merges:
    vocab[len(vocab)] = left + right
tok = Tokenizer(vocab, merges, ["<|endoftext|>"])
text = "hello world<|endoftext|> hell"
with Store(db) as store:
    ref = store.save("small", tok)
    trained = store.train(corpus, "trained", [280, 300], ["<|endoftext|>"], workers=1)
    loaded = store.load(ref)
    refs = store.refs()
via_from_db = Tokenizer.from_db(db, "small")
connection = sqlite3.connect(db)
revision = connection.execute("SELECT version_num FROM alembic_version").fetchall()
connection.close()
print(json.dumps({
    "file": bpestore.__file__,
    "migrations": str(migrations_dir()),
    "revision": revision,
    "refs": refs,
    "trained": trained,
    "vocab_sizes": [Tokenizer.from_db(db, ref).vocab_size for ref in trained],
    "same": [loaded.vocab == tok.vocab, loaded.merges == tok.merges, loaded.special_tokens == tok.special_tokens,
             loaded.encode(text) == tok.encode(text), via_from_db.encode(text) == tok.encode(text)],
    "sys_path": sys.path,
}))
"""


def write_corpus(directory: Path) -> Path:
    """Some 40 KB of made-up words (enough pairs for a few hundred merges), with special tokens."""
    rng = random.Random(0)
    syllables = ["ka", "to", "ri", "men", "sul", "a", "e", "ob", "tri", "ung", "ß", "é"]
    words = ["".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(400)]
    stories = [" ".join(rng.choices(words, k=rng.randint(20, 60))) + "." for _ in range(120)]
    corpus = directory / "corpus.txt"
    corpus.write_text("<|endoftext|>".join(stories), encoding="utf-8")
    return corpus


def test_the_installed_wheel_creates_and_uses_a_store(venv, tmp_path):
    python, _, root = venv
    work = tmp_path / "work"
    work.mkdir()
    assert outside_repo(work)
    db = work / "store.db"
    result = json.loads(run([python, "-c", STORE_SCRIPT, db, write_corpus(work)], cwd=work).stdout)
    venv_dir = python.parent.parent.resolve()
    assert venv_dir in Path(result["file"]).resolve().parents, result["file"]
    assert venv_dir in Path(result["migrations"]).resolve().parents, result["migrations"]
    assert result["revision"] == [[repo_head()]]
    assert result["trained"] == ["trained@1", "trained@2"]
    assert result["vocab_sizes"] == [280, 300]
    assert result["refs"] == ["small@1", "trained@1", "trained@2"]
    assert result["same"] == [True] * 5
    assert not any(entry and not outside_repo(Path(entry)) for entry in result["sys_path"])


def test_the_installed_console_script(venv, wheel, tmp_path):
    python, bin_dir, _ = venv
    with zipfile.ZipFile(wheel) as archive:
        # (an assertion, not a skip: a wheel without its command line is a broken wheel)
        assert "bpestore/cli.py" in archive.namelist(), "the wheel has no bpestore/cli.py: its console script cannot run"
    script = bin_dir / "bpestore"
    assert script.is_file()
    work = tmp_path / "work"
    work.mkdir()
    help_text = run([script, "--help"], cwd=work).stdout
    assert "train" in help_text and "list" in help_text
    version = wheel.name.split("-")[1]
    assert version in run([script, "--version"], cwd=work).stdout
    db = work / "cli.db"
    corpus = write_corpus(work)
    run([script, "train", corpus, "--name", "cli", "--vocab-size", "290", "--special-token", "<|endoftext|>", "--db", db, "-q"], cwd=work)
    listed = json.loads(run([script, "list", "--json", "--db", db], cwd=work).stdout)
    assert [(entry["name"], entry["version"], entry["vocab_size"]) for entry in listed] == [("cli", 1, 290)]
    # what the script wrote is a store the installed library reads
    check = "import sys; from bpestore import Tokenizer; print(Tokenizer.from_db(sys.argv[1], 'cli@1').vocab_size)"
    assert run([python, "-c", check, db], cwd=work).stdout.strip() == "290"
