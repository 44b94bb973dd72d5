"""The ``peers`` section's measurements: bpestore, tiktoken, gigatoken, quicktok and fastokens
encoding the same text with the same vocabulary, each in a fresh process.

Params: ``tool``'s task is ``peers:TOOL`` (cold: a fresh tokenizer, built untimed),
``peers:TOOL-warm`` (the same text encoded once untimed, then timed again) or ``peers:TOOL-fresh``
(the tokenizer's loading from the files and its first pass, timed together); ``encoding`` is
``gpt2`` (built from the fixture files) or ``cl100k_base`` / ``o200k_base`` (from the ``.tiktoken``
files the ``bpe-openai`` package ships, tiktoken's own definitions of their patterns and special
tokens); ``ranks`` is that vocabulary as a plain ``.tiktoken`` file (written untimed by
``prepare:peer-ranks``), ``json`` GPT-2 as an HF ``tokenizer.json``; ``text``, ``max_bytes``,
``ids_out`` as for the encode tasks. Every tool encodes with the special tokens recognised in the
text (tiktoken's ``allowed_special="all"``), and every tool that reads ``.tiktoken`` files, bpestore
too, reads ``ranks``: the same file, so that the fresh pass times the same loading work for each
(bpestore's ``Tokenizer.from_files`` of GPT-2's own ``vocab.json`` and ``merges.txt`` is timed in
the ``encode`` and ``load`` sections).
"""

from __future__ import annotations

import base64
import gzip
import importlib.util
from pathlib import Path
from typing import Any, Callable

import gpt2
from corpus import read_text
from encode_tasks import bpestore_tokenizer_class, encode_job, ids_facts
from harness import Job, Skip
from registry import task
from train_tasks import import_or_skip

ENCODINGS = ("gpt2", "cl100k_base", "o200k_base")
PEER_TOOLS = ("bpestore", "bpestore-array", "tiktoken", "gigatoken", "quicktok", "fastokens")
# gigatoken's name for each encoding's pre-tokenizer scheme (gigatoken.Tokenizer.from_tiktoken)
GIGATOKEN_SCHEMES = {"gpt2": "gpt2", "cl100k_base": "gpt4", "o200k_base": "o200k"}


# ---------------------------------------------------------------- the vocabularies


def bpe_openai_file(encoding: str) -> Path:
    """``bpe_openai/data/NAME.tiktoken.gz`` (the bpe-openai package ships cl100k_base and
    o200k_base), or Skip: tiktoken cannot download them here."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise Skip(f"no offline {encoding} vocabulary: the bpe-openai package (which ships it) is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / f"{encoding}.tiktoken.gz"
    if not path.is_file():
        raise Skip(f"no offline {encoding} vocabulary: {path} does not exist")
    return path


def read_tiktoken_ranks(path: Path) -> dict[bytes, int]:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)}


def openai_definition(encoding: str, ranks: dict[bytes, int]) -> dict:
    """tiktoken's own definition of ``encoding`` (pattern, special tokens) around ``ranks``:
    ``tiktoken_ext.openai_public`` is called with its download replaced by the ranks at hand."""
    import_or_skip("tiktoken")
    from tiktoken_ext import openai_public

    download = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = lambda *args, **kwargs: ranks
    try:
        return getattr(openai_public, encoding)()
    finally:
        openai_public.load_tiktoken_bpe = download


def vocabulary(params: dict) -> tuple[dict[bytes, int], str, dict[str, int]]:
    """(ordinary ranks, pattern, special tokens) of ``params["encoding"]``."""
    encoding = params["encoding"]
    if encoding == "gpt2":
        specials = {params["special"]: gpt2.ENDOFTEXT_ID}
        ranks = {token: rank for token, rank in gpt2.read_vocab(params["vocab"]).items() if token != params["special"].encode()}
        return ranks, gpt2.R50K_PATTERN, specials
    definition = openai_definition(encoding, read_tiktoken_ranks(bpe_openai_file(encoding)))
    return definition["mergeable_ranks"], definition["pat_str"], definition["special_tokens"]


@task("prepare:peer-ranks")
def prepare_peer_ranks(params: dict) -> Job:
    """Write the encoding's ordinary ranks as a plain ``.tiktoken`` file at ``params["ranks"]``
    (and GPT-2 as an HF ``tokenizer.json`` at ``params["json"]``): the files the peers load."""
    ranks, _, _ = vocabulary(params)

    def run() -> None:
        lines = (f"{base64.b64encode(token).decode()} {rank}\n" for token, rank in sorted(ranks.items(), key=lambda item: item[1]))
        Path(params["ranks"]).write_text("".join(lines))
        if params["encoding"] == "gpt2":
            import_or_skip("tokenizers")
            gpt2.hf_tokenizer(params["vocab"], params["merges"], [params["special"]]).save(params["json"])

    return Job(run, lambda _: {"tokens": len(ranks)})


# ---------------------------------------------------------------- each tool's encode, special tokens recognised
#
# Each tool has a maker: what it needs from Python (the special tokens, the pattern) is prepared
# when the maker is called, untimed; the maker returns ``build``, the tool's own loading from the
# files, which returns its ``encode``. The cold and warm tasks call ``build`` untimed; the fresh
# task times it with the first pass, as a new process pays both.

Build = Callable[[], Callable[[str], Any]]


def bpestore_maker(params: dict, *, array: bool = False) -> Build:
    """bpestore's ``encode`` or, with ``array``, its ``encode_to_array``: a NumPy array of uint32,
    as gigatoken returns (the list of Python ints ``encode`` returns costs an object per id).
    NumPy is imported untimed, as gigatoken imports it with itself."""
    tokenizer_class = bpestore_tokenizer_class()
    if array:
        import_or_skip("numpy")

    def build():
        tokenizer = tokenizer_class.from_format("tiktoken", params["ranks"], params["encoding"])
        encode = tokenizer.encode_to_array if array else tokenizer.encode
        return lambda text: encode(text, allowed_special="all")

    return build


def tiktoken_maker(params: dict) -> Build:
    """tiktoken's ``Encoding`` from the plain ranks file, read as tiktoken's ``load_tiktoken_bpe``
    reads one (the same line-by-line decoding, here without its download cache)."""
    tiktoken = import_or_skip("tiktoken")
    _, pattern, specials = vocabulary(params)

    def build():
        ranks = read_tiktoken_ranks(Path(params["ranks"]))
        encoding = tiktoken.Encoding(name=params["encoding"], pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)
        return lambda text: encoding.encode(text, allowed_special="all")

    return build


def gigatoken_loader(params: dict) -> Callable[[], Any]:
    """What builds gigatoken's ``Tokenizer`` for ``params["encoding"]`` from the plain
    ``.tiktoken`` ranks file. NumPy is imported untimed, as for bpestore's array path: gigatoken
    imports it at its first ``encode``, which made some 40 ms of its cold time (10 MB of English,
    cl100k_base: 90 MB/s with the import timed, 145 without)."""
    gigatoken = import_or_skip("gigatoken")
    import_or_skip("numpy")
    _, _, specials = vocabulary(params)
    return lambda: gigatoken.Tokenizer.from_tiktoken(params["ranks"], pretokenizer=GIGATOKEN_SCHEMES[params["encoding"]],
                                                     special_tokens=specials)


def gigatoken_tokenizer(params: dict):
    """gigatoken's tokenizer itself (for the ``.npy`` tasks)."""
    return gigatoken_loader(params)()


def gigatoken_maker(params: dict) -> Build:
    """gigatoken's ``encode``, which returns a NumPy array of uint32."""
    load = gigatoken_loader(params)
    return lambda: load().encode


def quicktok_maker(params: dict) -> Build:
    quicktok = import_or_skip("quicktok")
    if params["encoding"] == "gpt2":
        raise Skip("quicktok has no GPT-2 (r50k) pre-tokenizer: it compiles each grammar by hand "
                   "(cl100k, o200k, llama3, qwen, tekken) and its importer refuses other patterns")

    def build():
        encoding = quicktok.get_encoding(params["encoding"])  # its own bundled copy of the vocabulary
        return lambda text: encoding.encode(text, allowed_special="all")

    return build


def fastokens_maker(params: dict) -> Build:
    fastokens = import_or_skip("fastokens")
    _, pattern, specials = vocabulary(params)

    def build():
        if params["encoding"] == "gpt2":
            tokenizer = fastokens.Tokenizer.from_file(params["json"])  # GPT-2's HF tokenizer.json
        else:
            tokenizer = fastokens.Tokenizer.from_tiktoken(params["ranks"], pattern=pattern, special_tokens=specials)
        return lambda text: tokenizer.encode(text).ids

    return build


MAKERS: dict[str, Callable[[dict], Build]] = {
    "bpestore": bpestore_maker, "bpestore-array": lambda params: bpestore_maker(params, array=True),
    "tiktoken": tiktoken_maker, "gigatoken": gigatoken_maker, "quicktok": quicktok_maker, "fastokens": fastokens_maker}


def fresh_job(params: dict, build: Build) -> Job:
    """The tool's loading from the files and its first pass, timed together."""
    text = read_text(params["text"], params.get("max_bytes"))
    return Job(lambda: build()(text), lambda ids: ids_facts(ids, text, params))


def register(tool: str) -> None:
    task(f"peers:{tool}")(lambda params: encode_job(params, MAKERS[tool](params)()))
    task(f"peers:{tool}-warm")(lambda params: encode_job(params, MAKERS[tool](params)(), second_pass=True))
    task(f"peers:{tool}-fresh")(lambda params: fresh_job(params, MAKERS[tool](params)))


for _tool in PEER_TOOLS:
    register(_tool)
