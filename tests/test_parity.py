"""Parity-aware BPE (Foroutan et al., 2025): one corpus per language, each merge the most frequent
pair of the language whose text is worst compressed.

- the engine's parity loop against the naive reference (tests/reference.py), hypothesis
  generating corpora in several scripts, every variant and balance;
- Hugging Face ``tokenizers``' ``ParityBpeTrainer`` as the oracle of ``tie_break="huggingface"``
  (byte-level pre-tokenizer), on random corpora and on the UDHR sample (tests/data/udhr), and
  checked to give the same merges in five runs where it ends;
- training through the store and the command line: each language a stored corpus of its own,
  reused; the recipe round trip (``show --recipe`` -> ``train --recipe``: the same merges and
  vocab) on SQLite and PostgreSQL; bad options and recipes refused in one line, nothing stored.
"""

from __future__ import annotations

import json
import random
import re
import tomllib
import warnings
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpestore.engine import PretokenCounts
from bpestore.errors import RecipeError
from bpestore.train.parity import learn_parity_merges
from bpestore.train.recipe import Language, Parity, Recipe, Stage, StoredCorpusInput, recipe_from_toml
from bpestore.train.trainer import VocabSizeNotReachedWarning
from bpestore.workflow import Store, languages_of_files
from postgres import PostgresDatabase, sqlite_or_postgresql_db  # noqa: F401 (the db fixture)
from reference import WindowStuck, reference_merges, reference_parity_merges, reference_pretoken_counts, as_words
from test_cli import assert_user_error, invoke, ok
from test_recipes import merges_hash, other_store
from tiers import examples

UDHR = Path(__file__).resolve().parent / "data" / "udhr"
LANGUAGES = sorted(path.stem for path in (UDHR / "train").glob("*.txt"))

# Few characters, so that counts tie; bytes that byte-level maps out of order (controls, DEL,
# NBSP, soft hyphen); several scripts; whitespace runs; a word repeated (the window variant's
# languages run out of pairs).
ALPHABETS = ["ab ", "abc  \n", "aé b", "xyz1 2.!", "a\x00\x7f \t\u00ad\u00a0\u00ff", "ﬁé東 a\r\n", "кот ёж  ", "ab'sll've ", "aaab", "नमस्ते ", "สวัสดี "]


def random_texts(rng: random.Random, languages: int, longest: int) -> list[str]:
    return ["".join(rng.choice(rng.choice(ALPHABETS)) for _ in range(rng.randint(1, longest))) for _ in range(languages)]


def counts_of(texts: list[str], special_tokens: list[str] | None = None) -> list[Counter[bytes]]:
    return [reference_pretoken_counts(text, special_tokens or []) for text in texts]


def engine_counts(counts: list[Counter[bytes]]) -> list[PretokenCounts]:
    return [PretokenCounts.from_dict(dict(table)) for table in counts]


@st.composite
def parity_cases(draw: st.DrawFn) -> dict:
    """A random parity-aware training: corpora, balance, variant, global merges, tie-break."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    languages = draw(st.integers(1, 5))
    balance = draw(st.sampled_from(["dev", "ratio", "training"]))
    variant = draw(st.sampled_from(["base", "window"]))
    return {
        "train": counts_of(random_texts(rng, languages, 60)),
        "dev": counts_of(random_texts(rng, languages, 30)) if balance == "dev" else None,
        "ratio": [draw(st.sampled_from([0.5, 0.7, 1.0, 1.3, 2.0])) for _ in range(languages)] if balance == "ratio" else None,
        "parity": {
            "variant": variant, "global_merges": draw(st.sampled_from([0, 0, 2, 5])),
            "window_size": draw(st.sampled_from([1, 2, 3, 5, 100])), "alpha": draw(st.sampled_from([0.3, 0.5, 1.0, 2.0])),
        },
        "tie_break": draw(st.sampled_from(["cs336", "huggingface"])),
        "merges": draw(st.integers(0, 60)),
    }


def engine_merges(case: dict) -> list[tuple[bytes, bytes]]:
    settings_ = case["parity"]
    ratio = case["ratio"] or [None] * len(case["train"])
    parity = Parity(
        tuple(Language(f"l{index}", (StoredCorpusInput("0" * 64),), (), r) for index, r in enumerate(ratio)),
        settings_["variant"], settings_["window_size"], settings_["alpha"], settings_["global_merges"],
    )
    dev = engine_counts(case["dev"]) if case["dev"] is not None else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabSizeNotReachedWarning)  # (small corpora run out of pairs)
        return learn_parity_merges(engine_counts(case["train"]), case["merges"], parity, dev=dev, tie_break=case["tie_break"]).merges


def reference_of(case: dict, when_stuck: str = "highest") -> list[tuple[bytes, bytes]]:
    settings_ = case["parity"]
    return reference_parity_merges(
        case["train"], case["merges"], dev=case["dev"], ratio=case["ratio"], variant=settings_["variant"],
        window_size=settings_["window_size"], alpha=settings_["alpha"], global_merges=settings_["global_merges"],
        tie_break=case["tie_break"], when_stuck=when_stuck,
    )


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parity_cases())
def test_the_engine_is_the_reference(case):
    assert engine_merges(case) == reference_of(case)


def test_one_language_is_plain_bpe():
    """With one language every merge is that language's best pair: plain BPE (CS336's tie-break)."""
    rng = random.Random(7)
    for _ in range(30):
        counts = counts_of(random_texts(rng, 1, 80))
        case = {"train": counts, "dev": None, "ratio": None, "tie_break": "cs336", "merges": 40,
                "parity": {"variant": "base", "global_merges": 0, "window_size": 100, "alpha": 2.0}}
        assert engine_merges(case) == reference_merges(as_words(counts[0]), 40)


def test_the_balance_matters():
    """The test can tell the balances apart: the development set picks another language's pair
    first than the training text does."""
    counts = counts_of(["ab ab ab ab ab ab", "cd cd"])
    case = {"train": counts, "dev": counts_of(["ab", "cd cd cd cd"]), "ratio": None, "tie_break": "cs336", "merges": 1,
            "parity": {"variant": "base", "global_merges": 0, "window_size": 100, "alpha": 2.0}}
    assert engine_merges(case) == [(b"c", b"d")]
    assert engine_merges(case | {"dev": None}) == [(b"a", b"b")]


# -- Hugging Face's ParityBpeTrainer, the oracle of tie_break="huggingface" ---------------------

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Tokenizer, models, pre_tokenizers, trainers  # noqa: E402

from test_hf_tie_break import BYTE_OF  # noqa: E402  (HF's byte-level characters -> bytes, written out there)

if not hasattr(trainers, "ParityBpeTrainer"):
    pytest.skip("this tokenizers has no ParityBpeTrainer (0.23.3 has)", allow_module_level=True)


def hf_parity_merges(
    train: list[str], num_merges: int, *, dev: list[str] | None = None, ratio: list[float] | None = None, special_tokens: tuple[str, ...] = (),
    **options,
) -> list[tuple[bytes, bytes]]:
    """ParityBpeTrainer's merges, as bytes: each language's text its sequences, the text cut at the
    special tokens (HF pre-tokenizes each sequence alone, and cuts at nothing else: not at special
    tokens, which it would count as text)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.ParityBpeTrainer(num_merges=num_merges, show_progress=False, special_tokens=list(special_tokens), **options)

    def pieces(text: str) -> list[str]:
        return [piece for piece in re.split("|".join(map(re.escape, special_tokens)), text) if piece] if special_tokens else [text]

    trainer.train_from_iterator(tokenizer, [pieces(text) for text in train], dev_iterators=[pieces(text) for text in dev] if dev else None, ratio=ratio)
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    pairs = (merge if isinstance(merge, list) else merge.split(" ") for merge in merges)
    return [(bytes(BYTE_OF[c] for c in left), bytes(BYTE_OF[c] for c in right)) for left, right in pairs]


@pytest.mark.parametrize("seed", range(4))
def test_the_merges_are_hf_parity_bpetrainers_on_random_corpora(seed):
    rng = random.Random(seed)
    checked = 0
    for _ in range(80):
        languages = rng.randint(1, 4)
        train, dev = random_texts(rng, languages, 60), random_texts(rng, languages, 30)
        specials = ("<|e|>",) if rng.random() < 0.3 else ()
        if specials:  # (the special token inside words and between them)
            train = [text[: len(text) // 2] + "<|e|>" + text[len(text) // 2:] + "<|e|>ab" for text in train]
        balance = rng.choice(["dev", "ratio", "training"])
        options = {"variant": rng.choice(["base", "window"]), "global_merges": rng.choice([0, 0, 2, 5])}
        if options["variant"] == "window":
            options |= {"window_size": rng.choice([1, 2, 3, 5, 100]), "alpha": rng.choice([0.5, 1.0, 2.0])}
        case = {
            "train": counts_of(train, list(specials)), "dev": counts_of(dev) if balance == "dev" else None,
            "ratio": [rng.choice([0.5, 1.0, 1.3, 2.0]) for _ in range(languages)] if balance == "ratio" else None,
            "parity": {"window_size": 100, "alpha": 2.0} | options, "tie_break": "huggingface", "merges": rng.randint(1, 50),
        }
        try:
            expected = reference_of(case, when_stuck="raise")
        except WindowStuck:
            continue  # HF's window search never ends here: not asked
        got = hf_parity_merges(train, case["merges"], dev=dev if case["dev"] else None, ratio=case["ratio"], special_tokens=specials, **options)
        assert got == expected, case
        assert engine_merges(case) == expected
        checked += 1
    assert checked > 60


def udhr_texts(part: str) -> list[str]:
    return [(UDHR / part / f"{language}.txt").read_text(encoding="utf-8") for language in LANGUAGES]


def test_hf_is_deterministic_on_the_udhr_sample():
    """ParityBpeTrainer gives the same merges in five runs (its order of equal counts, by the
    pairs' strings, is total), and they are the reference's."""
    train, dev = udhr_texts("train"), udhr_texts("dev")
    runs = [hf_parity_merges(train, 300, dev=dev, variant="window") for _ in range(5)]
    assert all(run == runs[0] for run in runs)
    case = {"train": counts_of(train), "dev": counts_of(dev), "ratio": None, "tie_break": "huggingface", "merges": 300,
            "parity": {"variant": "window", "global_merges": 0, "window_size": 100, "alpha": 2.0}}
    assert reference_of(case, when_stuck="raise") == runs[0]
    assert reference_of(case | {"tie_break": "cs336"}) != runs[0]  # the tie-breaks differ here


# -- through the store and the command line -------------------------------------------------------


def train_args(db, name: str, *more: str) -> list:
    return ["--db", db, "train", "--parity", *(str(UDHR / "train" / f"{language}.txt") for language in LANGUAGES),
            "--name", name, "--vocab-size", "700", "-q", *more]


@pytest.mark.parametrize("options, hf_options", [
    (["--dev", str(UDHR / "dev")], {"variant": "base"}),
    (["--dev", str(UDHR / "dev"), "--parity-variant", "window", "--window-size", "7", "--alpha", "1.5"],
     {"variant": "window", "window_size": 7, "alpha": 1.5}),
    (["--dev", str(UDHR / "dev"), "--global-merges", "50"], {"variant": "base", "global_merges": 50}),
    ([f"--ratio={language}={1 + index / 10}" for index, language in enumerate(LANGUAGES)], {"variant": "base"}),
    ([], {"variant": "base"}),
])
def test_train_parity_is_hf_with_its_tie_break(tmp_path, options, hf_options):
    """`train --parity --tie-break huggingface`: ParityBpeTrainer's merges on the same files (with
    a special token, which the sample does not hold: HF's vocab counts it too)."""
    db = tmp_path / "s.db"
    ref = ok(invoke(*train_args(db, "p", "--tie-break", "huggingface", "--special-token", "<|endoftext|>", *options))).strip()
    ratio = [1 + index / 10 for index in range(len(LANGUAGES))] if any(option.startswith("--ratio") for option in options) else None
    dev = udhr_texts("dev") if "--dev" in options else None
    expected = hf_parity_merges(udhr_texts("train"), 700 - 257, dev=dev, ratio=ratio, **hf_options)
    with Store(db) as store:
        assert store.load_model(ref).merges == expected
        params = store.info(ref).training_params
        assert sum(params["parity_merges"].values()) == 700 - 257 - hf_options.get("global_merges", 0)
        assert set(params["parity_merges"]) == set(LANGUAGES)


def test_each_language_is_a_stored_corpus_reused(tmp_path):
    db = tmp_path / "s.db"
    first = ok(invoke(*train_args(db, "p", "--dev", str(UDHR / "dev")))).strip()
    with Store(db) as store:
        corpora = store.corpora()
        assert len(corpora) == len(LANGUAGES)
        assert {Path(info.path).name for info in corpora} == {f"{language}.txt" for language in LANGUAGES}
        assert store.info(first).training_params["reused_pretoken_counts"] is False
        shares = store.info(first).training_params["parity_merges"]
    shown = ok(invoke("--db", db, "show", first))
    assert "parity merges   " + " ".join(f"{language}={count}" for language, count in shares.items()) in shown
    again = ok(invoke(*train_args(db, "q", "--dev", str(UDHR / "dev"), "--parity-variant", "window"))).strip()
    with Store(db) as store:
        assert len(store.corpora()) == len(LANGUAGES)
        assert store.info(again).training_params["reused_pretoken_counts"] is True
        assert store.load_model(again).merges != store.load_model(first).merges  # (the variant matters here)


def test_a_language_from_a_stored_corpus(tmp_path):
    """NAME=stored:REF trains on a stored corpus's counts: the same merges as its files."""
    db = tmp_path / "s.db"
    eng = UDHR / "train" / "eng.txt"
    plain = ok(invoke("--db", db, "train", eng, "--name", "e", "--vocab-size", "300", "-q")).strip()
    files = ok(invoke("--db", db, "train", "--parity", eng, UDHR / "train" / "rus.txt", "--name", "f", "--vocab-size", "600", "-q")).strip()
    stored = ok(invoke(
        "--db", db, "train", "--parity", f"eng=stored:{plain}", UDHR / "train" / "rus.txt", "--name", "s", "--vocab-size", "600", "-q",
    )).strip()
    with Store(db) as store:
        assert store.load_model(stored).merges == store.load_model(files).merges
        recipe = store.recipe_of(stored)
        assert isinstance(recipe.parity.languages[0].inputs[0], StoredCorpusInput)


def test_the_recipe_round_trip(db, tmp_path):
    """show --recipe -> train --recipe on an empty store: the same merges and vocab, byte for byte."""
    ref = ok(invoke(*train_args(
        db, "p", "--dev", str(UDHR / "dev"), "--parity-variant", "window", "--window-size", "9", "--alpha", "1.25",
        "--global-merges", "3", "--tie-break", "huggingface", "--special-token", "<|endoftext|>", "--special-tokens-at", "end",
        "--min-count", "2", "--pattern", "cl100k_base",
    ))).strip()
    text = ok(invoke("--db", db, "show", ref, "--recipe"))
    data = tomllib.loads(text)
    assert data["parity"]["variant"] == "window" and data["parity"]["alpha"] == 1.25 and data["parity"]["global_merges"] == 3
    assert [language["name"] for language in data["parity"]["languages"]] == LANGUAGES
    path = tmp_path / "p.toml"
    path.write_text(text, encoding="utf-8")
    with Store(db) as store:
        expected = merges_hash(store.load_model(ref))
        assert recipe_from_toml(text) == store.recipe_of(ref)
    with other_store(db, tmp_path) as other:
        again = ok(invoke("--db", other, "train", "--recipe", path, "--name", "x", "-q")).strip()
        with Store(other) as store:
            assert merges_hash(store.load_model(again)) == expected
            assert store.recipe_of(again) == recipe_from_toml(text)


def test_ratio_recipe_round_trip(tmp_path):
    db = tmp_path / "s.db"
    ratios = [f"--ratio={language}={0.1 + index / 7}" for index, language in enumerate(LANGUAGES)]
    ref = ok(invoke(*train_args(db, "p", *ratios))).strip()
    text = ok(invoke("--db", db, "show", ref, "--recipe"))
    assert [language["ratio"] for language in tomllib.loads(text)["parity"]["languages"]] == [0.1 + index / 7 for index in range(len(LANGUAGES))]
    path = tmp_path / "p.toml"
    path.write_text(text, encoding="utf-8")
    again = ok(invoke("--db", tmp_path / "o.db", "train", "--recipe", path, "--name", "x", "-q")).strip()
    with Store(db) as store, Store(tmp_path / "o.db") as other:
        assert merges_hash(other.load_model(again)) == merges_hash(store.load_model(ref))


def test_store_train_takes_a_parity_recipe(tmp_path):
    """The Python API: a Recipe with Parity, languages made from files."""
    languages = languages_of_files(
        {language: UDHR / "train" / f"{language}.txt" for language in LANGUAGES[:4]},
        {language: UDHR / "dev" / f"{language}.txt" for language in LANGUAGES[:4]},
    )
    recipe = Recipe((), (Stage(500),), tie_break="huggingface", parity=Parity(languages))
    with Store(tmp_path / "s.db") as store:
        ref, = store.train(recipe, "p")
        merges = store.load_model(ref).merges
    texts = [(UDHR / "train" / f"{language}.txt").read_text(encoding="utf-8") for language in LANGUAGES[:4]]
    dev = [(UDHR / "dev" / f"{language}.txt").read_text(encoding="utf-8") for language in LANGUAGES[:4]]
    assert merges == hf_parity_merges(texts, 500 - 256, dev=dev)


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    (["--dev", "x"], "--dev shapes a parity-aware training: give --parity with it"),
    (["--parity-variant", "window", "--alpha", "2"], "give --parity with them"),
])
def test_parity_options_without_parity(tmp_path, args, message):
    result = invoke("--db", tmp_path / "s.db", "train", UDHR / "train" / "eng.txt", "--name", "p", "--vocab-size", "300", *args)
    assert_user_error(result, message)
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("more, message", [
    (["--dev", str(UDHR / "dev" / "eng.txt")], "--dev has no development text for"),
    (["--dev", str(UDHR / "dev"), "--ratio", "eng=1"], "give --dev or --ratio, not both"),
    (["--ratio", "xx=1"], "--ratio 'xx=1' names no language trained on"),
    (["--ratio", "eng=fast"], "--ratio 'eng=fast' is not NAME=R"),
    (["--window-size", "3"], "give --parity-variant window with them"),
    (["--from", "x@1"], "give no --from with it"),
    (["--vocab-size", "900"], "--parity trains to one --vocab-size"),
    (["--dev", f"deu={UDHR / 'dev' / 'eng.txt'}", "--dev", str(UDHR / "dev")], "--dev gives 'deu' two development texts"),
])
def test_bad_parity_options_are_refused(tmp_path, more, message):
    db = tmp_path / "s.db"
    result = invoke(*train_args(db, "p", *more))
    assert_user_error(result, message)
    if db.exists():
        with Store(db) as store:
            assert store.list() == [] and store.corpora() == []


def test_a_missing_development_text_is_named(tmp_path):
    db = tmp_path / "s.db"
    result = invoke(
        "--db", db, "train", "--parity", UDHR / "train" / "eng.txt", UDHR / "train" / "rus.txt", "--dev", UDHR / "dev" / "eng.txt",
        "--dev", f"rus={tmp_path / 'nope.txt'}", "--name", "p", "--vocab-size", "400",
    )
    assert_user_error(result, "nope.txt")
    if db.exists():
        with Store(db) as store:
            assert store.list() == [] and store.corpora() == []


def test_a_missing_corpus_file_is_named_before_the_development_text_it_lacks(tmp_path):
    db = tmp_path / "s.db"
    result = invoke(
        "--db", db, "train", "--parity", UDHR / "train" / "eng.txt", tmp_path / "nosuch.txt", "--dev", UDHR / "dev",
        "--name", "p", "--vocab-size", "400",
    )
    assert_user_error(result, f"No such file or directory: {tmp_path / 'nosuch.txt'}")
    assert not db.exists()


def test_a_language_named_twice_is_one_language_of_two_inputs(tmp_path):
    db = tmp_path / "s.db"
    ref = ok(invoke(
        "--db", db, "train", "--parity", f"x={UDHR / 'train' / 'eng.txt'}", f"x={UDHR / 'dev' / 'eng.txt'}", f"y={UDHR / 'train' / 'rus.txt'}",
        "--name", "p", "--vocab-size", "400", "-q",
    )).strip()
    with Store(db) as store:
        languages = store.recipe_of(ref).parity.languages
        assert [language.name for language in languages] == ["x", "y"] and len(languages[0].inputs) == 2


RECIPE_HEAD = 'format = 1\n\n[[stages]]\nvocab_size = 300\n'
LANGUAGE = '[[parity.languages]]\nname = "a"\ninputs = [{path = "a.txt", sha256 = "' + "0" * 64 + '"}]\n'


@pytest.mark.parametrize("text, message", [
    (RECIPE_HEAD + '\n[parity]\nvariant = "diagonal"\n' + LANGUAGE, "parity.variant must be one of 'base', 'window'"),
    (RECIPE_HEAD + '\n[parity]\nalpha = 2.0\n' + LANGUAGE, "give them with variant = \"window\""),
    (RECIPE_HEAD + '\n[parity]\nvariant = "window"\nalpha = -1.0\n' + LANGUAGE, "parity.alpha must be a finite number above 0"),
    (RECIPE_HEAD + '\n[parity]\n' + LANGUAGE + 'ratio = 1.0\n' + LANGUAGE.replace('"a"', '"b"'), "every language has a ratio, or none has"),
    (RECIPE_HEAD + '\n[parity]\n' + LANGUAGE + LANGUAGE, "the language 'a' is named twice"),
    (RECIPE_HEAD + '\n[[inputs]]\npath = "a.txt"\nsha256 = "' + "0" * 64 + '"\n\n[parity]\n' + LANGUAGE, "no [[inputs]] with [parity]"),
    (RECIPE_HEAD + '\n[parity]\n[[parity.languages]]\nname = "a"\ninputs = []\n', "parity.languages[1].inputs must be a non-empty array"),
    (RECIPE_HEAD + '\n[parity]\n' + LANGUAGE + 'dev = [{corpus_sha256 = "' + "0" * 64 + '"}]\n', "dev names files"),
    (RECIPE_HEAD.replace("vocab_size = 300", 'vocab_size = 300\n\n[[stages]]\nvocab_size = 400') + '\n[parity]\n' + LANGUAGE, "a parity-aware recipe has one stage"),
])
def test_bad_parity_recipes_are_refused(text, message):
    with pytest.raises(RecipeError, match=None) as raised:
        recipe_from_toml(text)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_changed_language_file_is_refused(tmp_path):
    corpus = tmp_path / "eng.txt"
    corpus.write_text((UDHR / "train" / "eng.txt").read_text(encoding="utf-8"), encoding="utf-8")
    db = tmp_path / "s.db"
    ref = ok(invoke("--db", db, "train", "--parity", corpus, UDHR / "train" / "rus.txt", "--name", "p", "--vocab-size", "400", "-q")).strip()
    recipe = tmp_path / "p.toml"
    recipe.write_text(ok(invoke("--db", db, "show", ref, "--recipe")), encoding="utf-8")
    corpus.write_text("changed", encoding="utf-8")
    assert_user_error(invoke("--db", db, "train", "--recipe", recipe, "--name", "q"), "has changed")


def test_ctrl_c_while_the_tokenizer_is_written_keeps_the_languages_counts(tmp_path, monkeypatch):
    """Interrupted after counting: one line naming what was kept (each language's counts, from
    the corpus it names on), exit 130, and the next run reuses them."""
    db = tmp_path / "s.db"

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Store, "_insert_tokenizer", interrupted)
    result = invoke(*train_args(db, "p", "--dev", str(UDHR / "dev")))
    assert result.exit_code == 130, (result.stderr, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert re.fullmatch(
        r"Interrupted after counting: no tokenizer was stored, but the pre-token counts of the languages are kept in the store "
        r"\(corpus \d+ and on\); run the same command again to reuse them\.", lines[0],
    ), lines[0]
    monkeypatch.undo()
    with Store(db) as store:
        assert store.list() == [] and len(store.corpora()) == len(LANGUAGES)
