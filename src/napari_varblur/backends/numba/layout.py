"""Copies between an image's own layout and a kernel's working layout, tile by tile.

A band blur runs its last pass along the contiguous axis of a working layout whose axes
may be the image's in another order (:func:`napari_varblur.core.taps.working_layout`).
NumPy copies such a transposed view element by element along the output, striding
through the input a page at a time; here the copy walks square tiles, so every cache
line read or written is used whole (a 2048² float32 transpose into a fresh array:
~30 ms -> ~18 ms, of which ~6 ms is the copy and the rest the new pages' first touch).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .common import kernel_array, parallel_section

#: The side of a tile: 32 float32 rows of 32 values are 32 cache lines of 128 bytes.
_TILE = 32
#: Below this many values NumPy's copy is as fast.
_SMALL = 1 << 15


def contiguous(view: np.ndarray, dtype) -> np.ndarray:
    """A C-contiguous writeable array of ``dtype`` equal to ``view`` (any strides, up to
    4 axes), never ``view``'s own memory when it has to be copied."""
    dtype = np.dtype(dtype)
    fast = _fastest(view)
    if view.ndim > 4 or view.size < _SMALL or fast in (None, view.ndim - 1):
        return kernel_array(view, dtype)
    # Cast in the view's own memory order (a plain sweep), then reorder.
    source = view if view.dtype == dtype else view.astype(dtype, order="K")
    out = np.empty(view.shape, dtype)
    copy_into(out, source)
    return out


def copy_into(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` for arrays of one shape and dtype (up to 4 axes), one of them
    C-contiguous, the other with any strides: tile by tile where their fastest axes
    differ."""
    if src.ndim > 4 or src.size < _SMALL:
        np.copyto(dst, src)
        return
    pad = (1,) * (4 - src.ndim)
    s4, d4 = src.reshape(pad + src.shape), dst.reshape(pad + dst.shape)
    strided = s4 if dst.flags.c_contiguous else d4
    fast = _fastest(strided)
    if fast in (None, 3):
        np.copyto(dst, src)
        return
    # Put the strided side's fastest axis at 2: the tiles run over axes 2 and 3.
    s4, d4 = s4.swapaxes(fast, 2), d4.swapaxes(fast, 2)
    with parallel_section():
        _tiled(s4, d4, _TILE)


def _fastest(a: np.ndarray) -> int | None:
    """The axis with the smallest non-zero stride among those longer than 1."""
    axes = [i for i in range(a.ndim) if a.shape[i] > 1 and a.strides[i] != 0]
    return min(axes, key=lambda i: abs(a.strides[i])) if axes else None


@njit(parallel=True, cache=True, nogil=True)
def _tiled(src, dst, tile):  # pragma: no cover - jitted
    """``dst = src`` (4-D), in tiles of ``tile`` x ``tile`` over the last two axes."""
    nb, n1, n2, n3 = dst.shape
    t2 = (n2 + tile - 1) // tile
    for job in prange(nb * n1 * t2):
        b, i1, a2 = job // (n1 * t2), (job // t2) % n1, (job % t2) * tile
        e2 = min(a2 + tile, n2)
        for a3 in range(0, n3, tile):
            e3 = min(a3 + tile, n3)
            for i2 in range(a2, e2):
                for i3 in range(a3, e3):
                    dst[b, i1, i2, i3] = src[b, i1, i2, i3]
