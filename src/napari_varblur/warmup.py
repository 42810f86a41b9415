"""Compile the common Numba kernels in the background, before the first click.

A fresh install compiles a kernel on its first call (7-9 s each on 2 cores); napari's
first blur would look frozen that long.  The plugin's blur widgets call
:func:`start_warm_up` when they are created, and two compiles run at once while the
user sets up the call: a daemon thread blurs a tiny image with a float32 global sigma
(the widget's default), and a child process blurs one with a float32 sigma map, which
stores those kernels in Numba's disk cache.  Numba compiles one kernel at a time in a
process (under a lock, mostly holding the GIL), so the child uses the second core and
leaves napari's own thread alone; a map blur that comes while the child still
compiles waits for it (:func:`wait_for`), then loads the kernels (0.2 s) instead of
compiling them a second time.

Numba compiles under one process-wide lock and a dispatcher looks for an existing
compile inside it, so a click during the thread's warm-up waits for the kernel being
compiled and then reuses it: never a second compile, never a half-built one.  JAX is
not warmed: it compiles per image shape, which a tiny image cannot foresee (and its
first call compiles in about a second).  No Qt here: the GUI calls this, not the
reverse.  ``python -m napari_varblur.warmup [global] [map]`` runs the named warm-ups.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading

import numpy as np

#: Set to 1 (or any non-empty value but 0) to skip the warm-up (the test suite does).
ENV = "NAPARI_VARBLUR_NO_WARMUP"
#: The warm-ups: a float32 global blur, and a float32 sigma map (``crop``, two axes).
KINDS = ("global", "map")
#: How long a map blur waits at most for the child to fill the cache (s).
WAIT_S = 120.0

_LOG = logging.getLogger(__name__)
_START = threading.Lock()
_thread: threading.Thread | None = None
_children: dict[str, subprocess.Popen] = {}


def warm_up(kinds: tuple[str, ...] = KINDS) -> None:
    """Compile (or load from Numba's cache) the kernels of ``kinds``, on this thread."""
    from .adapters.numpy_api import gaussian_blur

    image = np.zeros((8, 8), np.float32)
    if "global" in kinds:
        gaussian_blur(image, 1.0, backend="numba")
    if "map" in kinds:
        gaussian_blur(image, np.ones(image.shape, np.float32), backend="numba")


def start_warm_up() -> threading.Thread | None:
    """Start the warm-up once per process: the map kernels in a child process, the
    global blur's on a daemon thread (all of it there if no child can start).

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
            child = _spawn("map")
            if child is not None:
                _children["map"] = child
            kinds = ("global",) if child is not None else KINDS
            _thread = threading.Thread(target=_quietly, args=(kinds,),
                                       name="napari-varblur-warm-up", daemon=True)  # fmt: skip
            _thread.start()
        return _thread


def busy() -> bool:
    """Whether the warm-up is still compiling (its thread or its child)."""
    thread_busy = _thread is not None and _thread.is_alive()
    return thread_busy or any(child.poll() is None for child in _children.values())


def wait_for(kind: str, timeout: float = WAIT_S) -> None:
    """Wait until the child compiling ``kind`` is done (at most ``timeout`` s), so
    that this process loads its kernels rather than compiling them again.  Returns at
    once when there is no such child, or it has finished."""
    child = _children.get(kind)
    if child is None:
        return
    try:
        child.wait(timeout)
    except subprocess.TimeoutExpired:
        _LOG.debug("napari-varblur warm-up %r still running after %s s", kind, timeout)


def _spawn(kind: str) -> subprocess.Popen | None:
    """``python -m napari_varblur.warmup kind``, silent, in this environment (the same
    Numba cache); None if it cannot start."""
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "napari_varblur.warmup", kind],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        _LOG.debug("napari-varblur warm-up: no child process", exc_info=True)
        return None


def _quietly(kinds: tuple[str, ...]) -> None:
    """The warm-up, whose failure must not reach the user: the real call reports it."""
    try:
        warm_up(kinds)
    except Exception:
        _LOG.debug("napari-varblur warm-up failed", exc_info=True)


if __name__ == "__main__":
    warm_up(tuple(k for k in sys.argv[1:] if k in KINDS) or KINDS)
