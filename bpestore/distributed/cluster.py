"""Connecting to a Dask cluster, or starting a local one, set up for bpestore's work.

One place decides how bpestore talks to Dask, so that counting and encoding use the same cluster
settings. Dask's nannies set ``MALLOC_TRIM_THRESHOLD_=65536`` in every worker by default; counting
allocates and frees many small buffers, and that setting made glibc return memory to the system so
often that counting took 25–90% more CPU. A local cluster started here therefore leaves glibc's own
(adaptive) threshold alone. A remote cluster's workers were configured when they were started:
``check_worker_environment`` says how to set them up the same way.

Dask reports through the ``logging`` module (``distributed.*`` loggers): a worker that dies is a
warning of the scheduler and of its nanny, and its peers log tracebacks of the transfers it broke,
though its tasks are simply run again elsewhere. ``quiet`` holds those records back while the
cluster is used (:func:`quiet_dask_logs` in this process, ``silence_logs`` in a local cluster's
worker processes). A local cluster that cannot start (a worker process killed while it starts)
is one :class:`DaskUnavailableError` saying what happened, not Dask's exceptions.
"""

from __future__ import annotations

import logging
import re
import shlex
import sys
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BpestoreError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from distributed import Client

#: The environment variable Dask's nannies set before starting a worker process.
MALLOC_TRIM_VARIABLE = "MALLOC_TRIM_THRESHOLD_"

#: ``--dask local``: a cluster on this machine instead of a scheduler's address.
LOCAL = "local"


#: The loggers Dask reports through (``distributed`` sets up a handler on some of them).
DASK_LOGGERS = ("distributed", "tornado", "bokeh")

#: Above every record's level: what a quiet local cluster's workers silence their logs to.
SILENT = logging.CRITICAL + 1


class DaskUnavailableError(BpestoreError, ImportError):
    """``--dask`` was asked for but Dask is not installed, its scheduler cannot be reached, or a
    local cluster could not start."""


class _KeptRecords(logging.Handler):
    """Keeps the records it is handed."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class _DropAll(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


@contextmanager
def quiet_dask_logs() -> Iterator[None]:
    """No Dask log record from this process is printed while the block runs: no warning that a
    worker was lost, no traceback of a broken transfer. Every handler of a Dask logger
    (``distributed`` gives some their own, ``distributed.client`` for one) drops them, and the
    top loggers pass none up to the root logger's; restored after. Handlers are kept, not
    replaced, so that Dask's own ``silence_logs`` still finds them."""
    drop = _DropAll()
    tops = [logging.getLogger(name) for name in DASK_LOGGERS]
    loggers = tops + [
        logger
        for name, logger in list(logging.root.manager.loggerDict.items())
        if isinstance(logger, logging.Logger) and name.split(".")[0] in DASK_LOGGERS and logger.handlers
    ]
    handlers = list(dict.fromkeys(handler for logger in loggers for handler in logger.handlers))
    propagate = [(logger, logger.propagate) for logger in tops]
    for handler in handlers:
        handler.addFilter(drop)
    for logger, _ in propagate:
        logger.propagate = False
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(drop)
        for logger, value in propagate:
            logger.propagate = value


@contextmanager
def _kept_dask_records() -> Iterator[list[logging.LogRecord]]:
    """The records of Dask's loggers below ``distributed`` while the block runs, at the levels
    those loggers let through (a nanny's INFO that its worker process died, say)."""
    kept = _KeptRecords()
    logger = logging.getLogger("distributed")
    logger.addHandler(kept)
    try:
        yield kept.records
    finally:
        logger.removeHandler(kept)


def import_distributed() -> Any:
    """The ``distributed`` module, or one clear error naming the extra to install."""
    try:
        import distributed
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise DaskUnavailableError(
            "Dask is not installed: pip install 'bpestore[dask]' (dask[distributed])"
        ) from error
    return distributed


def _pre_spawn_environment_without_malloc_trim() -> dict[str, Any]:
    import dask

    environment = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {})
    environment.pop(MALLOC_TRIM_VARIABLE, None)
    return environment


@contextmanager
def dask_client(
    address: str, *, n_workers: int | None = None, threads_per_worker: int = 1, quiet: bool = False
) -> Iterator["Client"]:
    """A Dask client for ``address`` (a scheduler such as ``tcp://host:8786``), or for a new local
    cluster when ``address`` is ``"local"``; the local cluster is closed on exit.

    A local cluster runs one process per worker (``n_workers``, default: the CPUs this process may
    use) with one thread each: the engine releases the GIL, but one thread per process keeps each
    worker's memory its own. DaskUnavailableError if it cannot start. ``quiet``: Dask's log
    records (a lost worker's warnings and tracebacks) are kept off stderr, in this process and in
    a local cluster's workers.

    >>> with dask_client("local", n_workers=2) as client:   # doctest: +SKIP
    ...     client.submit(sum, [1, 2]).result()
    3
    """
    distributed = import_distributed()
    with ExitStack() as stack:
        if quiet:
            stack.enter_context(quiet_dask_logs())
        if address == LOCAL:
            cluster = stack.enter_context(_local_cluster(n_workers or _default_workers(), threads_per_worker, quiet))
            client = stack.enter_context(distributed.Client(cluster))
            yield client
            return
        try:
            client = distributed.Client(address, timeout="20s")
        except (OSError, TimeoutError) as error:
            raise DaskUnavailableError(f"cannot reach the Dask scheduler at {address}: {error}") from error
        with client:
            check_worker_environment(client)
            yield client


def _default_workers() -> int:
    from ..workers import default_workers

    return default_workers()


@contextmanager
def _local_cluster(n_workers: int, threads_per_worker: int, quiet: bool) -> Iterator[Any]:
    # (for the cluster's whole life: a nanny restarts workers)
    with _ctrl_c_kept_from_workers(), _ctrl_c_mutes_dask():
        with _started_local_cluster(n_workers, threads_per_worker, quiet) as cluster:
            yield cluster


@contextmanager
def _ctrl_c_mutes_dask() -> Iterator[None]:
    """Ctrl-C while a local cluster runs is this process's one line and exit status 130: at the
    signal, before anything else, every log record and every "exception ignored" report is
    muted, so that Dask's threads, which log the connections the interruption breaks (from
    before this process's own message to after it, at exit), add nothing."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupted(signum: int, frame: object) -> None:
        logging.disable(logging.CRITICAL)
        sys.unraisablehook = lambda unraisable: None
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def _started_local_cluster(n_workers: int, threads_per_worker: int, quiet: bool) -> Iterator[Any]:
    """A LocalCluster for bpestore's work, closed on exit. Dask's records while it starts are held
    back: if it fails, they say why (a nanny logs how its worker process died) in one
    DaskUnavailableError; if it starts, its warnings are printed after all (unless ``quiet``)."""
    distributed = import_distributed()
    import dask

    environment = _pre_spawn_environment_without_malloc_trim()
    settings = {
        "distributed.nanny.pre-spawn-environ": environment,
        # (see that module; after any the user configured)
        "distributed.worker.preload": [*dask.config.get("distributed.worker.preload", default=[]), "bpestore.distributed.quiet_worker"],
    }
    with quiet_dask_logs(), _kept_dask_records() as records, dask.config.set(settings):
        try:
            cluster = distributed.LocalCluster(
                n_workers=n_workers,
                threads_per_worker=threads_per_worker,
                processes=True,
                dashboard_address=None,
                # No dashboard, and its HTTP server (/health, /metrics) on any free port, not on
                # 8787: another cluster there would be a multi-line UserWarning on the terminal.
                scheduler_kwargs={"dashboard_address": ":0"},
                silence_logs=SILENT if quiet else logging.WARNING,  # the workers', and this process's handlers
            )
        except Exception as error:
            raise DaskUnavailableError(f"the local Dask cluster could not start: {_why_not_started(error, records)}") from error
        except BaseException:  # (Ctrl-C while it starts: close what had started, quietly)
            _close_started_clusters()
            raise
    for record in records:  # the start's warnings after all (dropped still, if quiet)
        if record.levelno >= logging.WARNING:
            logging.getLogger(record.name).handle(record)
    try:
        yield cluster
    finally:
        cluster.close()


@contextmanager
def _ctrl_c_kept_from_workers() -> Iterator[None]:
    """Worker processes started meanwhile ignore SIGINT. Ctrl-C at a terminal goes to the whole
    process group: this process stops the work and closes the cluster (one line, exit 130), and
    the workers, which would each print a KeyboardInterrupt traceback (from wherever their start
    had got to), are left to it. They are started through a two-line shell script that sets
    SIGINT to be ignored and then runs Python: an ignored signal stays ignored across exec, and
    Python installs no KeyboardInterrupt handler for a SIGINT ignored at its start. (A blocked
    signal mask is not enough: the spawned child's mask is reset.) This process keeps its own
    handler throughout."""
    import atexit
    import multiprocessing.spawn as spawn
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="bpestore-workers-")
    script = Path(folder) / "python"
    script.write_text(f"#!/bin/sh\ntrap '' INT\nexec {shlex.quote(sys.executable)} \"$@\"\n", encoding="utf-8")
    script.chmod(0o700)
    original = spawn.get_executable()
    spawn.set_executable(str(script))
    try:
        yield
    finally:
        spawn.set_executable(original)
        # (removed at exit, not now: a start cut short by Ctrl-C may still be spawning a worker
        # through the script, and the shell would print that it cannot open it)
        atexit.register(shutil.rmtree, folder, True)


def _close_started_clusters() -> None:
    """Closes the local clusters a start left half made (Ctrl-C inside ``LocalCluster()``), their
    workers with them, saying nothing: Dask would otherwise try at exit and print a traceback."""
    from distributed.deploy.spec import SpecCluster

    for cluster in list(SpecCluster._instances):
        try:
            with warnings.catch_warnings(), _quiet_stderr():
                warnings.simplefilter("ignore")
                cluster.close(timeout=5)
        except BaseException:  # noqa: BLE001, S110  (already interrupted: nothing more to say)
            pass


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    import contextlib
    import io

    with contextlib.redirect_stderr(io.StringIO()):
        previous = logging.root.manager.disable
        logging.disable(logging.CRITICAL)
        try:
            yield
        finally:
            logging.disable(previous)


#: How a nanny logs its worker process's end (distributed.nanny.WorkerProcess._death_message).
_DEATH = re.compile(r"Worker process \d+ (was killed by|exited with)")


def _why_not_started(error: BaseException, records: list[logging.LogRecord]) -> str:
    """What stopped a local cluster from starting, in a few words: the innermost exception that
    says more than Dask's own RuntimeErrors ("Nanny failed to start", "Cluster failed to start:
    ...") do (a worker's error, re-raised here), else the death of a worker process as its nanny
    logged it."""
    reasons: list[str] = []
    nanny = False
    cause: BaseException | None = error
    while cause is not None and len(reasons) < 20:
        text = " ".join(str(cause).split())
        if type(cause) is RuntimeError and "failed to start" in text:
            nanny = True
        elif text and not isinstance(cause, AssertionError):  # Dask asserts its states: no news for a user
            reasons.append(text if type(cause) is RuntimeError else f"{type(cause).__name__}: {text}")
        cause = cause.__cause__ or cause.__context__
    if reasons:
        return f"a worker process failed to start ({reasons[-1]})" if nanny else reasons[-1]
    deaths = [message for record in records if _DEATH.match(message := record.getMessage())]
    if deaths:
        return f"a worker process died ({deaths[0]})"
    return "a worker process died or failed while starting" if nanny else type(error).__name__


def check_worker_environment(client: "Client") -> dict[str, str | None]:
    """Each worker's ``MALLOC_TRIM_THRESHOLD_``; warns when a worker runs with Dask's small default.

    Workers of a remote cluster get their environment when they start: start them with a Dask
    config file that sets ``distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_: null``
    (README, "When one machine is not enough"). An environment variable
    ``DASK_DISTRIBUTED__NANNY__...`` does not work: Dask lower-cases its keys, so it would set a
    variable glibc never reads.
    """
    import os

    values: dict[str, str | None] = client.run(lambda: os.environ.get(MALLOC_TRIM_VARIABLE))
    small = sorted(worker for worker, value in values.items() if value is not None and value.isdigit() and int(value) < 1 << 20)
    if small:
        warnings.warn(
            f"{len(small)} Dask worker(s) run with {MALLOC_TRIM_VARIABLE}="
            f"{values[small[0]]}, which costs counting 25-90% more CPU; start them with a larger value "
            "(see README, 'When one machine is not enough')",
            RuntimeWarning,
            stacklevel=2,
        )
    return values
