"""A sigma map blurred by global passes: quantised maps exactly, others within a tolerance.

:mod:`napari_varblur.core.levels` gives each blurred axis a list of levels and each pixel a
mix of at most two of them per axis.  Here the image is cut into tiles; a tile needs
only the levels of its own sigmas, so a smooth map costs a few levels per tile, not
the whole list.  Per tile, a depth-first walk over the axes runs one 1-D pass per
level still needed (a pass along axis ``a`` reads a block holding the tile's halo and
writes the tile's own extent on that axis), and adds each combination of levels,
weighted by the product of the pixels' per-axis weights, into the output.

Backends supply only ``correlate(x, axis, source, fill, weights, scale)``: the same
1-D pass as a global blur.  :func:`choose` decides, per call, between this and the
exact per-pixel gather, from an estimate of each one's work.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from types import ModuleType

import numpy as np

from ..core.levels import (
    MAX_LEVEL_RADIUS,
    AxisLevels,
    distinct_values,
    quantised_levels,
    tolerance_levels,
    windows,
)
from ..core.rules import radius_of
from ..core.spec import BlurSpec
from ..core.taps import AxisPass, MapAxis, level_pass, map_plan

#: Seconds per unit of work, fitted on the Numba backend on 2 cores
#: (``benchmarks/calibrate_levels.py``): a tap of a 1-D pass, a pass call, a tile's
#: bookkeeping, a pixel summed into the output, a tap of the exact gather.
TAP_COST = 2e-11
CALL_COST = 3e-5
TILE_COST = 6e-4
SUM_COST = 2e-9
GATHER_COST = {1: 1.4e-10, 2: 1.4e-10, 3: 4.1e-10}
#: The walk must look this much cheaper than the gather to be chosen: the estimate
#: is within a factor of about 3 of measured times (calibrate_levels.py).
MARGIN = 2.0
#: Candidate tile lengths along an axis where the map varies.
TILE_LENGTHS = (8, 16, 32, 64, 128, 256, 512)
MAX_TILES = 4096


@dataclass(frozen=True)
class Plan:
    """Levels per blurred axis and the tiling that runs them."""

    levels: tuple[AxisLevels, ...]
    tiles: tuple[int, ...]  # tile length per blurred axis
    diagonal: bool  # one map for every axis, mixing the same levels on each
    exact: bool  # quantised on every axis: the exact contract
    survey: Survey | None = None  # the maps' shape, computed once (else by blur)


class Survey:
    """What the planner and the walk need to know about the maps, computed once: each
    map without its constant axes (views), how fast sigma changes along each blurred
    axis, and each map's smallest and largest sigma per 8-pixel tile."""

    BASE = 8

    def __init__(self, spec: BlurSpec, maps: list[MapAxis]) -> None:
        self.spec = spec
        self.compact = _compacts(maps)
        self.change = _change(spec, self.compact)
        self._base: dict = {}

    def extremes(self, i: int, tiles: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Axis ``i``'s map: each tile's smallest and largest sigma, on the grid of
        tiles over the blurred axes in their order (length 1 where it is constant)."""
        spec, c = self.spec, self.compact[i]
        if id(c) not in self._base:
            low = high = c
            batch = tuple(a for a in range(c.ndim) if a not in spec.axes)
            if batch:
                low, high = low.min(axis=batch, keepdims=True), high.max(axis=batch, keepdims=True)
            for a in spec.axes:
                if c.shape[a] > 1:
                    low, high = (
                        _reduce(low, a, self.BASE, np.min),
                        _reduce(high, a, self.BASE, np.max),
                    )
            self._base[id(c)] = (low, high)
        low, high = self._base[id(c)]
        for a, t in zip(spec.axes, tiles):
            if c.shape[a] > 1:
                step = t // self.BASE if t < spec.shape[a] else low.shape[a]
                low, high = _reduce(low, a, step, np.min), _reduce(high, a, step, np.max)
        keep = tuple(0 if a not in spec.axes else slice(None) for a in range(c.ndim))
        order = [sorted(spec.axes).index(a) for a in spec.axes]
        return (np.transpose(np.asarray(low[keep], np.float64), order),
                np.transpose(np.asarray(high[keep], np.float64), order))  # fmt: skip


def choose(spec: BlurSpec) -> Plan | None:
    """A level plan for a NumPy sigma-map blur, or ``None`` for the exact gather."""
    if spec.sigma_map is None:
        return None
    maps = map_plan(spec)
    found = levels_for(spec, maps)
    if found is None:
        return None
    levels, diagonal = found
    survey = Survey(spec, maps)
    best = None
    for length in _tile_candidates(spec, maps):
        tiles = _tile_lengths(maps, survey.change, length)
        cost, gather = _estimate(spec, maps, survey, levels, tiles, diagonal)
        if best is None or cost < best[0]:
            best = (cost, gather, tiles)
    cost, gather, tiles = best
    if cost * MARGIN >= gather:
        return None
    return Plan(levels, tiles, diagonal, all(not lv.joined.any() for lv in levels), survey)


def levels_for(spec: BlurSpec, maps: list[MapAxis]) -> tuple[tuple[AxisLevels, ...], bool] | None:
    """Levels per axis and whether they mix diagonally, or ``None`` (exact gather).

    Quantised where an axis's map has few values; otherwise, with a tolerance, one
    shared list for an isotropic map (when every axis gets the same radii), else one
    list per axis, the error budget split between the axes that mix.
    """
    values = {}
    for m in maps:
        if id(m.sigma) not in values:
            values[id(m.sigma)] = distinct_values(m.sigma)
    free = [m for m in maps if values[id(m.sigma)] is None]
    if free and spec.tolerance is None:
        return None
    if any(radius_of(float(m.sigma.max()), m.truncate) > MAX_LEVEL_RADIUS for m in free):
        return None
    if not free:
        levels = tuple(quantised_levels(values[id(m.sigma)], m.truncate, m.limit) for m in maps)
        same = all(np.array_equal(lv.radius, levels[0].radius) for lv in levels)
        if spec.isotropic and same:
            return (levels[0],) * len(maps), True
        return levels, False
    ranges = {id(m.sigma): _range(m.sigma) for m in free}
    if spec.isotropic:
        # One list for every axis, bucketed by the uncapped radius (a crop axis caps
        # it at n - 1: the same cap for both ends of an interval).
        low, high, zero = ranges[id(maps[0].sigma)]
        shapes = [windows(m.n, m.crop, m.limit) for m in maps]
        shared = tolerance_levels(low, high, zero, 2 * spec.tolerance, spec.truncate, shapes,
                                  max(m.limit for m in maps))  # fmt: skip
        return (shared,) * len(maps), True
    budget = 2 * spec.tolerance / len(free)
    out = []
    for m in maps:
        v = values[id(m.sigma)]
        if v is not None:
            out.append(quantised_levels(v, m.truncate, m.limit))
            continue
        low, high, zero = ranges[id(m.sigma)]
        out.append(tolerance_levels(low, high, zero, budget, m.truncate,
                                    [windows(m.n, m.crop)], m.limit))  # fmt: skip
    return tuple(out), False


def _range(sigma: np.ndarray) -> tuple[float, float, bool]:
    """Smallest positive sigma, largest sigma, and whether any is 0."""
    low, high = float(sigma.min()), float(sigma.max())
    if low > 0 or high == 0:
        return low, high, low == 0
    return float(sigma[sigma > 0].min()), high, True


def _change(spec: BlurSpec, compact: list[np.ndarray]) -> list[float]:
    """How fast each blurred axis's sigma changes: the mean step between neighbours
    along that axis, the largest over the maps (0 where no map varies)."""
    out = []
    for a in spec.axes:
        steps = []
        for c in compact:
            if c.shape[a] > 1:
                # A grid of at most ~256 samples per axis is plenty for a mean step.
                stride = [max(1, n // 256) for n in c.shape]
                thin = c[tuple(slice(None, None, k) for k in stride)]
                steps.append(float(np.abs(np.diff(thin, axis=a)).mean()) / stride[a])
        out.append(max(steps, default=0.0))
    return out


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


# ------------------------------------------------------------------- tiles


@dataclass(frozen=True)
class Tile:
    """Output ranges ``[start, stop)`` per blurred axis."""

    start: tuple[int, ...]
    stop: tuple[int, ...]

    def index(self, spec: BlurSpec, sigma_shape: tuple[int, ...] | None = None) -> tuple:
        """The tile's index into the image (or into a map of ``sigma_shape``, whose
        length-1 axes broadcast)."""
        index = [slice(None)] * len(spec.shape)
        for a, lo, hi in zip(spec.axes, self.start, self.stop):
            if sigma_shape is None or sigma_shape[a] != 1:
                index[a] = slice(lo, hi)
        return tuple(index)


def _tiles(spec: BlurSpec, lengths: tuple[int, ...]):
    ranges = [
        [(lo, min(lo + t, spec.shape[a])) for lo in range(0, spec.shape[a], t)]
        for a, t in zip(spec.axes, lengths)
    ]
    for combo in itertools.product(*ranges):
        yield Tile(tuple(lo for lo, _ in combo), tuple(hi for _, hi in combo))


def _estimate(spec, maps, survey, levels, tiles, diagonal) -> tuple[float, float]:
    """Estimated seconds-like work of the level walk and of the exact gather, summed
    over tiles, from each tile's smallest and largest sigma per axis."""
    work = _walk_work(spec, maps, survey, levels, tiles, diagonal)
    walk = TAP_COST * work["taps"] + CALL_COST * work["calls"] + TILE_COST * work["tiles"]
    walk += SUM_COST * work["sums"]
    return walk, GATHER_COST[min(3, len(maps))] * work["gather"]


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
    for i, (m, lv) in enumerate(zip(maps, levels)):
        low, high = survey.extremes(i, tiles)
        k_lo, _ = lv.locate(low)
        k_hi, t_hi = lv.locate(high)
        k_hi = k_hi if t_hi is None else k_hi + (t_hi > 0)
        counts.append(k_hi - k_lo + 1)
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


def _reduce(x: np.ndarray, axis: int, t: int, fn) -> np.ndarray:
    """``fn`` over consecutive runs of ``t`` along ``axis`` (the last run may be short)."""
    n = x.shape[axis]
    full = n - n % t
    head = x[(slice(None),) * axis + (slice(0, full),)]
    parts = [fn(head.reshape(x.shape[:axis] + (full // t, t) + x.shape[axis + 1 :]), axis=axis + 1)]
    if full < n:
        parts.append(fn(x[(slice(None),) * axis + (slice(full, n),)], axis=axis, keepdims=True))
    return np.concatenate(parts, axis=axis)


def _grid(maps, tiles) -> tuple[int, ...]:
    return tuple(-(-m.n // t) for m, t in zip(maps, tiles))


# ------------------------------------------------------------------- the walk


def blur(spec: BlurSpec, plan: Plan, backend: ModuleType) -> np.ndarray:
    """Run a level plan with ``backend.correlate``; a new array of ``spec.precision``."""
    maps = map_plan(spec)
    out = np.empty(spec.shape, np.dtype(spec.precision))
    if getattr(backend, "WHOLE_IMAGE_LEVELS", False):
        plan = replace(plan, tiles=tuple(m.n for m in maps))
    walk = _Walk(spec, maps, plan, plan.survey or Survey(spec, maps), backend)
    for tile in _tiles(spec, plan.tiles):
        walk.tile(tile, out[tile.index(spec)])
    return out


def _compacts(maps: list[MapAxis]) -> list[np.ndarray]:
    """Each axis's map without the axes it is constant along (kept with length 1), as
    views; a map shared by several axes is examined once."""
    seen: dict = {}
    for m in maps:
        if id(m.sigma) not in seen:
            sigma = m.sigma
            seen[id(sigma)] = sigma[tuple(
                slice(None) if n > 1 and not (sigma == sigma.take([0], axis=a)).all()
                else slice(0, 1) for a, n in enumerate(sigma.shape)
            )]  # fmt: skip
    return [seen[id(m.sigma)] for m in maps]


@dataclass(frozen=True)
class _SourcedPass:
    """A full-axis pass with its source indices computed once (tiles slice them)."""

    p: AxisPass
    src: np.ndarray

    @classmethod
    def of(cls, *args) -> _SourcedPass | None:
        p = level_pass(*args)
        return None if p is None else cls(p, p.source())

    @property
    def taps(self) -> int:
        return self.p.taps


class _Walk:
    """The depth-first walk over axes and levels, tile by tile.

    A node's box is the part of the tile whose pixels can mix its levels: narrowed, on
    every axis, with each level's extent along that axis (from per-tile profiles of the
    smallest and largest level on each line), so weights, passes and sums only touch
    that box.  Axes where the map varies are walked first, where narrowing pays most.
    """

    def __init__(self, spec: BlurSpec, maps: list[MapAxis], plan: Plan, survey, backend) -> None:
        self.spec, self.plan, self.backend = spec, plan, backend
        self.dtype = np.dtype(spec.precision)
        self.maps = survey.compact
        self.axes = maps
        self.order = sorted(range(len(maps)), key=lambda i: -survey.change[i])
        self.passes: dict = {}
        # A backend that compiles per shape gets whole-image passes (no narrowing).
        self.narrowing = not getattr(backend, "WHOLE_IMAGE_LEVELS", False)
        # Non-finite values (image or cval) need `where` when summing; others do not.
        self.finite = bool(np.isfinite(spec.image).all()) and (
            np.isfinite(spec.cval) or all(m.name != "constant" for m in spec.modes)
        )

    def tile(self, tile: Tile, target: np.ndarray) -> None:
        """Blur one tile into ``target`` (the output's view of it)."""
        spec = self.spec
        self.mixes, self.profiles, passes, seen = [], [], [], {}
        for i, lv in enumerate(self.plan.levels):
            key = (id(self.maps[i]), id(lv))
            if key not in seen:  # a map and levels shared by several axes: located once
                k, t = lv.locate(self.maps[i][tile.index(spec, self.maps[i].shape)], self.dtype)
                seen[key] = (k, t), self._profiles(k, t), _used(k, t)
            mix, profiles, used = seen[key]
            self.mixes.append(mix)
            self.profiles.append(profiles)
            passes.append({lvl: self._axis_pass(i, lvl) for lvl in used})
        self.pass_of = passes
        index = _block_index(spec, tile, passes)
        self.first = [index[a].start for a in spec.axes]
        self.start = tile.start
        self.target = target
        target[...] = 0
        box = list(zip(tile.start, tile.stop))
        # The block is read, never written: the image itself when it has the dtype.
        self._visit(spec.image[index].astype(self.dtype, copy=False), 0, None, box, None)

    def _profiles(self, k: np.ndarray, t: np.ndarray) -> list:
        """Per blurred axis (where ``k`` varies): the smallest and largest level mixed
        on each line across the tile, or ``None``."""
        top = k if t is None else k + (t > 0)
        out = []
        for a in self.spec.axes:
            if k.shape[a] == 1:
                out.append(None)
                continue
            other = tuple(b for b in range(k.ndim) if b != a)
            out.append((k.min(axis=other), top.max(axis=other)))
        return out

    def _narrow(self, box, i: int, level: int):
        """``box`` cut to the lines whose pixels can mix ``level`` on axis ``i``'s mix;
        ``None`` when empty."""
        out = list(box)
        for b, prof in enumerate(self.profiles[i]):
            if prof is None:
                continue
            lo, hi = box[b][0] - self.start[b], box[b][1] - self.start[b]
            hits = np.flatnonzero((prof[0][lo:hi] <= level) & (prof[1][lo:hi] >= level))
            if not hits.size:
                return None
            out[b] = (box[b][0] + int(hits[0]), box[b][0] + int(hits[-1]) + 1)
        return out

    def _cut(self, values, box, inner, relative_to=None):
        """``values`` covering ``box`` (or the tile, ``relative_to``) cut to ``inner``
        on the blurred axes where it is longer than 1."""
        index = [slice(None)] * values.ndim
        origin = box if relative_to is None else relative_to
        for b, a in enumerate(self.spec.axes):
            if values.shape[a] != 1:
                index[a] = slice(inner[b][0] - origin[b][0], inner[b][1] - origin[b][0])
        return values[tuple(index)]

    def _weight(self, i: int, level: int, inner) -> np.ndarray:
        """Axis ``i``'s weight of ``level`` on the pixels of ``inner``."""
        tile = list(zip(self.start, self.start))
        k, t = self.mixes[i]
        k = self._cut(k, tile, inner)
        if t is None:
            return k == level
        t = self._cut(t, tile, inner)
        return np.where(k == level, 1 - t, 0) + np.where(k == level - 1, t, 0)

    def _visit(self, z, depth: int, weight, box, level) -> None:
        if depth == len(self.order):
            self._add(z, weight, box)
            return
        i = self.order[depth]
        follow = self.plan.diagonal and level is not None
        for lvl, p in self.pass_of[i].items():
            if follow and lvl != level:
                continue
            inner = box if follow or not self.narrowing else self._narrow(box, i, lvl)
            if inner is None:
                continue
            w = self._cut(weight, box, inner) if weight is not None else None
            if not follow:
                own = self._weight(i, lvl, inner)
                w = own if w is None else w * own
                if not w.any():
                    continue
            y = self._walked(z, box, inner, depth)
            y = _run_pass(y, self.spec.axes[i], *inner[i], self.first[i], p, self.backend)
            self._visit(y, depth + 1, w, inner, lvl)

    def _walked(self, z, box, inner, depth: int):
        """``z`` (covering ``box`` on the walked axes) cut to ``inner`` there."""
        index = [slice(None)] * z.ndim
        for d in range(depth):
            b = self.order[d]
            index[self.spec.axes[b]] = slice(inner[b][0] - box[b][0], inner[b][1] - box[b][0])
        return z[tuple(index)]

    def _add(self, z, weight, box) -> None:
        tile = list(zip(self.start, self.start))
        target = self._cut(self.target, tile, box)
        if weight.dtype == bool:  # quantised on every axis: each pixel takes one level
            np.copyto(target, z, where=weight)
        elif self.finite:
            target += weight * z
        else:
            # `where`, not a product: a NaN the pixel does not mix must not reach it.
            with np.errstate(invalid="ignore"):
                target += np.where(weight != 0, weight * z, self.dtype.type(0))

    def _axis_pass(self, i: int, level: int):
        """The full-axis pass of one level (``None``: the axis untouched), built once."""
        key = (i, level)
        if key not in self.passes:
            m, lv = self.axes[i], self.plan.levels[i]
            sigma, radius = float(lv.sigma[level]), int(lv.radius[level])
            self.passes[key] = _SourcedPass.of(
                m.axis, m.n, sigma, radius, m.mode, self.spec.cval, self.dtype
            )
        return self.passes[key]


def _used(k: np.ndarray, t: np.ndarray | None) -> list[int]:
    """The levels a tile's pixels mix: their own ``k``, and ``k + 1`` where ``t > 0``."""
    lo = int(k.min())
    hits = np.bincount((k - lo).ravel(), minlength=int(k.max()) - lo + 2) > 0
    if t is not None:
        upper = np.bincount((k - lo).ravel(), weights=(t > 0).ravel(), minlength=len(hits))
        hits[1:] |= upper[: len(hits) - 1] > 0
    return (np.flatnonzero(hits) + lo).tolist()


def _reads(p: _SourcedPass | None, lo: int, hi: int) -> tuple[int, int]:
    """The pixels (``[first, last + 1)``) a pass reads for outputs ``lo .. hi - 1``."""
    if p is None:
        return lo, hi
    src = p.src[lo : hi + p.taps - 1]
    src = src[src >= 0]
    return (int(src.min()), int(src.max()) + 1) if src.size else (lo, lo + 1)


def _block_index(spec: BlurSpec, tile: Tile, pass_of) -> tuple:
    index = [slice(None)] * len(spec.shape)
    for i, a in enumerate(spec.axes):
        spans = [_reads(p, tile.start[i], tile.stop[i]) for p in pass_of[i].values()]
        index[a] = slice(min(s[0] for s in spans), max(s[1] for s in spans))
    return tuple(index)


def _run_pass(z, axis: int, lo: int, hi: int, first: int, p: _SourcedPass | None, backend):
    """One level's pass along ``axis`` of a block that starts at pixel ``first`` there:
    the outputs ``lo .. hi - 1``."""
    if p is None:
        return z[(slice(None),) * axis + (slice(lo - first, hi - first),)]
    src = p.src[lo : hi + p.taps - 1]
    src = np.where(src >= 0, src - first, -1)
    return backend.correlate(z, axis, src, p.p.fill, p.p.weights, p.p.scale[lo:hi])
