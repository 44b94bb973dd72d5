"""Shared test helpers: where the fixture files and corpora live.

Data that is not in the repository (GPT-2 files, reference training results, benchmark corpora) is
found under one directory: ``$BPESTORE_SHARED``, by default ``../shared`` next to the repository.
Tests that need it skip with a message saying what is missing and where it was looked for.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

import tiers

# The engine's tests call bpestore._engine itself; its errors are the project's classes once
# bpestore.engine, the package's one door to it, has handed them over (as any use of the package
# does first).
import bpestore.engine  # noqa: F401

REPO_ROOT = Path(__file__).resolve().parent.parent

# The fast tier's default for property tests that do not say how many examples they run
# (hypothesis's own default, 100, otherwise).
settings.register_profile("fast", max_examples=10)


def pytest_configure(config: pytest.Config) -> None:
    """``-m "not slow"`` is the fast tier (tests/tiers.py): set before the test modules load."""
    if "not slow" in (config.getoption("markexpr") or ""):
        tiers.fast = True
        settings.load_profile("fast")


def shared_dir() -> Path:
    return Path(os.environ.get("BPESTORE_SHARED", REPO_ROOT.parent / "shared")).resolve()


def shared_file(*parts: str) -> Path:
    """A file under the shared data directory, or skip the test saying which file is missing."""
    path = shared_dir().joinpath(*parts)
    if not path.is_file():
        pytest.skip(f"{path} not found (set BPESTORE_SHARED to the directory holding fixtures/ and corpora/)")
    return path


@pytest.fixture
def fixture_path():
    """``fixture_path("corpus.en")`` -> Path of a file in the shared fixtures, or skip."""
    return lambda name: shared_file("fixtures", name)


@pytest.fixture
def corpus_path():
    """``corpus_path("wiki_en_57M.txt")`` -> Path of a benchmark corpus, or skip."""
    return lambda name: shared_file("corpora", name)
