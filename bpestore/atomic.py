"""Writing output files atomically: a file (or a directory of files) appears under its name only
once complete; a failure part-way (an error, a full disk, Ctrl-C) leaves no partial output and no
temporary file. Used by the formats' exports and the workflow's outputs; imports nothing of
bpestore, so that every layer may use it.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_directory", "atomic_path", "temporary_name"]


def temporary_name(name: str) -> str:
    """The name to write an output called ``name`` under until it is complete: hidden, marked
    partial, and unique to this process (``.NAME.PID-HEX.partial``, the form that
    :func:`bpestore.encode.files.remove_stale_partials` recognises)."""
    return f".{name}.{os.getpid()}-{secrets.token_hex(4)}.partial"


def _temporary_beside(path: Path) -> Path:
    """A new name in ``path``'s directory (so on the same file system: renaming is atomic),
    hidden and marked partial, so that nobody mistakes it for a result while it is written."""
    if not path.parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, f"cannot write the output, no directory {path.parent}", str(path))
    return path.with_name(temporary_name(path.name))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextmanager
def _cleaned_up(temporary: Path, output: Path) -> Iterator[None]:
    """Removes ``temporary`` if the block fails in any way (an error, a full disk, Ctrl-C), and
    names ``output`` in an OSError that names no file or only the temporary one (a full disk
    gives "No space left on device" and no name), so that the user learns which output failed."""
    try:
        yield
    except OSError as error:
        _remove(temporary)
        if error.filename is None or Path(os.fspath(error.filename)).name.startswith(f".{output.name}."):
            raise OSError(error.errno, error.strerror, str(output)) from None
        raise
    except BaseException:
        _remove(temporary)
        raise


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``path`` to write a file at; it is renamed to ``path`` when the
    block completes, and removed when the block fails in any way: ``path`` is then left as it
    was. A missing directory is an error naming ``path``."""
    path = Path(path)
    temporary = _temporary_beside(path)
    with _cleaned_up(temporary, path):
        yield temporary
        os.replace(temporary, path)


@contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary directory beside ``path`` to write files into; when the block completes, each
    file is renamed into ``path`` (made if missing; other files there are left alone), and the
    temporary directory is removed; when the block fails, it is removed with everything in it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = _temporary_beside(path)
    with _cleaned_up(temporary, path):
        yield temporary
        path.mkdir(exist_ok=True)
        for written in sorted(temporary.iterdir()):
            os.replace(written, path / written.name)
        temporary.rmdir()
