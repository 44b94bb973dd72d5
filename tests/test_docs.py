"""Every example in README.md and docs/ runs, as printed (docs/development.md, "Examples are tests").

Each page is one test: its examples run in order, in a fresh temporary folder, as a reader would
run them from a checkout's root. That folder holds a copy of ``tests/data`` (the parallel corpus)
and, next to it, ``../shared``: the shared data (``$BPESTORE_SHARED``), so that an example may name
``../shared/fixtures/gpt2_vocab.json`` as in a checkout; a page whose examples need it is skipped,
saying so, when it is absent. A file a page names that a reader downloads is put in its folder
too, from installed packages (``PREPARED``), so that an example may import ``cl100k_base.tiktoken``.

- ```` ```python ```` blocks run with sybil, one namespace per page.
- ```` ```console ```` blocks are shell sessions: each line after ``$ `` (with its ``\\``
  continuation lines) is a command, run with bash in the page's folder, where ``bpestore`` is this
  checkout's command line. The lines up to the next ``$ `` are its output (stdout and stderr, as a
  terminal shows them), compared line by line, trailing spaces ignored; a line ``...`` stands for
  any lines (or none), ``...`` inside a line for any text. A command that shows no output must
  succeed; one that shows output may fail (an error's line and status are what it shows).
- A console block after ``<!-- run: servers -->`` holds commands that serve until stopped
  (``bpestore serve``): each runs until it prints an ``http://`` address, that page is fetched (it
  must answer 200 with HTML), then Ctrl-C (SIGINT) stops it; what it printed is checked as above.
- A block after ``<!-- skip: next -->`` is not run (an example that needs a cluster or a
  server): the comment says why in the page's source.
Other blocks (```` ```text ````, ```` ```sql ```` ...) are not examples; the SQL is run by
tests/test_store.py.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from sybil import Document
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser

from conftest import REPO_ROOT, shared_dir

PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
COMMAND_TIMEOUT = 120


def session_commands(source: str) -> list[tuple[str, list[str]]]:
    """A console block's (command, shown output lines), in order."""
    commands: list[tuple[str, list[str]]] = []
    lines = source.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            raise AssertionError(f"a console block's line before any command: {line!r}")
        command = line[2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command + "\n" + lines[i]
        output = []
        i += 1
        while i < len(lines) and not lines[i].startswith("$ "):
            output.append(lines[i])
            i += 1
        commands.append((command, output))
    return commands


def output_pattern(shown: list[str]) -> re.Pattern[str]:
    parts = []
    for line in shown:
        line = line.rstrip()
        if line == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*".join(re.escape(piece) for piece in line.split("...")) + r"\n")
    return re.compile("".join(parts))


def normalized(output: str) -> str:
    lines = [line.rstrip() for line in output.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return "".join(line + "\n" for line in lines)


SERVERS = "<!-- run: servers -->"


def run_server(command: str, env: dict[str, str]) -> tuple[int, str]:
    """Runs ``command`` until it prints an ``http://`` address, fetches that page, then stops it
    with SIGINT (to its process group: bash may or may not exec the command). Its status and
    output; a page that does not answer, or a server that never says where it is, fails."""
    process = subprocess.Popen(
        ["bash", "-c", command], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )
    stdout = process.stdout
    assert stdout is not None
    lines: list[bytes] = []

    def read() -> None:  # in a thread, so that waiting for the address has a timeout
        for line in stdout:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + COMMAND_TIMEOUT  # a hang timeout, not a timing
        while not (found := re.search(rb"http://[^\s/]+/", b"".join(lines))):
            assert time.monotonic() < deadline and process.poll() is None, (
                f"$ {command}\nprinted no address (status {process.poll()}):\n{b''.join(lines).decode('utf-8', 'replace')}"
            )
            time.sleep(0.05)
        address = found.group().decode()
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # (never an http_proxy for loopback)
        with direct.open(address, timeout=COMMAND_TIMEOUT) as response:
            page = response.read().decode("utf-8", "replace")
            assert response.status == 200 and "<html" in page, (command, response.status, page[:500])
        os.killpg(process.pid, signal.SIGINT)
        status = process.wait(timeout=COMMAND_TIMEOUT)
        reader.join(timeout=COMMAND_TIMEOUT)
        return status, b"".join(lines).decode("utf-8", "replace")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def run_session(example) -> str | None:  # type: ignore[no-untyped-def]
    env = example.namespace["__env__"]
    servers = example.document.text[:example.start].rstrip().endswith(SERVERS)
    for command, shown in session_commands(example.parsed):
        if servers:
            status, printed = run_server(command, env)
        else:
            done = subprocess.run(
                ["bash", "-c", command], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, timeout=COMMAND_TIMEOUT, check=False,
            )
            status, printed = done.returncode, done.stdout.decode("utf-8", "replace")
        output = normalized(printed)
        if not shown and status != 0:
            return f"$ {command}\nexited with status {status}:\n{output}"
        if shown and not output_pattern(shown).fullmatch(output):
            expected = "\n".join(shown)
            return f"$ {command}\nshowed:\n{expected}\nprinted (status {status}):\n{output}"
    return None


PARSERS = [PythonCodeBlockParser(), CodeBlockParser("console", run_session), SkipParser()]


def tiktoken_download(name: str, folder: Path) -> None:
    """``folder/NAME.tiktoken``, the file tiktoken downloads for ``name``, from the copy the
    bpe-openai package ships (nothing is downloaded in tests); tiktoken checks it is its own
    (its published SHA-256) as it reads it."""
    from test_interop import bpe_openai_file, tiktoken_encoding

    cache = folder / ".tiktoken-cache"
    cache.mkdir()
    tiktoken_encoding(name, bpe_openai_file(name), cache)
    (cache_file,) = cache.iterdir()
    cache_file.rename(folder / f"{name}.tiktoken")
    cache.rmdir()


# Files a reader would download, by the name a page gives them: made in the page's folder when the
# page names them (or the page is skipped, saying why).
PREPARED = {"cl100k_base.tiktoken": lambda folder: tiktoken_download("cl100k_base", folder)}


def bpestore_command(bin_dir: Path) -> None:
    """``bin_dir/bpestore``: this checkout's command line, as pip's console script runs it."""
    script = bin_dir / "bpestore"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom bpestore.cli import main\n"
        'if __name__ == "__main__":\n    sys.argv[0] = "bpestore"\n    sys.exit(main())\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


@pytest.mark.slow  # subprocesses, a few seconds a page
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO_ROOT)) for p in PAGES])
def test_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    document = Document.parse(str(page), *PARSERS)
    examples = list(document)
    if not examples:
        pytest.skip("no examples on this page")
    if "../shared" in page.read_text(encoding="utf-8") and not shared_dir().is_dir():
        pytest.skip(f"its examples use ../shared: {shared_dir()} not found (set BPESTORE_SHARED)")
    work = tmp_path / "work"
    shutil.copytree(REPO_ROOT / "tests" / "data", work / "tests" / "data")
    for name, prepare in PREPARED.items():
        if name in page.read_text(encoding="utf-8"):
            prepare(work)
    if shared_dir().is_dir():
        (tmp_path / "shared").symlink_to(shared_dir())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    bpestore_command(bin_dir)
    pythonpath = os.pathsep.join(p for p in [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")] if p)
    env = {key: value for key, value in os.environ.items() if not key.startswith("BPESTORE_")}
    env |= {"PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", "PYTHONPATH": pythonpath, "COLUMNS": "200"}
    monkeypatch.chdir(work)
    for key in [key for key in os.environ if key.startswith("BPESTORE_")]:
        monkeypatch.delenv(key)
    document.namespace["__env__"] = env
    for example in examples:
        example.evaluate()


def test_every_block_not_run_says_why() -> None:
    """A shell block that is not a session (```` ```bash ````, ```` ```sh ````) and a Python block
    that is skipped each follow a ``<!-- not run: REASON -->`` comment: nothing escapes the tests
    unnoticed."""
    unexplained = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            fence = re.fullmatch(r"```(bash|sh|shell|python)\b.*", line)
            if not fence:
                continue
            before = [other.strip() for other in lines[max(0, number - 2):number]]
            skipped = "<!-- skip: next -->" in before
            if fence.group(1) == "python" and not skipped:
                continue
            if not any(re.fullmatch(r"<!-- not run: .+ -->", other) for other in before):
                unexplained.append(f"{page.relative_to(REPO_ROOT)}:{number + 1}")
    assert not unexplained, f"blocks not run without a reason: {unexplained}"
