"""Level bands: a sigma map mixed from global levels, each computed only where it is used.

A diagonal level plan (one list of levels for every axis, :mod:`napari_varblur.core.levels`)
gives each pixel a mix of at most two levels.  Level ``l`` is needed only on its *band*:
the pixels whose mix uses it.  The band is stored as runs along the contiguous axis, one
list per line (a line: the other coordinates fixed), so its cost follows the band's area
whatever the map's orientation: a tilted or radial map costs what an axis-aligned one
does.

Working layout ``(B, n1, n2, n3)``: batch axes flattened in front, the blurred axes after
them (length 1 where there are fewer than three).  Per level, the passes run backwards
from the output:

- slot 3, the last pass (along ``n3``), writes the band's runs and adds them, weighted,
  into the output;
- slot 2 (along ``n2``) writes the band's runs widened by what the last pass reads;
- slot 1 (along ``n1``) writes the union of the slot-2 runs of the lines that read it.

Every pass is the contract's 1-D pass, from the level engine's tables
(:func:`napari_varblur.core.level_plan.level_table`: taps, edge mode, crop
renormalisation), vectorised along the contiguous axis.  Planning takes one kernel
call per step for all levels together.  The blur is one kernel call, in tiles along
the first pass's axis: a tile runs every level over its own lines (only the first
pass reads beyond them, from the image), so a tile's rows stay in cache from level
to level and the tiles need no barrier between levels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
from numba import njit, prange

from ...core.level_plan import LevelTable, level_table
from ...core.levels import AxisLevels
from ...core.shapes import constant_along, unbroadcast
from ...core.sigma import mean_step
from ...core.spec import BlurSpec
from ...core.taps import from_working_layout, map_plan, working_layout
from . import band_runs
from .common import FAST, parallel_section
from .layout import contiguous, copy_into
from .passes import _symmetric

#: Bands pay off when runs are long: a map whose level changes every pixel or two along
#: the contiguous axis (noise) is left to the tile walk or the gather.
MIN_MEAN_RUN = 2
#: In 2-D the contiguous axis keeps the last pass unless the other axis's runs are this
#: many times longer: a transposed working layout costs three copies of the image (~7
#: ms each at 2048², float32), which a 30° tilt's 1.7x longer runs did not repay (2-D
#: 2048² tilted map: 116 ms in the image's layout, 123 ms transposed; a ramp along x,
#: whose runs along y are the whole axis, 108 ms transposed against 196 ms).  With the
#: copies at ~3 ms (:mod:`.layout`), 1.4 and 1.15 ran within noise of 2.0.  Not in
#: 3-D, where the copies are a smaller share and the order decides the first pass's
#: widening: a 64x128x128 radial map ran 180 ms in the runs' order, 280 ms kept.
KEEP_LAYOUT = 2.0
#: A run of the last pass this long or longer sums its window by sweeps over the run
#: (mirrored pairs, vectorised over the run's pixels); a shorter one by one dot product
#: per pixel (vectorised over the taps).
_SWEEP = 16
#: A strided pass's run is widened to a multiple of this many pixels (within its line):
#: the sums' vector loops then have no scalar remainder, and a run shorter than the
#: loop's width is vectorised at all.  The widened pixels get the level's true pass
#: where their source is computed (their own column's), and are never read where it is
#: not.  Blur of a 64x128x128 radial map 74 -> 65 ms, diagonal 58 -> 52 ms, 2-D
#: tilted 61 -> 58 ms (runs of 6-45 pixels; 5 rounds alternating).
_WIDEN = 16
#: Slot 1 joins a level's runs in a plane across a gap (in memory order) of up to this
#: many taps' worth of pixels (the gap over the level's taps): a run's bookkeeping and
#: short vector loops cost about what 2048 taps do (a 49-tap pass: about 150 ns a run
#: against 20 taps a ns on one core).  Blur of a 64x128x128 radial map, whose first
#: pass had 252k runs of 25 pixels (median), 61 -> 46 ms (7.8k runs, 11% more taps);
#: 1024-8192 ran within noise of 2048; a diagonal map did not change.
JOIN_TAPS = 2048
#: Bytes of a tile's rows (scratch, output, levels, weights) that should stay in cache
#: from one level to the next (a core's L2 is 1-2 MiB).
TILE_BYTES = 1 << 20
#: Tiles per thread at least (tiles differ in cost).
TILES_PER_THREAD = 8


@dataclass(frozen=True)
class _Slot:
    """One slot's pass for every used level: the level engine's table of its axis (row
    ``j``: level ``j`` of the plan's ``levels``), and the first and last source index
    each output reads."""

    table: LevelTable
    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def of(cls, table: LevelTable) -> _Slot:
        with parallel_section():
            lo, hi = band_runs.reach(table.src, table.taps, table.n, table.left)
        return cls(table, lo, hi)


@dataclass(frozen=True)
class _Runs:
    """Runs of every used level: level ``j``'s are ``ptr[j] .. ptr[j + 1] - 1``, each
    a line and ``[start, stop)`` along the contiguous axis, sorted by line (slot 1's
    runs of a plane within :data:`JOIN_TAPS` of one another are one run, its stop past
    its first line where it spans lines: :func:`band_runs._join`)."""

    ptr: np.ndarray
    lines: np.ndarray
    starts: np.ndarray
    stops: np.ndarray

    def work(self, taps: np.ndarray) -> float:
        """Multiply-adds of a pass over these runs with ``taps`` per level."""
        with parallel_section():
            return float(band_runs.work(self.ptr, self.starts, self.stops, taps))


@dataclass(frozen=True)
class BandPlan:
    """Everything a band blur needs, built once from the map: the working shape, each
    pixel's lower level ``k`` (one row of zeros where the blur recomputes the weights)
    and the source of its upper weight ``mix`` (:func:`_located`), the used levels, and
    per slot its passes (the level engine's table) and runs (``None`` where the slot has
    length 1).  ``taps`` counts the multiply-adds (the planner's cost), ``runs`` the
    runs."""

    axes: tuple[int, ...]
    shape: tuple[int, int, int, int]
    k: np.ndarray
    mix: tuple
    levels: np.ndarray
    slots: tuple
    runs: tuple
    taps: float
    nruns: int


def plan(spec: BlurSpec, levels: AxisLevels, compact: np.ndarray | None = None) -> BandPlan | None:
    """The bands of a diagonal level plan, or ``None`` where they do not fit (more than
    three blurred axes, twice as many levels as an int16 counts, more lines than the
    runs count, or runs too short to pay off).  ``compact``: the map without the axes
    it is constant along (:func:`~napari_varblur.core.shapes.compact`), if known."""
    lines = spec.image.size // spec.shape[spec.axes[-1]] if spec.image.size else 0
    if (len(spec.axes) > 3 or spec.image.size == 0 or 2 * len(levels) > np.iinfo(np.int16).max
            or max(lines, max(spec.shape)) > np.iinfo(band_runs.RUN).max):  # fmt: skip
        return None
    maps = {m.axis: m for m in map_plan(spec)}
    axes = _pass_order(spec, np.broadcast_to(maps[spec.axes[0]].sigma, spec.shape))
    dtype = np.dtype(spec.precision)
    shape4 = _shape4(spec.shape, axes)
    sigma = maps[axes[0]].sigma
    flat = (compact.shape[axes[-1]] == 1 if compact is not None
            else constant_along(unbroadcast(sigma), axes[-1]))  # fmt: skip
    k, mix, counts = _located(spec, sigma, axes, levels, shape4[3], dtype, flat)
    segments = band_runs.segments(k, counts)
    if k.shape[1] < shape4[3]:  # one sigma per line, located once: one segment each
        segments[2][:] = shape4[3]
    if len(segments[0]) * MIN_MEAN_RUN > spec.image.size:
        return None
    ptr, lines, starts, stops = band_runs.by_level(*segments, len(levels))
    del segments
    recompute = mix[3]  # (the source of the weights is the map itself)
    if recompute:  # the blur tells a pixel's level from its sigma: no key held (half an image)
        k = np.zeros((1, shape4[3]), k.dtype)
    used = np.flatnonzero(ptr[1:] > ptr[:-1])
    runs3 = _Runs(np.concatenate(([0], np.cumsum((ptr[1:] - ptr[:-1])[used]))),
                  lines, starts, stops)  # fmt: skip
    slots = [None] * (3 - len(axes)) + [
        _Slot.of(level_table(spec, spec.axes.index(a), levels, used, dtype)) for a in axes
    ]
    runs = _slot_runs(runs3, slots, shape4)
    taps = sum(r.work(s.table.taps) for r, s in zip(runs, slots) if r is not None)
    nruns = sum(len(r.lines) for r in runs if r is not None)
    # (The tables only: the reaches served the runs; 0.11 images at 4096².)
    tables = tuple(None if s is None else s.table for s in slots)
    return BandPlan(axes, shape4, k, mix, used, tables, runs, taps, nruns)


def blur(spec: BlurSpec, bands: BandPlan) -> np.ndarray:
    """Run a band plan: a new array of ``spec.precision``."""
    dtype = np.dtype(spec.precision)
    axes = bands.axes
    image = contiguous(working_layout(spec.image, axes), dtype).reshape(bands.shape)
    result = np.zeros(spec.shape, dtype)
    # The output itself where the working layout is the image's own order, else a
    # working copy put in the image's order at the end.
    view = working_layout(result, axes)
    direct = view.flags.c_contiguous and np.may_share_memory(view, result)
    out = view.reshape(bands.shape) if direct else np.zeros(bands.shape, dtype)
    s1, s2, s3 = bands.slots
    r1, r2, r3 = bands.runs
    # A missing slot gets a placeholder of the right types; the kernel skips it.
    s1, r1 = (s3, r3) if s1 is None else (s1, r1)
    s2, r2 = (s3, r3) if s2 is None else (s2, r2)
    has1, has2 = bands.runs[0] is not None, bands.runs[1] is not None
    tile, chunks = _tiling(bands.shape, has1, dtype)
    with parallel_section():
        _run(image, out, bands.k, bands.mix, bands.levels, has1, has2, tile, chunks,
             *_args(s1, r1), *_args(s2, r2), *_args(s3, r3))  # fmt: skip
    if not direct:
        copy_into(result, from_working_layout(out, spec.shape, axes))
    return result


def _tiling(shape, has1: bool, dtype) -> tuple[int, int]:
    """Units (planes in 3-D, else lines) per tile of :func:`_run`, and its jobs: tiles
    of about :data:`TILE_BYTES` over four arrays, at least :data:`TILES_PER_THREAD`
    tiles per thread where there are units enough."""
    batch, n1, n2, n3 = shape
    unit = (n2 * n3 if has1 else n3) * 4 * np.dtype(dtype).itemsize
    units = batch * n1 * (1 if has1 else n2)
    threads = numba.get_num_threads()
    tile = max(1, min(TILE_BYTES // unit, units // (TILES_PER_THREAD * threads)))
    return tile, 4 * threads


def _args(table: LevelTable, runs: _Runs) -> tuple:
    return (runs.ptr, runs.lines, runs.starts, runs.stops, *_table(table))  # fmt: skip


def _table(t: LevelTable) -> tuple:
    return t.src, t.weights, t.taps, t.left, t.scale, t.fill


def _pass_order(spec: BlurSpec, sigma: np.ndarray) -> tuple[int, ...]:
    """The blurred axes in the order of the passes: the map's runs (about a pixel per
    unit of sigma change, at most the axis) from shortest to longest.  The last pass
    runs along the longest runs, so a level's widening and bookkeeping cost least; the
    first along the map's fastest change, where widening would cost most (a map along
    x passes along x first and runs along y).  In 2-D the contiguous axis's runs count
    :data:`KEEP_LAYOUT` times: leaving the image's layout costs copies."""

    kept = max(spec.axes) if len(spec.axes) == 2 else None

    def run(a: int) -> float:
        change, n = mean_step(sigma, a), float(spec.shape[a])
        length = n if change == 0 else min(n, 1.0 / change)
        return length * (KEEP_LAYOUT if a == kept else 1.0)

    return tuple(sorted(sorted(spec.axes), key=run))  # ties: memory order


def _shape4(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, int, int, int]:
    batch = int(np.prod([n for a, n in enumerate(shape) if a not in axes], dtype=np.int64))
    blurred = [1] * (3 - len(axes)) + [shape[a] for a in axes]
    return (batch, *blurred)


def _located(spec, sigma, axes, levels: AxisLevels, n3: int, dtype, flat: bool):
    """Each pixel's key (int16; the segments turn it into the level), in the working
    layout's lines, each line's count of segments, and where the blur finds each
    pixel's upper weight: ``(source, square, inverse, recompute, sigmas of the
    levels)``.  A float32 map in a float32 blur is its own source (``recompute``: the
    blur recomputes the weights from it, the bits :func:`band_runs.locate` got, and
    tells each pixel's level from them, so the plan holds neither the weights nor the
    levels: :func:`plan`); another map's weights and levels are kept.  ``flat``: the
    map does not change along the lines."""
    if sigma.shape != spec.shape:  # a broadcast is read-only, so copied: only if needed
        sigma = np.broadcast_to(sigma, spec.shape)
    recompute = sigma.dtype == dtype == np.float32  # (exact: band_runs.upper_weight)
    # A map constant along the lines (a ramp across them, a sigma per z-plane) is
    # located once per line: the blur recomputes each pixel's weight from the map.
    lines_only = recompute and flat
    sigma = contiguous(working_layout(sigma, axes), sigma.dtype).reshape(-1, n3)
    located = np.ascontiguousarray(sigma[:, :1]) if lines_only else sigma
    k = np.empty(located.shape, np.int16)
    t = np.empty((0, 0) if recompute else sigma.shape, dtype)
    counts = np.empty(sigma.shape[0], np.int64)
    first, last = levels._buckets
    square, inverse = band_runs.mix_tables(levels.sigma, levels.joined)
    with parallel_section():
        band_runs.locate(located, k, t, counts, levels.sigma, square, inverse, first, last,
                         float(levels.truncate), int(levels.limit))  # fmt: skip
    lsig = np.asarray(levels.sigma, np.float64)
    return k, (sigma if recompute else t, square, inverse, recompute, lsig), counts


def _slot_runs(runs3: _Runs, slots, shape4) -> tuple:
    """Per slot, the runs its passes must write (``None``: no such slot)."""
    last = slots[2]
    runs2 = _Runs(
        *band_runs.dilate(runs3.ptr, runs3.lines, runs3.starts, runs3.stops, last.lo, last.hi)
    )
    if slots[1] is None:
        return (None, None, runs3)
    if slots[0] is None:
        return (None, runs2, runs3)
    return (_union(runs2, slots[1], slots[0].table.taps, shape4), runs2, runs3)


def _union(runs2: _Runs, slot2: _Slot, taps: np.ndarray, shape4) -> _Runs:
    """Slot 1's runs: the union of the slot-2 runs of the lines each line serves,
    joined in a plane across gaps of up to :data:`JOIN_TAPS` over the level's taps."""
    first, final = band_runs.inverse_reach(slot2.lo, slot2.hi)
    planes, n2 = shape4[0] * shape4[1], shape4[2]
    gaps = JOIN_TAPS // np.maximum(taps, 1)
    chunks = 16 * numba.get_num_threads()  # of the union's jobs: several per thread
    return _Runs(*band_runs.slot_one(runs2.ptr, runs2.lines, runs2.starts, runs2.stops, first,
                                     final, planes, n2, shape4[3], gaps, chunks, n2))  # fmt: skip


# ------------------------------------------------------------------- the passes


@njit(parallel=True, cache=True, nogil=True, fastmath=FAST)
def _run(image, out, k, mix, levels, has1, has2, tile, chunks,
         p1, l1, a1, e1, src1, w1, taps1, left1, sc1, f1,
         p2, l2, a2, e2, src2, w2, taps2, left2, sc2, f2,
         p3, l3, a3, e3, src3, w3, taps3, left3, sc3, f3):  # pragma: no cover  # fmt: skip
    """Tiles of ``tile`` units along the first pass's axis (planes ``(b, i1)`` in 3-D,
    lines in 2-D and 1-D), dealt out in turn to ``chunks`` jobs.  A tile runs every
    used level in turn: slot 1 into the job's tile of scratch ``y1``, slot 2 into its
    ``y2`` (each from the previous stage, or the image), the last pass added into
    ``out``.  Only the first pass reads outside the tile (the image, which nothing
    writes), so tiles are independent, a tile's rows stay in cache from one level to
    the next, and the scratch is a tile per job, not an image per stage."""
    n3 = image.shape[3]
    per = image.shape[2] if has1 else 1  # lines per unit
    units = image.shape[0] * image.shape[1] * (1 if has1 else image.shape[2])
    tiles = (units + tile - 1) // tile
    chunks = max(1, min(chunks, tiles))
    widest = max(taps1.max(), taps2.max(), taps3.max())
    flat, rows = image.reshape(-1), image.reshape(-1, n3)
    for chunk in prange(chunks):
        buf = np.empty(n3 + widest - 1, image.dtype)
        acc = np.empty(n3, image.dtype)
        at = np.empty(widest, np.int64)
        weights = np.empty(widest, image.dtype)
        # Zeros, not garbage: a widened run (:func:`_widened`) may sum columns no run
        # wrote, and unset memory can hold subnormals, which are slow to add.
        y1 = np.zeros((tile * per if has1 else 0, n3), image.dtype)
        y2 = np.zeros((tile * per if has2 else 0, n3), image.dtype)
        yf1, yf2 = y1.reshape(-1), y2.reshape(-1)  # (what the strided passes write)
        for tix in range(chunk, tiles, chunks):  # in turn: tiles differ in cost
            lo, hi = tix * tile * per, min(units, (tix + 1) * tile) * per
            for v in range(levels.shape[0]):
                for slot in range(1 if has1 else 2, 3 if has2 else 2):
                    # The source as a flat array, less the offset of its first line.
                    x, shift, y = flat, 0, yf1
                    ptr, lines, starts, stops = p1, l1, a1, e1
                    src, w, taps, left, scale, fill = src1, w1, taps1, left1, sc1, f1
                    if slot == 2:
                        x, shift, y = (yf1, lo * n3, yf2) if has1 else (flat, 0, yf2)
                        ptr, lines, starts, stops = p2, l2, a2, e2
                        src, w, taps, left, scale, fill = src2, w2, taps2, left2, sc2, f2
                    r0, r1 = _within(lines, ptr[v], ptr[v + 1], lo, hi)
                    _strided(x, shift, y, lo, image.shape, np.int64(slot), r0, r1, lines, starts,
                             stops, src[v], w[v, : taps[v]], left[v], scale[v], fill[v], at,
                             weights)  # fmt: skip
                x2, first = (y2, lo) if has2 else (rows, 0)
                r0, r1 = _within(l3, p3[v], p3[v + 1], lo, hi)
                _last(x2, first, out, r0, r1, l3, a3, e3, src3[v], w3[v, : taps3[v]], left3[v],
                      sc3[v], f3[v], k, mix, levels[v], buf, acc, at)  # fmt: skip


@njit(cache=True, nogil=True, inline="always")
def _within(lines, a, b, lo, hi):  # pragma: no cover - jitted
    """The runs ``a .. b - 1`` (sorted by line) whose line is in ``lo .. hi - 1``."""
    return a + np.searchsorted(lines[a:b], lo), a + np.searchsorted(lines[a:b], hi)


@njit(cache=True, nogil=True, fastmath=FAST, inline="always")
def _strided(x, shift, y, lo, shape, slot, r0, r1, lines, starts, stops, src, kernel, left,
             scale, fill, at, weights):  # pragma: no cover  # fmt: skip
    """``y = scale * sum_t w[t] * x[src[i + t]]`` along axis ``slot`` of the working
    layout ``shape``, on runs ``r0 .. r1 - 1``; taps reading the fill add ``w * fill``
    (as scipy).  ``x`` is flat, its element ``j`` the layout's ``j + shift``; ``y``
    (flat too) holds the lines from ``lo`` on."""
    symmetric = _symmetric(kernel)
    for r in range(r0, r1):
        a, e = _widened(starts[r], stops[r], shape[3])
        _strided_run(x, shift, y, lo, shape, lines[r], a, e, slot, src, kernel, symmetric,
                     left, scale, fill, at, weights)  # fmt: skip


@njit(cache=True, nogil=True, inline="always")
def _widened(a, e, n):  # pragma: no cover - jitted
    """Run ``[a, e)`` of a line of ``n`` widened to a multiple of :data:`_WIDEN`
    pixels, rightwards first, never past the line.  A strided pass's output at a
    column depends on that column's source alone, so a widened pixel inside another
    run of the level gets that run's value (its source column was computed for it),
    and one outside every run is written but never read."""
    if e > n:  # runs joined across lines (:func:`band_runs._join`): taken as they are
        return a, e
    m = -(-(e - a) // _WIDEN) * _WIDEN
    stop = min(n, a + m)
    return max(0, stop - m), stop


@njit(cache=True, nogil=True, fastmath=FAST, inline="always")
def _last(x, first, out, r0, r1, lines, starts, stops, src, kernel, left, scale, fill, k, mix,
          level, buf, acc, at):  # pragma: no cover  # fmt: skip
    """The last pass on runs ``r0 .. r1 - 1`` from the lines ``x`` (line ``first`` on),
    added into ``out`` (:func:`_last_run`)."""
    target = out.reshape(-1, x.shape[1])
    symmetric = _symmetric(kernel)
    for r in range(r0, r1):
        i = lines[r]
        _last_run(x[i - first], target[i], starts[r], stops[r], src, kernel, symmetric, left,
                  scale, fill, k[i % k.shape[0]], mix, i, level, buf, acc, at)  # fmt: skip


@njit(cache=True, nogil=True, fastmath=FAST, inline="always")
def _strided_run(
    flat, shift, y, lo, shape, line, a, e, slot, src, w, symmetric, left, scale, fill, at,
    weights,
):  # pragma: no cover  # fmt: skip
    """One run of :func:`_strided`: the global passes' sum (:func:`_weighted_sum`, by
    mirrored pairs) over the rows the run reads, where ``at`` holds each row's start
    in ``flat``; a window that leaves the axis sums its in-bounds taps one by one and
    adds the fill's."""
    n1, n2, n3 = shape[1], shape[2], shape[3]
    i2 = line % n2
    i1 = (line // n2) % n1
    i, n = (i1, n1) if slot == 1 else (i2, n2)
    stride = n2 * n3 if slot == 1 else n3
    origin = line * n3 + a - i * stride - shift  # row 0 of the axis
    at_line = (line - lo) * n3  # (a run of joined lines ends past its first line)
    dst = y[at_line + a : at_line + e]
    taps = w.shape[0]
    filled = dst.dtype.type(0)
    if i - left >= 0 and i - left + taps <= n:  # the window lies inside the axis
        for tap in range(taps):
            at[tap] = origin + (i - left + tap) * stride
        if symmetric:
            _pair_sum(dst, flat, at, w)
        else:
            _tap_sum(dst, flat, at, w)
    else:
        count = 0
        for tap in range(taps):
            s = src[i + tap]
            if s < 0:
                filled += w[tap] * fill
            else:
                at[count], weights[count] = origin + s * stride, w[tap]
                count += 1
        _tap_sum(dst, flat, at[:count], weights[:count])
    sc = scale[i]
    for c in range(e - a):
        dst[c] = (dst[c] + filled) * sc


@njit(cache=True, nogil=True, fastmath=FAST, inline="always")
def _pair_sum(dst, base, at, w):  # pragma: no cover - jitted
    """``dst[c] = sum_t w[t] * base[at[t] + c]`` for a symmetric kernel: mirrored pairs
    of rows added before they are multiplied, four pairs per sweep over ``dst``.
    Inlined, with the rows sliced here: a call that passes slices pays for their
    reference counts, ~2 us a run (more than a short run's sums)."""
    n, taps = dst.shape[0], w.shape[0]
    h = taps // 2
    mid, wm = base[at[h] : at[h] + n], w[h]
    for c in range(n):
        dst[c] = wm * mid[c]
    for t in range(0, h - h % 4, 4):
        m = taps - 1 - t
        a0, a1 = base[at[t] : at[t] + n], base[at[t + 1] : at[t + 1] + n]
        a2, a3 = base[at[t + 2] : at[t + 2] + n], base[at[t + 3] : at[t + 3] + n]
        b0, b1 = base[at[m] : at[m] + n], base[at[m - 1] : at[m - 1] + n]
        b2, b3 = base[at[m - 2] : at[m - 2] + n], base[at[m - 3] : at[m - 3] + n]
        w0, w1, w2, w3 = w[t], w[t + 1], w[t + 2], w[t + 3]
        for c in range(n):
            dst[c] += (w0 * (a0[c] + b0[c]) + w1 * (a1[c] + b1[c])
                       + w2 * (a2[c] + b2[c]) + w3 * (a3[c] + b3[c]))  # fmt: skip
    for t in range(h - h % 4, h):
        a, b, wt = base[at[t] : at[t] + n], base[at[taps - 1 - t] : at[taps - 1 - t] + n], w[t]
        for c in range(n):
            dst[c] += wt * (a[c] + b[c])


@njit(cache=True, nogil=True, fastmath=FAST, inline="always")
def _tap_sum(dst, base, at, w):  # pragma: no cover - jitted
    """``dst[c] = sum_t w[t] * base[at[t] + c]``, four taps per sweep over ``dst``."""
    n, taps = dst.shape[0], w.shape[0]
    dst[:] = 0
    for t in range(0, taps - 3, 4):
        r0, r1 = base[at[t] : at[t] + n], base[at[t + 1] : at[t + 1] + n]
        r2, r3 = base[at[t + 2] : at[t + 2] + n], base[at[t + 3] : at[t + 3] + n]
        w0, w1, w2, w3 = w[t], w[t + 1], w[t + 2], w[t + 3]
        for c in range(n):
            dst[c] += (w0 * r0[c] + w1 * r1[c]) + (w2 * r2[c] + w3 * r3[c])
    for t in range(taps - taps % 4, taps):
        row, wt = base[at[t] : at[t] + n], w[t]
        for c in range(n):
            dst[c] += wt * row[c]


@njit(cache=True, nogil=True, fastmath=FAST, inline="always")
def _dots(x, o, w, m, acc):  # pragma: no cover - jitted
    """``acc[c] = sum_t w[t] * x[o + c + t]`` for ``c < m``: one dot product each,
    vectorised along the taps.  At every run length it beats a sweep per tap across
    the outputs (0.06-0.11 against 0.43-0.62 ns per tap, one core, 25-97 taps,
    runs of 8-200 pixels: that sweep reloads and stores the sums at every tap)."""
    for c in range(m):
        total = acc.dtype.type(0)
        for tap in range(w.shape[0]):
            total += w[tap] * x[o + c + tap]
        acc[c] = total


@njit(cache=True, nogil=True, fastmath=FAST, inline="always")
def _last_run(
    row, out, a, e, src, w, symmetric, left, scale, fill, k, mix, line, level, buf, acc, at
):  # pragma: no cover - jitted
    """The pass along the contiguous axis on one run, added into ``out`` with each
    pixel's weight of the level (:func:`_mix`)."""
    m = e - a
    taps = w.shape[0]
    if a - left >= 0 and e - left + taps - 1 <= row.shape[0]:
        base, o = row, a - left  # the run's window lies inside the line
    else:
        for j in range(m + taps - 1):
            s = src[a + j]
            buf[j] = row[s] if s >= 0 else fill
        base, o = buf, 0
    if m < _SWEEP or not symmetric:
        _dots(base, o, w, m, acc)
    else:
        for tap in range(taps):
            at[tap] = o + tap
        _pair_sum(acc[:m], base, at, w)
    _mix(out, acc, a, m, scale, k, mix, line, level)


@njit(cache=True, nogil=True, fastmath=FAST, inline="always")
def _mix(out, acc, a, m, scale, k, mix, line, level):  # pragma: no cover - jitted
    """``out[a + c] += weight * acc[c]`` (crop's scale applied), each pixel's weight
    of the level by :func:`_weight`.  A pixel whose weight is 0 is left alone: a NaN
    it does not mix must not reach it.  A run's pixels lie on the level or the one
    below, so the loop has no branch: over slices of a long run, it vectorises."""
    source, square, inverse, recompute, lsig = mix
    values = source[line]
    below = max(level - 1, 0)
    # A pixel has the level as its own (lower) one where its sigma is at least the
    # level's (as :func:`band_runs.locate` finds it), or where the level is its bucket's
    # first (the one below does not mix with it; level 0 has none below).
    own = lsig[level] if level > 0 and inverse[below] != 0 else -1.0
    tables = (square[level], inverse[level], square[below], inverse[below], own)
    zero = out.dtype.type(0)
    if m >= _SWEEP:
        kk, tt, oo, ss = k[a : a + m], values[a : a + m], out[a : a + m], scale[a : a + m]
        for c in range(m):
            weight = _weight(kk[c], tt[c], level, recompute, tables)
            oo[c] += weight * (acc[c] * ss[c]) if weight != 0 else zero
    else:  # (slicing costs more than a short run's loop)
        for c in range(m):
            px = a + c
            weight = _weight(k[px], values[px], level, recompute, tables)
            out[px] += weight * (acc[c] * scale[px]) if weight != 0 else zero


@njit(cache=True, nogil=True, fastmath=FAST, inline="always")
def _weight(j, value, level, recompute, tables):  # pragma: no cover - jitted
    """A pixel's weight of ``level``: ``1 - t`` on the level, ``t`` on the one below,
    else 0 (``j``: the pixel's level).  ``t`` is ``value``, or recomputed from it (the
    pixel's sigma) with ``tables``: the squared sigma and inverse of the level and of
    the one below, and the least sigma that has the level as its own (a run's pixels
    are on the level or the one below: ``j`` is not read)."""
    t = value
    if recompute:
        own = np.float64(value) >= tables[4]
        square, inverse = (tables[0], tables[1]) if own else (tables[2], tables[3])
        t = type(value)(band_runs.upper_weight(np.float64(value), square, inverse))
        return 1 - t if own else t
    if j == level:
        return 1 - t
    return t if j == level - 1 else type(value)(0)
