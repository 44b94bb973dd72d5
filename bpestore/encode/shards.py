"""Encoding a dataset of many files into shards: one ``.npy`` per input file, and a manifest.

The plan: the inputs (paths, globs or fsspec URLs such as ``s3://bucket/data/*.txt``) are expanded,
each glob's matches sorted, the arguments kept in the order given; shard ``i`` is the ``i``-th file
and is written as ``OUTPUT_DIR/shard-0000i.npy`` (uint16 when every id fits, else uint32).
``OUTPUT_DIR`` is a local directory or an fsspec URL (a remote shard is encoded into a local
temporary file, then uploaded; see :class:`OutputDir`).

What the shards hold: each file is encoded on its own, as :meth:`Tokenizer.encode` of its whole
text, and the shards' concatenation is the concatenation of those. A file boundary is therefore a
boundary of the encoding too: it equals the encoding of all the files' text joined only where each
file ends at a safe cut (for example with ``<|endoftext|>``, or at a document's end followed by
the next file's ``" ..."``-free start). A file that ends in the middle of a word is encoded as if
the word ended there.

The manifest, ``OUTPUT_DIR/manifest.jsonl``: a header line (the tokenizer's ref and fingerprint,
the dtype, the special-token policy, the number of shards) and one line per finished shard
(``shard``, ``source``, ``tokens``, ``sha256`` of the ``.npy``, its size and the source's size
and modification time). Each shard is written to a hidden temporary file and renamed; only then
is its line added, by rewriting the manifest to a temporary file and renaming it. A run that is
killed therefore leaves finished shards recorded and nothing half-written under a shard's name;
a rerun skips every shard whose line, output file and source still agree, and encodes the rest.
A rerun with another tokenizer (or another special-token policy) is refused: the directory holds
another encoding.

The runner that encodes the pending shards is pluggable: :func:`encode_shards` runs them one after
another on this machine (each on the engine's threads); :mod:`bpestore.distributed.encode` runs
them on a Dask cluster. Both share the plan, the manifest and the skipping here.
"""

from __future__ import annotations

import errno
import glob
import hashlib
import json
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence, Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from ..atomic import atomic_path, temporary_name
from ..errors import BpestoreError
from ..progress import progress_bar
from ..workers import default_workers
from .files import encode_file_to_npy, id_dtype, write_npy_stream
from .tokenizer import Tokenizer

if TYPE_CHECKING:
    import numpy as np  # (imported where it runs: commands that do not encode, `train` among them, never load it)

MANIFEST_NAME = "manifest.jsonl"
MANIFEST_KIND = "bpestore encoded shards"
MANIFEST_VERSION = 1


class ShardManifestError(BpestoreError, ValueError):
    """The output directory's manifest belongs to another encoding, or cannot be read."""


@dataclass(frozen=True)
class Shard:
    """One input file and where its ids go.

    ``source``: a local path or an fsspec URL; ``size`` and ``version`` (a local file's
    modification time in ns; a remote file's mtime, ETag or similar when the file system gives
    one) tell a rerun whether the source changed since it was encoded."""

    index: int
    source: str
    size: int
    version: str | None

    @property
    def file_name(self) -> str:
        """The shard's ``.npy`` name, by its index (sorts in shard order)."""
        return f"shard-{self.index:05d}.npy"


# -- the plan ---------------------------------------------------------------------------------------


def _is_url(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _local(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def _local_shard_fields(path: str) -> tuple[str, int, str | None]:
    stat = os.stat(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"not a file (a directory?), cannot encode it: {path}")
    return path, stat.st_size, str(stat.st_mtime_ns)


def _remote_version(info: dict[str, Any]) -> str | None:
    for key in ("mtime", "LastModified", "last_modified", "ETag", "etag", "md5", "created"):
        if info.get(key) is not None:
            return str(info[key])
    return None


def _expand(argument: str) -> list[tuple[str, int, str | None]]:
    if not _is_url(argument):
        path = _local(argument)
        if glob.has_magic(path):
            matches = sorted(match for match in glob.glob(path) if os.path.isfile(match))
            if not matches:
                raise FileNotFoundError(f"no file matches {argument}")
            return [_local_shard_fields(match) for match in matches]
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", argument)
        return [_local_shard_fields(path)]
    from fsspec.core import url_to_fs

    fs, path = url_to_fs(argument)
    paths = sorted(fs.glob(path)) if glob.has_magic(path) else [path]
    found = []
    for match in paths:
        info = fs.info(match)
        if info.get("type") == "directory":
            continue
        found.append((fs.unstrip_protocol(match), int(info["size"]), _remote_version(info)))
    if not found:
        raise FileNotFoundError(f"no file matches {argument}")
    return found


def plan_shards(inputs: Iterable[str | os.PathLike[str]]) -> list[Shard]:
    """The shards of ``inputs``, in order: each argument expanded (a glob's matches sorted, as a
    shell does), the arguments in the order given. A file named twice is refused (its ids would
    appear twice); FileNotFoundError for an argument that names no file."""
    shards: list[Shard] = []
    seen: set[str] = set()
    for argument in inputs:
        for source, size, version in _expand(os.fspath(argument)):
            key = source if _is_url(source) else os.path.realpath(source)
            if key in seen:
                raise ValueError(f"{source} is named twice among the inputs; each file is one shard")
            seen.add(key)
            shards.append(Shard(len(shards), source, size, version))
    if not shards:
        raise ValueError("no input files to encode")
    return shards


# -- the tokenizer's fingerprint and the special-token policy ------------------------------------------


def _policy_record(allowed_special: Any, disallowed_special: Any) -> dict[str, Any]:
    def normal(value: Any) -> Any:
        return "all" if value == "all" else sorted(value)

    return {"allowed_special": normal(allowed_special), "disallowed_special": normal(disallowed_special)}


def fingerprint(tokenizer: Tokenizer) -> str:
    """A SHA-256 of everything that decides the tokenizer's ids: vocab, merges, special and added
    tokens with their ids, pattern and merge rule (not its name, nor its caches)."""
    digest = hashlib.sha256()
    head = {
        "merge_rule": tokenizer.merge_rule,
        "pattern": tokenizer.pattern,
        "special_ids": sorted(tokenizer.special_ids.items()),
    }
    if tokenizer.added_ids:  # (only then: the fingerprints of tokenizers without any stay as they were)
        head["added_ids"] = sorted(tokenizer.added_ids.items())
    digest.update(json.dumps(head, sort_keys=True).encode("utf-8"))

    def add(part: bytes) -> None:
        digest.update(len(part).to_bytes(4, "little"))
        digest.update(part)

    digest.update(b"vocab")
    for token_id in sorted(tokenizer.vocab):
        digest.update(token_id.to_bytes(4, "little"))
        add(tokenizer.vocab[token_id])
    digest.update(b"merges")
    for left, right in tokenizer.merges:
        add(left)
        add(right)
    return digest.hexdigest()


# -- the manifest -------------------------------------------------------------------------------------


def _write_atomically(path: Path, text: str) -> None:
    with atomic_path(path) as temporary, open(temporary, "x", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())


class OutputDir:
    """Where the shards and the manifest go: a local directory, or an fsspec URL (``s3://...``;
    ``file://`` is local). A remote shard is written to a local temporary file, uploaded under a
    hidden temporary name and moved to its name (on object stores a move is a copy and a delete:
    the name appears only complete, and the manifest records it only after)."""

    def __init__(self, location: str | os.PathLike[str]):
        location = os.fspath(location)
        self.location = location
        self.fs: Any = None
        if _is_url(location):
            from fsspec.core import url_to_fs

            self.fs, self.root = url_to_fs(location)
            self.root = self.root.rstrip("/")
        else:
            self.root = _local(location)

    def __str__(self) -> str:
        return self.location

    def path(self, name: str) -> str:
        """``name`` inside the directory (a local path, or a URL)."""
        if self.fs is None:
            return os.path.join(self.root, name)
        url: str = self.fs.unstrip_protocol(f"{self.root}/{name}")  # (fsspec ships no types)
        return url

    def _remote(self, name: str) -> str:
        return f"{self.root}/{name}"

    def make(self) -> None:
        """Creates the directory (and its parents) if missing."""
        if self.fs is None:
            Path(self.root).mkdir(parents=True, exist_ok=True)
        else:
            self.fs.makedirs(self.root, exist_ok=True)

    def size(self, name: str) -> int:
        """The size of ``name``; OSError (FileNotFoundError) if it is missing."""
        if self.fs is None:
            return os.path.getsize(self.path(name))
        return int(self.fs.size(self._remote(name)))

    def read_text(self, name: str) -> str:
        """The UTF-8 text of ``name``; FileNotFoundError if it is missing."""
        if self.fs is None:
            return Path(self.path(name)).read_text(encoding="utf-8")
        data: bytes = self.fs.cat_file(self._remote(name))  # (fsspec ships no types)
        return data.decode("utf-8")

    def write_text(self, name: str, text: str) -> None:
        """Writes ``name`` whole or not at all: a temporary name, then a rename (a move)."""
        if self.fs is None:
            _write_atomically(Path(self.path(name)), text)
            return
        temporary = self._remote(temporary_name(name))
        self.fs.pipe_file(temporary, text.encode("utf-8"))
        self.fs.mv(temporary, self._remote(name))

    def put(self, local_file: Path, name: str) -> None:
        """Uploads a finished local file as ``name`` (remote directories only)."""
        temporary = self._remote(temporary_name(name))
        self.fs.put_file(str(local_file), temporary)
        self.fs.mv(temporary, self._remote(name))

    def remove(self, name: str) -> None:
        """Deletes ``name`` if it is there."""
        try:
            if self.fs is None:
                os.unlink(self.path(name))
            else:
                self.fs.rm_file(self._remote(name))
        except OSError:
            pass

    def load(self, name: str) -> np.ndarray:
        """The array in the ``.npy`` ``name``."""
        import numpy as np
        if self.fs is None:
            return cast("np.ndarray", np.load(self.path(name)))  # (np.load is typed Any: a pickle could be anything)
        with self.fs.open(self._remote(name), "rb") as file:
            return cast("np.ndarray", np.load(file))


def read_manifest(output_dir: str | os.PathLike[str] | OutputDir) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """The header and the finished shards' entries (by shard index) of ``output_dir``'s manifest;
    FileNotFoundError if it has none, ShardManifestError if it is not one of ours."""
    directory = output_dir if isinstance(output_dir, OutputDir) else OutputDir(output_dir)
    path = directory.path(MANIFEST_NAME)
    lines = directory.read_text(MANIFEST_NAME).splitlines()
    try:
        header = json.loads(lines[0])
        entries = [json.loads(line) for line in lines[1:] if line.strip()]
    except (IndexError, ValueError) as error:
        raise ShardManifestError(f"{path} is not a bpestore shard manifest: {error}") from None
    if not isinstance(header, dict) or header.get("kind") != MANIFEST_KIND:
        raise ShardManifestError(f"{path} is not a bpestore shard manifest")
    if header.get("version") != MANIFEST_VERSION:
        raise ShardManifestError(f"{path} has manifest version {header.get('version')!r}; this bpestore reads {MANIFEST_VERSION}")
    return header, {entry["shard"]: entry for entry in entries}


class Manifest:
    """The manifest of one run: the finished shards, rewritten atomically as each one is added."""

    def __init__(self, output_dir: OutputDir, header: dict[str, Any], entries: dict[int, dict[str, Any]]):
        self.directory = output_dir
        self.header = header
        self.entries = entries

    def save(self) -> None:
        """Rewrites the manifest (temporary file, then a rename)."""
        lines = [json.dumps(self.header, sort_keys=True)]
        lines += [json.dumps(self.entries[index], sort_keys=True) for index in sorted(self.entries)]
        self.directory.write_text(MANIFEST_NAME, "\n".join(lines) + "\n")

    def record(self, entry: dict[str, Any]) -> None:
        """Adds a finished shard (its ``.npy`` already renamed into place) and saves."""
        self.entries[entry["shard"]] = entry
        self.save()


def _is_done(entry: dict[str, Any] | None, shard: Shard, output_dir: OutputDir) -> bool:
    if entry is None:
        return False
    same_source = (entry.get("source"), entry.get("source_size"), entry.get("source_version")) == (shard.source, shard.size, shard.version)
    if not same_source or entry.get("file") != shard.file_name:
        return False
    try:
        return output_dir.size(shard.file_name) == entry.get("bytes")
    except OSError:
        return False


def open_manifest(
    output_dir: OutputDir, shards: Sequence[Shard], header: dict[str, Any]
) -> tuple[Manifest, list[Shard]]:
    """The run's manifest, keeping the entries of shards that are still done, and the shards left
    to encode. ShardManifestError if the directory holds another tokenizer's (or policy's) shards."""
    try:
        old_header, old_entries = read_manifest(output_dir)
    except FileNotFoundError:
        old_header, old_entries = None, {}
    if old_header is not None:
        for key in ("fingerprint", "special_policy"):
            if old_header.get(key) != header.get(key):
                what = "tokenizer" if key == "fingerprint" else "special-token policy"
                raise ShardManifestError(
                    f"{output_dir} holds shards encoded with another {what} "
                    f"(tokenizer {old_header.get('tokenizer') or '?'}, fingerprint {str(old_header.get('fingerprint'))[:12]}; "
                    f"now {header.get('tokenizer') or '?'}, {str(header.get('fingerprint'))[:12]}): "
                    "encode into another directory, or delete it to start over"
                )
    kept = {shard.index: old_entries[shard.index] for shard in shards if _is_done(old_entries.get(shard.index), shard, output_dir)}
    # Shards a previous run listed that this plan no longer has (fewer inputs now): their files
    # would otherwise be taken for part of this dataset.
    for index, entry in old_entries.items():
        if index >= len(shards):
            if "file" in entry:
                output_dir.remove(entry["file"])
    manifest = Manifest(output_dir, header, kept)
    manifest.save()
    return manifest, [shard for shard in shards if shard.index not in kept]


# -- encoding one shard (runs wherever the runner puts it: here, or on a Dask worker) -------------------


def _sha256_of(path: Path) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def encode_shard(
    tokenizer: Tokenizer,
    shard: Shard,
    output_dir: str | os.PathLike[str],
    *,
    threads: int | None = None,
    allowed_special: Literal["all"] | AbstractSet[str] = "all",
    disallowed_special: Literal["all"] | Collection[str] = "all",
) -> dict[str, Any]:
    """Encodes ``shard``'s file into ``output_dir`` (atomically: a temporary file, then a rename)
    and returns its manifest entry. A local file with the default policy is encoded on
    ``threads`` threads by the engine; a remote file, or another policy, as a stream on one."""
    directory = OutputDir(output_dir)
    if directory.fs is not None:  # encode here, then upload
        import tempfile

        with tempfile.TemporaryDirectory(prefix="bpestore-shard-") as local:
            entry = encode_shard(
                tokenizer, shard, local, threads=threads, allowed_special=allowed_special, disallowed_special=disallowed_special
            )
            directory.put(Path(local) / shard.file_name, shard.file_name)
        return entry
    output = Path(directory.root) / shard.file_name
    policy = {"allowed_special": allowed_special, "disallowed_special": disallowed_special}
    default_policy = allowed_special == "all" and disallowed_special == "all"
    if not _is_url(shard.source) and default_policy:
        tokens = encode_file_to_npy(tokenizer, _local(shard.source), output, workers=threads or 1)
    elif not _is_url(shard.source):
        from ..pretokenize.corpus import iter_text_blocks

        tokens = write_npy_stream(tokenizer, iter_text_blocks(_local(shard.source)), output, **policy)
    else:
        import fsspec

        from ..pretokenize.corpus import iter_text_blocks

        with fsspec.open(shard.source, "rb") as file:
            tokens = write_npy_stream(tokenizer, iter_text_blocks(file), output, **policy)
    return {
        "shard": shard.index,
        "file": shard.file_name,
        "source": shard.source,
        "source_size": shard.size,
        "source_version": shard.version,
        "tokens": tokens,
        "bytes": os.path.getsize(output),
        "sha256": _sha256_of(output),
    }


# -- a run ----------------------------------------------------------------------------------------------

#: Runs ``encode_shard(tokenizer, shard, output_dir, **options)`` for every shard given, yielding
#: each entry as soon as its shard is done (in any order).
Runner = Callable[..., Iterator[dict[str, Any]]]


def run_locally(
    tokenizer: Tokenizer, shards: Sequence[Shard], output_dir: str, *, threads: int | None = None, **options: Any
) -> Iterator[dict[str, Any]]:
    """The local runner: one shard after another, each on ``threads`` of the engine's threads."""
    for shard in shards:
        yield encode_shard(tokenizer, shard, output_dir, threads=threads or default_workers(), **options)


@dataclass
class ShardedEncoding:
    """What :func:`encode_shards` did: every shard's manifest entry in shard order, and which
    shards it encoded now (the others were done already)."""

    output_dir: str
    entries: list[dict[str, Any]]
    encoded: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        """The number of ids in all the shards."""
        return sum(entry["tokens"] for entry in self.entries)


def encode_shards(
    tokenizer: Tokenizer,
    inputs: Iterable[str | os.PathLike[str]],
    output_dir: str | os.PathLike[str],
    *,
    ref: str | None = None,
    workers: int | None = None,
    progress: bool = False,
    allowed_special: Literal["all"] | AbstractSet[str] = "all",
    disallowed_special: Literal["all"] | Collection[str] = "all",
    runner: Runner | None = None,
) -> ShardedEncoding:
    """Encodes each input file (paths, globs, fsspec URLs; see :func:`plan_shards`) into its own
    ``.npy`` in ``output_dir`` (made if missing) with a manifest, skipping the shards a previous
    run finished (see the module's docstring). ``ref``: the tokenizer's name for the manifest;
    ``workers``: the engine's threads per shard (local runner); ``runner``: who encodes the
    shards (default: this process, one shard after another; see :mod:`bpestore.distributed.encode`).

    >>> result = encode_shards(tokenizer, ["data/*.txt"], "out/", ref="gpt2")  # doctest: +SKIP
    >>> ids = load_shards("out/")  # doctest: +SKIP

    Raises:
        ShardManifestError: ``output_dir`` holds another tokenizer's shards.
        FileNotFoundError: an input names no file.
        CorpusDecodeError: a file is not UTF-8 (the shards finished before it stay recorded).
    """
    output_path = OutputDir(output_dir)
    shards = plan_shards(inputs)
    output_path.make()
    header = {
        "kind": MANIFEST_KIND,
        "version": MANIFEST_VERSION,
        "tokenizer": ref,
        "fingerprint": fingerprint(tokenizer),
        "dtype": id_dtype(tokenizer),
        "special_policy": _policy_record(allowed_special, disallowed_special),
        "shards": len(shards),
    }
    manifest, pending = open_manifest(output_path, shards, header)
    skipped = sorted(manifest.entries)
    encoded: list[int] = []
    options: dict[str, Any] = {"allowed_special": allowed_special, "disallowed_special": disallowed_special}
    if runner is None:
        runner = run_locally
        options["threads"] = workers
    total = sum(shard.size for shard in pending)
    sizes = {shard.index: shard.size for shard in pending}
    with progress_bar(progress, total, "encoding", unit="B", unit_scale=True) as bar:
        for entry in runner(tokenizer, pending, str(output_path), **options):
            manifest.record(entry)
            encoded.append(entry["shard"])
            bar.update(sizes[entry["shard"]])
    entries = [manifest.entries[index] for index in sorted(manifest.entries)]
    return ShardedEncoding(output_path.location, entries, sorted(encoded), skipped)


def shard_paths(output_dir: str | os.PathLike[str]) -> list[str]:
    """The ``.npy`` files of a finished sharded encoding (paths, or URLs), in shard order;
    ShardManifestError if some shard is not done."""
    return [OutputDir(output_dir).path(name) for name in _shard_names(output_dir)]


def _shard_names(output_dir: str | os.PathLike[str]) -> list[str]:
    output_path = OutputDir(output_dir)
    header, entries = read_manifest(output_path)
    missing = [index for index in range(header["shards"]) if index not in entries]
    if missing:
        raise ShardManifestError(
            f"{output_path}: {len(missing)} of {header['shards']} shards are not done (first: {missing[0]}); rerun the encoding"
        )
    return [entries[index]["file"] for index in range(header["shards"])]


def load_shards(output_dir: str | os.PathLike[str]) -> np.ndarray:
    """The ids of all the shards of a finished sharded encoding, concatenated in shard order."""
    import numpy as np
    header, _ = read_manifest(output_dir)
    directory = OutputDir(output_dir)
    arrays = [directory.load(name) for name in _shard_names(output_dir)]
    return np.concatenate(arrays) if arrays else np.zeros(0, dtype=header["dtype"])
