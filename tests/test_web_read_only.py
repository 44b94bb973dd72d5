"""The web explorer reads a WAL store in a read-only directory (issue 13 leftovers): its
ReadOnlyStore opened SQLite with plain ``mode=ro``, which needs a ``-shm`` file that a read-only
directory cannot hold; now it reads such a file as the store package does (``immutable=1``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

SCRIPT = """
import hashlib, sys
from pathlib import Path
from bpestore import Store, Tokenizer
from bpestore.web.data import Explorer
directory = Path(sys.argv[1])
db = directory / "s.db"
tokenizer = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")], ["<|x|>"])
with Store(db) as store:
    store.save("t", tokenizer)
assert store.is_sqlite
db.chmod(0o444)
directory.chmod(0o555)
def state():
    return sorted(p.name for p in directory.iterdir()), hashlib.sha256(db.read_bytes()).hexdigest()
before = state()
try:
    explorer = Explorer(db)
    try:
        assert [info.ref for info in explorer.list()] == ["t@1"]
        info, loaded = explorer.tokenizer("t@1")
        assert loaded.encode("abab<|x|>") == tokenizer.encode("abab<|x|>")
    finally:
        explorer.close()
    assert state() == before, (before, state())
finally:
    directory.chmod(0o755)
print("ok")
"""


def test_the_explorer_reads_a_wal_store_in_a_read_only_directory(tmp_path):
    command = [sys.executable, "-c", SCRIPT, str(tmp_path)]
    if IS_ROOT:  # root writes through chmod: run without the capabilities that allow it
        if shutil.which("setpriv") is None:
            pytest.skip("as root, chmod stops nothing, and setpriv (to drop root's capabilities) is missing")
        command = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", *command]
    env = {key: value for key, value in os.environ.items() if key not in {"BPESTORE_DB", "BPESTORE_DEBUG"}}
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    if IS_ROOT and "Operation not permitted" in result.stderr and "setpriv" in result.stderr:
        pytest.skip("setpriv cannot drop capabilities here")
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
