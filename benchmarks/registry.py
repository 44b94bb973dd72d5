"""Names of the measurements (``section:tool``) -> task functions ``params -> Job``.

A task prepares everything that is not measured (imports, reading the input, building the
tokenizer) and returns a :class:`harness.Job`. Tool libraries are imported inside the tasks, so a
child process only loads the tool it measures.
"""

from __future__ import annotations

from collections.abc import Callable

TASKS: dict[str, Callable] = {}


def task(name: str):
    def register(function: Callable) -> Callable:
        TASKS[name] = function
        return function

    return register


def get_task(name: str) -> Callable:
    import encode_tasks  # noqa: F401  (they register themselves)
    import npy_tasks  # noqa: F401
    import peer_tasks  # noqa: F401
    import train_tasks  # noqa: F401

    return TASKS[name]
