"""Level bands (backends/numba/bands.py): each level computed only over the pixels that
mix it.  The same mix as the tile walk, so the same oracles: the float64 reference
gather within the tolerance bound, the walk within rounding, and exact NaN reach.
Maps vary along every axis (tilted, diagonal, radial), where the bands' runs, their
widening and their unions all matter."""

from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np
import pytest

from napari_varblur import gaussian_blur
from napari_varblur.backends import load
from napari_varblur.backends.numba import bands
from napari_varblur.core.level_plan import plan_levels
from napari_varblur.core.spec import BlurSpec
from napari_varblur.engine import cost, planner, walk
from test_levels import MODES, adversarial_images, assert_within, exact, random_map


@pytest.fixture(autouse=True)
def any_runs(monkeypatch):
    """Small test images have short runs: take the bands whatever their length."""
    monkeypatch.setattr(bands, "MIN_MEAN_RUN", 0)


def bands_blur(image, sigma, precision="float64", **kw):
    """The level bands forced (``None`` when the plan is not diagonal)."""
    spec = BlurSpec.from_args(image, sigma, backend="numba", precision=precision, **kw)
    levels = plan_levels(spec)
    assert levels.diagonal
    return bands.blur(spec, bands.plan(spec, levels.levels[0]))


def walk_blur(image, sigma, precision="float64", **kw):
    spec = BlurSpec.from_args(image, sigma, backend="numba", precision=precision, **kw)
    plan = cost.Plan(plan_levels(spec), tuple(spec.shape[a] for a in spec.axes))
    return walk.blur(spec, plan, load("numba"))


def ramp(shape, direction, low, high):
    """A map rising from ``low`` to ``high`` along ``direction`` (one weight per axis)."""
    grids = np.meshgrid(*[np.linspace(0, 1, n) for n in shape], indexing="ij")
    u = sum(d * g for d, g in zip(direction, grids)) / sum(direction)
    return low + (high - low) * u


def radial(shape, low, high):
    grids = np.meshgrid(*[np.linspace(-1, 1, n) for n in shape], indexing="ij")
    return low + (high - low) * np.sqrt(sum(g * g for g in grids) / len(shape))


@pytest.mark.parametrize("mode", MODES)
def test_bound_holds_on_tilted_and_radial_maps_2d(rng, mode):
    shape = (31, 37)
    for sigma in (ramp(shape, (0.5, 0.87), 0.3, 5.0), radial(shape, 0.0, 4.0),
                  random_map(shape, rng)):  # fmt: skip
        for image in adversarial_images(shape, rng).values():
            for tolerance in (1e-2, 1e-3):
                kw = dict(mode=mode, cval=-2.0, tolerance=tolerance)
                out = bands_blur(image, sigma, **kw)
                assert_within(out, exact(image, sigma, mode=mode, cval=-2.0), tolerance, image,
                              mode, -2.0)  # fmt: skip


@pytest.mark.parametrize("mode", ["crop", "wrap", "reflect", "constant"])
def test_bound_holds_in_3d_diagonal_and_radial(rng, mode):
    shape = (9, 14, 17)
    image = adversarial_images(shape, rng)
    for sigma in (ramp(shape, (2, 1, 1), 0.5, 3.0), radial(shape, 0.2, 3.0)):
        for name in ("delta", "random"):
            out = bands_blur(image[name], sigma, mode=mode, tolerance=1e-3)
            assert_within(out, exact(image[name], sigma, mode=mode), 1e-3, image[name], mode)


def test_same_mix_as_the_walk_within_rounding(rng):
    """Bands and walk mix the same levels with the same weights: only the order of
    float32 sums differs."""
    cases = [
        ((40, 48), ramp((40, 48), (1, 1), 0.5, 6.0), {}),
        ((40, 48), radial((40, 48), 0.5, 6.0), dict(mode="wrap")),
        ((10, 20, 24), radial((10, 20, 24), 0.3, 4.0), dict(mode="mirror")),
        ((3, 12, 30), ramp((12, 30), (1, 3), 0.5, 5.0)[None], dict(axes=(1, 2))),
        ((12, 5, 30), ramp((12, 30), (2, 1), 0.5, 5.0)[:, None], dict(axes=(0, 2))),
        ((70,), np.linspace(0.0, 9.0, 70), dict(mode="nearest")),
    ]
    for shape, sigma, kw in cases:
        image = (rng.random(shape) * 100).astype(np.float32)
        a = bands_blur(image, sigma, precision="float32", tolerance=1e-3, **kw)
        b = walk_blur(image, sigma, precision="float32", tolerance=1e-3, **kw)
        assert a.dtype == np.float32 and a.shape == shape
        np.testing.assert_allclose(a, b, rtol=0, atol=100 * 4e-7)


@pytest.mark.parametrize("precision", [np.float64, np.float32])
def test_nan_inf_and_nan_cval_reach_exactly_the_exact_pixels(rng, precision):
    """Also in float32 with a float32 map, whose weights the blur recomputes: a pixel
    that does not mix a level (weight 0) never gets its NaN.  Which pixels are not
    finite is the reference gather's in the same precision; the values are within the
    bound of the float64 one, also from sigma 0 on, where the lowest levels' off-centre
    weights underflow in float32 (they are kept as a tiny weight, so a NaN at such a tap
    still reaches the pixel, as in the exact float32 gather)."""
    image = rng.random((21, 26))
    image[4, 5] = np.nan
    image[15, 0] = np.inf
    image[0, 20] = -np.inf
    sigma = ramp(image.shape, (1, 2), 0.0, 3.5).astype(precision)
    rounding = 1e-12 if precision == np.float64 else 1e-5  # float32 sums of < 100 taps
    for mode, cval in (("crop", 0.0), ("constant", np.nan), ("wrap", 0.0), ("reflect", 0.0)):
        expected = exact(image, sigma, mode=mode, cval=cval)
        kw = dict(mode=mode, cval=cval, precision=precision.__name__)
        spec = BlurSpec.from_args(image.astype(precision), sigma, backend="reference", **kw)
        same = load("reference").gather(spec)
        out = bands_blur(image.astype(precision), sigma, tolerance=1e-3, **kw)
        assert np.array_equal(np.isnan(out), np.isnan(same))
        assert np.array_equal(np.isposinf(out), np.isposinf(same))
        assert np.array_equal(np.isneginf(out), np.isneginf(same))
        finite = np.isfinite(expected) & np.isfinite(same)
        assert np.abs(out[finite] - expected[finite]).max() <= 1e-3 + rounding


def test_quantised_maps_are_exact(rng):
    labels = rng.integers(0, 5, (5, 6, 7))
    sigma = np.array([0.0, 0.7, 4.0 / 3.0, 2.0, 3.0])[np.kron(labels, np.ones((3, 3, 3), int))]
    image = rng.random(sigma.shape)
    image[4, 4, 4] = np.nan
    for mode in ("crop", "reflect", "wrap"):
        out = bands_blur(image, sigma, mode=mode)
        np.testing.assert_allclose(out, exact(image, sigma, mode=mode), rtol=0, atol=1e-12,
                                   equal_nan=True)  # fmt: skip


def test_one_pixel_and_short_axes(rng):
    for shape, axes in (((1, 30), None), ((1, 30), 1), ((30, 1), 0), ((2, 3, 40), None),
                        ((2, 30), None), ((1,), None)):  # fmt: skip
        image = rng.random(shape)
        blurred = [n for a, n in enumerate(shape) if axes is None or a == axes]
        sigma = (
            ramp(shape, (1,) * len(shape), 0.5, 4.0)
            if axes is None
            else ramp(shape, [int(a == axes) + 1e-9 for a in range(len(shape))], 0.5, 4.0)
        )
        for mode in ("crop", "reflect", "wrap", "nearest"):
            kw = dict(mode=mode, tolerance=1e-3, axes=axes)
            spec = BlurSpec.from_args(image, sigma, backend="numba", **kw)
            if not plan_levels(spec).diagonal:
                continue  # a map along one axis of several is per-axis: the walk's
            out = bands_blur(image, sigma, **kw)
            assert out.shape == shape and len(blurred) >= 1
            assert_within(out, exact(image, sigma, mode=mode, axes=axes), 1e-3, image, mode)


def test_planner_takes_bands_for_a_tilted_map_and_the_result_holds(rng):
    image = rng.random((384, 384)).astype(np.float32)
    sigma = ramp(image.shape, (0.5, 0.87), 1.0, 12.0).astype(np.float32)
    chosen = planner.route(BlurSpec.from_args(image, sigma, backend="numba", tolerance=1e-3))
    assert chosen.kind == "levels" and chosen.plan.bands is not None
    out = gaussian_blur(image, sigma, backend="numba", tolerance=1e-3)
    assert_within(out, exact(image, sigma), 1e-3, image, precision="float32")


@pytest.fixture
def bands_always(monkeypatch):
    """A Numba cost table under which the planner always takes the bands it can."""
    free = replace(cost.NUMBA_COSTS, band_pixel=0.0, band_tap=0.0, run=0.0)
    monkeypatch.setitem(cost.COSTS, "numba", free)


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_masked_and_nan_omitting_blurs_route_through_bands(rng, bands_always, precision):
    image = rng.random((30, 34))
    mask = rng.random(image.shape) > 0.3
    image[3, 3] = np.nan
    sigma = ramp(image.shape, (1, 1), 0.5, 4.0)
    kw = dict(mask=mask, nan_policy="omit", precision=precision)
    chosen = planner.route(BlurSpec.from_args(image, sigma, tolerance=1e-3, **kw))
    assert chosen.kind == "levels" and chosen.plan.bands is not None
    out = gaussian_blur(image, sigma, backend="numba", tolerance=1e-3, **kw)
    expected = gaussian_blur(image, sigma, backend="reference", **kw)
    assert np.array_equal(np.isnan(out), np.isnan(expected))
    # Both sums are within 1e-3 of exact (values in [0, 1], validity in [0, 1]); their
    # ratio within 1e-3 (1 + 1) / share, the share at least 0.1 here.
    finite = np.isfinite(expected)
    assert np.abs(out[finite] - expected[finite]).max() <= 2e-2


def test_two_threads_get_what_one_gets(rng):
    image = rng.random((60, 70)).astype(np.float32)
    sigma = radial(image.shape, 0.5, 5.0)
    alone = bands_blur(image, sigma, precision="float32", tolerance=1e-3)
    results = [None, None]

    def work(i):
        results[i] = bands_blur(image, sigma, precision="float32", tolerance=1e-3)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        np.testing.assert_array_equal(r, alone)


@pytest.mark.parametrize("join", [0, 64, 2048])
def test_tiles_of_any_size_give_the_same_blur(rng, monkeypatch, join):
    """A tile runs every level over its own planes (3-D) or lines (2-D), the first pass
    reading the image around it: tiles of one unit, of a few (the last one short), of
    the whole image, dealt to any number of jobs, add the same sums in the same order;
    with slot 1's runs joined across no gap (the exact bitset union, whole lines
    joined), short gaps (some joined, some not) or the default (whole planes)."""
    monkeypatch.setattr(bands, "JOIN_TAPS", join)
    cases = [
        ((37, 45), radial((37, 45), 0.5, 5.0), dict(mode="reflect")),
        ((2, 9, 14, 17), radial((9, 14, 17), 0.3, 3.0)[None], dict(axes=(1, 2, 3), mode="wrap")),
    ]
    for shape, sigma, kw in cases:
        image = rng.random(shape).astype(np.float32)
        results = []
        for tile, chunks in ((1, 1), (2, 3), (3, 1), (5, 4), (10_000, 2)):
            monkeypatch.setattr(bands, "_tiling", lambda *a, t=tile, c=chunks: (t, c))
            results.append(bands_blur(image, sigma, precision="float32", tolerance=1e-3, **kw))
        for r in results[1:]:
            np.testing.assert_array_equal(r, results[0])
        walked = walk_blur(image, sigma, precision="float32", tolerance=1e-3, **kw)
        np.testing.assert_allclose(results[0], walked, rtol=0, atol=4e-6)


def test_inputs_are_not_modified_and_not_aliased(rng):
    image = rng.random((20, 24)).astype(np.float32)
    sigma = ramp(image.shape, (1, 1), 0.5, 3.0).astype(np.float32)
    before = image.copy(), sigma.copy()
    out = bands_blur(image, sigma, precision="float32", tolerance=1e-3)
    assert not np.shares_memory(out, image)
    np.testing.assert_array_equal(image, before[0])
    np.testing.assert_array_equal(sigma, before[1])


@pytest.mark.parametrize("dtype", [np.float32, np.uint16])
def test_a_working_layout_in_another_order_is_copied_in_and_out_in_order(rng, dtype):
    """A map that changes along x runs its last pass along y: the image goes into the
    working layout transposed and the result comes back (tiled copies, large enough
    to take them), the same as the tile walk's."""
    cases = [
        ((150, 260), ramp((150, 260), (0.1, 1), 0.5, 6.0), {}),
        ((20, 40, 52), ramp((20, 40, 52), (0.2, 0.1, 1), 0.5, 4.0), dict(mode="wrap")),
    ]
    for shape, sigma, kw in cases:
        image = (rng.random(shape) * 4000).astype(dtype)
        spec = BlurSpec.from_args(image, sigma, backend="numba", precision="float32",
                                  tolerance=1e-3, **kw)  # fmt: skip
        plan = bands.plan(spec, plan_levels(spec).levels[0])
        assert plan.axes[-1] != len(shape) - 1  # the last pass is not along memory
        a = bands_blur(image, sigma, precision="float32", tolerance=1e-3, **kw)
        b = walk_blur(image, sigma, precision="float32", tolerance=1e-3, **kw)
        assert a.flags.c_contiguous and a.shape == shape
        np.testing.assert_allclose(a, b, rtol=0, atol=4000 * 4e-6)


@pytest.mark.parametrize("precision", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(48, 64), (12, 16, 20)])
def test_weights_recomputed_from_the_map_are_the_stored_ones_bit_for_bit(rng, precision, shape):
    """A float32 map in a float32 blur is the plan's source of each pixel's weight (no
    image of weights is held), other maps' weights are stored: the two give the same
    bits.  The maps hold the same values, and each side takes the path it should."""
    image = rng.random(shape).astype(precision)
    base = radial(shape, 0.4, 5.0).astype(np.float32)  # its values exact in both dtypes
    other = np.float64 if precision == np.float32 else np.float32
    out = {}
    for dtype in (precision, other):
        spec = BlurSpec.from_args(image, base.astype(dtype), backend="numba",
                                  precision=precision, tolerance=1e-3, mode="mirror")  # fmt: skip
        plan = bands.plan(spec, plan_levels(spec).levels[0])
        source, _, _, recompute, _ = plan.mix
        assert recompute == (dtype == precision == np.float32)
        if recompute:  # the map itself, in the working layout
            np.testing.assert_array_equal(np.sort(source, axis=None), np.sort(base, axis=None))
        else:
            assert source.dtype == precision and source.min() >= 0 and source.max() <= 1
        out[dtype] = bands.blur(spec, plan)
    np.testing.assert_array_equal(out[precision], out[other])


@pytest.mark.parametrize("mode", ["nearest", "crop", "constant"])
@pytest.mark.parametrize(
    ("shape", "direction"), [((40, 56), (0, 1)), ((40, 56), (1, 0)), ((10, 12, 14), (1, 0, 0))]
)
def test_a_map_constant_along_the_lines_is_located_once_per_line(rng, monkeypatch, mode, shape,
                                                                 direction):  # fmt: skip
    """A float32 map that does not change along the last pass's lines (a ramp across
    them, one sigma per z-plane; written out or broadcast) is located one pixel per
    line, and blurs to the same bits as the same map in float64, located pixel by
    pixel with its weights stored."""
    seen = []
    locate = bands.band_runs.locate

    def spy(sigma, *args):
        seen.append(sigma.shape)
        return locate(sigma, *args)

    monkeypatch.setattr(bands.band_runs, "locate", spy)
    image = rng.random(shape).astype(np.float32)
    sigma = ramp(shape, direction, 0.6, 4.0).astype(np.float32)
    column = sigma[tuple(slice(None) if d else slice(0, 1) for d in direction)]
    out = []
    for m in (sigma, np.broadcast_to(column, shape), sigma.astype(np.float64)):
        spec = BlurSpec.from_args(image, m, backend="numba", precision="float32",
                                  tolerance=1e-3, mode=mode)  # fmt: skip
        out.append(bands.blur(spec, bands.plan(spec, plan_levels(spec).levels[0])))
    lines = image.size // seen[-1][1]
    assert seen[0] == seen[1] == (lines, 1) and seen[2][0] == lines and seen[2][1] > 1
    np.testing.assert_array_equal(out[0], out[2])
    np.testing.assert_array_equal(out[1], out[2])
    expected = exact(image, sigma.astype(np.float64), mode=mode)
    assert_within(out[0], expected, 1e-3, image, mode=mode, precision="float32")


def test_level_tables_are_shared_between_calls_and_give_the_same_blur(rng):
    """A second call with the same axis, mode and levels reuses the first call's table
    (a deconvolution's steps), and blurs exactly as the first call did; its source
    indices are int32."""
    from napari_varblur.core.level_plan import level_table

    image = rng.random((40, 48)).astype(np.float32)
    sigma = ramp(image.shape, (1, 1), 0.5, 6.0)
    spec = BlurSpec.from_args(image, sigma, backend="numba", tolerance=1e-3, mode="constant",
                              cval=2.0)  # fmt: skip
    lv = plan_levels(spec).levels[0]
    used = np.arange(len(lv))
    assert level_table(spec, 0, lv, used, np.float32) is level_table(spec, 0, lv, used, np.float32)
    assert level_table(spec, 1, lv, used, np.float32).axis == spec.axes[1]
    # (Every call holds the tables: their source indices are int32, half of int64.)
    assert level_table(spec, 0, lv, used, np.float32).src.dtype == np.int32
    # A NaN fill is found again too, from two calls' own specs (NaN != NaN).
    nan = dict(backend="numba", tolerance=1e-3, mode="constant", cval=np.float64(np.nan))
    a, b = (BlurSpec.from_args(image, sigma, **nan) for _ in range(2))
    assert level_table(a, 0, lv, used, np.float32) is level_table(b, 0, lv, used, np.float32)
    once = bands_blur(image, sigma, precision="float32", tolerance=1e-3, mode="reflect")
    again = bands_blur(image, sigma, precision="float32", tolerance=1e-3, mode="reflect")
    np.testing.assert_array_equal(once, again)
