"""The ``bpestore`` command line: train, list, show, diff, encode, decode, import, export, rm, info, serve.

Every command takes ``--db PATH_OR_URL`` (environment variable ``BPESTORE_DB``, default
``./bpestore.db``). Mistakes (unknown names, missing files, bad ids, foreign databases, output
that cannot be written) print one line on stderr and exit with status 1; anything else is a bug in
bpestore and says so in one line (exit status 70). ``BPESTORE_DEBUG=1`` shows the traceback of
either. Ctrl-C, at any moment, is one line and status 130. Progress bars go to stderr, and only to
a terminal.

This module parses arguments and prints; the work is done by the public API and
:mod:`bpestore.workflow`, the only parts of bpestore it imports.
"""

from __future__ import annotations

import os
import signal
import sys

EXIT_USER_ERROR = 1
EXIT_INTERNAL_ERROR = 70  # EX_SOFTWARE
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE: what the shell reports for `yes | head -1`
INTERRUPTED_MESSAGE = "Interrupted; nothing half-written was kept."


def _interrupted_while_loading(signum: int, frame: object) -> None:
    """Ctrl-C while this module loads: one line and status 130, not the traceback of whatever
    line it hit. The process ends here (nothing is written yet, so nothing is left to clean):
    raised instead, a SystemExit could land in Python code that C code calls and whose errors it
    drops (a ``__hash__`` or ``__eq__`` under ``PyDict_GetItem``, an attribute looked up with
    ``PyObject_HasAttr``), and loading went on to run the command and exit 0 after the line."""
    try:
        sys.stderr.write(INTERRUPTED_MESSAGE + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # stderr is gone: the status still says it
    os._exit(EXIT_INTERRUPTED)


# Loading this module (click, NumPy, the engine, then building the commands below: half a second,
# more on a busy machine) can be interrupted too. Until its last line, Ctrl-C ends the process as
# above; then the handler before it is back, and a command's Ctrl-C is a KeyboardInterrupt,
# handled where it lands. (``import bpestore`` itself loads none of these.)
_sigint_before_loading = signal.getsignal(signal.SIGINT)
# (None: set outside Python, and could not be put back; ignored: a process that must not be
# interrupted, such as a Dask worker of `train --dask local`, which loads this module as the
# program that spawned it)
if _sigint_before_loading is not None and _sigint_before_loading is not signal.SIG_IGN:
    try:
        signal.signal(signal.SIGINT, _interrupted_while_loading)
    except ValueError:  # imported by a thread other than the main one: not its signals
        pass

import io  # noqa: E402 - after the handler above, so that Ctrl-C during these imports is handled
import json  # noqa: E402
import logging  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable, Iterable, Iterator, Sequence  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from pathlib import Path  # noqa: E402
from types import ModuleType  # noqa: E402
from typing import IO, TYPE_CHECKING, Any, BinaryIO, Literal, TextIO, TypeVar, cast  # noqa: E402

import click  # noqa: E402

from . import formats  # noqa: E402
from . import MAX_TOKEN_ID  # noqa: E402  (the public API's: the CLI imports no stage directly)
MAX_INT64 = 2**63 - 1  # counts, sizes and workers past this fit no database column and no engine integer: a usage error, not an overflow
from .errors import BpestoreError, DisallowedSpecialTokenError, OutputError  # noqa: E402

if TYPE_CHECKING:
    import numpy as np  # (imported where it runs: commands that do not encode, `train` among them, never load it)
    from flask import Flask

    from . import Tokenizer, workflow
    from .distributed.count import DaskCounting
    from .workflow import TokenizerInfo

# A function that a decorator of options gives back as it is (click's own decorators' type).
_F = TypeVar("_F", bound=Callable[..., Any])

# The errors a user can cause: bpestore's own, bad arguments (ValueError, by the API's convention)
# and files (OSError). Anything else, a KeyError included, is a bug.
USER_ERRORS = (BpestoreError, ValueError, OSError)


class _Group(click.Group):
    """Turns the errors a user can cause into one clean line on stderr, and any other into one
    line that says it is a bug."""

    command_class: type[click.Command] | None = None  # set to _Command below, once it is defined
    group_class = type  # subgroups (`import`) are _Groups too, with the same commands

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """click's ``main``, with every write to stdout and stderr checked (:class:`_CheckedStream`)
        and one policy for how the command line ends, whatever happens where (in a command, in
        click's own code such as ``--help``, in the last flush of stdout): one line at most on
        stderr, and the exit status (see :func:`_run`)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        stdout, stderr = sys.stdout, sys.stderr
        checked_stderr = _CheckedStream(stderr, "standard error", raises=False)
        sys.stdout = cast(TextIO, _CheckedStream(stdout, "standard output", raises=True))
        sys.stderr = cast(TextIO, checked_stderr)
        try:
            # args=None: this process's own command line (the bpestore executable, python -m
            # bpestore.cli), whose signal handling it owns; not a caller's, such as CliRunner's.
            status = _run(lambda: super(_Group, self).main(args, prog_name, complete_var, False, **extra), owns_process=args is None)
        finally:
            sys.stdout, sys.stderr = stdout, stderr
        if status == 0 and checked_stderr.failed is not None:
            # Nothing could say so on stderr; the status must.
            status = EXIT_CLOSED_PIPE if isinstance(checked_stderr.failed, BrokenPipeError) else EXIT_USER_ERROR
        sys.exit(status)

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        # Ctrl-C while the arguments are parsed: as anywhere else, not click's "Aborted!" (status 1).
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            click.echo(INTERRUPTED_MESSAGE, err=True)
            sys.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:
            # `bpestore --help | head -1`: as a command's output would (click would say status 1).
            _silence(sys.stdout)
            sys.exit(EXIT_CLOSED_PIPE)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            result = super().invoke(ctx)
            # Buffered output into a closed pipe fails here, where it is handled, rather than at
            # the interpreter's exit ("Exception ignored ... BrokenPipeError").
            sys.stdout.flush()
            return result
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise  # click's own: usage errors and exits
        except BrokenPipeError:
            # The reader of our output has gone (`| head`): nobody is left to tell, so end
            # quietly, as tools killed by SIGPIPE do.
            _silence(sys.stdout)
            sys.exit(EXIT_CLOSED_PIPE)
        except _StreamWriteError:
            raise  # stdout failed: main() says so, wherever it fails (in --help too)
        except USER_ERRORS as error:
            if os.environ.get("BPESTORE_DEBUG"):
                raise
            if isinstance(error, OSError) and error.filename and not isinstance(error, BpestoreError):
                _fail(f"{error.strerror or error}: {error.filename}")
            _fail(str(error))
        except KeyboardInterrupt:
            click.echo(INTERRUPTED_MESSAGE, err=True)
            sys.exit(EXIT_INTERRUPTED)
        except Exception as error:
            if os.environ.get("BPESTORE_DEBUG"):
                raise
            click.echo(
                f"Internal error (a bug in bpestore): {type(error).__name__}: {error}. "
                "Run again with BPESTORE_DEBUG=1 to see the traceback.",
                err=True,
            )
            sys.exit(EXIT_INTERNAL_ERROR)


class _InterruptReportedOnce(logging.Filter):
    """Drops a log record of a KeyboardInterrupt. SQLAlchemy's pool logs one, traceback and all
    ("Exception closing connection ..."), when a Ctrl-C lands while it closes a connection, then
    raises it again: the command line reports a Ctrl-C itself, in one line (see :func:`_run`).
    Any other error SQLAlchemy logs still shows."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], KeyboardInterrupt))


def _report_interrupts_once() -> None:
    """Installs :class:`_InterruptReportedOnce` on the handler that prints log records when no
    logging is configured (``logging.lastResort``, what a command line run uses), once."""
    handler = logging.lastResort
    if handler is not None and not any(isinstance(f, _InterruptReportedOnce) for f in handler.filters):
        handler.addFilter(_InterruptReportedOnce())


_ctrl_c_pending = False
"""Whether a Ctrl-C came while this process's command ran (see :func:`_ctrl_c`)."""


def _ctrl_c(signum: int, frame: object) -> None:
    """A command's Ctrl-C: a KeyboardInterrupt, as Python's own handler raises, and remembered.

    CPython drops an exception raised where it cannot propagate one: in a weak reference's
    callback (its import machinery runs one when a module's import lock is freed), a finalizer,
    a ``__del__``. A Ctrl-C landing there was printed as "Exception ignored ... KeyboardInterrupt"
    and lost: the command ran on and ended with status 0. Remembered, it still ends the command
    (:func:`_run`), and :func:`_unreported_interrupts` keeps CPython from printing it."""
    global _ctrl_c_pending
    _ctrl_c_pending = True
    raise KeyboardInterrupt


def _ctrl_c_handled() -> None:
    """A command that ends on Ctrl-C by design (``serve``) has handled it: it is not lost."""
    global _ctrl_c_pending
    _ctrl_c_pending = False


def _unreported_interrupts(report: Callable[[Any], object]) -> Callable[[Any], object]:
    """``sys.unraisablehook`` that does not print a KeyboardInterrupt CPython dropped (the
    interrupt is remembered by :func:`_ctrl_c`, and reported by :func:`_run` in one line); any
    other dropped exception is ``report``ed as before."""

    def hook(unraisable: Any) -> object:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            return None
        return report(unraisable)

    return hook


def _run(command: Callable[[], object], *, owns_process: bool) -> int:
    """Runs ``command`` (click's ``main``, not standalone: what it raises comes here) and returns
    the exit status, once everything written to stdout is flushed: here, where a failure is still
    reported, rather than at the interpreter's exit, where it is not. Ctrl-C in click's own code
    (which makes it ``Abort``) or during that flush ends as anywhere else: one line, status 130.

    From the moment the status is known, a Ctrl-C is ignored (``owns_process``): CPython restores
    SIGINT's default action (death by signal) early in its exit, then spends 0.1-0.2 s tearing
    down its modules (NumPy, SQLAlchemy), and a Ctrl-C in that window killed bpestore by SIGINT,
    without its line and not with status 130, though its output was complete. An ignored signal
    stays ignored through that teardown, so the status decided here is the one the shell sees."""
    _report_interrupts_once()
    try:
        try:
            if owns_process:
                _end_of_loading()  # from here a Ctrl-C is a KeyboardInterrupt, ended below in one line
                if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                    signal.signal(signal.SIGINT, _ctrl_c)
                    sys.unraisablehook = _unreported_interrupts(sys.unraisablehook)
            result = command()
            status = result if isinstance(result, int) else 0  # click returns an Exit's code (--help: 0)
        except SystemExit as exit:  # our own endings: errors, Ctrl-C, closed pipes
            status = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else EXIT_USER_ERROR)
        except click.ClickException as error:
            error.show()
            status = error.exit_code
        except click.Abort:  # Ctrl-C in click's own code, outside the commands
            raise KeyboardInterrupt from None
        if status == 0 and _ctrl_c_pending:
            raise KeyboardInterrupt  # one CPython dropped (see _ctrl_c): the command was interrupted all the same
        sys.stdout.flush()
    except BrokenPipeError:
        _settle(owns_process)
        _silence(sys.stdout)
        return EXIT_CLOSED_PIPE
    except _StreamWriteError as error:
        _settle(owns_process)
        _silence(sys.stdout)  # what is still buffered would fail again at exit
        click.echo(f"Error: {error}", err=True)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        _settle(owns_process)
        click.echo(INTERRUPTED_MESSAGE, err=True)
        return EXIT_INTERRUPTED
    _settle(owns_process)
    return status


def _settle(owns_process: bool) -> None:
    """The exit status is decided: a Ctrl-C from now on can change nothing, so it is ignored
    (see :func:`_run`)."""
    if owns_process:
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        except ValueError:  # not the main thread: its signals are not ours
            pass


class _StreamWriteError(OutputError):
    """A write to standard output that failed: a full disk, an I/O error (not EPIPE: a reader that
    left has its own quiet ending)."""

    def __str__(self) -> str:
        return f"cannot write to {self.filename}: {self.strerror}"


class _CheckedStream:
    """``sys.stdout`` or ``sys.stderr`` (or its binary ``buffer``) with every write and flush
    checked; anything else is the stream's own.

    On stdout (``raises``) a failure is a :class:`_StreamWriteError` at once: the results are
    lost, nothing more is worth doing. On stderr, which only says how things go, it is kept in
    ``failed`` and the command goes on, its exit status then non-zero (:meth:`_Group.main`): a
    full stderr must not cost a training its result, nor can it be told anywhere. stderr then
    points at /dev/null, so that its later writes and the last flush at exit cannot fail again.
    EPIPE on stdout is left to the handlers of a closed pipe."""

    def __init__(self, stream: IO[Any], name: str, *, raises: bool, owner: _CheckedStream | None = None) -> None:
        self._stream = stream
        self._name = name
        self._raises = raises
        self._owner = owner or self
        self.failed: OSError | None = None

    def _checked(self, operation: Callable[..., Any], *args: Any) -> Any:
        try:
            return operation(*args)
        except _StreamWriteError:
            raise
        except OSError as error:
            if self._raises:
                if isinstance(error, BrokenPipeError):
                    raise
                raise _StreamWriteError(error.errno, error.strerror, self._name) from None
            if self._owner.failed is None:
                self._owner.failed = error
            _silence(self._stream)
            return len(args[0]) if args else None

    def write(self, data: Any) -> Any:
        return self._checked(self._stream.write, data)

    def writelines(self, lines: Iterable[Any]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._checked(self._stream.flush)

    @property
    def buffer(self) -> _CheckedStream:
        return _CheckedStream(self._stream.buffer, self._name, raises=self._raises, owner=self._owner)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _silence(stream: IO[Any]) -> None:
    """Point ``stream``'s file descriptor at /dev/null, so that flushing what is still buffered
    for a closed pipe or a full disk (Python does so at exit) cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass  # not a real file descriptor (as under click's CliRunner): nothing to flush at exit


def _fail(message: str) -> None:
    click.echo(f"Error: {message}", err=True)
    sys.exit(EXIT_USER_ERROR)


def _workflow() -> ModuleType:
    """:mod:`bpestore.workflow`, imported when a command runs (it pulls in SQLAlchemy and NumPy;
    ``--help`` should not wait for them)."""
    from . import workflow

    return workflow


def Store(db: str, *, create: bool = True, lock_timeout: float | None = None) -> workflow.Store:  # noqa: N802 - stands in for the class, imported late to keep --help fast
    """The store at ``db``; ``create=False`` for reads, which need a store and never make one.
    ``lock_timeout``: how long a write waits for another writer (None: BPESTORE_LOCK_TIMEOUT, else 120 s)."""
    store: workflow.Store = _workflow().Store(db, create=create, lock_timeout=lock_timeout)
    return store


DEFAULT_DB = "bpestore.db"


def _db_option(function: _F) -> _F:
    # No default and no environment variable here: _Command falls back to `bpestore --db X`
    # (which reads BPESTORE_DB), then to DEFAULT_DB, so that both places work.
    return click.option(
        "--db",
        "db",
        default=None,
        metavar="PATH_OR_URL",
        help=f"The store: a SQLite file path or a SQLAlchemy URL [default: BPESTORE_DB, else ./{DEFAULT_DB}]. "
        "Also accepted before the command: bpestore --db X COMMAND.",
    )(function)


class _Command(click.Command):
    """A command whose ``--db`` may also be given to ``bpestore`` itself (or by BPESTORE_DB), and
    which says which store it uses under ``bpestore --verbose``."""

    def invoke(self, ctx: click.Context) -> Any:
        root = ctx.find_root()
        if "db" in ctx.params:
            # None when not given; an empty --db '' is refused below, not taken for the default.
            db = next((value for value in (ctx.params["db"], root.params.get("db")) if value is not None), DEFAULT_DB)
            ctx.params["db"] = db
            # Before any work: ValueError (one line) for '' and for 'sqlite' (a URL without '://').
            if _workflow().is_in_memory(db):
                raise ValueError(
                    f"--db {db} is a store in memory, gone when the command ends: give a SQLite file path or a database URL"
                )
            if root.params.get("verbose"):
                _say_which_store(ctx.params["db"])
        return super().invoke(ctx)


def _say_which_store(db: str) -> None:
    summary = _workflow().summarize_store(db)
    if not summary.exists:
        click.echo(f"store: {summary.location} ({summary.kind}; no store there yet: only writes create one)", err=True)
        return
    details = [summary.kind, f"schema revision {summary.schema_revision}"]
    if summary.tokenizers is not None:
        details.append(f"{summary.tokenizers} tokenizer{'s' if summary.tokenizers != 1 else ''}")
    details.append(f"read-only: {summary.read_only_reason}" if summary.read_only_reason else "writable")
    click.echo(f"store: {summary.location} ({', '.join(details)})", err=True)


def _lock_timeout_option(function: _F) -> _F:
    """``--lock-timeout``, for every command that writes to the store."""
    return click.option(
        "--lock-timeout", "lock_timeout", type=click.FloatRange(min=0), default=None, envvar="BPESTORE_LOCK_TIMEOUT",
        metavar="SECONDS",
        help="How long to wait for another writer of the store to finish (env BPESTORE_LOCK_TIMEOUT) [default: 120]. "
        "Counting and merging never hold the store's lock; only the final writes do.",
    )(function)


def _warm_entries_option(default_source: str) -> Callable[[_F], _F]:
    """``--warm-entries N``: how many pre-tokens the stored warm table gets (0: none)."""
    return click.option(
        "--warm-entries", type=click.IntRange(min=0, max=2**32 - 1), default=262_144, show_default=True, metavar="N",
        help=f"Store the ids of this many pre-tokens ({default_source}) with the tokenizer, so that loading it starts "
        "with a warm cache; 0: none.",
    )


def _quiet_option(function: _F) -> _F:
    return click.option("--quiet", "-q", is_flag=True, help="No progress bars.")(function)


def _show_progress(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


_Group.command_class = _Command


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="bpestore")
@click.option(
    "--db", "db", envvar="BPESTORE_DB", default=None, metavar="PATH_OR_URL",
    help=f"The store for every command: a SQLite file path or a SQLAlchemy URL (env BPESTORE_DB) [default: ./{DEFAULT_DB}].",
)
@click.option("--verbose", "-v", is_flag=True, help="Say on stderr which store is used (path or URL, schema revision, tokenizers).")
def main(db: str | None, verbose: bool) -> None:
    """bpestore: train, keep, compare and use byte-level BPE tokenizers.

    Tokenizers live in one database (SQLite by default), as NAME@VERSION.
    A bare NAME means its latest version.

    \b
    Example:
      bpestore train corpus.txt --name ts --vocab-size 10000 --special-token '<|endoftext|>'
      bpestore list
      echo "Hello world" | bpestore encode ts
    """
    warnings.showwarning = _warning_line


def _warning_line(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, file: TextIO | None = None, line: str | None = None
) -> None:
    """A warning (such as a vocab size that training cannot reach) as one line on stderr, without
    Python's file name and source line."""
    click.echo(f"Warning: {message}", err=True)


# -- train ---------------------------------------------------------------------------------------


@main.command()
@click.argument("corpus", nargs=-1, required=False)
@click.option("--name", required=True, help="Name to store the tokenizer under; each run adds versions.")
@click.option(
    # At most the largest 32-bit id: a bigger size is refused here, before any work, not warned
    # about after training (and 10**30 no longer overflows inside the engine).
    "--vocab-size", "vocab_sizes", type=click.IntRange(max=MAX_TOKEN_ID), multiple=True,
    help="Vocabulary size (specials and 256 bytes included). Repeat for several sizes from one run. Required but with --recipe.",
)
@click.option("--special-token", "special_tokens", multiple=True, help="A special token (repeatable), e.g. '<|endoftext|>'.")
@click.option("--workers", type=click.IntRange(min=1, max=MAX_INT64), default=None, help="Threads for pre-tokenization (with --dask local: worker processes) [default: CPUs].")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of the new tokenizers (as `list --json`) instead of their refs.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars and no summary on stderr.")
@click.option("--dry-run", is_flag=True, help="Count (or reuse stored counts), print the merge loop's memory estimate, merge nothing.")
@click.option("--max-memory", default=None, metavar="SIZE", help="Refuse to merge when the memory estimate is above SIZE (e.g. 800M, 4G).")
@click.option("--from", "base", default=None, metavar="NAME[@V]", help="Continue this stored tokenizer: keep its vocab, ids and merges, learn more.")
@click.option(
    "--counts", "counts_file", default=None, metavar="FILE",
    help="Train on pre-token counts made elsewhere instead of a CORPUS: Parquet (pretoken or word, and count columns) or word<TAB>count lines.",
)
@click.option("--dask", "dask_address", default=None, metavar="ADDRESS", help="Count CORPUS on a Dask cluster (a scheduler address, or 'local'), then merge here.")
@click.option("--shard-size", default=None, metavar="SIZE", help="With --dask: count CORPUS in shards of about SIZE (e.g. 64M) [default: 64M].")
@click.option(
    "--partitions", type=click.IntRange(min=1, max=MAX_INT64), default=None,
    help="With --dask: add the counts up in N parts by hash, each on its own worker [default: the workers].",
)
@click.option("--min-count", type=click.IntRange(min=1, max=MAX_INT64), default=None, help="Train only on the pre-tokens counted at least this often.")
@click.option(
    "--count-memory", default=None, metavar="SIZE",
    help="Count CORPUS's plain files with at most about SIZE (e.g. 2G) of counting tables, spilling sorted partial counts to disk.",
)
@click.option("--spill-dir", default=None, metavar="DIR", help="With --count-memory: where to spill [default: the temporary directory].")
@click.option(
    "--pattern", default=None, metavar="NAME|REGEX",
    help="The pre-tokenizer: gpt2 (CS336's), cl100k_base (GPT-4's), o200k_base (GPT-4o's) or a regex [default: gpt2, or the base's or the counts' own].",
)
@click.option(
    "--special-tokens-at", type=click.Choice(["start", "end"]), default=None,
    help="Special tokens' ids: before the 256 bytes (CS336) or after the last merge (GPT-2, tiktoken) [default: start].",
)
@click.option(
    "--stored-corpus", "stored_corpus", default=None, metavar="ID|REF",
    help="Train on a corpus the store holds, without counting: its id (bpestore count list) or a tokenizer's ref (the corpus it was trained on).",
)
@click.option(
    "--tie-break", type=click.Choice(["cs336", "huggingface"]), default=None,
    help="Order of pairs of equal counts: CS336's (greatest pair of bytes) or Hugging Face BpeTrainer's (exactly its merges) [default: cs336].",
)
@click.option(
    "--recipe", "recipe_file", default=None, metavar="FILE.toml",
    help="Train this recipe (bpestore show REF --recipe writes one): its inputs, pattern, vocab size, special tokens, min count.",
)
@click.option(
    "--superbpe", "superbpe", type=click.IntRange(min=1, max=MAX_TOKEN_ID), default=None, metavar="T",
    help="Train SuperBPE: ordinary BPE (--pattern) to vocab size T, then SuperBPE's stage 2 (superwords) to --vocab-size.",
)
@click.option(
    "--stage", "stage_specs", multiple=True, metavar="PATTERN:SIZE",
    help="A stage of a training in stages, in order (instead of --vocab-size and --pattern), e.g. --stage gpt2:8000 --stage superbpe:10000.",
)
@click.option(
    "--max-words", type=click.IntRange(min=1, max=MAX_INT64), default=None, metavar="N",
    help="With --superbpe or --stage: no token of the last stage spans more than N words [default with --superbpe: 4, SuperBPE's].",
)
@click.option(
    "--parity", is_flag=True,
    help="Train parity-aware BPE: each CORPUS is one language ([NAME=]INPUT; NAME: the file's name without extensions), balanced on --dev.",
)
@click.option(
    "--dev", "dev_specs", multiple=True, metavar="[NAME=]PATH",
    help="With --parity: a language's development text (a file named after it, or NAME=FILE), or a directory of one file per language.",
)
@click.option("--ratio", "ratio_specs", multiple=True, metavar="NAME=R", help="With --parity, instead of --dev: a language's target compression ratio.")
@click.option(
    "--parity-variant", type=click.Choice(["base", "window"]), default=None,
    help="With --parity: each merge for the worst compressed language (base), or the same, none taking over its share of a window [default: base].",
)
@click.option("--window-size", type=click.IntRange(min=1, max=MAX_INT64), default=None, metavar="N", help="With --parity-variant window: the merges looked back on [default: 100].")
@click.option("--alpha", type=click.FloatRange(min=0, min_open=True), default=None, metavar="A", help="With --parity-variant window: a language takes at most A / languages of them [default: 2].")
@click.option("--global-merges", type=click.IntRange(min=0, max=MAX_INT64), default=None, metavar="N", help="With --parity: the first N merges are plain BPE's on all languages together [default: 0].")
@_warm_entries_option("the corpus's most frequent")
@_lock_timeout_option
@_db_option
def train(
    corpus: tuple[str, ...], name: str, vocab_sizes: tuple[int, ...], special_tokens: tuple[str, ...], workers: int | None,
    as_json: bool, quiet: bool, dry_run: bool, max_memory: str | None, base: str | None, counts_file: str | None,
    dask_address: str | None, shard_size: str | None, partitions: int | None, min_count: int | None, count_memory: str | None,
    spill_dir: str | None, pattern: str | None, special_tokens_at: Literal["start", "end"] | None, stored_corpus: str | None,
    tie_break: Literal["cs336", "huggingface"] | None, recipe_file: str | None, superbpe: int | None, stage_specs: tuple[str, ...],
    max_words: int | None, parity: bool, dev_specs: tuple[str, ...], ratio_specs: tuple[str, ...], parity_variant: str | None,
    window_size: int | None, alpha: float | None, global_merges: int | None, warm_entries: int, lock_timeout: float | None, db: str,
) -> None:
    """Train a tokenizer on CORPUS (UTF-8 text) and store it.

    CORPUS: one or more files, directories (every file below, hidden ones left out) or quoted
    globs ('shards/**/*.txt'); .gz, .xz and .zst files are decompressed as read. They are
    counted as one corpus; no pre-token spans two files. With --from NAME[@V] the new tokenizer
    continues that one: its tokens keep their ids, and --vocab-size counts them too.

    --pattern picks the pre-tokenizer (gpt2 by default; cl100k_base, o200k_base, llama3 and qwen2 run as fast);
    it is stored with the tokenizer, which encodes with it. --special-tokens-at end puts the
    special tokens after the merges, as GPT-2 and tiktoken have <|endoftext|>. --min-count N
    merges only the pre-tokens counted N times or more (the full counts are stored).
    --count-memory SIZE counts a CORPUS too big for memory: beyond SIZE, sorted partial counts
    are spilled to --spill-dir and merged at the end (the counts, and so the merges, are the
    same; the counts themselves must fit, as the merge loop reads them).

    Each tokenizer is stored with the ids of the corpus's --warm-entries most frequent
    pre-tokens (of those seen twice or more): loaded, it looks them up instead of merging them (its first pass over text
    like the corpus runs about as fast as its second; the ids are the same).

    With --dask ADDRESS (or --dask local) the corpus (paths, or fsspec URLs such as
    's3://bucket/shards/*.txt') is counted on a Dask cluster, in shards of --shard-size,
    and the counts added up there in --partitions parts, then merged here; with --counts FILE
    training starts from counts made anywhere (Spark, Ray: Parquet; sentencepiece-style TSV).
    Those counts are stored as a corpus too.

    --recipe FILE.toml trains a recipe: the TOML that `bpestore show REF --recipe` prints, which
    names the inputs (files by path and sha256, or a stored corpus), the pattern, the vocab size,
    the special tokens, --min-count and --from. Options that contradict it are refused; a file
    whose content is no longer the recipe's is refused.

    --superbpe T trains SuperBPE (Liu et al., 2025): ordinary BPE to vocab size T, then a
    second stage that splits the corpus with SuperBPE's pre-tokenizer (words join across
    spaces) and goes on merging to --vocab-size, each token at most --max-words (4) words.
    --stage PATTERN:SIZE (twice) gives the stages themselves.

    --parity trains parity-aware BPE (Foroutan et al., 2025) on one corpus per language: each
    CORPUS is a language, named NAME=INPUT or by its file's name without extensions (eng.txt:
    eng); NAME=stored:ID|REF takes a stored corpus. Each merge is the most frequent pair of the
    language whose --dev text (the same content in every language) takes the most tokens; with
    --ratio instead, the least compressed for its ratio; with neither, whose training text takes
    the most tokens. --parity-variant window passes over a language that took more than --alpha
    / languages of the last --window-size merges; --global-merges N starts with N plain merges
    on all languages together. Each language's counts are stored as a corpus of its own.

    Prints the ref (NAME@VERSION) of each tokenizer created, one per line, and nothing else on
    stdout; a summary (vocab size, merges, time) goes to stderr. Pre-token counts of the corpus
    are stored too: training again on the same content skips pre-tokenization.

    \b
    Example:
      bpestore train corpus.txt --name ts --vocab-size 1000 --vocab-size 10000 \\
          --special-token '<|endoftext|>'
      ref=$(bpestore train corpus.txt --name ts --vocab-size 1000 -q)
    """
    started = time.perf_counter()
    parity_options = {"--dev": dev_specs, "--ratio": ratio_specs, "--parity-variant": parity_variant, "--window-size": window_size,
                      "--alpha": alpha, "--global-merges": global_merges}
    if parity:
        _train_parity(
            corpus, name, vocab_sizes, special_tokens, workers, as_json, quiet, dry_run, max_memory, base, counts_file, dask_address,
            stored_corpus, min_count, pattern, special_tokens_at, tie_break, recipe_file, superbpe, stage_specs, max_words, dev_specs,
            ratio_specs, parity_variant, window_size, alpha, global_merges, warm_entries, spill_dir, count_memory, lock_timeout, db,
            started,
        )
        return
    given = [option for option, value in parity_options.items() if value]
    if given:
        _fail(f"{', '.join(given)} {'shapes' if len(given) == 1 else 'shape'} a parity-aware training: give --parity with {'it' if len(given) == 1 else 'them'}")
    stages = _stages_option(superbpe, stage_specs, max_words, vocab_sizes, pattern, recipe_file, dry_run)
    if stages is not None:
        vocab_sizes, pattern = (), None
    if recipe_file is not None:
        _train_recipe(
            recipe_file, name, corpus, vocab_sizes, special_tokens, workers, as_json, quiet, dry_run, max_memory, base, counts_file,
            dask_address, stored_corpus, min_count, pattern, special_tokens_at, tie_break, warm_entries, spill_dir, count_memory,
            lock_timeout, db, started,
        )
        return
    if not vocab_sizes and stages is None:
        _fail("Missing option '--vocab-size' (or give a --recipe)")
    special_tokens_at = special_tokens_at or "start"
    source: Any  # the CORPUS paths or --counts Counts; with --stored-corpus (None first) the stored CorpusInfo
    limit = _workflow().parse_bytes(max_memory) if max_memory is not None else None
    spilling = _spilling_options(count_memory, spill_dir, corpus, counts_file, dask_address, stored_corpus)
    if stored_corpus is not None and (corpus or counts_file is not None or dask_address is not None):
        _fail("--stored-corpus trains on counts the store holds: give no CORPUS, --counts or --dask with it")
    # --counts and --dask prune the counts before they are stored (Dask: on the cluster); a
    # CORPUS's or a stored corpus's full counts are stored, and pruned for the merge loop alone.
    merged_min_count = min_count if counts_file is None and dask_address is None else None
    dask_options = _dask_counting_options(dask_address, shard_size, partitions, quiet)
    source, counting = (None, None) if stored_corpus is not None else _training_source(
        corpus, counts_file, dask_address, min_count, special_tokens, workers, dask_options
    )
    if not special_tokens and isinstance(source, _workflow().Counts):
        special_tokens = source.special_tokens  # those the counts were made with (Parquet metadata)
    with Store(db, lock_timeout=lock_timeout) as store:
        if stored_corpus is not None:
            source = store.corpus_of(stored_corpus)
            if not special_tokens:
                special_tokens = tuple(source.special_tokens)  # those it was counted with
        if dry_run:
            counted, estimate = store.estimate_training(
                source, max(vocab_sizes), list(special_tokens), workers=workers, progress=_show_progress(quiet), base=base,
                counting=counting, pattern=pattern, min_count=merged_min_count, **spilling,
            )
            if as_json:
                click.echo(json.dumps({
                    "distinct_pretokens": estimate.distinct_pretokens, "pretoken_bytes": estimate.pretoken_bytes,
                    "merges": estimate.merges, "estimated_peak_bytes": estimate.peak_bytes,
                    "reused_pretoken_counts": counted.reused, "within_max_memory": limit is None or estimate.peak_bytes <= limit,
                }))
            else:
                click.echo(f"memory estimate: {estimate.describe()}")
                click.echo("pre-token counts: " + ("reused from the store" if counted.reused else "counted and saved in the store"))
            if limit is not None:
                estimate.check(limit)
            return
        what = counts_file or (f"stored corpus {stored_corpus}" if stored_corpus is not None else _inputs_described(corpus))
        # --dask counts before the store is consulted: a rerun counts again, then finds them stored
        again = "run the same command again to reuse them" if dask_address is None else "a rerun with --dask counts again"
        with _interrupted_after_counting(what, again=again):
            refs = store.train(
                source, name, list(vocab_sizes) or None, list(special_tokens), workers=workers, progress=_show_progress(quiet),
                max_memory=limit, base=base, counting=counting, pattern=pattern, special_tokens_at=special_tokens_at,
                min_count=merged_min_count, warm_entries=warm_entries, tie_break=tie_break or "cs336", stages=stages, **spilling,
            )
        infos = [store.info(ref) for ref in refs]
    _trained(infos, as_json, quiet, started, db)


def _train_parity(
    corpus: tuple[str, ...], name: str, vocab_sizes: tuple[int, ...], special_tokens: tuple[str, ...], workers: int | None,
    as_json: bool, quiet: bool, dry_run: bool, max_memory: str | None, base: str | None, counts_file: str | None,
    dask_address: str | None, stored_corpus: str | None, min_count: int | None, pattern: str | None,
    special_tokens_at: str | None, tie_break: str | None, recipe_file: str | None, superbpe: int | None,
    stage_specs: tuple[str, ...], max_words: int | None, dev_specs: tuple[str, ...], ratio_specs: tuple[str, ...],
    parity_variant: str | None, window_size: int | None, alpha: float | None, global_merges: int | None, warm_entries: int,
    spill_dir: str | None, count_memory: str | None, lock_timeout: float | None, db: str, started: float,
) -> None:
    """``train --parity``: each CORPUS a language, its recipe built from the options (checked
    before anything is counted), then trained as :meth:`Store.train` trains a recipe."""
    refused = [option for option, value in [
        ("--recipe", recipe_file), ("--counts", counts_file), ("--dask", dask_address), ("--stored-corpus", stored_corpus),
        ("--from", base), ("--superbpe", superbpe), ("--stage", stage_specs), ("--max-words", max_words), ("--dry-run", dry_run),
    ] if value]
    if refused:
        _fail(f"--parity trains one corpus per language from the bytes: give no {', '.join(refused)} with it")
    if not corpus:
        _fail("--parity needs a CORPUS per language ([NAME=]INPUT)")
    if len(vocab_sizes) != 1:
        _fail("--parity trains to one --vocab-size")
    if dev_specs and ratio_specs:
        _fail("give --dev or --ratio, not both")
    if parity_variant != "window" and (window_size is not None or alpha is not None):
        _fail("--window-size and --alpha shape the window: give --parity-variant window with them")
    inputs: dict[str, list[str]] = {}
    for spec in corpus:
        language, source = _named(spec, "CORPUS")
        inputs.setdefault(language, []).append(source)
    for sources in inputs.values():  # (a missing file is named before the --dev it would need)
        for source in sources:
            if not source.startswith("stored:") and "://" not in source and not any(c in source for c in "*?[") and not os.path.exists(source):
                _fail(f"No such file or directory: {source}")
    wf = _workflow()
    dev = _dev_texts(dev_specs, list(inputs)) if dev_specs else None
    ratio = None
    if ratio_specs:
        ratio = {}
        for spec in ratio_specs:
            language, colon, value = spec.partition("=")
            try:
                ratio[language] = float(value)
            except ValueError:
                _fail(f"--ratio {spec!r} is not NAME=R (a language and a number)")
            if not colon or language not in inputs:
                _fail(f"--ratio {spec!r} names no language trained on ({', '.join(inputs)})")
    limit = wf.parse_bytes(max_memory) if max_memory is not None else None
    spilling = _spilling_options(count_memory, spill_dir, corpus, None, None, None)
    with Store(db, lock_timeout=lock_timeout) as store:
        stored = {}
        for language, sources in inputs.items():
            kept = [source for source in sources if source.startswith("stored:")]
            if kept and len(sources) > 1:
                _fail(f"the language {language!r}: a stored corpus is its only input")
            if kept:
                stored[language] = wf.StoredCorpusInput(store.corpus_of(kept[0].removeprefix("stored:")).sha256)
        files = {language: sources for language, sources in inputs.items() if language not in stored}  # (in the order given)
        languages = wf.languages_of_files({language: stored.get(language, files.get(language)) for language in inputs}, dev, ratio)
        parity = wf.Parity(
            languages, parity_variant or "base", window_size if window_size is not None else 100, alpha if alpha is not None else 2.0,
            global_merges or 0,
        )
        recipe = wf.Recipe(
            (), (wf.Stage(vocab_sizes[0], pattern or "gpt2"),), tuple(special_tokens), special_tokens_at or "start", min_count,
            tie_break or "cs336", None, 1, parity,
        )
        with _interrupted_after_counting("the languages", corpora=" and on"):
            refs = store.train(
                recipe, name, workers=workers, progress=_show_progress(quiet), max_memory=limit, warm_entries=warm_entries, **spilling,
            )
        infos = [store.info(ref) for ref in refs]
    _trained(infos, as_json, quiet, started, db)
    if not quiet:
        for info in infos:
            shares = (info.training_params or {}).get("parity_merges", {})
            click.echo(f"{info.ref}\tmerges per language: " + " ".join(f"{language}={count}" for language, count in shares.items()), err=True)


def _named(spec: str, what: str) -> tuple[str, str]:
    """A ``[NAME=]PATH`` argument as its language and path: NAME if given (and ``PATH`` is not a
    file of that whole name), else the path's file name without its extensions."""
    language, equals, source = spec.partition("=")
    if equals and language and "/" not in language and not os.path.exists(spec):
        return language, source
    stem = os.path.basename(os.path.normpath(spec)).split(".")[0]
    if not stem:
        _fail(f"{what} {spec!r} names no language: write NAME={spec}")
    return stem, spec


def _dev_texts(specs: tuple[str, ...], languages: list[str]) -> dict[str, str]:
    """``--dev``'s texts by language: NAME=FILE, a file named after its language, or a directory
    holding one file per language (named after it, any extensions)."""
    found: dict[str, str] = {}
    for spec in specs:
        if os.path.isdir(spec) and "=" not in spec.split(os.sep)[0]:
            names = sorted(os.listdir(spec))
            for language in languages:
                matching = [entry for entry in names if entry.split(".")[0] == language]
                if len(matching) > 1:
                    _fail(f"--dev {spec}: {len(matching)} files for {language!r} ({', '.join(matching)})")
                if matching:
                    _dev_text(found, language, os.path.join(spec, matching[0]))
            continue
        _dev_text(found, *_named(spec, "--dev"))
    unknown = sorted(set(found) - set(languages))
    if unknown:
        _fail(f"--dev names no language trained on: {', '.join(unknown)} (the languages: {', '.join(languages)})")
    missing = [language for language in languages if language not in found]
    if missing:
        _fail(f"--dev has no development text for {', '.join(missing)}: give each language one")
    return found


def _dev_text(found: dict[str, str], language: str, path: str) -> None:
    """Notes ``path`` as the development text of ``language``: a usage error if it has one."""
    if language in found:
        _fail(f"--dev gives {language!r} two development texts ({found[language]}, {path})")
    found[language] = path


def _stages_option(
    superbpe: int | None, specs: tuple[str, ...], max_words: int | None, vocab_sizes: tuple[int, ...], pattern: str | None,
    recipe_file: str | None, dry_run: bool,
) -> list[Any] | None:
    """The stages that --superbpe T or --stage PATTERN:SIZE (with --max-words) ask for, or None."""
    if superbpe is None and not specs:
        if max_words is not None:
            _fail("--max-words limits a stage: give it with --superbpe or --stage")
        return None
    if recipe_file is not None:
        _fail("--recipe names its own stages: give no --superbpe, --stage or --max-words with it")
    if dry_run:
        _fail("--dry-run does not take stages yet: estimate the first stage alone")
    wf = _workflow()
    if superbpe is not None:
        if specs:
            _fail("give --superbpe T or --stage PATTERN:SIZE, not both")
        if len(vocab_sizes) != 1:
            _fail("--superbpe T trains to one --vocab-size (the final one)")
        return list(wf.superbpe_stages(superbpe, vocab_sizes[0], pattern or "gpt2", wf.SUPERBPE_MAX_WORDS if max_words is None else max_words))
    if vocab_sizes or pattern is not None:
        _fail("--stage names each stage's pattern and vocab size: give no --vocab-size or --pattern with it")
    if len(specs) > 2:
        _fail(f"{len(specs)} --stage options: a training has one stage, or two (SuperBPE's)")
    stages = []
    for number, spec in enumerate(specs, 1):
        stage_pattern, colon, size = spec.rpartition(":")
        if not colon or not stage_pattern or not size.isdigit() or not 0 < int(size) <= MAX_TOKEN_ID:
            _fail(f"--stage {spec!r} is not PATTERN:SIZE (a pre-tokenizer's name or regex, a colon, a vocab size)")
        stages.append(wf.Stage(int(size), stage_pattern, max_words if number == len(specs) else None))
    return stages


def _trained(infos: list[TokenizerInfo], as_json: bool, quiet: bool, started: float, db: str) -> None:
    """What ``train`` prints of the tokenizers it stored: their refs (or JSON) on stdout, a summary
    on stderr, and a note for each identical to a version stored before."""
    if as_json:
        click.echo(json.dumps([_info_dict(info) for info in infos], indent=2, ensure_ascii=False))
    else:
        for info in infos:
            click.echo(info.ref)
    if not quiet:
        for info in infos:
            click.echo(f"{info.ref}\tvocab_size={info.vocab_size}\tmerges={info.num_merges}\ttrained in {info.training_seconds:.2f}s", err=True)
        click.echo(f"wall time {time.perf_counter() - started:.2f}s", err=True)
    if quiet:
        return
    with Store(db, create=False) as store:  # a training that reproduces a stored version says so
        for info in infos:
            if same := store.identical_versions(info.ref):
                click.echo(f"note: {info.ref} is identical to {', '.join(same)} (vocab, merges, special tokens and pattern); "
                           f"`bpestore rm {info.ref}` removes it", err=True)


# How `train`'s options that a recipe decides are spelt on the command line.
_RECIPE_OPTIONS = {
    "vocab_sizes": "--vocab-size", "special_tokens": "--special-token", "base": "--from", "pattern": "--pattern",
    "special_tokens_at": "--special-tokens-at", "min_count": "--min-count", "tie_break": "--tie-break",
}


def _train_recipe(
    recipe_file: str, name: str, corpus: tuple[str, ...], vocab_sizes: tuple[int, ...], special_tokens: tuple[str, ...],
    workers: int | None, as_json: bool, quiet: bool, dry_run: bool, max_memory: str | None, base: str | None, counts_file: str | None,
    dask_address: str | None, stored_corpus: str | None, min_count: int | None, pattern: str | None,
    special_tokens_at: str | None, tie_break: str | None, warm_entries: int, spill_dir: str | None, count_memory: str | None,
    lock_timeout: float | None, db: str, started: float,
) -> None:
    """``train --recipe FILE``: the recipe read and checked, the options given with it checked
    not to contradict it (its inputs are its own: no CORPUS, --counts, --stored-corpus, --dask),
    then trained as :meth:`Store.train` trains a recipe."""
    given_inputs = [option for option, value in [
        ("CORPUS", corpus), ("--counts", counts_file), ("--stored-corpus", stored_corpus), ("--dask", dask_address),
    ] if value]
    if given_inputs:
        _fail(f"--recipe names its own inputs: give no {', '.join(given_inputs)} with it")
    if dry_run:
        _fail("--dry-run does not take a --recipe yet: give the recipe's inputs and options instead")
    wf = _workflow()
    recipe = wf.load_recipe(recipe_file)
    wf.check_recipe_options(
        recipe, _RECIPE_OPTIONS, vocab_sizes=list(vocab_sizes) or None, special_tokens=special_tokens, base=base, pattern=pattern,
        special_tokens_at=special_tokens_at, min_count=min_count, tie_break=tie_break,
    )
    limit = wf.parse_bytes(max_memory) if max_memory is not None else None
    spilling = _spilling_options(count_memory, spill_dir, ("recipe",), None, None, None)
    with Store(db, lock_timeout=lock_timeout) as store:
        with _interrupted_after_counting("the recipe's inputs"):
            refs = store.train(
                recipe, name, workers=workers, progress=_show_progress(quiet), max_memory=limit, warm_entries=warm_entries, **spilling,
            )
        infos = [store.info(ref) for ref in refs]
    _trained(infos, as_json, quiet, started, db)


def _spilling_options(
    count_memory: str | None, spill_dir: str | None, corpus: tuple[str, ...], counts_file: str | None, dask_address: str | None,
    stored_corpus: str | None,
) -> dict[str, Any]:
    """``train``'s --count-memory and --spill-dir, for :meth:`Store.train`; usage errors for a
    size that is not one, and for them without a CORPUS counted here."""
    if count_memory is None:
        if spill_dir is not None:
            _fail("--spill-dir is where --count-memory spills: give --count-memory SIZE with it")
        return {}
    if counts_file is not None or dask_address is not None or stored_corpus is not None:
        _fail("--count-memory bounds counting a CORPUS here: not with --counts, --dask or --stored-corpus")
    try:
        size = _workflow().parse_bytes(count_memory)
        if size < 1:
            raise ValueError(count_memory)
    except ValueError:
        _fail(f"--count-memory takes a size of at least one byte, such as 800M or 2G; got {count_memory!r}")
    return {"count_memory": size, "spill_dir": spill_dir}


@contextmanager
def _interrupted_after_counting(what: str, *, corpora: str = "", again: str = "run the same command again to reuse them") -> Iterator[None]:
    """A training interrupted once its counts were stored: one line, in place of the generic
    one (what was kept is worth knowing), and exit status 130."""
    try:
        yield
    except _workflow().TrainingInterrupted as interrupted:
        click.echo(
            f"Interrupted after counting: no tokenizer was stored, but the pre-token counts of {what} are kept "
            f"in the store (corpus {interrupted.corpus_id}{corpora}); {again}.",
            err=True,
        )
        sys.exit(EXIT_INTERRUPTED)


def _inputs_described(corpus: tuple[str, ...]) -> str:
    """CORPUS in a message: the first input, and how many more."""
    more = len(corpus) - 1
    return corpus[0] + (f" (+{more} more input{'s' if more > 1 else ''})" if more else "")


def _dask_counting_options(dask_address: str | None, shard_size: str | None, partitions: int | None, quiet: bool) -> dict[str, Any]:
    """``train``'s --shard-size and --partitions, for :class:`~bpestore.distributed.count.DaskCounting`,
    refused without --dask (only Dask counts in shards); -q: Dask's logs (a lost worker's
    tracebacks) kept off stderr too."""
    if dask_address is None:
        if shard_size is not None or partitions is not None:
            _fail("--shard-size and --partitions shape counting on a Dask cluster: give them with --dask ADDRESS")
        return {}
    options: dict[str, Any] = {"quiet": quiet}
    if partitions is not None:
        options["partitions"] = partitions
    if shard_size is not None:
        try:
            options["shard_bytes"] = _workflow().parse_bytes(shard_size)
            if options["shard_bytes"] < 1:
                raise ValueError(shard_size)
        except ValueError:
            _fail(f"--shard-size takes a size of at least one byte, such as 64M or 1G; got {shard_size!r}")
    return options


def _training_source(
    corpus: tuple[str, ...], counts_file: str | None, dask_address: str | None, min_count: int | None,
    special_tokens: tuple[str, ...], workers: int | None, dask_options: dict[str, Any],
) -> tuple[list[str] | workflow.Counts, DaskCounting | None]:
    """What ``train`` trains on and what counts it: the CORPUS paths, counted in process (no
    backend given) or by the Dask backend for --dask; or the counts read from --counts. Pruned to
    --min-count; usage errors for options that do not go together."""
    if counts_file is not None and corpus:
        _fail("give either CORPUS or --counts FILE, not both")
    if counts_file is None and not corpus:
        _fail("give a CORPUS to train on (or --counts FILE)")
    if counts_file is not None and dask_address is not None:
        _fail("--dask counts a CORPUS; --counts FILE needs no counting")
    if counts_file is not None:
        counts = _workflow().read_counts(counts_file, special_tokens=list(special_tokens) or None)
        return (counts.pruned(min_count) if min_count is not None else counts), None
    if dask_address is None:
        return list(corpus), None
    from .distributed.count import DaskCounting

    # --workers: a local cluster's processes. Pruned on the cluster (exactly: each part's
    # totals), so only what is kept comes here.
    return list(corpus), DaskCounting(dask_address, n_workers=workers, min_count=min_count, **dask_options)


# -- list / show -----------------------------------------------------------------------------------


def _number(value: int | float | None, decimals: int = 3) -> str:
    """A quantity as every table and summary of the CLI prints it: thousands separated
    (``50,257``, ``1,234.568``), ``-`` for none. Ids and merge ranks are names, not quantities:
    they are printed as they are.

    >>> _number(50257), _number(4.23712), _number(None), _number(0.5, 1)
    ('50,257', '4.237', '-', '0.5')
    """
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{decimals}f}"


def _table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [headers, *rows]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


# The width `bpestore list` keeps its table within, unless --wide.
LIST_WIDTH = 100


def _cut(cell: str, width: int) -> str:
    """``cell`` in at most ``width`` characters, its start and … for the rest."""
    return cell if len(cell) <= width else cell[: width - 1] + "…"


def _tokens_within(tokens: list[str], width: int) -> str:
    """Special tokens in at most ``width`` characters: the first ones whole, then how many more
    (``<|endoftext|> +4``); the first one cut with … if even it does not fit."""
    if not tokens:
        return "-"
    for shown in range(len(tokens), 0, -1):
        cell = " ".join(tokens[:shown]) + (f" +{len(tokens) - shown}" if shown < len(tokens) else "")
        if len(cell) <= width:
            return cell
    more = f" +{len(tokens) - 1}" if len(tokens) > 1 else ""
    return _cut(tokens[0], max(width - len(more), 2)) + more


def _fitted_widths(rows: list[list[str]], headers: list[str], width: int, shortened: list[int]) -> list[int]:
    """The widths of the table's columns once the ``shortened`` ones are narrowed, the widest
    first, until the table is at most ``width`` characters wide (or each is as narrow as its
    header, 8 characters at least)."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows)]
    narrowest = {index: max(len(headers[index]), 8) for index in shortened}
    while sum(widths) + 2 * (len(widths) - 1) > width:
        candidates = [index for index in shortened if widths[index] > narrowest[index]]
        if not candidates:
            break
        widths[max(candidates, key=lambda index: widths[index])] -= 1
    return widths


def _list_row(info: TokenizerInfo) -> list[str]:
    return [
        info.name,
        str(info.version),
        _number(info.vocab_size),
        " ".join(info.special_tokens) or "-",
        _short_source(info),
        info.created_at.strftime("%Y-%m-%d %H:%M"),
        f"{info.training_seconds:.2f}s" if info.training_seconds is not None else "-",
        info.base_ref or "-",
    ]


def _info_dict(info: TokenizerInfo) -> dict[str, Any]:
    """A tokenizer's metadata as `list --json` and `train --json` print it: with its lineage
    (``base``: the ref it continues, or None; ``reshaped_from``: the ref it was trimmed from, or None)."""
    return info.to_dict() | {"base": info.base_ref, "reshaped_from": info.reshaped_from}



def _short_source(info: TokenizerInfo) -> str:
    """The corpus file name (``a.txt +2 files`` for several), or the format and file names an
    import came from."""
    if info.corpus_path:
        short: str = _workflow().short_corpus_path(info.corpus_path, info.corpus_origin)
        return short
    if info.source_format is not None:
        return f"{info.source_format}: " + " ".join(Path(path).name for path in info.source_paths or [])
    return info.source


@main.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of objects.")
@click.option("--wide", is_flag=True, help=f"Show every field whole (the table fits in {LIST_WIDTH} columns without it).")
@_db_option
def list_(as_json: bool, wide: bool, db: str) -> None:
    """List the stored tokenizers, one row per version; CONTINUES ("base" in --json) names
    the tokenizer a continued training (`train --from`) started from; a tokenizer made by
    `trim` or `add-tokens` says what it was made from in CORPUS/SOURCE ("reshaped_from" in --json).
    The table fits in 100 columns: long fields (special tokens, sources, names) are shortened
    with …; --wide shows them whole.

    \b
    Example:
      bpestore list
      bpestore list --wide
      bpestore list --json | jq '.[].name'
    """
    from .errors import DamagedStoreError

    damaged: list[DamagedStoreError] = []  # rows that cannot be read: the others are still listed
    with Store(db, create=False) as store:
        infos = store.list(damaged=damaged)
    if as_json:
        click.echo(json.dumps([_info_dict(info) for info in infos], indent=2, ensure_ascii=False))
    elif infos:
        headers = ["NAME", "VERSION", "VOCAB", "SPECIAL TOKENS", "CORPUS/SOURCE", "CREATED (UTC)", "TRAINING", "CONTINUES"]
        rows = [_list_row(info) for info in infos]
        if not wide:  # the name, special tokens, corpus/source and base, shortened to fit
            widths = _fitted_widths(rows, headers, LIST_WIDTH, [0, 3, 4, 7])
            for row, info in zip(rows, infos):
                row[3] = _tokens_within(info.special_tokens, widths[3])
                for index in (0, 4, 7):
                    row[index] = _cut(row[index], widths[index])
        click.echo(_table(rows, headers))
    elif not damaged:
        click.echo(f"No tokenizers in {db} yet: try `bpestore train CORPUS --name NAME --vocab-size N`.", err=True)
    for error in damaged:
        click.echo(f"DAMAGED {error}", err=True)
    if damaged:
        raise SystemExit(1)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of problems ([] when there is none).")
@_db_option
def check(as_json: bool, db: str) -> None:
    """Check the store --db names: SQLite's integrity check, that its schema revision matches
    its tables, every column of every table against the strict schema's types and JSON shapes,
    every tokenizer's row, vocab and merges (and its packed copy against them), and every
    corpus's row against its stored counts. One line per problem; exit status 1 when there is
    any, 0 when the store is sound. Writes nothing.

    \b
    Example:
      bpestore check
      bpestore check --json | jq '.[].message'
    """
    problems = _workflow().check_store(db)
    if as_json:
        click.echo(json.dumps([problem.to_dict() for problem in problems], indent=2, ensure_ascii=False))
    else:
        for problem in problems:
            click.echo(f"{problem.where}: {problem.message}")
        if not problems:
            click.echo(f"{db}: no problem found", err=True)
    if problems:
        raise SystemExit(1)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_db_option
def info(as_json: bool, db: str) -> None:
    """Say which store --db names and what is in it: path or URL, schema revision, tokenizers,
    whether it can be written. Writes nothing (a missing store is an error, not created).

    \b
    Example:
      bpestore --db /data/tokenizers.db info
    """
    from .errors import StoreNotFoundError

    summary = _workflow().summarize_store(db)
    if not summary.exists:
        raise StoreNotFoundError(f"no store at {summary.location}: only writes (train, import) create one")
    if as_json:
        click.echo(json.dumps(summary.to_dict(), indent=2))
        return
    fields = [
        ("store", summary.location),
        ("kind", summary.kind),
        ("schema revision", summary.schema_revision),
        ("tokenizers", "-" if summary.tokenizers is None else f"{_number(summary.tokenizers)} ({_number(summary.names)} names)"),
        ("writable", f"no: {summary.read_only_reason}" if summary.read_only_reason else "yes"),
    ]
    if summary.journal_mode is not None:
        fields.append(("journal mode", summary.journal_mode))
    if summary.size_bytes is not None:
        fields.append(("size", f"{_number(summary.size_bytes)} bytes"))
    width = max(len(label) for label, _ in fields)
    for label, value in fields:
        click.echo(f"{label.ljust(width)}  {value}")


def _pattern_shown(pattern: str) -> str:
    """A pre-tokenizer as people know it: its name (cl100k_base), or the regex."""
    return _workflow().name_of_pattern(pattern) or pattern


def _readable(token: bytes) -> str:
    """Quoted and unambiguous (see :func:`bpestore.workflow.token_text`)."""
    text: str = _workflow().token_text(token)
    return "'" + text.replace("'", "\\'") + "'"


@main.command()
@click.argument("ref")
@click.option("--merges", "num_merges", type=click.IntRange(min=0, max=MAX_INT64), default=10, show_default=True, help="How many first/last merges and longest tokens to show.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--recipe", "as_recipe", is_flag=True, help="Print only the TOML recipe that reproduces REF (bpestore train --recipe FILE trains it).")
@_db_option
def show(ref: str, num_merges: int, as_json: bool, as_recipe: bool, db: str) -> None:
    """Show a tokenizer: metadata, first and last merges, longest tokens.

    REF is NAME (latest version) or NAME@VERSION. Bytes that are not valid UTF-8 are shown
    escaped (\\xNN).

    \b
    Example:
      bpestore show ts@2 --merges 20
      bpestore show ts@2 --recipe > ts.toml && bpestore train --recipe ts.toml --name ts-again
    """
    if as_recipe:
        if as_json:
            _fail("--recipe prints TOML: not with --json (show --json has the recipe in training_params)")
        with Store(db, create=False) as store:
            click.echo(store.recipe_of(ref).to_toml(), nl=False)
        return
    with Store(db, create=False) as store:
        info = store.info(ref)
        model = store.load_model(info.ref)
        warm = store.warm_status(info.ref, model)
    # The first and last NUM_MERGES merges (none listed twice), the longest tokens (then by id).
    merges = model.merges
    first = list(enumerate(merges[:num_merges]))
    last = list(enumerate(merges))[max(len(merges) - num_merges, num_merges):] if num_merges else []
    longest = sorted(model.vocab.items(), key=lambda item: (-len(item[1]), item[0]))[:num_merges]
    if as_json:
        data = info.to_dict()
        data["first_merges"] = [{"rank": r, "left": _readable(a), "right": _readable(b)} for r, (a, b) in first]
        data["last_merges"] = [{"rank": r, "left": _readable(a), "right": _readable(b)} for r, (a, b) in last]
        data["longest_tokens"] = [{"id": i, "token": _readable(t), "bytes": len(t)} for i, t in longest]
        data["warm_table"] = warm
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    fields = [
        ("tokenizer", info.ref),
        ("vocab size", _number(info.vocab_size)),
        ("merges", _number(info.num_merges)),
        ("special tokens", _listed(info.special_tokens, str) or "-"),
        *([("added tokens", _listed(info.added_tokens, repr))] if info.added_tokens else []),
        ("merge rule", info.merge_rule),
        *info.pipeline,
        *([] if any(label == "pre-tokenizer" for label, _ in info.pipeline) else [("pattern", _pattern_shown(info.pattern))]),
        ("source", info.source),
        ("created", info.created_at.strftime("%Y-%m-%d %H:%M:%S UTC")),
    ]
    base = (info.training_params or {}).get("base")
    if base:
        fields.append(("continues", base))  # its ids and merges come first
    if (info.training_params or {}).get("recipe") is not None:
        fields.append(("recipe", f"stored (bpestore show {info.ref} --recipe)"))
    shares = (info.training_params or {}).get("parity_merges")
    if isinstance(shares, dict) and shares:  # a parity-aware training: the merges each language's turn made
        fields.append(("parity merges", " ".join(f"{language}={count}" for language, count in shares.items())))
    if info.reshaped_from:
        how = (info.training_params or {}).get("how", "reshaped")
        changed = "old ids kept" if how == "add-tokens" else "ids changed"
        fields.append(("reshaped from", f"{info.reshaped_from} ({how}; {changed}: see its id map)"))
    if info.corpus_path:
        fields += [("corpus", info.corpus_path), ("corpus bytes", _number(info.corpus_bytes)), ("corpus sha256", info.corpus_sha256 or "-")]
    if info.training_seconds is not None:
        fields.append(("training time", f"{info.training_seconds:.2f}s"))
    if warm is None:
        # (without a corpus, a token-rule tokenizer's table comes only from files: see `warm`)
        from_files = model.merge_rule == "token" and not info.corpus_path
        fields.append(("warm table", f"none (bpestore warm {'REF FILE... ' if from_files else ''}makes one)"))
    else:
        stale = " (stale: made for another model or bpestore version, unused; bpestore warm remakes it)" if warm["stale"] else ""
        if warm.get("unused") and not warm["stale"]:
            stale = " (unused: this tokenizer finds its whole tokens in one lookup; bpestore warm REF FILE makes a table that helps)"
        fields.append(("warm table", f"{_number(warm['entries'])} pre-tokens from {warm['source']}{stale}"))
    width = max(len(label) for label, _ in fields)
    for label, value in fields:
        click.echo(f"{label.ljust(width)}  {value}")
    if first:
        click.echo(f"\nfirst {len(first)} merges:")
        for rank, (a, b) in first:
            click.echo(f"  {rank:>7}  {_readable(a)!s:>16} + {_readable(b)}")
    if last:
        click.echo(f"\nlast {len(last)} merges:")
        for rank, (a, b) in last:
            click.echo(f"  {rank:>7}  {_readable(a)!s:>16} + {_readable(b)}")
    if longest:
        click.echo(f"\nlongest {len(longest)} tokens:")
        for token_id, token in longest:
            click.echo(f"  {token_id:>7}  {len(token):>4} bytes  {_readable(token)}")


# -- diff ----------------------------------------------------------------------------------------


class _DiffCommand(_Command):
    """``diff``, whose ``--corpus FILE [FILE...]`` takes every word after it up to the next
    option: those are files, and the words before ``--corpus`` are the tokenizers' refs."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rewritten: list[str] = []
        state = "refs"  # "value": --corpus's own value comes next; "files": more files follow
        for index, arg in enumerate(args):
            if arg == "--":
                rewritten += args[index:]
                break
            if state == "value":
                rewritten.append(arg)
                state = "files"
                continue
            if state == "files" and not arg.startswith("-"):
                rewritten += ["--corpus", arg]
                continue
            state = "refs"
            rewritten.append(arg)
            if arg == "--corpus":
                state = "value"
            elif arg.startswith("--corpus="):
                state = "files"
        return super().parse_args(ctx, rewritten)


@main.command(cls=_DiffCommand)
@click.argument("refs", metavar="REF REF [REF...]", nargs=-1)
@click.option(
    "--corpus", "corpora", multiple=True, type=click.Path(path_type=Path), metavar="FILE [FILE...]",
    help="Also measure the tokenizers on these text files (a table row per file): tokens, bytes per token, "
    "tokens per word, Renyi efficiency (alpha 2.5), share of the vocab used.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--show", "num_shown", type=click.IntRange(min=0, max=MAX_INT64), default=15, show_default=True, help="Tokens listed per side (two REFs).")
@_quiet_option
@_db_option
def diff(refs: tuple[str, ...], corpora: tuple[Path, ...], as_json: bool, num_shown: int, quiet: bool, db: str) -> None:
    """Compare tokenizers: tokens, merges, special tokens, pattern, cost on texts.

    Two REFs: what differs between them, token by token. More: one table, a row per tokenizer,
    each compared with the first (its vocab and merges shared with the first; with --corpus, its
    cost on the files: bytes per token, tokens per word, ...).

    \b
    Example:
      bpestore diff ts@1 ts@2 --corpus held_out.txt
      bpestore diff ts@1 ts@2 --corpus en.txt de.txt zh.txt --json
      bpestore diff ts@1 ts@2 ts@3 gpt2 --corpus held_out.txt
    """
    if len(refs) < 2:
        raise click.UsageError(
            "give at least two tokenizers to compare: REF REF [REF...]"
            + (", before --corpus (the words after --corpus, up to the next option, are files)" if corpora else "")
        )
    files = list(corpora)
    with Store(db, create=False) as store:
        for ref in refs:
            if os.path.isfile(ref):  # a corpus given without --corpus, most likely
                try:
                    store.info(ref)
                except (BpestoreError, ValueError):
                    raise click.UsageError(f"{ref!r} is a file, not a stored tokenizer: files to measure on follow --corpus") from None
    if len(refs) > 2:
        with Store(db, create=False) as store:
            comparison = store.compare(refs, files or None, progress=_show_progress(quiet))
        if as_json:
            click.echo(json.dumps(comparison.to_dict(), indent=2, ensure_ascii=False))
        else:
            click.echo(_comparison_text(comparison))
        return
    ref_a, ref_b = refs
    with Store(db, create=False) as store:
        result = store.diff(ref_a, ref_b, files or None, progress=_show_progress(quiet))
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        return
    a, b = result.a, result.b
    # Columns wide enough for the longer ref and two spaces, so that the refs never run together.
    w = max(18, len(a) + 2, len(b) + 2)
    lines = [
        f"{'':24}{a:>{w}}{b:>{w}}",
        f"{'vocab size':24}{_number(result.vocab_size_a):>{w}}{_number(result.vocab_size_b):>{w}}",
        f"{'merges':24}{_number(result.merges_a):>{w}}{_number(result.merges_b):>{w}}",
        f"{'tokens only here':24}{_number(len(result.only_a)):>{w}}{_number(len(result.only_b)):>{w}}",
        f"shared tokens           {_number(result.shared_tokens)}",
        f"shared merges           {_number(result.shared_merges)} (regardless of rank)",
        f"common merge prefix     {_number(result.common_merge_prefix)}",
    ]
    if result.first_different_merge:
        d = result.first_different_merge
        show_merge: Callable[[list[str] | None], str] = lambda m: " + ".join(f"'{t}'" for t in m) if m else "(none)"  # noqa: E731
        lines.append(f"first different merge   rank {d['rank']}: {show_merge(d['a'])}  vs  {show_merge(d['b'])}")
    if result.special_tokens_only_a or result.special_tokens_only_b:
        lines.append(f"special tokens only in {a}: {result.special_tokens_only_a}; only in {b}: {result.special_tokens_only_b}")
    lines.append(
        "same pattern" if result.same_pattern
        else f"patterns differ:\n  {a}: {_pattern_shown(result.pattern_a)}\n  {b}: {_pattern_shown(result.pattern_b)}"
    )
    if result.merge_rule_a != result.merge_rule_b:
        lines.append(f"merge rules differ: {result.merge_rule_a} vs {result.merge_rule_b}")
    if result.corpus is not None:
        lines.append(f"\non {result.corpus} ({_number(result.corpus_bytes)} bytes):")
        lines.append(f"{'tokens':24}{_number(result.tokens_a):>{w}}{_number(result.tokens_b):>{w}}")
        lines.append(f"{'bytes per token':24}{_number(result.bytes_per_token_a or 0.0):>{w}}{_number(result.bytes_per_token_b or 0.0):>{w}}")
        lines.append("\n" + _files_table(result))
    for label, tokens in ((a, result.only_a), (b, result.only_b)):
        if tokens:
            shown = ", ".join(_readable(t) for _, t in tokens[:num_shown])
            more = f" ... (+{_number(len(tokens) - num_shown)})" if len(tokens) > num_shown else ""
            lines.append(f"\nonly in {label} (by id): {shown}{more}")
    click.echo("\n".join(lines))


def _files_table(result: workflow.TokenizerDiff) -> str:
    """The measurements of a diff on its files (and their total), one row per file and tokenizer."""
    # A diff on files (diff() calls this when it has a corpus): its files and totals are set.
    files = cast("list[workflow.FileComparison]", result.files)
    groups = [(Path(row.path).name, [(result.a, row.a), (result.b, row.b)]) for row in files]
    if len(files) > 1:
        groups.append(("(all files)", [(result.a, result.total_a), (result.b, result.total_b)]))  # type: ignore[list-item]  # (set with the files)
    return _measurements_table(groups)


_MEASUREMENT_HEADERS = ["BYTES", "WORDS", "TOKENS", "BYTES/TOKEN", "TOKENS/WORD", "RENYI EFF.", "VOCAB USED"]


def _measurement_cells(measured: workflow.Measurement) -> list[str]:
    return [
        _number(measured.bytes), _number(measured.words), _number(measured.tokens),
        _number(measured.bytes_per_token), _number(measured.fertility),
        _number(measured.renyi_efficiency()), _number(measured.vocab_used),
    ]


def _measurements_table(groups: list[tuple[str, list[tuple[str, workflow.Measurement]]]]) -> str:
    """One row per file (a group's label) and tokenizer."""
    rows = [[label, ref, *_measurement_cells(measured)] for label, measured_by in groups for ref, measured in measured_by]
    return _table(rows, ["FILE", "TOKENIZER", *_MEASUREMENT_HEADERS])


def _comparison_text(comparison: workflow.TokenizerComparison) -> str:
    """``diff`` of more than two tokenizers: one table, a row per tokenizer, each against the
    first; on a corpus, its cost on all the files (and a table per file when there are several)."""
    base = comparison.base
    headers = ["TOKENIZER", "VOCAB", "MERGES", f"SHARED WITH {base}", "SAME FIRST MERGES"]
    rows = []
    for row in comparison.tokenizers:
        shared = f"{_number(row.shared_tokens)} ({row.shared_tokens / row.vocab_size:.1%})" if row.vocab_size else "0"
        cells = [row.ref, _number(row.vocab_size), _number(row.merges), shared, _number(row.common_merge_prefix)]
        if row.total is not None:
            cells += _measurement_cells(row.total)[2:]  # (bytes and words: the corpus's, said above the table)
        rows.append(cells)
    lines = []
    files = comparison.corpus_files
    first = comparison.tokenizers[0].total
    if files is not None and first is not None:
        headers += _MEASUREMENT_HEADERS[2:]
        where = files[0] if len(files) == 1 else f"{len(files)} files"
        lines.append(f"on {where} ({_number(first.bytes)} bytes, {_number(first.words)} words):")
    lines.append(_table(rows, headers))
    notes = []
    other_patterns = [row.ref for row in comparison.tokenizers if not row.same_pattern]
    if other_patterns:
        notes.append(f"pattern differs from {base}'s: {', '.join(other_patterns)}")
    by_specials: dict[tuple[str, ...], list[str]] = {}
    for row in comparison.tokenizers:
        by_specials.setdefault(tuple(row.special_tokens), []).append(row.ref)
    if len(by_specials) > 1:
        notes.append("special tokens differ: " + "; ".join(f"{' '.join(tokens) or 'none'} ({', '.join(refs)})" for tokens, refs in by_specials.items()))
    rules = {row.merge_rule for row in comparison.tokenizers}
    if len(rules) > 1:
        notes.append("merge rules: " + ", ".join(f"{row.ref} {row.merge_rule}" for row in comparison.tokenizers))
    if notes:
        lines.append("\n" + "\n".join(notes))
    if files is not None and len(files) > 1:
        groups = [
            (Path(path).name, [(row.ref, cast("list[workflow.Measurement]", row.files)[index]) for row in comparison.tokenizers])
            for index, path in enumerate(files)
        ]
        lines.append("\n" + _measurements_table(groups))
    return "\n".join(lines)


# -- encode / decode -------------------------------------------------------------------------------


def _write_ids(blocks: Iterable[np.ndarray], out: IO[str]) -> int:
    """The ids as text, space-separated, on one line; returns how many."""
    first = True
    count = 0
    for ids in blocks:
        if len(ids):
            out.write(("" if first else " ") + " ".join(map(str, ids.tolist())))
            first = False
            count += len(ids)
    out.write("\n")
    return count


@main.command()
@click.argument("ref")
# str, not Path: an fsspec URL (s3://...) must keep its "//"
@click.argument("inputs", metavar="[INPUT]...", nargs=-1, type=click.Path(allow_dash=True))
@click.option("--output", "-o", type=click.Path(path_type=Path), help="Write ids here: a .npy file (uint16 if every id fits, else uint32), else text.")
@click.option(
    "--output-dir", metavar="DIR|URL", default=None,
    help="Encode each INPUT file (globs and fsspec URLs too) into its own .npy here, with a manifest; a rerun skips finished shards.",
)
@click.option(
    "--dask", "dask_address", metavar="ADDRESS|local", default=None,
    help="With --output-dir: encode the shards on a Dask cluster (a scheduler's address, or 'local').",
)
@click.option("--workers", type=click.IntRange(min=1, max=MAX_INT64), default=None, help="Threads for a file to .npy [default: CPUs].")
@click.option(
    "--allowed-special", "allowed_special", multiple=True, metavar="TOKEN|all|none",
    help="Recognise only these special tokens (repeatable; 'none': none of them). Another special "
    "token's string in the input is then an error, unless --ordinary. [default: all]",
)
@click.option("--ordinary", is_flag=True, help="Encode the special tokens not allowed as ordinary text (alone: all of them).")
@click.option(
    "--tokens", "show_tokens", is_flag=True,
    help="Print the tokens instead of ids, one a line: its id, a tab, its text with whitespace made visible "
    "(space \u00b7, newline \u21b5, tab \u2192; other control characters, and bytes of a character split "
    "between tokens, as \\xNN).",
)
@click.option("--compact", is_flag=True, help="Print the tokens (as --tokens shows them) on one line, joined by '|'.")
@click.option("--count", "count_only", is_flag=True, help="Print how many tokens, characters and bytes the input is, and bytes per token, instead of ids.")
@click.option("--json", "as_json", is_flag=True, help="With --count: print a JSON object.")
@click.option(
    "--dropout", type=click.FloatRange(0, 1, max_open=True), default=None, metavar="P",
    help="BPE-dropout: skip each merge with probability P (0 <= P < 1), for other segmentations of the same text.",
)
@click.option("--seed", type=click.IntRange(0, 2**64 - 1), default=0, show_default=True, help="With --dropout: the seed of its draws.")
@click.option(
    "--add-special-tokens", is_flag=True,
    help="Put the special tokens of the tokenizer's post-processor around the input's ids (an imported one's: "
    "Llama-3's <|begin_of_text|>, RoBERTa's <s> and </s>), as Hugging Face's add_special_tokens=True.",
)
@_quiet_option
@_db_option
def encode(
    ref: str, inputs: tuple[str, ...], output: Path | None, output_dir: str | None, dask_address: str | None,
    workers: int | None, allowed_special: tuple[str, ...], ordinary: bool, show_tokens: bool, compact: bool, count_only: bool,
    as_json: bool, dropout: float | None, seed: int, add_special_tokens: bool, quiet: bool, db: str,
) -> None:
    """Encode INPUT (a UTF-8 file; stdin if absent or '-') to token ids.

    Without --output the ids are printed separated by spaces. With --output x.npy a file is
    encoded in parallel, in bounded memory, into a NumPy array; the ids are exactly those of
    encoding the whole text at once.

    With --output-dir DIR, each INPUT (files, globs such as 'data/*.txt', fsspec URLs; a glob's
    matches sorted) is encoded on its own into DIR/shard-NNNNN.npy, numbered in that order, and
    DIR/manifest.jsonl records each finished shard; a rerun skips those. --dask spreads the
    shards over a Dask cluster.

    Every special token of the tokenizer is recognised by default. For untrusted input, use
    --allowed-special none (a special token's string is an error) or --ordinary (it is
    encoded as ordinary text).

    To see what the tokenizer does: --tokens prints each token (id, then its text), --compact
    the tokens on one line joined by '|', --count the number of tokens and bytes per token.
    In a token's text a space is \u00b7, a newline \u21b5, a tab \u2192, a backslash \\\\; other
    control characters and the bytes of a character split between tokens are \\xNN, other
    invisible characters \\uNNNN (and a literal \u00b7, \u21b5, \u2192 too). On a terminal,
    tokens alternate in colour (not with NO_COLOR set).

    --dropout P encodes with BPE-dropout (each merge skipped with probability P, the draws
    seeded by --seed and each pre-token's byte offset): the same seed gives the same ids,
    whatever --workers.

    \b
    Example:
      echo "Hello world" | bpestore encode gpt2
      echo 'def hello():' | bpestore encode gpt2 --tokens
      bpestore encode gpt2 notes.txt --compact
      bpestore encode gpt2 notes.txt --count --json
      bpestore encode gpt2 train.txt --output train.npy --workers 4
      bpestore encode gpt2 user_input.txt --ordinary
      bpestore encode gpt2 'data/*.txt' --output-dir data-ids/ --dask local
      bpestore encode gpt2 train.txt --output epoch3.npy --dropout 0.1 --seed 3
    """
    view = "count" if count_only else "compact" if compact else "tokens" if show_tokens else None
    if count_only and (show_tokens or compact):
        raise click.UsageError("--count prints numbers, --tokens and --compact the tokens: give one of them")
    if view is not None and (output is not None or output_dir is not None):
        raise click.UsageError(f"--{'count' if count_only else 'compact' if compact else 'tokens'} prints to stdout: give no --output or --output-dir")
    if as_json and not count_only:
        raise click.UsageError("--json goes with --count")
    if output_dir is None and (len(inputs) > 1 or dask_address is not None):
        raise click.UsageError("several INPUTs and --dask need --output-dir (one .npy per input)")
    if output_dir is not None and (output is not None or not inputs or "-" in map(str, inputs)):
        raise click.UsageError("--output-dir takes INPUT files (not stdin), and no --output")
    if seed and dropout is None:
        raise click.UsageError("--seed seeds --dropout: give --dropout P with it")
    if dropout is not None and output_dir is not None:
        raise click.UsageError("--dropout encodes one INPUT (to stdout or --output), not --output-dir shards")
    if add_special_tokens and (count_only or output_dir is not None or (output is not None and output.suffix == ".npy")):
        raise click.UsageError("--add-special-tokens goes with ids or tokens printed, or written to a text --output")
    tokenizer = _workflow().load_tokenizer(db, ref)
    policy = _special_policy(tokenizer.special_tokens, allowed_special, ordinary, ref)
    if output_dir is not None:
        _encode_shards(tokenizer, ref, list(inputs), output_dir, dask_address, workers, quiet, policy)
        return
    if dropout is not None:
        policy = {**policy, "dropout": dropout, "seed": seed}
    input_path = Path(inputs[0]) if inputs else None
    from_stdin = input_path is None or str(input_path) == "-"
    source = sys.stdin.buffer if from_stdin else input_path

    progress = _show_progress(quiet)
    try:
        if view == "count":
            counted = _workflow().count_tokens(tokenizer, source, progress=progress, **policy)
            _print_count(counted, as_json)
            return
        if view is not None:
            blocks = _workflow().encode_stream(tokenizer, source, progress=progress, **policy)
            blocks = _around(tokenizer, blocks) if add_special_tokens else blocks
            _write_tokens(tokenizer, blocks, sys.stdout, compact=view == "compact", colour=_colour_on(sys.stdout))
            return
        if output is not None and output.suffix == ".npy":
            count = _workflow().encode_to(tokenizer, source, output, workers=workers, progress=progress, **policy)
            click.echo(f"wrote {_number(count)} ids to {output}", err=True)
            return
        blocks = _workflow().encode_stream(tokenizer, source, progress=progress, **policy)
        blocks = _around(tokenizer, blocks) if add_special_tokens else blocks
        if output is None:
            _write_ids(blocks, sys.stdout)
        else:
            # Appears only once complete: bad UTF-8 late in the input, a full disk or Ctrl-C
            # leaves no partial file.
            with _workflow().atomic_output(output, encoding="ascii") as file:
                count = _write_ids(blocks, file)
            click.echo(f"wrote {_number(count)} ids to {output}", err=True)  # (as for a .npy)
    except DisallowedSpecialTokenError as error:
        raise _in_the_cli_terms(error) from None


def _around(tokenizer: Tokenizer, blocks: Iterable[Any]) -> Iterator[Any]:
    """The blocks of ids with the tokenizer's post-processor's tokens before the first and after
    the last (none without a post-processor)."""
    import numpy as np

    processor = tokenizer.model.post_processor
    if processor is not None and processor.prefix:
        yield np.array(processor.prefix, dtype=np.uint32)
    yield from blocks
    if processor is not None and processor.suffix:
        yield np.array(processor.suffix, dtype=np.uint32)


def _listed(items: Sequence[str], shown: Callable[[str], str], limit: int = 12) -> str:
    """Items joined by commas, the first ``limit`` and how many in all when there are more
    (Llama-3 has 256 special tokens)."""
    head = ", ".join(map(shown, items[:limit]))
    return head if len(items) <= limit else f"{head}, ... ({len(items)} in all)"


def _print_count(counted: workflow.TokenCount, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(counted.to_dict()))
        return
    fields = [
        ("tokens", _number(counted.tokens)),
        ("characters", _number(counted.characters)),
        ("bytes", _number(counted.bytes)),
        ("bytes/token", _number(counted.bytes_per_token)),
    ]
    for label, value in fields:
        click.echo(f"{label:<12}{value:>14}")


# How --tokens makes a token's whitespace visible; the marks' own characters are escaped (\uNNNN),
# so that the text shown reads back to exactly the token's bytes.
_VISIBLE = {" ": "\u00b7", "\n": "\u21b5", "\t": "\u2192"}
_MARKS = frozenset(_VISIBLE.values())
_TOKEN_SEPARATOR = "|"


def _visible(token: bytes, separator: str | None = None) -> str:
    """A token's text as --tokens shows it, unambiguous: a space, newline and tab as \u00b7 \u21b5
    \u2192; a backslash doubled; an ASCII control character, or a byte that is not part of a whole
    UTF-8 character (a character split between tokens), as ``\\xNN``; any other character that
    does not print, and the three marks themselves, as ``\\uNNNN``; ``separator`` (--compact's
    ``|``) as ``\\|``.

    >>> _visible(b" hello\\n"), _visible(b"\\xe6\\x97"), _visible(b"a\\\\b|\\r", "|")
    ('\u00b7hello\u21b5', '\\\\xe6\\\\x97', 'a\\\\\\\\b\\\\|\\\\x0d')
    """
    pieces = []
    for char in token.decode("utf-8", errors="surrogateescape"):
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that is not part of a whole UTF-8 character
            pieces.append(f"\\x{code - 0xDC00:02x}")
        elif char in _VISIBLE:
            pieces.append(_VISIBLE[char])
        elif char == "\\" or char == separator:
            pieces.append("\\" + char)
        elif char in _MARKS or not char.isprintable():
            if code < 0x80:
                pieces.append(f"\\x{code:02x}")
            else:
                pieces.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            pieces.append(char)
    return "".join(pieces)


def _colour_on(stream: IO[str]) -> bool:
    """Colour for a terminal only, and never with NO_COLOR set (https://no-color.org)."""
    return not os.environ.get("NO_COLOR") and _is_terminal(stream)


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no such method, or closed
        return False


_TOKEN_COLOURS = ("cyan", "yellow")


def _write_tokens(tokenizer: Tokenizer, blocks: Iterable[np.ndarray], out: IO[str], *, compact: bool, colour: bool) -> None:
    """``encode --tokens`` (one token a line: id, tab, text) or ``--compact`` (one line, ``|``
    between tokens); alternate tokens coloured when ``colour``."""
    shown: dict[int, str] = {}  # id -> its text as shown
    vocab = tokenizer.vocab
    separator = _TOKEN_SEPARATOR if compact else None
    position = 0
    first = True
    for ids in blocks:
        pieces = []
        for token_id in ids.tolist():
            text = shown.get(token_id)
            if text is None:
                text = shown[token_id] = _visible(vocab[token_id], separator)
            if colour:
                text = click.style(text, fg=_TOKEN_COLOURS[position % 2])
            position += 1
            pieces.append(text if compact else f"{token_id}\t{text}\n")
        if pieces:
            out.write(("" if first else _TOKEN_SEPARATOR) + _TOKEN_SEPARATOR.join(pieces) if compact else "".join(pieces))
            first = False
    if compact:
        out.write("\n")


def _in_the_cli_terms(error: DisallowedSpecialTokenError) -> BpestoreError:
    """The API's error (which says ``allowed_special=...``), with the advice in the flags' terms."""
    return BpestoreError(
        f"Encountered text corresponding to disallowed special token {error.token!r} at character {error.position}: "
        f"allow it with --allowed-special {error.token!r}, or encode it as ordinary text with --ordinary."
    )


def _encode_shards(
    tokenizer: Tokenizer, ref: str, inputs: list[str], output_dir: str, dask_address: str | None, workers: int | None, quiet: bool,
    policy: dict[str, Any],
) -> None:
    """``encode --output-dir``: one shard per input file, here or on a Dask cluster."""
    options = {"ref": ref, "progress": _show_progress(quiet), **policy}
    try:
        if dask_address is None:
            result = _workflow().encode_shards(tokenizer, inputs, output_dir, workers=workers, **options)
        else:
            from .distributed.cluster import dask_client
            from .distributed.encode import encode_shards_on_dask

            # --workers: a local cluster's processes; -q: Dask's logs (a lost worker's) kept off stderr
            with dask_client(dask_address, n_workers=workers, quiet=quiet) as client:
                result = encode_shards_on_dask(client, tokenizer, inputs, output_dir, **options)
    except DisallowedSpecialTokenError as error:
        raise _in_the_cli_terms(error) from None
    click.echo(
        f"wrote {_number(result.tokens)} ids in {_number(len(result.entries))} shards to {output_dir} "
        f"({_number(len(result.encoded))} encoded now, {_number(len(result.skipped))} already done)",
        err=True,
    )


def _special_policy(special_tokens: list[str], allowed: tuple[str, ...], ordinary: bool, ref: str) -> dict[str, Any]:
    """``encode``'s options as the API's ``allowed_special`` and ``disallowed_special``."""
    if not allowed:
        return {"allowed_special": set(), "disallowed_special": ()} if ordinary else {}
    if "none" in allowed and len(allowed) > 1:
        raise click.BadParameter("'none' cannot be given with special tokens", param_hint="--allowed-special")
    if "all" in allowed:
        chosen: str | set[str] = "all"
    else:
        chosen = {token for token in allowed if token != "none"}
        unknown = sorted(chosen - set(special_tokens))
        if unknown:
            raise click.BadParameter(
                f"{unknown[0]!r} is not a special token of {ref} (its special tokens: {special_tokens or 'none'})",
                param_hint="--allowed-special",
            )
    return {"allowed_special": chosen, "disallowed_special": () if ordinary else "all"}


def _parse_ids(words: Iterable[str]) -> Iterator[int]:
    for word in words:
        try:
            yield int(word)
        except ValueError:
            raise ValueError(f"not a token id: {word!r} (ids are whitespace-separated integers)") from None


@main.command()
@click.argument("ref")
@click.argument("ids", nargs=-1, metavar="[ID...|FILE|-]")
@_db_option
def decode(ref: str, ids: tuple[str, ...], db: str) -> None:
    """Decode token ids to text: IDs as arguments; or one FILE, an encoded .npy (as `encode
    --output x.npy` writes) or ids as text; or stdin (nothing, or '-'), ids as text or a .npy.

    Writes exactly the bytes of the tokens, nothing added (no newline), so that `encode` then
    `decode` gives the input back byte for byte. Tokens that hold part of a UTF-8 character are
    written as those raw bytes too (not as U+FFFD). A .npy that is not whole (its encoding was
    stopped, or it was cut short) is refused, and nothing is written.

    \b
    Example:
      bpestore decode gpt2 15496 995
      bpestore encode gpt2 notes.txt | bpestore decode gpt2 > notes-again.txt
      bpestore decode gpt2 train.npy | head -c 1000
      bpestore encode gpt2 notes.txt -o - | bpestore decode gpt2 -
    """
    flow = _workflow()
    tokenizer = flow.load_tokenizer(db, ref)
    if not ids or (len(ids) == 1 and _names_a_file(ids[0])):
        data: bytes | None = None
        if not ids or ids[0] == "-":
            name, data = "standard input", sys.stdin.buffer.read()
            head = data
        else:
            name = ids[0]
            with open(name, "rb") as file:
                head = file.read(64)
        if flow.is_npy(head) or name.endswith(".npy"):
            array = flow.read_npy_ids(data if data is not None else name, name)
            decoded = flow.decode_array(tokenizer, array)
        else:
            if data is None:
                data = Path(name).read_bytes()
            decoded = tokenizer.decode_bytes(list(_parse_ids(data.decode("utf-8", errors="backslashreplace").split())))
    else:
        decoded = tokenizer.decode_bytes(list(_parse_ids(ids)))
    sys.stdout.flush()  # nothing may be buffered ahead of the bytes
    _write_all(sys.stdout.buffer, decoded)


def _names_a_file(word: str) -> bool:
    """Whether decode's one argument is a file ('-': stdin) rather than an id: not an integer,
    and '-', a .npy or an existing file (a mistyped id is still said to be one)."""
    try:
        int(word)
        return False
    except ValueError:
        return word == "-" or word.endswith(".npy") or os.path.isfile(word)


def _write_all(stream: BinaryIO, data: bytes) -> None:
    """Write all of ``data``: a binary stream may write only part of a big write (into a pipe
    whose reader left, a signal arriving) and say so only by the count it returns; the next
    write then fails with BrokenPipeError if the reader has gone."""
    view = memoryview(data)
    while view:
        view = view[stream.write(view) :]


# -- import / export -------------------------------------------------------------------------------


def _import(db: str, name: str, format: str, *paths: Path, **options: Any) -> None:
    ref, imported = _workflow().import_into_store(db, name, format, *paths, **options)
    for note in imported.notes:
        click.echo(note, err=True)
    model = imported.model
    specials = model.special_tokens
    # (Llama-3 has 256 special tokens: the first few, and how many, keep the line readable)
    shown = f"{specials}" if len(specials) <= 8 else "[" + ", ".join(map(repr, specials[:6])) + f", ... {len(specials)} in all]"
    click.echo(f"{ref}\tvocab_size={model.vocab_size}\tmerges={len(model.merges)}\tspecial_tokens={shown}")


class _ImportGroup(_Group):
    """``bpestore import``: one subcommand per registered format that says how it is imported
    (:class:`bpestore.formats.ImportCommand`), built from the registry, so that a new format is
    one module (no command-line code of its own)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in formats.names() if formats.get(name).importer is not None]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.list_commands(ctx):
            return None
        importer = formats.get(name).importer
        assert importer is not None  # (list_commands lists the formats that have one)
        return _import_command(name, importer)


def _import_command(format_name: str, spec: formats.ImportCommand) -> click.Command:
    """The ``bpestore import FORMAT`` subcommand that ``spec`` describes: its files, ``--name``,
    ``--quiet``, the format's own options and ``--db``."""

    def run(name: str, quiet: bool, warm_entries: int, lock_timeout: float | None, db: str, **values: Any) -> None:
        files = [values.pop(argument) for argument in spec.files]
        positional: list[Any] = []
        options: dict[str, Any] = {}
        for option in spec.options:
            value = values.pop(option.keyword)
            if option.multiple:
                value = tuple(value)
            if option.convert is not None:
                try:
                    value = option.convert(value)
                except ValueError as error:
                    raise click.BadParameter(str(error), param_hint=option.flag) from None
            if option.positional and value is not None:  # (left out: by keyword, the reader's default)
                positional.append(value)
            else:
                options[option.keyword] = value
        if spec.progress:
            options["progress"] = _show_progress(quiet)
        _import(
            db, name, format_name, *files, *positional, lock_timeout=lock_timeout, save_progress=_show_progress(quiet),
            warm_entries=warm_entries, **options,
        )

    # Decorators apply bottom-up: the options end up in the order of a hand-written command's.
    command = _db_option(run)
    command = _lock_timeout_option(command)
    command = _warm_entries_option("its vocabulary's tokens that are whole pre-tokens; `bpestore warm` remakes it from a corpus")(command)
    for option in reversed(spec.options):
        command = click.option(
            option.flag, option.keyword, multiple=option.multiple, required=option.required, metavar=option.metavar, help=option.help
        )(command)
    command = click.option("--name", required=True, help="Name to store it under.")(command)
    command = _quiet_option(command)
    for argument in reversed(spec.files):
        command = click.argument(argument, type=click.Path(path_type=Path))(command)
    return click.command(format_name, cls=_Command, help=spec.help)(command)


@main.group("import", cls=_ImportGroup)
def import_() -> None:
    """Import a tokenizer from GPT-2, Hugging Face or tiktoken files.

    Nothing is stored unless the whole input is understood.

    \b
    Example:
      bpestore import gpt2 vocab.json merges.txt --name gpt2 --special-token '<|endoftext|>'
      bpestore import hf tokenizer.json --name mine
      bpestore import tiktoken cl100k_base.tiktoken --name cl100k --pattern cl100k_base
    """


@main.command()
@click.argument("ref")
@click.option("--format", "export_format", type=click.Choice(formats.names()), required=True, help="The file format.")
@click.option(
    "--output", "-o", type=click.Path(), required=True,
    help="A directory for gpt2 (vocab.json + merges.txt), else a file; for hf, a directory (existing, or ending "
    "with /) gets a model folder that transformers loads.",
)
@_db_option
def export(ref: str, export_format: str, output: str, db: str) -> None:
    """Export a tokenizer for another tool.

    \b
    Example:
      bpestore export ts@2 --format hf --output tokenizer.json
      bpestore export ts@2 --format hf --output ts-model/
      bpestore export ts@2 --format gpt2 --output ts-gpt2/
    """
    for note in _workflow().export_from_store(db, ref, export_format, output):
        click.echo(note, err=True)


# -- trim and remap --------------------------------------------------------------------------------


@main.command()
@click.argument("ref")
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--entries", type=click.IntRange(min=0, max=2**32 - 1), default=262_144, show_default=True, metavar="N",
    help="How many pre-tokens (the most frequent) the table holds; 0 removes it.",
)
@click.option("--remove", is_flag=True, help="Delete the tokenizer's warm table (it then loads with empty caches).")
@click.option("--workers", type=click.IntRange(min=1, max=MAX_INT64), default=None, help="Threads for counting FILES [default: CPUs].")
@_quiet_option
@_lock_timeout_option
@_db_option
def warm(
    ref: str, files: tuple[Path, ...], entries: int, remove: bool, workers: int | None, quiet: bool, lock_timeout: float | None, db: str
) -> None:
    """Make (or remake) the warm table of a stored tokenizer: the ids of the pre-tokens it will
    mostly meet, worked out now and stored with it, so that a loaded tokenizer (encode, from_db)
    looks them up instead of merging them. The ids are the same with or without it.

    The pre-tokens are the --entries most frequent of FILES (counted with the tokenizer's
    pattern and special tokens); without FILES, of the corpus it was trained on, or for an
    imported tokenizer, its vocabulary's tokens that are whole pre-tokens (what `import` stores;
    none for a tiktoken-style tokenizer, which finds those in one lookup already: give it FILES).
    Prints one line: the tokenizer and what its table holds.

    \b
    Example:
      bpestore warm gpt2 my_dataset.txt
      bpestore warm gpt2 --remove
    """
    with Store(db, create=False, lock_timeout=lock_timeout) as store:
        if remove:
            if files:
                _fail("--remove deletes the table: give no FILES with it")
            full_ref = store.info(ref).ref
            had = store.delete_warm(full_ref)
            click.echo(f"{full_ref}: warm table {'removed' if had else 'none to remove'}")
            return
        full_ref, table = store.warm(ref, list(files), entries=entries, workers=workers, progress=_show_progress(quiet))
        from_vocab = table is None and not files and entries and store.info(full_ref).corpus_path is None
    if table is None:
        why = "a table of its vocabulary would not speed this tokenizer: give FILES" if from_vocab else "no pre-tokens to keep"
        click.echo(f"{full_ref}: no warm table ({why})")
    else:
        click.echo(f"{full_ref}: warm table of {table.entries:,} pre-tokens from {table.source} ({_workflow().format_bytes(len(table.data))})")


def _map_out_option(what: str) -> Callable[[_F], _F]:
    """``--map-out PREFIX``, for the commands that write an id map (``what``: what it maps)."""

    def decorate(function: _F) -> _F:
        return click.option(
            "--map-out", "map_out", default=None, metavar="PREFIX",
            help=f"Write the id map ({what}) to PREFIX.npy and PREFIX.json [default: REF-to-NEWREF.idmap here].",
        )(function)

    return decorate


def _map_prefix(map_out: str | None, ref: str) -> Callable[[str], str]:
    """Where the id map of a tokenizer derived from ``ref`` goes, given the new ref: ``--map-out``,
    or ``REF-to-NEWREF.idmap`` in the current directory."""
    return lambda new_ref: map_out if map_out is not None else f"{ref}-to-{new_ref}.idmap"


@main.command()
@click.argument("ref")
@click.argument("corpus", metavar="[FILE]...", nargs=-1)
@click.option("--vocab-size", type=int, default=None, metavar="N", help="Keep the first merges: the tokenizer trained to N tokens.")
@click.option("--drop-unused", is_flag=True, help="Drop the tokens that encoding the FILEs never uses, and the merges only they need.")
@click.option("--name", default=None, help="Store the result under this name [default: REF's name, as its next version].")
@_map_out_option("old id -> new id, -1 for a dropped token")
@_lock_timeout_option
@_db_option
def trim(
    ref: str, corpus: tuple[str, ...], vocab_size: int | None, drop_unused: bool, name: str | None, map_out: str | None,
    lock_timeout: float | None, db: str,
) -> None:
    """Store a smaller version of a tokenizer, with the map of its ids.

    With --vocab-size N: keep the first merges (a tiktoken-style tokenizer: the lowest ranks),
    the 256 bytes and the special tokens, N tokens in all; exactly the tokenizer that training to
    N on the same corpus gives. With --drop-unused FILE...: drop the tokens that encoding the
    FILEs never uses and the merges only they need; the FILEs encode to the same tokens, and any
    text still encodes. The kept tokens keep their order (new ids are the old ones, compacted);
    the id map (NumPy .npy: new_id = map[old_id], -1 for dropped; and JSON) resizes a model's
    embedding matrix, and `bpestore remap` carries encoded datasets over. Prints the new ref.

    \b
    Example:
      bpestore trim ts@2 --vocab-size 8000 --map-out ts-8k
      bpestore trim ts@2 --drop-unused corpus/ --name ts-small
    """
    if (vocab_size is None) == (not drop_unused):
        raise click.UsageError("give either --vocab-size N or --drop-unused FILE...")
    if drop_unused and not corpus:
        raise click.UsageError("--drop-unused needs the corpus FILEs whose tokens to keep")
    if vocab_size is not None and corpus:
        raise click.UsageError(f"{corpus[0]}: files are read only with --drop-unused")

    with Store(db, create=False, lock_timeout=lock_timeout) as store:
        ref = store.info(ref).ref  # NAME means its latest version: the map's name says which
        prefix_for = _map_prefix(map_out, ref)
        if vocab_size is not None:
            new_ref, id_map = store.trim(ref, vocab_size, name, map_out=prefix_for)
        else:
            new_ref, id_map = store.drop_unused(ref, list(corpus), name, map_out=prefix_for)
    click.echo(new_ref)
    kept, dropped = id_map.new_vocab_size, len(id_map.dropped)
    click.echo(
        f"{new_ref}: {_number(kept)} tokens, {_number(dropped)} of {id_map.source}'s dropped; "
        f"id map: {prefix_for(new_ref)}.npy, {prefix_for(new_ref)}.json",
        err=True,
    )


@main.command("add-tokens")
@click.argument("ref")
@click.argument("tokens", metavar="TOKEN...", nargs=-1, required=True)
@click.option("--name", default=None, help="Store the result under this name [default: REF's name, as its next version].")
@_map_out_option("old id -> new id: the identity; and the added tokens' ids")
@_lock_timeout_option
@_db_option
def add_tokens(ref: str, tokens: tuple[str, ...], name: str | None, map_out: str | None, lock_timeout: float | None, db: str) -> None:
    """Store a version of a tokenizer with added tokens, and the map of its ids.

    An added token (Hugging Face's non-special added token) is a string that encoding always cuts
    out of the text and encodes as its own id, as it does special tokens (longest first, before
    pre-tokenization), but it is an ordinary token: `encode --ordinary` and `--allowed-special
    none` (Python's encode_ordinary, allowed_special=set()) still encode it whole. A
    token new to the vocab gets the next id after the largest, in the order given; one whose bytes
    are already a token keeps that token's id. The old ids do not change: the id map (written for
    the lineage and the tooling, as `trim` writes it) is the identity, and its JSON names each
    added token's id, the rows to add to a model's embedding matrix. Refused: an empty token, one
    given twice, a special token. Prints the new ref.

    
    Example:
      bpestore add-tokens ts@2 '<tool_call>' '</tool_call>' ' myword' --map-out ts-tools
    """

    with Store(db, create=False, lock_timeout=lock_timeout) as store:
        ref = store.info(ref).ref  # NAME means its latest version: the map's name says which
        prefix_for = _map_prefix(map_out, ref)
        new_ref, id_map = store.add_tokens(ref, list(tokens), name, map_out=prefix_for)
    click.echo(new_ref)
    for token in dict.fromkeys(tokens):
        token_id = id_map.added[token]
        if token_id < len(id_map.array) and id_map.array[token_id] >= 0:
            what = "already a token of the vocab: keeps its id, now encoded whole"
        else:
            what = "new"
        click.echo(f"{token_id}\t{_readable(token.encode('utf-8'))}\t{what}", err=True)
    click.echo(
        f"{new_ref}: {_number(id_map.new_vocab_size)} tokens, {_number(len(id_map.new_ids))} new; "
        f"id map: {prefix_for(new_ref)}.npy, {prefix_for(new_ref)}.json",
        err=True,
    )


@main.command()
@click.argument("id_map", metavar="MAP")
@click.argument("ids", metavar="IDS.npy")
@click.option("--output", "-o", required=True, metavar="OUT.npy", help="The remapped ids (uint16 if every new id fits, else uint32); - for standard output.")
def remap(id_map: str, ids: str, output: str) -> None:
    """Carry an encoded dataset over to a trimmed tokenizer's ids.

    MAP is the id map `bpestore trim` wrote (its .npy or .json); IDS.npy holds ids of the old
    tokenizer (as `bpestore encode --output` writes them). Through a trim's .json, a token the
    trim dropped becomes the ids of its parts, exactly what the trimmed tokenizer encodes the text
    to (OUT.npy is then longer). An id that the map does not have (outside it, or dropped with no
    parts: a --drop-unused map, or a .npy map) is an error naming the id and its position;
    OUT.npy appears only when complete.

    \b
    Example:
      bpestore remap ts@2-to-ts@3.idmap.json train.npy -o train-ts3.npy
    """
    count, dtype = _workflow().remap_file(id_map, ids, output)
    click.echo(f"wrote {_number(count)} ids to {'standard output' if output == '-' else output} ({dtype})", err=True)


# -- count -----------------------------------------------------------------------------------------


@main.group("count", cls=_Group)
def count_() -> None:
    """The corpora the store holds (their pre-token counts): list them, grow one by new files.

    \b
    Example:
      bpestore count list
      bpestore count add web@3 shards-2026-12/        # count only the new files, add them up
      bpestore train --stored-corpus 7 --name web --vocab-size 32000
    """


def _corpus_row(corpus: workflow.CorpusInfo) -> list[str]:
    return [
        str(corpus.id),
        _workflow().short_corpus_path(corpus.path, corpus.origin),
        _number(corpus.files) if corpus.files else "-",
        _number(corpus.size_bytes),
        _number(corpus.distinct_pretokens),
        _number(corpus.total_pretokens),
        " ".join(corpus.special_tokens) or "-",
        " ".join(corpus.tokenizers) or "-",
    ]


_CORPUS_HEADERS = ["ID", "CORPUS", "FILES", "BYTES", "DISTINCT", "PRE-TOKENS", "SPECIAL TOKENS", "TRAINED"]


@count_.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of objects.")
@_db_option
def count_list(as_json: bool, db: str) -> None:
    """List the stored corpora: where they came from, their files, their pre-token counts, the
    tokenizers trained on them.

    \b
    Example:
      bpestore count list
    """
    with Store(db, create=False) as store:
        corpora = store.corpora()
    if as_json:
        click.echo(json.dumps([corpus.to_dict() for corpus in corpora], indent=2, ensure_ascii=False))
    elif corpora:
        click.echo(_table([_corpus_row(corpus) for corpus in corpora], _CORPUS_HEADERS))
    else:
        click.echo(f"No corpora in {db} yet: training on files stores their counts.", err=True)


@count_.command("add")
@click.argument("corpus", metavar="CORPUS")
@click.argument("inputs", metavar="FILE...", nargs=-1, required=True)
@click.option("--workers", type=click.IntRange(min=1, max=MAX_INT64), default=None, help="Threads for counting [default: CPUs].")
@click.option("--json", "as_json", is_flag=True, help="Print the new corpus as JSON (as `count list --json`).")
@_quiet_option
@_lock_timeout_option
@_db_option
def count_add(corpus: str, inputs: tuple[str, ...], workers: int | None, as_json: bool, quiet: bool, lock_timeout: float | None, db: str) -> None:
    """Add FILEs to a stored CORPUS, counting only them.

    CORPUS is a corpus id (bpestore count list) or a tokenizer's ref (the corpus it was trained
    on). FILEs are files, directories or quoted globs, as for `train`; each is a document of its
    own. The corpus's counts plus the new files' are stored as a new corpus (printed: its id),
    in one transaction; training on it (`train --stored-corpus ID`, or `train` on all the files)
    gives exactly the merges of training on all the files together. A file whose content the
    corpus holds already is refused.

    \b
    Example:
      bpestore count add web@3 new-shards/
      bpestore count add 7 extra.txt.gz --json
    """
    with Store(db, create=False, lock_timeout=lock_timeout) as store:
        grown = store.add_to_corpus(corpus, list(inputs), workers=workers, progress=_show_progress(quiet))
    if as_json:
        click.echo(json.dumps(grown.to_dict(), indent=2, ensure_ascii=False))
    else:
        click.echo(grown.id)
    if not quiet:
        click.echo(_table([_corpus_row(grown)], _CORPUS_HEADERS), err=True)


# -- eval ------------------------------------------------------------------------------------------


class _EvalCommand(_Command):
    """``--corpus`` takes the files that follow it, up to the next option (``--corpus en.txt
    de.txt``), as ``diff --corpus`` does; REF... are the arguments before it. Each such file is
    handed to click as a ``--corpus`` of its own."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rewritten: list[str] = []
        in_corpus = False
        for index, arg in enumerate(args):
            if arg == "--":
                rewritten += args[index:]
                break
            if arg == "--corpus":
                in_corpus = True
                # the files follow; a bare --corpus (an option or nothing next) is click's error
                if index + 1 == len(args) or args[index + 1].startswith("-"):
                    rewritten.append(arg)
                continue
            if in_corpus and not arg.startswith("-"):
                rewritten += ["--corpus", arg]
                continue
            in_corpus = False
            rewritten.append(arg)
        return super().parse_args(ctx, rewritten)


_EVAL_COLUMNS = [
    # (header, key, format): integers with thousands separators, ratios with 3 decimals, shares in %
    ("BYTES", "bytes", "int"), ("CHARS", "characters", "int"), ("WORDS", "words", "int"), ("TOKENS", "tokens", "int"),
    ("BYTES/TOK", "bytes_per_token", "ratio"), ("CHARS/TOK", "characters_per_token", "ratio"), ("TOK/WORD", "fertility", "ratio"),
    ("RENYI", "renyi_efficiency", "ratio"), ("VOCAB USED", "vocab_used", "share"), ("1-TOKEN WORDS", "single_token_word_rate", "share"),
    ("PARITY", "parity", "ratio"),
]


def _eval_cell(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "int":
        return f"{value:,}"
    return f"{value:.2%}" if kind == "share" else f"{value:.3f}"


def _eval_table(result: workflow.EvaluationResult) -> str:
    """A row per file and tokenizer: names left-aligned, numbers right-aligned."""
    headers = ["FILE", "TOKENIZER", *(header for header, _, _ in _EVAL_COLUMNS)]
    rows = []
    for row in result.rows:
        data = row.to_dict()
        rows.append([data["file"], data["tokenizer"], *(_eval_cell(data[key], kind) for _, key, kind in _EVAL_COLUMNS)])
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows)]

    def line(cells: list[str]) -> str:
        return "  ".join(cell.ljust(width) if i < 2 else cell.rjust(width) for i, (cell, width) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(headers), "  ".join("-" * width for width in widths), *(line(cells) for cells in rows)])


@main.command("eval", cls=_EvalCommand)
@click.argument("refs", metavar="REF...", nargs=-1, required=True)
@click.option(
    "--corpus", "corpora", multiple=True, required=True, type=click.Path(path_type=Path), metavar="FILE [FILE...]",
    help="The UTF-8 text files to measure on (a file per language makes a per-language table).",
)
@click.option("--reference", default=None, metavar="FILE", help="The file parity is measured against (one of --corpus, by path or name) [default: the first].")
@click.option("--alpha", type=float, default=2.5, show_default=True, help="The order of the Renyi entropy of the Renyi efficiency.")
@click.option("--recompute", is_flag=True, help="Measure again, replacing the stored results, instead of reusing them.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the table.")
@click.option("--csv", "csv_path", default=None, type=click.Path(path_type=Path), metavar="PATH", help="Also write the rows as CSV to PATH (atomically).")
@_quiet_option
@_lock_timeout_option
@_db_option
def eval_(
    refs: tuple[str, ...], corpora: tuple[Path, ...], reference: str | None, alpha: float, recompute: bool, as_json: bool,
    csv_path: Path | None, quiet: bool, lock_timeout: float | None, db: str,
) -> None:
    """Measure tokenizers on text files: a row per file and tokenizer.

    For each REF and FILE: bytes, characters and tokens; bytes and characters per token; tokens
    per whitespace-separated word (fertility); Renyi efficiency (Zouhar et al. 2023, --alpha);
    the share of the vocabulary used; the share of words kept whole in one token; and parity,
    the file's tokens over the --reference file's (for parallel texts: the same content in each
    language); with several files, each tokenizer's lowest and highest parity and the Gini
    coefficient of its token counts over the files (0: every file costs as many tokens), on
    stderr. Results are kept in the store, by tokenizer and file content (sha256), and reused
    by the next eval of the same (--recompute measures again).

    \b
    Example:
      bpestore eval ts@1 ts@2 --corpus en.txt de.txt zh.txt --reference en.txt
      bpestore eval ts --corpus held_out/*.txt --json --csv eval.csv
    """
    from .errors import OutputError

    if csv_path is not None:  # an output that cannot be written stops the evaluation before it stores anything
        _workflow().check_output_path(csv_path)
    with Store(db, create=False, lock_timeout=lock_timeout) as store:
        result = store.evaluate(list(refs), list(corpora), reference=reference, alpha=alpha, recompute=recompute, progress=_show_progress(quiet))
    if csv_path is not None:
        try:
            result.write_csv(csv_path)
        except OutputError as error:  # (a full disk, say): the results are a cache, kept
            kept = "the results were stored (a later eval reads them back)" if result.stored else "the results were not stored"
            raise OutputError(error.errno, f"{error.strerror}; {kept}", str(error.filename)) from None
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        click.echo(_eval_table(result))
    if not quiet:
        if result.reused:
            click.echo(
                f"reused {result.reused} of {len(result.rows)} results stored by an earlier eval (same tokenizer and file content); "
                "--recompute measures again",
                err=True,
            )
        if not result.stored:
            click.echo(f"the store {db} cannot be written ({store.read_only_reason}): the results were not kept", err=True)
        click.echo(f"parity against {result.reference}; Renyi efficiency of order {result.alpha:g}", err=True)
        if len(result.files) > 1:
            for summary in result.parity_summaries:
                click.echo(summary.describe(), err=True)


# -- serve -----------------------------------------------------------------------------------------


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on; only loopback unless --allow-remote.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port (0: any free port).")
@click.option("--allow-remote", is_flag=True, help="Allow a non-loopback --host (the explorer has no login).")
@click.option("--corpus", "corpora", multiple=True, type=click.Path(path_type=Path), metavar="FILE", help="A text file the diff page measures on (repeatable).")
@_db_option
def serve(host: str, port: int, allow_remote: bool, corpora: tuple[Path, ...], db: str) -> None:
    """Explore the store in a web browser: tokenizers, vocab, merges, a playground, diffs, plots.

    The store is opened read-only; the server listens on loopback only unless --allow-remote.
    Needs the web extra: pip install 'bpestore[web]'. Stop it with Ctrl-C.

    \b
    Example:
      bpestore serve --port 8000      # then open http://127.0.0.1:8000/
    """
    try:
        from . import web
    except ImportError as error:  # pragma: no cover - depends on what is installed
        raise click.ClickException(f"the explorer needs Flask: pip install 'bpestore[web]' ({error})") from None
    server = web.make_server(db, host, port, allow_remote=allow_remote, corpora=corpora)
    shown_host = f"[{host}]" if ":" in host else host
    click.echo(f"bpestore explorer on http://{shown_host}:{server.server_port}/ (store {db}, read-only); Ctrl-C stops it", err=True)
    try:
        server.serve_forever()  # Werkzeug's ends its loop on Ctrl-C, swallowing the KeyboardInterrupt
    except KeyboardInterrupt:
        pass  # a Ctrl-C just outside the loop
    finally:
        _ctrl_c_handled()  # the way to stop it: its status is 0
        server.server_close()
        web.close_app(cast("Flask", server.app))  # (the app make_server made, which Werkzeug types as any WSGI app)
    click.echo("stopped", err=True)


# -- rm --------------------------------------------------------------------------------------------


@main.command()
@click.argument("ref")
@_lock_timeout_option
@_db_option
def rm(ref: str, lock_timeout: float | None, db: str) -> None:
    """Delete one tokenizer version (REF is NAME for the latest, or NAME@VERSION).

    Its corpus's pre-token counts are kept while another tokenizer still uses them.

    \b
    Example:
      bpestore rm ts@1
    """
    with Store(db, create=False, lock_timeout=lock_timeout) as store:
        click.echo(f"deleted {store.delete(ref)}")


def _end_of_loading() -> None:
    """Ctrl-C is a KeyboardInterrupt again (see :func:`_interrupted_while_loading`)."""
    if signal.getsignal(signal.SIGINT) is _interrupted_while_loading and _sigint_before_loading is not None:
        signal.signal(signal.SIGINT, _sigint_before_loading)


# This module is loaded. Run as the `bpestore` executable, loading goes on until main() runs: the
# script pip writes still compiles a regex between its import of main and its call (a Ctrl-C
# there was a traceback and death by SIGINT); _run ends it. Imported as a library, it ends here.
if Path(getattr(sys.modules.get("__main__"), "__file__", None) or "").name != "bpestore":
    _end_of_loading()

if __name__ == "__main__":  # pragma: no cover
    main()
