"""Which Numba kernels the widgets' warm-up (:mod:`.warmup`) is still compiling.

The state the planner and the router read, kept apart from the warm-up itself (which
runs blurs through the router): the planner may send a napari click to JAX while its
kind still compiles, and a Numba blur of that kind waits for it, then loads the kernels
from Numba's disk cache instead of compiling them a second time.
"""

from __future__ import annotations

import logging
import subprocess
import threading

#: The warm-ups: a float32 global blur, and a float32 sigma map (``crop``, two axes).
KINDS = ("global", "map")
#: How long a Numba blur waits at most for a warm-up to finish (s).
WAIT_S = 120.0

_LOG = logging.getLogger(__name__)
#: Held while the warm-up registers its jobs (one warm-up per process).
STARTING = threading.Lock()
#: kind -> the child process (or the thread) warming it, once started.
jobs: dict[str, subprocess.Popen | threading.Thread] = {}


def busy(kind: str | None = None) -> bool:
    """Whether the warm-up of ``kind`` (default: any) is still compiling."""
    return any(_running(job) for job in _selected(kind))


def wait_for(kind: str | None = None, timeout: float = WAIT_S) -> None:
    """Wait until the warm-up of ``kind`` (default: all) is done, at most ``timeout``
    s, so that this process loads its kernels rather than compiling them again.
    Returns at once when there is none, or it has finished."""
    for job in _selected(kind):
        try:
            job.wait(timeout) if isinstance(job, subprocess.Popen) else job.join(timeout)
        except subprocess.TimeoutExpired:
            _LOG.debug("napari-varblur warm-up %r still running after %s s", kind, timeout)


def _selected(kind: str | None) -> list:
    """The warm-up job of ``kind`` (none if it has none), or every job for None."""
    if kind is None:
        return list(jobs.values())
    return [jobs[kind]] if kind in jobs else []


def _running(job: subprocess.Popen | threading.Thread) -> bool:
    return job.poll() is None if isinstance(job, subprocess.Popen) else job.is_alive()
