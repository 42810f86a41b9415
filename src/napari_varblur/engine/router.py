"""The router: the one place that decides how a valid NumPy blur runs.

Every adapter ends here: the NumPy API, each dask chunk and (for its decision) the
JAX-native API.  Three routes, with or without a mask:

- **global**: a global sigma, separable passes (``backend.global_blur``);
- **levels**: a sigma map that is quantised, or may be mixed from levels within a
  ``tolerance``, when the planner (:mod:`.cost`) estimates that the levels are cheaper
  than the gather on this backend: run as the backend's level bands (each level only
  where the map uses it) when the plan has them, else by the tile walk (:mod:`.walk`);
- **gather**: the exact per-pixel sum (``backend.gather``).

A masked spec (``mask=`` or ``nan_policy="omit"``) is the normalised convolution of
:mod:`.masked`: the backend's fused sweep where it declares one and the route is not
levels, else two plain blurs along the same route.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .. import backends
from ..backends.base import Backend
from ..core.spec import BlurSpec
from ..core.taps import map_plan
from . import cost, masked, walk


@dataclass(frozen=True)
class Route:
    """How a spec runs: ``kind`` is ``"global"``, ``"levels"`` or ``"gather"``; ``plan``
    is the level plan of the levels route."""

    kind: str
    backend: Backend
    plan: cost.Plan | None = None


def route(spec: BlurSpec) -> Route:
    """Choose the route of a valid NumPy spec (the backend resolved from ``"auto"``)."""
    backend = backends.load(backends.resolve(spec.backend))
    if spec.sigma is not None:
        return Route("global", backend)
    table = cost.COSTS.get(backend.name)
    plan = None
    on_gpu = backend.has_gpu() and cost.gather_on_gpu(cost.map_radii(spec))
    if table is not None and backend.correlate and not on_gpu:
        plan = cost.choose(spec, table, backend.bands)
    return Route("gather", backend) if plan is None else Route("levels", backend, plan)


def blur(spec: BlurSpec, pad_floor: tuple[int, ...] | None = None) -> np.ndarray:
    """Blur a valid NumPy spec: a new array of ``spec.precision``.

    ``pad_floor`` raises the gather's padding per blurred axis (the chunks of one dask
    array share static shapes).
    """
    if spec.image.size == 0:
        return np.empty(spec.shape, dtype=spec.precision)
    chosen = route(spec)
    backend = chosen.backend

    def run(plain: BlurSpec) -> np.ndarray:
        if chosen.kind == "global":
            return backend.global_blur(plain)
        if chosen.kind == "levels":
            if chosen.plan.bands is not None:
                return backend.bands.blur(plain, chosen.plan.bands)
            return walk.blur(plain, chosen.plan, backend)
        return backend.gather(plain, pad_floor)

    if not spec.masked:
        return run(spec)
    plain = replace(spec, mask=None, nan_policy="propagate")
    fused = None
    if backend.masked is not None and chosen.kind != "levels":
        fused = lambda valid, counts: backend.masked(plain, valid, counts)  # noqa: E731
    # A level plan belongs to the full shape; the other routes take any batch shape.
    share = chosen.kind != "levels"
    return masked.normalized_convolution(
        spec.image,
        spec.mask,
        spec.cval,
        spec.nan_policy == "omit",
        lambda values, cval: run(replace(plain, image=values, cval=cval)),
        dtype=np.dtype(spec.precision),
        fused=fused,
        denominator_shape=(lambda valid: masked.denominator_shape(spec, valid)) if share else None,
    )


def shared_levels(spec: BlurSpec):
    """The JAX-native API's route for a concrete isotropic map: one level list shared by
    every axis when the map is quantised or a ``tolerance`` allows mixing (a loop of
    whole-image passes, differentiable), else ``None``: the gather.  On the CPU the
    level loop is the cheaper program on every map it takes; on a GPU only where the
    gather's window is wide (:func:`.cost.gather_on_gpu`)."""
    if spec.sigma_map is None or not spec.isotropic:
        return None
    if backends.load("jax").has_gpu() and cost.gather_on_gpu(cost.map_radii(spec)):
        return None
    found = cost.levels_for(spec, map_plan(spec))
    return found[0][0] if found is not None and found[1] else None
