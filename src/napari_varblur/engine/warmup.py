"""Compile the common Numba kernels in the background, before the first click.

A fresh install compiles a kernel on its first call (5-8 s each on 2 cores); napari's
first blur would look frozen that long.  The plugin's blur widgets call
:func:`start_warm_up` when they are created: two child processes blur a tiny image,
one with a float32 global sigma (the widget's default) and one with a float32 sigma
map, and so store those kernels in Numba's disk cache, at the same time on two cores,
without taking napari's GIL.  A Numba blur of either kind that comes meanwhile waits
for its child (:func:`wait_for`) and then loads the kernels (0.2 s) instead of
compiling them a second time; the widget can run a small first click on JAX instead
(:func:`.planner.route` with ``interim``), which compiles in a second or two.  Where
no child process can start, a daemon thread of this process compiles both.

The planner (:mod:`.planner`) reads the state: a click while its kind still compiles
may run on JAX, and a Numba blur waits for its kind (:mod:`.router`).  Outside napari,
a small first ``auto`` call whose kernels are in no cache starts its kind's child
itself (:func:`.compiling.start`) and runs on the NumPy reference meanwhile.  JAX is
not warmed: it compiles per image shape, which a tiny image cannot foresee.  No Qt
here: the GUI starts it.  ``python -m napari_varblur.engine.warmup [global] [map]``
runs the named warm-ups.
"""

from __future__ import annotations

import logging
import sys
import threading

import numpy as np

from .. import backends
from ..core.spec import BlurSpec
from . import compiling
from .compiling import ENV, KINDS
from .router import blur

__all__ = ["ENV", "start_warm_up", "warm_up"]

_LOG = logging.getLogger(__name__)


def warm_up(kinds: tuple[str, ...] = KINDS) -> None:
    """Compile (or load from Numba's cache) the kernels of ``kinds``, on this thread."""
    image = np.zeros((8, 8), np.float32)
    if "global" in kinds:
        blur(BlurSpec.from_args(image, 1.0, backend="numba"))
    if "map" in kinds:
        blur(BlurSpec.from_args(image, np.ones(image.shape, np.float32), backend="numba"))


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
                thread = threading.Thread(target=_quietly, args=(tuple(missing),),
                                          name="napari-varblur-warm-up", daemon=True)  # fmt: skip
                thread.start()
                compiling.jobs.update(dict.fromkeys(missing, thread))
        return True


def _quietly(kinds: tuple[str, ...] = KINDS) -> None:
    """The warm-up, whose failure must not reach the user: the real call reports it."""
    try:
        warm_up(kinds)
    except Exception:
        _LOG.debug("napari-varblur warm-up failed", exc_info=True)


if __name__ == "__main__":
    warm_up(tuple(k for k in sys.argv[1:] if k in KINDS) or KINDS)
