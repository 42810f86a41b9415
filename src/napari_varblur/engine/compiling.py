"""Which Numba kernels a warm-up (:mod:`.warmup`) is still compiling, in a child process
or on a thread.

The state the planner and the router read, kept apart from the warm-up itself (which
runs blurs through the router): the planner may send a napari click to JAX, or a small
first ``auto`` call to the NumPy reference, while its kind still compiles, and a Numba
blur of that kind waits for it, then loads the kernels from Numba's disk cache instead
of compiling them a second time.  :func:`start` starts one kind's child process.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading

#: The warm-ups: a float32 global blur, a float32 sigma map (``crop``, two axes, the
#: exact gather), and the level bands of a float32 tolerance map.
KINDS = ("global", "map", "levels")
#: Set to 1 (or any non-empty value but 0) to skip every warm-up (the test suite does).
ENV = "NAPARI_VARBLUR_NO_WARMUP"
#: How long a Numba blur waits at most for a warm-up to finish (s).
WAIT_S = 120.0

_LOG = logging.getLogger(__name__)
#: Held while the warm-up registers its jobs (one warm-up per process).
STARTING = threading.Lock()
#: kind -> the child process (or the thread) warming it, once started.
jobs: dict[str, subprocess.Popen | threading.Thread] = {}


def allowed() -> bool:
    """Whether warm-ups may start (``NAPARI_VARBLUR_NO_WARMUP`` is not set)."""
    return os.environ.get(ENV, "") in ("", "0")


def start(kind: str) -> bool:
    """Start the child process that compiles ``kind``'s kernels into Numba's disk cache,
    once per process.

    Returns
    -------
    bool
        Whether that child is compiling now (started now or before); False when warm-ups
        are switched off, no child can start, or it has already finished.
    """
    if not allowed():
        return False
    with STARTING:
        if kind not in jobs:
            child = spawn(kind)
            if child is None:
                return False
            jobs[kind] = child
    return busy(kind)


def spawn(kind: str) -> subprocess.Popen | None:
    """``python -m napari_varblur.engine.warmup kind``, silent, in this environment (the
    same Numba cache); None if it cannot start, or in a frozen app (``sys.executable``
    is the app itself there, not a Python)."""
    if getattr(sys, "frozen", False) or not sys.executable:
        return None
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "napari_varblur.engine.warmup", kind],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except (OSError, ValueError):
        _LOG.debug("napari-varblur warm-up: no child process", exc_info=True)
        return None


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
