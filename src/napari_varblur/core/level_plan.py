"""The level engine's shared half: which levels a sigma map needs, and each level's 1-D
pass as padded tables, built once for every backend.

:func:`plan_levels` decides the levels of a map (quantised, or placed within a
``tolerance``; :mod:`.levels` has the rules and the bound), for a concrete map and for
a traced one (the JAX-native API inside ``jit``) alike.  :func:`level_table` turns one
blurred axis's levels into its passes (:func:`~napari_varblur.core.taps.level_pass`, the
contract's pass) in the two forms the kernels read: by source index (Numba's level
bands, the tile walk) and centred (JAX's loop of passes).  Backends supply only the
kernels that run and mix them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache

import numpy as np

from .levels import (
    MAX_LEVEL_RADIUS,
    AxisLevels,
    bucket_range,
    distinct_values,
    quantised_levels,
    tolerance_levels,
    windows,
)
from .modes import Mode
from .rules import radius_of
from .shapes import compact
from .spec import BlurSpec
from .taps import AxisPass, MapAxis, floored, gaussian_taps, level_pass, map_limit, map_plan


@dataclass(frozen=True)
class LevelPlan:
    """The levels of each blurred axis; ``diagonal``: one list shared by every axis and
    mixed alike on each (one global blur per level), else each axis mixes its own.
    ``compact``: a concrete plan's maps, one per axis, without the axes they are
    constant along (:func:`~napari_varblur.core.shapes.compact`; views), which the
    planner looked at to place the levels and reads again (empty for a traced map)."""

    levels: tuple[AxisLevels, ...]
    diagonal: bool
    compact: tuple = field(default=(), compare=False, repr=False)

    @property
    def exact(self) -> bool:
        """Quantised on every axis: each pixel takes its own level, the exact contract."""
        return all(lv.quantised for lv in self.levels)


def plan_levels(spec: BlurSpec) -> LevelPlan | None:
    """The levels of a sigma-map spec, or ``None`` where the exact gather must run.

    A concrete map is quantised where an axis has few values; otherwise, with a
    tolerance, one shared list for an isotropic map, else one list per axis (the error
    budget split between the axes that mix).  A traced map (``spec.max_radius``) gets,
    with a tolerance and one sigma per pixel, one shared list covering every sigma up
    to the largest whose radius fits ``max_radius``.
    """
    if spec.sigma_map is None:
        return None
    if spec.max_radius is not None:
        return _traced(spec)
    maps = map_plan(spec)
    views = compact_maps(maps)  # (only what varies is read: a map along z is its column)
    plan = _concrete(spec, maps, {id(m.sigma): v for m, v in zip(maps, views)})
    return None if plan is None else replace(plan, compact=views)


def compact_maps(maps: list[MapAxis]) -> tuple[np.ndarray, ...]:
    """Each axis's map without the axes it is constant along (length 1 there), as
    views (:func:`~napari_varblur.core.shapes.compact`); a map shared by several axes
    is examined once, and its view repeats."""
    seen: dict = {}
    for m in maps:
        if id(m.sigma) not in seen:
            seen[id(m.sigma)] = compact(m.sigma)
    return tuple(seen[id(m.sigma)] for m in maps)


def _traced(spec: BlurSpec) -> LevelPlan | None:
    limits = spec.max_radius
    if spec.tolerance is None or not spec.isotropic or max(limits) > MAX_LEVEL_RADIUS:
        return None
    caps = [map_limit(spec.modes[i], spec.shape[a]) for i, a in enumerate(spec.axes)]
    shapes = [windows(spec.shape[a], spec.modes[i].crop, caps[i]) for i, a in enumerate(spec.axes)]
    highest = bucket_range(min(limits), spec.truncate)[1]
    shared = tolerance_levels(0.0, highest, True, 2 * spec.tolerance, spec.truncate, shapes,
                              max(caps))  # fmt: skip
    return LevelPlan((shared,) * len(spec.axes), True)


def _concrete(spec: BlurSpec, maps: list[MapAxis], small: dict) -> LevelPlan | None:
    values = {key: distinct_values(c) for key, c in small.items()}
    free = [m for m in maps if values[id(m.sigma)] is None]
    if free and spec.tolerance is None:
        return None
    unique = {id(m.sigma) for m in free}  # (a map shared by axes: looked at once)
    ranges = {key: _range(small[key]) for key in unique}
    if any(radius_of(ranges[id(m.sigma)][1], m.truncate) > MAX_LEVEL_RADIUS for m in free):
        return None
    if not free:
        levels = tuple(quantised_levels(values[id(m.sigma)], m.truncate, m.limit) for m in maps)
        same = all(np.array_equal(lv.radius, levels[0].radius) for lv in levels)
        if spec.isotropic and same:
            return LevelPlan((levels[0],) * len(maps), True)
        return LevelPlan(levels, False)
    if spec.isotropic:
        # One list for every axis, bucketed by the uncapped radius (a crop axis caps
        # it at n - 1: the same cap for both ends of an interval).
        low, high, zero = ranges[id(maps[0].sigma)]
        shapes = [windows(m.n, m.crop, m.limit) for m in maps]
        shared = tolerance_levels(low, high, zero, 2 * spec.tolerance, spec.truncate, shapes,
                                  max(m.limit for m in maps))  # fmt: skip
        return LevelPlan((shared,) * len(maps), True)
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
    return LevelPlan(tuple(out), False)


def _range(sigma: np.ndarray) -> tuple[float, float, bool]:
    """Smallest positive sigma, largest sigma, and whether any is 0."""
    low, high = float(sigma.min()), float(sigma.max())
    if low > 0 or high == 0:
        return low, high, low == 0
    return float(sigma[sigma > 0].min()), high, True


@dataclass(frozen=True)
class LevelTable:
    """One blurred axis's passes for the levels ``used`` (row ``j``: level ``used[j]``),
    padded into arrays.

    By source index (every backend's ``correlate`` form): ``out[i] = scale[j, i] *
    sum_t weights[j, t] * x[src[j, i + t]]`` for ``t < taps[j]``, reading ``fill[j]``
    where ``src`` is -1; ``left[j]`` is the offset of the first tap.  ``radius`` is each
    level's radius on this axis (capped by the mode's map limit).  A level that leaves
    the axis untouched (sigma 0) is the identity.
    """

    axis: int
    n: int
    mode: Mode
    used: np.ndarray
    sigma: np.ndarray
    radius: np.ndarray
    passes: tuple[AxisPass | None, ...]
    src: np.ndarray
    weights: np.ndarray
    taps: np.ndarray
    left: np.ndarray
    scale: np.ndarray
    fill: np.ndarray

    @cached_property
    def centred(self) -> tuple[int, np.ndarray, np.ndarray]:
        """``(reach, taps, radius)``: each level's taps centred in a row of ``2 * reach
        + 1``, zero beyond its own ``radius`` (where reads stop), never folded (the
        reading side extends the axis by its mode), normalised unless crop, and
        :func:`~.taps.floored`; the identity where a level leaves the axis untouched."""
        radius = np.array(
            [0 if p is None else p.left if self.mode.crop else int(r)
             for p, r in zip(self.passes, self.radius)], np.int64,
        )  # fmt: skip
        reach = int(radius.max(initial=0))
        taps = np.zeros((len(self.passes), 2 * reach + 1))
        for row, (p, r) in enumerate(zip(self.passes, radius)):
            if p is None:
                taps[row, reach] = 1.0
                continue
            w = p.weights if self.mode.crop else gaussian_taps(float(self.sigma[row]), int(r))
            w = w if self.mode.crop else floored(w / w.sum(), self.weights.dtype)
            taps[row, reach - r : reach + r + 1] = w
        return reach, taps, radius


def level_table(spec: BlurSpec, i: int, lv: AxisLevels, used: np.ndarray, dtype) -> LevelTable:
    """Blurred axis ``i``'s passes at the levels ``used`` of ``lv`` (the contract's
    :func:`~napari_varblur.core.taps.level_pass` each), in ``dtype``.  Tables are
    shared between calls with the same axis, mode and levels (every step of a
    deconvolution, every tile of a dask array): callers never write to them."""
    axis, mode = spec.axes[i], spec.modes[i]
    n, cap = spec.shape[axis], map_limit(mode, spec.shape[axis])
    used = np.asarray(used, np.int64)
    sigma = lv.sigma[used].astype(np.float64)
    radius = np.minimum(lv.radius[used], cap)
    key = (sigma.tobytes(), radius.astype(np.int64).tobytes(), used.tobytes())
    # cval is a validated float (the spec rejects a traced one), so it can be a key;
    # NaN as the one math.nan, which a key matches by identity (NaN != NaN).
    cval = math.nan if math.isnan(spec.cval) else float(spec.cval)
    return _level_table(axis, n, mode, cval, np.dtype(dtype).str, *key)


@lru_cache(maxsize=8)
def _level_table(axis, n, mode, cval, dtype, sigma, radius, used) -> LevelTable:
    dtype = np.dtype(dtype)
    sigma, radius = np.frombuffer(sigma, np.float64).copy(), np.frombuffer(radius, np.int64).copy()
    used = np.frombuffer(used, np.int64).copy()
    passes = tuple(level_pass(axis, n, float(s), int(r), mode, cval, dtype)
                   for s, r in zip(sigma, radius))  # fmt: skip
    parts = [
        (np.arange(n), 0.0, np.ones(1), np.ones(n), 0)
        if p is None
        else (p.source(), p.fill, p.weights, p.scale, p.left)
        for p in passes
    ]
    size, width = len(parts), max((len(w) for _, _, w, _, _ in parts), default=1)
    # int32 where the axis allows (the values are -1 .. n - 1, so every axis a band plan
    # takes): every call holds the tables, and a 4096² map's ~120 levels' are then 0.06
    # of its image.
    index = np.int32 if n <= np.iinfo(np.int32).max else np.int64
    src = np.full((size, n + width - 1), -1, index)
    weights = np.zeros((size, width), dtype)
    for j, (s, _, w, _, _) in enumerate(parts):
        src[j, : len(s)], weights[j, : len(w)] = s, w
    return LevelTable(
        axis, n, mode, used, sigma, radius, passes, src, weights,
        np.array([len(w) for _, _, w, _, _ in parts], np.int64),
        np.array([p[4] for p in parts], np.int64),
        np.array([sc for _, _, _, sc, _ in parts], dtype).reshape(size, n),
        np.array([f for _, f, _, _, _ in parts], dtype),
    )  # fmt: skip
