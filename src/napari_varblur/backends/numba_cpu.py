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

from ..plan import AxisPass, MapAxis, from_working_layout, global_plan, map_plan, working_layout
from ..spec import BlurSpec

#: Columns handled together by one parallel job in a pass along a non-last axis.
_BLOCK = 512


def describe() -> str:
    return f"numba {numba.__version__}, {device_name()}"


def device_name() -> str:
    return f"cpu ({numba.get_num_threads()} threads)"


def blur(spec: BlurSpec) -> np.ndarray:
    x = spec.image.astype(spec.precision)  # always a fresh array: the input is never touched
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
    _lines_kernel(
        lines,
        out,
        p.source(),
        x.dtype.type(p.fill),
        p.weights.astype(x.dtype),
        p.scale.astype(x.dtype),
        min(_BLOCK, inner),
    )
    return out.reshape(x.shape)


@njit(parallel=True, cache=True, nogil=True)
def _lines_kernel(lines, out, source, fill, weights, scale, block):  # pragma: no cover - jitted
    outer, n, inner = lines.shape
    m = source.shape[0]
    taps = weights.shape[0]
    nblocks = (inner + block - 1) // block
    for job in prange(outer * nblocks):
        o = job // nblocks
        c0 = (job % nblocks) * block
        width = min(block, inner - c0)
        buf = np.empty((m, width), lines.dtype)
        for j in range(m):
            s = source[j]
            if s >= 0:
                for c in range(width):
                    buf[j, c] = lines[o, s, c0 + c]
            else:
                for c in range(width):
                    buf[j, c] = fill
        acc = np.empty(width, lines.dtype)
        for i in range(n):
            for c in range(width):
                acc[c] = 0
            for t in range(taps):
                w = weights[t]
                for c in range(width):
                    acc[c] += w * buf[i + t, c]
            sc = scale[i]
            for c in range(width):
                out[o, i, c0 + c] = acc[c] * sc


def _varying_blur(x: np.ndarray, spec: BlurSpec, plan: list[MapAxis]) -> np.ndarray:
    work = working_layout(x, spec.axes)
    # Extend every blurred axis by its largest radius, so the kernel never tests modes.
    padded = work
    for a, m in enumerate(plan, start=1):
        source = m.source()
        padded = np.take(padded, np.maximum(source, 0), axis=a)
        if m.fill != 0 or (source < 0).any():
            mask_shape = (1,) * a + (len(source),) + (1,) * (work.ndim - a - 1)
            padded = np.where((source < 0).reshape(mask_shape), padded.dtype.type(m.fill), padded)
    padded = np.ascontiguousarray(padded, dtype=x.dtype)

    def per_pixel(values: np.ndarray, dtype: type) -> np.ndarray:
        full = np.broadcast_to(values, x.shape)
        return np.ascontiguousarray(working_layout(full, spec.axes), dtype=dtype).ravel()

    radius = np.stack([per_pixel(m.radius, np.int32) for m in plan])
    exponent = np.stack([per_pixel(m.exponent, np.float64) for m in plan])
    out = np.empty(work.size, dtype=x.dtype)
    _varying_kernel(
        padded.ravel(),
        np.array(padded.shape, dtype=np.int64),
        np.array(work.shape, dtype=np.int64),
        np.array([m.pad for m in plan], dtype=np.int64),
        np.array([m.crop for m in plan], dtype=np.bool_),
        radius,
        exponent,
        out,
        max(m.pad for m in plan),
    )
    return from_working_layout(out.reshape(work.shape), x.shape, spec.axes)


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
