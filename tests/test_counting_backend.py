"""The seam of counting (issue 11 section 5): ``Store.train(..., counting=backend)`` trains on what
the backend counts, whatever it is; the in-process backend counts exactly as tests/reference.py.
(Dask's backend gives the same counts: tests/test_dask_count.py.)"""

from __future__ import annotations

from collections import Counter

import pytest

from bpestore import Store, train_bpe
from bpestore.train.backends import CountingBackend, InProcessCounting
from bpestore.train.counts import Counts, train_bpe_from_counts
from reference import reference_pretoken_counts

ENDOFTEXT = "<|endoftext|>"


def counts_of(table: dict[bytes, int], special_tokens) -> Counts:
    from bpestore._engine import PretokenCounts

    return Counts(PretokenCounts.from_dict(table), special_tokens=special_tokens, source="a table")


def test_a_fake_backend_plugs_in_and_its_counts_are_trained(tmp_path):
    table = {b"low": 5, b" lower": 2, b" newest": 6, b" widest": 3}  # CS336's example
    calls = []

    class Fake:
        def count(self, corpus, special_tokens=(), *, pattern, progress=False):
            calls.append((corpus, list(special_tokens), progress))
            return counts_of(table, special_tokens)

    assert isinstance(Fake(), CountingBackend)
    with Store(tmp_path / "s.db") as store:
        [ref] = store.train("not/a/file/the/backend/reads", "fake", 262, [ENDOFTEXT], counting=Fake())
        model = store.load_model(ref)
        info = store.info(ref)
    assert calls == [("not/a/file/the/backend/reads", [ENDOFTEXT], False)]
    assert model.merges == train_bpe_from_counts(table, 262, [ENDOFTEXT])[1]
    assert len(model.merges) == 262 - 256 - 1
    assert (info.corpus_path, info.corpus_origin) == ("a table", "counts")


def test_a_backend_must_return_counts(tmp_path):
    class Wrong:
        def count(self, corpus, special_tokens=(), *, pattern, progress=False):
            return {b"a": 1}

    with Store(tmp_path / "s.db") as store:
        with pytest.raises(TypeError, match="returns Counts"):
            store.train("x", "w", 300, counting=Wrong())


def test_in_process_counting_is_the_reference_and_trains_as_train_bpe(tmp_path, fixture_path):
    corpus = fixture_path("tinystories_sample.txt")
    counts = InProcessCounting(workers=2).count(corpus, [ENDOFTEXT])
    assert isinstance(counts, Counts) and counts.special_tokens == (ENDOFTEXT,) and counts.source == str(corpus)
    text = corpus.read_text(encoding="utf-8")
    assert dict(counts.items()) == dict(Counter(reference_pretoken_counts(text, [ENDOFTEXT])))
    with Store(tmp_path / "s.db") as store:
        [ref] = store.train(corpus, "t", 300, [ENDOFTEXT], counting=InProcessCounting())
        assert store.load_model(ref).merges == train_bpe(corpus, 300, [ENDOFTEXT])[1]
