"""The store on PostgreSQL against the store on SQLite: train, save, load and rm, one run each.

    python benchmarks/store_backends.py --postgres postgresql://postgres@127.0.0.1:5433/postgres
    python benchmarks/store_backends.py --postgres URL --corpus ../shared/corpora/sotu_11M.txt --vocab-size 5000

The PostgreSQL URL names a server and a database whose user may ``CREATE DATABASE``: the benchmark
works in a new database of its own there (dropped afterwards), and in a SQLite file in a temporary
directory. Steps, timed in this process with ``time.perf_counter`` (one run each: the point is the
ratio, and what a user waits for):

* ``train``: ``Store.train`` on the corpus (counting, storing its pre-token counts, merging,
  storing the tokenizer); the counting and merging are the same work on both backends;
* ``save gpt2``: ``Store.save`` of GPT-2 (from the fixture files; 50,257 tokens, 50,000 merges);
* ``load gpt2``: ``Tokenizer.from_db`` of it (a fresh connection each time);
* ``rm gpt2``: ``Store.delete`` of it (vocab, merges and packed copy cascade);
* ``rm trained``: ``Store.delete`` of the trained tokenizer (its corpus and counts go too).

Prints a table (seconds, and PostgreSQL / SQLite) and writes nothing else.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("BPESTORE_SHARED", REPO.parent / "shared"))


@contextmanager
def postgres_database(url: str) -> Iterator[str]:
    """A new database on the server of ``url``, dropped afterwards."""
    import psycopg
    from sqlalchemy.engine import make_url

    server = make_url(url).set(drivername="postgresql")
    name = f"bpestore_bench_{secrets.token_hex(4)}"
    conninfo = server.render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(url).set(drivername="postgresql+psycopg", database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(conninfo, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_steps(where: str | Path, corpus: Path, vocab_size: int, workers: int) -> dict[str, float]:
    from bpestore import Store, Tokenizer

    fixtures = SHARED / "fixtures"
    gpt2 = Tokenizer.from_files(fixtures / "gpt2_vocab.json", fixtures / "gpt2_merges.txt", ["<|endoftext|>"])
    seconds: dict[str, float] = {}

    def timed(step: str, call):
        started = time.perf_counter()
        result = call()
        seconds[step] = time.perf_counter() - started
        print(f"  {step}: {seconds[step]:.3f} s", file=sys.stderr, flush=True)
        return result

    with Store(where) as store:
        (trained,) = timed("train", lambda: store.train(corpus, "bench", vocab_size, ["<|endoftext|>"], workers=workers))
        ref = timed("save gpt2", lambda: store.save("gpt2", gpt2))
    loaded = timed("load gpt2", lambda: Tokenizer.from_db(where, ref))
    assert loaded.vocab == gpt2.vocab and loaded.merges == gpt2.merges
    with Store(where) as store:
        timed("rm gpt2", lambda: store.delete(ref))
        timed("rm trained", lambda: store.delete(trained))
        assert store.refs() == []
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", default=os.environ.get("BPESTORE_TEST_POSTGRES_URL"), help="a PostgreSQL server's URL")
    parser.add_argument("--corpus", type=Path, default=SHARED / "corpora" / "sotu_11M.txt")
    parser.add_argument("--vocab-size", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if not args.postgres:
        parser.error("give --postgres URL (or set BPESTORE_TEST_POSTGRES_URL)")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        print("SQLite:", file=sys.stderr)
        results["sqlite"] = run_steps(Path(tmp) / "store.db", args.corpus, args.vocab_size, args.workers)
    with postgres_database(args.postgres) as url:
        print("PostgreSQL:", file=sys.stderr)
        results["postgresql"] = run_steps(url, args.corpus, args.vocab_size, args.workers)
    print(f"corpus {args.corpus.name}, vocab {args.vocab_size}, workers {args.workers}; one run each")
    print(f"{'step':<12} {'SQLite s':>9} {'PostgreSQL s':>13} {'PG / SQLite':>12}")
    for step, sqlite_seconds in results["sqlite"].items():
        pg_seconds = results["postgresql"][step]
        print(f"{step:<12} {sqlite_seconds:>9.3f} {pg_seconds:>13.3f} {pg_seconds / sqlite_seconds:>11.2f}x")


if __name__ == "__main__":
    main()
