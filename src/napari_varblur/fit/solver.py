"""Estimate a sigma map from a sharp and a blurred image of the same scene.

:func:`fit_sigma_map` fits ``blurred ~ gaussian_blur(sharp, sigma_map)`` by L-BFGS
(optax) through the differentiable JAX-native blur (:mod:`napari_varblur.jax`), on the
GPU when JAX has one.

The map is a smooth tensor-product cubic B-spline on a control grid (one node every
``spacing`` pixels along each blurred axis), passed through a logistic function so that
every sigma lies in ``(0, max_sigma)``; a thin-plate-like penalty on the nodes' second
differences (``smoothness``) keeps nodes that the data barely sees close to their
neighbours.  Because the blur is a gather (each output pixel uses its own sigma), the
model's sensitivity to the map is one Jacobian-vector product; it gives each pixel's
standard error, and the map is NaN where that error is large (no texture: the blur is
not observable there).
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable, Iterator

import jax
import numpy as np

from ..core.checks import ArgumentError, choice
from ..core.options import FitOptions
from ..core.params import FIT_DEFAULT, FIT_PARAMS, fill_fit_doc
from ..core.spec import normalize_axes, normalize_modes, normalize_nan_policy, normalize_truncate
from ..core.steps import run_to_end
from .model import Model, control_basis, penalty
from .noise import energy, noise_level, variance_map
from .programs import Descent, programs
from .result import Fitted, SigmaFit, Units, fit_result, warning
from .start import scan
from .validate import (
    check_image_pair,
    check_max_sigma,
    normalize_count,
    normalize_number,
    valid_pair,
)

__all__ = ["SigmaFit", "fit_sigma_map", "fit_sigma_map_steps"]


#: The objective's tolerances on the CPU (shares of the value range, as ``tolerance=``),
#: and the share of the blurred image's noise the chosen one stays under.
TOLERANCES = (1e-4, 3e-4, 1e-3, 3e-3)
NOISE_SHARE = 1 / 3
#: The share of the blurred image's noise variance that its estimate may be off by.
SLACK = 0.1
#: The fields of a per-axis fit that have a trailing axis per blurred axis.
_PER_AXIS_FIELDS = ("sigma_map", "model_map", "stderr", "observable")


@fill_fit_doc
def fit_sigma_map(
    sharp: np.ndarray,
    blurred: np.ndarray,
    *,
    max_sigma: float,
    mode: str = FIT_DEFAULT.mode,
    truncate: float = FIT_DEFAULT.truncate,
    axes: int | tuple[int, ...] | None = FIT_DEFAULT.axes,
    mask: np.ndarray | None = FIT_DEFAULT.mask,
    nan_policy: str = FIT_DEFAULT.nan_policy,
    per_axis: bool = FIT_DEFAULT.per_axis,
    spacing: float = FIT_DEFAULT.spacing,
    smoothness: float = FIT_DEFAULT.smoothness,
    max_steps: int = FIT_DEFAULT.max_steps,
    tol: float = FIT_DEFAULT.tol,
    max_error: float = FIT_DEFAULT.max_error,
    intensity: str = FIT_DEFAULT.intensity,
    callback: Callable[[int, float], object] | None = None,
) -> SigmaFit:
    """Estimate the sigma map that blurs ``sharp`` into ``blurred``.

    Fits ``blurred ~ gaussian_blur(sharp, sigma_map, mode=mode, truncate=truncate)``
    (least squares over the valid pixels) with a smooth, positive map: see
    :mod:`napari_varblur.fit` for the model.

    Parameters
    ----------
    sharp, blurred
        Real arrays of one shape: the sharper and the blurrier image of one scene.
    max_sigma
        %(max_sigma)s
    mode, truncate, axes
        As in :func:`napari_varblur.gaussian_blur`.  Axes not blurred are batch axes
        (channels, time points): they share one map, fitted to all of them.
    mask
        Optional boolean (or 0/1) mask, True = valid, broadcasting to the images: an
        invalid pixel is left out of ``sharp``'s blur (normalised convolution) and of
        the fit.
    nan_policy
        %(nan_policy)s
    per_axis
        %(per_axis)s
    spacing
        %(spacing)s
    smoothness
        %(smoothness)s
    max_steps, tol
        %(max_steps)s
    max_error
        %(max_error)s
    intensity
        %(intensity)s
    callback
        Called as ``callback(step, loss)`` after each step; a true return value stops
        the fit there.

    Returns
    -------
    SigmaFit
        ``sigma_map``, ``model_map``, ``residual``, ``stderr``, ``observable``,
        ``loss`` (history) and more: see :class:`SigmaFit`.

    Examples
    --------
    >>> from napari_varblur import fit_sigma_map
    >>> from napari_varblur.sample import focus_pair_sample
    >>> sharp, blurred, truth = focus_pair_sample()  # stored; fit.focus_pair makes others
    >>> fit = fit_sigma_map(sharp, blurred, max_sigma=4)
    >>> fit.sigma_map.shape
    (112, 136)
    """
    options = FitOptions.pick(locals())
    steps = fit_sigma_map_steps(sharp, blurred, max_sigma=max_sigma, mask=mask,
                                **options.kwargs())  # fmt: skip
    if callback is None:
        return run_to_end(steps)
    return run_to_end(steps, lambda step_loss: bool(callback(*step_loss)))


# ---------------------------------------------------------------------------- fitting


def fit_sigma_map_steps(
    sharp, blurred, *, max_sigma, mask=None, **options
) -> Iterator[tuple[int, float]]:
    """:func:`fit_sigma_map` as a generator: yields ``(step, loss)`` after each step and
    returns the :class:`SigmaFit` (``StopIteration.value``); ``send(True)`` stops it
    (the napari widget runs it in a thread, with progress and cancel).  Takes
    :func:`fit_sigma_map`'s keywords but ``callback``.

    Arguments are validated when the generator is made, not at the first ``next``.
    """
    o = FitOptions(**options)  # an unknown keyword is a TypeError, as in any call
    sharp, blurred = check_image_pair(sharp, blurred)
    max_sigma = normalize_number("max_sigma", max_sigma)
    spacing = normalize_number("spacing", o.spacing, 1.0, strict=False)
    smoothness = normalize_number("smoothness", o.smoothness, strict=False)
    max_error = normalize_number("max_error", o.max_error)
    tol = normalize_number("tol", o.tol, strict=False)
    max_steps = normalize_count("max_steps", o.max_steps)
    affine = choice("intensity", o.intensity, FIT_PARAMS["intensity"].choices,
                    "intensity model") == "affine"  # fmt: skip
    if not isinstance(o.per_axis, (bool, np.bool_)):
        raise ArgumentError(f"per_axis: expected True or False, got {o.per_axis!r}")
    given = normalize_axes(o.axes, sharp.ndim)
    if not given:
        raise ArgumentError("axes: needs at least one axis to fit a blur along")
    # The model works in ascending axis order; a per-axis map returns in the given one.
    order = tuple(int(i) for i in np.argsort(given))
    modes = normalize_modes(o.mode, len(given))
    blurred_axes, modes = tuple(given[i] for i in order), tuple(modes[i] for i in order)
    truncate = normalize_truncate(o.truncate)
    check_max_sigma(max_sigma, sharp.shape, blurred_axes, modes, truncate)
    policy = normalize_nan_policy(o.nan_policy)
    if policy == "propagate":
        raise ArgumentError(
            "nan_policy: 'propagate' cannot fit (a NaN would reach every step); use 'raise' "
            "or 'omit'"
        )
    valid = valid_pair(sharp, blurred, mask, policy, modes)
    bases = tuple(control_basis(sharp.shape[a], spacing) for a in blurred_axes)
    model = Model(
        shape=sharp.shape,
        blurred_axes=blurred_axes,
        nodes=tuple(b.shape[1] for b in bases),
        per_axis=bool(o.per_axis),
        max_sigma=max_sigma,
        modes=modes,
        truncate=truncate,
        # A full mask would cost a second blur (the normaliser): only when needed.
        masked=not valid.all(),
        affine=affine,
        tolerance=None if o.per_axis else objective_tolerance(blurred, valid, blurred_axes),
    )
    _check_order(sharp, blurred, valid, blurred_axes)
    steps = _run(model, sharp, blurred, valid, bases, smoothness, max_steps, tol, max_error)
    return _in_given_order(steps, order) if o.per_axis else steps


def objective_tolerance(blurred, valid, axes) -> float:
    """The objective's blur runs by sigma levels within this tolerance (a 24x40x48
    volume's value and gradient in 0.17 s instead of 1.09 s on the CPU, 112x136 in 13 ms
    instead of 27 ms, and far less to compile), where the planner finds levels faster
    (:func:`napari_varblur.engine.planner.route`: on a GPU it runs the exact gather).
    The levels' error stays under a third of the blurred image's noise: the largest of
    :data:`TOLERANCES` (shares of the value range; a few, so that few programs compile)
    below it.  The final map, model image and standard errors are always exact."""
    values = blurred[valid]
    spread = float(np.ptp(values)) if values.size else 0.0
    share = NOISE_SHARE * noise_level(blurred, valid, axes, robust=False) / spread if spread else 0
    fitting = [t for t in TOLERANCES if t <= share]
    return max(fitting) if fitting else min(TOLERANCES)


def _check_order(sharp, blurred, valid, axes) -> None:
    """Warn when ``blurred`` looks sharper than ``sharp`` (a swapped pair): its share of
    energy in neighbour differences, less what white noise puts there, is larger."""

    def sharpness(image):
        spread = float(np.var(image[valid]))
        if spread == 0:
            return 0.0
        noise = noise_level(image, valid, axes) ** 2
        total = 0.0
        for a in axes:
            if image.shape[a] > 1:
                both = np.take(valid, range(1, image.shape[a]), a) & np.take(
                    valid, range(image.shape[a] - 1), a
                )
                total += float(np.mean(np.diff(image, axis=a)[both] ** 2)) - 2 * noise
        return total / spread

    if sharpness(blurred) > 1.05 * sharpness(sharp):
        warnings.warn(
            "fit_sigma_map: blurred looks sharper than sharp; are they swapped?",
            RuntimeWarning,
            stacklevel=3,
        )


def _in_given_order(steps, order: tuple[int, ...]):
    """A per-axis fit's trailing axis back in the order the caller gave ``axes``."""
    fit = yield from steps
    back = np.argsort(order)
    return dataclasses.replace(
        fit, **{name: getattr(fit, name)[..., back] for name in _PER_AXIS_FIELDS}
    )


def _run(model, sharp, blurred, valid, bases, smoothness, max_steps, tol, max_error):
    start = time.perf_counter()
    units = Units.of(sharp, blurred, valid, model.affine)
    x, y = units.sharp(sharp, valid), units.blurred(blurred, valid)
    nodes, best, misfit = scan(model, x, y, valid, bases, model.affine)
    data = {
        "bases": tuple(_float32(b) for b in bases),
        "x": _float32(x),
        "y": _float32(y),
        "weight": _float32(valid / valid.sum()),
        "mask": jax.device_put(np.asarray(valid)),
        "smoothness": _float32(smoothness),  # data: no recompile per value
        "noise_x": _float32(np.zeros(x.shape)),  # the sharp image's noise, found below
    }
    starts = [_logit(model, nodes), _logit(model, np.full(nodes.shape, best))]
    if smoothness * float(penalty(np.asarray(starts[0]), len(bases), np)) > misfit:
        starts.reverse()  # a rough start costs more than it gains: begin flat
    optimiser, step, outputs = programs(model)
    history: list[float] = []
    outputs.start(starts[0], data)  # on another core while the steps run
    run = Descent(step, optimiser, data, history, max_steps, tol)
    u, converged, stopped = yield from run(starts)
    fell = history[0] - history[-1] > 10 * tol * abs(history[0])
    # The sharp image's noise biases sigma upwards: measure it on this fit's residual,
    # then take its term out of the objective and go on from here.
    final = outputs(u, data)
    noise_x = _sharp_noise(model, final, x, y, valid)
    if np.any(noise_x > 0) and not stopped and len(history) < max_steps:
        data["noise_x"] = _float32(np.broadcast_to(noise_x, x.shape))
        u, converged, stopped = yield from run([u])
        final = outputs(u, data)  # else the outputs above are final: an exact JVP less
    sigma, fitted, sensitivity, value, gain, offset = final
    history.append(float(value))
    if not fell:
        converged = False
        warning(
            "the objective did not fall from its start (a per-node scan of the sigma "
            "range): the map is that scan, not a fit; check the pair and max_sigma"
        )
    fit = Fitted(np.asarray(sigma), units.fitted(np.asarray(fitted, np.float64)),
                 np.asarray(sensitivity, np.float64) * units.y_scale, float(gain), float(offset),
                 noise_x, np.asarray(u, np.float64))  # fmt: skip
    result = fit_result(model, bases, blurred, valid, fit, units, u.size, history, converged,
                        max_error, start, smoothness)  # fmt: skip
    if fell:
        return result
    # The scan's map measured nothing: no pixel is observable.
    nothing = np.zeros_like(result.observable)
    return dataclasses.replace(result, observable=nothing,
                               sigma_map=np.full_like(result.sigma_map, np.nan))  # fmt: skip


def _sharp_noise(model: Model, outputs, x, y, valid) -> np.ndarray | float:
    """The sharp image's noise (fit units, a standard deviation per pixel), from both
    images.

    The sharp image alone gives an upper bound: its pixel-to-pixel scatter as a line in
    the local intensity (:func:`~.noise.variance_map`; noise, or texture finer than a
    pixel).  The pair caps it: noise in the sharp image adds ``gain² noise_x² S`` (``S``
    the kernels' energy) to the mean squared residual, beyond the blurred image's own
    noise; texture that is in both images adds nothing.  The cap allows for a 10% error
    in the blurred image's noise level.  0 when that leaves nothing.
    """
    sigma, image, _, _, gain, _ = outputs
    axes = model.blurred_axes
    variance = variance_map(x, valid, axes, model.options(valid))
    noise_y = noise_level(y, valid, axes, robust=False)
    weight = valid / valid.sum()
    residual = float(np.sum(weight * np.where(valid, (np.asarray(image) - y) ** 2, 0)))
    s = energy(np.asarray(sigma, np.float64), len(model.nodes), model.per_axis,
               model.max_sigma, model.truncate)  # fmt: skip
    predicted = float(gain) ** 2 * float(np.sum(weight * variance * s))
    allowed = max(residual - noise_y**2 + SLACK * noise_y**2, 0.0)
    if predicted <= 0 or allowed <= 0:
        return 0.0
    return np.sqrt(variance * min(1.0, allowed / predicted))


def _logit(model: Model, sigma: np.ndarray) -> jax.Array:
    f = np.clip(sigma / model.max_sigma, 0.01, 0.95)
    u = np.log(f / (1 - f))
    if model.per_axis:
        u = np.repeat(u[..., None], len(model.nodes), axis=-1)
    return _float32(np.broadcast_to(u, model.grid))


def _float32(values) -> jax.Array:
    """``values`` as a float32 ``jax.Array``, converted by NumPy and put on the device
    as they are: ``jnp.asarray`` would compile a program per shape (5-30 ms each, in a
    first fit)."""
    return jax.device_put(np.asarray(values, np.float32))
