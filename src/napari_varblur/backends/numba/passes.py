"""Global sigma: one 1-D pass per axis, the last two fused into one sweep over memory.

Each pass copies a block of lines into an extended buffer (so edge modes cost nothing in
the inner loop) and slides the taps over it with a contiguous innermost loop.  The fused
sweep has an optional validity ring: the masked global blur sums the valid values and
their weights at once.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from ...core.masking import ratio
from ...core.spec import BlurSpec
from ...core.taps import (
    AxisPass,
    global_plan,
)
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
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis + 1 :], dtype=np.int64))
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
    # Enough runs of rows to balance the threads, each long enough that its first
    # taps - 1 rows (filtered once more by the run before) cost little.
    runs = max(1, 4 * numba.get_num_threads() // lines.shape[0])
    block = max(_FUSED_BLOCK, -(-p0.n // runs))
    with parallel_section():
        _fused_kernel(lines, out, *args, block)
    return out.reshape(x.shape)


def masked_global(spec: BlurSpec, valid: np.ndarray, counts: bool) -> np.ndarray | None:
    """Global passes that include the fused last two axes: ``_fused_masked_kernel``
    splits the image into its valid values and its validity and filters both along
    the last two axes; other axes filter both sums, then they are divided.  (Passes
    commute: also in constant mode, where a filtered fill plane is still the fill.)"""
    passes = global_plan(spec)
    if not fusable(passes, spec.image.ndim):
        return None
    fused = passes[-2:]
    dtype = np.dtype(spec.precision)

    def fills(p: AxisPass) -> tuple[float, float]:  # (values, validity) of fill taps
        return (p.mode.fill(spec.cval), p.mode.fill(1.0)) if counts else (0.0, 0.0)

    p0, p1 = fused
    image = spec.image.astype(dtype, copy=False)
    lines = kernel_array(image, dtype).reshape(-1, p0.n, p1.n)
    flags = np.broadcast_to(valid, valid.shape[:-2] + spec.shape[-2:])
    if flags.shape[:-2] != spec.shape[:-2]:  # varies along some batch axes only
        flags = np.broadcast_to(flags, spec.shape)
    flags = np.ascontiguousarray(flags).view(np.uint8).reshape(-1, p0.n, p1.n)
    out = np.empty_like(lines)
    den = np.empty_like(lines) if len(passes) > 2 else np.empty((0, 0, 0), dtype)
    args = []
    for p in fused:
        fill, one = fills(p)
        args += [p.source(), dtype.type(fill), p.weights.astype(dtype), p.scale.astype(dtype),
                 dtype.type(one)]  # fmt: skip
    runs = max(1, 4 * numba.get_num_threads() // lines.shape[0])
    block = max(_FUSED_BLOCK, -(-p0.n // runs))
    with parallel_section():
        _fused_masked_kernel(lines, flags, out, den, *args, block)
    if len(passes) == 2:
        return out.reshape(spec.shape)
    num, den = out.reshape(spec.shape), den.reshape(spec.shape)
    for p in passes[:-2]:
        fill, one = fills(p)
        num = correlate(num, p.axis, p.source(), fill, p.weights, p.scale)
        den = correlate(den, p.axis, p.source(), one, p.weights, p.scale)
    return ratio(num, den)


#: Output rows handled by one parallel job in a pass along a strided axis, and in the
#: fused passes along the last two axes.
_ROW_BLOCK = 32
_FUSED_BLOCK = 64
#: The fused passes keep ``taps`` filtered rows in a ring; longer kernels go pass by pass.
_FUSED_TAPS = 257


@njit(cache=True, nogil=True, fastmath=FAST)
def _row_pass(row, dst, buf, source, fill, weights, scale):  # pragma: no cover - jitted
    """One line along the contiguous axis: extend it into ``buf`` (``fill`` where
    ``source`` is -1), slide the taps, scale.  Vectorised over positions."""
    n = dst.shape[0]
    for j in range(source.shape[0]):
        s = source[j]
        buf[j] = row[s] if s >= 0 else fill
    dst[:] = 0
    for t in range(weights.shape[0]):
        w = weights[t]
        for i in range(n):
            dst[i] += w * buf[i + t]
    for i in range(n):
        dst[i] *= scale[i]


@njit(cache=True, nogil=True, fastmath=FAST)
def _column_sum(dst, rows, index, weights, fill, sc):  # pragma: no cover - jitted
    """``dst = sc * sum_t weights[t] * rows[index[t]]`` over whole rows (``fill`` where
    ``index`` is -1).  Taps that read the fill value (constant mode) add ``w * cval``
    each, exactly as scipy does: with cval NaN or inf only they make the output
    non-finite."""
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
    for o in prange(out.shape[0]):
        buf = np.empty(source.shape[0], rows.dtype)
        _row_pass(rows[o], out[o], buf, source, fill, weights, scale)


@njit(parallel=True, cache=True, nogil=True, fastmath=FAST)
def _columns_kernel(lines, out, source, fill, weights, scale, block):  # pragma: no cover
    outer, n = out.shape[:2]
    taps = weights.shape[0]
    nblocks = (n + block - 1) // block
    for job in prange(outer * nblocks):
        o = job // nblocks
        i0 = (job % nblocks) * block
        for i in range(i0, min(n, i0 + block)):
            _column_sum(out[o, i], lines[o], source[i : i + taps], weights, fill, scale[i])


@njit(parallel=True, cache=True, nogil=True, fastmath=FAST)
def _fused_kernel(
    lines, out, src0, fill0, w0, scale0, src1, fill1, w1, scale1, block
):  # pragma: no cover
    """The passes along the last two axes of ``lines`` (outer, n0, n1) in one sweep:
    each job walks a run of output rows, filtering every input row it needs along the
    contiguous axis once, into a ring of ``taps`` rows that stays in cache, and sums
    the ring along the other axis; no intermediate image."""
    outer, n0, n1 = out.shape
    taps0 = w0.shape[0]
    nblocks = (n0 + block - 1) // block
    for job in prange(outer * nblocks):
        o = job // nblocks
        i0 = (job % nblocks) * block
        i1 = min(n0, i0 + block)
        ring = np.empty((taps0, n1), out.dtype)
        buf = np.empty(src1.shape[0], out.dtype)
        index = np.empty(taps0, np.int64)
        for e in range(i0, i0 + taps0 - 1):
            if src0[e] >= 0:
                _row_pass(lines[o, src0[e]], ring[e % taps0], buf, src1, fill1, w1, scale1)
        for i in range(i0, i1):
            e = i + taps0 - 1
            if src0[e] >= 0:
                _row_pass(lines[o, src0[e]], ring[e % taps0], buf, src1, fill1, w1, scale1)
            for t in range(taps0):
                index[t] = (i + t) % taps0 if src0[i + t] >= 0 else -1
            _column_sum(out[o, i], ring, index, w0, fill0, scale0[i])


@njit(parallel=True, cache=True, nogil=True, fastmath=FAST, error_model="numpy")
def _fused_masked_kernel(
    lines, valid, out, den_out, src0, fill0, w0, scale0, one0, src1, fill1, w1, scale1, one1, block
):  # pragma: no cover
    """``_fused_kernel`` for a normalised convolution: every input row is split into
    its valid values (0 where invalid: a NaN there is dropped, not multiplied) and its
    validity, both filtered into rings, both summed, and divided (0/0: NaN), or the
    sums kept (``out``, ``den_out``) when ``den_out`` is not empty.  ``valid`` (uint8
    flags) has one plane, or one per outer index; ``one*`` is the validity of fill
    taps."""
    outer, n0, n1 = out.shape
    taps0 = w0.shape[0]
    nblocks = (n0 + block - 1) // block
    for job in prange(outer * nblocks):
        o = job // nblocks
        v = o if valid.shape[0] > 1 else 0
        i0 = (job % nblocks) * block
        i1 = min(n0, i0 + block)
        ring = np.empty((taps0, n1), out.dtype)
        weight_ring = np.empty((taps0, n1), out.dtype)
        buf = np.empty(src1.shape[0], out.dtype)
        values = np.empty(n1, out.dtype)
        flags = np.empty(n1, out.dtype)
        den = np.empty(n1, out.dtype)
        index = np.empty(taps0, np.int64)
        for e in range(i0, i1 + taps0 - 1):
            s = src0[e]
            if s >= 0:
                row, ok = lines[o, s], valid[v, s]
                for c in range(n1):
                    flags[c] = ok[c]
                    values[c] = row[c] if ok[c] else 0
                _row_pass(values, ring[e % taps0], buf, src1, fill1, w1, scale1)
                _row_pass(flags, weight_ring[e % taps0], buf, src1, one1, w1, scale1)
            i = e - (taps0 - 1)
            if i < i0:
                continue
            for t in range(taps0):
                index[t] = (i + t) % taps0 if src0[i + t] >= 0 else -1
            _column_sum(out[o, i], ring, index, w0, fill0, scale0[i])
            if den_out.shape[0]:
                _column_sum(den_out[o, i], weight_ring, index, w0, one0, scale0[i])
                continue
            _column_sum(den, weight_ring, index, w0, one0, scale0[i])
            for c in range(n1):
                out[o, i, c] /= den[c]
