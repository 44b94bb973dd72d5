"""Writing output files atomically: a file (or a directory of files) appears under its name only
once complete; a failure part-way (an error, a full disk, Ctrl-C) leaves no partial output and no
temporary file, and a failed write is an :class:`~bpestore.errors.OutputError` naming the output.
A temporary file left by a process that was killed (``kill -9``: nothing could clean up) is
removed by the next write to the same output. Used by the formats' exports, the workflow's outputs
and the ``.npy`` writers; imports nothing of bpestore but its errors, so that every layer may use it.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import OutputError

__all__ = ["atomic_directory", "atomic_path", "apply_mode", "check_output_target", "keep_mode_of", "mode_of", "through_links", "remove_stale_partials", "temporary_name"]

_PARTIAL_SUFFIX = ".partial"


def temporary_name(name: str) -> str:
    """The name to write an output called ``name`` under until it is complete: hidden, marked
    partial, and unique to this process (``.NAME.PID-HEX.partial``, the form that
    :func:`remove_stale_partials` recognises; the engine names its ``.npy`` files alike)."""
    return f".{name}.{os.getpid()}-{secrets.token_hex(4)}{_PARTIAL_SUFFIX}"


def _writer_pid(name: str, output_name: str) -> int | None:
    """The process id in ``name`` if it is a temporary name of the output ``output_name``
    (:func:`temporary_name`'s form), else None."""
    prefix = f".{output_name}."
    if not (name.startswith(prefix) and name.endswith(_PARTIAL_SUFFIX)):
        return None
    pid, dash, random_part = name[len(prefix) : -len(_PARTIAL_SUFFIX)].partition("-")
    return int(pid) if pid.isascii() and pid.isdigit() and dash and random_part else None


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, OverflowError):
        return True  # someone else's, or cannot tell: leave its file alone
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """Whether ``pid`` has died but is not yet reaped by its parent (Linux: state Z or X in
    /proc/PID/stat). Such a process still answers ``kill(pid, 0)``, yet writes nothing ever again:
    a killed Dask worker stays a zombie until its nanny reaps it, and the shard it was writing may
    be rerun elsewhere before then. False where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return False
    # "PID (COMMAND) STATE ...": the command may hold spaces and parentheses, so split after the last ')'.
    fields = stat.rpartition(b")")[2].split()
    return bool(fields) and fields[0] in (b"Z", b"X")


def remove_stale_partials(output: str | os.PathLike[str]) -> list[Path]:
    """Removes the temporary files (or directories) that killed writers left beside ``output``;
    returns them. The one rule for every kind of output (text, ``.npy``, exports, shards):

    Only what is surely stale goes: named as a writer of this very output names its temporary
    file (``.NAME.PID-HEX.partial``, :func:`temporary_name`), whose process no longer exists on
    this machine (a writer running meanwhile keeps its file; so does one whose process cannot be
    checked). Its content does not matter: a writer killed before its first byte leaves an
    empty file, one killed after its last byte a complete one, and neither was ever renamed.
    """
    output = Path(output)
    removed: list[Path] = []
    try:
        candidates = list(output.parent.iterdir())
    except OSError:
        return removed
    for candidate in candidates:
        pid = _writer_pid(candidate.name, output.name)
        if pid is None or _process_exists(pid):
            continue
        try:
            _remove(candidate, strict=True)
        except OSError:
            continue  # not ours to remove (another user's directory): leave it
        removed.append(candidate)
    return removed


def check_output_target(path: str | os.PathLike[str]) -> None:
    """OutputError naming ``path`` if something that is neither a file nor a directory is there
    (a device such as /dev/full or /dev/null, a named pipe, a socket): an output is written beside
    its name and renamed onto it, which would replace that node itself (as root, even /dev/full)
    instead of writing into it. Checked before anything is written."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # nothing there (or nothing to stat): the write will say what is wrong
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise OutputError(
            errno.EINVAL,
            "not a regular file: outputs are written beside their name and renamed onto it, which would replace it; "
            "give a file path (or write to standard output)",
            os.fspath(path),
        )


def _temporary_beside(path: Path) -> Path:
    """A new name in ``path``'s directory (so on the same file system: renaming is atomic),
    hidden and marked partial, so that nobody mistakes it for a result while it is written."""
    if not path.parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, f"cannot write the output, no directory {path.parent}", str(path))
    return path.with_name(temporary_name(path.name))


def _remove(path: Path, *, strict: bool = False) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=not strict)
    else:
        path.unlink(missing_ok=True)


def _is_within(filename: object, temporary: Path) -> bool:
    """Whether an error's ``filename`` is ``temporary`` or a file in it (a directory output)."""
    if not isinstance(filename, (str, bytes, os.PathLike)):
        return False
    path = Path(os.fsdecode(filename))
    return path == temporary or temporary in path.parents


@contextmanager
def _cleaned_up(temporary: Path, output: Path) -> Iterator[None]:
    """Removes ``temporary`` if the block fails in any way (an error, a full disk, Ctrl-C). An
    OSError that names no file (a full disk gives "No space left on device" and no name) or only
    the temporary one becomes an :class:`OutputError` naming ``output``, so that the user learns
    which output failed and never sees the temporary name; one naming another file (an input
    that cannot be read) is left as it is."""
    try:
        yield
    except OSError as error:
        _remove(temporary)
        if not isinstance(error, OutputError) and (error.filename is None or _is_within(error.filename, temporary)):
            raise OutputError(error.errno, error.strerror, str(output)) from None
        raise
    except BaseException:
        _remove(temporary)
        raise


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``path`` to write a file at; it is renamed to ``path`` when the
    block completes, and removed when the block fails in any way: ``path`` is then left as it
    was. A missing directory is an error naming ``path``; stale temporary files of ``path`` are
    removed first (:func:`remove_stale_partials`); a device or pipe at ``path`` is refused
    (:func:`check_output_target`)."""
    path = through_links(Path(path))
    check_output_target(path)
    temporary = _temporary_beside(path)
    remove_stale_partials(path)
    with _cleaned_up(temporary, path):
        yield temporary
        keep_mode_of(path, temporary)
        os.replace(temporary, path)


def through_links(path: Path) -> Path:
    """The file a symbolic link at ``path`` points to (written through, as ``>`` would: the
    link stays a link), or ``path`` itself."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def keep_mode_of(existing: Path, replacement: Path) -> None:
    """Give ``replacement`` the permission bits (and, where allowed, the owner and group) of the
    regular file ``existing`` that it is about to replace, so that replacing a private (0600)
    output does not make it readable by all; nothing when there is no such file."""
    apply_mode(mode_of(existing), replacement)


def mode_of(path: Path) -> os.stat_result | None:
    """The status of the regular file at ``path`` (for :func:`apply_mode`), or None."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status if stat.S_ISREG(status.st_mode) else None


def apply_mode(status: os.stat_result | None, path: Path) -> None:
    """The permission bits, and where allowed the owner and group, of ``status`` on ``path``."""
    if status is None:
        return
    os.chmod(path, stat.S_IMODE(status.st_mode))
    try:
        os.chown(path, status.st_uid, status.st_gid)
    except OSError:  # (only root, or the owner within its groups, may)
        pass


@contextmanager
def atomic_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary directory beside ``path`` to write files into; when the block completes, each
    file is renamed into ``path`` (made if missing; other files there are left alone), and the
    temporary directory is removed; when the block fails, it is removed with everything in it.
    Stale temporary directories of ``path`` are removed first."""
    path = Path(path)
    check_output_target(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = _temporary_beside(path)
    remove_stale_partials(path)
    with _cleaned_up(temporary, path):
        yield temporary
        path.mkdir(exist_ok=True)
        for written in sorted(temporary.iterdir()):
            os.replace(written, path / written.name)
        temporary.rmdir()
