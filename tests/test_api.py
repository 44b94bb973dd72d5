"""The encoding API users of tiktoken and Hugging Face know, checked against those libraries.

* The special-token policy (``allowed_special`` / ``disallowed_special``, ``encode_ordinary``) gives
  tiktoken's ids and raises where tiktoken raises, on GPT-2 with three special tokens, for random
  texts holding special tokens and near misses, and every kind of policy.
* The vocabulary accessors (``n_vocab``, ``eot_token``, ``special_tokens_set``,
  ``token_byte_values``, ``decode_single_token_bytes``, ``decode_batch``) agree with tiktoken's.
* ``encode_with_offsets`` gives the offsets of Hugging Face ``tokenizers`` loading the same
  tokenizer exported to ``tokenizer.json``, and spans with the documented properties.
* Wrong types raise one clear TypeError.

Expected ids and offsets come from tiktoken, ``tokenizers`` or an independent check, never from
literals copied from bpestore.
"""

from __future__ import annotations

import re
from functools import lru_cache

import pytest
import tiktoken
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bpestore import BPEModel, DisallowedSpecialTokenError, Tokenizer, formats
from gpt2_tiktoken import ENDOFTEXT, ENDOFTEXT_ID, R50K_PATTERN, gpt2_vocab_and_merges
from strategies import texts
from tiers import examples

# Special tokens beyond GPT-2's own; none is a prefix of another, so that the first disallowed
# one in a text is the same whichever way a search orders them.
FIM = "<|fim_middle|>"
SEP = "<| sep |>"
SPECIALS = [ENDOFTEXT, FIM, SEP]
NEAR_MISSES = ["<|fim_", "<|", "|>", "<| sep", "sep |>", "<|endoftext", " <|endoftext|>", "\n" + FIM, "  " + SEP]

HYPOTHESIS = settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@lru_cache(maxsize=1)
def ours() -> Tokenizer:
    vocab, merges = gpt2_vocab_and_merges()
    return Tokenizer(dict(vocab), list(merges), SPECIALS)


@lru_cache(maxsize=1)
def theirs() -> tiktoken.Encoding:
    """tiktoken's GPT-2 with the same special tokens at the ids bpestore gives them (the next free
    ones, in order)."""
    vocab, _ = gpt2_vocab_and_merges()
    return tiktoken.Encoding(
        name="gpt2_three_specials",
        pat_str=R50K_PATTERN,
        mergeable_ranks={token: token_id for token_id, token in vocab.items() if token_id != ENDOFTEXT_ID},
        special_tokens={ENDOFTEXT: ENDOFTEXT_ID, FIM: ENDOFTEXT_ID + 1, SEP: ENDOFTEXT_ID + 2},
    )


def texts_with_specials():
    """Awkward texts (assigned code points: tiktoken's Unicode tables are older) with special
    tokens and near misses of them anywhere."""
    piece = st.one_of(texts(max_pieces=6, assigned_only=True), st.sampled_from(SPECIALS + NEAR_MISSES))
    return st.lists(piece, max_size=12).map("".join)


SUBSETS = [set(), {ENDOFTEXT}, {FIM, SEP}, {SEP}, set(SPECIALS)]
allowed_policies = st.sampled_from(["all", *SUBSETS])
disallowed_policies = st.sampled_from(["all", (), *SUBSETS, {"<|fim_"}])


def tiktoken_outcome(encode, text, **policy):
    """tiktoken's ids, or ``("raises", token, position)`` found by an independent search."""
    try:
        return encode(text, **policy)
    except ValueError as error:
        token = re.search(r"disallowed special token ('.*?'|\".*?\")", str(error)).group(1)
        token = eval(token)  # its repr, as tiktoken wrote it
        return ("raises", token, text.find(token))


def our_outcome(encode, text, **policy):
    try:
        return encode(text, **policy)
    except DisallowedSpecialTokenError as error:
        assert isinstance(error, ValueError)
        assert repr(error.token) in str(error) and f"character {error.position}" in str(error)
        return ("raises", error.token, error.position)


# -- the special-token policy ------------------------------------------------------------------------


@HYPOTHESIS
@given(text=texts_with_specials(), allowed=allowed_policies, disallowed=disallowed_policies)
@example(text=f"a{ENDOFTEXT}b", allowed=set(), disallowed="all")
@example(text=f"x {FIM}{SEP}", allowed={SEP}, disallowed="all")
@example(text=f"x {FIM}{SEP}", allowed={SEP}, disallowed=())
@example(text="<|fim_middle|>", allowed="all", disallowed={"<|fim_"})
def test_policy_matches_tiktoken(text, allowed, disallowed):
    policy = {"allowed_special": allowed, "disallowed_special": disallowed}
    expected = tiktoken_outcome(theirs().encode, text, **policy)
    assert our_outcome(ours().encode, text, **policy) == expected
    array = our_outcome(ours().encode_to_array, text, **policy)
    assert (array if isinstance(array, tuple) else array.tolist()) == expected
    if not isinstance(expected, tuple):
        assert ours().encode_with_offsets(text, **policy)[0] == expected


@HYPOTHESIS
@given(text=texts_with_specials())
def test_defaults_and_encode_ordinary(text):
    # Our default recognises every special token (CS336): tiktoken's allowed_special="all".
    assert ours().encode(text) == theirs().encode(text, allowed_special="all")
    # Where tiktoken's default raises, allowed_special=set() raises the same way.
    expected = tiktoken_outcome(theirs().encode, text)
    assert our_outcome(ours().encode, text, allowed_special=set()) == expected
    assert ours().encode_ordinary(text) == theirs().encode_ordinary(text)


@HYPOTHESIS
@given(
    batch=st.lists(texts_with_specials(), max_size=6),
    allowed=allowed_policies,
    disallowed=disallowed_policies,
    threads=st.sampled_from([None, 1, 3]),
)
def test_encode_batch_matches_tiktoken(batch, allowed, disallowed, threads):
    policy = {"allowed_special": allowed, "disallowed_special": disallowed}
    try:
        expected = theirs().encode_batch(batch, num_threads=2, **policy)
    except ValueError:
        with pytest.raises(DisallowedSpecialTokenError):
            ours().encode_batch(batch, threads, **policy)
        return
    assert ours().encode_batch(batch, threads, **policy) == expected
    assert ours().encode_batch(iter(batch), num_threads=threads, **policy) == expected
    assert ours().encode_ordinary_batch(batch) == theirs().encode_ordinary_batch(batch)


def cut(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]


@HYPOTHESIS
@given(
    text=texts_with_specials(),
    cuts=st.lists(st.integers(0, 400), max_size=8),
    allowed=allowed_policies,
    disallowed=disallowed_policies,
    block=st.sampled_from([1, 7, 64, 8192]),
)
@example(text=f"ab {SEP} {FIM}", cuts=[4, 10], allowed={FIM}, disallowed=(), block=1)
@example(text="ab <|fim_middle|>", cuts=[5, 8], allowed=set(), disallowed="all", block=1)
def test_streams_follow_the_policy(text, cuts, allowed, disallowed, block):
    """encode_iterable and encode_blocks give the ids (or the error) of encode, however the
    text is cut, with any policy; a disallowed string across a cut is found too."""
    policy = {"allowed_special": allowed, "disallowed_special": disallowed}
    expected = our_outcome(ours().encode, text, **policy)

    def streamed(encode):
        ids = []
        try:
            for item in encode(cut(text, cuts), **policy):
                ids.extend(item.tolist() if hasattr(item, "tolist") else [item])
        except DisallowedSpecialTokenError as error:
            return ("raises", error.token, error.position)
        return ids

    assert streamed(ours().encode_iterable) == expected
    assert streamed(lambda pieces, **p: ours().encode_blocks(pieces, block, **p)) == expected
    engine_stream = ours()._engine.iter_ids(cut(text, cuts), block, ours()._resolve(allowed, disallowed)[0])
    if not isinstance(expected, tuple):
        assert list(engine_stream) == expected


def test_the_error_names_the_first_disallowed_token_and_its_character_position():
    text = "日本 <|fim_<|<| sep |> and <|endoftext|>"
    with pytest.raises(DisallowedSpecialTokenError) as raised:
        ours().encode(text, allowed_special=set())
    assert (raised.value.token, raised.value.position) == (SEP, text.index(SEP))
    assert text[raised.value.position :].startswith(SEP)  # a character index, not a byte offset


def test_policy_arguments_of_the_wrong_kind():
    with pytest.raises(ValueError, match="allowed_special must be 'all' or a collection"):
        ours().encode("x", allowed_special=ENDOFTEXT)
    with pytest.raises(ValueError, match="disallowed_special must be 'all' or a collection"):
        ours().encode("x", disallowed_special="none")
    with pytest.raises(TypeError, match="allowed_special must hold str"):
        ours().encode("x", allowed_special={b"<|endoftext|>"})
    with pytest.raises(TypeError):
        ours().encode("x", allowed_special=5)


# -- what tiktoken's Encoding shows of its vocabulary ---------------------------------------------------


def test_vocabulary_accessors_match_tiktoken():
    tokenizer, encoding = ours(), theirs()
    assert tokenizer.n_vocab == encoding.n_vocab
    assert tokenizer.max_token_value == encoding.max_token_value
    assert tokenizer.eot_token == encoding.eot_token
    assert tokenizer.special_tokens_set == encoding.special_tokens_set
    assert tokenizer.token_byte_values() == encoding.token_byte_values()
    for token_id in [0, 255, 256, 11, 50000, ENDOFTEXT_ID, ENDOFTEXT_ID + 2]:
        assert tokenizer.decode_single_token_bytes(token_id) == encoding.decode_single_token_bytes(token_id)
        assert tokenizer.is_special_token(token_id) == encoding.is_special_token(token_id)
    with pytest.raises(KeyError):
        encoding.decode_single_token_bytes(ENDOFTEXT_ID + 3)
    with pytest.raises(KeyError):
        tokenizer.decode_single_token_bytes(ENDOFTEXT_ID + 3)
    ids = encoding.encode("héllo wörld 😀", allowed_special="all")
    assert tokenizer.decode_tokens_bytes(ids) == encoding.decode_tokens_bytes(ids)


def test_eot_token_is_none_without_endoftext():
    vocab, merges = gpt2_vocab_and_merges()
    vocab = {i: t for i, t in vocab.items() if i != ENDOFTEXT_ID}
    assert Tokenizer(vocab, list(merges)).eot_token is None
    assert Tokenizer(dict(vocab), list(merges), [FIM]).eot_token is None


@HYPOTHESIS
@given(batch=st.lists(st.lists(st.integers(0, ENDOFTEXT_ID + 2), max_size=20), max_size=5))
def test_decode_batch_matches_tiktoken(batch):
    assert ours().decode_batch(batch) == theirs().decode_batch(batch)
    assert ours().decode_bytes_batch(batch) == theirs().decode_bytes_batch(batch)
    for errors in ["replace", "ignore", "backslashreplace"]:
        assert ours().decode_batch(batch, errors=errors) == theirs().decode_batch(batch, errors=errors)


# -- offsets ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def hf_tokenizer(tmp_dir: str):
    tokenizers = pytest.importorskip("tokenizers")
    path = f"{tmp_dir}/tokenizer.json"
    formats.export(ours(), "hf", path)
    return tokenizers.Tokenizer.from_file(path)


@pytest.fixture(scope="module")
def hf(tmp_path_factory):
    return hf_tokenizer(str(tmp_path_factory.mktemp("hf")))


def check_spans(tokenizer: Tokenizer, text: str, ids: list[int], offsets: list[tuple[int, int]]) -> None:
    """The documented properties: in order, covering the text, each span the characters whose
    bytes its token holds."""
    assert len(offsets) == len(ids)
    if not text:
        assert offsets == []
        return
    assert offsets[0][0] == 0 and offsets[-1][1] == len(text)
    for (start, end), (next_start, next_end) in zip(offsets, offsets[1:]):
        assert start <= next_start and end <= next_end
        # contiguous, or overlapping by the one character a token boundary cuts
        assert next_start in (end, end - 1)
    for token_id, (start, end) in zip(ids, offsets):
        token = tokenizer.decode_single_token_bytes(token_id)
        span = text[start:end].encode("utf-8")
        assert start < end and token in span
        # the token's bytes reach into the first and the last character of its span
        assert len(span) - len(token) < len(text[start].encode()) + len(text[end - 1].encode())
        if token == span:
            assert tokenizer.encode_ordinary(text[start:end]) == [token_id] or tokenizer.is_special_token(token_id)


@HYPOTHESIS
@given(text=texts_with_specials())
@example(text="a 日本語 b 😀 x 😀😀 𝔘𝔫 e\u0301")
@example(text="  hi  there\n\n x<|endoftext|>y")
def test_offsets_match_hugging_face(hf, text):
    ids, offsets = ours().encode_with_offsets(text)
    assert ids == ours().encode(text)
    encoding = hf.encode(text)
    assert ids == encoding.ids
    assert offsets == encoding.offsets
    check_spans(ours(), text, ids, offsets)


@HYPOTHESIS
@given(text=texts_with_specials())
def test_offsets_of_ordinary_text(text):
    ids, offsets = ours().encode_with_offsets(text, allowed_special=set(), disallowed_special=())
    assert ids == ours().encode_ordinary(text)
    check_spans(ours(), text, ids, offsets)


# -- wrong types --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda t: t.encode(b"abc"), "encode\\(\\) takes text as a str, not bytes"),
        (lambda t: t.encode(None), "encode\\(\\) takes text as a str, not NoneType"),
        (lambda t: t.encode(b"abc", allowed_special=set()), "takes text as a str, not bytes"),
        (lambda t: t.encode_ordinary(7), "takes text as a str, not int"),
        (lambda t: t.encode_to_array(b"x"), "takes text as a str, not bytes"),
        (lambda t: t.encode_with_offsets(b"x"), "takes text as a str, not bytes"),
        (lambda t: t.encode_batch("abc"), "takes an iterable of str, not a single str"),
        (lambda t: t.encode_batch(["ok", b"abc"]), "encode_batch\\(\\) takes text as a str, not bytes"),
        (lambda t: list(t.encode_iterable(["ok ", b"abc"])), "encode_iterable\\(\\) takes an iterable of str, got bytes"),
        (lambda t: t.encode_iterable(5), "not iterable"),
        (lambda t: t.decode("abc"), "decode takes a sequence of int ids, not str"),
        (lambda t: t.decode(b"abc"), "decode takes a sequence of int ids, not bytes"),
        (lambda t: t.decode([1, "2"]), "token ids must be integers, got '2'"),
        (lambda t: t.decode([1.0]), "token ids must be integers, got 1.0"),
        (lambda t: t.decode(None), "not iterable"),
        (lambda t: t.decode_batch("abc"), "decode_batch takes sequences of int ids, not str"),
        (lambda t: t.decode_single_token_bytes("a"), "a token id must be an int, not str"),
    ],
)
def test_wrong_types_raise_one_clear_type_error(call, message):
    with pytest.raises(TypeError, match=message):
        call(ours())


def test_a_lone_surrogate_is_refused_where_tiktoken_replaces_it():
    text = "ok \ud800 x"
    assert theirs().decode(theirs().encode(text)) != text  # tiktoken changes the text
    for encode in [ours().encode, ours().encode_ordinary, lambda t: list(ours().encode_iterable([t]))]:
        with pytest.raises(UnicodeEncodeError) as raised:
            encode(text)
        assert raised.value.start == text.index("\ud800")


def test_numpy_ids_decode():
    pytest.importorskip("numpy")
    ids = ours().encode_to_array("hello world")
    assert ids.dtype == "uint32" and ids.flags.writeable and ids.flags.owndata is False  # (the engine's buffer)
    assert ours().decode(ids) == "hello world"
    assert ours().decode_single_token_bytes(ids[0]) == b"hello"
    ids[0] = 1  # an array of one's own, as tiktoken's encode_to_numpy gives
    assert ours().encode_to_array("hello world")[0] != 1


def test_numpy_ids_outlive_their_tokenizer_and_views():
    # The array wraps the engine's own vector (through a memoryview of it): the vector must live
    # as long as the array does, whatever else is dropped, and hold the ids encode gives.
    np = pytest.importorskip("numpy")
    import gc

    tokenizer = ours()
    text = "hello world, " * 5000
    expected = tokenizer.encode(text)
    arrays = [tokenizer.encode_to_array(text) for _ in range(3)]
    del tokenizer
    gc.collect()
    junk = [np.arange(len(expected), dtype=np.uint32) + 7 for _ in range(5)]  # (reuse of freed memory shows)
    for array in arrays:
        assert array.tolist() == expected
    arrays[0][:] = 0
    assert arrays[1].tolist() == expected and arrays[2].tolist() == expected, "each call's ids are its own"
    view = memoryview(arrays[1])
    del arrays[1], junk
    gc.collect()
    assert view.tolist() == expected


# -- the command line's encode: --allowed-special and --ordinary ---------------------------------------


@pytest.fixture(scope="module")
def cli_store(tmp_path_factory):
    from bpestore import Store

    db = tmp_path_factory.mktemp("cli") / "store.db"
    with Store(db) as store:
        store.save("g", ours())
    return db


def run_cli(*args, input=None):
    from click.testing import CliRunner

    from bpestore.cli import main

    try:
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        runner = CliRunner()
    return runner.invoke(main, [str(arg) for arg in args], input=input, env={"BPESTORE_DEBUG": None})


CLI_TEXT = f"Hello {ENDOFTEXT} world{FIM}x {SEP}\n 日本 <|fim_ ok\n"
CLI_CASES = [
    ([], {"allowed_special": "all"}),
    (["--ordinary"], {"allowed_special": set(), "disallowed_special": ()}),
    (["--allowed-special", "all"], {"allowed_special": "all"}),
    (["--allowed-special", FIM, "--ordinary"], {"allowed_special": {FIM}, "disallowed_special": ()}),
    (["--allowed-special", FIM, "--allowed-special", SEP, "--allowed-special", ENDOFTEXT], {"allowed_special": set(SPECIALS)}),
]


@pytest.mark.parametrize("options, policy", CLI_CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
@pytest.mark.parametrize("source", ["stdin", "file", "npy"])
def test_cli_encode_policy_matches_tiktoken(cli_store, tmp_path, options, policy, source):
    np = pytest.importorskip("numpy")
    expected = theirs().encode(CLI_TEXT, **policy)
    path = tmp_path / "in.txt"
    path.write_bytes(CLI_TEXT.encode("utf-8"))
    if source == "stdin":
        result = run_cli("encode", "g", "--db", cli_store, *options, input=CLI_TEXT.encode("utf-8"))
    else:
        out = [] if source == "file" else ["--output", tmp_path / "ids.npy"]
        result = run_cli("encode", "g", path, "--db", cli_store, *options, *out)
    assert result.exit_code == 0, result.stderr
    ids = np.load(tmp_path / "ids.npy").tolist() if source == "npy" else [int(i) for i in result.stdout.split()]
    assert ids == expected


@pytest.mark.parametrize("options", [["--allowed-special", "none"], ["--allowed-special", SEP]])
@pytest.mark.parametrize("source", ["stdin", "npy"])
def test_cli_encode_refuses_a_disallowed_special_token(cli_store, tmp_path, options, source):
    expected = tiktoken_outcome(theirs().encode, CLI_TEXT, allowed_special=set(options[1:]) - {"none"})
    assert expected[0] == "raises"
    path = tmp_path / "in.txt"
    path.write_bytes(CLI_TEXT.encode("utf-8"))
    if source == "stdin":
        result = run_cli("encode", "g", "--db", cli_store, *options, input=CLI_TEXT.encode("utf-8"))
    else:
        result = run_cli("encode", "g", path, "--db", cli_store, *options, "--output", tmp_path / "ids.npy")
        assert not (tmp_path / "ids.npy").exists()
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert f"{expected[1]!r} at character {expected[2]}" in line
    assert "--allowed-special" in line and "--ordinary" in line and "Traceback" not in line


def test_cli_encode_unknown_allowed_special_token(cli_store):
    result = run_cli("encode", "g", "--db", cli_store, "--allowed-special", "<|nope|>", input=b"x")
    assert result.exit_code == 2
    assert "'<|nope|>' is not a special token of g" in result.stderr
    result = run_cli("encode", "g", "--db", cli_store, "--allowed-special", "none", "--allowed-special", FIM, input=b"x")
    assert result.exit_code == 2


# -- formats from Python: Tokenizer.from_format / Tokenizer.export ---------------------------------------


@lru_cache(maxsize=1)
def trained() -> Tokenizer:
    from bpestore import train_bpe
    from conftest import shared_file

    vocab, merges = train_bpe(shared_file("fixtures", "corpus.en"), 400, [ENDOFTEXT])
    return Tokenizer(vocab, merges, [ENDOFTEXT])


def read_back(format: str, output, tokenizer: Tokenizer) -> Tokenizer:
    if format == "gpt2":
        return Tokenizer.from_format("gpt2", output / "vocab.json", output / "merges.txt", special_tokens=tokenizer.special_tokens)
    if format == "tiktoken":
        return Tokenizer.from_format("tiktoken", output, tokenizer.pattern, special_tokens=tokenizer.special_ids)
    return Tokenizer.from_format(format, output)


@pytest.mark.parametrize("format", formats.names())
def test_every_format_round_trips_through_the_python_api(tmp_path, format):
    tokenizer = trained()
    output = tmp_path / ("out" if formats.get(format).writes_directory else "tokenizer.out")
    if formats.get(format).writes_directory:
        output.mkdir()
    tokenizer.export(format, output)
    again = read_back(format, output, tokenizer)
    assert again.vocab == tokenizer.vocab and again.special_ids == tokenizer.special_ids
    sample = f"Hello wörld, the cat sat.{ENDOFTEXT} 日本 😀\n"
    assert again.encode(sample) == tokenizer.encode(sample)


def test_from_format_errors_are_the_clis(tmp_path, cli_store):
    from bpestore import FormatError

    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"model": {"type": "BPE", "vocab": null, "merges": []}}', encoding="utf-8")
    with pytest.raises(FormatError) as raised:
        Tokenizer.from_format("hf", bad)
    result = run_cli("import", "hf", bad, "--name", "bad", "--db", cli_store)
    assert result.exit_code == 1
    assert result.stderr.strip() == f"Error: {raised.value}"
    with pytest.raises(ValueError, match="unknown format 'word2vec'"):
        Tokenizer.from_format("word2vec", bad)


# -- encode_iterable's memory, for its worst kind of text --------------------------------------------------


@pytest.mark.slow  # (a memory limit, in a subprocess)
@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="needs RLIMIT_AS and /proc")
def test_encode_iterable_memory_with_distinct_medium_pieces(tmp_path):
    """CS336's 1 MB bound (tests/test_tokenizer.py) for 5 MB of words that are all different and
    16 to 31 bytes long: the pieces that take the most room in the stream's cache, which is full
    and starts afresh again and again."""
    import random

    from test_tokenizer import run_under_memory_limit

    rng = random.Random(7)
    lines, size = [], 0
    while size < 5_000_000:
        line = "".join(" " + "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(15, 30))) for _ in range(12)) + "\n"
        lines.append(line)
        size += len(line)
    path = tmp_path / "medium.txt"
    path.write_text("".join(lines), encoding="utf-8")
    result = run_under_memory_limit(path, "iterable")
    assert not result["memory_error"], f"out of memory after {result['count']} ids"
    assert result["count"] == len(ours().encode("".join(lines)))


# -- the model's rules: the engine's check_model, against an obviously correct statement of them ---


def _valid_model(vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]]) -> bool:
    tokens = list(vocab.values())
    return (
        len(set(tokens)) == len(tokens)
        and all(bytes([b]) in tokens for b in range(256))
        and all(left in tokens and right in tokens and left + right in tokens for left, right in merges)
        and len(set(merges)) == len(merges)
    )


_small_tokens = st.binary(min_size=1, max_size=3)


@settings(max_examples=examples(300), deadline=None)
@given(
    extra=st.lists(_small_tokens, max_size=8),
    dropped=st.sets(st.integers(0, 255), max_size=2),
    merges=st.lists(st.tuples(_small_tokens, _small_tokens), max_size=6),
    data=st.data(),
)
def test_a_model_is_refused_exactly_when_it_breaks_a_rule(extra, dropped, merges, data):
    """BPEModel's rules are the engine's (``check_model``, by which an Encoder is built): a
    model is refused, with a ValueError, exactly when the statement of the rules above says."""
    from bpestore.engine import check_model

    vocab = {b: bytes([b]) for b in range(256) if b not in dropped}
    for token in extra:
        vocab[max(vocab, default=255) + 1] = token
    if merges and data.draw(st.booleans()):  # often, merges that can hold
        for left, right in merges:
            for token in (left, right, left + right):
                if token not in vocab.values():
                    vocab[max(vocab) + 1] = token
    valid = _valid_model(vocab, merges)
    if valid:
        check_model(vocab, merges)
        assert BPEModel(vocab, merges).vocab == vocab
    else:
        with pytest.raises(ValueError):
            check_model(vocab, merges)
        with pytest.raises(ValueError):
            BPEModel(vocab, merges)
