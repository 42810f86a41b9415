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
import functools
import math
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from .._steps import run_to_end
from ..core.checks import ArgumentError, choice
from ..core.spec import normalize_axes, normalize_modes, normalize_nan_policy, normalize_truncate
from .model import Model, control_basis, gain_offset, penalty, reduce_to_grid
from .noise import derivative_energy, energy, noise_level, variance_map
from .start import scan
from .validate import (
    check_image_pair,
    check_max_sigma,
    normalize_count,
    normalize_number,
    valid_pair,
)

__all__ = ["SigmaFit", "fit_sigma_map", "fit_sigma_map_steps"]


#: A sigma at or above this share of ``max_sigma`` is pinned at the bound.
PINNED = 0.995
#: The objective's tolerances on the CPU (shares of the value range, as ``tolerance=``),
#: and the share of the blurred image's noise the chosen one stays under.
TOLERANCES = (1e-4, 3e-4, 1e-3, 3e-3)
NOISE_SHARE = 1 / 3
#: The share of the blurred image's noise variance that its estimate may be off by.
SLACK = 0.1
#: The fields of a per-axis fit that have a trailing axis per blurred axis.
_PER_AXIS_FIELDS = ("sigma_map", "model_map", "stderr", "observable")


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
        map): the noise level (from the residual) over the local sensitivity of the
        model to sigma, summed over the pixels one control node sees.
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


def fit_sigma_map(
    sharp: np.ndarray,
    blurred: np.ndarray,
    *,
    max_sigma: float,
    mode: str = "crop",
    truncate: float = 3.0,
    axes: int | tuple[int, ...] | None = None,
    mask: np.ndarray | None = None,
    nan_policy: str = "raise",
    per_axis: bool = False,
    spacing: float = 16.0,
    smoothness: float = 1e-3,
    max_steps: int = 150,
    tol: float = 1e-6,
    max_error: float = 0.1,
    intensity: str = "affine",
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
        Largest sigma the map may take (pixels, > 0); sets the blur's radius
        ``ceil(truncate * max_sigma)`` and so the cost.  Choose it above the largest
        sigma you expect: the map stays below it.
    mode, truncate, axes
        As in :func:`napari_varblur.gaussian_blur`.  Axes not blurred are batch axes
        (channels, time points): they share one map, fitted to all of them.
    mask
        Optional boolean (or 0/1) mask, True = valid, broadcasting to the images: an
        invalid pixel is left out of ``sharp``'s blur (normalised convolution) and of
        the fit.
    nan_policy
        ``"raise"`` (default): a NaN or inf in a valid pixel of either image is a
        ValueError.  ``"omit"``: such pixels become invalid.  (``"propagate"`` is not
        accepted: a NaN would stop the fit.)
    per_axis
        Fit one map per blurred axis (returned with a trailing axis), for blur that
        differs along, e.g., Y and X.
    spacing
        Distance between the control nodes of the map (pixels, >= 1): the finest detail
        the map can have.  Smaller is more detailed and noisier.
    smoothness
        Weight (>= 0) of the penalty on the nodes' second differences, relative to the
        data term (which is normalised by the blurred image's variance).
    max_steps, tol
        L-BFGS stops after ``max_steps`` steps, or when the objective's relative change
        is below ``tol`` over two steps in a row.
    max_error
        A pixel is observable when its standard error is at most ``max_error`` times its
        sigma; elsewhere ``sigma_map`` is NaN.
    intensity
        ``"affine"`` (default): also fit one gain and one offset between the images
        (two acquisitions rarely share both); ``"none"``: the blurred image is the blur
        of the sharp one as it is.
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
    >>> sharp, blurred, truth = focus_pair_sample()
    >>> fit = fit_sigma_map(sharp, blurred, max_sigma=4)
    >>> fit.sigma_map.shape
    (112, 136)
    """
    steps = fit_sigma_map_steps(
        sharp, blurred, max_sigma=max_sigma, mode=mode, truncate=truncate, axes=axes,
        mask=mask, nan_policy=nan_policy, per_axis=per_axis, spacing=spacing,
        smoothness=smoothness, max_steps=max_steps, tol=tol, max_error=max_error,
        intensity=intensity,
    )  # fmt: skip
    if callback is None:
        return run_to_end(steps)
    return run_to_end(steps, lambda step_loss: bool(callback(*step_loss)))


# ---------------------------------------------------------------------------- fitting


def fit_sigma_map_steps(
    sharp, blurred, *, max_sigma, mode="crop", truncate=3.0, axes=None, mask=None,
    nan_policy="raise", per_axis=False, spacing=16.0, smoothness=1e-3, max_steps=150,
    tol=1e-6, max_error=0.1, intensity="affine",
) -> Iterator[tuple[int, float]]:  # fmt: skip
    """:func:`fit_sigma_map` as a generator: yields ``(step, loss)`` after each step and
    returns the :class:`SigmaFit` (``StopIteration.value``); ``send(True)`` stops it
    (the napari widget runs it in a thread, with progress and cancel).

    Arguments are validated when the generator is made, not at the first ``next``.
    """
    sharp, blurred = check_image_pair(sharp, blurred)
    max_sigma = normalize_number("max_sigma", max_sigma)
    spacing = normalize_number("spacing", spacing, 1.0, strict=False)
    smoothness = normalize_number("smoothness", smoothness, strict=False)
    max_error = normalize_number("max_error", max_error)
    tol = normalize_number("tol", tol, strict=False)
    max_steps = normalize_count("max_steps", max_steps)
    affine = choice("intensity", intensity, ("affine", "none"), "intensity model") == "affine"
    if not isinstance(per_axis, (bool, np.bool_)):
        raise ArgumentError(f"per_axis: expected True or False, got {per_axis!r}")
    given = normalize_axes(axes, sharp.ndim)
    if not given:
        raise ArgumentError("axes: needs at least one axis to fit a blur along")
    # The model works in ascending axis order; a per-axis map returns in the given one.
    order = tuple(int(i) for i in np.argsort(given))
    modes = normalize_modes(mode, len(given))
    blurred_axes, modes = tuple(given[i] for i in order), tuple(modes[i] for i in order)
    truncate = normalize_truncate(truncate)
    check_max_sigma(max_sigma, sharp.shape, blurred_axes, modes, truncate)
    policy = normalize_nan_policy(nan_policy)
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
        per_axis=bool(per_axis),
        max_sigma=max_sigma,
        modes=modes,
        truncate=truncate,
        # A full mask would cost a second blur (the normaliser): only when needed.
        masked=not valid.all(),
        affine=affine,
        tolerance=None if per_axis else objective_tolerance(blurred, valid, blurred_axes),
    )
    _check_order(sharp, blurred, valid, blurred_axes)
    steps = _run(model, sharp, blurred, valid, bases, smoothness, max_steps, tol, max_error)
    return _in_given_order(steps, order) if per_axis else steps


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
        "bases": tuple(jnp.asarray(b, jnp.float32) for b in bases),
        "x": jnp.asarray(x, jnp.float32),
        "y": jnp.asarray(y, jnp.float32),
        "weight": jnp.asarray(valid / valid.sum(), jnp.float32),
        "mask": jnp.asarray(valid),
        "smoothness": jnp.asarray(smoothness, jnp.float32),  # data: no recompile per value
        "noise_x": jnp.zeros(x.shape, jnp.float32),  # the sharp image's noise, found below
    }
    starts = [_logit(model, nodes), _logit(model, np.full(nodes.shape, best))]
    if smoothness * float(penalty(starts[0], len(bases))) > misfit:
        starts.reverse()  # a rough start costs more than it gains: begin flat
    optimiser, step, outputs = _programs(model)
    history: list[float] = []
    run = Descent(step, optimiser, data, history, max_steps, tol)
    u, converged, stopped = yield from run(starts)
    fell = history[0] - history[-1] > 10 * tol * abs(history[0])
    # The sharp image's noise biases sigma upwards: measure it on this fit's residual,
    # then take its term out of the objective and go on from here.
    final = outputs(u, data)
    noise_x = _sharp_noise(model, final, x, y, valid)
    if np.any(noise_x > 0) and not stopped and len(history) < max_steps:
        data["noise_x"] = jnp.broadcast_to(jnp.asarray(noise_x, jnp.float32), x.shape)
        u, converged, stopped = yield from run([u])
        final = outputs(u, data)  # else the outputs above are final: an exact JVP less
    sigma, fitted, sensitivity, value, gain, offset = final
    history.append(float(value))
    if not fell:
        converged = False
        _warning(
            "the objective did not fall from its start (a per-node scan of the sigma "
            "range): the map is that scan, not a fit; check the pair and max_sigma"
        )
    fit = Fitted(np.asarray(sigma), units.fitted(np.asarray(fitted, np.float64)),
                 np.asarray(sensitivity, np.float64) * units.y_scale, float(gain), float(offset),
                 noise_x)  # fmt: skip
    return _result(model, bases, blurred, valid, fit, units, u.size, history, converged,
                   max_error, start)  # fmt: skip


@dataclass
class Descent:
    """L-BFGS steps from the first of ``starts`` that moves, appending to ``history``;
    a generator (``(step, loss)`` out, a true ``send`` stops it) that returns ``(u,
    converged, stopped)``."""

    step: Callable
    optimiser: object
    data: dict
    history: list
    max_steps: int
    tol: float

    def __call__(self, starts):
        history, converged, stopped = self.history, False, False
        for u in starts:
            state, first, calm = _initial_state(self.optimiser, u), len(history), 0
            for i in range(first, self.max_steps):
                u, state, value = self.step(u, state, self.data)
                history.append(float(value))
                small = i > first and abs(history[-2] - history[-1]) <= self.tol * abs(history[-2])
                calm = calm + 1 if small else 0
                converged = calm >= 2  # one short L-BFGS step is not convergence
                stopped = bool((yield i + 1, history[-1]))
                if stopped or converged or _stuck(history[first:]):
                    break
            # The loss did not move: try the next start (the best single sigma).
            if stopped or not _stuck(history[first:]) or len(history) >= self.max_steps:
                break
        return u, converged, stopped


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


def _stuck(history: list[float]) -> bool:
    """Three steps without any change: L-BFGS found no way down from this start."""
    return len(history) >= 3 and max(history[:3]) - min(history[:3]) <= 1e-7 * abs(history[0])


def _logit(model: Model, sigma: np.ndarray) -> jax.Array:
    f = np.clip(sigma / model.max_sigma, 0.01, 0.95)
    u = np.log(f / (1 - f))
    if model.per_axis:
        u = np.repeat(u[..., None], len(model.nodes), axis=-1)
    return jnp.asarray(np.broadcast_to(u, model.grid), jnp.float32)


def _initial_state(optimiser, u):
    # optax's initial state holds weakly typed scalars, the updated one does not: make
    # them strong now, or the step would compile twice.
    return jax.tree.map(lambda leaf: jnp.asarray(leaf, jnp.result_type(leaf)),
                        optimiser.init(u))  # fmt: skip


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


@functools.lru_cache(maxsize=8)
def _programs(model: Model) -> tuple:
    """The optimiser, one compiled L-BFGS step and the compiled final outputs."""
    import optax  # imported here: only fitting needs it

    k = len(model.nodes)

    def gain_and_offset(image, data):
        if not model.affine:
            return jnp.ones((), image.dtype), jnp.zeros((), image.dtype)
        return gain_offset(image, data["y"], data["weight"])

    def loss(sigma, image, u, data):
        """The objective: the residual after the best gain and offset (projected out),
        less the sharp image's expected noise term, plus the penalty."""
        gain, offset = gain_and_offset(image, data)
        r = gain * image + offset - data["y"]
        s = energy(sigma, k, model.per_axis, model.max_sigma, model.truncate, jnp)
        bias = (gain * data["noise_x"]) ** 2 * s
        data_term = jnp.sum(data["weight"] * (r * r - bias))
        return data_term + data["smoothness"] * penalty(u, k)

    def objective(u, data):
        sigma = model.sigma(u, data["bases"])
        return loss(sigma, model.blur(data["x"], sigma, data["mask"]), u, data)

    optimiser = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(objective)

    @jax.jit
    def step(u, state, data):
        value, grad = value_and_grad(u, data=data, state=state)
        updates, state = optimiser.update(grad, state, u, value=value, grad=grad,
                                          value_fn=objective, data=data)  # fmt: skip
        return optax.apply_updates(u, updates), state, value

    @jax.jit
    def outputs(u, data):
        """The map, the model image (after gain and offset), ``J = gain d blur(x,
        sigma)(p) / d sigma(p)`` (one per axis map when ``per_axis``, stacked first), the
        objective, the gain and the offset.

        The blur is a gather (each output pixel depends on its own sigma only), so the
        Jacobian is diagonal and one JVP with a tangent of ones gives all of it.
        """
        sigma = model.sigma(u, data["bases"])

        def blur(s):
            return model.blur(data["x"], s, data["mask"], exact=True)

        if model.per_axis:
            ones = [jnp.zeros_like(sigma).at[..., i].set(1) for i in range(sigma.shape[-1])]
        else:
            ones = [jnp.ones_like(sigma)]
        pairs = [jax.jvp(blur, (sigma,), (t,)) for t in ones]  # (model image, J) each
        image = pairs[0][0]
        gain, offset = gain_and_offset(image, data)
        value = loss(sigma, image, u, data)
        return sigma, gain * image + offset, gain * jnp.stack([j for _, j in pairs]), value, \
            gain, offset  # fmt: skip

    return optimiser, step, outputs


def _result(model, bases, blurred, valid, fit: Fitted, units: Units, size, history, converged,
            max_error, start):  # fmt: skip
    residual = np.where(valid, blurred - fit.image, np.nan)
    dof = float(valid.sum()) - size
    # The fit runs in float32: a residual below its rounding is not a noise level.
    floor = np.finfo(np.float32).eps * float(np.abs(blurred[valid]).max())
    noise = math.sqrt(np.nansum(residual**2) / dof) if dof > 0 else math.inf
    noise = max(noise, floor)
    model_map = np.array(fit.sigma, dtype=np.float32)
    # The sharp image's noise, blurred, inflates the sensitivity: take its mean out.
    spurious = (units.y_scale * fit.gain * fit.noise_x) ** 2 * derivative_energy(
        model_map, len(bases), model.per_axis, model.max_sigma, model.truncate
    )
    # Degrees of freedom: the nodes take some of the residual's variance.
    dof_scale = math.sqrt(valid.sum() / dof) if dof > 0 else math.inf
    stderr = _stderr(model, bases, fit.sensitivity, spurious, residual * dof_scale, floor)
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
        _warning(f"the map reached max_sigma ({model.max_sigma:g}) at {pinned.mean():.1%} of "
                 "the pixels (marked not observable); raise max_sigma")  # fmt: skip
    if spread > 0 and noise > 0.7 * spread:
        _warning(f"the residual ({noise:.3g}) is {noise / spread:.0%} of blurred's spread: "
                 "blurred is not a blur of sharp at these settings (a gain or offset with "
                 "intensity='none', a shift, another scene?)")  # fmt: skip
    elif model.affine and gain <= 0:
        _warning(f"the fitted gain is {gain:.3g}: blurred does not look like a blur of sharp")
    if not observable.any():
        _warning("no pixel is observable: the data do not determine the map anywhere")


def _warning(message: str) -> None:
    warnings.warn(f"fit_sigma_map: {message}", RuntimeWarning, stacklevel=5)


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
