"""The fit's standard errors: the covariance of the control nodes, carried to each pixel.

The map at pixel ``p`` is ``s(p) = max_sigma * logistic(b(p) . u)`` with ``b(p)`` the
B-spline row of ``p`` (16 nodes in 2-D), so its variance is ``s'(p)^2 b(p)' C b(p)``
with ``C`` the covariance of the nodes ``u``.  A pixel's error thus depends on every
node under it, and on how well the data hold each of them: near an untextured region
the nodes there, held only by the smoothness penalty, widen it.

``C`` is the sandwich of the penalised least squares, with the penalty read as a prior
(the Bayesian covariance of a penalised spline, which also covers the penalty's bias on
average)::

    C = A^-1 (M + v R) A^-1,   A = G'G + R,   R = smoothness N / 2 * Hessian(P)

``G'G`` is the Gauss-Newton information (``J^2`` less what the sharp image's noise adds
to it on average, :func:`~.noise.derivative_energy`).  ``M``, the score's covariance,
counts both images' noise as it is: the blurred image's per pixel (the squared residual
less the sharp part), and the sharp image's through the blur, which spreads one noisy
sharp pixel over a kernel's worth of residuals, so its terms in the score add up
coherently (``(K J)^2`` instead of ``J^2 S``; ``K`` the blur).  ``v = tr M / tr G'G`` is
the noise level that makes the penalty a prior on the same scale.  Where the penalty's
own pull on the fitted nodes (``A^-1 R u``: a map that bends faster than the nodes and
the penalty allow) is larger than that prior average, its square is used instead.

``z = b(p) . u`` has this variance; the error of ``s`` is the longer side of
``s(z -+ sd)`` (the logistic flattens one side near either end of the range).
"""

from __future__ import annotations

import math

import numpy as np

from .model import Model
from .noise import derivative_energy, energy, host_blur
from .start import trial_sigmas

#: Above this many nodes (a dense covariance: 32 MB) only the local error is used.
MAX_NODES = 2000
#: Blur levels (geometric, over the map's range) for the sharp noise's spread.
LEVELS = 8


def standard_errors(model: Model, bases, fit, residual, y_scale: float, smoothness: float,
                    floor: float) -> np.ndarray:  # fmt: skip
    """Each pixel's standard error of the fitted sigma (the map's shape, or one per
    axis map stacked last when ``per_axis``), pixels; ``inf`` where nothing holds it.

    ``fit`` is the solver's :class:`~.result.Fitted` (``sensitivity`` in ``blurred``'s
    units), ``residual`` ``blurred`` less the model (NaN at invalid pixels).
    """
    valid = np.isfinite(residual)
    sigma = np.asarray(fit.sigma, np.float64)
    maps = sigma.shape[-1] if model.per_axis else 1
    jac = [np.where(valid, j, 0.0) for j in fit.sensitivity]
    sharp2 = np.where(valid, (y_scale * fit.gain * np.asarray(fit.noise_x, np.float64)) ** 2, 0)
    spurious = sharp2 * derivative_energy(sigma, len(bases), model.per_axis, model.max_sigma,
                                          model.truncate)  # fmt: skip
    own = (
        np.where(valid, residual, 0.0) ** 2
        + floor**2
        - sharp2 * energy(sigma, len(bases), model.per_axis, model.max_sigma, model.truncate)
    )
    spread = _spread(model, sigma, jac, valid) if np.any(sharp2 > 0) else jac
    slope = [_slope(model, sigma, a) for a in range(maps)]
    bread, meat = {}, {}
    for a in range(maps):
        for b in range(a, maps):
            both = slope[a] * slope[b]
            info = jac[a] * jac[b] - (spurious[a] if a == b else 0.0)
            bread[a, b] = both * (np.maximum(info, 0.0) if a == b else info)
            meat[a, b] = both * (jac[a] * jac[b] * own + sharp2 * spread[a] * spread[b])
    scale = smoothness * float(valid.sum()) * y_scale**2 / 2
    # Degrees of freedom: the nodes take some of the residual's variance.
    dof = float(valid.sum()) - math.prod(model.grid)
    variance = _pixel_variance(model, bases, bread, meat, scale, maps, fit.nodes)
    err = [_through_logistic(model, _on_blurred_axes(model, sigma[..., a] if model.per_axis
                                                     else sigma), v * valid.sum() / dof)
           if dof > 0 else np.full(v.shape, np.inf) for a, v in enumerate(variance)]  # fmt: skip
    out = np.stack(err, axis=-1) if model.per_axis else err[0]
    tail = out.shape[len(bases) :]
    return np.broadcast_to(out.reshape(model.lead + tail), model.shape + tail).astype(np.float32)


def _on_blurred_axes(model: Model, image: np.ndarray) -> np.ndarray:
    """A map broadcast over batch axes, on the blurred axes only (one batch plane)."""
    return image[tuple(slice(None) if a in model.blurred_axes else 0 for a in range(image.ndim))]


def _through_logistic(model: Model, sigma: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """The standard error of ``s = max_sigma logistic(z)`` from ``z``'s variance: the
    longer side of ``s(z -+ sd)``.  Near either end of ``(0, max_sigma)`` the logistic
    flattens one side, and its slope at ``s`` alone (the delta method) would hide an
    error that ``z`` has."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        f = np.clip(sigma / model.max_sigma, 1e-12, 1 - 1e-12)
        z, sd = np.log(f / (1 - f)), np.sqrt(np.maximum(variance, 0.0))
        up = model.max_sigma / (1 + np.exp(-(z + sd))) - sigma
        down = sigma - model.max_sigma / (1 + np.exp(-(z - sd)))
    return np.where(np.isfinite(sd), np.maximum(up, down), np.inf)


def _slope(model: Model, sigma: np.ndarray, a: int) -> np.ndarray:
    """``d s / d (b . u)`` of the logistic map, per pixel (map ``a`` when per axis)."""
    s = sigma[..., a] if model.per_axis else sigma
    return s * (1 - s / model.max_sigma)


def _spread(model: Model, sigma, jac, valid) -> list[np.ndarray]:
    """``K J`` for each map's ``J``: how one sharp pixel's noise reaches the score, the
    blur at the pixel's own sigma (interpolated in log sigma between global blurs)."""
    s = np.exp(np.mean(np.log(sigma), axis=-1)) if model.per_axis else sigma
    low, high = float(s.min()), float(s.max())
    levels = trial_sigmas(model.max_sigma)
    levels = levels[(levels >= levels[levels <= low].max(initial=levels[0]))
                    & (levels <= levels[levels >= high].min(initial=levels[-1]))]  # fmt: skip
    options = model.options(valid)
    out = []
    for j in jac:
        blurred = np.stack([np.where(valid, host_blur(j, t, options), 0.0) for t in levels])
        out.append(_interpolate(np.log(levels), blurred, np.log(s)))
    return out


def _interpolate(knots: np.ndarray, values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``values`` (one image per knot) linearly between knots at each pixel's ``at``."""
    if len(knots) == 1:
        return values[0]
    i = np.clip(np.searchsorted(knots, at) - 1, 0, len(knots) - 2)
    t = np.clip((at - knots[i]) / (knots[i + 1] - knots[i]), 0.0, 1.0)
    lo = np.take_along_axis(values, i[None], axis=0)[0]
    hi = np.take_along_axis(values, i[None] + 1, axis=0)[0]
    return (1 - t) * lo + t * hi


def _pixel_variance(model: Model, bases, bread, meat, scale: float, maps: int, nodes) -> list:
    """Per map, ``b(p)' C b(p)`` at each pixel of the blurred axes, with ``C`` the
    sandwich of the module's docstring (the nodes' covariance)."""
    k = math.prod(model.nodes)
    info, score = _assemble(model, bases, bread, maps), _assemble(model, bases, meat, maps)
    prior = scale * penalty_hessian(model.grid, len(model.nodes))
    if not np.trace(info) > 0:  # the data hold no node: nothing is measured
        return [np.full(tuple(b.shape[0] for b in bases), np.inf)] * maps
    level = np.trace(score) / np.trace(info)
    inverse = _inverse(info + prior)
    noise = (inverse @ score @ inverse).reshape(k, maps, k, maps)
    average = (level * inverse @ prior @ inverse).reshape(k, maps, k, maps)
    # The penalty's pull on these nodes (A^-1 R u): its bias where the map bends.
    pull = (inverse @ (prior @ np.ravel(nodes))).reshape(k, maps)
    out = []
    for a in range(maps):
        bias2 = _vector_to_pixels(pull[:, a], bases, model.nodes) ** 2
        prior_part = _to_pixels(average[:, a, :, a], bases, model.nodes)
        spread = _to_pixels(noise[:, a, :, a], bases, model.nodes)
        out.append(spread + np.maximum(prior_part, bias2))
    return out


def _vector_to_pixels(vector: np.ndarray, bases, nodes) -> np.ndarray:
    """``b(p) . vector`` at each pixel of the blurred axes."""
    total = vector.reshape(nodes)
    for basis in bases:
        total = np.tensordot(total, basis, axes=([0], [1]))
    return total


def _inverse(matrix: np.ndarray) -> np.ndarray:
    """The inverse of a symmetric positive semi-definite matrix; a direction it does
    not hold (an eigenvalue under 1e-12 of the largest) gets a huge variance."""
    values, vectors = np.linalg.eigh((matrix + matrix.T) / 2)
    top = float(values.max(initial=0.0))
    if top <= 0:
        return np.full(matrix.shape, np.inf)
    values = np.maximum(values, 1e-12 * top)
    return (vectors / values) @ vectors.T


def _gram(model: Model, weight: np.ndarray, bases) -> np.ndarray:
    """``sum_p weight(p) b(p) b(p)'`` over all pixels (batch axes summed): ``(k, k)``."""
    batch = tuple(a for a in range(weight.ndim) if a not in model.blurred_axes)
    total = weight.sum(axis=batch) if batch else weight
    for basis in bases:  # each pixel axis in turn becomes a (node, node) pair at the end
        total = np.tensordot(total, basis[:, :, None] * basis[:, None, :], axes=([0], [0]))
    d = len(bases)
    total = total.transpose(list(range(0, 2 * d, 2)) + list(range(1, 2 * d, 2)))
    k = math.prod(model.nodes)
    return total.reshape(k, k)


def _assemble(model: Model, bases, weights: dict, maps: int) -> np.ndarray:
    """The Gram matrices of each pair of maps, in the order of ``u.ravel()``."""
    k = math.prod(model.nodes)
    out = np.zeros((k, maps, k, maps))
    for (a, b), weight in weights.items():
        block = _gram(model, weight, bases)
        out[:, a, :, b] = block
        out[:, b, :, a] = block.T
    return out.reshape(k * maps, k * maps)


def _to_pixels(cov: np.ndarray, bases, nodes) -> np.ndarray:
    """``b(p)' cov b(p)`` at each pixel of the blurred axes."""
    d = len(nodes)
    total = cov.reshape(nodes + nodes).transpose([i // 2 + (i % 2) * d for i in range(2 * d)])
    for basis in bases:  # the leading (node, node) pair becomes a pixel axis at the end
        total = np.tensordot(total, basis[:, :, None] * basis[:, None, :], axes=([0, 1], [1, 2]))
    return total


def penalty_hessian(grid: tuple[int, ...], dims: int) -> np.ndarray:
    """The Hessian of :func:`~.model.penalty` (the mean squared second difference of the
    nodes along each of the first ``dims`` grid axes), in the order of ``u.ravel()``."""
    size = math.prod(grid)
    out = np.zeros((size, size))
    for axis in range(dims):
        if grid[axis] < 3:
            continue
        factors = [np.eye(n) for n in grid]
        factors[axis] = np.diff(np.eye(grid[axis]), n=2, axis=0)
        second = factors[0]
        for factor in factors[1:]:
            second = np.kron(second, factor)
        out += 2 * second.T @ second / second.shape[0]
    return out
