"""Loaded by each worker of a local cluster as it starts (Dask's ``distributed.worker.preload``):
the records a worker makes while a Ctrl-C closes the cluster (its comms closing, its tasks
cancelled) are no news to the user, whose terminal shows the client's one line."""

from __future__ import annotations

import logging


def dask_setup(worker: object) -> None:
    """Dask's preload hook: quiets the worker's records below warnings, and its cancelled tasks."""
    logging.getLogger("distributed.core").setLevel(logging.WARNING)
    logging.getLogger("distributed.worker.state_machine").setLevel(logging.ERROR)
