"""Copies between an image's own layout and a kernel's working layout, tile by tile.

A band blur runs its last pass along the contiguous axis of a working layout whose axes
may be the image's in another order (:func:`napari_varblur.core.taps.working_layout`).
NumPy copies such a transposed view element by element along the output, striding
through the input a page at a time; here the copy walks square tiles, each turned in a
small buffer, so every cache line read or written is used whole (a 2048² float32
transpose into an array already touched: NumPy ~24 ms, straight tiles 6-7.7 ms, turned
tiles 2.4-3.6 ms on 2 cores).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .common import kernel_array, parallel_section

#: The side of a tile: its buffer, 64 rows of 64 float32 values (16 KiB), stays in L1.
#: (2048² float32 transpose, 2 threads: 32 -> 64: 4.3 -> 3.1 ms; 128: 2.8-3.0 ms.)
_TILE = 64
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
    # Put the strided side's fastest axis at 2: the tiles run over axes 2 and 3.  The
    # source then reads along 2 and the destination writes along 3 (swapped where the
    # destination is the strided side).
    s4, d4 = s4.swapaxes(fast, 2), d4.swapaxes(fast, 2)
    if not dst.flags.c_contiguous:
        s4, d4 = s4.swapaxes(2, 3), d4.swapaxes(2, 3)
    flat, steps = _flat(s4)
    with parallel_section():
        _tiled(flat, steps, d4, _TILE)


def _fastest(a: np.ndarray) -> int | None:
    """The axis with the smallest non-zero stride among those longer than 1."""
    axes = [i for i in range(a.ndim) if a.shape[i] > 1 and a.strides[i] != 0]
    return min(axes, key=lambda i: abs(a.strides[i])) if axes else None


def _flat(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The memory of ``a`` (4-D, read along axis 2) as a flat read-only array and each
    axis's step in it: ``a[i] == flat[i @ steps]``.  ``a`` itself where it fills a
    block of memory with step 1 along axis 2 (an axis order of a contiguous array),
    else a copy in its own order (a slice, a broadcast map)."""
    item = a.itemsize
    span = sum((n - 1) * abs(st) for n, st in zip(a.shape, a.strides, strict=True))
    dense = min(a.strides) >= 0 and a.strides[2] == item and span == (a.size - 1) * item
    if not dense or any(st % item for st in a.strides):
        a = np.array(a, order="K")
        if a.strides[2] != item:  # (K keeps a broadcast axis's order; force axis 2 in)
            a = np.ascontiguousarray(a.swapaxes(2, 3)).swapaxes(2, 3)
    flat = np.lib.stride_tricks.as_strided(a, (a.size,), (item,), writeable=False)
    return flat, np.array(a.strides, np.int64) // item


@njit(parallel=True, cache=True, nogil=True)
def _tiled(flat, steps, dst, tile):  # pragma: no cover - jitted
    """``dst = src`` (4-D, ``src[i] == flat[i @ steps]`` with step 1 along axis 2), in
    tiles of ``tile`` x ``tile`` over the last two axes, each turned in a small buffer:
    the source is read along axis 2 and the destination written along axis 3, every
    run whole and in turn.  (Read straight across a tile, a power-of-two stride maps
    the lines onto a few cache sets, which evict one another before each is used up:
    twice as slow at 2048² float32.)"""
    nb, n1, n2, n3 = dst.shape
    t2 = (n2 + tile - 1) // tile
    for job in prange(nb * n1 * t2):
        b, i1, a2 = job // (n1 * t2), (job // t2) % n1, (job % t2) * tile
        w = min(a2 + tile, n2) - a2
        origin = b * steps[0] + i1 * steps[1] + a2
        plane = dst[b, i1]
        buf = np.empty((tile, tile), dst.dtype)
        for a3 in range(0, n3, tile):
            e3 = min(a3 + tile, n3)
            for i3 in range(a3, e3):
                seg = flat[origin + i3 * steps[3] : origin + i3 * steps[3] + w]
                row = buf[i3 - a3]
                for k in range(w):
                    row[k] = seg[k]
            for k in range(w):
                out = plane[a2 + k, a3:e3]
                for j in range(e3 - a3):
                    out[j] = buf[j, k]
