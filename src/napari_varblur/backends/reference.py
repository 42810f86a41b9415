"""The reference backend: plain float64 NumPy, written to be obviously right.

It is the oracle for the other backends and for users who want to check a result.
It is not fast: a sigma map costs one full-image operation per window offset.
"""

from __future__ import annotations

import numpy as np

from ..core.spec import BlurSpec
from ..core.taps import (
    AxisPass,
    MapAxis,
    extend_along,
    fold_along,
    global_plan,
    map_plan,
    shape_along,
)
from .base import Backend


def describe() -> str:
    return f"numpy {np.__version__}, {device_name()}"


def device_name() -> str:
    return "cpu (float64 numpy)"


def global_blur(spec: BlurSpec, plan: list[AxisPass] | None = None) -> np.ndarray:
    x = spec.image.astype(np.float64)
    for p in global_plan(spec) if plan is None else plan:
        x = correlate(x, p.axis, p.source(), p.fill, p.weights, p.scale)
    return x.astype(spec.precision)


def gather(spec: BlurSpec, pad_floor: tuple[int, ...] | None = None, memo=None) -> np.ndarray:
    x = _varying_blur(spec.image.astype(np.float64), map_plan(spec, pad_floor))
    return x.astype(spec.precision)


def scatter(spec: BlurSpec, pad_floor: tuple[int, ...] | None = None, memo=None) -> np.ndarray:
    """The exact transpose of :func:`gather` (its linear part)."""
    y = _varying_scatter(spec.image.astype(np.float64), map_plan(spec, pad_floor))
    return y.astype(spec.precision)


def _along(axis: int, ndim: int, index: object) -> tuple:
    """An indexing tuple that applies ``index`` on ``axis`` only."""
    return (slice(None),) * axis + (index,) + (slice(None),) * (ndim - axis - 1)


def correlate(x, axis: int, source, fill: float, weights, scale) -> np.ndarray:
    """One 1-D pass: ``out[i] = scale[i] * sum_t weights[t] * x[source[i + t]]`` along
    ``axis`` (``fill`` where ``source`` is -1), for ``i < len(scale)``."""
    x = np.asarray(x, dtype=np.float64)
    ext = extend_along(x, axis, source, fill)
    n = len(scale)
    out = np.zeros(x.shape[:axis] + (n,) + x.shape[axis + 1 :])
    for t, w in enumerate(weights):
        out += w * ext[_along(axis, x.ndim, slice(t, t + n))]
    return out * np.reshape(scale, shape_along(axis, x.ndim, n))


def _tap_weight(m: MapAxis, d: int, radius: np.ndarray, exponent: np.ndarray, ndim: int):
    """Every pixel's weight for offset ``d`` on axis ``m``: ``exp(-d^2 h)`` where the tap
    counts (within the pixel's radius and, in crop mode, in bounds), else 0; and the
    mask of where it counts."""
    pos = np.arange(m.n).reshape(shape_along(m.axis, ndim, m.n))
    count = abs(d) <= radius
    if m.crop:
        count = count & (pos + d >= 0) & (pos + d < m.n)
    return np.where(count, np.exp(-float(d * d) * exponent), 0.0), count


def _varying_blur(x: np.ndarray, plan: list[MapAxis]) -> np.ndarray:
    """Sum every offset of the window with whole-image operations.

    Weights are evaluated per offset, as the sum goes (never stored per offset), so
    memory does not grow with the number of offsets: the extended image (the image
    padded by the largest radius on every side), the running sum, and one partial
    weight and mask per blurred axis.
    """
    ext = x
    for m in plan:
        ext = extend_along(ext, m.axis, m.source(), m.fill)
    numerator = np.zeros(x.shape)

    def add(window: tuple, w: np.ndarray, count: np.ndarray) -> None:
        # `where`, not a product: a NaN outside a pixel's window must not reach it.
        numerator[...] += np.where(count, w * ext[window], 0.0)

    # A counted tap whose weight underflowed to 0 times an infinite value is NaN: the
    # contract's meaning, so NumPy need not warn about it.
    with np.errstate(invalid="ignore"):
        _each_tap(plan, x.shape, add)
    return numerator / _normaliser(plan, x.ndim)


def _varying_scatter(y: np.ndarray, plan: list[MapAxis]) -> np.ndarray:
    """The transpose of :func:`_varying_blur`: every pixel's value over its own
    normaliser, spread over the extended image offset by offset with its own weights,
    then the extension folded back (the last axis extended is folded first)."""
    z = y / _normaliser(plan, y.ndim)
    shape = list(y.shape)
    for m in plan:
        shape[m.axis] = m.n + 2 * m.pad
    ext = np.zeros(shape)

    def add(window: tuple, w: np.ndarray, count: np.ndarray) -> None:
        ext[window] += np.where(count, w * z, 0.0)

    with np.errstate(invalid="ignore"):
        _each_tap(plan, y.shape, add)
    for m in reversed(plan):
        ext = fold_along(ext, m.axis, m.source(), m.n)
    return ext


def _normaliser(plan: list[MapAxis], ndim: int) -> np.ndarray:
    """Each pixel's normaliser: the product over axes of its counted weights' sum."""
    denominator = np.ones(())
    for m in plan:
        r, h = m.radius(), m.exponent()
        total = sum(_tap_weight(m, d, r, h, ndim)[0] for d in range(-m.pad, m.pad + 1))
        denominator = denominator * total
    return denominator


def _each_tap(plan: list[MapAxis], shape: tuple[int, ...], add) -> None:
    """``add(window, w, count)`` for every combination of offsets: the window of the
    extended image it reads, each pixel's weight and whether the tap counts."""
    radii = [m.radius() for m in plan]
    exponents = [m.exponent() for m in plan]

    def visit(a: int, w: np.ndarray, count: np.ndarray, window: list) -> None:
        if a == len(plan):
            add(tuple(window), w, count)
            return
        m = plan[a]
        for t, d in enumerate(range(-m.pad, m.pad + 1)):
            w_d, c_d = _tap_weight(m, d, radii[a], exponents[a], len(shape))
            window[m.axis] = slice(t, t + m.n)
            visit(a + 1, w * w_d, count & c_d, window)

    visit(0, np.ones(shape), np.ones(shape, dtype=bool), [slice(None)] * len(shape))


#: The oracle always gathers: the router walks levels only for backends with a cost table
#: (``correlate`` serves tests that run the walk with float64 NumPy passes).
BACKEND = Backend(
    name="reference",
    global_blur=global_blur,
    gather=gather,
    scatter=scatter,
    correlate=correlate,
    describe=describe,
    device_name=device_name,
)
