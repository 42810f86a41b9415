"""The tile walk: a sigma map blurred by global passes at a few levels, mixed per pixel.

The planner (:mod:`napari_varblur.engine.cost`) gives each blurred axis its levels and
the tiling.  Per tile, a depth-first walk over the axes runs one 1-D pass per level still
needed (a pass along axis ``a`` reads a block holding the tile's halo and writes the
tile's own extent on that axis), and adds each combination of levels, weighted by the
product of the pixels' per-axis weights (:func:`~napari_varblur.core.levels.level_weight`),
into the output.  Backends supply only ``correlate``: the same 1-D pass as a global blur.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import numpy as np

from ..backends.base import Backend
from ..core.level_plan import LevelTable, level_table
from ..core.levels import level_weight
from ..core.spec import BlurSpec
from ..core.taps import MapAxis, map_plan
from .cost import Plan, Survey


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


def blur(spec: BlurSpec, plan: Plan, backend: Backend) -> np.ndarray:
    """Run a level plan with ``backend.correlate``; a new array of ``spec.precision``."""
    maps = map_plan(spec)
    out = np.empty(spec.shape, np.dtype(spec.precision))
    if backend.whole_image_levels:
        plan = replace(plan, tiles=tuple(m.n for m in maps))
    walk = _Walk(spec, maps, plan, plan.survey or Survey(spec, maps), backend)
    for tile in _tiles(spec, plan.tiles):
        walk.tile(tile, out[tile.index(spec)])
    return out


@dataclass(frozen=True)
class _Pass:
    """Row ``j`` of an axis's level table: one level's full-axis pass."""

    table: LevelTable
    j: int

    @property
    def taps(self) -> int:
        return int(self.table.taps[self.j])

    @property
    def src(self) -> np.ndarray:
        return self.table.src[self.j]


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
        self.levels = plan.levels.levels
        self.order = sorted(range(len(maps)), key=lambda i: -survey.change[i])
        self.tables: dict = {}
        # A backend that compiles per shape gets whole-image passes (no narrowing).
        self.narrowing = not backend.whole_image_levels
        # Non-finite values (image or cval) need `where` when summing; others do not.
        self.finite = bool(np.isfinite(spec.image).all()) and (
            np.isfinite(spec.cval) or all(m.name != "constant" for m in spec.modes)
        )

    def tile(self, tile: Tile, target: np.ndarray) -> None:
        """Blur one tile into ``target`` (the output's view of it)."""
        spec = self.spec
        self.mixes, self.profiles, passes, seen = [], [], [], {}
        for i, lv in enumerate(self.levels):
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
        return level_weight(k, None if t is None else self._cut(t, tile, inner), level)

    def _visit(self, z, depth: int, weight, box, level) -> None:
        if depth == len(self.order):
            self._add(z, weight, box)
            return
        i = self.order[depth]
        follow = self.plan.levels.diagonal and level is not None
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

    def _axis_pass(self, i: int, level: int) -> _Pass | None:
        """The full-axis pass of one level (``None``: the axis untouched); each axis's
        table of every level is built once, by the level engine."""
        if i not in self.tables:
            lv = self.levels[i]
            self.tables[i] = level_table(self.spec, i, lv, np.arange(len(lv)), self.dtype)
        table = self.tables[i]
        return None if table.passes[level] is None else _Pass(table, level)


def _used(k: np.ndarray, t: np.ndarray | None) -> list[int]:
    """The levels a tile's pixels mix: their own ``k``, and ``k + 1`` where ``t > 0``."""
    lo = int(k.min())
    hits = np.bincount((k - lo).ravel(), minlength=int(k.max()) - lo + 2) > 0
    if t is not None:
        upper = np.bincount((k - lo).ravel(), weights=(t > 0).ravel(), minlength=len(hits))
        hits[1:] |= upper[: len(hits) - 1] > 0
    return (np.flatnonzero(hits) + lo).tolist()


def _reads(p: _Pass | None, lo: int, hi: int) -> tuple[int, int]:
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


def _run_pass(z, axis: int, lo: int, hi: int, first: int, p: _Pass | None, backend):
    """One level's pass along ``axis`` of a block that starts at pixel ``first`` there:
    the outputs ``lo .. hi - 1``."""
    if p is None:
        return z[(slice(None),) * axis + (slice(lo - first, hi - first),)]
    table, j = p.table, p.j
    src = p.src[lo : hi + p.taps - 1]
    src = np.where(src >= 0, src - first, -1)
    return backend.correlate(z, axis, src, table.fill[j], table.weights[j, : p.taps],
                             table.scale[j, lo:hi])  # fmt: skip
