"""From a :class:`~napari_varblur.spec.BlurSpec` to the numbers the backends use.

The contract's arithmetic that is not the convolution itself lives here, in float64,
computed once on the host: radii (``ceil(truncate * sigma)`` from the float64 sigma),
1-D Gaussian taps, crop renormalisation, kernel folding for radii longer than the axis,
and per-pixel radius/weight-exponent arrays for sigma maps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .boundary import extend_indices, period
from .spec import MAX_GLOBAL_RADIUS, BlurSpec


def radius_of(sigma: np.ndarray | float, truncate: float) -> np.ndarray:
    """Contract radius ``ceil(truncate * sigma)``, always evaluated in float64."""
    product = np.multiply(sigma, np.float64(truncate), dtype=np.float64)
    return np.ceil(product, out=product) if isinstance(product, np.ndarray) else np.ceil(product)


#: Cap on ``1/(2 sigma^2)``: finite even in float32, and exp(-d^2 * cap) is 0 for d >= 1,
#: so a tiny sigma acts as a delta instead of producing 0 * inf = NaN at d = 0.
MAX_EXPONENT = 1e30


def exponent_of(sigma: np.ndarray, dtype: type = np.float64) -> np.ndarray:
    """``1 / (2 sigma^2)``, the factor in ``exp(-d^2 * h)``; 0 where sigma is 0.

    ``dtype`` is the arithmetic's (float32 for a float32 backend: the weights are only as
    precise as that anyway; radii never come from this).
    """
    original = np.asarray(sigma)
    s = original.astype(dtype, copy=False)
    h = np.zeros_like(s)
    with np.errstate(over="ignore", under="ignore", divide="ignore"):  # tiny sigma: h = inf
        np.divide(0.5, s * s, out=h, where=s > 0)
    np.minimum(h, MAX_EXPONENT, out=h)
    if s.dtype.itemsize < original.dtype.itemsize:
        # A sigma too small for the narrower dtype became 0: it is still a delta.
        h[(s == 0) & (original > 0)] = MAX_EXPONENT
    return h


def gaussian_taps(sigma: float, radius: int) -> np.ndarray:
    """Unnormalised taps ``exp(-d^2 / (2 sigma^2))`` for ``d = -radius .. radius``."""
    with np.errstate(over="ignore"):  # a tiny sigma overflows d / sigma to inf: weight 0
        d = np.arange(-radius, radius + 1, dtype=np.float64) / sigma  # no 0/0 at d = 0
        return np.exp(-0.5 * d * d)


@dataclass(frozen=True)
class AxisPass:
    """A 1-D correlation along one axis: the global-sigma building block.

    ``out[i] = scale[i] * sum_t weights[t] * ext[i - left + t]`` where ``ext`` is the
    axis extended by :func:`~napari_varblur.boundary.extend_indices` (``fill`` where it
    gives -1).  The taps are always contiguous, so every backend can slide a window.
    """

    axis: int
    n: int
    mode: str
    left: int
    weights: np.ndarray
    scale: np.ndarray
    fill: float

    @property
    def taps(self) -> int:
        return len(self.weights)

    def source(self) -> np.ndarray:
        """Source index of every position of the extended line (-1: use ``fill``)."""
        return extend_indices(
            np.arange(-self.left, self.n - self.left + self.taps - 1), self.n, self.mode
        )


def axis_pass(
    axis: int, n: int, sigma: float, radius: int, mode: str, cval: float
) -> AxisPass | None:
    """Plan the 1-D pass for one axis, or ``None`` when the axis is left untouched."""
    if sigma == 0 or radius == 0:
        return None
    if radius > MAX_GLOBAL_RADIUS:
        raise ValueError(
            f"sigma: radius {radius} on axis {axis} is too large (limit {MAX_GLOBAL_RADIUS}); "
            "lower sigma or truncate"
        )
    if mode == "crop":
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
    w /= w.sum()
    left, taps = radius, 2 * radius + 1
    per = period(n, mode)
    if per is not None and taps > per:
        # Periodic extension: taps whose offsets agree modulo the period read the same pixel.
        w = np.bincount(np.mod(np.arange(-radius, radius + 1), per), weights=w, minlength=per)
        left = 0
    elif mode == "nearest" and radius > n - 1:
        # Offsets beyond n - 1 read the edge pixel from every output position.
        w = _lump(w, radius, n - 1)
        left = n - 1
    elif mode == "constant" and radius > n:
        # Offsets beyond n read cval from every output position.
        w = _lump(w, radius, n)
        left = n
    return AxisPass(axis, n, mode, left, w, np.ones(n), cval if mode == "constant" else 0.0)


def _lump(w: np.ndarray, radius: int, keep: int) -> np.ndarray:
    """Fold the weights of offsets beyond +-keep onto +-keep."""
    out = w[radius - keep : radius + keep + 1].copy()
    out[0] += w[: radius - keep].sum()
    out[-1] += w[radius + keep + 1 :].sum()
    return out


def global_plan(spec: BlurSpec) -> list[AxisPass]:
    """The 1-D passes of a global-sigma blur (axes with sigma 0 are skipped)."""
    assert spec.sigma is not None
    passes = []
    for i, axis in enumerate(spec.axes):
        s = spec.sigma[i]
        r = spec.radius[i] if spec.radius is not None else int(radius_of(s, spec.truncate))
        p = axis_pass(axis, spec.shape[axis], s, r, spec.modes[i], spec.cval)
        if p is not None:
            passes.append(p)
    return passes


#: For a sigma map in a mode other than crop, the largest radius we accept on an axis
#: of length n is max(MAP_RADIUS_FACTOR * n, MAP_RADIUS_FLOOR): per-pixel kernels cannot
#: be folded cheaply, and beyond this the work grows without changing the image much.
MAP_RADIUS_FACTOR = 4
MAP_RADIUS_FLOOR = 256


@dataclass(frozen=True)
class MapAxis:
    """One blurred axis of a spatially varying blur.

    ``sigma`` broadcasts to the image's shape (float32 or float64; its float64 value is
    what counts).  A pixel's radius is ``min(ceil(truncate * sigma), limit)``: ``limit``
    is ``n - 1`` in crop mode (farther taps are never in bounds) and unbounded
    otherwise.  ``pad`` is the largest radius: backends read the axis extended by
    ``pad`` on both sides (``source()``) and, in crop mode, count only in-bounds taps.
    """

    axis: int
    n: int
    mode: str
    pad: int
    sigma: np.ndarray
    truncate: float
    limit: int
    fill: float

    @property
    def crop(self) -> bool:
        return self.mode == "crop"

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
        return extend_indices(np.arange(-self.pad, self.n + self.pad), self.n, self.mode)


def map_plan(spec: BlurSpec) -> list[MapAxis]:
    """The per-axis description of a sigma-map blur (arrays are computed on demand)."""
    assert spec.sigma_map is not None
    out = []
    for i, axis in enumerate(spec.axes):
        sig = spec.sigma_map[i]
        n = spec.shape[axis]
        mode = spec.modes[i]
        # ceil is monotone, so the largest radius comes from the largest sigma.
        rmax = float(radius_of(sig.max(), spec.truncate)) if sig.size else 0.0
        if mode == "crop":
            limit = n - 1  # taps farther away are never in bounds: dropping them is exact
        else:
            limit = MAX_GLOBAL_RADIUS
            allowed = max(MAP_RADIUS_FACTOR * n, MAP_RADIUS_FLOOR)
            if rmax > allowed:
                too_far = radius_of(sig, spec.truncate) > allowed
                first = tuple(int(j) for j in np.argwhere(too_far)[0])
                raise ValueError(
                    f"sigma: the sigma map needs radius {rmax:.0f} on axis {axis} (at index "
                    f"{first}), far beyond that axis's {n} pixels; in mode {mode!r} a sigma "
                    f"map supports radii up to {allowed}. Use mode='crop', a smaller sigma or "
                    "truncate, or a global sigma"
                )
        if spec.map_pads is not None:
            rmax = max(rmax, spec.map_pads[i])
        out.append(
            MapAxis(
                axis=axis,
                n=n,
                mode=mode,
                pad=int(min(rmax, limit)),
                sigma=sig,
                truncate=spec.truncate,
                limit=limit,
                fill=spec.cval if mode == "constant" else 0.0,
            )
        )
    return out


def working_layout(array: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """View ``array`` with the batch axes flattened in front and ``axes`` after them."""
    batch = [a for a in range(array.ndim) if a not in axes]
    moved = np.transpose(array, batch + list(axes))
    return moved.reshape((-1,) + tuple(array.shape[a] for a in axes))


def from_working_layout(
    work: np.ndarray, shape: tuple[int, ...], axes: tuple[int, ...]
) -> np.ndarray:
    """Inverse of :func:`working_layout` for an array of the image's ``shape``."""
    batch = [a for a in range(len(shape)) if a not in axes]
    order = batch + list(axes)
    moved = work.reshape(tuple(shape[a] for a in order))
    return np.transpose(moved, np.argsort(order))
