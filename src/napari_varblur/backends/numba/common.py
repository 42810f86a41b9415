"""What every Numba kernel shares: the compiler's fast-math flags, C-contiguous
writeable arrays, and a lock for the threading layers that are not threadsafe."""

from __future__ import annotations

import contextlib
import threading

import numba
import numpy as np

# Only reassociation and FMA contraction are allowed to the compiler (so sums
# vectorise); NaN and inf keep their IEEE meaning.
FAST = {"reassoc", "contract"}


# ------------------------------------------------------------------- thread safety

_LOCK = threading.Lock()
#: Whether the active threading layer is threadsafe; unknown until the first launch.
_THREADSAFE: bool | None = None


@contextlib.contextmanager
def parallel_section():
    """Serialise parallel kernel launches unless the threading layer is threadsafe
    (``tbb`` and ``omp`` are; ``workqueue``, Numba's fallback, aborts the process when
    two threads launch at once)."""
    global _THREADSAFE
    if _THREADSAFE:
        yield
        return
    with _LOCK:
        yield
        if _THREADSAFE is None:
            _THREADSAFE = numba.threading_layer() != "workqueue"


def kernel_array(a: np.ndarray, dtype) -> np.ndarray:
    """C-contiguous and writeable (Numba compiles read-only arrays separately), copied
    only when it is neither."""
    out = np.ascontiguousarray(a, dtype=dtype)
    return out if out.flags.writeable else out.copy()
