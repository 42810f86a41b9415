"""The level bands' bookkeeping (backends/numba/band_runs.py) and the planner's survey of
a map (engine/cost.py), against plain Python and the levels' own NumPy rule: each
pixel's level and weight, slot 1's runs (the union of the runs of
the lines a window of slot-2 passes reads, or the window's hull where every line's runs
lie within the join's gap, then joined across it), the pass order, each tile's extremes
and the axes a map is constant along."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from napari_varblur.backends.numba import band_runs, bands
from napari_varblur.core.level_plan import plan_levels
from napari_varblur.core.shapes import unbroadcast
from napari_varblur.core.spec import BlurSpec
from napari_varblur.core.taps import map_plan
from napari_varblur.engine import cost


def random_runs(rng, nlevels, planes, n2, n3, single):
    """Sorted, disjoint runs per level and line (``single``: at most one per line)."""
    ptr, lines, starts, stops = [0], [], [], []
    for _ in range(nlevels):
        for line in range(planes * n2):
            if rng.random() < 0.3:
                continue
            count = 2 if single else 2 * int(rng.integers(1, 4))
            cuts = np.sort(rng.choice(n3 + 1, size=min(count, (n3 + 1) // 2 * 2), replace=False))
            for a, b in cuts.reshape(-1, 2):
                lines.append(line)
                starts.append(a)
                stops.append(b)
        ptr.append(len(lines))
    return tuple(np.array(x, np.int64) for x in (ptr, lines, starts, stops))


def windows(rng, nlevels, n2):
    """Each line's window of lines: sliding (most windows span two blocks of the
    union's bitsets), one read by no line, and on level 0 one over the whole plane."""
    first, final = np.empty((nlevels, n2), np.int64), np.empty((nlevels, n2), np.int64)
    for v in range(nlevels):
        r = int(rng.integers(1, 4))
        for j in range(n2):
            first[v, j], final[v, j] = max(0, j - r), min(n2 - 1, j + r)
        if v == 0:  # a window over the whole plane (wrap): one block of windows
            first[v, 0], final[v, 0] = 0, n2 - 1
        first[v, n2 // 2], final[v, n2 // 2] = n2, -1  # read by no line
    return first, final


def reference(ptr, lines, starts, stops, first, final, planes, n2, n3, gaps=None):
    """Per level and output line, its runs, by plain sets of pixels: the window's hull
    in a plane whose every line's runs lie at most ``gaps[level]`` apart (0: at most
    one run per line, as a line's runs never touch)."""
    out = []
    for v in range(len(ptr) - 1):
        by_line = {}
        for i in range(ptr[v], ptr[v + 1]):
            by_line.setdefault(int(lines[i]), []).append((int(starts[i]), int(stops[i])))
        for plane in range(planes):
            own = [by_line.get(plane * n2 + j, []) for j in range(n2)]
            gap = 0 if gaps is None else gaps[v]
            single = all(b - e <= gap for r in own for (_, e), (b, _) in itertools.pairwise(r))
            for j in range(n2):
                runs = [r for i in range(first[v, j], final[v, j] + 1) for r in own[i]]
                if not runs:
                    continue
                if single:  # the hull
                    out.append((v, plane * n2 + j, min(a for a, _ in runs),
                                max(b for _, b in runs)))  # fmt: skip
                    continue
                covered = np.zeros(n3 + 1, bool)
                for a, b in runs:
                    covered[a:b] = True
                edges = np.flatnonzero(np.diff(np.concatenate(([False], covered))))
                for a, b in edges.reshape(-1, 2):
                    out.append((v, plane * n2 + j, int(a), int(b)))
    return out


def joined(runs, n2, n3, gaps=None):
    """(level, line, start, stop) runs with each level's runs of a plane joined where
    the next one starts at most ``gaps[level]`` pixels (0: none) after the joined run
    ends, in memory order: one run from its first line's start, its stop past ``n3``
    where it spans lines."""
    out = []
    for v, line, a, b in runs:
        if out:
            u, first, s, e = out[-1]
            at = (line - first) * n3
            gap = 0 if gaps is None else gaps[v]
            if u == v and line // n2 == first // n2 and at + a - e <= gap:
                out[-1] = (u, first, s, max(e, at + b))
                continue
        out.append((v, line, a, b))
    return out


def run_union(ptr, lines, starts, stops, first, final, planes, n2, n3, chunks, spare=8,
              gaps=None):  # fmt: skip
    """:func:`band_runs.slot_one` as bands.py calls it, as (level, line, start, stop)."""
    gaps = np.zeros(len(ptr) - 1, np.int64) if gaps is None else np.asarray(gaps, np.int64)
    args = (ptr, lines, starts, stops, first, final, planes, n2, n3, gaps, chunks, spare)
    optr, olines, ostarts, ostops = band_runs.slot_one(*args)
    level = np.repeat(np.arange(len(ptr) - 1), np.diff(optr))
    return list(zip(level.tolist(), olines.tolist(), ostarts.tolist(), ostops.tolist()))


@pytest.mark.parametrize("n3", [1, 5, 63, 64, 65, 128, 130])
@pytest.mark.parametrize("single", [False, True])
@pytest.mark.parametrize("gaps", [None, (3, 0, 70), (40, 20, 9)])
def test_slot_one_runs_are_the_union_of_the_window_or_its_hull(rng, n3, single, gaps):
    """Bit words end at 64 pixels: runs that end on, before and after a word's edge,
    planes of several runs per line (the exact union) and of one (the hull), windows
    over the whole plane and windows no line reads; any number of job chunks; runs
    joined across no gap, or short ones (a plane whose lines' runs lie within the gap
    of one another takes the hull)."""
    nlevels, planes, n2 = 3, 2, 11
    runs = random_runs(rng, nlevels, planes, n2, n3, single)
    first, final = windows(rng, nlevels, n2)
    expected = joined(reference(*runs, first, final, planes, n2, n3, gaps), n2, n3, gaps)
    assert expected
    for chunks, spare in itertools.product((1, 2, 4, 64), (0, 64)):
        # (No spare room: chunks whose union has more runs than twice their own are
        # run again with their counts.)
        got = run_union(*runs, first, final, planes, n2, n3, chunks, spare, gaps)
        assert got == expected


@pytest.mark.parametrize("count", [1, 7, 500])
def test_by_level_lists_each_levels_segments_with_touching_ones_merged(rng, count):
    """Segments of several lines, split into chunks that run in parallel: each level
    gets its own segments and those below it with an upper weight, in line order,
    touching ones merged (also where a chunk boundary would fall inside a line)."""
    nlevels, n3 = 5, 40
    line = np.sort(rng.integers(0, max(1, count // 6), count)).astype(np.int32)
    start = np.zeros(count, np.int32)
    for i in range(1, count):  # a line's segments tile it from 0
        start[i] = 0 if line[i] != line[i - 1] else min(n3 - 1, start[i - 1] + 1 + i % 3)
    stop = np.where(np.r_[line[1:] != line[:-1], True], n3, np.r_[start[1:], n3]).astype(np.int32)
    keep = stop > start
    line, start, stop = line[keep], start[keep], stop[keep]
    level = rng.integers(0, nlevels, len(line)).astype(np.int32)
    upper = rng.random(len(line)) < 0.5
    expected = [[] for _ in range(nlevels)]
    for i in range(len(line)):
        for lv in (level[i], level[i] + 1) if upper[i] else (level[i],):
            if lv >= nlevels:
                continue
            runs = expected[lv]
            if runs and runs[-1][0] == line[i] and runs[-1][2] == start[i]:
                runs[-1] = (runs[-1][0], runs[-1][1], int(stop[i]))
            else:
                runs.append((int(line[i]), int(start[i]), int(stop[i])))
    ptr, lines, starts, stops = band_runs.by_level(line, start, stop, level, upper.copy(), nlevels)
    got = [list(zip(lines[ptr[v] : ptr[v + 1]].tolist(), starts[ptr[v] : ptr[v + 1]].tolist(),
                    stops[ptr[v] : ptr[v + 1]].tolist())) for v in range(nlevels)]  # fmt: skip
    assert got == expected


def test_work_counts_each_runs_pixels_times_its_levels_taps(rng):
    """The planner's cost of a pass: every run's length times its level's taps."""
    ptr, _, starts, stops = random_runs(rng, 4, 2, 5, 70, single=False)
    taps = np.array([3, 0, 17, 9])
    expected = sum(int(stops[i] - starts[i]) * int(taps[v])
                   for v in range(4) for i in range(ptr[v], ptr[v + 1]))  # fmt: skip
    assert band_runs.work(ptr, starts, stops, taps) == expected > 0


@pytest.mark.parametrize("n3", [1, 16, 37])
@pytest.mark.parametrize("gap", [0, 5, 40])
def test_a_planes_runs_are_joined_across_short_gaps_only(rng, n3, gap):
    """Slot 1's runs of a plane are joined where the next one starts at most the
    level's gap after, in memory order (whole lines that follow one another at gap 0),
    and cover the same pixels and those gaps: never across planes or levels, never a
    longer gap."""
    nlevels, planes, n2 = 3, 3, 4
    ptr, lines, starts, stops = random_runs(rng, nlevels, planes, n2, n3, single=True)
    whole = rng.random(len(lines)) < 0.6
    starts, stops = np.where(whole, 0, starts), np.where(whole, n3, stops)
    first = np.tile(np.arange(n2), (nlevels, 1))  # each line reads itself only
    gaps = [gap, 0, 2 * gap]
    got = run_union(ptr, lines, starts, stops, first, first, planes, n2, n3, 2, gaps=gaps)

    def pixels(runs, v):
        return {line * n3 + x for u, line, a, e in runs if u == v for x in range(a, e)}

    given = [(v, int(lines[i]), int(starts[i]), int(stops[i]))
             for v in range(nlevels) for i in range(ptr[v], ptr[v + 1])]  # fmt: skip
    for v in range(nlevels):
        mine = [(line * n3 + a, line * n3 + e) for u, line, a, e in got if u == v]
        assert pixels(got, v) >= pixels(given, v)
        added = sorted(pixels(got, v) - pixels(given, v))
        for x in added:  # a gap's pixel lies between two given ones, at most gaps[v] apart
            below = max(p for p in pixels(given, v) if p < x)
            above = min(p for p in pixels(given, v) if p > x)
            assert above - below - 1 <= gaps[v]
        for (_, e), (b, _) in itertools.pairwise(mine):
            assert b - e > gaps[v] or b // (n2 * n3) != (e - 1) // (n2 * n3)
    for _, line, _, e in got:  # a run stays in its plane
        assert (line * n3 + e - 1) // (n2 * n3) == line // n2
    assert got == joined(given, n2, n3, gaps)
    assert len(got) < len(given)


def test_a_plane_whose_lines_runs_lie_within_the_gap_takes_the_hull():
    """Line 0's two runs lie 4 pixels apart, within the level's gap of 5: the plane
    takes each window's hull (as the join would close line 0's gap anyway), so the
    window over lines 0 and 1 also covers the 80 pixels between line 0's runs and
    line 1's.  At a gap of 3 the plane takes the exact union."""
    ptr, lines = np.array([0, 3]), np.array([0, 0, 1])
    starts, stops = np.array([0, 14, 100]), np.array([10, 20, 110])
    first, final = np.array([[0, 1]]), np.array([[1, 1]])  # line 0 serves both
    for gap in (4, 5):  # (at the gap itself, too)
        got = run_union(ptr, lines, starts, stops, first, final, 1, 2, 128, 2, gaps=[gap])
        assert got == [(0, 0, 0, 110), (0, 1, 100, 110)]
    got = run_union(ptr, lines, starts, stops, first, final, 1, 2, 128, 2, gaps=[3])
    assert got == [(0, 0, 0, 10), (0, 0, 14, 20), (0, 0, 100, 110), (0, 1, 100, 110)]


def test_a_run_over_the_whole_line_at_a_word_edge(rng):
    """Runs that fill whole words and stop exactly at the line's end."""
    ptr, lines = np.array([0, 3]), np.array([0, 1, 1])
    starts, stops = np.array([0, 0, 100]), np.array([128, 64, 128])
    first, final = np.array([[0, 1]]), np.array([[0, 1]])
    got = run_union(ptr, lines, starts, stops, first, final, 1, 2, 128, 2, gaps=[-1])
    assert got == [(0, 0, 0, 128), (0, 1, 0, 64), (0, 1, 100, 128)]  # (-1: nothing joined)
    got = run_union(ptr, lines, starts, stops, first, final, 1, 2, 128, 2)
    # (Line 0's run ends where line 1's first starts, in memory: one run.)
    assert got == [(0, 0, 0, 192), (0, 1, 100, 128)]


def test_a_join_never_takes_a_stop_past_what_a_run_index_holds():
    """Two whole lines of 2**30 pixels: joined, the stop would be 2**31, past int32."""
    n3 = 1 << 30
    lines, starts = np.array([0, 1], np.int32), np.array([0, 0], np.int32)
    stops = np.array([n3, n3], np.int32)
    assert band_runs._join(lines, starts, stops, 0, 2, n3, 0) == 2
    assert stops.tolist() == [n3, n3]
    stops = np.array([n3 - 1, n3], np.int32)  # (0 .. 2**30 - 1, then a line: still too far)
    assert band_runs._join(lines, starts.copy(), stops, 0, 2, n3, 1 << 30) == 2
    small = np.array([0, 1], np.int32), np.array([0, 0], np.int32), np.array([5, 5], np.int32)
    assert band_runs._join(*small, 0, 2, 5, 0) == 1 and small[2][0] == 10


def test_the_last_pass_keeps_the_image_layout_unless_runs_are_much_longer():
    """2-D: a map whose runs along y are less than KEEP_LAYOUT times those along x
    keeps its layout (the last pass along x); a ramp along x is transposed.  3-D goes
    by the runs alone."""
    image = np.zeros((64, 64), np.float32)
    for direction, last in (((0.6, 1.0), 1), ((0.1, 1.0), 0), ((1.0, 0.6), 1), ((1.0, 0.0), 1)):
        grids = np.meshgrid(*[np.linspace(0, 1, 64)] * 2, indexing="ij")
        sigma = 1 + 4 * (direction[0] * grids[0] + direction[1] * grids[1])
        spec = BlurSpec.from_args(image, sigma, backend="numba", tolerance=1e-3)
        assert bands._pass_order(spec, sigma)[-1] == last, direction
    volume = np.zeros((16, 16, 16), np.float32)
    grids = np.meshgrid(*[np.linspace(0, 1, 16)] * 3, indexing="ij")
    sigma = 1 + 4 * (grids[0] + grids[1] + 0.6 * grids[2])
    spec = BlurSpec.from_args(volume, sigma, backend="numba", tolerance=1e-3)
    assert bands._pass_order(spec, sigma)[-1] == 2  # the longest runs, unboosted
    sigma = 1 + 4 * (grids[0] + 0.6 * grids[1] + grids[2])
    spec = BlurSpec.from_args(volume, sigma, backend="numba", tolerance=1e-3)
    assert bands._pass_order(spec, sigma)[-1] == 1


@pytest.mark.parametrize("shape", [(37, 45), (8, 130), (3, 20, 70)])
def test_survey_extremes_are_each_tiles_min_and_max(rng, shape):
    """Tiles of 8 and longer, with short last tiles, against NumPy's min and max."""
    image = np.zeros(shape, np.float32)
    sigma = (1 + 3 * rng.random(shape)).astype(np.float32)
    spec = BlurSpec.from_args(image, sigma, backend="numba", tolerance=1e-3)
    survey = cost.Survey(spec, map_plan(spec))
    for tiles in [(8,) * len(shape), (16,) * len(shape), tuple(shape)]:
        low, high = survey.extremes(0, tiles)
        grid = np.ix_(*[np.arange(0, n, t) for n, t in zip(shape, tiles)])
        assert low.shape == high.shape == tuple(len(g.ravel()) for g in grid)
        for index in np.ndindex(low.shape):
            box = tuple(slice(i * t, (i + 1) * t) for i, t in zip(index, tiles))
            assert low[index] == sigma[box].min() and high[index] == sigma[box].max()


def test_a_map_constant_along_an_axis_is_told_apart_from_one_that_changes_late():
    """The first two slices equal but not the third: the map varies along that axis."""
    image = np.zeros((6, 5), np.float32)
    late = np.ones((6, 5), np.float32)
    late[2, 3] = 2.0
    flat_x = np.repeat(np.linspace(1, 2, 6, dtype=np.float32)[:, None], 5, axis=1)
    for sigma, shape in ((late, (6, 5)), (flat_x, (6, 1))):
        spec = BlurSpec.from_args(image, sigma, backend="numba", tolerance=1e-3)
        assert cost.Survey(spec, map_plan(spec)).compact[0].shape == shape
    assert plan_levels(BlurSpec.from_args(image, late, backend="numba", tolerance=1e-3))


def test_a_broadcast_map_is_surveyed_and_quantised_as_its_copy():
    """A map broadcast from one row (stride 0) has the same constant axes, distinct
    values and level plan as the same map written out."""
    from napari_varblur.core.levels import distinct_values

    row = 1.0 + np.minimum(np.arange(40) * 8 // 40, 7).astype(np.float32)
    image = np.zeros((30, 40), np.float32)
    broadcast = np.broadcast_to(row, image.shape)
    written = np.ascontiguousarray(broadcast)
    assert broadcast.strides[0] == 0
    assert unbroadcast(broadcast).shape == (1, 40) and np.shares_memory(unbroadcast(broadcast), row)
    assert unbroadcast(written).shape == (30, 40)
    np.testing.assert_array_equal(distinct_values(broadcast), distinct_values(written))
    np.testing.assert_array_equal(distinct_values(broadcast), np.arange(1.0, 9.0))
    assert distinct_values(np.broadcast_to(row, (0, 40))).size == 0
    for sigma in (broadcast, written):
        spec = BlurSpec.from_args(image, sigma, backend="numba")
        assert cost.Survey(spec, map_plan(spec)).compact[0].shape == (1, 40)


def test_a_map_along_one_axis_is_planned_from_its_column():
    """A volume's map of one sigma per z-plane, written out whole, is read as its
    column (a view, length 1 along y and x): the same distinct values, quantised
    levels and level plan as the column broadcast, for a plain and a tolerance call."""
    from napari_varblur.core.levels import distinct_values
    from napari_varblur.core.shapes import compact

    column = np.linspace(0.5, 4.0, 12, dtype=np.float32)[:, None, None]
    written = np.ascontiguousarray(np.broadcast_to(column, (12, 9, 10)))
    small = compact(written)
    assert small.shape == (12, 1, 1) and np.shares_memory(small, written)
    late = written.copy()
    late[3, 8, 9] += 1.0  # the last pixel of one plane: y and x vary after all
    assert compact(late).shape == (12, 9, 10)
    np.testing.assert_array_equal(distinct_values(written), np.unique(column))
    image = np.zeros(written.shape, np.float32)
    for tolerance in (None, 1e-3):
        plans = [plan_levels(BlurSpec.from_args(image, m, backend="numba", tolerance=tolerance))
                 for m in (written, np.broadcast_to(column, written.shape))]  # fmt: skip
        assert all(p.exact for p in plans)
        for a, b in zip(plans[0].levels, plans[1].levels, strict=True):
            np.testing.assert_array_equal(a.sigma, b.sigma)
            np.testing.assert_array_equal(a.radius, b.radius)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("low", "high", "limit"), [(0.0, 6.0, 49), (0.3, 9.0, 12)])
def test_locate_is_the_levels_own_mix(rng, dtype, low, high, limit):
    """The kernel's level and weight per pixel are ``AxisLevels.locate``'s (the NumPy
    rule every backend shares): at random sigmas, at every level, at each radius jump
    and one ulp either side, at 0, beyond the top and under a radius cap; its segment
    counts are the changes of (level, weight > 0) along each line."""
    from napari_varblur.core import levels as lvls

    lv = lvls.tolerance_levels(low, high, True, 1e-3, 3.0, [lvls.windows(60, True)], limit)
    jumps = np.arange(1, 31) / 3.0
    edges = np.concatenate([lv.sigma, jumps, np.nextafter(jumps, 0), np.nextafter(jumps, 99),
                            [0.0, high, high * 1.5, np.float32(4 / 3)]])  # fmt: skip
    s = np.concatenate([edges, rng.uniform(low, high, 3000 - edges.size)])
    s = np.clip(s, low, None).astype(dtype).reshape(30, 100)
    s[7] = np.sort(s[7])[::-1]  # a falling line, then a rising one
    s[8] = np.sort(s[8])
    # Each level approached from one ulp above, then from one ulp below (a pixel on a
    # level right after one in the interval above it, or below it).
    v = np.clip(lv.sigma, low, None).astype(dtype)
    up, down = np.nextafter(v, dtype(np.inf)), np.nextafter(v, dtype(0))
    approach = np.stack([up, v, down, v], axis=1).ravel()[:1000]
    s[10 : 10 + -(-approach.size // 100)].flat[: approach.size] = approach
    expected_k, expected_t = lv.locate(s, dtype)
    key, t = np.empty(s.shape, np.int16), np.empty(s.shape, dtype)  # as the plan stores it
    counts = np.empty(s.shape[0], np.int64)
    first, last = lv._buckets
    square, inverse = band_runs.mix_tables(lv.sigma, lv.joined)
    args = (lv.sigma, square, inverse, first, last, float(lv.truncate), int(lv.limit))
    band_runs.locate(s, key, t, counts, *args)
    np.testing.assert_array_equal(key >> 1, expected_k)
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(t, expected_t, rtol=0, atol=8 * eps)  # a reciprocal's rounding
    np.testing.assert_array_equal(key & 1, t > 0)
    np.testing.assert_array_equal(counts, 1 + (key[:, 1:] != key[:, :-1]).sum(axis=1))
    # Without room for the weights (the plan recomputes them from the map): the same keys.
    alone = np.empty_like(key)
    band_runs.locate(s, alone, np.empty((0, 0), dtype), counts, *args)
    np.testing.assert_array_equal(alone, key)
