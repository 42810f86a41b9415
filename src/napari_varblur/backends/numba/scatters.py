"""Sigma maps: the exact scatter, the transpose of the gather (:mod:`.gathers`).

The gather sums, for each output pixel, its window of the image extended by the mode,
with the pixel's own weights over its own normaliser.  Its transpose runs the same tiles
the other way: a tile's pixels (lanes) spread ``y / den`` with their own weight tables
(the gather's, set up the same way: :mod:`.tiles`) into the
extended image, in the precision (as the gather sums), vectorised across lanes exactly
as the gather reads (:func:`_add_product`: one row of lanes per tap); the extension is
then folded back (a tap that read a reflected pixel adds to it; crop's and constant
mode's fill taps are dropped: the transpose of the gather's linear part).  A lane
holding NaN or inf spreads over its own window only.

Pushing is not parallel-safe: rows run in blocks along the outermost blurred axis, at
least twice the largest radius plus one long, even blocks at once, then odd ones.
1-3 blurred axes; more run on the reference backend.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ...core.spec import BlurSpec
from ...core.taps import fold_into_middle, from_working_layout, map_plan, working_layout
from .common import FAST, kernel_array, parallel_section
from .tiles import TILE, _scratch3d, _tile_lanes, _tile_tables, map_arguments


def scatter(spec: BlurSpec, pad_floor: tuple[int, ...] | None = None, memo=None
            ) -> np.ndarray | None:  # fmt: skip
    """The exact scatter of a sigma-map spec (``None`` for more than 3 blurred axes;
    its set-up is per tile: no ``memo``)."""
    if len(spec.axes) > 3:
        return None
    plan = map_plan(spec, pad_floor)
    work = working_layout(spec.image, spec.axes)
    missing = 3 - len(plan)
    lead = work.shape[:1] + (1,) * missing
    dtype = np.dtype(spec.precision)
    y = kernel_array(work, dtype).reshape(lead + work.shape[1:])
    m = map_arguments(spec, plan)
    pads = m.pads
    # The spread adds in the precision, as the gather sums (float32: twice the lanes).
    ext = np.zeros(lead[:1] + tuple(n + 2 * p for n, p in zip(y.shape[1:], pads)), dtype)
    axis = next((a for a in range(3) if y.shape[1 + a] > 1), 2)  # the outermost that blurs
    like = np.empty(1, dtype)  # the gather's last-axis table is in the precision
    with parallel_section():
        for jobs in _phases(y.shape[0], y.shape[1 + axis], int(pads[axis])):
            _scatter3d(y, ext, like, *m.wide, *m.narrow, m.flags, m.shares, pads, m.crops,
                       m.limits, spec.truncate, axis, jobs)  # fmt: skip
    out = ext.reshape((work.shape[0],) + ext.shape[1 + missing :])
    for i, m in reversed(list(enumerate(plan))):
        out = fold_into_middle(out, 1 + i, m.source(), m.n, m.pad)
    # One copy: the folded middle of ``ext``, in the image's layout and precision.
    return np.ascontiguousarray(from_working_layout(out, spec.shape, spec.axes), spec.precision)


def _phases(nb: int, n: int, pad: int) -> list[np.ndarray]:
    """Jobs ``(b, lo, hi)`` in phases whose jobs never write to the same extended pixel:
    blocks along the pushing axis ``2 * pad + 1`` long (a block writes its rows and
    ``pad`` on each side), even blocks, then odd ones."""
    size = 2 * pad + 1
    spans = [(lo, min(n, lo + size)) for lo in range(0, n, size)]
    return [np.array([(b, lo, hi) for b in range(nb) for lo, hi in spans[k::2]], np.int64)
            for k in (0, 1) if spans[k::2]]  # fmt: skip


@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def _scatter3d(y, ext, like, s0, s1, s2, t0, t1, t2, flags, shares, pads, crops, limits,
               truncate, axis, jobs):  # pragma: no cover  # fmt: skip
    """Job ``(b, lo, hi)`` of ``jobs`` spreads batch ``b``'s pixels with ``lo <= i < hi``
    on ``axis`` of ``y`` (``(B, n0, n1, n2)``) into ``ext`` (extended by ``pads``)."""
    _, n0, n1, n2 = y.shape
    n = np.array([n0, n1, n2], np.int64)
    width_max = min(TILE, n2)
    for job in prange(jobs.shape[0]):
        b, lo, hi = jobs[job, 0], jobs[job, 1], jobs[job, 2]
        scratch = _scratch3d(pads, width_max, like)
        start, stop = np.zeros(3, np.int64), n.copy()
        start[axis], stop[axis] = lo, hi
        for i in range(start[0], stop[0]):
            for j in range(start[1], stop[1]):
                for m0 in range(start[2] - start[2] % TILE, stop[2], TILE):
                    m0 = max(m0, start[2])
                    width = min(TILE, stop[2] - m0)
                    _tile_lanes(s0, s1, s2, t0, t1, t2, flags, shares, pads, crops, limits,
                                truncate, n, b, i, j, m0, width, scratch)  # fmt: skip
                    _push_tile(y, ext, b, i, j, m0, width, pads, shares, scratch)


@njit(cache=True, nogil=True, error_model="numpy")
def _push_tile(y, ext, b, i, j, m0, width, pads, shares, scratch):  # pragma: no cover
    """One tile, its weight tables and normalisers set up (as the gather's): each
    lane's ``y / den`` spread over its window, vectorised across lanes where every lane
    is finite, lane by lane over its own window where one is not."""
    _tile_tables(pads, shares, width, scratch)
    w0, w1, w2, den, c, _, mid, _, rad, _, _, _, _, bigs = scratch  # mid: precision
    finite = True
    for v in range(width):
        c[v] = y[b, i, j, m0 + v] / den[v]
        if not np.isfinite(c[v]):
            finite = False
    if finite:
        _spread(ext, b, i, j, m0, width, pads, bigs, w0, w1, w2, c, mid)
        return
    for v in range(width):  # the non-finite lanes alone, then the others together
        if not np.isfinite(c[v]):
            _spread_lane(ext, b, i, j, m0 + v, v, pads, rad, w0, w1, w2, c[v])
            c[v] = 0.0
    _spread(ext, b, i, j, m0, width, pads, bigs, w0, w1, w2, c, mid)


@njit(cache=True, nogil=True, fastmath=FAST)
def _spread(ext, b, i, j, m0, width, pads, bigs, w0, w1, w2, c, mid):  # pragma: no cover
    """``ext[tap] += c[v] * w0 w1 w2`` over the tile's shared window (vectorised over
    lanes; a tap beyond a lane's own radius has weight 0)."""
    p0, p1, p2 = pads[0], pads[1], pads[2]
    for d0 in range(-bigs[0], bigs[0] + 1):
        plane = ext[b, i + p0 + d0]
        for d1 in range(-bigs[1], bigs[1] + 1):
            for v in range(width):
                mid[v] = c[v] * (w0[p0 + d0, v] * w1[p1 + d1, v])
            line = plane[j + p1 + d1]
            for d2 in range(-bigs[2], bigs[2] + 1):
                _add_product(line, m0 + p2 + d2, mid, w2[p2 + d2], width)


@njit(cache=True, nogil=True, fastmath=FAST)
def _add_product(line, start, a, b, width):  # pragma: no cover - jitted
    """line[start + v] += a[v] * b[v] for v < width: a function of its own over a slice,
    so that LLVM sees a simple loop and vectorises it (inline, it ran 3x slower)."""
    dst = line[start : start + width]
    for v in range(width):
        dst[v] += a[v] * b[v]


@njit(cache=True, nogil=True, error_model="numpy")
def _spread_lane(ext, b, i, j, m, v, pads, rad, w0, w1, w2, value):  # pragma: no cover
    """Lane ``v`` (pixel ``m``) spreads ``value`` over its own window only: a NaN or
    inf never reaches a pixel outside it (0 * inf would be NaN there)."""
    p0, p1, p2 = pads[0], pads[1], pads[2]
    for d0 in range(-rad[0, v], rad[0, v] + 1):
        for d1 in range(-rad[1, v], rad[1, v] + 1):
            line = ext[b, i + p0 + d0, j + p1 + d1]
            outer = value * (w0[p0 + d0, v] * w1[p1 + d1, v])
            for d2 in range(-rad[2, v], rad[2, v] + 1):
                line[m + p2 + d2] += outer * w2[p2 + d2, v]
