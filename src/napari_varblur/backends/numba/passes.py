"""Global sigma: one 1-D pass per axis, the last two fused into one sweep over memory.

Every pass is one sum, ``dst[c] = sum_t w[t] * row_t[c]``, over rows that are either the
lines a pass along a strided axis reads or shifted views of one extended line along the
contiguous axis.  :func:`_weighted_sum` sums a symmetric kernel (any unfolded Gaussian)
by mirrored pairs of rows, added before they are multiplied, four pairs per sweep over
``dst`` (so ``dst`` is loaded and stored once per eight taps), vectorised over ``c``;
folded kernels (radii beyond short axes) go tap by tap.

The fused sweep over the last two axes filters down the columns first (scipy's order)
from a ring of input rows that stays in cache, two output rows per sweep over the ring
(each loaded row feeds both), straight into the middle of an extended row, and then
along that row: no intermediate image and no copy of a filtered row.  Its masked twin
is in :mod:`.masked_passes`.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import njit, prange

from ...core.taps import AxisPass
from .common import FAST, kernel_array, parallel_section

# ------------------------------------------------------------------- global sigma


def correlate_pass(x: np.ndarray, p: AxisPass) -> np.ndarray:
    return correlate(x, p.axis, p.source(), p.fill, p.weights, p.scale)


def fusable(plan: list[AxisPass], ndim: int) -> bool:
    """Whether the last two passes run along the last two axes and fit the fused ring."""
    return (
        len(plan) >= 2
        and (plan[-2].axis, plan[-1].axis) == (ndim - 2, ndim - 1)
        and plan[-2].taps <= _FUSED_TAPS
    )


def correlate(x, axis: int, source, fill: float, weights, scale) -> np.ndarray:
    """One 1-D pass: ``out[i] = scale[i] * sum_t weights[t] * x[source[i + t]]`` along
    ``axis`` (``fill`` where ``source`` is -1), for ``i < len(scale)``: the whole axis
    of a global blur, or a tile's outputs read from a block of the image."""
    dtype = np.dtype(x.dtype)
    outer, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1 :])
    lines = kernel_array(x, dtype).reshape(outer, x.shape[axis], inner)
    shape = x.shape[:axis] + (len(scale),) + x.shape[axis + 1 :]
    out = np.empty((outer, len(scale), inner), dtype)
    weights, scale = weights.astype(dtype), scale.astype(dtype)
    source = np.ascontiguousarray(source, np.int64)
    with parallel_section():
        if inner == 1:
            # Along the contiguous axis: one extended row at a time, vectorised over
            # positions.
            _rows_kernel(lines[:, :, 0], out[:, :, 0], source, dtype.type(fill), weights, scale)
        else:
            # Along a strided axis: whole rows of the other axes at once.
            _columns_kernel(lines, out, source, dtype.type(fill), weights, scale, _ROW_BLOCK)
    return out.reshape(shape)


def fused_last_two(x: np.ndarray, p0: AxisPass, p1: AxisPass) -> np.ndarray:
    """The passes along the last two axes in one sweep over memory (``_fused_kernel``)."""
    dtype = np.dtype(x.dtype)
    lines = kernel_array(x, dtype).reshape(-1, p0.n, p1.n)
    out = np.empty_like(lines)
    args = []
    for p in (p0, p1):
        args += [p.source(), dtype.type(p.fill), p.weights.astype(dtype), p.scale.astype(dtype)]
    with parallel_section():
        _fused_kernel(lines, out, *args, p1.left, _fused_block(lines.shape))
    return out.reshape(x.shape)


def _fused_block(shape: tuple[int, int, int]) -> int:
    """Output rows per job of a fused sweep: at least ``4 * threads`` jobs where the
    image has the rows, so the threads stay balanced on a shared machine, and at least
    ``_FUSED_BLOCK`` rows (each job first fills its ring with ``taps - 1`` rows)."""
    outer, n0 = shape[:2]
    runs = max(1, 4 * numba.get_num_threads() // outer)
    return min(max(_FUSED_BLOCK, -(-n0 // runs)), _FUSED_BLOCK_MAX)


#: Output rows handled by one parallel job in a pass along a strided axis, and in the
#: fused passes along the last two axes (at least, at most).
_ROW_BLOCK = 32
_FUSED_BLOCK = 64
_FUSED_BLOCK_MAX = 256
#: The fused passes keep ``taps + 1`` input rows in a ring; longer kernels go pass by
#: pass.
_FUSED_TAPS = 257
#: Floats added to a ring row's stride so that the rows of a power-of-two image do not
#: all fall into the same cache sets (64 bytes: one cache line).
_RING_PAD = 16
# ------------------------------------------------------------------- the tap sums


@njit(cache=True, nogil=True)
def _row(base, start, t, n):  # pragma: no cover - jitted
    """Row ``t`` of a sum: ``base[start[t] : start[t] + n]``."""
    s = start[t]
    return base[s : s + n]


@njit(cache=True, nogil=True)
def _symmetric(w) -> bool:  # pragma: no cover - jitted
    """Whether the taps mirror around an odd centre (``w[t] == w[-1 - t]``): every
    unfolded Gaussian does; folded and even-length kernels need not."""
    taps = w.shape[0]
    if taps % 2 == 0:
        return False
    for t in range(taps // 2):
        if w[t] != w[taps - 1 - t]:
            return False
    return True


@njit(cache=True, nogil=True)
def _scaled(scale) -> bool:  # pragma: no cover - jitted
    """Whether any factor differs from 1 (crop mode's renormalisation)."""
    for c in range(scale.shape[0]):
        if scale[c] != 1:
            return True
    return False


@njit(cache=True, nogil=True, fastmath=FAST)
def _scale(dst, scale):  # pragma: no cover - jitted
    for c in range(dst.shape[0]):
        dst[c] *= scale[c]


@njit(cache=True, nogil=True, fastmath=FAST)
def _add_one(dst, a, w):  # pragma: no cover - jitted
    """``dst += w * a``."""
    for c in range(dst.shape[0]):
        dst[c] += w * a[c]


@njit(cache=True, nogil=True, fastmath=FAST)
def _add_pair(dst, base, start, w, t):  # pragma: no cover - jitted
    """``dst += w[t] * (row t + its mirror)``: one multiply for two taps."""
    n = dst.shape[0]
    a, b = _row(base, start, t, n), _row(base, start, w.shape[0] - 1 - t, n)
    wt = w[t]
    for c in range(n):
        dst[c] += wt * (a[c] + b[c])


@njit(cache=True, nogil=True, fastmath=FAST)
def _add_four_pairs(dst, base, start, w, t, centre):  # pragma: no cover - jitted
    """``dst +=`` the pairs ``t .. t + 3`` (each tap and its mirror); with ``centre``,
    ``dst =`` the centre tap plus those pairs (no sweep to zero ``dst`` first)."""
    n = dst.shape[0]
    m = w.shape[0] - 1 - t  # the mirror of tap t
    a0, a1 = _row(base, start, t, n), _row(base, start, t + 1, n)
    a2, a3 = _row(base, start, t + 2, n), _row(base, start, t + 3, n)
    b0, b1 = _row(base, start, m, n), _row(base, start, m - 1, n)
    b2, b3 = _row(base, start, m - 2, n), _row(base, start, m - 3, n)
    w0, w1, w2, w3 = w[t], w[t + 1], w[t + 2], w[t + 3]
    if centre:
        h = w.shape[0] // 2
        mid, wm = _row(base, start, h, n), w[h]
        for c in range(n):
            dst[c] = wm * mid[c] + (w0 * (a0[c] + b0[c]) + w1 * (a1[c] + b1[c])
                                    + w2 * (a2[c] + b2[c]) + w3 * (a3[c] + b3[c]))  # fmt: skip
    else:
        for c in range(n):
            dst[c] += (w0 * (a0[c] + b0[c]) + w1 * (a1[c] + b1[c])
                       + w2 * (a2[c] + b2[c]) + w3 * (a3[c] + b3[c]))  # fmt: skip


@njit(cache=True, nogil=True, fastmath=FAST)
def _add_four_pairs2(da, db, base, start, w, t, centre):  # pragma: no cover - jitted
    """:func:`_add_four_pairs` for two windows at once, ``a`` (rows ``start[:taps]``)
    and ``b`` (one row on, ``start[1:]``): ten rows loaded for sixteen taps."""
    n = da.shape[0]
    m = w.shape[0] - t  # the mirror of tap t in window b
    l0, l1 = _row(base, start, t, n), _row(base, start, t + 1, n)
    l2, l3 = _row(base, start, t + 2, n), _row(base, start, t + 3, n)
    l4 = _row(base, start, t + 4, n)
    r0, r1 = _row(base, start, m, n), _row(base, start, m - 1, n)
    r2, r3 = _row(base, start, m - 2, n), _row(base, start, m - 3, n)
    r4 = _row(base, start, m - 4, n)
    w0, w1, w2, w3 = w[t], w[t + 1], w[t + 2], w[t + 3]
    if centre:
        h = w.shape[0] // 2
        ma, mb, wm = _row(base, start, h, n), _row(base, start, h + 1, n), w[h]
        for c in range(n):
            x1, x2, x3, y1, y2, y3 = l1[c], l2[c], l3[c], r1[c], r2[c], r3[c]
            da[c] = wm * ma[c] + (w0 * (l0[c] + y1) + w1 * (x1 + y2)
                                  + w2 * (x2 + y3) + w3 * (x3 + r4[c]))  # fmt: skip
            db[c] = wm * mb[c] + (w0 * (x1 + r0[c]) + w1 * (x2 + y1)
                                  + w2 * (x3 + y2) + w3 * (l4[c] + y3))  # fmt: skip
    else:
        for c in range(n):
            x1, x2, x3, y1, y2, y3 = l1[c], l2[c], l3[c], r1[c], r2[c], r3[c]
            da[c] += w0 * (l0[c] + y1) + w1 * (x1 + y2) + w2 * (x2 + y3) + w3 * (x3 + r4[c])
            db[c] += w0 * (x1 + r0[c]) + w1 * (x2 + y1) + w2 * (x3 + y2) + w3 * (l4[c] + y3)


@njit(cache=True, nogil=True, fastmath=FAST)
def _weighted_sum(dst, base, start, w, symmetric):  # pragma: no cover - jitted
    """``dst[c] = sum_t w[t] * base[start[t] + c]``: a symmetric kernel by four mirrored
    pairs of taps per sweep over ``dst``, any other tap by tap.

    Pairs add two float values before they are multiplied: beyond half the largest
    float the sum overflows where separate products would not.
    """
    n = dst.shape[0]
    h = w.shape[0] // 2
    if symmetric:
        grouped = h - h % 4
        if grouped == 0:  # (else the first sweep of four pairs adds the centre)
            dst[:] = 0
            _add_one(dst, _row(base, start, h, n), w[h])
        for t in range(0, grouped, 4):
            _add_four_pairs(dst, base, start, w, t, t == 0)
        for t in range(grouped, h):
            _add_pair(dst, base, start, w, t)
        return
    # Folded kernels (radii beyond short axes): tap by tap.
    dst[:] = 0
    for t in range(w.shape[0]):
        _add_one(dst, _row(base, start, t, n), w[t])


@njit(cache=True, nogil=True, fastmath=FAST)
def _weighted_sums(da, db, base, start, w, symmetric, two):  # pragma: no cover - jitted
    """:func:`_weighted_sum` into ``da`` over rows ``start[:taps]`` and, when ``two``,
    into ``db`` over rows ``start[1:]``: a symmetric kernel of nine taps or more sums
    both windows in one sweep over their rows, so each row is loaded once for two
    outputs (the rows come from cache, whose bandwidth bounds this sum).  (Each sum
    is called from one place: every call site is compiled inline, in seconds.)"""
    h = w.shape[0] // 2
    dsts = (da, db)
    if not (two and symmetric and h >= 4):
        for k in range(1 + two):
            _weighted_sum(dsts[k], base, start[k:], w, symmetric)
        return
    for t in range(0, h - h % 4, 4):
        _add_four_pairs2(da, db, base, start, w, t, t == 0)
    for t in range(h - h % 4, h):
        for k in range(2):
            _add_pair(dsts[k], base, start[k:], w, t)


@njit(cache=True, nogil=True)
def _extend(buf, source, left, n, fill):  # pragma: no cover - jitted
    """Fill the ends of an extended line whose middle ``buf[left : left + n]`` holds
    the line itself: ``buf[j] = line[source[j]]`` (``fill`` where ``source`` is -1).
    The pass before writes the middle in place, so the line is never copied."""
    for j in range(left):
        s = source[j]
        buf[j] = buf[left + s] if s >= 0 else fill
    for j in range(left + n, source.shape[0]):
        s = source[j]
        buf[j] = buf[left + s] if s >= 0 else fill


@njit(cache=True, nogil=True)
def _ring_starts(start, src, i, rows, slots, stride):  # pragma: no cover - jitted
    """Where ``rows`` rows from input position ``i`` on start in a ring of ``slots``
    rows (position ``e`` in slot ``e % slots``); a fill tap reads the fill row in slot
    ``slots``."""
    for t in range(rows):
        slot = (i + t) % slots if src[i + t] >= 0 else slots
        start[t] = slot * stride


# ------------------------------------------------------------------- 1-D passes


@njit(cache=True, nogil=True, fastmath=FAST)
def _column_sum(dst, rows, index, weights, fill, sc):  # pragma: no cover - jitted
    """``dst = sc * sum_t weights[t] * rows[index[t]]`` over whole rows (``fill`` where
    ``index`` is -1).  Taps that read the fill value (constant mode) add ``w * cval``
    each, exactly as scipy does: with cval NaN or inf only they make the output
    non-finite.  (For windows with a fill tap; the others go by :func:`_weighted_sum`.)"""
    dst[:] = 0
    filled = dst.dtype.type(0)
    for t in range(weights.shape[0]):
        s = index[t]
        w = weights[t]
        if s < 0:
            filled += w * fill
            continue
        row = rows[s]
        for c in range(dst.shape[0]):
            dst[c] += w * row[c]
    for c in range(dst.shape[0]):
        dst[c] = (dst[c] + filled) * sc


@njit(parallel=True, cache=True, nogil=True, fastmath=FAST)
def _rows_kernel(rows, out, source, fill, weights, scale):  # pragma: no cover - jitted
    """Along the contiguous axis: each row is extended into a buffer (``fill`` where
    ``source`` is -1) and the taps sum shifted views of the buffer."""
    symmetric, scaled = _symmetric(weights), _scaled(scale)
    along = np.arange(weights.shape[0])
    for o in prange(out.shape[0]):
        buf = np.empty(source.shape[0], rows.dtype)
        row = rows[o]
        for j in range(source.shape[0]):
            s = source[j]
            buf[j] = row[s] if s >= 0 else fill
        _weighted_sum(out[o], buf, along, weights, symmetric)
        if scaled:
            _scale(out[o], scale)


@njit(parallel=True, cache=True, nogil=True, fastmath=FAST)
def _columns_kernel(lines, out, source, fill, weights, scale, block):  # pragma: no cover
    """Along a strided axis: each output row sums whole input rows (the other axes
    flattened)."""
    outer, n, inner = out.shape
    taps = weights.shape[0]
    symmetric = _symmetric(weights)
    nblocks = (n + block - 1) // block
    for job in prange(outer * nblocks):
        o = job // nblocks
        i0 = (job % nblocks) * block
        plane = lines[o].reshape(-1)
        start = np.empty(taps, np.int64)
        w = np.empty_like(weights)
        for i in range(i0, min(n, i0 + block)):
            index = source[i : i + taps]
            if index.min() < 0:  # a fill tap (constant mode, near the ends)
                _column_sum(out[o, i], lines[o], index, weights, fill, scale[i])
                continue
            for t in range(taps):
                start[t] = index[t] * inner
                w[t] = weights[t] * scale[i]
            _weighted_sum(out[o, i], plane, start, w, symmetric)


# ------------------------------------------------------------------- fused passes


@njit(cache=True, nogil=True)
def _copy_in(ring, plane, src, e, slots, stride):  # pragma: no cover - jitted
    """Input position ``e`` (a row of ``plane``; nothing for a fill tap) into its ring
    slot."""
    if src[e] >= 0:
        row = plane[src[e]]
        at = (e % slots) * stride
        dst = ring[at : at + row.shape[0]]
        for c in range(row.shape[0]):  # (a slice assignment is slower here)
            dst[c] = row[c]


@njit(cache=True, nogil=True, fastmath=FAST)
def _along(dst, buf, along, src1, left1, fill1, w1, sym1):  # pragma: no cover - jitted
    """The last pass for one output row: extend ``buf`` (its middle holds the row
    filtered down the columns) and sum along it (``along``: the taps' offsets)."""
    _extend(buf, src1, left1, dst.shape[0], fill1)
    _weighted_sum(dst, buf, along, w1, sym1)


@njit(parallel=True, cache=True, nogil=True, fastmath=FAST)
def _fused_kernel(
    lines, out, src0, fill0, w0, scale0, src1, fill1, w1, scale1, left1, block
):  # pragma: no cover
    """The passes along the last two axes of ``lines`` (outer, n0, n1) in one sweep.

    Each job walks a run of output rows, two at a time.  Every input row it reads
    enters a ring of ``taps0 + 1`` rows once (one more slot holds the fill row of
    constant mode); the two outputs' windows are summed down the columns together,
    each into the middle of an extended row, then along it into the output.
    """
    outer, n0, n1 = out.shape
    taps0 = w0.shape[0]
    slots, stride = taps0 + 1, n1 + _RING_PAD
    sym0, sym1 = _symmetric(w0), _symmetric(w1)
    scaled0, scaled1 = _scaled(scale0), _scaled(scale1)
    nblocks = (n0 + block - 1) // block
    for job in prange(outer * nblocks):
        o = job // nblocks
        i0 = (job % nblocks) * block
        i1 = min(n0, i0 + block)
        ring = np.empty((slots + 1) * stride, out.dtype)
        ring[slots * stride : slots * stride + n1] = fill0
        bufs = np.empty((2, src1.shape[0]), out.dtype)
        # (Rows of bufs, then a slice: contiguous views, which the sums vectorise.)
        mids = (bufs[0, left1 : left1 + n1], bufs[1, left1 : left1 + n1])
        start, along = np.empty(slots, np.int64), np.arange(w1.shape[0])
        for e in range(i0, i0 + taps0 - 1):
            _copy_in(ring, lines[o], src0, e, slots, stride)
        for i in range(i0, i1, 2):
            rows = min(2, i1 - i)
            for e in range(i + taps0 - 1, i + taps0 - 1 + rows):
                _copy_in(ring, lines[o], src0, e, slots, stride)
            _ring_starts(start, src0, i, taps0 + rows - 1, slots, stride)
            _weighted_sums(mids[0], mids[1], ring, start, w0, sym0, rows == 2)
            for k in range(rows):
                if scaled0:
                    mids[k][:] *= scale0[i + k]
                _along(out[o, i + k], bufs[k], along, src1, left1, fill1, w1, sym1)
                if scaled1:
                    _scale(out[o, i + k], scale1)
