"""Sigma maps by global passes (levels.py, stacked.py): the tolerance bound, held on
adversarial inputs in every mode and backend, and quantised maps, exact."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

from napari_varblur import gaussian_blur
from napari_varblur.backends import load
from napari_varblur.core import levels
from napari_varblur.core.level_plan import plan_levels
from napari_varblur.core.rules import radius_of
from napari_varblur.core.spec import BlurSpec
from napari_varblur.core.taps import map_plan
from napari_varblur.engine import cost, planner, walk

MODES = ["crop", "reflect", "mirror", "nearest", "wrap", "constant"]
BACKENDS = ["numba", "jax", "reference"]


def exact(image, sigma, **kw):
    spec = BlurSpec.from_args(image, sigma, backend="reference", precision="float64", **kw)
    return load("reference").gather(spec)


def levels_blur(image, sigma, backend, tiles=7, precision="float64", **kw):
    """The level walk forced (small tiles, so tiling and narrowing are exercised)."""
    spec = BlurSpec.from_args(image, sigma, backend=backend, precision=precision, **kw)
    found = plan_levels(spec)
    assert found is not None
    plan = cost.Plan(found, (tiles,) * len(spec.axes))
    return walk.blur(spec, plan, load(backend))


def value_range(image, mode, cval):
    values = image[np.isfinite(image)]
    if mode == "constant":
        values = np.append(values, cval)
    return values.max() - values.min()


def adversarial_images(shape, rng):
    delta = np.zeros(shape)
    delta[tuple(n // 2 for n in shape)] = 1.0
    delta[(0,) * len(shape)] = -1.0  # at a corner too
    checker = (np.indices(shape).sum(axis=0) % 2) * 2.0 - 1.0
    step = np.where(np.indices(shape)[-1] < shape[-1] // 2, 0.0, 10.0)
    return {"delta": delta, "checker": checker, "step": step, "random": rng.random(shape)}


def random_map(shape, rng, top=3.5):
    sigma = rng.uniform(0, top, shape)
    sigma[sigma < 0.6] = 0.0  # sigma 0 regions, and radius-1 buckets
    return sigma


def assert_within(out, expected, tolerance, image, mode="crop", cval=0.0, precision="float64"):
    allowed = tolerance * value_range(image, mode, cval)
    if precision == "float32":
        allowed += 1e-5 * max(1.0, np.nanmax(np.abs(image)), abs(cval) if mode == "constant" else 0)
    assert np.array_equal(np.isnan(out), np.isnan(expected))
    err = np.nanmax(np.abs(out - expected))
    assert err <= allowed, f"error {err:.3g} > allowed {allowed:.3g}"
    return err


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_bound_holds_on_adversarial_images_2d(rng, mode, backend):
    shape = (17, 23)
    sigma = random_map(shape, rng)
    worst = 0.0
    for image in adversarial_images(shape, rng).values():
        for tolerance in (0.1, 1e-2, 1e-3):
            expected = exact(image, sigma, mode=mode, cval=-2.0)
            out = levels_blur(image, sigma, backend, mode=mode, cval=-2.0, tolerance=tolerance)
            err = assert_within(out, expected, tolerance, image, mode, -2.0)
            worst = max(worst, err / (tolerance * value_range(image, mode, -2.0)))
    assert worst > 0.05  # the inputs do stress the bound (it is not trivially loose)


@pytest.mark.parametrize("mode", ["crop", "wrap", "constant"])
def test_bound_holds_in_3d_with_deltas(rng, mode):
    shape = (9, 11, 13)
    image = adversarial_images(shape, rng)["delta"]
    sigma = random_map(shape, rng, top=2.5)
    for tolerance in (1e-2, 1e-3):
        expected = exact(image, sigma, mode=mode)
        out = levels_blur(image, sigma, "numba", tiles=4, mode=mode, tolerance=tolerance)
        assert_within(out, expected, tolerance, image, mode)


def test_bound_holds_for_per_axis_maps_and_modes(rng):
    shape = (19, 21)
    sigma = np.stack([random_map(shape, rng, 2.0), random_map(shape, rng, 5.0)], axis=-1)
    for image in adversarial_images(shape, rng).values():
        for backend in ("numba", "reference"):
            kw = dict(mode=("crop", "reflect"), tolerance=1e-3)
            out = levels_blur(image, sigma, backend, **kw)
            assert_within(out, exact(image, sigma, mode=("crop", "reflect")), 1e-3, image)


def test_bound_holds_with_batch_axes_and_1d(rng):
    image = rng.random((3, 40, 5))
    sigma = rng.uniform(0.2, 6.0, (1, 40, 1))
    for tolerance in (1e-2, 1e-3):
        out = levels_blur(image, sigma, "numba", axes=1, tolerance=tolerance)
        assert_within(out, exact(image, sigma, axes=1), tolerance, image)
    line = adversarial_images((60,), rng)["checker"]
    sigma = rng.uniform(0, 9.0, 60)
    out = levels_blur(line, sigma, "numba", mode="mirror", tolerance=1e-3)
    assert_within(out, exact(line, sigma, mode="mirror"), 1e-3, line)


def test_float32_adds_only_its_own_rounding(rng):
    image = rng.random((16, 30)) * 1000
    sigma = np.broadcast_to(np.linspace(0.3, 12, 30), (16, 30)) + rng.random((16, 30)) * 1e-3
    for backend in ("numba", "jax"):
        out = levels_blur(image, sigma, backend, precision="float32", tolerance=1e-3)
        assert out.dtype == np.float32
        assert_within(out, exact(image, sigma), 1e-3, image, precision="float32")


def test_nan_image_and_nan_cval_reach_exactly_the_exact_pixels(rng):
    image = rng.random((15, 18))
    image[4, 5] = np.nan
    image[10, 0] = np.inf
    sigma = random_map(image.shape, rng, 3.0)
    for mode, cval in (("crop", 0.0), ("constant", np.nan), ("reflect", 0.0)):
        expected = exact(image, sigma, mode=mode, cval=cval)
        out = levels_blur(image, sigma, "numba", mode=mode, cval=cval, tolerance=1e-3)
        assert np.array_equal(np.isnan(out), np.isnan(expected))
        assert np.array_equal(np.isinf(out), np.isinf(expected))
        finite = np.isfinite(expected)
        assert np.abs(out[finite] - expected[finite]).max() <= 1e-3 * 1.0 + 1e-12


# ------------------------------------------------------------------- the levels


def test_levels_never_straddle_a_radius_jump():
    lv = levels.tolerance_levels(0.1, 9.0, True, 2e-3, 3.0, [levels.windows(50, True)], 49)
    for k in np.flatnonzero(lv.joined):
        assert lv.radius[k] == lv.radius[k + 1]
        # Both ends lie in the bucket of their radius (the lower end may be its floor).
        assert radius_of(lv.sigma[k + 1], 3.0) == lv.radius[k + 1]
    # A pixel is mixed from levels of its own radius, at every jump and around it.
    jumps = np.array([r / 3.0 for r in range(1, 27)])  # the levels reach sigma 9
    s = np.concatenate([jumps, np.nextafter(jumps, 0), np.nextafter(jumps, 10)])
    s = np.append(s, [np.float64(np.float32(4 / 3)), 0.0])
    k, t = lv.locate(s)
    assert np.array_equal(lv.radius[k], radius_of(s, 3.0))
    assert np.all(lv.radius[np.minimum(k + 1, len(lv) - 1)][t > 0] == lv.radius[k][t > 0])


def test_mixing_error_is_what_the_split_enforces():
    shape = levels.windows(40, True)
    lv = levels.tolerance_levels(0.5, 6.0, False, 1e-3, 3.0, [shape], 39)
    for k in np.flatnonzero(lv.joined):
        r = int(lv.radius[k])
        err = levels.mixing_error(lv.sigma[k], lv.sigma[k + 1], r, (shape(r),))
        assert err <= levels.SAFETY * 1e-3
    # A wide interval is far from the budget: the split is doing the work.
    assert levels.mixing_error(1.0, 1.3, 4, (shape(4),)) > 1e-3


def test_the_split_takes_as_few_pieces_as_the_error_asks_for():
    """An interval at 4.9 times the budget, whose halves are each over it: halving
    makes four pieces where three pass."""
    shape, r, budget = levels.windows(200, False), 12, 1e-5
    lo, hi = levels.bucket_range(r, 3.0)[0], 3.71
    limit = levels.SAFETY * budget
    assert 4 < levels.mixing_error(lo, hi, r, (shape(r),)) / limit < 9
    mid = np.sqrt(lo * hi)
    assert levels.mixing_error(lo, mid, r, (shape(r),)) > limit
    points = levels._split(lo, hi, r, budget, (shape(r),))
    assert len(points) == 4 and points[0] == lo and points[-1] == hi
    for a, b in itertools.pairwise(points):
        assert levels.mixing_error(a, b, r, (shape(r),)) <= limit


def test_distinct_values():
    assert levels.distinct_values(np.array([3.0, 1.0, 3.0, 2.0])).tolist() == [1.0, 2.0, 3.0]
    ramp = np.linspace(0, 1, 10_000)
    assert levels.distinct_values(ramp) is None
    # Few values in the sample, more in the whole: still found, or refused past 64.
    sparse = np.zeros(100_000)
    sparse[1 :: 4096 + 1] = np.arange(len(sparse[1 :: 4096 + 1])) + 1
    assert len(levels.distinct_values(sparse)) == len(set(sparse.tolist()))
    many = np.zeros(100_000)
    many[1:200:2] = np.arange(100) + 1
    assert levels.distinct_values(many) is None


# ------------------------------------------------------------------- choice and API


def test_quantised_maps_are_exact_and_chosen_automatically(rng):
    labels = rng.integers(0, 6, (6, 8, 8))
    sigma = np.array([0.0, 0.7, 1.0, 2.0, 4.0 / 3.0, 3.0])[np.kron(labels, np.ones((4, 4, 4), int))]
    image = rng.random(sigma.shape)
    image[3, 3, 3] = np.nan
    for mode in MODES:
        spec = BlurSpec.from_args(image, sigma, mode=mode, backend="numba", precision="float64")
        plan = planner.route(spec).plan
        assert plan is not None and plan.levels.exact
        out = gaussian_blur(image, sigma, mode=mode, backend="numba", precision="float64")
        expected = exact(image, sigma, mode=mode)
        assert np.array_equal(np.isnan(out), np.isnan(expected))
        np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12, equal_nan=True)


def test_choice_prefers_the_gather_for_a_rough_map_and_levels_for_a_smooth_one(rng):
    image = rng.random((256, 256)).astype(np.float32)
    rough = rng.uniform(1, 4, image.shape)
    assert planner.route(BlurSpec.from_args(image, rough, tolerance=1e-3)).kind == "gather"
    smooth = np.broadcast_to(np.linspace(1.0, 16.0, 256), image.shape) + rough * 1e-6
    plan = planner.route(BlurSpec.from_args(image, smooth, tolerance=1e-3)).plan
    assert plan is not None and not plan.levels.exact
    # Without a tolerance a smooth map keeps the exact gather.
    assert planner.route(BlurSpec.from_args(image, smooth)).kind == "gather"
    out = gaussian_blur(image, smooth, tolerance=1e-3, backend="numba")
    assert_within(out, exact(image, smooth), 1e-3, image, precision="float32")


def test_jax_walks_levels_only_where_its_whole_image_passes_beat_its_gather(rng):
    """JAX's level walk runs whole-image passes (its own cost table): a 2-D map takes
    its gather, where the walk ran 3-15x slower, and a 3-D map with large sigma the
    walk, where the gather ran 2.7x slower (calibrate_levels.py --backend jax)."""
    flat = np.zeros((1024, 1024), np.float32)
    ramp = np.broadcast_to(np.linspace(1, 16, 1024, dtype=np.float32), flat.shape)
    spec = BlurSpec.from_args(flat, ramp, tolerance=1e-3, backend="jax")
    assert planner.route(spec).kind == "gather"
    assert planner.route(replace(spec, backend="numba")).kind == "levels"
    volume = np.zeros((64, 128, 128), np.float32)
    deep = np.broadcast_to(np.linspace(0.5, 8, 128, dtype=np.float32), volume.shape)
    chosen = planner.route(BlurSpec.from_args(volume, deep, tolerance=1e-3, backend="jax"))
    assert chosen.kind == "levels" and chosen.plan.tiles == volume.shape


def test_the_walk_estimate_counts_many_level_combinations_without_overflow():
    """A per-axis walk over 3 axes of 32+ levels each has more than 2**15 nodes: the
    counts (from int16 level indices) once wrapped negative, so the planner took a
    walk estimated to cost less than nothing."""
    sigma = np.broadcast_to(np.linspace(0.5, 8, 32, dtype=np.float32), (16, 32, 32))
    spec = BlurSpec.from_args(np.zeros(sigma.shape, np.float32), sigma, tolerance=1e-3)
    maps = map_plan(spec)
    found = plan_levels(spec)
    survey = cost.Survey(spec, maps)
    work = cost._walk_work(spec, maps, survey, found.levels, sigma.shape, found.diagonal)
    assert not found.diagonal and work["calls"] > 2**15
    assert min(work.values()) > 0


@pytest.mark.parametrize("bad", [0, -1e-3, 0.2, float("nan"), float("inf"), "1e-3", True, [1e-3]])
def test_bad_tolerance_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match="tolerance"):
        gaussian_blur(np.ones((4, 4)), np.ones((4, 4)), tolerance=bad)


def test_tolerance_with_a_global_sigma_is_ignored(rng):
    image = rng.random((20, 20))
    np.testing.assert_array_equal(
        gaussian_blur(image, 2.0, tolerance=0.1), gaussian_blur(image, 2.0)
    )


def test_dask_path_takes_the_tolerance(rng):
    da = pytest.importorskip("dask.array")
    image = rng.random((96, 200))
    sigma = (
        np.broadcast_to(np.linspace(0.5, 9.0, 200), image.shape) + rng.random(image.shape) * 1e-6
    )
    lazy = gaussian_blur(da.from_array(image, chunks=(48, 100)), sigma, tolerance=1e-3,
                         precision="float64")  # fmt: skip
    assert_within(lazy.compute(scheduler="threads"), exact(image, sigma), 1e-3, image)
    with pytest.raises(ValueError, match="tolerance"):
        gaussian_blur(da.from_array(image, chunks=48), sigma, tolerance=2)


def test_inputs_are_not_modified(rng):
    image = rng.random((30, 40)).astype(np.float32)
    sigma = np.broadcast_to(np.linspace(0.5, 9.0, 40), image.shape) + rng.random(image.shape) * 1e-6
    before = image.copy(), sigma.copy()
    out = levels_blur(image, sigma, "numba", precision="float32", tolerance=1e-3)
    assert np.array_equal(image, before[0]) and np.array_equal(sigma, before[1])
    assert not np.shares_memory(out, image) and out.flags.writeable


@pytest.mark.parametrize("mode", ["crop", "reflect", "wrap"])
@pytest.mark.parametrize("shared", [True, False])
def test_every_pixel_kernel_is_within_the_l1_bound(rng, mode, shared):
    """The sharpest adversary: each pixel's realised kernel (its response to every unit
    image, one batch of deltas) against the exact one.  The worst image for a pixel
    (the sign of the kernel error) makes the output error exactly half this L1 norm
    times the range, so the bound holds for every image iff L1 <= 2 * tolerance."""
    shape, tolerance = (13, 14), 1e-2
    n = shape[0] * shape[1]
    deltas = np.eye(n).reshape((n,) + shape)
    sigma = random_map(shape, rng, 3.0)[None]
    if not shared:  # a per-axis map: its own levels per axis
        sigma = np.stack([sigma, random_map(shape, rng, 2.0)[None]], axis=-1)
    kw = dict(axes=(1, 2), mode=mode)
    mixed = levels_blur(deltas, sigma, "numba", tiles=5, tolerance=tolerance, **kw)
    exact_kernels = exact(deltas, sigma, **kw)
    l1 = np.abs(mixed - exact_kernels).sum(axis=0)  # per output pixel
    assert l1.max() <= 2 * tolerance
    assert l1.max() > 0.2 * tolerance  # not vacuous


@pytest.mark.parametrize("ndim", [2, 3])
def test_shared_levels_bound_covers_the_cross_terms(ndim):
    """For a map shared by the axes, the D-dimensional kernel error (brute force) stays
    within mixing_error, whose cross terms are needed: the per-axis sum alone is not."""
    needed = 0
    for lo, hi, r in ((0.5, 0.6, 2), (1.0, 1.2, 4), (2.0, 2.3, 7)):
        full = ((r, r),)
        bound = levels.mixing_error(lo, hi, r, (full,) * ndim)
        d = np.arange(-r, r + 1.0)

        def kernel(s, d=d):
            k = np.exp(-0.5 * (d / s) ** 2)
            k /= k.sum()
            out = k
            for _ in range(ndim - 1):
                out = np.multiply.outer(out, k)
            return out

        def error(u, lo=lo, hi=hi, kernel=kernel):
            s = np.sqrt(lo * lo + (hi * hi - lo * lo) * u)
            return np.abs((1 - u) * kernel(lo) + u * kernel(hi) - kernel(s)).sum()

        sampled = max(error(u) for u in np.linspace(0, 1, levels.SAMPLES + 2)[1:-1])
        assert sampled <= bound * (1 + 1e-12)  # a bound at the sigmas it samples
        assert max(error(u) for u in np.linspace(0, 1, 201)) <= bound / levels.SAFETY
        needed += sampled > ndim * levels.mixing_error(lo, hi, r, (full,))
    assert needed  # without the cross terms the bound would fail somewhere


@pytest.mark.parametrize("halves", [(3, 3), (4, 2), (3, 3, 3), (2, 3, 4), (2, 2, 2, 2)])
@pytest.mark.parametrize("lo, hi", [(0.0, 0.5), (0.8, 0.9), (1.0, 1.3)])
def test_one_window_per_axis_sums_the_tensor_error_exactly(halves, lo, hi):
    """Where every axis has one symmetric window, mixing_error is the exact L1 distance
    of the D-dimensional kernels (brute force over every tap), at the sampled sigmas:
    the symmetric orbits and their sizes count every tap once."""

    def kernel(s):
        out = np.ones(())
        for h in halves:
            d = np.arange(-h, h + 1.0)
            k = np.exp(-0.5 * (d / max(s, 1e-3)) ** 2)  # (sigma 0: the centre tap)
            out = np.multiply.outer(out, k / k.sum())
        return out

    u = np.linspace(0, 1, levels.SAMPLES + 2)[1:-1]
    mid = np.sqrt(lo**2 + (hi**2 - lo**2) * u)
    brute = [np.abs((1 - t) * kernel(lo) + t * kernel(hi) - kernel(s)).sum()
             for t, s in zip(u, mid)]  # fmt: skip
    terms = levels._tensor_terms(halves)
    assert levels._tensor_error(lo, hi, terms, u) == pytest.approx(brute, rel=1e-12)
    shapes = tuple(((h, h),) for h in halves)
    assert levels.mixing_error(lo, hi, max(halves), shapes) >= max(brute) * (1 - 1e-12)
    assert terms[1].sum() == np.prod([2 * h + 1 for h in halves])


@pytest.mark.parametrize(
    "lo, hi, r, shapes",
    [
        (7.0, 7.333, 22, (((22, 22),),) * 3),  # a 3-D tensor sum (one interval)
        (0.5, 0.6, 2, (((2, 2),),) * 2),
        (1.0, 1.3, 4, (((4, 4),), ((0, 4), (2, 4), (4, 4)))),  # per axis, a crop axis
        (0.0, 0.3, 1, (((1, 1),),)),  # from sigma 0: equal steps of sigma squared
        (3.0, 3.3, 10, (((3, 10), (10, 10)),)),
    ],
)
def test_the_refined_maximum_is_the_maximum(lo, hi, r, shapes):
    """The maximum that the levels' split compares with SAFETY (0.97) of the budget is
    within 1e-4 of a brute-force maximum over 20,001 sigmas (the 3% margin is 300 times
    that), and above the 16 samples' maximum, which it refines."""
    u = np.linspace(0, 1, 20_001)[1:-1]
    terms = levels._tensor_terms(tuple(s[0][0] for s in shapes))
    if levels._one_window(shapes) and terms is not None:
        dense = levels._tensor_error(lo, hi, terms, u)
    else:
        dense = levels._axes_error(lo, hi, r, shapes, u)
    found = levels.mixing_error(lo, hi, r, shapes)
    assert found == pytest.approx(dense.max(), rel=1e-4)
    coarse = dense[np.searchsorted(u, np.linspace(0, 1, levels.SAMPLES + 2)[1:-1])]
    assert found >= coarse.max() * (1 - 1e-3)


def test_jax_walk_and_jax_native_levels_keep_nan_where_the_exact_blur_has_it(rng):
    """Zero-weight padding taps (to a power of two, or to the largest level's radius)
    must never read a NaN: 0 * NaN would spread it."""
    jax_blur = pytest.importorskip("napari_varblur.jax").gaussian_blur
    image = rng.random((16, 16))
    image[8, 15] = np.nan
    sigma = np.where(np.arange(16) < 8, 1.0, 2.0)[None, :] * np.ones((16, 1))
    expected = exact(image, sigma)
    out = levels_blur(image, sigma, "jax", tiles=16)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))
    small = np.zeros((8, 8))
    small[0, 0] = np.nan
    quantised = np.zeros((8, 8))
    quantised[7, 7] = 2.0
    native = np.asarray(jax_blur(small, quantised))  # quantised: the levels path
    np.testing.assert_array_equal(np.isnan(native), np.isnan(exact(small, quantised)))


def test_traced_levels_cover_sigmas_beyond_max_radius_and_short_crop_axes():
    jax = pytest.importorskip("jax")
    jax_blur = pytest.importorskip("napari_varblur.jax").gaussian_blur
    ones = np.ones((12, 12), np.float32)
    for value in (2.0, 8 / 3, 5.0):  # above 8/3 acts as the largest sigma the levels hold
        blur = jax.jit(lambda x, s: jax_blur(x, s, max_radius=8, tolerance=0.01))
        out = np.asarray(blur(ones, np.full((12, 12), value, np.float32)))
        np.testing.assert_allclose(out, 1.0, atol=1e-5)
    tiny = np.ones((5, 5), np.float32)  # crop caps every radius at 4 < max_radius
    for value in (1.0, 1.5, 2.5):
        blur = jax.jit(lambda x, s: jax_blur(x, s, max_radius=8, tolerance=0.01))
        out = np.asarray(blur(tiny, np.full((5, 5), value, np.float32)))
        np.testing.assert_allclose(out, 1.0, atol=1e-5)


def test_inf_stays_inf_where_tiny_levels_underflow():
    """A level whose off-centre weights underflow keeps them as a tiny weight, so mixing
    it never makes 0 * inf = NaN where the exact blur gives inf."""
    image = np.zeros(100, np.float32)
    image[1] = np.inf
    sigma = np.linspace(0.05, 0.3, 100).astype(np.float32)
    sigma[0], sigma[1] = 0.137, 0.0
    assert np.isposinf(exact(image, sigma, mode="reflect")[:2]).all()
    for backend in BACKENDS:
        out = levels_blur(image, sigma, backend, precision="float32", mode="reflect",
                          tolerance=1e-3)  # fmt: skip
        # Pixel 0's own weight on the inf (2.8e-12) is positive in float32: inf.  (Pixel
        # 2's, exp(-165), underflows there: the contract promises no value for it.)
        assert np.isposinf(out[:2]).all() and not np.isnan(out).any()
        # A level weight that is subnormal in float32 (sigma 0.072: exp(-96)), which
        # XLA flushes to 0, is raised too: inf, never 0 * inf.
        low = np.linspace(0.072, 0.3, 100).astype(np.float32)
        low[1] = 0.0
        out = levels_blur(image, low, backend, precision="float32", mode="reflect",
                          tolerance=1e-3)  # fmt: skip
        assert np.isposinf(out[:2]).all() and not np.isnan(out).any()


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_reaches_through_levels_whose_weights_underflow(backend, rng):
    """float32, sigmas from 0.04: the lowest levels' off-centre weights underflow to 0,
    and the exact float32 gather still multiplies them, so a NaN next to those pixels
    makes them NaN (0 * NaN).  The levels reach exactly the same pixels (once the
    contract's exception: such a level left its axis untouched), and the finite
    pixels stay within the bound."""
    image = rng.random((7, 60)).astype(np.float32)
    image[1, 3] = image[5, 40] = np.nan
    sigma = np.broadcast_to(np.linspace(0.04, 0.5, 60, dtype=np.float32), image.shape)
    spec = BlurSpec.from_args(image, sigma, backend="reference", precision="float32")
    same = load("reference").gather(spec)
    assert np.isnan(same[1, 2:5]).all()  # pixels 2 and 4 reach it through weights of 0
    for mode in ("reflect", "crop"):
        out = levels_blur(image, sigma, backend, precision="float32", mode=mode, tolerance=1e-3)
        assert np.array_equal(np.isnan(out), np.isnan(same))
        expected = exact(image.astype(np.float64), sigma, mode=mode)
        finite = np.isfinite(same)
        assert_within(out[finite], expected[finite], 1e-3, image, mode, precision="float32")


@pytest.mark.parametrize("backend", ["numba", "jax"])
def test_a_single_interval_meets_the_bound_at_its_worst_pixel(backend):
    """3-D, radius bucket 22 (sigma 7 to 7.33) is one interval since the split compares
    the refined maximum with 0.97 of the budget.  Its pixel at the worst weight, on the
    image that is the sign of its kernel's error (the worst image for that pixel: the
    error is the L1 distance, the range 2), stays within the tolerance, and near it."""
    r, n = 22, 45
    lo, hi = levels.bucket_range(r, 3.0)
    rng = np.random.default_rng(3)
    smap = rng.uniform(np.nextafter(lo, 8.0), hi, (n, n, n))
    smap.flat[:2] = np.nextafter(lo, 8.0), hi
    spec = BlurSpec.from_args(np.zeros(smap.shape), smap, tolerance=1e-3, mode="nearest")
    lv = plan_levels(spec).levels[0]
    assert len(lv) == 2 and lv.radius.tolist() == [r, r]
    s0, s1 = lv.sigma
    u = np.linspace(0, 1, 2001)[1:-1]
    worst = u[np.argmax(levels._tensor_error(s0, s1, levels._tensor_terms((r, r, r)), u))]
    s = np.sqrt(s0 * s0 + (s1 * s1 - s0 * s0) * worst)
    smap[r, r, r] = s

    def kernel(sigma):
        k = np.exp(-0.5 * (np.arange(-r, r + 1) / sigma) ** 2)
        k /= k.sum()
        return np.einsum("i,j,k->ijk", k, k, k)

    exact = kernel(s)
    image = np.sign((1 - worst) * kernel(s0) + worst * kernel(s1) - exact)
    out = gaussian_blur(image, smap, tolerance=1e-3, mode="nearest", backend=backend,
                        precision="float64")  # fmt: skip
    error = abs(out[r, r, r] - (exact * image).sum()) / 2  # (the range is 2)
    assert 0.8e-3 < error <= 1e-3  # (0.88e-3: its maximum is 0.91 of the budget)
