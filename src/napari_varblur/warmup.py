"""Compile the common Numba kernels in the background, before the first click.

A fresh install compiles a kernel on its first call (8-13 s on 2 cores); napari's first
blur would look frozen that long.  The plugin's blur widgets call
:func:`start_warm_up` when they are created: a daemon thread blurs a tiny image with a
float32 global sigma and a float32 sigma map (the widget's defaults), which compiles
those kernels (or loads them from Numba's disk cache) while the user sets up the call.

Numba compiles under one process-wide lock and a dispatcher looks for an existing
compile inside it, so a click during the warm-up waits for the kernel being compiled
and then reuses it: never a second compile, never a half-built one.  JAX is not
warmed: it compiles per image shape, which a tiny image cannot foresee (and its first
call compiles in about a second).  No Qt here: the GUI calls this, not the reverse.
"""

from __future__ import annotations

import logging
import os
import threading

import numpy as np

#: Set to 1 (or any non-empty value but 0) to skip the warm-up (the test suite does).
ENV = "NAPARI_VARBLUR_NO_WARMUP"

_LOG = logging.getLogger(__name__)
_START = threading.Lock()
_thread: threading.Thread | None = None


def warm_up() -> None:
    """Compile the kernels of a float32 global blur and of a float32 sigma map
    (``crop`` mode, two blurred axes), on this thread."""
    from .adapters.numpy_api import gaussian_blur

    image = np.zeros((8, 8), np.float32)
    gaussian_blur(image, 1.0, backend="numba")
    gaussian_blur(image, np.ones(image.shape, np.float32), backend="numba")


def start_warm_up() -> threading.Thread | None:
    """Run :func:`warm_up` on a daemon thread, once per process.

    Returns
    -------
    threading.Thread or None
        The warm-up thread (the same one on every call), or ``None`` when it is
        skipped: ``NAPARI_VARBLUR_NO_WARMUP`` is set, or Numba is not installed.
    """
    global _thread
    if os.environ.get(ENV, "") not in ("", "0"):
        return None
    with _START:
        if _thread is None:
            from . import backends

            try:
                backends.load("numba")
            except backends.BackendUnavailableError:
                return None
            _thread = threading.Thread(target=_quietly, name="napari-varblur-warm-up",
                                       daemon=True)  # fmt: skip
            _thread.start()
        return _thread


def _quietly() -> None:
    """The warm-up, whose failure must not reach the user: the real call reports it."""
    try:
        warm_up()
    except Exception:
        _LOG.debug("napari-varblur warm-up failed", exc_info=True)
