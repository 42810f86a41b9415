"""The fit's outcome: :class:`SigmaFit`, the fit's units, standard errors and the
warnings for a result that is not what it seems."""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from .errors import MAX_NODES, standard_errors
from .model import Model, reduce_to_grid
from .noise import derivative_energy

#: A sigma at or above this share of ``max_sigma`` is pinned at the bound.
PINNED = 0.995


@dataclass(frozen=True)
class SigmaFit:
    """The result of :func:`fit_sigma_map`.

    Attributes
    ----------
    sigma_map
        The fitted sigma (pixels), the image's shape (batch axes share one map), or with
        a trailing axis per blurred axis when ``per_axis``; NaN where the blur is not
        observable (``~observable``).
    model_map
        The map the model used everywhere (finite; where not observable it is the
        smooth continuation of its neighbours): pass this one to ``gaussian_blur``.
    residual
        ``blurred - gaussian_blur(sharp, model_map)``, float32, NaN at invalid pixels.
    stderr
        Standard error of the fitted sigma at each pixel (pixels, same shape as the
        map): the larger of the nodes' covariance carried to the pixel (both images'
        noise, the smoothness penalty's bias; :mod:`napari_varblur.fit.errors`) and the
        local noise over the local sensitivity of the model to sigma, summed over the
        pixels the nearest control node sees.
    observable
        Boolean map: ``stderr <= max_error * model_map``, and the sigma is below
        ``max_sigma`` (one pinned at it, within 0.5%, is only a lower bound; a
        RuntimeWarning says so).
    loss
        The objective (data term plus penalty) where each step started, then at the
        end: ``steps + 1`` values, float64.
    noise
        Estimated standard deviation of the noise in ``blurred`` (from the residual).
    steps, converged, seconds
        L-BFGS steps taken; whether the objective fell from its start and its relative
        change then fell below ``tol``; wall time.
    gain, offset
        ``blurred ~ gain * gaussian_blur(sharp, model_map) + offset`` (1 and 0 with
        ``intensity="none"``).
    """

    sigma_map: np.ndarray
    model_map: np.ndarray
    residual: np.ndarray
    stderr: np.ndarray
    observable: np.ndarray
    loss: np.ndarray
    noise: float
    steps: int
    converged: bool
    gain: float = 1.0
    offset: float = 0.0
    seconds: float = field(default=0.0)


@dataclass(frozen=True)
class Units:
    """The fit's units: each image as ``(image - centre) / scale`` over the valid
    pixels.  With a gain and offset each image gets its own centre and scale (the fit is
    then free of both); without, both share the blurred image's scale and no centre."""

    x_centre: float
    x_scale: float
    y_centre: float
    y_scale: float

    @classmethod
    def of(cls, sharp, blurred, valid, affine: bool) -> Units:
        def spread(a):
            return float(np.std(a[valid])) or 1.0

        if affine:
            return cls(float(np.mean(sharp[valid])), spread(sharp),
                       float(np.mean(blurred[valid])), spread(blurred))  # fmt: skip
        return cls(0.0, spread(blurred), 0.0, spread(blurred))

    def sharp(self, image, valid):
        return np.where(valid, (image - self.x_centre) / self.x_scale, 0)

    def blurred(self, image, valid):
        return np.where(valid, (image - self.y_centre) / self.y_scale, 0)

    def fitted(self, model_image):
        return self.y_centre + self.y_scale * model_image

    def gain_offset(self, gain: float, offset: float) -> tuple[float, float]:
        """``blurred ~ gain * blur(sharp) + offset`` in the images' own units."""
        g = self.y_scale * gain / self.x_scale
        return g, self.y_centre + self.y_scale * offset - g * self.x_centre


@dataclass(frozen=True)
class Fitted:
    """The final outputs of the programs, on the host."""

    sigma: np.ndarray
    image: np.ndarray  # the model image in blurred's units
    sensitivity: np.ndarray  # d image / d sigma, in blurred's units, one per map
    gain: float  # in the fit's units
    offset: float
    noise_x: np.ndarray | float  # the sharp image's noise per pixel, in the fit's units
    nodes: np.ndarray | None = None  # the fitted node values u (the grid's shape)


def fit_result(model, bases, blurred, valid, fit: Fitted, units: Units, size, history,
               converged, max_error, start, smoothness: float = 0.0) -> SigmaFit:  # fmt: skip
    """The :class:`SigmaFit` of the final outputs: residual, noise, standard errors,
    what is observable, and the warnings."""
    residual = np.where(valid, blurred - fit.image, np.nan)
    dof = float(valid.sum()) - size
    # The fit runs in float32: a residual below its rounding is not a noise level.
    floor = np.finfo(np.float32).eps * float(np.abs(blurred[valid]).max())
    noise = math.sqrt(np.nansum(residual**2) / dof) if dof > 0 else math.inf
    noise = max(noise, floor)
    model_map = np.array(fit.sigma, dtype=np.float32)
    # What the data near each pixel hold alone (its nearest node's information): a pixel
    # known only through the smoothness penalty (an untextured region) is not measured.
    stderr = _local_stderr(model, bases, fit, units, residual, dof, floor)
    if math.prod(model.grid) <= MAX_NODES:  # and what every node under it allows
        covariance = standard_errors(model, bases, fit, residual, units.y_scale, smoothness,
                                     floor)  # fmt: skip
        stderr = np.maximum(stderr, covariance)
    # A sigma pinned at max_sigma says "at least this much": not a measurement.
    pinned = model_map >= PINNED * model.max_sigma
    observable = (stderr <= max_error * model_map) & ~pinned
    gain, offset = units.gain_offset(fit.gain, fit.offset)
    _warn(model, pinned, observable, noise, blurred, valid, gain)
    return SigmaFit(
        sigma_map=np.where(observable, model_map, np.nan).astype(np.float32),
        model_map=model_map,
        residual=residual.astype(np.float32),
        stderr=stderr,
        observable=observable,
        loss=np.asarray(history, np.float64),
        noise=noise,
        steps=len(history) - 1,
        converged=converged,
        gain=gain,
        offset=offset,
        seconds=time.perf_counter() - start,
    )


def _warn(model, pinned, observable, noise, blurred, valid, gain) -> None:
    """RuntimeWarnings for results that are not what they seem."""
    spread = float(np.std(blurred[valid]))
    if pinned.any():
        warning(f"the map reached max_sigma ({model.max_sigma:g}) at {pinned.mean():.1%} of "
                 "the pixels (marked not observable); raise max_sigma")  # fmt: skip
    if spread > 0 and noise > 0.7 * spread:
        warning(f"the residual ({noise:.3g}) is {noise / spread:.0%} of blurred's spread: "
                 "blurred is not a blur of sharp at these settings (a gain or offset with "
                 "intensity='none', a shift, another scene?)")  # fmt: skip
    elif model.affine and gain <= 0:
        warning(f"the fitted gain is {gain:.3g}: blurred does not look like a blur of sharp")
    if not observable.any():
        warning("no pixel is observable: the data do not determine the map anywhere")


def warning(message: str) -> None:
    warnings.warn(f"fit_sigma_map: {message}", RuntimeWarning, stacklevel=5)


def _local_stderr(model: Model, bases, fit: Fitted, units: Units, residual, dof, floor):
    """:func:`_stderr` with the sharp image's noise and the degrees of freedom: the
    standard errors of a grid too large for :mod:`.errors`' covariance."""
    # The sharp image's noise, blurred, inflates the sensitivity: take its mean out.
    spurious = (units.y_scale * fit.gain * fit.noise_x) ** 2 * derivative_energy(
        fit.sigma, len(bases), model.per_axis, model.max_sigma, model.truncate
    )
    # Degrees of freedom: the nodes take some of the residual's variance.
    dof_scale = math.sqrt(np.isfinite(residual).sum() / dof) if dof > 0 else math.inf
    return _stderr(model, bases, fit.sensitivity, spurious, residual * dof_scale, floor)


def _stderr(model: Model, bases, sensitivity, spurious, residual, floor: float) -> np.ndarray:
    """Each pixel's standard error: ``noise(p) / sqrt(sum_q F(p, q) (J(q)^2 - N(q)))``.

    ``F`` is the squared B-spline footprint of the node nearest ``p``, so the sum is the
    information a local fit of that node has.  ``N`` is what the sharp image's own noise
    adds to ``J^2`` on average.  ``noise(p)^2`` is the residual's mean square under the
    same footprint, weighted by ``J^2`` (what the local fit sees): noise that varies over
    the image (photon counts) and local misfit count where they are.  Batch axes add
    their information.
    """
    valid = np.isfinite(residual)
    r2 = np.where(valid, residual, 0.0) ** 2
    footprints = [_footprint(b) for b in bases]
    out = []
    for j, extra in zip(sensitivity, spurious):
        info = np.where(valid, np.maximum(j**2 - extra, 0.0), 0.0)
        seen = reduce_to_grid(model, info * r2, footprints)
        info = reduce_to_grid(model, info, footprints)
        with np.errstate(divide="ignore", invalid="ignore"):
            noise2 = np.maximum(seen / info, floor**2)
            out.append(np.where(info > 0, np.sqrt(noise2 / info), np.inf))
    err = np.stack(out, axis=-1) if model.per_axis else out[0]
    tail = err.shape[len(bases) :]
    return np.broadcast_to(err.reshape(model.lead + tail), model.shape + tail).astype(np.float32)


def _footprint(basis: np.ndarray) -> np.ndarray:
    """``(n, n)``: how much pixel ``q`` informs the node nearest ``p`` (squared B-spline
    of the node through ``p``, peak 1)."""
    if basis.shape[0] == 1:
        return np.ones((1, 1))
    nearest = basis.argmax(axis=1)
    weights = basis[:, nearest].T  # row p: node nearest p, at every pixel q
    return (weights / weights.max(axis=1, keepdims=True)) ** 2
