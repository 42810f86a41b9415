"""The reference backend: plain float64 NumPy, written to be obviously right.

It is the oracle for the other backends and for users who want to check a result.
It is not fast: a sigma map costs one full-image operation per window offset.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..plan import AxisPass, MapAxis, global_plan, map_plan
from ..spec import BlurSpec


def describe() -> str:
    return f"numpy {np.__version__}, {device_name()}"


def device_name() -> str:
    return "cpu (float64 numpy)"


def blur(spec: BlurSpec) -> np.ndarray:
    x = spec.image.astype(np.float64)
    if spec.sigma is not None:
        for p in global_plan(spec):
            x = _correlate_axis(x, p)
    else:
        x = _varying_blur(x, map_plan(spec))
    return x.astype(spec.precision)


def _along(axis: int, ndim: int, index: object) -> tuple:
    """An indexing tuple that applies ``index`` on ``axis`` only."""
    return (slice(None),) * axis + (index,) + (slice(None),) * (ndim - axis - 1)


def _extend(x: np.ndarray, axis: int, source: np.ndarray, fill: float) -> np.ndarray:
    """``x`` extended along ``axis``: position j reads ``x[source[j]]``, or ``fill``."""
    ext = np.take(x, np.maximum(source, 0), axis=axis)
    outside = (source < 0).reshape(_shape_along(axis, x.ndim, len(source)))
    return np.where(outside, fill, ext)


def _shape_along(axis: int, ndim: int, n: int) -> tuple[int, ...]:
    return (1,) * axis + (n,) + (1,) * (ndim - axis - 1)


def _correlate_axis(x: np.ndarray, p: AxisPass) -> np.ndarray:
    ext = _extend(x, p.axis, p.source(), p.fill)
    out = np.zeros_like(x)
    for t, w in enumerate(p.weights):
        out += w * ext[_along(p.axis, x.ndim, slice(t, t + p.n))]
    return out * p.scale.reshape(_shape_along(p.axis, x.ndim, p.n))


def _varying_blur(x: np.ndarray, plan: list[MapAxis]) -> np.ndarray:
    ext = x
    for m in plan:
        ext = _extend(ext, m.axis, m.source(), m.fill)

    # Per axis and offset d: the tap's weight at every pixel, and whether it counts.
    weights, counts, denominator = [], [], np.ones(x.shape)
    for m in plan:
        pos = np.arange(m.n).reshape(_shape_along(m.axis, x.ndim, m.n))
        radius, exponent = m.radius(), m.exponent()
        w_axis, c_axis = [], []
        for d in range(-m.pad, m.pad + 1):
            inside = (pos + d >= 0) & (pos + d < m.n) if m.crop else True
            count = (abs(d) <= radius) & inside
            w = np.where(count, np.exp(-float(d * d) * exponent), 0.0)
            w_axis.append(w)
            c_axis.append(count)
        weights.append(w_axis)
        counts.append(c_axis)
        denominator = denominator * sum(w_axis)

    numerator = np.zeros(x.shape)
    for offset in itertools.product(*(range(2 * m.pad + 1) for m in plan)):
        w = np.ones(x.shape)
        count = np.ones(x.shape, dtype=bool)
        window = [slice(None)] * x.ndim
        for m, t, w_axis, c_axis in zip(plan, offset, weights, counts):
            w = w * w_axis[t]
            count = count & c_axis[t]
            window[m.axis] = slice(t, t + m.n)
        # `where`, not a product: a NaN outside a pixel's window must not reach it.
        numerator += np.where(count, w * ext[tuple(window)], 0.0)
    return numerator / denominator
