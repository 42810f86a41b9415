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
from ..core.checks import ArgumentError
from ..core.spec import normalize_axes, normalize_modes, normalize_nan_policy, normalize_truncate
from .model import Model, control_basis, penalty
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
        L-BFGS steps taken, whether the relative change fell below ``tol``, wall time.
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
    )  # fmt: skip
    if callback is None:
        return run_to_end(steps)
    return run_to_end(steps, lambda step_loss: bool(callback(*step_loss)))


# ---------------------------------------------------------------------------- fitting


def fit_sigma_map_steps(
    sharp, blurred, *, max_sigma, mode="crop", truncate=3.0, axes=None, mask=None,
    nan_policy="raise", per_axis=False, spacing=16.0, smoothness=1e-3, max_steps=150,
    tol=1e-6, max_error=0.1,
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
    )
    steps = _run(model, sharp, blurred, valid, bases, smoothness, max_steps, tol, max_error)
    return _in_given_order(steps, order) if per_axis else steps


def _in_given_order(steps, order: tuple[int, ...]):
    """A per-axis fit's trailing axis back in the order the caller gave ``axes``."""
    fit = yield from steps
    back = np.argsort(order)
    return dataclasses.replace(
        fit, **{name: getattr(fit, name)[..., back] for name in _PER_AXIS_FIELDS}
    )


def _run(model, sharp, blurred, valid, bases, smoothness, max_steps, tol, max_error):
    start = time.perf_counter()
    scale = float(np.std(blurred[valid])) or 1.0
    # Both images over one scale: the blur is linear, the objective unit-free.
    data = {
        "bases": tuple(jnp.asarray(b, jnp.float32) for b in bases),
        "x": jnp.asarray(np.where(valid, sharp / scale, 0), jnp.float32),
        "y": jnp.asarray(np.where(valid, blurred / scale, 0), jnp.float32),
        "weight": jnp.asarray(valid / valid.sum(), jnp.float32),
        "mask": jnp.asarray(valid),
        "smoothness": jnp.asarray(smoothness, jnp.float32),  # data: no recompile per value
    }
    u = _initial_nodes(model, np.asarray(data["x"]), np.asarray(data["y"]), valid)
    optimiser, step, outputs = _programs(model)
    # optax's initial state holds weakly typed scalars, the updated one does not: make
    # them strong now, or the step would compile twice.
    state = jax.tree.map(lambda leaf: jnp.asarray(leaf, jnp.result_type(leaf)),
                         optimiser.init(u))  # fmt: skip
    history, converged, calm = [], False, 0
    for i in range(max_steps):
        u, state, value = step(u, state, data)
        history.append(float(value))
        small = len(history) > 1 and abs(history[-2] - history[-1]) <= tol * abs(history[-2])
        calm = calm + 1 if small else 0
        converged = calm >= 2  # one short L-BFGS step is not convergence
        if (yield i + 1, history[-1]) or converged:
            break
    sigma, fitted, sensitivity, value = outputs(u, data)
    history.append(float(value))
    fitted = np.asarray(fitted, np.float64) * scale
    sensitivity = np.asarray(sensitivity, np.float64) * scale
    return _result(model, bases, blurred, valid, (sigma, fitted, sensitivity), u.size,
                   history, converged, max_error, start)  # fmt: skip


@functools.lru_cache(maxsize=8)
def _programs(model: Model) -> tuple:
    """The optimiser, one compiled L-BFGS step and the compiled final outputs."""
    import optax  # imported here: only fitting needs it

    k = len(model.nodes)

    def loss(image, u, data):
        """The objective, given the model image for the nodes ``u``."""
        r = image - data["y"]
        return jnp.sum(data["weight"] * r * r) + data["smoothness"] * penalty(u, k)

    def objective(u, data):
        return loss(model.blur(data["x"], model.sigma(u, data["bases"]), data["mask"]), u, data)

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
        """The map, the model image and ``J = d blur(x, sigma)(p) / d sigma(p)`` (one
        per axis map when ``per_axis``, stacked first), and the objective.

        The blur is a gather (each output pixel depends on its own sigma only), so the
        Jacobian is diagonal and one JVP with a tangent of ones gives all of it.
        """
        sigma = model.sigma(u, data["bases"])

        def blur(s):
            return model.blur(data["x"], s, data["mask"])

        if model.per_axis:
            ones = [jnp.zeros_like(sigma).at[..., i].set(1) for i in range(sigma.shape[-1])]
        else:
            ones = [jnp.ones_like(sigma)]
        pairs = [jax.jvp(blur, (sigma,), (t,)) for t in ones]  # (model image, J) each
        image = pairs[0][0]
        return sigma, image, jnp.stack([j for _, j in pairs]), loss(image, u, data)

    return optimiser, step, outputs


def _initial_nodes(model: Model, sharp, blurred, valid) -> jax.Array:
    """Every node at the best global sigma of a coarse scan, kept off the bounds.

    The scan runs the engine's global blur on the CPU (Numba): no compile of its own.
    """
    from ..adapters.numpy_api import gaussian_blur

    trial = np.linspace(0.05, 0.95, 10)
    options = model.options(valid)

    def misfit(fraction: float) -> float:
        out = gaussian_blur(sharp, fraction * model.max_sigma, backend="numba", **options)
        return float(np.sum(np.where(valid, (out - blurred) ** 2, 0)))

    best = min(trial, key=misfit)
    return jnp.full(model.grid, np.log(best / (1 - best)), jnp.float32)


def _result(model, bases, blurred, valid, outputs, size, history, converged, max_error,
            start):  # fmt: skip
    sigma, fitted, sensitivity = outputs
    residual = np.where(valid, blurred - fitted, np.nan)
    dof = float(valid.sum()) - size
    # The fit runs in float32: a residual below its rounding is not a noise level.
    floor = np.finfo(np.float32).eps * float(np.abs(blurred[valid]).max())
    noise = math.sqrt(np.nansum(residual**2) / dof) if dof > 0 else math.inf
    noise = max(noise, floor)
    model_map = np.array(sigma, dtype=np.float32)
    stderr = _stderr(model, bases, sensitivity, valid, noise)
    # A sigma pinned at max_sigma says "at least this much": not a measurement.
    pinned = model_map >= PINNED * model.max_sigma
    observable = (stderr <= max_error * model_map) & ~pinned
    if pinned.any():
        warnings.warn(
            f"fit_sigma_map: the map reached max_sigma ({model.max_sigma:g}) at "
            f"{pinned.mean():.1%} of the pixels (marked not observable); raise max_sigma",
            RuntimeWarning,
            stacklevel=3,
        )
    residual = residual.astype(np.float32)
    return SigmaFit(
        sigma_map=np.where(observable, model_map, np.nan).astype(np.float32),
        model_map=model_map,
        residual=residual,
        stderr=stderr,
        observable=observable,
        loss=np.asarray(history, np.float64),
        noise=noise,
        steps=len(history) - 1,
        converged=converged,
        seconds=time.perf_counter() - start,
    )


def _stderr(model: Model, bases, sensitivity: np.ndarray, valid, noise: float) -> np.ndarray:
    """Each pixel's standard error: ``noise / sqrt(sum_q F(p, q) J(q)^2)``.

    ``F`` is the squared B-spline footprint of the node nearest ``p``, so the sum is the
    information a local fit of that node has (noise only: not the bias of a map that
    varies faster than the node spacing).  Batch axes add their information.
    """
    out = []
    for j in sensitivity:
        info = np.where(valid, j**2, 0.0)
        info = info.sum(axis=tuple(a for a in range(info.ndim) if a not in model.blurred_axes))
        for i, basis in enumerate(bases):
            info = np.moveaxis(np.tensordot(_footprint(basis), info, axes=(1, i)), 0, i)
        with np.errstate(divide="ignore", invalid="ignore"):
            out.append(np.where(info > 0, noise / np.sqrt(info), np.inf))
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
