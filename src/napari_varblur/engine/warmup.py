"""Compile the common Numba kernels in the background, before the first click.

A fresh install compiles a kernel on its first call (5-8 s each on 2 cores, 25 s for
a tolerance map's level bands); napari's first blur would look frozen that long.  The
plugin's blur widgets call :func:`start_warm_up` when they are created: child
processes blur a tiny image, one with a float32 global sigma (the widget's default),
one with a float32 sigma map, and, at a lower priority, one with a float32 tolerance
map on the level bands, and so store those kernels in Numba's disk cache without
taking napari's GIL.  A Numba blur of a kind that comes meanwhile waits for its child
(:func:`wait_for`) and then loads the kernels (0.2 s) instead of compiling them a
second time; the widget can run a small first click on JAX instead
(:func:`.planner.route` with ``interim``), which compiles in a second or two.  Where
no child process can start, a daemon thread of this process compiles the first two.

The planner (:mod:`.planner`) reads the state: a click while its kind still compiles
may run on JAX, and a Numba blur waits for its kind (:mod:`.router`).  Outside napari,
a small first ``auto`` call whose kernels are in no cache starts its kind's child
itself (:func:`.compiling.start`) and runs on the NumPy reference meanwhile.  JAX is
not warmed: it compiles per image shape, which a tiny image cannot foresee.  No Qt
here: the GUI starts it.  ``python -m napari_varblur.engine.warmup [global] [map]
[levels]`` runs the named warm-ups.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

import numpy as np

from .. import backends
from ..core.level_plan import plan_levels
from ..core.spec import BlurSpec
from . import compiling
from .compiling import ENV, KINDS
from .router import blur

__all__ = ["ENV", "start_warm_up", "warm_up"]

_LOG = logging.getLogger(__name__)
#: The kinds a daemon thread warms where no child process can start.
THREAD_KINDS = ("global", "map")


def warm_up(kinds: tuple[str, ...] = KINDS) -> None:
    """Compile (or load from Numba's cache) the kernels of ``kinds``, on this thread."""
    image = np.zeros((8, 8), np.float32)
    if "global" in kinds:
        blur(BlurSpec.from_args(image, 1.0, backend="numba"))
    if "map" in kinds:
        blur(BlurSpec.from_args(image, np.ones(image.shape, np.float32), backend="numba"))
    if "levels" in kinds:
        _warm_bands()


def _warm_bands() -> None:
    """The level bands of a float32 tolerance map, in 3-D (the bookkeeping of the first
    pass's slot compiles there only; a 2-D map runs the same kernels), run directly:
    at this size the planner would choose the exact gather."""
    ramp = np.linspace(0.5, 2.0, 12, dtype=np.float32)
    sigma = np.broadcast_to(ramp, (6, 8, 12)).copy()
    spec = BlurSpec.from_args(np.zeros(sigma.shape, np.float32), sigma, backend="numba",
                              tolerance=1e-3)  # fmt: skip
    bands = backends.load("numba").bands
    plan = bands.plan(spec, plan_levels(spec).levels[0])
    if plan is not None:
        bands.blur(spec, plan)


def start_warm_up() -> bool:
    """Start the widgets' warm-ups once per process: each kind in a child process, or
    all on a daemon thread if no child can start.  A kind that a first ``auto`` call
    already started (:func:`.compiling.start`) is not started again.

    Returns
    -------
    bool
        Whether a warm-up was started (now or before); False when it is skipped:
        ``NAPARI_VARBLUR_NO_WARMUP`` is set, or Numba is not installed.
    """
    if not compiling.allowed():
        return False
    with compiling.STARTING:
        missing = [kind for kind in KINDS if kind not in compiling.jobs]
        if missing:
            try:
                backends.load("numba")
            except backends.BackendUnavailableError:
                return False
            children = {kind: compiling.spawn(kind) for kind in missing}
            if all(child is not None for child in children.values()):
                compiling.jobs.update(children)
            else:
                for child in children.values():
                    if child is not None:
                        child.kill()
                # Not the level bands: 25 s of compiling that would hold napari's GIL.
                kinds = tuple(kind for kind in missing if kind in THREAD_KINDS)
                if kinds:
                    thread = threading.Thread(
                        target=_quietly, args=(kinds,), name="napari-varblur-warm-up", daemon=True
                    )
                    thread.start()
                    compiling.jobs.update(dict.fromkeys(kinds, thread))
        return True


def _quietly(kinds: tuple[str, ...] = KINDS) -> None:
    """The warm-up, whose failure must not reach the user: the real call reports it."""
    try:
        warm_up(kinds)
    except Exception:
        _LOG.debug("napari-varblur warm-up failed", exc_info=True)


if __name__ == "__main__":
    named = tuple(k for k in sys.argv[1:] if k in KINDS) or KINDS
    if named == ("levels",) and hasattr(os, "nice"):
        os.nice(10)  # after the first click's kinds: they compile first on a busy machine
    warm_up(named)
