"""The router: runs a valid NumPy spec along the route the planner chose.

Every NumPy call ends here: the NumPy API and each dask chunk.  The planner
(:func:`.planner.route`) decides; this module only runs its decision:

- **global**: ``backend.global_blur``;
- **levels**: the backend's level bands when the plan has them, else the tile walk
  (:mod:`.walk`) with the backend's 1-D pass;
- **gather**: ``backend.gather``.

A masked spec (``mask=`` or ``nan_policy="omit"``) is the normalised convolution of
:mod:`.masked`: the backend's fused sweep where it declares one and the route is not
levels, else two plain blurs along the same route.  A Numba blur that the widgets'
warm-up is compiling kernels for waits for it (:mod:`.compiling`) and then loads them.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..core.spec import BlurSpec
from . import compiling, masked, transpose, walk
from .planner import Route, route, warm_kind


def blur(
    spec: BlurSpec, pad_floor: tuple[int, ...] | None = None, chosen: Route | None = None
) -> np.ndarray:
    """Blur a valid NumPy spec: a new array of ``spec.precision``.

    ``pad_floor`` raises the gather's padding per blurred axis (the chunks of one dask
    array share static shapes); ``chosen``: a route the caller already asked for.
    """
    if spec.image.size == 0:
        return np.empty(spec.shape, dtype=spec.precision)
    chosen = chosen or route(spec)
    if spec.model == "scatter":
        return _scatter(spec, chosen, pad_floor)
    if chosen.name == "numba" and spec.mask is None and spec.precision == np.float32:
        compiling.wait_for(warm_kind(spec, chosen))  # a warm-up compiles these: load them
    run = _runner(chosen, pad_floor)
    if not spec.masked:
        return run(spec)
    plain = replace(spec, mask=None, nan_policy="propagate")
    backend, fused = chosen.backend, None
    if backend.masked is not None and chosen.kind != "levels":
        fused = lambda valid, counts, omit: backend.masked(plain, valid, counts, omit)  # noqa: E731
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
        all_finite=backend.all_finite,
        denominator_shape=(lambda valid: masked.denominator_shape(spec, valid)) if share else None,
    )


def _runner(chosen: Route, pad_floor):
    """The plain blur of a spec along ``chosen``."""
    backend = chosen.backend
    if chosen.kind == "global":
        return backend.global_blur
    if chosen.kind == "gather":
        return lambda plain: backend.gather(plain, pad_floor, chosen.memo)
    if chosen.plan.bands is not None:
        return lambda plain: backend.bands.blur(plain, chosen.plan.bands)
    return lambda plain: walk.blur(plain, chosen.plan, backend)


def _scatter(spec: BlurSpec, chosen: Route, pad_floor) -> np.ndarray:
    """The transpose of the gather along ``chosen`` (:mod:`.transpose`), masked or not."""
    gather = replace(spec, mask=None, nan_policy="propagate", model="gather")
    plain = _runner(chosen, pad_floor)
    backend = chosen.backend
    if chosen.kind == "global":
        run_t = lambda s: transpose.global_scatter(s, backend)  # noqa: E731
    elif chosen.kind == "gather":
        run_t = lambda s: transpose.map_scatter(s, backend, pad_floor, chosen.memo)  # noqa: E731
    else:
        run_t = lambda s: transpose.level_scatter(s, chosen.levels, backend)  # noqa: E731
    dtype = np.dtype(spec.precision)
    out = masked.transposed(
        spec.image.astype(dtype, copy=False),
        spec.mask,
        spec.cval,
        spec.nan_policy == "omit",
        lambda values, cval: plain(replace(gather, image=values, cval=cval)),
        lambda values: run_t(replace(gather, image=values)),
        dtype=dtype,
    )
    return np.asarray(out, dtype)
