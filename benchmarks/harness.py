"""One measurement in one fresh subprocess.

The parent calls :func:`run_task`, which starts ``python benchmarks/harness.py TASK PARAMS_JSON``.
The child looks the task up in :mod:`registry`, lets it prepare (untimed: imports, reading inputs,
building tokenizers), times the one measured call, records peak memory right after it, lets the
task check its result (untimed), and writes one JSON object to stdout. Anything the tools print on
stdout is sent to stderr, so stdout holds only that object.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rss import TreePssSampler, cpu_seconds, maxrss_mb

HERE = Path(__file__).resolve().parent


class Skip(Exception):
    """Raised by a task that cannot run here (a tool or an API is missing); the message says why."""


@dataclass
class Job:
    """What a task prepared: ``run`` is the measured call; ``check`` (untimed) turns its result into
    facts to report (sizes, whether ids match, ...)."""

    run: Callable[[], Any]
    check: Callable[[Any], dict] = field(default=lambda result: {})


# ---------------------------------------------------------------- child side


def measure(job: Job) -> dict:
    cpu_before = cpu_seconds()
    sampler = TreePssSampler().start()
    start = time.perf_counter()
    result = job.run()
    seconds = time.perf_counter() - start
    tree_pss = sampler.stop()
    outcome = {"status": "ok", "seconds": seconds, "cpu_seconds": round(cpu_seconds() - cpu_before, 3)}
    outcome.update(maxrss_mb())
    outcome["tree_pss_peak_mb"] = tree_pss
    outcome["info"] = job.check(result)
    return outcome


def child_main(argv: list[str]) -> int:
    # ru_maxrss survives exec: a child starts with its parent's peak RSS as a floor. Reported, so
    # that a too-large floor (a parent that grew) shows; the parent keeps itself small.
    floor_mb = round(maxrss_mb()["rss_self_mb"], 1)
    task_name, params = argv[0], json.loads(argv[1])
    stdout = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever the tools print goes to stderr
    sys.stdout = sys.stderr
    try:
        import registry

        outcome = measure(registry.get_task(task_name)(params))
    except Skip as skip:
        outcome = {"status": "skipped", "reason": str(skip)}
    except Exception as error:  # report, do not crash the whole benchmark
        traceback.print_exc()
        outcome = {"status": "failed", "reason": f"{type(error).__name__}: {error}"}
    outcome["rss_floor_mb"] = floor_mb
    stdout.write(json.dumps(outcome) + "\n")
    stdout.flush()
    return 0


# ---------------------------------------------------------------- parent side


def run_task(task: str, params: dict, *, timeout: float | None = None, env: dict[str, str] | None = None) -> dict:
    """Run one measurement in a fresh interpreter; its outcome as a dict with ``status`` one of
    ok, skipped, failed or timeout."""
    command = [sys.executable, str(HERE / "harness.py"), task, json.dumps(params)]
    child_env = {**os.environ, **(env or {})}
    # A session of its own, so that a timeout can end the tool's worker processes too.
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env, start_new_session=True
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return {"status": "timeout", "reason": f"no result after {timeout:g} s"}
    done = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        return {"status": "failed", "reason": f"exit status {done.returncode}\n{tail}"}
    outcome = json.loads(lines[-1])
    if outcome["status"] == "failed":
        outcome["stderr_tail"] = "\n".join(done.stderr.strip().splitlines()[-15:])
    return outcome


if __name__ == "__main__":
    import harness  # run through the module, so that tasks raise the same Skip class caught here

    sys.exit(harness.child_main(sys.argv[1:]))
