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

The planner (:mod:`.planner`) reads the state: a click while its kind still compiles
may run on JAX, and a Numba blur waits for its kind (:mod:`.router`).  JAX is not
warmed: it compiles per image shape, which a tiny image cannot foresee.  No Qt here:
the GUI starts it.  ``python -m napari_varblur.engine.warmup [global] [map]`` runs the
named warm-ups.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading

import numpy as np

from .. import backends
from ..core.spec import BlurSpec
from . import compiling
from .compiling import KINDS
from .router import blur

#: Set to 1 (or any non-empty value but 0) to skip the warm-up (the test suite does).
ENV = "NAPARI_VARBLUR_NO_WARMUP"

_LOG = logging.getLogger(__name__)


def warm_up(kinds: tuple[str, ...] = KINDS) -> None:
    """Compile (or load from Numba's cache) the kernels of ``kinds``, on this thread."""
    image = np.zeros((8, 8), np.float32)
    if "global" in kinds:
        blur(BlurSpec.from_args(image, 1.0, backend="numba"))
    if "map" in kinds:
        blur(BlurSpec.from_args(image, np.ones(image.shape, np.float32), backend="numba"))


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
    with compiling.STARTING:
        if not compiling.jobs:
            try:
                backends.load("numba")
            except backends.BackendUnavailableError:
                return False
            children = {kind: _spawn(kind) for kind in KINDS}
            if all(child is not None for child in children.values()):
                compiling.jobs.update(children)
            else:
                for child in children.values():
                    if child is not None:
                        child.kill()
                thread = threading.Thread(target=_quietly, name="napari-varblur-warm-up",
                                          daemon=True)  # fmt: skip
                thread.start()
                compiling.jobs.update(dict.fromkeys(KINDS, thread))
        return True


def _spawn(kind: str) -> subprocess.Popen | None:
    """``python -m napari_varblur.engine.warmup kind``, silent, in this environment (the same
    Numba cache); None if it cannot start, or in a frozen app (``sys.executable`` is
    the app itself there, not a Python)."""
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


def _quietly() -> None:
    """The warm-up, whose failure must not reach the user: the real call reports it."""
    try:
        warm_up()
    except Exception:
        _LOG.debug("napari-varblur warm-up failed", exc_info=True)


if __name__ == "__main__":
    warm_up(tuple(k for k in sys.argv[1:] if k in KINDS) or KINDS)
