"""The package internals that some benchmarks need, in one place.

Everything else in ``benchmarks/`` goes through the public API
(``napari_varblur.gaussian_blur``, ``napari_varblur.jax.gaussian_blur``,
``fit_sigma_map``, ``napari_varblur.sample``, the ``varblur`` command).  What cannot:
timing the exact gather alone (never the level walk), reading the route the router
chose, fitting the cost model, counting compilations, and the GPU rule's threshold.
When the package's internal names move, only this file changes.  Each import happens
inside its function, so a script that needs none of them runs whatever moved.

Internal names used here:

- ``napari_varblur.backends.load``, ``napari_varblur.backends.compiles``
- ``napari_varblur.core.spec.BlurSpec``
- ``napari_varblur.core.taps.map_plan``, ``napari_varblur.core.level_plan.plan_levels``
- ``napari_varblur.engine.planner.route``
- ``napari_varblur.engine.walk.blur``
- ``napari_varblur.engine.cost``: ``Survey``, ``Plan``, ``COSTS``,
  ``GPU_GATHER_TAPS``, ``gather_on_gpu`` and the private ``_tile_candidates``,
  ``_tile_lengths``, ``_walk_work``, ``_estimate``, ``whole_work``, ``whole_estimate``
- ``napari_varblur.backends.jax_xla.BACKEND`` (its ``has_gpu``)
- ``napari_varblur.backends.numba.bands``: ``blur``, ``_Runs`` and a plan's ``runs``,
  ``slots``, ``levels``, ``taps`` (:func:`band_parts`)
- ``napari_varblur.core.levels``: ``bucket_range``, ``SAFETY``, ``_tensor_terms``,
  ``_tensor_error`` (:func:`bucket_errors`)
- ``napari_varblur.engine.warmup.warm_up``
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import numpy as np


def exact_gather(image: np.ndarray, sigma: np.ndarray, mode: str = "crop") -> Callable[[], Any]:
    """A call of the Numba backend's exact per-pixel gather on ``image`` (never the
    level walk, even for a quantised map), compiled first on an 8-pixel corner."""
    from napari_varblur.backends import load
    from napari_varblur.core.spec import BlurSpec

    gather = load("numba").gather
    spec = partial(BlurSpec.from_args, mode=mode, backend="numba")
    corner = tuple(slice(0, 8) for _ in image.shape)
    gather(spec(image[corner], sigma[corner]))  # compiles, or loads the disk cache
    return lambda: gather(spec(image, sigma))


def route(image: np.ndarray, sigma: np.ndarray, mode: str, tolerance: float | None) -> dict:
    """The route the router picks for this Numba call: ``kind`` and, for levels, the
    level counts per axis, the tiles, whether one level set is shared (``diagonal``) and
    whether the map is quantised (``exact``)."""
    try:
        from napari_varblur.core.spec import BlurSpec
        from napari_varblur.engine.planner import route as choose

        spec = BlurSpec.from_args(image, sigma, mode=mode, backend="numba", tolerance=tolerance)
        chosen = choose(spec)
    except Exception as exc:  # an internal API that moved: say so in the row
        return dict(kind="unknown", why=repr(exc)[:200])
    info: dict[str, Any] = dict(kind=str(getattr(chosen, "kind", chosen)))
    plan = getattr(chosen, "plan", None)
    if plan is not None:
        try:
            info["levels"] = [len(lv) for lv in plan.levels.levels]
            info["tiles"] = [int(t) for t in plan.tiles]
            info["diagonal"] = bool(plan.levels.diagonal)
            info["exact"] = bool(plan.levels.exact)
            info["bands"] = plan.bands is not None
        except Exception as exc:
            info["why"] = repr(exc)[:200]
    return info


def level_walk_trials(image: np.ndarray, sigma: np.ndarray, tolerance: float = 1e-3,
                      backend: str = "numba"):  # fmt: skip
    """For fitting the cost model: the exact gather's call, and for every other tiling
    the planner considers (the whole image only, for a backend that walks whole-image
    levels), the level walk's call, its work counts and the model's estimates
    (``estimate`` of the walk, ``gather_estimate``), in seconds, with the backend's
    current table."""
    from napari_varblur.backends import load
    from napari_varblur.core.level_plan import plan_levels
    from napari_varblur.core.spec import BlurSpec
    from napari_varblur.core.taps import map_plan
    from napari_varblur.engine import cost, walk

    run = load(backend)
    whole = run.whole_image_levels
    spec = BlurSpec.from_args(image, sigma, tolerance=tolerance, backend=backend)
    maps = map_plan(spec)
    levels = plan_levels(spec)
    survey = cost.Survey(spec, maps)
    lengths = (max(m.n for m in maps),) if whole else cost._tile_candidates(spec, maps)[::2]
    trials = []
    for length in lengths:
        tiles = cost._tile_lengths(maps, survey.change, length)
        plan = cost.Plan(levels, tiles, survey)
        if whole:  # the walk's counts in whole-image passes
            est, est_gather = cost.whole_estimate(spec, maps, survey, levels, cost.COSTS[backend])
            work = cost.whole_work(spec, maps, survey, levels)
        else:
            est, est_gather = cost._estimate(spec, maps, survey, levels, tiles,
                                             cost.COSTS[backend])  # fmt: skip
            work = cost._walk_work(spec, maps, survey, levels.levels, tiles, levels.diagonal)
        trials.append(dict(tiles=tiles, walk=partial(walk.blur, spec, plan, run), work=work,
                           estimate=est, gather_estimate=est_gather))  # fmt: skip
    return partial(run.gather, spec), trials


def compile_count(backend: str) -> int:
    """How many kernels ``backend`` compiled (or loaded) in this process so far."""
    from napari_varblur import backends

    return backends.compiles(backend)


def warm_up() -> None:
    """The blur widgets' background warm-up (Numba's float32 global and map kernels)."""
    from napari_varblur.engine import warmup

    warmup.warm_up()


@contextlib.contextmanager
def gpu_gather_taps(threshold: float) -> Iterator[None]:
    """Set the GPU rule's threshold (window taps up to which a tolerance map runs the
    exact gather on a GPU) while tracing a program; restore it after."""
    from napari_varblur.engine import cost

    default = cost.GPU_GATHER_TAPS
    cost.GPU_GATHER_TAPS = threshold
    try:
        yield
    finally:
        cost.GPU_GATHER_TAPS = default


def gpu_takes_gather(radius: int, ndim: int) -> bool:
    """Whether the GPU rule picks the exact gather for this window."""
    from napari_varblur.engine import cost

    return bool(cost.gather_on_gpu([radius] * ndim))


def pretend_gpu() -> None:
    """Make the planner apply the GPU rule also on a CPU (to try a GPU script there)."""
    import dataclasses

    from napari_varblur.backends import jax_xla

    jax_xla.BACKEND = dataclasses.replace(jax_xla.BACKEND, has_gpu=lambda: True)


def band_parts(image: np.ndarray, sigma: np.ndarray, mode: str = "nearest",
               tolerance: float = 1e-3) -> dict[str, Any] | None:  # fmt: skip
    """Where a Numba tolerance call's time goes, as calls to time: ``plan`` (the
    router's planning, from a new spec), ``blur`` (the band plan's blur alone), and
    ``slot 1``-``slot 3`` (the same blur with the other slots' runs emptied), with
    per slot its runs, pixels and taps per image pixel; ``None`` where the router
    does not choose level bands."""
    import dataclasses

    from napari_varblur.backends.numba import bands
    from napari_varblur.core.spec import BlurSpec
    from napari_varblur.engine.planner import route

    def spec():
        return BlurSpec.from_args(image, sigma, mode=mode, backend="numba", tolerance=tolerance)

    chosen = route(spec())
    plan = getattr(chosen.plan, "bands", None)
    if plan is None:
        return None
    built = spec()

    def empty(r):
        return None if r is None else bands._Runs(np.zeros_like(r.ptr), r.lines[:0],
                                                  r.starts[:0], r.stops[:0])  # fmt: skip

    out: dict[str, Any] = dict(
        plan=lambda: route(spec()), blur=partial(bands.blur, built, plan), levels=len(plan.levels),
        axes=list(plan.axes), taps=plan.taps / image.size, slots={},
    )  # fmt: skip
    for i, (runs, table) in enumerate(zip(plan.runs, plan.slots, strict=True)):
        if runs is None:
            continue
        alone = tuple(r if j == i else empty(r) for j, r in enumerate(plan.runs))
        out["slots"][f"slot {i + 1}"] = dict(
            call=partial(bands.blur, built, dataclasses.replace(plan, runs=alone)),
            runs=len(runs.lines), pixels=float(np.sum(runs.stops - runs.starts)) / image.size,
            taps=runs.work(table.taps) / image.size,
        )  # fmt: skip
    return out


def bucket_errors(radius: int, ndim: int, truncate: float = 3.0, tolerance: float = 1e-3,
                  inner: float = 0.0) -> float:  # fmt: skip
    """The largest mixing error over radius bucket ``radius`` (every mode but crop,
    ``ndim`` axes sharing their levels) of ONE interval whose two levels sit at the
    bucket's ends (``inner`` 0) or ``inner`` of the bucket inside them (pixels beyond
    them extrapolate the same weights), over the error the level planner allows."""
    from napari_varblur.core import levels

    low, high = levels.bucket_range(radius, truncate)
    low = max(low, 1e-9)
    s0, s1 = low + inner * (high - low), high - inner * (high - low)
    s = np.linspace(low, high, 129)
    u = (s * s - s0 * s0) / (s1 * s1 - s0 * s0)
    terms = levels._tensor_terms((radius,) * ndim)
    return float(levels._tensor_error(s0, s1, terms, u).max()) / (levels.SAFETY * 2 * tolerance)
