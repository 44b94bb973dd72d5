"""How long the explorer's playground takes to render a long text: what its size guard
(``MAX_TEXT_BYTES`` in bpestore/web/views.py) and its token rendering trade.

    python benchmarks/playground_render.py                 # 100 KB of text, GPT-2 and a 1,000-token tokenizer
    python benchmarks/playground_render.py --kb 100 --repeat 5
    python benchmarks/playground_render.py --browser       # also in headless Chromium (Selenium)

It makes a throwaway store (GPT-2 from the shared fixtures, if present, and a small tokenizer
trained on the start of the text), then times whole requests through Flask's test client: the
page for the text with the guard lifted (every byte tokenized and shown), and with the guard as
configured (the text cut). The first request of each tokenizer (loading it) is not timed.
With ``--browser``, also the time from a change of the text in the page to its tokens laid out
on screen (the script's request, the new results put in the page, the browser's layout), in
headless Chromium, for the text cut by the guard and with the guard lifted.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import threading
import statistics
import tempfile
import time
from pathlib import Path

from bpestore import Store, Tokenizer
from bpestore.web import close_app, create_app, make_server, views

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("BPESTORE_SHARED", HERE.parent.parent / "shared"))
MIXED = "Tokenizers split text: naïve café, 中文字, Привет мир, emoji 👍🏽.\n\tIndented line.  Two spaces.\n"


def sample_text(size: int) -> str:
    """About ``size`` bytes of English (the shared TinyStories sample, if present) with some
    other scripts, tabs and newlines mixed in."""
    story = SHARED / "fixtures" / "tinystories_sample.txt"
    base = story.read_text(encoding="utf-8") if story.is_file() else "Once upon a time there was a little cat. " * 200
    pieces, total = [], 0
    while total < size:
        for chunk in (base[:4000], MIXED):
            pieces.append(chunk)
            total += len(chunk.encode())
    return "".join(pieces).encode()[:size].decode("utf-8", errors="ignore")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=int, default=100, help="text size in KB (1,000 bytes; default 100)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--browser", action="store_true", help="also time the page in headless Chromium")
    args = parser.parse_args()
    text = sample_text(args.kb * 1000)
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "store.db"
        corpus = Path(folder) / "corpus.txt"
        corpus.write_text(text[:50_000], encoding="utf-8")
        refs = []
        with Store(db) as store:
            fixtures = SHARED / "fixtures"
            if (fixtures / "gpt2_vocab.json").is_file():
                store.save("gpt2", Tokenizer.from_files(fixtures / "gpt2_vocab.json", fixtures / "gpt2_merges.txt", ["<|endoftext|>"]))
                refs.append("gpt2@1")
            store.train(corpus, "small", [1000], ["<|endoftext|>"], workers=1)
            refs.append("small@1")
        app = create_app(db)
        client = app.test_client()
        try:
            print(f"text: {len(text.encode()):,} bytes, {len(text):,} characters; tokenizers: {', '.join(refs)}")
            for label, limit in (("guard lifted", 10**9), (f"guard at {views.MAX_TEXT_BYTES:,} bytes", views.MAX_TEXT_BYTES)):
                saved = views.MAX_TEXT_BYTES
                views.MAX_TEXT_BYTES = limit
                try:
                    for ref_set in ([ref] for ref in refs):
                        data = {"t": ref_set, "text": text}
                        client.post("/playground", data=data)  # loads the tokenizer
                        times, size = [], 0
                        for _ in range(args.repeat):
                            started = time.perf_counter()
                            response = client.post("/playground", data=data)
                            times.append(time.perf_counter() - started)
                            assert response.status_code == 200, response.status_code
                            size = len(response.data)
                        print(f"{label:>28}  {','.join(ref_set):>10}: median {statistics.median(times):.3f} s "
                              f"(min {min(times):.3f}, max {max(times):.3f}), page {size / 1e6:.1f} MB")
                finally:
                    views.MAX_TEXT_BYTES = saved
        finally:
            close_app(app)
        if args.browser:
            in_browser(db, refs, text, args.repeat)


# Puts the text in the page as typing would, then resolves once the results are in and laid out.
_CHANGE = """
const [text, done] = [arguments[0], arguments[arguments.length - 1]];
const results = document.getElementById("results");
const before = Number(results.dataset.updates || 0);
const started = performance.now();
const area = document.getElementById("text");
area.value = text;
area.form.requestSubmit();
const check = () => {
  if (Number(results.dataset.updates || 0) > before) {
    document.body.getBoundingClientRect();  // layout
    requestAnimationFrame(() => setTimeout(() => done(performance.now() - started), 0));
  } else {
    setTimeout(check, 5);
  }
};
check();
"""


def in_browser(db: Path, refs: list[str], text: str, repeat: int) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # (not a line per request)
    server = make_server(db, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("google-chrome") or ""
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=shutil.which("chromedriver")))
    driver.set_script_timeout(120)
    try:
        for label, limit in ((f"guard at {views.MAX_TEXT_BYTES:,} bytes", views.MAX_TEXT_BYTES), ("guard lifted", 10**9)):
            saved = views.MAX_TEXT_BYTES
            views.MAX_TEXT_BYTES = limit
            try:
                for ref in refs:
                    driver.get(f"http://127.0.0.1:{server.server_port}/playground?t={ref}")
                    driver.execute_async_script(_CHANGE, text)  # (loads the tokenizer)
                    times = []
                    for index in range(repeat):
                        driver.execute_async_script(_CHANGE, "x")
                        times.append(driver.execute_async_script(_CHANGE, text + " " * (index % 2)) / 1000)
                    height = driver.execute_script("return document.documentElement.scrollHeight")
                    print(f"{'browser, ' + label:>28}  {ref:>10}: median {statistics.median(times):.3f} s "
                          f"(min {min(times):.3f}, max {max(times):.3f}), page {height:,} px high")
            finally:
                views.MAX_TEXT_BYTES = saved
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()
        close_app(server.app)


if __name__ == "__main__":
    main()
