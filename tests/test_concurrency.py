"""Shared objects under a burst of concurrent use: the web explorer's server (SQLite and PostgreSQL
stores) and a ``Store`` shared by threads.

A threaded server handles each request on a thread of its own; whatever those threads share (the
store's connections, loaded tokenizers) must never be used by two at once. The server runs in a
process of its own here, so that a crash (a segmentation fault of a C extension misused from
threads) shows as its exit status, not as a dead test runner.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from urllib.parse import quote

import pytest

from bpestore import Store, Tokenizer
from bpestore.errors import StoreError
from postgres import fresh_database

# The slow tier (python3 -m pytest -m 'not slow' leaves it out): a server under bursts.
pytestmark = [
    pytest.mark.slow,
    # (small corpora trained many times over: their short vocabularies are not the subject here)
    pytest.mark.filterwarnings("ignore::bpestore.train.trainer.VocabSizeNotReachedWarning"),
]

ENDOFTEXT = "<|endoftext|>"
BURST = 200
TEXT = "the cat sat on the mat. hello world, tokens are fun! naïve café 中文 😀\n" * 40


def make_store(db) -> None:
    """A store (a path or URL) holding cat@1 and cat@2, trained on a small corpus."""
    with Store(db) as store:
        store.train_from_counts(
            {word.encode(): count for word, count in Counter(re.findall(r" ?\w+| ?[^\w\s]+|\s+", TEXT * 3)).items()},
            "cat", [300, 350], [ENDOFTEXT],
        )


def page_urls(port: int) -> list[str]:
    base = f"http://127.0.0.1:{port}"
    return [
        f"{base}/", f"{base}/tokenizer?ref=cat@1", f"{base}/vocab?ref=cat@2&page=1", f"{base}/merges?ref=cat@2&q=at",
        f"{base}/versions?name=cat", f"{base}/playground?t=cat@1&t=cat@2&text={quote(TEXT[:300])}",
        f"{base}/diff?a=cat@1&b=cat@2",
    ]


def fetch_status(url: str) -> int | str:
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError as error:  # refused, reset: the server is gone
        return type(error).__name__


@contextmanager
def serving(db) -> Iterator[tuple[subprocess.Popen, int]]:
    """``bpestore serve --port 0`` on ``db`` in a process of its own; yields it and its port."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bpestore.cli", "serve", "--port", "0", "--db", str(db)],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )
    try:
        line = process.stderr.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, line + process.stderr.read()
        yield process, int(match.group(1))
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=60)
        process.stderr.close()


def burst(urls: list[str], count: int) -> Counter:
    """``count`` requests at once (each on a thread of its own, cycling through ``urls``), with
    their statuses counted."""
    start = threading.Barrier(count)

    def one(index: int) -> int | str:
        start.wait()
        return fetch_status(urls[index % len(urls)])

    with ThreadPoolExecutor(max_workers=count) as pool:
        return Counter(pool.map(one, range(count)))


def check_server_survives_a_burst(db) -> None:
    make_store(db)
    with serving(db) as (process, port):
        urls = page_urls(port)
        statuses = burst(urls, BURST)
        assert statuses == Counter({200: BURST}), statuses
        assert process.poll() is None, f"the server died with status {process.returncode}"
        # ... and it goes on answering, a second burst included.
        assert [fetch_status(url) for url in urls] == [200] * len(urls)
        assert burst(urls, BURST // 2) == Counter({200: BURST // 2})
        assert process.poll() is None


def test_the_server_survives_a_burst_of_concurrent_requests_on_sqlite(tmp_path):
    check_server_survives_a_burst(tmp_path / "store.db")


def test_the_server_survives_a_burst_of_concurrent_requests_on_postgresql():
    with fresh_database() as url:
        check_server_survives_a_burst(url)


@pytest.mark.parametrize(
    "query",
    [
        "/vocab?ref=cat&id=99999999999999999999", "/vocab?ref=cat&page=4611686018427387904", "/vocab?ref=cat&page=-1",
        "/vocab?ref=cat&id=2147483648", "/merges?ref=cat&rank=99999999999999999999", "/merges?ref=cat&page=1e30",
        "/vocab?ref=cat&id=abc", "/merges?ref=cat&rank=-5",
    ],
)
def test_out_of_range_numbers_are_a_400_page(tmp_path, query):
    pytest.importorskip("flask", reason="the web extra is not installed")
    from bpestore.web import create_app

    make_store(tmp_path / "store.db")
    response = create_app(tmp_path / "store.db").test_client().get(query)
    assert response.status_code == 400, response.data[:300]
    assert b"must be a whole number from 0 to 2,147,483,647" in response.data


def test_the_largest_id_and_a_page_past_the_end_are_fine(tmp_path):
    pytest.importorskip("flask", reason="the web extra is not installed")
    from bpestore.web import create_app

    make_store(tmp_path / "store.db")
    client = create_app(tmp_path / "store.db").test_client()
    for query in ("/vocab?ref=cat&id=2147483647", "/vocab?ref=cat&page=2147483647", "/merges?ref=cat&rank=2147483647"):
        assert client.get(query).status_code == 200, query


def test_a_store_shared_by_threads_loads_and_lists_at_once(tmp_path):
    """A data loader's threads sharing one ``Store``: each load gets a connection of its own
    from the store's pool; every thread gets the same answers as one thread alone."""
    db = tmp_path / "store.db"
    make_store(db)
    with Store(db) as store:
        expected_ids = store.load("cat@2").encode(TEXT)
        expected_refs = store.refs()

        def work(index: int) -> tuple[list[int], list[str]]:
            tokenizer = store.load("cat@2" if index % 2 else "cat")
            return tokenizer.encode(TEXT), store.refs()

        with ThreadPoolExecutor(max_workers=16) as pool:
            results = list(pool.map(work, range(64)))
    assert all(result == (expected_ids, expected_refs) for result in results)


def test_a_tokenizer_shared_by_threads_encodes_as_one_thread_does(tmp_path):
    db = tmp_path / "store.db"
    make_store(db)
    tokenizer = Tokenizer.from_db(db, "cat@2")
    texts = [TEXT[i:] + str(i) for i in range(64)]
    expected = [tokenizer.encode(text) for text in texts]
    fresh = Tokenizer.from_db(db, "cat@2")  # cold caches, filled by all the threads at once
    with ThreadPoolExecutor(max_workers=16) as pool:
        assert list(pool.map(fresh.encode, texts)) == expected


def test_an_in_memory_store_refuses_other_threads_with_one_clear_error():
    """An in-memory store is one SQLite connection: another thread is refused, never handed the
    connection (nor an empty database of its own, SQLAlchemy's default)."""
    with Store("sqlite://") as store:
        make_store_in(store)
        errors: list[BaseException] = []

        def other_thread() -> None:
            try:
                store.list()
            except BaseException as error:  # noqa: BLE001 - recorded for the assertion
                errors.append(error)

        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        assert len(errors) == 1 and isinstance(errors[0], StoreError), errors
        assert "only from the thread that opened it" in str(errors[0])
        assert store.refs() == ["cat@1"]  # the owner goes on


def make_store_in(store: Store) -> None:
    store.train_from_counts({b" the": 5, b" cat": 3, b"hat": 2}, "cat", [260])
