"""Encoding one huge pre-token takes memory in proportion to it, a few tens of bytes per byte, not
hundreds (issue 13: the Python engine took 469 MB for ``"a" * 2_000_000`` and 903 MB for a 5 MB
line without spaces).

Each case runs in a fresh Python process that builds its text cheaply, notes its peak RSS, encodes,
and reports how much the peak grew: the memory the encoding took beyond what the process had
used. The bounds are generous (several times what the engine takes) and well below the old
figures; timings are the benchmarks' business, not these tests'.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpt2_tiktoken import gpt2_encoding

# The slow tier (python3 -m pytest -m 'not slow' leaves it out): memory measured in a child process.
pytestmark = pytest.mark.slow

MB = 1 << 20

MEASURE = r"""
import json, resource, sys
sys.path.insert(0, sys.argv[3])
from gpt2_tiktoken import gpt2_vocab_and_merges
from bpestore import Tokenizer

vocab, merges = gpt2_vocab_and_merges()
tokenizer = Tokenizer(vocab, merges, ["<|endoftext|>"])
tokenizer.encode("warm up: the tables are built")
kind, n = sys.argv[1], int(sys.argv[2])
if kind == "repeat":
    text = "a" * n
else:  # n random lower-case letters: one piece of n bytes, no space anywhere
    import random
    letters = bytes(range(97, 123)) * 10
    text = random.Random(0).randbytes(n).translate(letters[:256]).decode("ascii")
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
before = peak()
ids = tokenizer.encode(text)
print(json.dumps({"grew": peak() - before, "ids": len(ids), "head": ids[:50]}))
"""


def measure(kind: str, n: int, tests_dir: str) -> dict:
    result = subprocess.run([sys.executable, "-c", MEASURE, kind, str(n), tests_dir], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB (Linux)")
@pytest.mark.parametrize(
    "kind, n, bound_mb, old_mb",
    [("repeat", 2_000_000, 150, 469), ("letters", 5_000_000, 300, 903)],
)
def test_one_huge_piece_is_encoded_in_memory_proportional_to_it(kind, n, bound_mb, old_mb, request):
    gpt2_encoding()  # skips when the GPT-2 fixture files are absent
    measured = measure(kind, n, str(request.path.parent))
    assert measured["grew"] < bound_mb * MB, f"{kind}: {measured['grew'] / MB:.0f} MB (the old engine: {old_mb} MB)"
    # and the ids are the real ones (tiktoken's), so the memory was spent on the real work
    text = "a" * n if kind == "repeat" else None
    if text is not None:
        expected = gpt2_encoding().encode_ordinary(text)
        assert (measured["ids"], measured["head"]) == (len(expected), expected[:50])
    assert measured["ids"] > n / 10
