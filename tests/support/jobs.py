"""Driver processes of the kill-and-restart tests: wait for a moment in a running job, then
SIGKILL it there.

A job is a ``subprocess.Popen`` started with ``start_new_session=True``: killing its
process group takes the driver's JVM and its Python workers with it, as a lost machine
would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], object], timeout: float = 600.0, what: str = "the stream"):
    """Poll ``condition`` until it holds; an ``AssertionError`` naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not done after {timeout:.0f} s")
        time.sleep(0.2)


def kill_when(
    job: subprocess.Popen,
    ready: Callable[[], T],
    log: Path,
    *,
    what: str,
    timeout: float = 600.0,
) -> T:
    """Wait until ``ready()`` gives something true while ``job`` runs, SIGKILL the job's
    process group, and return what ``ready()`` gave.

    The job ending first, or ``timeout`` seconds passing, fails the test with the end of
    ``log`` (the job's output); the job is killed in every case."""
    deadline = time.monotonic() + timeout
    try:
        while True:
            found = ready()
            if found:
                return found
            if job.poll() is not None:
                raise AssertionError(
                    f"the job ended (exit {job.returncode}) before {what}:\n{_tail(log)}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not reached after {timeout:.0f} s\n{_tail(log)}")
            time.sleep(0.1)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)


def _tail(log: Path, chars: int = 3000) -> str:
    return log.read_text(errors="replace")[-chars:] if log.exists() else f"({log}: no output)"
