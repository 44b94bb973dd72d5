"""Training recipes (issue 41): every stored training has the recipe that reproduces it
(`bpestore show REF --recipe`), and training that recipe gives the same merges and vocab, byte for
byte, on a store that never saw the corpus (so nothing is reused: the merge loop runs again). Bad
recipes, and options that contradict one, are refused in one line with nothing stored."""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore import train_bpe
from bpestore.errors import RecipeError
from bpestore.train.recipe import FileInput, Recipe, Stage, StoredCorpusInput, recipe_from_toml
from bpestore.workflow import Store
from postgres import PostgresDatabase, fresh_database, sqlite_or_postgresql_db  # noqa: F401 (the db fixture)
from test_cli import assert_user_error, invoke, ok

ENDOFTEXT = "<|endoftext|>"

TEXT_A = (
    "the cat sat on the mat. the dog sat on the log! low lower lowest newer newest 1234 5678\n"
    f"{ENDOFTEXT}wider wide widest, a cat and a dog; the end 99 bottles\n"
) * 20
TEXT_B = "über naïve café déjà vu – ça va? 東京 大阪 the café is wide\n" * 15 + "zzyzx qqqjjj kkkvvv xxyyzz once only\n"


def merges_hash(model) -> str:
    """The tokenizer's merges and vocab, hashed: equal exactly when they are byte for byte."""
    digest = hashlib.sha256()
    for left, right in model.merges:
        digest.update(len(left).to_bytes(4, "big") + left + len(right).to_bytes(4, "big") + right)
    for token_id, token in sorted(model.vocab.items()):
        digest.update(token_id.to_bytes(4, "big") + len(token).to_bytes(4, "big") + token)
    return digest.hexdigest()


@contextmanager
def other_store(db, tmp_path: Path) -> Iterator[str]:
    """An empty store of the same kind as ``db`` (SQLite or PostgreSQL)."""
    if isinstance(db, PostgresDatabase):
        with fresh_database() as url:
            yield str(url)
    else:
        yield str(tmp_path / "other.db")


@pytest.fixture
def corpus(tmp_path: Path) -> list[Path]:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(TEXT_A, encoding="utf-8")
    b.write_text(TEXT_B, encoding="utf-8")
    return [a, b]


def round_trip(db, tmp_path: Path, ref: str, *, elsewhere: bool = True) -> tuple[str, str]:
    """``show REF --recipe`` written to a file, trained again (in an empty store unless not
    ``elsewhere``): the recipe's text and the new tokenizer's merges hash, checked to be REF's."""
    recipe_text = ok(invoke("--db", db, "show", ref, "--recipe"))
    path = tmp_path / "recipe.toml"
    path.write_text(recipe_text, encoding="utf-8")
    with Store(db) as store:
        original = store.load_model(ref)
    with other_store(db, tmp_path) if elsewhere else nullcontext(str(db)) as target:
        new_ref = ok(invoke("--db", target, "train", "--recipe", path, "--name", "again", "-q")).strip()
        with Store(target) as store:
            model = store.load_model(new_ref)
            params = store.info(new_ref).training_params
            # the recipe stored with the copy is the one trained (the same text)
            assert store.recipe_of(new_ref).to_toml() == recipe_text
    assert "merges_of" not in params, "the merges were copied from a stored training, not learned again"
    assert model.merges == original.merges and model.vocab == original.vocab
    assert model.special_tokens == original.special_tokens and model.pattern == original.pattern
    assert merges_hash(model) == merges_hash(original)
    return recipe_text, merges_hash(model)


def nullcontext(value: str):
    @contextmanager
    def made() -> Iterator[str]:
        yield value
    return made()


def test_several_inputs_special_tokens_and_min_count_round_trip(db, tmp_path, corpus):
    """Two files, a special token, --min-count: the recipe names them all and reproduces the merges."""
    ref = ok(invoke(
        "--db", db, "train", *corpus, "--name", "t", "--vocab-size", "330", "--special-token", ENDOFTEXT, "--min-count", "2", "-q",
    )).strip()
    text, _ = round_trip(db, tmp_path, ref)
    recipe = tomllib.loads(text)
    assert [item["path"] for item in recipe["inputs"]] == [str(path.resolve()) for path in corpus]
    assert recipe["inputs"][0]["sha256"] == hashlib.sha256(TEXT_A.encode()).hexdigest()
    assert recipe["special_tokens"] == [ENDOFTEXT] and recipe["min_count"] == 2
    assert recipe["stages"] == [{"pattern": "gpt2", "vocab_size": 330}]
    # min_count matters: the same recipe without it gives other merges (the test can tell)
    plain = tmp_path / "plain.toml"
    plain.write_text(text.replace("min_count = 2\n", ""), encoding="utf-8")
    with other_store(db, tmp_path) as target:
        other = ok(invoke("--db", target, "train", "--recipe", plain, "--name", "p", "-q")).strip()
        with Store(target) as store, Store(db) as first:
            assert store.load_model(other).merges != first.load_model(ref).merges


def test_a_custom_pattern_and_special_tokens_at_the_end_round_trip(db, tmp_path, corpus):
    pattern = r"\S+|\s+"
    ref = ok(invoke(
        "--db", db, "train", corpus[0], "--name", "t", "--vocab-size", "300", "--special-token", ENDOFTEXT,
        "--pattern", pattern, "--special-tokens-at", "end", "-q",
    )).strip()
    text, _ = round_trip(db, tmp_path, ref)
    recipe = tomllib.loads(text)
    assert recipe["stages"] == [{"pattern": pattern, "vocab_size": 300}]
    assert recipe["special_tokens_at"] == "end"
    with Store(db) as store:
        model = store.load_model(ref)
    assert max(model.vocab) == 299 and model.vocab[299] == ENDOFTEXT.encode()
    # the same as training in memory with the same settings
    vocab, merges = train_bpe(corpus[0], 300, [ENDOFTEXT], pattern=pattern)
    assert merges == model.merges


def test_a_named_pattern_round_trips(db, tmp_path, corpus):
    ref = ok(invoke("--db", db, "train", *corpus, "--name", "t", "--vocab-size", "320", "--pattern", "o200k_base", "-q")).strip()
    text, _ = round_trip(db, tmp_path, ref)
    assert 'pattern = "o200k_base"' in text


@pytest.mark.parametrize("options", [["--superbpe", "300"], ["--stage", "cl100k_base:290", "--stage", "superbpe:330", "--max-words", "2",
                                      "--tie-break", "huggingface", "--special-tokens-at", "end"]])
def test_a_superbpe_training_round_trips(db, tmp_path, corpus, options):
    """Two stages (SuperBPE): the recipe names both, and reproduces the merges and vocab."""
    sizes = [] if "--stage" in options else ["--vocab-size", "330"]
    ref = ok(invoke("--db", db, "train", *corpus, "--name", "t", *sizes, "--special-token", ENDOFTEXT, *options, "-q")).strip()
    text, _ = round_trip(db, tmp_path, ref)
    stages = tomllib.loads(text)["stages"]
    assert [stage["pattern"] for stage in stages] == ["gpt2" if "--superbpe" in options else "cl100k_base", "superbpe"]
    assert stages[1]["vocab_size"] == 330 and stages[1]["max_words"] == (4 if "--superbpe" in options else 2)
    # trained again in the same store: its counts (both stages') are read back, the same merges
    again, _ = round_trip(db, tmp_path, ref, elsewhere=False)
    assert again == text


def test_a_stored_corpus_round_trips(db, tmp_path, corpus):
    """A training on a stored corpus names it by its identity; trained again (its copy of the
    merges deleted first, so that they are learned again) it gives the same merges."""
    small = ok(invoke("--db", db, "train", *corpus, "--name", "small", "--vocab-size", "262", "--special-token", ENDOFTEXT, "-q")).strip()
    ref = ok(invoke("--db", db, "train", "--stored-corpus", small, "--name", "t", "--vocab-size", "340", "--min-count", "2", "-q")).strip()
    text = ok(invoke("--db", db, "show", ref, "--recipe"))
    recipe = tomllib.loads(text)
    with Store(db) as store:
        original = store.load_model(ref)
        corpus_sha = store.corpus_of(small).sha256
        store.delete(ref)
    assert recipe["inputs"] == [{"corpus_sha256": corpus_sha}]
    path = tmp_path / "stored.toml"
    path.write_text(text, encoding="utf-8")
    again = ok(invoke("--db", db, "train", "--recipe", path, "--name", "again", "-q")).strip()
    with Store(db) as store:
        model = store.load_model(again)
        assert "merges_of" not in store.info(again).training_params
    assert merges_hash(model) == merges_hash(original)
    # in a store that does not hold the corpus: refused in one line, nothing stored
    with other_store(db, tmp_path) as target:
        assert_user_error(invoke("--db", target, "train", "--recipe", path, "--name", "x"), "no corpus", corpus_sha[:12])
        with Store(target) as store:
            assert store.list() == []


def test_a_continued_training_round_trips(db, tmp_path, corpus):
    """--from BASE is in the recipe; trained again on a store holding the base, the same tokenizer."""
    base = ok(invoke("--db", db, "train", corpus[1], "--name", "base", "--vocab-size", "280", "-q")).strip()
    ref = ok(invoke("--db", db, "train", corpus[0], "--from", base, "--name", "t", "--vocab-size", "320", "-q")).strip()
    text = ok(invoke("--db", db, "show", ref, "--recipe"))
    assert f'base = "{base}"' in text
    path = tmp_path / "continued.toml"
    path.write_text(text, encoding="utf-8")
    again = ok(invoke("--db", db, "train", "--recipe", path, "--name", "again", "-q")).strip()
    with Store(db) as store:
        assert merges_hash(store.load_model(again)) == merges_hash(store.load_model(ref))


def test_store_train_takes_a_recipe_and_its_keyword_form_builds_one(tmp_path, corpus):
    """The Python entry: Store.train(recipe, name); the keyword form stores the same recipe."""
    recipe = Recipe(
        tuple(FileInput(str(path), hashlib.sha256(path.read_bytes()).hexdigest()) for path in corpus),
        (Stage(300, "gpt2"),), (ENDOFTEXT,), min_count=2,
    )
    with Store(tmp_path / "one.db") as store:
        [ref] = store.train(recipe, "r")
        assert store.recipe_of(ref) == recipe
    with Store(tmp_path / "two.db") as store:
        refs = store.train([str(path) for path in corpus], "k", [290, 300], [ENDOFTEXT], min_count=2)
        assert store.recipe_of(refs[1]) == recipe
        assert store.recipe_of(refs[0]) == recipe.with_vocab_size(290)
        with pytest.raises(RecipeError, match="min_count contradicts the recipe"):
            store.train(recipe, "bad", min_count=3)
        store.train(recipe, "fine", vocab_sizes=[300], min_count=2)  # the recipe's own values: no contradiction


# -- refused -------------------------------------------------------------------------------------


def good_recipe(tmp_path: Path, corpus: list[Path]) -> str:
    db = tmp_path / "made.db"
    ref = ok(invoke("--db", db, "train", *corpus, "--name", "t", "--vocab-size", "300", "--special-token", ENDOFTEXT, "-q")).strip()
    return ok(invoke("--db", db, "show", ref, "--recipe"))


@pytest.mark.parametrize(
    ("change", "needles"),
    [
        (lambda text: text + "colour = 1\n", ["unknown key stages[1].colour"]),
        (lambda text: "seed = 3\n" + text, ["unknown key seed"]),
        (lambda text: text.replace("vocab_size = 300", 'vocab_size = "300"'), ["stages[1].vocab_size must be an integer, not a string"]),
        (lambda text: text.replace('special_tokens = ["<|endoftext|>"]', 'special_tokens = "<|endoftext|>"'), ["special_tokens must be a list of strings"]),
        (lambda text: text.replace('tie_break = "cs336"', 'tie_break = "random"'), ["tie_break must be one of"]),
        (lambda text: text.replace("sha256 = \"", "sha256 = \"0", 1).replace("\"\n", "\"\n"), ["sha256"]),
        (lambda text: text.replace("[[stages]]", "[[stagez]]"), ["unknown key stagez"]),
        (lambda text: text.replace("format = 1", "format = 2"), ["format 2 is newer"]),
        (lambda text: text + "[[stages]\n", ["is not TOML"]),
    ],
)
def test_a_bad_recipe_is_refused_in_one_line_and_nothing_is_stored(tmp_path, corpus, change, needles):
    path = tmp_path / "bad.toml"
    path.write_text(change(good_recipe(tmp_path, corpus)), encoding="utf-8")
    db = tmp_path / "target.db"
    result = invoke("--db", db, "train", "--recipe", path, "--name", "x")
    assert result.exit_code == 1
    assert_user_error(result, *needles)
    with Store(db) as store:
        assert store.list() == [] and store.corpora() == []


def test_a_changed_input_file_is_refused(tmp_path, corpus):
    path = tmp_path / "r.toml"
    path.write_text(good_recipe(tmp_path, corpus), encoding="utf-8")
    corpus[1].write_text(TEXT_B + "one more line\n", encoding="utf-8")
    db = tmp_path / "target.db"
    result = invoke("--db", db, "train", "--recipe", path, "--name", "x")
    assert result.exit_code == 1
    assert_user_error(result, f"{corpus[1].resolve()} has changed")
    corpus[1].unlink()
    assert_user_error(invoke("--db", db, "train", "--recipe", path, "--name", "x"), "is not a file")
    with Store(db) as store:
        assert store.list() == [] and store.corpora() == []


@pytest.mark.parametrize(
    ("options", "needles"),
    [
        (["--vocab-size", "400"], ["--vocab-size contradicts the recipe"]),
        (["--special-token", "<|other|>"], ["--special-token contradicts"]),
        (["--min-count", "3", "--pattern", "o200k_base"], ["--pattern, --min-count contradict the recipe"]),
        (["--special-tokens-at", "end"], ["--special-tokens-at contradicts"]),
        (["--from", "t@1"], ["--from contradicts"]),
        (["EXTRA_CORPUS"], ["--recipe names its own inputs: give no CORPUS"]),
        (["--stored-corpus", "1"], ["give no --stored-corpus"]),
        (["--dry-run"], ["--dry-run does not take a --recipe"]),
    ],
)
def test_options_that_contradict_the_recipe_are_refused(tmp_path, corpus, options, needles):
    path = tmp_path / "r.toml"
    path.write_text(good_recipe(tmp_path, corpus), encoding="utf-8")
    db = tmp_path / "target.db"
    options = [str(corpus[0]) if option == "EXTRA_CORPUS" else option for option in options]
    result = invoke("--db", db, "train", "--recipe", path, "--name", "x", *options)
    assert result.exit_code in (1, 2)
    assert_user_error(result, *needles)
    if db.exists():
        with Store(db) as store:
            assert store.list() == []
    # the recipe's own values are no contradiction
    same = ["--vocab-size", "300", "--special-token", ENDOFTEXT, "--pattern", "gpt2", "--special-tokens-at", "start"]
    assert ok(invoke("--db", db, "train", "--recipe", path, "--name", "x", *same, "-q")).strip() == "x@1"


def test_show_recipe_of_an_import_says_it_has_none(tmp_path, corpus):
    db = tmp_path / "s.db"
    ref = ok(invoke("--db", db, "train", corpus[0], "--name", "t", "--vocab-size", "280", "-q")).strip()
    out = tmp_path / "t.json"
    ok(invoke("--db", db, "export", ref, "--format", "hf", "-o", out))
    imported = ok(invoke("--db", db, "import", "hf", out, "--name", "imp")).split()[0]
    assert_user_error(invoke("--db", db, "show", imported, "--recipe"), f"{imported} has no recipe")
    assert "recipe" in ok(invoke("--db", db, "show", ref))


# -- the TOML itself ----------------------------------------------------------------------------

tokens = st.text(min_size=2, max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    specials=st.lists(tokens, max_size=4, unique=True),
    pattern=st.text(max_size=40),
    path=st.text(min_size=1, max_size=30),
    min_count=st.none() | st.integers(1, 2**63 - 1),
    at=st.sampled_from(["start", "end"]),
    stored=st.booleans(),
    base=st.none() | st.text(min_size=1, max_size=20),
)
def test_any_recipe_survives_toml(specials, pattern, path, min_count, at, stored, base):
    """Whatever the strings hold (quotes, backslashes, control characters, DEL, any script), the
    TOML written is TOML (tomllib reads it) and reads back as the same recipe."""
    sha = "ab" * 32
    inputs = (StoredCorpusInput(sha),) if stored else (FileInput(path, sha), FileInput(path + "2", sha))
    recipe = Recipe(inputs, (Stage(1000, pattern),), tuple(specials), at, min_count, "cs336", base)  # type: ignore[arg-type]
    assert recipe_from_toml(recipe.to_toml()) == recipe


def test_ctrl_c_while_a_recipes_tokenizer_is_written_keeps_its_counts(db, tmp_path, corpus, monkeypatch):
    ref = ok(invoke("--db", db, "train", *corpus, "--name", "t", "--vocab-size", "300", "-q")).strip()
    path = tmp_path / "t.toml"
    path.write_text(ok(invoke("--db", db, "show", ref, "--recipe")), encoding="utf-8")
    target = tmp_path / "other.db"

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Store, "_insert_tokenizer", interrupted)
    result = invoke("--db", target, "train", "--recipe", path, "--name", "again", "-q")
    assert result.exit_code == 130, (result.stderr, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "Interrupted after counting: no tokenizer was stored, but the pre-token counts of the recipe's inputs are kept in the store (corpus "
    ), lines
    assert lines[0].endswith("); run the same command again to reuse them.")
