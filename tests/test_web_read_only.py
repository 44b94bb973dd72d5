"""The web explorer reads a WAL store in a read-only directory (issue 13 leftovers): its
ReadOnlyStore opened SQLite with plain ``mode=ro``, which needs a ``-shm`` file that a read-only
directory cannot hold; now it reads such a file as the store package does (``immutable=1``)."""

from __future__ import annotations

from test_store_deployed import run_where_chmod_holds

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
    run_where_chmod_holds(SCRIPT, str(tmp_path))
