"""SuperBPE (Liu et al., 2025): trainings in two stages, against the reference (tests/reference.py),
on random corpora in several scripts; its stage-2 pre-tokenizer against the definition of its
repository; the recipe's round trip; the counts of each stage reused; encoding as its tokenizers do;
bad input."""

from __future__ import annotations

import hashlib
import tempfile
import tomllib
import warnings
from pathlib import Path

import pytest
import regex
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bpestore import Store, Tokenizer, _engine
from conftest import shared_file
from bpestore.engine import learn_merges
from bpestore.errors import RecipeError
from bpestore.pretokenize.patterns import CL100K_PATTERN, GPT2_PATTERN, SUPERBPE_PATTERN
from bpestore.train.recipe import recipe_from_toml
from bpestore.train.sources import count_strings
from bpestore.train.trainer import VocabSizeNotReachedWarning
from bpestore.workflow import Stage, superbpe_stages
from reference import (
    bpe,
    merge_pair,
    reference_encode,
    reference_merges,
    reference_train,
    reference_train_stages,
    split_on_specials,
    stage_pretokens,
    superbpe_pretokenize,
)
from strategies import ENDOFTEXT, SPECIAL_TOKEN_SETS, texts
from test_cli import assert_user_error, invoke, ok
from test_engine_pretokenize import comparable
from tiers import examples

# Words that repeat across spaces and punctuation, so that stage 2 has superwords to find, in
# several scripts; digits, colons, newlines and punctuation runs, which its pre-tokenizer cuts at.
PHRASES = [
    "of the", " of the", "in the", " it is", "Привет мир", " 中文 字", "مرحبا بك", "a b", " a b c d e", "x: y", ": ",
    "Note: see", " 42 ", "1999", ", and", ". The", "!!", " ...", "\n", "\n\n", "  ", " \t", "(a)", "don't", "e\u0301 e",
]
corpora = st.lists(
    st.one_of(st.sampled_from(PHRASES), texts(max_pieces=3, assigned_only=True)), min_size=1, max_size=40,
).map("".join).map(comparable)


def stored_training(text: str, stages, specials: list[str], **options) -> tuple[dict, list, Store | None]:
    with tempfile.TemporaryDirectory() as directory:
        corpus = Path(directory) / "corpus.txt"
        corpus.write_bytes(text.encode("utf-8"))
        with Store(Path(directory) / "store.db") as store, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (a random text may hold fewer merges than asked for)
            (ref,) = store.train(corpus, "s", special_tokens=specials, stages=stages, **options)
            model = store.load_model(ref)
    return model.vocab, model.merges, model.pattern


# -- the stage-2 pre-tokenizer ------------------------------------------------------------------


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(texts(assigned_only=True), corpora).map(comparable))
def test_the_superbpe_pattern_is_the_repositorys_stage_2(text):
    """The engine's pieces with ``superbpe`` are those of SuperBPE's training: its regex as
    Hugging Face's ``Split(isolated)`` applies it, line by line, cut after ``": "``."""
    expected = superbpe_pretokenize(text)
    scanner = _engine.Pretokenizer(SUPERBPE_PATTERN, [])
    assert scanner.uses_scanner and not scanner.split_safe
    assert [piece.encode("utf-8") for piece in scanner.pretokenize(text)] == expected
    assert [piece.encode("utf-8") for piece in _engine.Pretokenizer(SUPERBPE_PATTERN, [], regex_engine=True).pretokenize(text)] == expected
    assert [piece.encode("utf-8") for piece in regex.findall(SUPERBPE_PATTERN, text)] == expected


def test_the_engine_knows_the_pattern_byte_for_byte():
    assert _engine.SUPERBPE_PATTERN == SUPERBPE_PATTERN


def test_the_superbpe_pieces_by_hand():
    pieces = [piece.decode() for piece in superbpe_pretokenize("Note: the  cat, said \"hi!!\" 12345 x\n\nyes...\nok")]
    assert pieces == ["Note:", " the", " ", " cat, said \"hi", "!!\"", " ", "123", "45", " x\n", "\n", "yes", "...\n", "ok"]


# -- training in stages against the reference --------------------------------------------------


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=corpora,
    specials=st.sampled_from(SPECIAL_TOKEN_SETS),
    pattern=st.sampled_from(["gpt2", "cl100k_base"]),
    first=st.integers(0, 30),
    more=st.integers(0, 30),
    max_words=st.sampled_from([None, 1, 2, 4]),
    at=st.sampled_from(["start", "end"]),
    tie_break=st.sampled_from(["cs336", "huggingface"]),
)
def test_stages_through_the_store_are_the_references(text, specials, pattern, first, more, max_words, at, tie_break):
    regex_of = {"gpt2": GPT2_PATTERN, "cl100k_base": CL100K_PATTERN}[pattern]
    assume(stage_pretokens(text, specials, regex_of))  # nothing to train on is refused (test_training.py)
    t = 256 + len(specials) + first
    size = t + more
    expected = reference_train_stages(
        text, [(regex_of, t, None), ("superbpe", size, max_words)], specials, special_tokens_at=at, tie_break=tie_break,
    )
    vocab, merges, stored_pattern = stored_training(
        text, [Stage(t, pattern), Stage(size, "superbpe", max_words)], specials, special_tokens_at=at, tie_break=tie_break,
    )
    assert merges == expected[1]
    assert vocab == expected[0]
    assert stored_pattern == SUPERBPE_PATTERN


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=corpora, first=st.integers(0, 60), more=st.integers(0, 60), max_words=st.sampled_from([None, 1, 3]),
       tie_break=st.sampled_from(["cs336", "huggingface"]))
def test_the_merge_loop_continues_a_base_as_the_reference_does(text, first, more, max_words, tie_break):
    """The engine's loop from given merges on given words (the encoder's split of the words, or the
    replay when the base has a token twice) against the reference's replay."""
    stage1 = stage_pretokens(text, [], GPT2_PATTERN)
    assume(stage1)
    words = {tuple(bytes([b]) for b in word): count for word, count in stage1.items()}
    base = reference_merges(words, first)  # type: ignore[arg-type]
    pieces = stage_pretokens(text, [], "superbpe")
    replayed = {}
    for piece, count in pieces.items():
        word = tuple(bytes([b]) for b in piece)
        for merge in base:
            word = merge_pair(word, merge)
        replayed[word] = replayed.get(word, 0) + count
    made = []
    for left, right in base:
        if left + right not in made:
            made.append(left + right)
    expected = reference_merges(replayed, more, tie_break=tie_break, made=made, max_words=max_words)  # type: ignore[arg-type]
    counts = count_strings(iter([text]), [], pattern=SUPERBPE_PATTERN)
    assert learn_merges(counts, more, base=base, tie_break=tie_break, max_words=max_words) == expected
    if base:  # a base with a token twice is replayed merge by merge: the same merges
        assert learn_merges(counts, more, base=[*base, base[0]], tie_break=tie_break, max_words=max_words) == expected


def test_max_words_counts_runs_of_non_spaces():
    counts = count_strings(iter(["a b c d e " * 50]), [], pattern=SUPERBPE_PATTERN)
    for most in (1, 2, 4):
        tokens = [left + right for left, right in learn_merges(counts, 40, max_words=most)]
        assert tokens and all(len([w for w in token.split(b" ") if w]) <= most for token in tokens)
    assert any(len(token.split()) > 4 for token in (l + r for l, r in learn_merges(counts, 40)))


def test_superbpe_on_a_real_text_is_the_references():
    text = shared_file("corpora", "tinystories_800K.txt").read_text(encoding="utf-8")[:40_000]
    stages = [(GPT2_PATTERN, 400, None), ("superbpe", 480, 4)]
    expected = reference_train_stages(text, stages, [ENDOFTEXT])
    vocab, merges, _ = stored_training(text, superbpe_stages(400, 480), [ENDOFTEXT])
    assert (vocab, merges) == expected
    assert any(b" " in (left + right)[1:] for left, right in merges[400 - 257:]), "no superword was learned"


# -- the store: recipe round trip, counts reused, encoding ---------------------------------------


def merges_hash(merges) -> str:
    return hashlib.sha256(b"\n".join(left.hex().encode() + b" " + right.hex().encode() for left, right in merges)).hexdigest()


@pytest.mark.parametrize("options", [[], ["--tie-break", "huggingface"], ["--special-tokens-at", "end", "--max-words", "2"]])
def test_the_recipe_trains_the_same_tokenizer_again(tmp_path, options):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(("The cat sat on the mat. Note: it is what it is, of the people 1999.\n" * 30) + ENDOFTEXT + "Привет мир, Привет мир", encoding="utf-8")
    db = str(tmp_path / "store.db")
    ref = ok(invoke("--db", db, "train", corpus, "--name", "s", "--vocab-size", "400", "--superbpe", "330", "--special-token", ENDOFTEXT, "-q", *options)).strip()
    recipe_text = ok(invoke("--db", db, "show", ref, "--recipe"))
    recipe = tomllib.loads(recipe_text)
    assert [stage["pattern"] for stage in recipe["stages"]] == ["gpt2", "superbpe"]
    assert [stage["vocab_size"] for stage in recipe["stages"]] == [330, 400]
    assert recipe["stages"][1]["max_words"] == (2 if "--max-words" in options else 4)
    (tmp_path / "recipe.toml").write_text(recipe_text, encoding="utf-8")
    again = ok(invoke("--db", db, "train", "--recipe", tmp_path / "recipe.toml", "--name", "again", "-q")).strip()
    with Store(db) as store:
        first, second = store.load_model(ref), store.load_model(again)
        assert merges_hash(first.merges) == merges_hash(second.merges)
        assert first.vocab == second.vocab and first.special_tokens == second.special_tokens and first.pattern == second.pattern
        assert store.recipe_of(again) == store.recipe_of(ref) == recipe_from_toml(recipe_text)
        # the --stage form is the same training
        general = ["--stage", "gpt2:330", "--stage", "superbpe:400", "--max-words", "2" if "--max-words" in options else "4"]
        rest = [option for option in options if option not in ("--max-words", "2")]
    third = ok(invoke("--db", db, "train", corpus, "--name", "general", "--special-token", ENDOFTEXT, "-q", *general, *rest)).strip()
    with Store(db) as store:
        assert store.load_model(third).merges == first.merges


def test_each_stages_counts_are_stored_and_reused(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("of the people, by the people, for the people: 12 of them\n" * 20, encoding="utf-8")
    with Store(tmp_path / "store.db") as store:
        with pytest.warns(VocabSizeNotReachedWarning) as caught:  # (a small corpus)
            (first,) = store.train(corpus, "s", stages=superbpe_stages(300, 340))
        assert {warning.filename for warning in caught} == {__file__}  # the caller's line, not bpestore's
        corpora = store.corpora()
        assert sorted(info.pattern for info in corpora) == sorted([GPT2_PATTERN, SUPERBPE_PATTERN])
        assert not store.info(first).training_params["reused_pretoken_counts"]
        with pytest.warns(VocabSizeNotReachedWarning):  # (the same small corpus again)
            (second,) = store.train(corpus, "s", stages=superbpe_stages(300, 340))
        assert len(store.corpora()) == 2  # nothing counted again
        assert store.info(second).training_params["reused_pretoken_counts"]
        assert store.load_model(second).merges == store.load_model(first).merges
        # a plain training on the stage-1 counts does not take SuperBPE's merges as its own
        with pytest.warns(VocabSizeNotReachedWarning) as caught:
            (plain,) = store.train(corpus, "p", 340)
        assert {warning.filename for warning in caught} == {__file__}
        assert "merges_of" not in store.info(plain).training_params
        assert store.load_model(plain).merges == reference_train(corpus.read_text(), 340, [])[1]


@pytest.mark.filterwarnings("ignore::bpestore.train.trainer.VocabSizeNotReachedWarning")  # (a small corpus: not the subject)
def test_encoding_uses_stage_2s_pretokenizer_and_every_merge_in_rank_order(tmp_path):
    text = ("Once upon a time, there was a little girl. She said: \"of the 123!!\"\n\n" * 15) + "Привет мир"
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text, encoding="utf-8")
    db = tmp_path / "store.db"
    with Store(db) as store:
        (ref,) = store.train(corpus, "s", special_tokens=[ENDOFTEXT], stages=superbpe_stages(290, 360))
        model = store.load_model(ref)
    sample = "Once upon a time: a little girl said 4567 things.\n" + ENDOFTEXT + " of the people"
    ranks = {pair: rank for rank, pair in enumerate(model.merges)}
    token_to_id = {token: i for i, token in model.vocab.items()}
    expected = []
    for index, piece in enumerate(split_on_specials(sample, [ENDOFTEXT], keep=True)):
        if index % 2:
            expected.append(token_to_id[piece.encode()])
            continue
        for pretoken in superbpe_pretokenize(piece):
            expected.extend(token_to_id[token] for token in bpe(pretoken, ranks))
    assert Tokenizer.from_db(db, ref).encode(sample) == expected
    assert reference_encode(sample, model.vocab, model.merges, [ENDOFTEXT], SUPERBPE_PATTERN) == expected
    out = ok(invoke("--db", db, "encode", ref, "-", input=sample.encode("utf-8")))
    assert [int(i) for i in out.split()] == expected


# -- bad input ---------------------------------------------------------------------------------


def test_bad_stages_are_one_line_errors(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c " * 20, encoding="utf-8")
    db = tmp_path / "store.db"
    base = ("--db", db, "train", corpus, "--name", "s")
    assert_user_error(invoke(*base, "--superbpe", "300", "--vocab-size", "320", "--vocab-size", "330"), "one --vocab-size")
    assert_user_error(invoke(*base, "--superbpe", "400", "--vocab-size", "320"), "smaller than the first stage")
    assert_user_error(invoke(*base, "--stage", "gpt2"), "PATTERN:SIZE")
    assert_user_error(invoke(*base, "--stage", "gpt2:x"), "PATTERN:SIZE")
    assert_user_error(invoke(*base, "--stage", "gpt2:300", "--vocab-size", "300"), "--stage")
    assert_user_error(invoke(*base, "--stage", "gpt2:300", "--stage", "superbpe:320", "--stage", "superbpe:330"), "two")
    assert_user_error(invoke(*base, "--max-words", "3", "--vocab-size", "300"), "--max-words")
    assert_user_error(invoke(*base, "--superbpe", "300", "--stage", "gpt2:300"), "not both")
    assert_user_error(invoke(*base, "--stage", "nosuchpattern:300", "--stage", "superbpe:320"), "nosuchpattern")
    ok(invoke(*base, "--vocab-size", "300", "-q"))
    result = invoke("--db", db, "train", "--stored-corpus", "1", "--name", "t", "--superbpe", "290", "--vocab-size", "300")
    assert_user_error(result, "files")
    with pytest.raises(RecipeError, match="stages"):
        recipe_from_toml('[[inputs]]\ncorpus_sha256 = "' + "0" * 64 + '"\n[[stages]]\nvocab_size = 300\n[[stages]]\nvocab_size = 290\n')
    with pytest.raises(RecipeError, match="3 stages"):
        recipe_from_toml('[[inputs]]\ncorpus_sha256 = "' + "0" * 64 + '"\n' + "[[stages]]\nvocab_size = 300\n" * 3)
    with pytest.raises(RecipeError, match="max_words"):
        recipe_from_toml('[[inputs]]\ncorpus_sha256 = "' + "0" * 64 + '"\n[[stages]]\nvocab_size = 300\nmax_words = 0\n')


def test_ctrl_c_in_stage_1_keeps_both_stages_counts_whole(tmp_path, monkeypatch):
    """Both stages are counted before stage 1 merges (stage 2's counts are stored meanwhile): a
    Ctrl-C in stage 1's merge loop stores no tokenizer, keeps stage 1's counts (as any training
    interrupted after counting does) and lets stage 2's save end, whole; training again reuses
    both and gives the merges of a training never interrupted."""
    from bpestore.train import trainer
    from bpestore.train.through_store import TrainingInterrupted

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("of the people, by the people, for the people: 12 of them\n" * 20 + "a new nation, conceived in liberty\n" * 9,
                      encoding="utf-8")
    real = trainer.learn_merges

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    with Store(tmp_path / "store.db") as store:
        monkeypatch.setattr(trainer, "learn_merges", interrupted)
        with pytest.raises(TrainingInterrupted):
            store.train(corpus, "s", stages=superbpe_stages(280, 300))
        monkeypatch.setattr(trainer, "learn_merges", real)
        assert store.list() == []
        counted = {info.pattern: store.pretoken_counts(info.id) for info in store.corpora()}
        assert set(counted) == {GPT2_PATTERN, SUPERBPE_PATTERN}
        text = corpus.read_text(encoding="utf-8")
        assert dict(counted[SUPERBPE_PATTERN].items()) == dict(count_strings([text], pattern=SUPERBPE_PATTERN).items())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", VocabSizeNotReachedWarning)
            (again,) = store.train(corpus, "s", stages=superbpe_stages(280, 300))
        assert store.info(again).training_params["reused_pretoken_counts"]
    with Store(tmp_path / "fresh.db") as fresh, warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabSizeNotReachedWarning)
        (never,) = fresh.train(corpus, "s", stages=superbpe_stages(280, 300))
        expected = fresh.load_model(never).merges
    with Store(tmp_path / "store.db") as store:
        assert store.load_model(again).merges == expected
