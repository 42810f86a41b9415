"""Gaussians plus a background, fitted to many small windows at once: weighted
Levenberg-Marquardt over a batch (one damping per bead), with standard errors.

The model of a window is ``b + sum_k A_k exp(-sum_i (x_i - c_ki)^2 / (2 s_i^2))``: the
blur's sampled kernel centred at ``c_k`` (sub-pixel), so a fitted ``s`` is the sigma to
hand to ``gaussian_blur``.  ``K`` components (1 for a bead, 2 for the doublet test)
share the sigmas; a sigma is fitted as its logarithm (positive, and its error
relative).  Parameters, in order: ``b``, ``A_1..A_K``, ``c_1 (ndim)..c_K``, ``log s``
(``ndim`` of them, or one when isotropic).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Levenberg-Marquardt's damping at the start, and its bounds.
DAMPING, MAX_DAMPING = 1e-2, 1e10


@dataclass(frozen=True)
class Layout:
    """Where each parameter sits in a parameter vector."""

    ndim: int
    components: int = 1
    isotropic: bool = False

    @property
    def sigmas(self) -> int:
        return 1 if self.isotropic else self.ndim

    @property
    def size(self) -> int:
        return 1 + self.components * (1 + self.ndim) + self.sigmas

    @property
    def amplitudes(self) -> slice:
        return slice(1, 1 + self.components)

    @property
    def centres(self) -> slice:
        start = 1 + self.components
        return slice(start, start + self.components * self.ndim)

    @property
    def log_sigmas(self) -> slice:
        return slice(self.size - self.sigmas, self.size)


def evaluate(params: np.ndarray, grid: np.ndarray, layout: Layout):
    """The model ``(B, N)`` and its Jacobian ``(B, N, P)`` for ``B`` parameter vectors on
    the ``(N, ndim)`` pixel offsets ``grid``."""
    count, k, nd = len(params), layout.components, layout.ndim
    amplitude = params[:, layout.amplitudes]
    centre = params[:, layout.centres].reshape(count, k, 1, nd)
    sigma = np.broadcast_to(np.exp(params[:, layout.log_sigmas]), (count, nd))
    u = (grid[None, None] - centre) / sigma[:, None, None, :]  # (B, K, N, nd)
    shape = np.exp(-0.5 * np.sum(u * u, axis=-1))  # (B, K, N)
    weighted = amplitude[:, :, None] * shape
    model = params[:, :1] + weighted.sum(axis=1)
    jac = np.empty((count, grid.shape[0], layout.size))
    jac[:, :, 0] = 1.0
    jac[:, :, layout.amplitudes] = shape.transpose(0, 2, 1)
    moved = weighted[..., None] * u / sigma[:, None, None, :]
    jac[:, :, layout.centres] = moved.transpose(0, 2, 1, 3).reshape(count, -1, k * nd)
    widened = np.sum(weighted[..., None] * u * u, axis=1)  # (B, N, nd)
    jac[:, :, layout.log_sigmas] = widened.sum(-1, keepdims=True) if layout.isotropic else widened
    return model, jac


@dataclass
class Fitted:
    """A batch's fits: parameters, covariance (scaled by the reduced chi-square when it
    exceeds one), chi-square, degrees of freedom and whether each converged."""

    params: np.ndarray
    covariance: np.ndarray
    chi2: np.ndarray
    dof: np.ndarray
    converged: np.ndarray

    @property
    def reduced(self) -> np.ndarray:
        return self.chi2 / np.maximum(self.dof, 1)

    def subset(self, keep: np.ndarray) -> Fitted:
        return Fitted(self.params[keep], self.covariance[keep], self.chi2[keep],
                      self.dof[keep], self.converged[keep])  # fmt: skip

    @property
    def errors(self) -> np.ndarray:
        return np.sqrt(np.abs(np.diagonal(self.covariance, axis1=1, axis2=2)))


def fit(data, weight, grid, start, layout: Layout, bounds, steps: int = 60) -> Fitted:
    """Fit every row of ``data`` ``(B, N)`` (weights ``weight``: 1/variance, 0 for a
    pixel outside the image) from ``start`` ``(B, P)``, each parameter kept within
    ``bounds`` (``(low, high)``, each ``(B, P)``)."""
    params = np.clip(np.array(start, dtype=np.float64), *bounds)
    model, jac = evaluate(params, grid, layout)
    chi2 = np.sum(weight * (data - model) ** 2, axis=1)
    damping = np.full(len(params), DAMPING)
    active = np.ones(len(params), dtype=bool)
    for _ in range(steps):
        rows = np.flatnonzero(active)
        if rows.size == 0:
            break
        trial = _step(params[rows], data[rows], weight[rows], model[rows], jac[rows], damping[rows])
        trial = np.clip(trial, bounds[0][rows], bounds[1][rows])
        new_model, new_jac = evaluate(trial, grid, layout)
        new_chi2 = np.sum(weight[rows] * (data[rows] - new_model) ** 2, axis=1)
        better = np.isfinite(new_chi2) & (new_chi2 <= chi2[rows])
        small = better & (chi2[rows] - new_chi2 <= 1e-7 * np.maximum(chi2[rows], 1.0))
        take = rows[better]
        params[take], model[take], jac[take], chi2[take] = (
            trial[better], new_model[better], new_jac[better], new_chi2[better])  # fmt: skip
        damping[rows] = np.where(better, damping[rows] * 0.3, damping[rows] * 10.0)
        active[rows[small | (damping[rows] > MAX_DAMPING)]] = False
    # Stopped: no further decrease, or none possible (damping at its bound).
    converged = ~active & np.isfinite(chi2)
    return _finish(params, jac, weight, chi2, layout, converged)


def _step(params, data, weight, model, jac, damping) -> np.ndarray:
    weighted = jac * weight[..., None]
    normal = np.matmul(weighted.transpose(0, 2, 1), jac)  # batched BLAS, not einsum
    gradient = np.matmul(weighted.transpose(0, 2, 1), (data - model)[..., None])[..., 0]
    diagonal = np.diagonal(normal, axis1=1, axis2=2)
    damped = normal + (damping[:, None] * (diagonal + 1e-12))[:, :, None] * np.eye(params.shape[1])
    try:
        return params + np.linalg.solve(damped, gradient[..., None])[..., 0]
    except np.linalg.LinAlgError:  # one singular system: solve bead by bead
        out = params.copy()
        for i in range(len(params)):
            out[i] += np.linalg.lstsq(damped[i], gradient[i], rcond=None)[0]
        return out


def _finish(params, jac, weight, chi2, layout, converged) -> Fitted:
    weighted = jac * weight[..., None]
    normal = np.matmul(weighted.transpose(0, 2, 1), jac)
    dof = np.count_nonzero(weight > 0, axis=1) - layout.size
    covariance = np.full_like(normal, np.nan)
    for i in range(len(params)):
        try:
            covariance[i] = np.linalg.inv(normal[i])
        except np.linalg.LinAlgError:
            converged[i] = False
    scale = np.maximum(chi2 / np.maximum(dof, 1), 1.0)
    return Fitted(params, covariance * scale[:, None, None], chi2, dof, converged)
