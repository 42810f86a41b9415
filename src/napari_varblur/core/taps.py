"""From a :class:`~napari_varblur.core.spec.BlurSpec` to the numbers the backends use.

The contract's arithmetic that is not the convolution itself lives here, in float64,
computed once on the host: radii (``ceil(truncate * sigma)`` from the float64 sigma),
1-D Gaussian taps, crop renormalisation, kernel folding for radii longer than the axis,
and per-pixel radius/weight-exponent arrays for sigma maps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from .modes import Mode
from .rules import exponent_of, radius_of
from .spec import BlurSpec


def gaussian_taps(sigma: float, radius: int) -> np.ndarray:
    """Unnormalised taps ``exp(-d^2 / (2 sigma^2))`` for ``d = -radius .. radius``."""
    with np.errstate(over="ignore"):  # a tiny sigma overflows d / sigma to inf: weight 0
        d = np.arange(-radius, radius + 1, dtype=np.float64) / sigma  # no 0/0 at d = 0
        return np.exp(-0.5 * d * d)


@dataclass(frozen=True)
class AxisPass:
    """A 1-D correlation along one axis: the global-sigma building block.

    ``out[i] = scale[i] * sum_t weights[t] * ext[i - left + t]`` where ``ext`` is the
    axis extended by its mode (``fill`` where the mode reads no pixel).  The taps are
    always contiguous, so every backend can slide a window.
    """

    axis: int
    n: int
    mode: Mode
    left: int
    weights: np.ndarray
    scale: np.ndarray
    fill: float

    @property
    def taps(self) -> int:
        return len(self.weights)

    def source(self) -> np.ndarray:
        """Source index of every position of the extended line (-1: use ``fill``)."""
        return self.mode.extend(np.arange(-self.left, self.n - self.left + self.taps - 1), self.n)


def axis_pass(
    axis: int, n: int, sigma: float, radius: int, mode: Mode, cval: float
) -> AxisPass | None:
    """Plan the 1-D pass for one axis, or ``None`` when the axis is left untouched."""
    if sigma == 0 or radius == 0:
        return None
    if mode.crop:
        # Taps further than n - 1 away are never in bounds: drop them exactly.
        r = min(radius, n - 1)
        w = gaussian_taps(sigma, r)
        # In-bounds offsets of output i are max(-r, -i) .. min(r, n - 1 - i).
        i = np.arange(n)
        lo, hi = np.maximum(-r, -i), np.minimum(r, n - 1 - i)
        cum = np.concatenate(([0.0], np.cumsum(w)))
        scale = 1.0 / (cum[hi + r + 1] - cum[lo + r])
        return AxisPass(axis, n, mode, r, w, scale, 0.0)
    w = gaussian_taps(sigma, radius)
    w, left = mode.fold(w / w.sum(), radius, n)
    return AxisPass(axis, n, mode, left, w, np.ones(n), mode.fill(cval))


def level_pass(
    axis: int, n: int, sigma: float, radius: int, mode: Mode, cval: float, dtype
) -> AxisPass | None:
    """A sigma level's pass: :func:`axis_pass`, its weights :func:`floored` in ``dtype``
    (``None``: the axis untouched, sigma 0).  In another precision (float16, in the
    JAX-native API), whose smallest normal weight is its share floor, a level whose
    off-centre weights all underflow leaves its axis untouched instead."""
    p = axis_pass(axis, n, sigma, radius, mode, cval)
    if p is None:
        return None
    if np.dtype(dtype).name not in UNDERFLOW_WEIGHT:
        w = p.weights.astype(dtype)
        one = np.count_nonzero(w) == 1 and p.taps > 1 and w[int(np.argmax(w))] > 0
        return None if one else p
    w = floored(p.weights, dtype)
    return p if w is p.weights else replace(p, weights=w)


def floored(weights: np.ndarray, dtype) -> np.ndarray:
    """``weights`` (float64) with those below ``dtype``'s smallest normal number (0 or
    subnormal there: a sigma below about 0.1 in float32, 0.026 in float64) raised to
    :data:`UNDERFLOW_WEIGHT` (``weights`` itself where none is, or in another dtype).

    A level is mixed into pixels whose own weights on those taps are not 0, and the
    exact blur of a pixel whose own weights underflow still multiplies its taps: so a
    NaN there reaches every pixel it reaches in the exact blur, and an inf stays inf
    (``0 * inf`` would be NaN; XLA flushes subnormals to 0, so they are raised too).
    The weight is far below the rounding of any sum and below the masked blur's
    smallest valid share (:data:`~.rules.SHARE_FLOOR`), so a masked pixel whose only
    valid taps carry it stays NaN, as with a weight of 0.
    """
    dtype = np.dtype(dtype)
    if dtype.name not in UNDERFLOW_WEIGHT:
        return weights
    small = np.abs(np.asarray(weights, np.float64)) < np.finfo(dtype).tiny
    if not small.any():
        return weights
    return np.where(small, UNDERFLOW_WEIGHT[dtype.name], weights)


#: The weight of a level's tap that underflows to 0 in the working precision
#: (:func:`floored`): a normal number, 2^10 below :data:`~.rules.SHARE_FLOOR`.
UNDERFLOW_WEIGHT = {"float32": 2.0**-110, "float64": 2.0**-810}


def map_limit(mode: Mode, n: int) -> int:
    """A sigma map's radius cap on an axis of length ``n`` (``NO_LIMIT`` for none)."""
    limit = mode.map_limit(n)
    return NO_LIMIT if limit is None else limit


def global_radius(spec: BlurSpec, i: int) -> int:
    """The radius of blurred axis ``i`` of a global blur (0: untouched)."""
    if spec.sigma[i] == 0:
        return 0
    return (
        spec.radius[i] if spec.radius is not None else int(radius_of(spec.sigma[i], spec.truncate))
    )


def global_plan(spec: BlurSpec) -> list[AxisPass]:
    """The 1-D passes of a global-sigma blur (axes with sigma 0 are skipped)."""
    assert spec.sigma is not None
    passes = []
    for i, axis in enumerate(spec.axes):
        r = global_radius(spec, i)
        p = axis_pass(axis, spec.shape[axis], spec.sigma[i], r, spec.modes[i], spec.cval)
        if p is not None:
            passes.append(p)
    return passes


#: Cap on a sigma map's per-pixel radius where the mode sets none (the spec refuses
#: radii beyond the mode's limit, so this is never reached).
NO_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class MapAxis:
    """One blurred axis of a spatially varying blur.

    ``sigma`` broadcasts to the image's shape (float32 or float64; its float64 value is
    what counts).  A pixel's radius is ``min(ceil(truncate * sigma), limit)``: ``limit``
    is ``n - 1`` in crop mode (farther taps are never in bounds) and unbounded
    otherwise.  ``pad`` is at least the largest radius: backends read the axis extended
    by ``pad`` on both sides (``source()``) and, in crop mode, count only in-bounds taps.
    """

    axis: int
    n: int
    mode: Mode
    pad: int
    sigma: np.ndarray
    truncate: float
    limit: int
    fill: float

    @property
    def crop(self) -> bool:
        return self.mode.crop

    def radius(self, limit: int | None = None) -> np.ndarray:
        """Per-pixel radius (int32, broadcastable to the image), capped at ``limit``
        (default: this axis's own limit)."""
        cap = self.limit if limit is None else limit
        r = radius_of(self.sigma, self.truncate)
        return np.minimum(r, cap, out=r).astype(np.int32)

    def exponent(self, dtype: type = np.float64) -> np.ndarray:
        """Per-pixel ``1 / (2 sigma^2)`` (broadcastable to the image)."""
        return exponent_of(self.sigma, dtype)

    def source(self) -> np.ndarray:
        return self.mode.extend(np.arange(-self.pad, self.n + self.pad), self.n)


def map_plan(spec: BlurSpec, pad_floor: tuple[int, ...] | None = None) -> list[MapAxis]:
    """The per-axis description of a sigma-map blur (arrays are computed on demand).

    ``pad_floor`` raises each axis's padding (chunks of one dask array share it, so
    they share static shapes); taps beyond a pixel's radius are never counted.
    """
    assert spec.sigma_map is not None
    out = []
    for i, axis in enumerate(spec.axes):
        n, mode = spec.shape[axis], spec.modes[i]
        limit = map_limit(mode, n)
        # ceil is monotone, so the largest radius comes from the largest sigma.
        pad = min(float(radius_of(spec.sigma_max[i], spec.truncate)), limit)
        if pad_floor is not None:
            pad = max(pad, min(pad_floor[i], limit))
        out.append(
            MapAxis(axis, n, mode, int(pad), spec.sigma_map[i], spec.truncate, limit,
                    mode.fill(spec.cval))
        )  # fmt: skip
    return out


def shape_along(axis: int, ndim: int, n: int) -> tuple[int, ...]:
    """The shape that puts ``n`` values along ``axis`` of an ``ndim``-D array."""
    return (1,) * axis + (n,) + (1,) * (ndim - axis - 1)


def extend_along(x: np.ndarray, axis: int, source: np.ndarray, fill: float) -> np.ndarray:
    """``x`` extended along ``axis``: position j reads ``x[source[j]]`` (a mode's
    ``extend``), or ``fill`` where ``source[j]`` is -1.  A new array; the fill is
    written in place, so memory holds ``x`` and the result, nothing more."""
    ext = np.take(x, np.maximum(source, 0), axis=axis)
    outside = np.flatnonzero(source < 0)
    if outside.size:
        ext[(slice(None),) * axis + (outside,)] = fill
    return ext


def fold_into_middle(ext: np.ndarray, axis: int, source: np.ndarray, n: int, left: int):
    """:func:`fold_along` in place, where ``ext``'s middle ``left : left + n`` along
    ``axis`` is the line itself (``source`` there is ``0 .. n-1``): each position
    outside it adds into the middle position it read, and the middle is returned (a
    view of ``ext``, which is changed).  No new image-sized array: only the ends move.
    Any other ``source`` goes by :func:`fold_along` (a new array)."""
    source = np.asarray(source)
    if not np.array_equal(source[left : left + n], np.arange(n)):
        return fold_along(ext, axis, source, n)
    at = lambda index: (slice(None),) * axis + (index,)  # noqa: E731
    for j in (*range(left), *range(left + n, len(source))):
        if source[j] >= 0:
            ext[at(left + int(source[j]))] += ext[at(j)]
    return ext[at(slice(left, left + n))]


def fold_along(ext: np.ndarray, axis: int, source: np.ndarray, n: int) -> np.ndarray:
    """The transpose of :func:`extend_along`: position ``j`` of ``ext`` along ``axis``
    adds into position ``source[j]`` of a new array of length ``n`` there (float64, or
    float32 for a float32 ``ext``); positions that read no pixel (-1: a fill tap) are
    dropped.  The run where ``source`` is a plain shift is one slice; the folded ends go
    one slab at a time."""
    source = np.asarray(source)
    shape = ext.shape[:axis] + (n,) + ext.shape[axis + 1 :]
    out = np.zeros(shape, np.float32 if ext.dtype == np.float32 else np.float64)
    at = lambda index: (slice(None),) * axis + (index,)  # noqa: E731
    kept = np.flatnonzero(source >= 0)
    if not kept.size:
        return out
    shift = kept - source[kept]
    run = kept[shift == np.bincount(shift - shift.min()).argmax() + shift.min()]
    lo, hi = int(run[0]), int(run[-1]) + 1
    if np.all(source[lo:hi] == np.arange(lo, hi) - (lo - source[lo])):
        out[at(slice(source[lo], source[lo] + hi - lo))] += ext[at(slice(lo, hi))]
        kept = kept[(kept < lo) | (kept >= hi)]
    for j in kept:
        out[at(int(source[j]))] += ext[at(int(j))]
    return out


def padding_order(modes: Sequence[Mode]) -> list[int]:
    """The order in which to extend a map blur's axes (given their modes): crop axes
    last, so that the corners they share with another axis's extension are zeros too
    (kernels that read a whole tile's window weight those corner taps by 0 and rely on
    them adding 0, never a cval or an extended NaN)."""
    return sorted(range(len(modes)), key=lambda a: modes[a].crop)


def working_layout(array: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """View ``array`` with the batch axes flattened in front and ``axes`` after them
    (NumPy or JAX: array methods only)."""
    batch = [a for a in range(array.ndim) if a not in axes]
    moved = array.transpose(tuple(batch + list(axes)))
    return moved.reshape((-1,) + tuple(array.shape[a] for a in axes))


def from_working_layout(
    work: np.ndarray, shape: tuple[int, ...], axes: tuple[int, ...]
) -> np.ndarray:
    """Inverse of :func:`working_layout` for an array of the image's ``shape``."""
    batch = [a for a in range(len(shape)) if a not in axes]
    order = batch + list(axes)
    moved = work.reshape(tuple(shape[a] for a in order))
    return moved.transpose(tuple(int(i) for i in np.argsort(order)))
