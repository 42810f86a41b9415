"""The Numba backend: parallel CPU kernels (``prange``), compiled once and cached on disk.

Global sigma: one 1-D pass per axis; each pass copies a block of lines into an extended
buffer (so edge modes cost nothing in the inner loop) and slides the taps over it with
a contiguous innermost loop.  Sigma map: every pixel computes its own per-axis weights
(``r + 1`` exps per axis, since the Gaussian factors) and sums its own window.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from ..plan import (
    MAX_EXPONENT,
    AxisPass,
    MapAxis,
    from_working_layout,
    global_plan,
    map_plan,
    working_layout,
)
from ..spec import BlurSpec


def describe() -> str:
    return f"numba {numba.__version__}, {device_name()}"


def device_name() -> str:
    return f"cpu ({numba.get_num_threads()} threads)"


def blur(spec: BlurSpec) -> np.ndarray:
    # Kernels write only into new arrays, so the input is read in place when it already
    # has the working dtype.
    x = spec.image.astype(spec.precision, copy=False)
    if spec.sigma is not None:
        for p in global_plan(spec):
            x = _correlate_axis(x, p)
        return x
    return _varying_blur(x, spec, map_plan(spec))


def _correlate_axis(x: np.ndarray, p: AxisPass) -> np.ndarray:
    outer = int(np.prod(x.shape[: p.axis], dtype=np.int64))
    inner = int(np.prod(x.shape[p.axis + 1 :], dtype=np.int64))
    lines = np.ascontiguousarray(x).reshape(outer, p.n, inner)
    out = np.empty_like(lines)
    weights = p.weights.astype(x.dtype)
    scale = p.scale.astype(x.dtype)
    fill = x.dtype.type(p.fill)
    if inner == 1:
        # Along the contiguous axis: one extended row at a time, vectorised over positions.
        _rows_kernel(lines[:, :, 0], out[:, :, 0], p.source(), fill, weights, scale)
    else:
        # Along a strided axis: whole rows of the other axes at once, vectorised over them.
        _columns_kernel(lines, out, p.source(), fill, weights, scale, _ROW_BLOCK)
    return out.reshape(x.shape)


# Only reassociation and FMA contraction are allowed to the compiler (so sums
# vectorise); NaN and inf keep their IEEE meaning.
_FAST = {"reassoc", "contract"}

#: Output rows handled by one parallel job in a pass along a strided axis.
_ROW_BLOCK = 32


@njit(parallel=True, cache=True, nogil=True, fastmath=_FAST)
def _rows_kernel(rows, out, source, fill, weights, scale):  # pragma: no cover - jitted
    count, n = rows.shape
    m = source.shape[0]
    taps = weights.shape[0]
    for o in prange(count):
        buf = np.empty(m, rows.dtype)
        for j in range(m):
            s = source[j]
            buf[j] = rows[o, s] if s >= 0 else fill
        dst = out[o]
        dst[:] = 0
        for t in range(taps):
            w = weights[t]
            for i in range(n):
                dst[i] += w * buf[i + t]
        for i in range(n):
            dst[i] *= scale[i]


@njit(parallel=True, cache=True, nogil=True, fastmath=_FAST)
def _columns_kernel(lines, out, source, fill, weights, scale, block):  # pragma: no cover
    outer, n, inner = lines.shape
    taps = weights.shape[0]
    nblocks = (n + block - 1) // block
    for job in prange(outer * nblocks):
        o = job // nblocks
        i0 = (job % nblocks) * block
        for i in range(i0, min(n, i0 + block)):
            dst = out[o, i]
            dst[:] = 0
            filled = 0.0  # weight of the taps that read the fill value (constant mode)
            for t in range(taps):
                s = source[i + t]
                w = weights[t]
                if s < 0:
                    filled += w
                    continue
                row = lines[o, s]
                for c in range(inner):
                    dst[c] += w * row[c]
            extra = filled * fill
            sc = scale[i]
            for c in range(inner):
                dst[c] = (dst[c] + extra) * sc


def _varying_blur(x: np.ndarray, spec: BlurSpec, plan: list[MapAxis]) -> np.ndarray:
    work = working_layout(x, spec.axes)
    padded = _padded(work, plan)
    out = np.empty(work.shape, dtype=x.dtype)
    if len(plan) > 3:
        _generic_varying(padded, work.shape, x, spec, plan, out)
        return from_working_layout(out, x.shape, spec.axes)

    # 1-D and 2-D run as 3-D with untouched leading axes of length 1 (sigma 0, no pad).
    missing = 3 - len(plan)
    lead = work.shape[:1] + (1,) * missing
    padded = padded.reshape(lead + padded.shape[1:])
    target = out.reshape(lead + work.shape[1:])
    sigmas = [np.broadcast_to(np.zeros(1), target.shape)] * missing + [
        working_layout(np.broadcast_to(m.sigma, x.shape), spec.axes).reshape(target.shape)
        for m in plan
    ]
    # Tiles of neighbouring pixels share one window, vectorised across the tile; taps
    # beyond a pixel's own radius get weight 0 there.  0 * NaN is NaN, so an image with
    # NaN or inf takes the per-pixel path, which never reads outside a pixel's window.
    tiled = bool(np.isfinite(work).all())
    _varying3d(
        padded,
        np.array([0] * missing + [m.pad for m in plan], np.int64),
        np.array([True] * missing + [m.crop for m in plan], np.bool_),
        np.array([0] * missing + [m.limit for m in plan], np.int64),
        *sigmas,
        spec.truncate,
        tiled,
        target,
    )
    return from_working_layout(out, x.shape, spec.axes)


def _generic_varying(padded, shape, x, spec, plan, out) -> None:
    """Any number of blurred axes (the 1-3 axis kernels are specialised)."""

    def per_pixel(values: np.ndarray, dtype: type) -> np.ndarray:
        full = np.broadcast_to(values, x.shape)
        return np.ascontiguousarray(working_layout(full, spec.axes), dtype=dtype).ravel()

    flat = out.reshape(-1)
    _varying_kernel(
        np.ascontiguousarray(padded).ravel(),
        np.array(padded.shape, dtype=np.int64),
        np.array(shape, dtype=np.int64),
        np.array([m.pad for m in plan], dtype=np.int64),
        np.array([m.crop for m in plan], dtype=np.bool_),
        np.stack([per_pixel(m.radius(), np.int32) for m in plan]),
        np.stack([per_pixel(m.exponent(), np.float64) for m in plan]),
        flat,
        max(m.pad for m in plan),
    )


def _padded(work: np.ndarray, plan: list[MapAxis]) -> np.ndarray:
    """``work`` extended on every blurred axis by its largest radius, in its mode.

    Crop axes are padded (with zeros) last, so that the corners they share with another
    axis's extension are zeros too: the vectorised kernels read them with nonzero
    weights and rely on them adding nothing.
    """
    padded = work
    for a, m in sorted(enumerate(plan, start=1), key=lambda item: item[1].crop):
        if m.pad == 0:
            continue
        source = m.source()
        padded = np.take(padded, np.maximum(source, 0), axis=a)
        if (source < 0).any():
            mask_shape = (1,) * a + (len(source),) + (1,) * (work.ndim - a - 1)
            padded = np.where((source < 0).reshape(mask_shape), padded.dtype.type(m.fill), padded)
    return np.ascontiguousarray(padded, dtype=work.dtype)


# Per-pixel kernels.  Each pixel evaluates the contract's radius ceil(truncate * sigma)
# in float64 from its float64 sigma, then its weights exp(-d^2 h), h = 1/(2 sigma^2),
# by the recurrence w(d+1) = w(d) g(d), g(d+1) = g(d) q^2, q = exp(-h): one exp per
# axis, exact to a few ulps in float64.


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _radius_exponent(sigma, truncate, limit):  # pragma: no cover - jitted
    s = np.float64(sigma)
    r = np.ceil(truncate * s)
    if r > limit:
        r = limit
    h = 0.0
    if s > 0:
        h = min(0.5 / (s * s), MAX_EXPONENT)
    return np.int64(r), h


@njit(cache=True, nogil=True, inline="always")
def _weights(out, r, h, lo, hi):  # pragma: no cover - jitted
    """out[r + d] = exp(-d^2 h) for |d| <= r; return the sum over lo <= d <= hi."""
    q = np.exp(-h)
    q2 = q * q
    w = 1.0
    g = q
    out[r] = 1.0
    total = 1.0
    for d in range(1, r + 1):
        w *= g
        g *= q2
        out[r + d] = w
        out[r - d] = w
        if d <= hi:
            total += w
        if -d >= lo:
            total += w
    return total


@njit(cache=True, nogil=True, inline="always")
def _range(r, i, n, crop):  # pragma: no cover - jitted
    if crop:
        return max(-r, -i), min(r, n - 1 - i)
    return -r, r


#: Neighbouring pixels along the last axis blurred together, one per vector lane: each
#: tile sums the window of its largest radius, with zero weights beyond each pixel's own.
TILE = 128


@njit(cache=True, nogil=True, fastmath=_FAST)
def _axpy(acc, weights, values, start, width):  # pragma: no cover - jitted
    """acc[v] += weights[v] * values[start + v] for v < width.

    A function of its own (not inlined), so LLVM sees a simple loop and vectorises it.
    """
    src = values[start : start + width]
    for v in range(width):
        acc[v] += weights[v] * src[v]


@njit(cache=True, nogil=True, fastmath=_FAST, error_model="numpy")
def _tile_table(table, pad, radius, q, lo, hi, width, den, w, g):  # pragma: no cover
    """Fill rows pad - R .. pad + R of ``table`` (R = max radius of the tile) with each
    pixel's weights exp(-d^2 h) = q^(d^2), 0 beyond its own radius, and multiply
    ``den`` by each pixel's counted weight sum (lo <= d <= hi).  Vectorised across
    the tile: one recurrence step per offset for all pixels at once.
    """
    big = 0
    for v in range(width):
        big = max(big, radius[v])
        w[v] = 1.0
        g[v] = q[v]
        table[pad, v] = 1.0
    sums = np.ones(width, np.float64)
    for d in range(1, big + 1):
        for v in range(width):
            w[v] *= g[v]
            g[v] *= q[v] * q[v]
            value = w[v] if d <= radius[v] else 0.0
            table[pad + d, v] = value
            table[pad - d, v] = value
            sums[v] += (value if d <= hi[v] else 0.0) + (value if -d >= lo[v] else 0.0)
    for v in range(width):
        den[v] *= sums[v]
    return big


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _tile_axis(sigma, v, position, n, crop, limit, truncate, radius, q, lo, hi):  # pragma: no cover
    """One pixel's radius, q = exp(-h) and counted range on one axis, into lane v."""
    r, h = _radius_exponent(sigma, truncate, limit)
    radius[v] = r
    q[v] = np.exp(-h)
    lo[v], hi[v] = _range(r, position, n, crop)


@njit(parallel=True, cache=True, nogil=True, fastmath=_FAST, error_model="numpy")
def _varying3d(xp, pads, crops, limits, s0, s1, s2, truncate, tiled, out):  # pragma: no cover
    nb, n0, n1, n2 = out.shape
    p0, p1, p2 = pads[0], pads[1], pads[2]
    tiles = (n2 + TILE - 1) // TILE if tiled else 0
    width_max = min(TILE, n2)
    for row in prange(nb * n0 * n1):
        b = row // (n0 * n1)
        i = (row // n1) % n0
        j = row % n1
        tmp0 = np.empty(2 * p0 + 1, np.float64)
        tmp1 = np.empty(2 * p1 + 1, np.float64)
        tmp2 = np.empty(2 * p2 + 1, np.float64)
        w0 = np.empty((2 * p0 + 1, width_max), np.float64)
        w1 = np.empty((2 * p1 + 1, width_max), np.float64)
        w2 = np.empty((2 * p2 + 1, width_max), out.dtype)
        den = np.empty(width_max, np.float64)
        acc = np.empty(width_max, np.float64)
        mid = np.empty(width_max, np.float64)
        part = np.empty(width_max, out.dtype)
        rad = np.empty((3, width_max), np.int64)
        qs = np.empty((3, width_max), np.float64)
        los = np.empty((3, width_max), np.int64)
        his = np.empty((3, width_max), np.int64)
        w_run = np.empty(width_max, np.float64)
        g_run = np.empty(width_max, np.float64)
        for tile in range(tiles):
            m0 = tile * TILE
            width = min(TILE, n2 - m0)
            for v in range(width):
                _tile_axis(
                    s0[b, i, j, m0 + v],
                    v,
                    i,
                    n0,
                    crops[0],
                    limits[0],
                    truncate,
                    rad[0],
                    qs[0],
                    los[0],
                    his[0],
                )
                _tile_axis(
                    s1[b, i, j, m0 + v],
                    v,
                    j,
                    n1,
                    crops[1],
                    limits[1],
                    truncate,
                    rad[1],
                    qs[1],
                    los[1],
                    his[1],
                )
                _tile_axis(
                    s2[b, i, j, m0 + v],
                    v,
                    m0 + v,
                    n2,
                    crops[2],
                    limits[2],
                    truncate,
                    rad[2],
                    qs[2],
                    los[2],
                    his[2],
                )
            den[:width] = 1.0
            big0 = _tile_table(w0, p0, rad[0], qs[0], los[0], his[0], width, den, w_run, g_run)
            big1 = _tile_table(w1, p1, rad[1], qs[1], los[1], his[1], width, den, w_run, g_run)
            big2 = _tile_table(w2, p2, rad[2], qs[2], los[2], his[2], width, den, w_run, g_run)
            acc[:width] = 0
            for d0 in range(-big0, big0 + 1):
                plane = xp[b, i + p0 + d0]
                mid[:width] = 0
                for d1 in range(-big1, big1 + 1):
                    line = plane[j + p1 + d1]
                    part[:width] = 0
                    for d2 in range(-big2, big2 + 1):
                        _axpy(part, w2[p2 + d2], line, m0 + p2 + d2, width)
                    _axpy(mid, w1[p1 + d1], part, 0, width)
                _axpy(acc, w0[p0 + d0], mid, 0, width)
            for v in range(width):
                out[b, i, j, m0 + v] = acc[v] / den[v]
        for m in range(tiles * TILE if tiled else 0, n2):  # without tiles: pixel by pixel
            r0, h0 = _radius_exponent(s0[b, i, j, m], truncate, limits[0])
            r1, h1 = _radius_exponent(s1[b, i, j, m], truncate, limits[1])
            r2, h2 = _radius_exponent(s2[b, i, j, m], truncate, limits[2])
            lo0, hi0 = _range(r0, i, n0, crops[0])
            lo1, hi1 = _range(r1, j, n1, crops[1])
            lo2, hi2 = _range(r2, m, n2, crops[2])
            den0 = (
                _weights(tmp0, r0, h0, lo0, hi0)
                * _weights(tmp1, r1, h1, lo1, hi1)
                * _weights(tmp2, r2, h2, lo2, hi2)
            )
            total = 0.0
            for d0 in range(lo0, hi0 + 1):
                plane = xp[b, i + p0 + d0]
                partial = 0.0
                for d1 in range(lo1, hi1 + 1):
                    line = plane[j + p1 + d1]
                    row_sum = 0.0
                    for d2 in range(lo2, hi2 + 1):
                        row_sum += tmp2[r2 + d2] * line[m + p2 + d2]
                    partial += tmp1[r1 + d1] * row_sum
                total += tmp0[r0 + d0] * partial
            out[b, i, j, m] = total / den0


@njit(parallel=True, cache=True, nogil=True)
def _varying_kernel(xp, pshape, shape, pad, crop, radius, exponent, out, rmax):  # pragma: no cover
    k = shape.shape[0] - 1
    nk = shape[k]
    rows = out.shape[0] // nk
    pstride = np.empty(k + 1, np.int64)
    step = 1
    for a in range(k, -1, -1):
        pstride[a] = step
        step *= pshape[a]
    for row in prange(rows):
        idx = np.zeros(k, np.int64)
        lo = np.zeros(k, np.int64)
        hi = np.zeros(k, np.int64)
        d = np.zeros(k, np.int64)
        w = np.zeros((k, rmax + 1), np.float64)
        rem = row * 1  # a copy: numba forbids writing to the prange index
        for a in range(k - 2, -1, -1):
            idx[a] = rem % shape[a + 1]
            rem //= shape[a + 1]
        b = rem
        for j in range(nk):
            idx[k - 1] = j
            pix = row * nk + j
            den = 1.0
            for a in range(k):
                r = radius[a, pix]
                h = exponent[a, pix]
                for t in range(r + 1):
                    w[a, t] = np.exp(-(t * t) * h)
                if crop[a]:
                    lo[a] = max(-r, -idx[a])
                    hi[a] = min(r, shape[a + 1] - 1 - idx[a])
                else:
                    lo[a] = -r
                    hi[a] = r
                s = 0.0
                for t in range(lo[a], hi[a] + 1):
                    s += w[a, abs(t)]
                den *= s
            base = b * pstride[0]
            for a in range(k):
                base += (idx[a] + pad[a]) * pstride[a + 1]
            for a in range(k - 1):
                d[a] = lo[a]
            total = 0.0
            while True:  # odometer over the window's outer axes; the last axis is a row
                w_outer = 1.0
                offset = base
                for a in range(k - 1):
                    w_outer *= w[a, abs(d[a])]
                    offset += d[a] * pstride[a + 1]
                row_sum = 0.0
                for t in range(lo[k - 1], hi[k - 1] + 1):
                    row_sum += w[k - 1, abs(t)] * xp[offset + t]
                total += w_outer * row_sum
                a = k - 2
                while a >= 0:
                    d[a] += 1
                    if d[a] <= hi[a]:
                        break
                    d[a] = lo[a]
                    a -= 1
                if a < 0:
                    break
            out[pix] = total / den
