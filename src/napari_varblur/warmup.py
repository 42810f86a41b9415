"""Compile the common Numba kernels in the background, before the first click.

A fresh install compiles a kernel on its first call (5-8 s each on 2 cores); napari's
first blur would look frozen that long.  The plugin's blur widgets call
:func:`start_warm_up` when they are created: two child processes blur a tiny image,
one with a float32 global sigma (the widget's default) and one with a float32 sigma
map, and so store those kernels in Numba's disk cache, at the same time on two cores,
without taking napari's GIL.  A Numba blur of either kind that comes meanwhile waits
for its child (:func:`wait_for`) and then loads the kernels (0.2 s) instead of
compiling them a second time; the widget can run a small first click on JAX instead
(:func:`interim_backend`), which compiles in a second or two.  Where no child process
can start, a daemon thread of this process compiles both.

JAX is not warmed: it compiles per image shape, which a tiny image cannot foresee.
No Qt here: the GUI calls this, not the reverse.  ``python -m napari_varblur.warmup
[global] [map]`` runs the named warm-ups.
"""

from __future__ import annotations

import logging
import math
import os
import subprocess
import sys
import threading
from collections.abc import Callable

import numpy as np

#: Set to 1 (or any non-empty value but 0) to skip the warm-up (the test suite does).
ENV = "NAPARI_VARBLUR_NO_WARMUP"
#: The warm-ups: a float32 global blur, and a float32 sigma map (``crop``, two axes).
KINDS = ("global", "map")
#: How long a Numba blur waits at most for a warm-up to finish (s).
WAIT_S = 120.0
#: The most window taps (pixels times taps per pixel) a first click runs on JAX while
#: Numba compiles: about two seconds of JAX on 2 CPU cores (its map blur ran 0.8-1.3e10
#: taps/s on 512²-1024² maps up to sigma 8), after its own compile of 1-2 s.
INTERIM_TAPS = 2e10

_LOG = logging.getLogger(__name__)
_START = threading.Lock()
#: kind -> the child process (or the thread) warming it, once started.
_jobs: dict[str, subprocess.Popen | threading.Thread] = {}


def warm_up(kinds: tuple[str, ...] = KINDS) -> None:
    """Compile (or load from Numba's cache) the kernels of ``kinds``, on this thread."""
    from .adapters.numpy_api import gaussian_blur

    image = np.zeros((8, 8), np.float32)
    if "global" in kinds:
        gaussian_blur(image, 1.0, backend="numba")
    if "map" in kinds:
        gaussian_blur(image, np.ones(image.shape, np.float32), backend="numba")


def start_warm_up() -> bool:
    """Start the warm-up once per process: each kind in a child process, or all on a
    daemon thread if no child can start.

    Returns
    -------
    bool
        Whether a warm-up was started (now or before); False when it is skipped:
        ``NAPARI_VARBLUR_NO_WARMUP`` is set, or Numba is not installed.
    """
    if os.environ.get(ENV, "") not in ("", "0"):
        return False
    with _START:
        if not _jobs:
            from . import backends

            try:
                backends.load("numba")
            except backends.BackendUnavailableError:
                return False
            children = {kind: _spawn(kind) for kind in KINDS}
            if all(child is not None for child in children.values()):
                _jobs.update(children)
            else:
                for child in children.values():
                    if child is not None:
                        child.kill()
                thread = threading.Thread(target=_quietly, name="napari-varblur-warm-up",
                                          daemon=True)  # fmt: skip
                thread.start()
                _jobs.update(dict.fromkeys(KINDS, thread))
        return True


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


def interim_backend(
    shape: tuple[int, ...], radii: Callable[[], tuple[int, ...]], is_map: bool
) -> str | None:
    """``"jax"`` for a blur that would wait for the warm-up on Numba but runs on JAX in
    a few seconds: its kind still compiling, JAX importable, and at most
    :data:`INTERIM_TAPS` window taps (``radii()``: the largest radius per blurred axis,
    asked only while the warm-up runs, as it may scan a whole map; a map sums the whole
    window, a global blur each axis).  Else None."""
    if not busy("map" if is_map else "global"):
        return None
    widths = [2 * r + 1 for r in radii()]
    taps = math.prod(shape) * (math.prod(widths) if is_map else sum(widths))
    if taps > INTERIM_TAPS:
        return None
    from . import backends

    try:
        backends.load("jax")
    except backends.BackendUnavailableError:
        return None
    return "jax"


def _selected(kind: str | None) -> list:
    """The warm-up job of ``kind`` (none if it has none), or every job for None."""
    if kind is None:
        return list(_jobs.values())
    return [_jobs[kind]] if kind in _jobs else []


def _running(job: subprocess.Popen | threading.Thread) -> bool:
    return job.poll() is None if isinstance(job, subprocess.Popen) else job.is_alive()


def _spawn(kind: str) -> subprocess.Popen | None:
    """``python -m napari_varblur.warmup kind``, silent, in this environment (the same
    Numba cache); None if it cannot start, or in a frozen app (``sys.executable`` is
    the app itself there, not a Python)."""
    if getattr(sys, "frozen", False) or not sys.executable:
        return None
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "napari_varblur.warmup", kind],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except (OSError, ValueError):
        _LOG.debug("napari-varblur warm-up: no child process", exc_info=True)
        return None


def _quietly() -> None:
    """The warm-up, whose failure must not reach the user: the real call reports it."""
    try:
        warm_up()
    except Exception:
        _LOG.debug("napari-varblur warm-up failed", exc_info=True)


if __name__ == "__main__":
    warm_up(tuple(k for k in sys.argv[1:] if k in KINDS) or KINDS)
