"""The planner: the one function that decides how a blur runs.

Every call asks :func:`route` with its validated spec: the NumPy API and each dask
chunk (through :mod:`.router`), the JAX-native API, concrete and traced (through
:mod:`.native`), the fit's objective (which runs the JAX-native API) and napari's click
(``interim``).  It decides the backend (``auto`` resolved; while the widgets' warm-up
still compiles Numba's kernels, a click may run on JAX instead) and the kind of work:

- **global**: a global sigma, separable passes;
- **levels**: a sigma map mixed from global blurs at a few sigma levels, quantised or
  within a ``tolerance`` (:func:`~napari_varblur.core.level_plan.plan_levels`), when
  they beat the gather by the cost model (:mod:`.cost`: the tile walk, the backend's
  level bands, or JAX's whole-image passes); in the JAX-native API only where one
  list of levels serves every axis, and always for a traced map;
- **gather**: the exact per-pixel sum.  On a GPU a map always takes it while its
  window is at most :data:`~.cost.GPU_GATHER_TAPS` taps: there the gather beat the
  level loop 12-33x.

Nothing outside ``engine/`` and ``backends/`` asks for the GPU or a backend's
internals: they ask here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from .. import backends
from ..backends.base import Backend
from ..core.level_plan import LevelPlan, plan_levels
from ..core.spec import BlurSpec
from ..core.taps import global_radius
from . import compiling, cost

#: The most window taps (pixels times taps per pixel) a napari click runs on JAX while
#: Numba compiles: about two seconds of JAX on 2 CPU cores (its map blur ran 0.8-1.3e10
#: taps/s on 512²-1024² maps up to sigma 8), after its own compile of 1-2 s.
INTERIM_TAPS = 2e10
#: The NumPy reference's speed in window taps per second (:func:`taps`) per route
#: kind, at least what it ran on 2 cores: 2.7e8-1.2e9 global (256²-2048², 3-D),
#: 1.2e8-1.5e8 for maps (256²-512², sigma up to 8; it always gathers).
REFERENCE_RATE = {"global": 2.5e8, "gather": 1.2e8, "levels": 1.2e8}
#: The most seconds of reference work a cold first ``auto`` call runs instead of
#: compiling Numba's kernels (7-10 s on 2 cores).
FIRST_CALL_S = 1.0


@dataclass(frozen=True)
class Route:
    """How a spec runs: on ``backend``, as ``kind`` (``"global"``, ``"levels"`` or
    ``"gather"``), with the level engine's ``levels`` and, on the NumPy route, the cost
    model's ``plan`` (tiling or bands) for them.  ``interim``: ``auto`` ran on JAX
    because Numba's first kernels were still compiling (a napari click only).
    ``memo``: a paired route's store for the backend's per-map set-up, which every
    call along it shares (a deblur's iterations, a ``LinearOperator``'s products)."""

    backend: Backend
    kind: str
    levels: LevelPlan | None = None
    plan: cost.Plan | None = None
    interim: bool = False
    memo: dict | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.backend.name


def route(
    spec: BlurSpec, *, native: bool = False, interim: bool = False, paired: bool = False
) -> Route:
    """Decide how a valid spec runs.

    ``native``: the JAX-native API (JAX data, concrete or traced: ``spec.max_radius``).
    ``interim``: a napari click, which may run on JAX while Numba still compiles.
    ``paired``: the route also runs transposed, many times (a deblur): a level plan
    that mixes each axis on its own (per-axis maps) transposes one combination of
    levels at a time, so there the exact gather and scatter run instead.
    """
    chosen = _route(spec, native, interim, paired)
    if paired:
        return replace(chosen, memo={})
    if not native and _first_call(spec, chosen):
        kind = "global" if chosen.kind == "global" else "gather"
        return Route(backends.load("reference"), kind, interim=True)
    return chosen


def _route(spec: BlurSpec, native: bool, interim: bool, paired: bool) -> Route:
    """:func:`route` on the backend the spec names (or ``auto`` chose)."""
    name, switched = _backend(spec, native, interim)
    backend = backends.load(name)
    if spec.sigma is not None:
        return Route(backend, "global", interim=switched)
    if backend.has_gpu() and cost.gather_on_gpu(_window(spec)):
        return Route(backend, "gather", interim=switched)
    if native:  # a loop of whole-image passes, differentiable: one list for every axis
        levels = plan_levels(spec)
        if levels is None or not levels.diagonal or not _native_levels_pay(spec, levels):
            return Route(backend, "gather", interim=switched)
        return Route(backend, "levels", levels, interim=switched)
    table = cost.COSTS.get(backend.name)
    levels = None if table is None or backend.correlate is None else plan_levels(spec)
    whole = backend.whole_image_levels  # (JAX: whole-image passes, its own costs)
    plan = None if levels is None else cost.choose(spec, levels, table, backend.bands, whole)
    if plan is None or (paired and not levels.diagonal):
        return Route(backend, "gather", interim=switched)
    return Route(backend, "levels", levels, plan, interim=switched)


def _native_levels_pay(spec: BlurSpec, levels: LevelPlan) -> bool:
    """Whether the JAX-native level mix (whole-image passes, as JAX's walk) should run
    rather than the gather: for a concrete map, when JAX's cost table says so, as on
    the NumPy route (2-D maps gather: the mix ran 2.5-4x slower there).  A traced map,
    whose values are unknown while tracing, keeps the mix: it is what the fit's
    objective differentiates, whose value and gradient the mix gives 2-6x faster
    than the gather's (:func:`napari_varblur.fit.solver.objective_tolerance`)."""
    if spec.max_radius is not None:
        return True
    return cost.choose(spec, levels, cost.COSTS["jax"], whole=True) is not None


def _backend(spec: BlurSpec, native: bool, interim: bool) -> tuple[str, bool]:
    """The backend's name, and whether a click switched from Numba to JAX."""
    if native:
        return "jax", False
    name = backends.resolve(spec.backend)
    if not interim or spec.backend != "auto" or name != "numba" or spec.lazy:
        return name, False
    if not _compiling(spec) or taps(spec) > INTERIM_TAPS:
        return name, False
    try:
        backends.load("jax")
    except backends.BackendUnavailableError:
        return name, False
    return "jax", True


def _first_call(spec: BlurSpec, chosen: Route) -> bool:
    """Whether an ``auto`` call runs on the NumPy reference (exact, float64 inside)
    because Numba would compile its kernels first: float32 and unmasked (the warm-ups'
    kinds), at most :data:`FIRST_CALL_S` of reference work, and its kind's warm-up
    child compiling them meanwhile (started here; :func:`.compiling.start`)."""
    if spec.backend != "auto" or chosen.name != "numba" or spec.lazy or spec.masked:
        return False
    if spec.model != "gather" or spec.precision != np.float32:
        return False
    # Cold first (a look at the kernel's signatures once it is compiled), then the work.
    if not chosen.backend.cold(chosen.kind, np.dtype(spec.precision)):
        return False
    if taps(spec) > REFERENCE_RATE[chosen.kind] * FIRST_CALL_S:
        return False
    return compiling.start(warm_kind(spec, chosen))


def warm_kind(spec: BlurSpec, chosen: Route | None = None) -> str:
    """The warm-up (:mod:`.warmup`) that compiles this blur's Numba kernels: the global
    passes, the level bands where ``chosen`` runs them, else the map's gather."""
    if spec.sigma is not None:
        return "global"
    bands = chosen is not None and chosen.plan is not None and chosen.plan.bands is not None
    return "levels" if bands else "map"


def _compiling(spec: BlurSpec) -> bool:
    """Whether a warm-up this blur may need still compiles (before its route is known:
    a tolerance map may run on the level bands)."""
    levels = spec.sigma is None and spec.tolerance is not None and compiling.busy("levels")
    return levels or compiling.busy(warm_kind(spec))


def radii(spec: BlurSpec) -> tuple[int, ...]:
    """The largest window radius per blurred axis: a global sigma's, a map's padding
    (its largest radius, within the mode's cap), or a traced map's ``max_radius``."""
    if spec.sigma is not None:
        return tuple(global_radius(spec, i) for i in range(len(spec.axes)))
    return _window(spec)


def taps(spec: BlurSpec) -> float:
    """Window taps of the whole blur: each pixel sums its window (a map), or each
    axis's taps in turn (a global sigma)."""
    widths = [2 * r + 1 for r in radii(spec)]
    per_pixel = math.prod(widths) if spec.sigma is None else sum(widths)
    return float(math.prod(spec.shape)) * per_pixel


def _window(spec: BlurSpec) -> tuple[int, ...]:
    return spec.max_radius if spec.max_radius is not None else cost.map_radii(spec)
