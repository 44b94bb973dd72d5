"""benchmarks/warm_start.py, the first pass from a stored warm table against a cold one: it runs
end to end on a small text, with a baseline package beside this one, and refuses a baseline
directory that holds no package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import shared_dir, shared_file

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "warm_start.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "BPESTORE_SHARED": str(shared_dir())}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600, env=environment)


def test_every_row_including_a_baseline_runs_and_agrees() -> None:
    shared_file("fixtures", "gpt2_vocab.json")
    corpus = shared_file("fixtures", "corpus.en")
    # This checkout as its own baseline: its bpestore/ holds the engine built in place.
    result = run("--corpus", str(corpus), "--encode-mb", "0.05", "--repeat", "1", "--entries", "1000",
                 "--baseline", str(REPO))
    assert result.returncode == 0, result.stderr
    assert "ids identical in every row" in result.stdout
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines() if line.split()}
    assert {"cold", "db-vocab", "db-corpus", "second-pass", "baseline"} <= rows.keys(), result.stdout
    assert "x baseline" in result.stdout
    # The ratio columns are each row's speed over the cold row's and over the baseline's (a
    # printed MB/s is rounded to 0.1, hence the tolerance); not the baseline against itself,
    # which is 1.00 by construction and would pass whatever the ratios were.
    speed = {row: float(cells[-3].replace(",", "")) for row, cells in rows.items() if row in {"cold", "db-vocab", "db-corpus", "baseline", "second-pass"}}
    for row in speed:
        x_cold, x_baseline = (float(cell.replace(",", "")) for cell in rows[row][-2:])
        assert x_cold == pytest.approx(speed[row] / speed["cold"], rel=0.05, abs=0.02), rows[row]
        assert x_baseline == pytest.approx(speed[row] / speed["baseline"], rel=0.05, abs=0.02), rows[row]


def test_a_baseline_without_a_package_is_refused(tmp_path: Path) -> None:
    shared_file("fixtures", "gpt2_vocab.json")
    result = run("--corpus", str(shared_file("fixtures", "corpus.en")), "--baseline", str(tmp_path))
    assert result.returncode != 0
    assert f"{tmp_path} holds no bpestore package" in result.stderr
