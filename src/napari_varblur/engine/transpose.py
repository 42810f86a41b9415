"""The scatter: the exact transpose of every route the router runs, for the NumPy route.

The gather is a linear map of the image (plus, in constant mode, the fill's constant
term), built from three kinds of pieces; the scatter runs their transposes in reverse:

- a **1-D pass** ``out[i] = scale[i] * sum_t w[t] * x[source[i + t]]``, i.e. ``D C``
  with ``D`` the diagonal of ``scale``.  In crop, reflect, wrap and constant mode ``C``
  is symmetric (a symmetric kernel over a symmetric extension), so ``(D C)^T y = C (D
  y)``: the backend's own forward pass over ``scale * y`` with fill 0
  (:func:`_symmetric_t`).  Mirror and nearest are not (their edge rows count a pixel
  twice); there :func:`correlate_t` spreads ``scale * y`` over the extended axis with
  the taps reversed (a full correlation) and folds the extension back onto the axis;
- a **global blur**: its passes transposed (the passes along different axes commute);
- a **level mix** ``sum_l w_l(p) blur_l(x)(p)``: ``sum_l blur_l^T (w_l * y)``, each level
  only over the box of pixels that mix it (:func:`level_scatter`; the walk's and the
  bands' mixes are the same linear map);
- the **exact gather**: the backend's ``scatter`` (each pixel spreads its value with its
  own kernel), or the reference's where the backend has none.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import replace

import numpy as np

from .. import backends
from ..backends.base import Backend
from ..core.level_plan import LevelPlan, LevelTable, level_table
from ..core.levels import level_weight
from ..core.spec import BlurSpec
from ..core.taps import fold_along, global_plan, map_plan

#: Modes whose 1-D pass (without its scale) is a symmetric matrix.
SYMMETRIC = frozenset({"crop", "reflect", "wrap", "constant"})


def correlate_t(backend: Backend, y, axis: int, source, weights, scale, n: int) -> np.ndarray:
    """The transpose of ``backend.correlate(x, axis, source, fill, weights, scale)``'s
    linear part, for ``x`` of length ``n`` along ``axis`` (float64 in, float64 out)."""
    taps, count = len(weights), len(scale)
    z = np.asarray(y, np.float64) * np.reshape(scale, _along(axis, np.ndim(y), count))
    # full[k] = sum_t w[t] z[k - t], k < count + taps - 1: the backend's own pass over z
    # extended by zeros, with the taps reversed.
    full_source = np.full(count + 2 * (taps - 1), -1, np.int64)
    full_source[taps - 1 : taps - 1 + count] = np.arange(count)
    full = backend.correlate(z, axis, full_source, 0.0, np.ascontiguousarray(weights[::-1]),
                             np.ones(count + taps - 1))  # fmt: skip
    return fold_along(np.asarray(full, np.float64), axis, np.asarray(source)[: count + taps - 1], n)


def global_scatter(spec: BlurSpec, backend: Backend) -> np.ndarray:
    """The transpose of the global blur: one forward blur of ``scale * y`` without fill
    where every pass is symmetric, else the passes transposed one by one."""
    plan = global_plan(spec)
    if all(p.mode.name in SYMMETRIC for p in plan):
        z = spec.image.astype(spec.precision, copy=True)
        for p in plan:
            if p.mode.crop:
                z *= np.reshape(p.scale, _along(p.axis, z.ndim, p.n)).astype(z.dtype)
        flipped = [replace(p, scale=np.ones(p.n), fill=0.0) for p in plan]
        return np.asarray(backend.global_blur(replace(spec, image=z), flipped), spec.precision)
    y = np.asarray(spec.image, np.float64)
    for p in reversed(plan):
        y = correlate_t(backend, y, p.axis, p.source(), p.weights, p.scale, p.n)
    return y.astype(spec.precision)


def map_scatter(spec: BlurSpec, backend: Backend, pad_floor=None, memo=None) -> np.ndarray:
    """The transpose of the exact gather: the backend's scatter, else the reference's
    (``memo``: the route's, :class:`~.planner.Route`)."""
    out = backend.scatter(spec, pad_floor, memo) if backend.scatter is not None else None
    if out is None:
        out = backends.load("reference").scatter(spec, pad_floor)
    return np.asarray(out, spec.precision)


def level_scatter(spec: BlurSpec, levels: LevelPlan, backend: Backend) -> np.ndarray:
    """The transpose of a level mix: ``sum`` over the level combinations of the passes
    transposed, applied to the pixels' weights times ``y``, each combination only over
    the box of pixels that mix it (and, after the passes, what that box reaches)."""
    dtype = np.dtype(spec.precision)
    y = spec.image.astype(dtype, copy=False)
    mixes, tables, kept, memo = _prepared(spec, levels, dtype)
    # The levels add up in the precision, as the forward mix does (a float64 sum cost a
    # third of a 1024² float32 deblur's iteration, converting every level's box).
    out = np.zeros(spec.shape, dtype)
    # A backend that compiles per shape gets whole images (as the walk gives it).
    whole = backend.whole_image_levels
    if levels.diagonal:
        k, t = mixes[0]
        count = len(levels.levels[0])
        spans = _memo(memo, ("spans", whole), lambda: _spans(k, t is not None, count, whole))
        for level in range(count):
            box = tuple(spans[level])
            key = (level, *((s.start, s.stop) for s in box))  # (slices hash from 3.12 on)
            weight = kept.get(key) or _weight(box, k, t, level, dtype)
            if key not in kept and _room(kept, weight, spec.image.size):
                kept[key] = weight
            passes = [(table, level) for table in tables]
            _add_level(out, y, box, weight, passes, backend, memo)
        return out
    pairs = list(zip(mixes, levels.levels))

    def per_axis_spans():
        return [_spans(k, t is not None, len(lv), whole) for (k, t), lv in pairs]

    spans = _memo(memo, ("spans", whole), per_axis_spans)
    _per_axis(out, y, 0, [], mixes, spans, tables, backend, memo)
    return out


#: The last level transpose's levels (held weakly), key (map tuple, shape, precision)
#: and its pixels' mixes, level tables and (filled as the levels come) each level's
#: pixel weights: a deblur transposes the same map with the same levels every
#: iteration, and locating each pixel's levels was half of each transpose.  Compared
#: by identity: a new call builds a new spec, so only a caller that reuses one spec
#: and route (the deblur) hits.
_LAST: list = [None, None, None]
_LAST_LOCK = threading.RLock()  # (re-entered where a collection runs _forget)


def _prepared(spec: BlurSpec, levels: LevelPlan, dtype: np.dtype):
    """Each axis's per-pixel mix ``(k, t)``, its level table and a store for the levels'
    pixel weights, from the last call when it had the same levels and map objects.
    The levels are held weakly: when the caller drops them (a deblur returns), all this
    is dropped too."""
    key = (spec.sigma_map, spec.shape, dtype)
    with _LAST_LOCK:
        owner, last, value = _LAST
        if owner is not None and owner() is levels and last[0] is key[0] and last[1:] == key[1:]:
            return value
    sigma = [np.broadcast_to(m.sigma, spec.shape) for m in map_plan(spec)]
    # Diagonal levels mix every axis alike: the first axis's mix serves them all.
    axes = 1 if levels.diagonal else len(levels.levels)
    mixes = [lv.locate(s, dtype) for lv, s in list(zip(levels.levels, sigma))[:axes]]
    tables = [level_table(spec, i, lv, np.arange(len(lv)), dtype)
              for i, lv in enumerate(levels.levels)]  # fmt: skip
    value = (mixes, tables, {}, {})
    with _LAST_LOCK:
        _LAST[:] = [weakref.ref(levels, _forget), key, value]
    return value


def _forget(owner: weakref.ref) -> None:
    """Drop what :func:`_prepared` keeps once its levels are gone."""
    with _LAST_LOCK:
        if _LAST[0] is owner:
            _LAST[:] = [None, None, None]


def _per_axis(out, y, depth, chosen, mixes, spans, tables, backend, memo) -> None:
    """Every combination of the axes' levels (a tensor product of per-axis mixes), its
    weight the product of the pixels' per-axis weights; combinations whose boxes do not
    meet are skipped."""
    if depth == len(tables):
        own = [spans[d][level] for d, (_, level) in enumerate(chosen)]
        box = tuple(slice(max(s.start for s in b), min(s.stop for s in b)) for b in zip(*own))
        if all(s.start < s.stop for s in box):
            w = _box_weight(box, [(*mixes[d], level) for d, (_, level) in enumerate(chosen)])
            _add_level(out, y, box, (w != 0, w), chosen, backend, memo)
        return
    for level in range(len(tables[depth].used)):
        _per_axis(out, y, depth + 1, [*chosen, (tables[depth], level)], mixes, spans, tables,
                  backend, memo)  # fmt: skip


def _memo(memo: dict, key, make):
    """``memo[key]``, made by ``make()`` the first time: what follows from the prepared
    mixes and tables alone (spans, passes' reading plans), the same every iteration."""
    if key not in memo:
        memo[key] = make()
    return memo[key]


def _spans(k: np.ndarray, mixed: bool, count: int, whole: bool) -> list[list[slice]]:
    """Per level, per axis: a slice covering every pixel whose mix uses the level (its
    lower level ``k``, or ``k + 1`` where ``mixed``); the whole axis where ``whole``
    (and the level is used at all)."""
    if whole:
        used = np.zeros(count + 1, bool)
        used[np.unique(k)] = True
        used[1:] |= used[:-1] & mixed
        return [[slice(0, n if used[level] else 0) for n in k.shape] for level in range(count)]
    spans = [[] for _ in range(count)]
    for axis in range(k.ndim):
        others = tuple(a for a in range(k.ndim) if a != axis)
        low, high = k.min(axis=others), k.max(axis=others) + int(mixed)
        for level in range(count):
            hit = np.flatnonzero((low <= level) & (high >= level))
            spans[level].append(slice(int(hit[0]), int(hit[-1]) + 1) if hit.size else slice(0, 0))
    return spans


#: The most pixel weights a level transpose keeps for the next call, in images: where
#: the levels' boxes overlap more (a radial map's rings), the rest is computed anew.
KEPT_WEIGHTS = 2


def _weight(box, k, t, level: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """``(w != 0, w)`` of one level over ``box`` (``w`` in the precision)."""
    w = _box_weight(box, [(k, t, level)])
    return w != 0, np.asarray(w, dtype)


def _room(kept: dict, weight, size: int) -> bool:
    """Whether ``weight`` fits in what a level transpose keeps (:data:`KEPT_WEIGHTS`)."""
    used = sum(w.size for _, w in list(kept.values()))  # (a copy: threads may add)
    return used + weight[1].size <= KEPT_WEIGHTS * size


def _box_weight(box, weights) -> np.ndarray:
    """The pixels of ``box``'s weight of a level combination: the product of
    ``level_weight(k, t, level)`` over ``weights``."""
    w = np.ones(())
    for k, t, level in weights:
        w = w * level_weight(k[box], None if t is None else t[box], level)
    return w


def _add_level(out, y, box, weight, passes: list[tuple[LevelTable, int]], backend, memo) -> None:
    """``out += P_1^T .. P_k^T (w * y)`` for the pixels of ``box``; ``weight`` is
    ``(w != 0, w)`` over the box (:func:`_box_weight`); ``memo``: see :func:`_memo`."""
    if not all(s.start < s.stop for s in box):
        return
    nonzero, w = weight
    with np.errstate(invalid="ignore"):
        # `where`, not a product: a NaN the pixel does not mix must not spread.
        z = np.where(nonzero, w * y[box], 0.0).astype(y.dtype, copy=False)
    box = list(box)
    for table, j in passes:
        if table.passes[j] is not None:  # else the axis is untouched at this level
            z, box[table.axis] = _pass_t(backend, z, table, j, box[table.axis], memo)
    out[tuple(box)] += z


def _pass_t(backend, z, table: LevelTable, j: int, span: slice, memo: dict):
    """Level ``j``'s pass along ``table.axis`` transposed, for ``z`` nonzero only over
    ``span`` of the axis: the new values and the span they cover."""
    a, taps, lo, hi = table.axis, int(table.taps[j]), span.start, span.stop
    scale = table.scale[j, lo:hi]
    if table.mode.name not in SYMMETRIC:
        full = correlate_t(backend, z, a, table.src[j, lo : hi + taps - 1],
                           table.weights[j, :taps], scale, table.n)  # fmt: skip
        return full.astype(z.dtype), slice(0, table.n)
    if table.mode.crop:
        z = z * np.reshape(scale, _along(a, z.ndim, hi - lo)).astype(z.dtype)
    reading = _memo(memo, ("reads", a, j, lo, hi), lambda: _reading(table, j, lo, hi))
    local, first, last, weights, ones = reading
    new = backend.correlate(z, a, local, 0.0, weights, ones)
    return np.asarray(new, z.dtype), slice(first, last)


def _reading(table: LevelTable, j: int, lo: int, hi: int) -> tuple:
    """The forward pass that is level ``j``'s symmetric pass transposed for values
    nonzero over ``lo .. hi - 1`` of the axis: its source indices into them (-1: a 0),
    the span ``first .. last - 1`` of the outputs that read them, its weights and unit
    scale."""
    taps, src = int(table.taps[j]), table.src[j]
    inside = (src >= lo) & (src < hi)
    reads = np.flatnonzero(inside)  # extended positions that read the box
    first, last = max(int(reads[0]) - taps + 1, 0), min(int(reads[-1]) + 1, table.n)
    local = np.where(inside, src - lo, -1)[first : last + taps - 1]
    return local, first, last, table.weights[j, :taps], np.ones(last - first)


def _along(axis: int, ndim: int, n: int) -> tuple[int, ...]:
    return (1,) * axis + (n,) + (1,) * (ndim - axis - 1)
