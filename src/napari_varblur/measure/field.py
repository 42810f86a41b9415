"""The field: a smooth model of the kept beads' sigmas over the image.

A polynomial in the pixel coordinates (scaled to [-1, 1]) of a degree chosen by the
data (the corrected Akaike criterion), fitted by weighted least squares with each
bead's variance plus an intrinsic scatter ``tau^2`` (beads differ more than their
standard errors say: sizes, local aberrations), estimated with the coefficients.
Beads more than :data:`OUTLIER` standard deviations off are left out one at a time
(the worst first) and the model refitted.  Outside the kept beads' bounding box the
coordinates are clamped to it (a polynomial must not run away); pixels outside their
convex hull are flagged as extrapolated and their uncertainty includes the difference
the clamping made.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

#: A bead this many standard deviations (its own and the scatter) off the model is an
#: outlier.
OUTLIER = 4.0
#: The largest degree tried, by the number of axes.
MAX_DEGREE = {2: 4, 3: 3}


@dataclass(frozen=True)
class Field:
    """One fitted polynomial: its ``exponents`` ``(T, ndim)``, coefficients and their
    covariance, the intrinsic scatter ``tau`` and the coordinates' scaling."""

    exponents: np.ndarray
    coefficients: np.ndarray
    covariance: np.ndarray
    tau: float
    shape: tuple[int, ...]

    @property
    def degree(self) -> int:
        return int(self.exponents.sum(axis=1).max(initial=0))

    def terms(self, points: np.ndarray) -> np.ndarray:
        u = 2.0 * points / np.maximum(np.asarray(self.shape) - 1.0, 1.0) - 1.0
        return np.prod(u[:, None, :] ** self.exponents[None], axis=-1)

    def value(self, points: np.ndarray) -> np.ndarray:
        return self.terms(points) @ self.coefficients

    def error(self, points: np.ndarray) -> np.ndarray:
        terms = self.terms(points)
        return np.sqrt(np.maximum(np.einsum("nt,tu,nu->n", terms, self.covariance, terms), 0))


def exponents(ndim: int, degree: int) -> np.ndarray:
    found = [e for e in itertools.product(range(degree + 1), repeat=ndim) if sum(e) <= degree]
    return np.array(sorted(found, key=lambda e: (sum(e), e[::-1])), dtype=np.int64)


def _weighted(terms, values, errors, tau):
    weight = 1.0 / (errors**2 + tau**2)
    normal = terms.T @ (terms * weight[:, None])
    covariance = np.linalg.pinv(normal)
    coefficients = covariance @ (terms.T @ (weight * values))
    return coefficients, covariance, values - terms @ coefficients


def _solve(terms, values, errors):
    """Coefficients and scatter: ``tau^2`` by the fixed point that makes the weighted
    squared residuals match their expected variance."""
    tau = 0.0
    for _ in range(30):
        coefficients, covariance, residual = _weighted(terms, values, errors, tau)
        weight = 1.0 / (errors**2 + tau**2)
        dof = max(len(values) - terms.shape[1], 1)
        excess = np.sum(weight**2 * (residual**2 * len(values) / dof - errors**2))
        new = np.sqrt(max(excess / np.sum(weight**2), 0.0))
        if abs(new - tau) <= 1e-6 * max(tau, 1e-12):
            break
        tau = new
    return coefficients, covariance, residual, tau


def _criterion(values, errors, residual, tau, count) -> float:
    """The corrected Akaike criterion (``count`` parameters, tau included)."""
    variance = errors**2 + tau**2
    n = len(values)
    likelihood = np.sum(residual**2 / variance + np.log(2 * np.pi * variance))
    return likelihood + 2 * count + 2 * count * (count + 1) / max(n - count - 1, 1e-9)


def fit(points, values, errors, shape, degree: int | None = None) -> tuple[Field, np.ndarray]:
    """The field over ``points`` and which of them it kept (the others: outliers)."""
    kept = np.ones(len(values), dtype=bool)
    while True:
        field, residual = _select(points[kept], values[kept], errors[kept], shape, degree)
        spread = np.sqrt(errors[kept] ** 2 + _robust_tau(residual, errors[kept]) ** 2)
        score = np.abs(residual) / spread
        if score.size == 0 or score.max() <= OUTLIER or kept.sum() <= len(values) * 0.6:
            return field, kept
        kept[np.flatnonzero(kept)[np.argmax(score)]] = False


def _robust_tau(residual: np.ndarray, errors: np.ndarray) -> float:
    """The scatter that makes the median squared standardised residual a chi-square's
    (0.455): unlike the fitted ``tau``, an outlier barely moves it."""

    def median(tau):
        return np.median(residual**2 / (errors**2 + tau**2))

    if residual.size == 0 or median(0.0) <= 0.455:
        return 0.0
    low, high = 0.0, float(np.max(np.abs(residual))) + 1e-12
    for _ in range(50):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if median(middle) > 0.455 else (low, middle)
    return high


def _select(points, values, errors, shape, degree):
    ndim = points.shape[1]
    tried = [degree] if degree is not None else range(MAX_DEGREE[ndim] + 1)
    best = None
    for d in tried:
        powers = exponents(ndim, d)
        if degree is None and len(values) < len(powers) + 3 and d > 0:
            break
        terms = Field(powers, np.zeros(0), np.zeros(0), 0.0, shape).terms(points)
        coefficients, covariance, residual, tau = _solve(terms, values, errors)
        score = _criterion(values, errors, residual, tau, len(powers) + 1)
        if best is None or score < best[0]:
            best = (score, Field(powers, coefficients, covariance, tau, shape), residual)
    return best[1], best[2]


def render(fields: list[Field], points: np.ndarray, shape: tuple[int, ...]):
    """The fields on every pixel of ``shape``: the map and its uncertainty (``shape``
    plus one entry per field, float32) and the extrapolated pixels (outside the convex
    hull of ``points``, the kept beads).  Evaluated on a grid of at most 65 nodes per
    axis (33 in 3-D) and interpolated linearly: a low-degree polynomial is smooth at
    that scale (a quadratic spanning 1.8 px over the field is off by under 0.002 px
    between 33 nodes)."""
    from .detect import upsample

    count = 65 if len(shape) == 2 else 33
    nodes = [np.unique(np.round(np.linspace(0, n - 1, min(n, count)))) for n in shape]
    grid = np.stack(np.meshgrid(*nodes, indexing="ij"), axis=-1).reshape(-1, len(shape))
    clamped = np.clip(grid, points.min(axis=0), points.max(axis=0))
    outside = _outside_hull(points, grid)
    values, errors = [], []
    for field in fields:
        value = field.value(clamped)
        moved = np.abs(field.value(grid) - value)
        values.append(value)
        errors.append(field.error(clamped) + np.where(outside, moved, 0.0))
    coarse = tuple(len(n) for n in nodes)
    sigma_map = np.stack([upsample(v.reshape(coarse), shape, nodes) for v in values], axis=-1)
    error = np.stack([upsample(e.reshape(coarse), shape, nodes) for e in errors], axis=-1)
    flagged = upsample(outside.reshape(coarse).astype(np.float32), shape, nodes) > 0.5
    return sigma_map, error, flagged


def _outside_hull(points: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Grid points outside the convex hull of ``points`` (their bounding box when the
    hull is flat: too few beads, or all in one plane)."""
    from scipy.spatial import Delaunay, QhullError

    box = np.any((grid < points.min(axis=0)) | (grid > points.max(axis=0)), axis=1)
    if len(points) <= points.shape[1]:
        return box
    try:
        return Delaunay(points).find_simplex(grid) < 0
    except QhullError:
        return box
