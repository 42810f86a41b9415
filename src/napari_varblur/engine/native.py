"""The JAX-native API's engine: a spec for a traced sigma, and the planner's route run
on ``jax.Array`` data (inside ``jit``, ``grad`` and ``vmap``).

The adapter (:mod:`napari_varblur.adapters.jax_api`) validates; this module asks the
planner (:func:`.planner.route` with ``native=True``) and runs the JAX backend's
differentiable steps (:mod:`napari_varblur.backends.jax_xla.native`) along its route.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import jax
import numpy as np

from ..backends.jax_xla import native as steps
from ..core.checks import ArgumentError
from ..core.levels import bucket_range
from ..core.sigma import traced_layout
from ..core.spec import BlurSpec, check_finite_values, normalize_map_and_mask
from .planner import route


def traced_spec(image: jax.Array, sigma, options: dict, mask, limits) -> BlurSpec:
    """The spec of a traced sigma (a map; a scalar or one value per axis is broadcast),
    which needs a static ``max_radius`` (``limits``): its values are not checked (a
    negative sigma acts like its absolute value)."""
    blurred = options["axes"]
    if options["radius"] is not None:
        raise ArgumentError("radius: cannot be combined with a traced sigma; use max_radius")
    if limits is None:
        raise ArgumentError(
            "max_radius: a traced sigma needs a static max_radius (an int or one per axis)"
        )
    sigma, valid = normalize_map_and_mask(sigma, mask, image.shape, options)
    if options["nan_policy"] == "raise":
        check_finite_values(np.asarray(image), None if valid is None else np.asarray(valid),
                            options["modes"], options["cval"])  # fmt: skip
    layout = traced_layout(sigma.shape, image.shape, len(blurred))
    return BlurSpec(
        image=image,
        axes=blurred,
        sigma=None,
        sigma_map=steps.traced_maps(sigma, tuple(image.shape), len(blurred)),
        isotropic=layout == "isotropic",
        sigma_max=tuple(bucket_range(r, options["truncate"])[1] for r in limits),
        radius=None,
        modes=options["modes"],
        cval=options["cval"],
        truncate=options["truncate"],
        backend="jax",
        precision=np.dtype(image.dtype),
        tolerance=options["tolerance"],
        mask=valid,
        nan_policy=options["nan_policy"],
        model=options["model"],
        max_radius=tuple(limits),
    )


def transpose(run: Callable[[jax.Array, float], jax.Array], like: jax.Array):
    """The scatter: the transpose of ``run``'s linear part (its fill left out),
    ``jax.linear_transpose`` of the same program, for arrays like ``like``."""

    def run_t(values: jax.Array) -> jax.Array:
        (out,) = jax.linear_transpose(lambda x: run(x, 0.0), like)(values)
        return out

    return run_t


def runner(spec: BlurSpec) -> Callable[[jax.Array, float], jax.Array]:
    """``run(values, cval)``: the plain blur of ``values`` (an array like the image) on
    the planner's route, reading ``cval`` where constant mode reads outside."""
    chosen = route(spec, native=True)
    traced = spec.max_radius is not None

    def run(values: jax.Array, fill: float) -> jax.Array:
        plain = replace(spec, image=values, cval=fill, mask=None)
        if chosen.kind == "global":
            return steps.global_passes(values, plain)
        if chosen.kind == "levels":
            mix = steps.traced_levels if traced else steps.concrete_levels
            return mix(values, plain, chosen.levels)
        return steps.traced_map(values, plain) if traced else steps.concrete_map(values, plain)

    return run
