"""The fit's model: a cubic B-spline map on a control grid, through a logistic, blurred
by the JAX-native API; and the smoothness penalty on its nodes."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ..adapters import jax_api as vjax
from ..core.rules import radius_of


def _bspline(t: np.ndarray) -> np.ndarray:
    """The cubic B-spline kernel (support [-2, 2], partition of unity)."""
    a = np.abs(t)
    return np.where(a < 1, 2 / 3 - a**2 + a**3 / 2, np.where(a < 2, (2 - a) ** 3 / 6, 0.0))


def control_basis(n: int, spacing: float) -> np.ndarray:
    """``(n, m)`` matrix: pixel values of ``m`` cubic B-spline nodes along one axis.

    ``m - 3`` intervals of about ``spacing`` pixels cover ``[0, n - 1]`` exactly; one
    extra node beyond each end keeps the spline free at the border.
    """
    if n == 1:
        return np.ones((1, 1))
    intervals = max(1, round((n - 1) / spacing))
    h = (n - 1) / intervals
    nodes = (np.arange(intervals + 3) - 1) * h
    return _bspline((np.arange(n)[:, None] - nodes[None, :]) / h)


@dataclass(frozen=True)
class Model:
    """Everything static about a fit (hashable): one set of compiled programs each.

    The arrays (images, mask, the B-spline bases) are arguments of the programs, so a
    second fit of the same shape and settings (a napari re-run) compiles nothing.
    """

    shape: tuple[int, ...]
    blurred_axes: tuple[int, ...]
    nodes: tuple[int, ...]  # control nodes along each blurred axis
    per_axis: bool
    max_sigma: float
    modes: tuple
    truncate: float
    masked: bool  # False: every pixel valid (the blur skips the normaliser)
    affine: bool = True  # fit a gain and an offset between the images
    tolerance: float | None = None  # the objective's blur by levels (None: exact)

    @property
    def grid(self) -> tuple[int, ...]:
        return self.nodes + ((len(self.nodes),) if self.per_axis else ())

    @property
    def lead(self) -> tuple[int, ...]:
        """The image's shape with batch axes 1: a map over the blurred axes, placed."""
        return tuple(n if a in self.blurred_axes else 1 for a, n in enumerate(self.shape))

    @property
    def max_radius(self) -> int:
        return int(radius_of(self.max_sigma, self.truncate))  # the contract's rule

    def options(self, mask) -> dict:
        """The blur's keywords (the mask when the fit has one)."""
        return dict(mode=self.modes, truncate=self.truncate, axes=self.blurred_axes,
                    mask=mask if self.masked else None)  # fmt: skip

    def sigma(self, u: jax.Array, bases) -> jax.Array:
        """Node values -> the map as the blur takes it (image-shaped, batch axes
        broadcast, a trailing axis per blurred axis when ``per_axis``)."""
        for i, basis in enumerate(bases):
            u = jnp.moveaxis(jnp.tensordot(basis, u, axes=(1, i)), 0, i)
        s = self.max_sigma * jax.nn.sigmoid(u)
        tail = s.shape[len(bases) :]
        return jnp.broadcast_to(s.reshape(self.lead + tail), self.shape + tail)

    def blur(self, sharp, sigma, mask, exact: bool = False):
        """The model's blur; by levels within ``tolerance`` unless ``exact``."""
        tolerance = None if exact else self.tolerance
        return vjax.gaussian_blur(sharp, sigma, max_radius=self.max_radius, tolerance=tolerance,
                                  **self.options(mask))  # fmt: skip


def reduce_to_grid(model: Model, values: np.ndarray, matrices) -> np.ndarray:
    """``values`` summed over batch axes, then multiplied along each blurred axis by its
    matrix (``(m, n)`` for an axis of ``n`` pixels): onto the nodes, or a footprint."""
    batch = tuple(a for a in range(values.ndim) if a not in model.blurred_axes)
    total = values.sum(axis=batch) if batch else values
    for i, matrix in enumerate(matrices):
        total = np.moveaxis(np.tensordot(matrix, total, axes=(1, i)), 0, i)
    return total


def gain_offset(image, y, weight, xp=jnp):
    """Weighted least squares of ``y ~ gain * image + offset`` (``weight`` 0 outside
    the valid pixels, where a masked blur may be NaN); gain 0 for a flat image."""
    image = xp.where(weight > 0, image, 0)
    mm, ym = xp.sum(weight * image), xp.sum(weight * y)
    var = xp.sum(weight * (image - mm) ** 2)
    gain = xp.sum(weight * (image - mm) * (y - ym)) / xp.maximum(var, 1e-12)
    return gain, ym - gain * mm


def penalty(u: jax.Array, k: int, xp=jnp) -> jax.Array:
    """Mean squared second difference of the nodes along each grid axis."""
    total = xp.zeros((), u.dtype)
    for axis in range(k):
        if u.shape[axis] >= 3:
            total = total + xp.mean(xp.diff(u, n=2, axis=axis) ** 2)
    return total
