"""Training through the store against the engine alone, side by side in one run (issue 23's targets).

    python benchmarks/store_train.py --corpus ../shared/corpora/wiki_en_57M.txt --vocab-size 10000
    python benchmarks/store_train.py --corpus big.txt --vocab-size 32000 --repeat 1 --postgres URL

Every row is a whole process, started fresh for each run, as a user runs it (compiled modules
kept: ``PYTHONDONTWRITEBYTECODE`` is removed from the children's environment); the table gives
the median wall time of ``--repeat`` runs (after one untimed warm-up run of each command) and the
peak RSS of the process (``ru_maxrss`` of that child alone, from ``os.wait4``):

* ``train_bpe``: ``bpestore.train_bpe(CORPUS, V, ["<|endoftext|>"], workers=W)``;
* ``bpestore train`` into a fresh SQLite store (the file deleted before each run), and into a
  fresh PostgreSQL database with ``--postgres URL`` (a server whose user may ``CREATE DATABASE``);
* a new vocab size from the stored counts: ``bpestore train`` again on a store that holds the
  corpus's counts and its training at V, at a bigger size (3V/2: the merge loop runs on the
  stored counts) and at a smaller one (V/2: the stored training's merges serve), each against
  ``train_bpe`` at the same size;
* the counts' rows written and read a second, in bulk (``bpestore.store.bulk``), on each backend:
  written in all (on SQLite: staged outside the write lock, then copied under it) and within
  the write transaction alone (what other writers wait for on SQLite);
* the same trainings in one process whose imports are done (``Store.train`` and ``train_bpe``,
  alternately, the first run of each dropped): the store's own cost, without a process's
  start-up (what a user of the Python API pays);
* how long a concurrent writer waits for the store's lock while ``bpestore train`` runs: another
  process saves GPT-2 (the fixture files, 50,257 tokens and 50,000 merges: the write of
  ``bpestore import gpt2``) over and over until the training ends, and reports its longest wait.

Prints a table; writes nothing else. The ratios are what to read: this machine's speed wanders.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from store_backends import postgres_database

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("BPESTORE_SHARED", REPO.parent / "shared"))
SPECIAL = "<|endoftext|>"
ENVIRONMENT = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}

TRAIN_BPE = "import sys, bpestore; bpestore.train_bpe(sys.argv[1], int(sys.argv[2]), [sys.argv[3]], workers=int(sys.argv[4]))"

ROWS = """
import json, sys, time
from bpestore import Store
from bpestore.store import bulk
from bpestore.train.trainer import count_corpus
db, corpus, special = sys.argv[1], sys.argv[2], sys.argv[3]
counts = count_corpus(corpus, [special], workers=2)
result = {}
with Store(db) as store:
    started = time.perf_counter()
    with store._staged_corpus(corpus, counts, False, None) as (connection, staged, report):
        staged_at = time.perf_counter()
        with store._transaction(write=True, on=connection):
            corpus_id = store._insert_corpus(connection, corpus, 0, "bench", "pattern", "[]", staged)
        result["locked_seconds"] = time.perf_counter() - staged_at
    result["write_seconds"] = time.perf_counter() - started
    started = time.perf_counter()
    back = store.pretoken_counts(corpus_id)
    result["read_seconds"] = time.perf_counter() - started
    assert back == counts
result["rows"] = len(counts)
print(json.dumps(result))
"""

IN_ONE_PROCESS = """
import json, os, statistics, sys, time
from bpestore import Store, train_bpe
import bpestore.workflow  # (imports done before anything is timed: the work is)
corpus, vocab, special, workers, repeat, directory = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
bigger = vocab * 3 // 2
times = {"train_bpe": [], "Store.train": [], "train_bpe bigger": [], "Store.train bigger": []}
def timed(key, work):
    started = time.perf_counter()
    work()
    times[key].append(time.perf_counter() - started)
for run in range(repeat + 1):
    timed("train_bpe", lambda: train_bpe(corpus, vocab, [special], workers=workers))
    with Store(os.path.join(directory, f"in-process-{run}.db")) as store:
        timed("Store.train", lambda: store.train(corpus, "t", [vocab], [special], workers=workers))
        timed("Store.train bigger", lambda: store.train(corpus, "t", [bigger], [special], workers=workers))
    timed("train_bpe bigger", lambda: train_bpe(corpus, bigger, [special], workers=workers))
print(json.dumps({key: statistics.median(values[1:]) for key, values in times.items()}))  # the first run warms up
"""

WAITER = """
import json, sys, time
from bpestore import Store, formats
db, vocab, merges, stop = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
model = formats.read("gpt2", vocab, merges, special_tokens=["<|endoftext|>"]).model
waits, saves = [], 0
print("ready", flush=True)
with Store(db, lock_timeout=600) as store:
    import os
    while not os.path.exists(stop):
        ref = store.save("gpt2", model)
        waits.append(store.lock_waited)
        store.delete(ref)
        waits.append(store.lock_waited)
        saves += 1
print(json.dumps({"max_wait": max(waits, default=0.0), "saves": saves}), flush=True)
"""


def run(command: list[str]) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MiB, stdout) of ``command`` as a child process; exits on failure.
    Its output goes to files, so that the parent can wait for it with ``os.wait4``, which gives
    that child's own resource usage."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=out, stderr=err, env=ENVIRONMENT, text=True)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if child.returncode:
            sys.exit(f"failed ({child.returncode}): {' '.join(command)}\n{err.read()}")
        return seconds, usage.ru_maxrss / 1024, out.read()


def median_of(repeat: int, make: Callable[[], list[str]]) -> tuple[float, float]:
    """Median wall seconds and median peak RSS (MiB) of ``repeat`` runs of ``make()`` (which
    prepares a run and returns its command), after one untimed warm-up."""
    run(make())
    runs = [run(make())[:2] for _ in range(repeat)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def bpestore_train(corpus: Path, vocab_size: int, db: str, workers: int, name: str = "bench") -> list[str]:
    return [
        sys.executable, "-m", "bpestore.cli", "train", str(corpus), "--name", name, "--vocab-size", str(vocab_size),
        "--special-token", SPECIAL, "--workers", str(workers), "--db", db, "-q",
    ]


def train_bpe(corpus: Path, vocab_size: int, workers: int) -> list[str]:
    return [sys.executable, "-c", TRAIN_BPE, str(corpus), str(vocab_size), SPECIAL, str(workers)]


def remove_sqlite(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)


def empty_postgres(url: str) -> None:
    """Empty the database of ``url`` (its owner drops and makes its schema again)."""
    import psycopg
    from sqlalchemy.engine import make_url

    with psycopg.connect(make_url(url).set(drivername="postgresql").render_as_string(hide_password=False), autocommit=True) as connection:
        connection.execute("DROP SCHEMA public CASCADE")
        connection.execute("CREATE SCHEMA public")


def lock_wait(corpus: Path, vocab_size: int, db: str, workers: int) -> dict:
    """The longest wait of a writer saving GPT-2 over and over while ``bpestore train`` runs."""
    fixtures = SHARED / "fixtures"
    with tempfile.TemporaryDirectory() as tmp:
        stop = Path(tmp) / "stop"
        waiter = subprocess.Popen(
            [sys.executable, "-c", WAITER, db, str(fixtures / "gpt2_vocab.json"), str(fixtures / "gpt2_merges.txt"), str(stop)],
            stdout=subprocess.PIPE, env=ENVIRONMENT, text=True,
        )
        assert waiter.stdout is not None
        waiter.stdout.readline()  # ready: GPT-2 is read
        seconds, _, _ = run(bpestore_train(corpus, vocab_size, db, workers, name="concurrent"))
        stop.touch()
        result = json.loads(waiter.stdout.readline())
        waiter.wait()
    result["train_seconds"] = seconds
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=SHARED / "corpora" / "wiki_en_57M.txt")
    parser.add_argument("--vocab-size", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--postgres", default=None, help="a PostgreSQL server's URL (its user may CREATE DATABASE)")
    args = parser.parse_args()
    corpus, vocab, workers, repeat = args.corpus.resolve(), args.vocab_size, args.workers, args.repeat
    rows: list[tuple[str, float, float | None, str]] = []

    def row(label: str, seconds: float, rss: float | None, against: str = "") -> None:
        rows.append((label, seconds, rss, against))
        print(f"  {label}: {seconds:.3f} s" + (f", {rss:.0f} MiB" if rss else ""), file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "store.db"
        base_seconds, base_rss = median_of(repeat, lambda: train_bpe(corpus, vocab, workers))
        row("train_bpe", base_seconds, base_rss)

        def fresh_sqlite() -> list[str]:
            remove_sqlite(db)
            return bpestore_train(corpus, vocab, str(db), workers)

        sqlite_seconds, sqlite_rss = median_of(repeat, fresh_sqlite)
        row("bpestore train, fresh SQLite store", sqlite_seconds, sqlite_rss, "train_bpe")
        if args.postgres:
            with postgres_database(args.postgres) as url:

                def fresh_postgres(url: str = url) -> list[str]:
                    empty_postgres(url)
                    return bpestore_train(corpus, vocab, url, workers)

                pg_seconds, pg_rss = median_of(repeat, fresh_postgres)
                row("bpestore train, fresh PostgreSQL database", pg_seconds, pg_rss, "SQLite")

        # A new vocab size from the stored counts (the store holds the training at V).
        remove_sqlite(db)
        run(bpestore_train(corpus, vocab, str(db), workers, name="first"))
        for size, what in ((vocab * 3 // 2, "bigger: the merge loop runs"), (vocab // 2, "smaller: a stored training's merges")):
            fresh, _ = median_of(repeat, lambda size=size: train_bpe(corpus, size, workers))
            row(f"train_bpe at {size:,}", fresh, None)
            again, again_rss = median_of(repeat, lambda size=size: bpestore_train(corpus, size, str(db), workers, name=f"again{size}"))
            row(f"bpestore train at {size:,} from stored counts ({what})", again, again_rss, f"train_bpe at {size:,}")

        # The same work in one process whose imports are done (the Python API's case).
        _, _, out = run([sys.executable, "-c", IN_ONE_PROCESS, str(corpus), str(vocab), SPECIAL, str(workers), str(repeat), tmp])
        in_process = json.loads(out.splitlines()[-1])

        # Rows a second, in bulk.
        remove_sqlite(db)
        _, _, out = run([sys.executable, "-c", ROWS, str(db), str(corpus), SPECIAL])
        sqlite_rows = json.loads(out.splitlines()[-1])
        pg_rows = None
        if args.postgres:
            with postgres_database(args.postgres) as url:
                _, _, out = run([sys.executable, "-c", ROWS, url, str(corpus), SPECIAL])
                pg_rows = json.loads(out.splitlines()[-1])

        # A concurrent writer's wait.
        remove_sqlite(db)
        waits = {"SQLite": lock_wait(corpus, vocab, str(db), workers)}
        if args.postgres:
            with postgres_database(args.postgres) as url:
                waits["PostgreSQL"] = lock_wait(corpus, vocab, url, workers)

    seconds_of = {label: seconds for label, seconds, _, _ in rows}
    rss_of = {label: rss for label, _, rss, _ in rows}
    print(f"corpus {corpus.name} ({corpus.stat().st_size / 1e6:.1f} MB), vocab {vocab:,}, {workers} workers; medians of {repeat} fresh processes")
    print(f"{'':58} {'wall s':>8} {'peak MiB':>9}  ratio")
    for label, seconds, rss, against in rows:
        reference = "bpestore train, fresh SQLite store" if against == "SQLite" else against
        ratio = f"{seconds / seconds_of[reference]:.2f}x {against}" if against else ""
        if against == "train_bpe" and rss and rss_of["train_bpe"]:
            ratio += f" (RSS {rss / rss_of['train_bpe']:.2f}x)"
        print(f"{label:58} {seconds:>8.3f} {rss or 0:>9.0f}  {ratio}")
    print(
        f"in one process, imports done (medians of {repeat}): Store.train into a fresh SQLite store {in_process['Store.train']:.3f} s, "
        f"train_bpe {in_process['train_bpe']:.3f} s: {in_process['Store.train'] / in_process['train_bpe']:.2f}x; "
        f"at {vocab * 3 // 2:,} from the stored counts {in_process['Store.train bigger']:.3f} s, train_bpe "
        f"{in_process['train_bpe bigger']:.3f} s: {in_process['Store.train bigger'] / in_process['train_bpe bigger']:.2f}x"
    )
    for backend, measured in (("SQLite", sqlite_rows), ("PostgreSQL", pg_rows)):
        if measured:
            rows_count = measured["rows"]
            print(
                f"counts on {backend}: {rows_count:,} rows written at {rows_count / measured['write_seconds'] / 1e6:.2f} M rows/s "
                f"({measured['write_seconds']:.3f} s; in the write transaction {rows_count / measured['locked_seconds'] / 1e6:.2f} M rows/s, "
                f"{measured['locked_seconds']:.3f} s), read at {rows_count / measured['read_seconds'] / 1e6:.2f} M rows/s "
                f"({measured['read_seconds']:.3f} s)"
            )
    for backend, measured in waits.items():
        print(
            f"a concurrent GPT-2 save on {backend}: longest wait for the lock {measured['max_wait']:.2f} s "
            f"({measured['saves']} saves and deletes during a {measured['train_seconds']:.1f} s training)"
        )


if __name__ == "__main__":
    main()
