"""The cost model: whether running a level plan beats the exact gather, and how (the
tile walk or the backend's level bands), with one table per backend.

:func:`napari_varblur.core.level_plan.plan_levels` gives each blurred axis its levels;
here the maps are surveyed once (how fast sigma changes along each axis, each tile's
extremes), tile lengths are weighed, and the estimated work of the tile walk
(:mod:`napari_varblur.engine.walk`) and of the bands is compared with the gather's.
The planner (:mod:`napari_varblur.engine.planner`) asks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core.level_plan import LevelPlan, compact_maps
from ..core.levels import AxisLevels
from ..core.rules import radius_of
from ..core.sigma import mean_step
from ..core.spec import BlurSpec
from ..core.taps import MapAxis, map_plan


@dataclass(frozen=True)
class CostTable:
    """Seconds per unit of work: a tap of a 1-D pass, a pass call, a tile's bookkeeping,
    a pixel summed into the output, a tap of the exact gather (by blurred axes), and for
    level bands a pixel (locating its levels, finding the runs), a tap and a run (its
    bookkeeping and short loops)."""

    tap: float
    call: float
    tile: float
    sum: float
    gather: dict[int, float]
    band_pixel: float = 0.0
    band_tap: float = 0.0
    run: float = 0.0


#: Fitted on the Numba backend on 2 cores (``benchmarks/calibrate_levels.py``).
NUMBA_COSTS = CostTable(tap=2e-11, call=3e-5, tile=6e-4, sum=2e-9,
                        gather={1: 1.4e-10, 2: 1.4e-10, 3: 4.1e-10},
                        band_pixel=1e-8, band_tap=1e-10, run=1.5e-7)  # fmt: skip
#: Fitted on the JAX backend on the CPU, 2 cores (``calibrate_levels.py --backend jax``,
#: 2026-12-07, AMD EPYC): its level walk runs whole-image passes (:func:`whole_work`;
#: the tile term is moot), a loop over taps each a pass over memory, at ~5x Numba's
#: seconds per tap and 0.5 ms per pass call; its gather ran 1.5-2.9e-10 s per tap.
#: Numba's table had it walk levels 3-15x slower than its own gather on every 2-D map
#: tried (2048² sigma 1-16: 11.7-16.1 s against 2.2 s); this one keeps the walk for 3-D
#: maps with large sigma only (64x128x128 up to 8: 1.5 s against 4.1 s).
JAX_COSTS = CostTable(tap=1.0e-10, call=5.4e-4, tile=0.0, sum=6.2e-9,
                      gather={1: 2.1e-10, 2: 2.1e-10, 3: 2.0e-10})  # fmt: skip
#: One table per backend that walks levels.
COSTS: dict[str, CostTable] = {"numba": NUMBA_COSTS, "jax": JAX_COSTS}

#: The walk must look this much cheaper than the gather to be chosen: the estimate
#: is within a factor of about 3 of measured times (calibrate_levels.py).
MARGIN = 2.0
#: The walk's estimate ran 1.7-7x under its measured time on the orientation sweep
#: (``benchmarks/orientation.py``, 2026-12-04: least for a map along rows, most along
#: the contiguous axis), the bands' within 2x: against bands, the walk's counts thrice.
WALK_VS_BANDS = 3.0
#: On a GPU the exact gather beats a level loop, which pays per level for whole-image
#: passes and their launches.  Measured on an H200 (2026-12-04,
#: ``benchmarks/gpu_tolerance.json``, tolerance 1e-3): 2-D 2048² maps up to radius 48
#: 22 ms exact vs 337 ms by levels, radius 120 (58,081 taps) 0.12 vs 1.45 s; 3-D
#: 64x128x128 maps up to radius 24 (117,649 taps) 15 vs 175 ms.  The gather grows with
#: its taps, the loop with the radius: they would meet near 1.4M taps (an estimate).
#: So on a GPU a tolerance map takes the gather up to this many taps per pixel.
GPU_GATHER_TAPS = 1_000_000
#: Candidate tile lengths along an axis where the map varies.
TILE_LENGTHS = (8, 16, 32, 64, 128, 256, 512)
MAX_TILES = 4096


@dataclass(frozen=True)
class Plan:
    """A level plan and how it runs: the tiling of the walk, or the backend's bands."""

    levels: LevelPlan
    tiles: tuple[int, ...]  # tile length per blurred axis
    survey: Survey | None = None  # the maps' shape, computed once (else by the walk)
    bands: object | None = None  # the backend's level bands, when they were chosen


class Survey:
    """What the planner and the walk need to know about the maps, computed once: each
    map without its constant axes (views), how fast sigma changes along each blurred
    axis, and each map's smallest and largest sigma per 8-pixel tile."""

    BASE = 8

    def __init__(self, spec: BlurSpec, maps: list[MapAxis], compact: tuple = ()) -> None:
        self.spec = spec
        # (The level plan's, where it has them: the constant axes are found once.)
        self.compact = list(compact or compact_maps(maps))
        self.change = _change(spec, self.compact)
        self._base: dict = {}
        self._tiled: dict = {}

    def extremes(self, i: int, tiles: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Axis ``i``'s map: each tile's smallest and largest sigma, on the grid of
        tiles over the blurred axes in their order (length 1 where it is constant)."""
        c = self.compact[i]
        key = (id(c), tiles)  # (axes sharing one map share its tiles' extremes)
        if key not in self._tiled:
            self._tiled[key] = self._extremes(c, tiles)
        return self._tiled[key]

    def _extremes(self, c: np.ndarray, tiles: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        spec = self.spec
        if id(c) not in self._base:
            low = high = c
            batch = tuple(a for a in range(c.ndim) if a not in spec.axes)
            if batch:
                low, high = low.min(axis=batch, keepdims=True), high.max(axis=batch, keepdims=True)
            for a in spec.axes:
                if c.shape[a] > 1:
                    low, high = (
                        _reduce(low, a, self.BASE, np.minimum),
                        _reduce(high, a, self.BASE, np.maximum),
                    )
            self._base[id(c)] = (low, high)
        low, high = self._base[id(c)]
        for a, t in zip(spec.axes, tiles):
            if c.shape[a] > 1:
                step = t // self.BASE if t < spec.shape[a] else low.shape[a]
                low, high = _reduce(low, a, step, np.minimum), _reduce(high, a, step, np.maximum)
        keep = tuple(0 if a not in spec.axes else slice(None) for a in range(c.ndim))
        order = [sorted(spec.axes).index(a) for a in spec.axes]
        return (np.transpose(np.asarray(low[keep], np.float64), order),
                np.transpose(np.asarray(high[keep], np.float64), order))  # fmt: skip


def choose(
    spec: BlurSpec, levels: LevelPlan, costs: CostTable, bands=None, whole: bool = False
) -> Plan | None:
    """How to run ``levels`` for a NumPy sigma-map blur, or ``None`` for the exact gather.

    ``bands`` is the backend's :class:`~napari_varblur.backends.base.Bands` (or
    ``None``): a diagonal plan weighs them against the tile walk and the gather.
    ``whole``: the backend runs every level over the whole image (one tile, no
    narrowing), and the walk is costed so.
    """
    maps = map_plan(spec)
    survey = Survey(spec, maps, levels.compact)
    if whole:  # one tile: no tilings to weigh
        tiles = tuple(m.n for m in maps)
        cost, gather = whole_estimate(spec, maps, survey, levels, costs)
    else:
        best = None
        for length in _tile_candidates(spec, maps):
            tiles = _tile_lengths(maps, survey.change, length)
            cost, gather = _estimate(spec, maps, survey, levels, tiles, costs)
            if best is None or cost < best[0]:
                best = (cost, gather, tiles)
        cost, gather, tiles = best
    if levels.diagonal and bands is not None:
        beat = min(cost * WALK_VS_BANDS, gather / MARGIN)
        found = _bands(spec, levels.levels[0], bands, costs, beat, survey.compact[0])
        if found is not None:
            return Plan(levels, tiles, survey, found)
    if cost * MARGIN >= gather:
        return None
    return Plan(levels, tiles, survey)


def whole_estimate(spec, maps, survey, levels: LevelPlan, costs: CostTable
                   ) -> tuple[float, float]:  # fmt: skip
    """:func:`_estimate` for a level walk in whole-image passes (JAX): each used level's
    passes over every pixel with that level's own taps, one pass call per node of the
    walk and one weighted sum per leaf; the gather as on one whole tile (as its
    constants were fitted: ``calibrate_levels.py --backend jax``)."""
    work = whole_work(spec, maps, survey, levels)
    walk = costs.tap * work["taps"] + costs.call * work["calls"] + costs.sum * work["sums"]
    return walk, costs.gather[min(3, len(maps))] * work["gather"]


def whole_work(spec, maps, survey, levels: LevelPlan) -> dict[str, float]:
    """The counts behind :func:`whole_estimate`: the walk goes depth first along the
    axes (all of them at each level of a diagonal plan), so a node at depth ``i`` is one
    combination of the levels used on the axes before it; the gather's taps are
    :func:`_walk_work`'s on the whole tile."""
    size, whole = float(spec.image.size), tuple(m.n for m in maps)
    order = sorted(range(len(maps)), key=lambda i: -survey.change[i])
    used = []
    for i, (m, lv) in enumerate(zip(maps, levels.levels)):
        low, high = survey.extremes(i, whole)
        k_hi, t_hi = lv.locate(high)
        top = int(np.max(k_hi if t_hi is None else k_hi + (t_hi > 0)))
        used.append(np.minimum(lv.radius[int(np.min(lv.locate(low)[0])) : top + 1], m.limit))
    taps = calls = 0.0
    nodes = 1
    for i in order:
        width, count = float(np.sum(2 * used[i] + 1)), len(used[i])
        parents = 1 if levels.diagonal else nodes  # diagonal: each level runs every axis once
        taps, calls, nodes = taps + parents * width, calls + parents * count, parents * count
    gather = _walk_work(spec, maps, survey, levels.levels, whole, levels.diagonal)["gather"]
    return dict(taps=taps * size, calls=calls, tiles=1.0, sums=nodes * size, gather=gather)


def _bands(spec: BlurSpec, levels: AxisLevels, bands, costs: CostTable, beat: float,
           compact: np.ndarray):  # fmt: skip
    """The backend's level bands if their estimated cost is below ``beat`` (the best
    of the tile walk and the gather), else ``None``.  They are built only when their
    fixed cost per pixel leaves them a chance.  ``compact``: the map (one for every
    axis) without its constant axes."""
    base = costs.band_pixel * spec.image.size
    if base >= beat:
        return None
    found = bands.plan(spec, levels, compact)
    if found is None:
        return None
    return found if base + costs.band_tap * found.taps + costs.run * found.nruns < beat else None


def gather_on_gpu(radii) -> bool:
    """Whether a GPU should run a map exactly rather than by levels: the gather's
    window (``radii``, the largest radius per blurred axis) is at most
    :data:`GPU_GATHER_TAPS` taps."""
    return math.prod(2 * int(r) + 1 for r in radii) <= GPU_GATHER_TAPS


def map_radii(spec: BlurSpec) -> tuple[int, ...]:
    """The gather's padding (its largest radius) per blurred axis of a map spec."""
    return tuple(m.pad for m in map_plan(spec))


def _change(spec: BlurSpec, compact: list[np.ndarray]) -> list[float]:
    """How fast each blurred axis's sigma changes: the mean step between neighbours
    along that axis, the largest over the maps (0 where no map varies); a map shared
    by several axes is looked at once."""
    unique = list({id(c): c for c in compact}.values())
    return [max((mean_step(c, a) for c in unique), default=0.0) for a in spec.axes]


def _tile_lengths(maps: list[MapAxis], change: list[float], length: int) -> tuple[int, ...]:
    """Tiles ``length`` long where sigma changes fastest, longer (by powers of two) where
    it changes slower, whole where it does not change."""
    fastest = max(change)
    out = []
    for m, c in zip(maps, change):
        if c == 0:
            out.append(m.n)
        else:
            stretch = 2 ** max(0, int(math.log2(fastest / c)))
            out.append(min(m.n, length * stretch))
    return tuple(out)


def _tile_candidates(spec: BlurSpec, maps: list[MapAxis]) -> tuple[int, ...]:
    """Tile lengths to weigh: at most ``MAX_TILES`` tiles each."""
    longest = max(m.n for m in maps)
    out = tuple(t for t in TILE_LENGTHS if t < longest) + (longest,)
    return tuple(t for t in out if math.prod(-(-m.n // t) for m in maps) <= MAX_TILES) or out[-1:]


def _estimate(spec, maps, survey, levels: LevelPlan, tiles, costs) -> tuple[float, float]:
    """Estimated seconds-like work of the level walk and of the exact gather, summed
    over tiles, from each tile's smallest and largest sigma per axis."""
    work = _walk_work(spec, maps, survey, levels.levels, tiles, levels.diagonal)
    walk = costs.tap * work["taps"] + costs.call * work["calls"] + costs.tile * work["tiles"]
    walk += costs.sum * work["sums"]
    return walk, costs.gather[min(3, len(maps))] * work["gather"]


def _walk_work(spec, maps, survey, levels, tiles, diagonal) -> dict[str, float]:
    """Counts behind :func:`_estimate`: pass taps, pass calls, tiles, summed pixels and
    the gather's taps.  A level's box is the share of the tile whose sigmas lie within
    about two level gaps, along each axis (the map's change along the other axes
    widens it)."""
    batch = math.prod(n for a, n in enumerate(spec.shape) if a not in spec.axes)
    size = [min(t, m.n) for t, m in zip(tiles, maps)]
    change = survey.change
    order = sorted(range(len(maps)), key=lambda i: -change[i])
    counts, reach, window, spread = [], [], 1.0, []
    located: dict = {}  # (an isotropic map's axes share their extremes and levels)
    for i, (m, lv) in enumerate(zip(maps, levels)):
        low, high = survey.extremes(i, tiles)
        key = (id(low), id(lv))
        if key not in located:
            k_hi, t_hi = lv.locate(high)
            located[key] = (lv.locate(low)[0], k_hi if t_hi is None else k_hi + (t_hi > 0))
        k_lo, k_hi = located[key]
        counts.append(np.asarray(k_hi - k_lo + 1, np.int64))  # (int16 products overflow)
        reach.append(2 * np.minimum(lv.radius[k_hi], m.limit))
        window = window * (2 * np.minimum(radius_of((low + high) / 2, m.truncate), m.limit) + 1)
        spread.append(high - low)
    share = []
    gap = 2 * spread[0] / np.maximum(counts[0] - 1, 1)
    for i in range(len(maps)):
        across = sum(change[b] * size[b] for b in range(len(maps)) if b != i)
        along = change[i] * size[i]
        share.append(np.minimum(1.0, (gap + across) / along) if along > 0 else 1.0)
    taps = calls = 0.0
    nodes, box = 1, 1.0
    for depth, i in enumerate(order):
        nodes = counts[0] if diagonal else nodes * counts[i]
        box = box * size[i] * share[i]
        later = math.prod(size[b] + reach[b] for b in order[depth + 1 :])
        taps = taps + nodes * batch * box * later * (reach[i] + 1)
        calls = calls + nodes
    grid = _grid(maps, tiles)
    total = lambda x: float(np.sum(np.broadcast_to(x, grid)))  # noqa: E731
    return dict(
        taps=total(taps), calls=total(calls), tiles=float(math.prod(grid)),
        sums=total(nodes * batch * box), gather=total(batch * math.prod(size) * window),
    )  # fmt: skip


def _reduce(x: np.ndarray, axis: int, t: int, ufunc) -> np.ndarray:
    """``ufunc`` (``np.minimum`` or ``np.maximum``) over consecutive runs of ``t`` along
    ``axis`` (the last run may be short)."""
    n = x.shape[axis]
    full = n - n % t
    head = x[(slice(None),) * axis + (slice(0, full),)]
    parts = [
        _fold(head.reshape(x.shape[:axis] + (full // t, t) + x.shape[axis + 1 :]), axis + 1, ufunc)
    ]
    if full < n:
        tail = x[(slice(None),) * axis + (slice(full, n),)]
        parts.append(ufunc.reduce(tail, axis=axis, keepdims=True))
    return np.concatenate(parts, axis=axis)


def _fold(v: np.ndarray, axis: int, ufunc) -> np.ndarray:
    """``ufunc.reduce`` over ``axis`` of ``v``; over a short last axis one whole slice at
    a time, as NumPy's own reduction there ran 10x slower (8-pixel tiles along the
    contiguous axis of a 2048² map: 2.7 against 0.27 ms; along the first, NumPy's is
    the faster)."""
    if axis != v.ndim - 1 or v.shape[axis] > 64:
        return ufunc.reduce(v, axis=axis)
    out = v[(slice(None),) * axis + (0,)].copy()
    for i in range(1, v.shape[axis]):
        ufunc(out, v[(slice(None),) * axis + (i,)], out=out)
    return out


def _grid(maps, tiles) -> tuple[int, ...]:
    return tuple(-(-m.n // t) for m, t in zip(maps, tiles))
