"""Masked and NaN-aware blur (normalised convolution) against independent oracles:
the brute-force float64 sum of ``bruteforce.py`` and astropy's ``convolve``."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

from bruteforce import normalised_blur
from conftest import ALL_BACKENDS, ALL_MODES, assert_close
from napari_varblur import gaussian_blur
from napari_varblur.backends import load
from napari_varblur.core.level_plan import plan_levels
from napari_varblur.core.spec import BlurSpec
from napari_varblur.engine import cost, masked, planner, walk


def dead_and_region(shape, rng, nan=True):
    """A random image with dead (NaN, inf) pixels and a mask with a masked block."""
    image = rng.normal(size=shape)
    mask = rng.random(shape) > 0.15
    mask[(slice(1, 4),) * len(shape)] = False
    if nan:
        image[tuple(rng.integers(0, n, 4) for n in shape)] = np.nan
        image[tuple(rng.integers(0, n, 2) for n in shape)] = np.inf
    return image, mask


def random_map(shape, rng):
    """Sigmas in [0.1, 2.5] and some exact zeros.  (Below ~0.12 a masked pixel reached
    only diagonally has a valid share under the contract's float32 floor, so it is NaN;
    the oracle here has no floor and these seeds hold no such pixel:
    test_underflow_rule.py checks that rule.)"""
    sigma = rng.uniform(0.1, 2.5, shape)
    sigma[rng.random(shape) < 0.1] = 0.0
    return sigma


def check(out, expected, precision, image):
    assert_close(out, expected, precision, np.where(np.isfinite(image), image, 0))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("policy", ["propagate", "omit"])
def test_global_sigma_matches_the_brute_force_oracle(rng, backend, mode, policy):
    image, mask = dead_and_region((11, 13), rng)
    kw = dict(mode=mode, cval=0.7, truncate=2.5)
    expected = normalised_blur(image, (1.3, 2.1), mask=mask, omit=policy == "omit", **kw)
    for precision in ("float64", "float32"):
        out = gaussian_blur(image, (1.3, 2.1), mask=mask, nan_policy=policy, backend=backend,
                            precision=precision, **kw)  # fmt: skip
        check(out, expected, precision, image)


# JAX compiles a program per mode and map kind: three modes (no-extension, fill and
# index-mapping) cover its paths; the others run every mode.
MAP_CASES = [(b, m) for b in ALL_BACKENDS for m in ALL_MODES
             if b != "jax" or m in ("crop", "constant", "wrap")]  # fmt: skip


@pytest.mark.parametrize(("backend", "mode"), MAP_CASES)
def test_sigma_maps_match_the_brute_force_oracle(rng, backend, mode):
    image, mask = dead_and_region((10, 12), rng)
    isotropic = random_map((10, 12), rng)
    per_axis = random_map((10, 12, 2), rng)
    for sigma in (isotropic, per_axis):
        expected = normalised_blur(image, sigma, mask=mask, omit=True, mode=mode, cval=-2.0)
        for precision in ("float64", "float32"):
            out = gaussian_blur(image, sigma, mask=mask, nan_policy="omit", mode=mode,
                                cval=-2.0, backend=backend, precision=precision)  # fmt: skip
            check(out, expected, precision, image)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_3d_batch_axes_and_a_broadcast_mask(rng, backend):
    """A (6, 7) mask over a (3, 6, 7) series blurred along its last two axes, with a map
    that is constant over time: the denominator is shared by the frames."""
    image = rng.normal(size=(3, 6, 7))
    image[1, 2, 3] = np.nan
    mask = rng.random((6, 7)) > 0.3
    sigma = rng.uniform(0.5, 2.0, (1, 6, 7))
    for s in (1.5, sigma):
        expected = normalised_blur(image, s, mask=mask, omit=True, axes=(1, 2), mode="nearest")
        out = gaussian_blur(image, s, mask=mask, nan_policy="omit", axes=(1, 2), mode="nearest",
                            backend=backend, precision="float64")  # fmt: skip
        check(out, expected, "float64", image)
    volume, vmask = dead_and_region((6, 5, 7), rng)
    for mode in ("mirror", "constant"):
        expected = normalised_blur(volume, 1.2, mask=vmask, omit=True, mode=mode, cval=2.0)
        out = gaussian_blur(volume, 1.2, mask=vmask, nan_policy="omit", mode=mode, cval=2.0,
                            backend=backend, precision="float64")  # fmt: skip
        check(out, expected, "float64", volume)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_a_static_mask_over_a_series_shares_its_denominator(rng, backend):
    """Finite frames, a (6, 7) mask and a map constant over time: the valid weights are
    blurred once for all frames (and must still be the right ones for each)."""
    image = rng.normal(size=(4, 6, 7))
    mask = rng.random((6, 7)) > 0.4
    for s in (1.3, rng.uniform(0.5, 2.0, (1, 6, 7)), rng.uniform(0.5, 2.0, (4, 6, 7))):
        for mode in ("crop", "constant"):
            expected = normalised_blur(image, s, mask=mask, axes=(1, 2), mode=mode, cval=3.0)
            out = gaussian_blur(image, s, mask=mask, axes=(1, 2), mode=mode, cval=3.0,
                                backend=backend, precision="float64")  # fmt: skip
            check(out, expected, "float64", image)


def test_crop_and_omit_equal_astropy_interpolate(rng):
    """astropy's NaN interpolation with the same explicit kernel is crop + omit."""
    from astropy import convolution  # a test dependency: this oracle is never skipped

    image = rng.normal(size=(40, 50))
    image[rng.integers(0, 40, 60), rng.integers(0, 50, 60)] = np.nan
    image[10:16, 20:30] = np.nan
    sigma, radius = 2.0, 6
    d = np.arange(-radius, radius + 1)
    taps = np.exp(-0.5 * (d / sigma) ** 2)
    expected = convolution.convolve(image, np.outer(taps, taps), boundary="fill",
                                     fill_value=np.nan, nan_treatment="interpolate",
                                     normalize_kernel=True, preserve_nan=False)  # fmt: skip
    for backend in ALL_BACKENDS:
        out = gaussian_blur(image, sigma, nan_policy="omit", backend=backend, precision="float64")
        np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)
        via_mask = gaussian_blur(np.nan_to_num(image), sigma, mask=np.isfinite(image),
                                 backend=backend, precision="float64")  # fmt: skip
        np.testing.assert_allclose(via_mask, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_windows_without_a_valid_tap_are_nan(rng, backend):
    image = rng.normal(size=(20, 20))
    mask = np.ones((20, 20), bool)
    mask[4:15, 4:15] = False
    out = gaussian_blur(image, 1.0, mask=mask, backend=backend, precision="float64")
    expected = normalised_blur(image, 1.0, mask=mask)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))
    assert np.isnan(out[9, 9]) and np.isfinite(out[4, 4])
    check(out, expected, "float64", image)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_holes_that_carry_almost_all_the_weight(rng, backend):
    """Dead columns under small sigmas (the neighbours' weights are 1e-27 of the
    centre's), a long truncate, and a stripe wider than every window: the valid
    weight is summed, never left over from subtracting the holes (that cancels to
    garbage, inf, a flipped sign, or 0 where the answer is NaN)."""
    x = rng.uniform(1, 2, (6, 400))  # wide, and edge modes: few holes, listed per row
    mask = np.ones(x.shape, bool)
    mask[:, 50] = mask[:, 80:82] = False
    cases = [(rng.uniform(s, 1.01 * s, x.shape), 3.0, "reflect") for s in (0.09, 0.12, 0.2)]
    cases.append((rng.uniform(0.9, 1.1, x.shape), 8.0, "nearest"))
    stripe = np.ones(x.shape, bool)
    stripe[:, 10:29] = False
    for sigma, truncate, mode in cases:
        for m in (mask, stripe):
            expected = normalised_blur(x, sigma, mask=m, truncate=truncate, mode=mode)
            for precision in ("float64", "float32"):
                out = gaussian_blur(x, sigma, mask=m, truncate=truncate, mode=mode,
                                    backend=backend, precision=precision)  # fmt: skip
                check(out, expected, precision, x)
    # Crop: out-of-bounds taps are holes too (listed when the image is large enough).
    tall = rng.uniform(1, 2, (40, 300))
    sigma = rng.uniform(0.09, 0.25, tall.shape)
    m = np.ones(tall.shape, bool)
    m[:, 0] = m[:, 150] = m[20, :] = False
    expected = normalised_blur(tall, sigma, mask=m)
    check(gaussian_blur(tall, sigma, mask=m, backend=backend, precision="float64"), expected,
          "float64", tall)  # fmt: skip


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_a_global_sigma_over_few_listed_holes(rng, backend):
    """Numba's fused masked sweep lists a row's holes when they are few (at most one
    column in 16) and subtracts their weights, two output rows at a time: dead columns
    under small sigmas (their column's valid weight is 0, exactly, not what is left of
    subtracting), a row with too many holes to list, rows whose windows differ in that,
    and a width that is not a multiple of the eight flags read at once.  With "omit"
    the sweep tests finiteness itself: the holes are NaN (with no mask, they are its
    only invalid pixels) and an inf sits where the mask is True."""
    x = rng.uniform(1, 2, (13, 403))  # (an odd count: the last sweep has one row)
    mask = np.ones(x.shape, bool)
    mask[:, 50] = mask[:, 80:82] = mask[:, 401] = False
    mask[5, 100:380:2] = False  # too many to list: its windows sum the flags tap by tap
    mask[9, 200] = False
    x[~mask] = np.nan  # an unlisted hole would spread its NaN
    x[3, 300] = np.inf
    cases = [(0.09, 3.0, "reflect"), (0.2, 3.0, "nearest"), ((1.0, 0.12), 8.0, "mirror"),
             (1.3, 4.0, "constant")]  # fmt: skip
    for (sigma, truncate, mode), m in itertools.product(cases, (mask, None)):
        expected = normalised_blur(x, sigma, mask=m, omit=True, truncate=truncate, mode=mode)
        for precision in ("float64", "float32"):
            out = gaussian_blur(x, sigma, mask=m, nan_policy="omit", truncate=truncate,
                                mode=mode, backend=backend, precision=precision)  # fmt: skip
            check(out, expected, precision, x)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_omit_judges_the_values_as_given(rng, backend):
    """With "omit" the caller's values are tested, before any conversion to the precision: a
    float64 value beyond float32's range counts (its inf spreads, as in the exact
    contract), and finite data whose sum overflows are the plain blur, bit for bit."""
    x = rng.uniform(1, 2, (20, 40))
    x[5, 5] = np.nan
    x[10, 20] = 1e39  # finite in float64, inf in float32
    expected = gaussian_blur(x, 1.5, nan_policy="omit", precision="float32",
                             backend="reference")  # fmt: skip
    out = gaussian_blur(x, 1.5, nan_policy="omit", precision="float32", backend=backend)
    np.testing.assert_array_equal(np.isinf(out), np.isinf(expected))
    assert np.isinf(out[10, 18:23]).all() and np.isfinite(out[5, 5])
    huge = rng.uniform(0.5, 1, (16, 33)) * 4e307  # every value finite, their sum is not
    for mode in ("constant", "reflect"):
        plain = gaussian_blur(huge, 1.2, mode=mode, precision="float64", backend=backend)
        omitted = gaussian_blur(huge, 1.2, mode=mode, nan_policy="omit", precision="float64",
                                backend=backend)  # fmt: skip
        np.testing.assert_array_equal(omitted, plain)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_finite_check_finds_one_value_anywhere(rng, dtype):
    """Numba's ``all_finite`` (the "omit" shortcut to the plain blur) against NumPy:
    one NaN, inf or -inf at any place (the first and last value, chunk borders, a place
    the engine's sample skips), never the largest finite value, a subnormal or -0; an
    image it does not take (not C-contiguous, byte-swapped, float16) is left to NumPy."""
    check = load("numba").all_finite
    image = rng.uniform(-1, 1, 3 * (1 << 16) + 7).astype(dtype)
    image[:3] = np.finfo(dtype).max, np.finfo(dtype).smallest_subnormal, -0.0
    assert check(image) is True and masked._all_finite(image, check)
    for at in (0, 1, (1 << 16) - 1, 1 << 16, 2 * (1 << 16) + 5, image.size - 1):
        for bad in (np.nan, np.inf, -np.inf):
            x = image.copy()
            x[at] = bad
            assert check(x) is False and check(x.reshape(1, -1)) is False
            assert not masked._all_finite(x.reshape(5, -1).T, check)  # NumPy's scan
            assert not masked._all_finite(x, check)
    x = image.reshape(5, -1)
    x.flags.writeable = False
    assert check(x) is True and check(x[:, 1:]) is None
    assert check(image.astype(image.dtype.newbyteorder())) is None
    assert check(image[3:].astype(np.float16)) is None


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_float32_keeps_the_contract_where_few_valid_taps_remain(rng, backend):
    """A masked pixel reached only by the tails of its kernel: the ratio of two float32
    sums of positive terms stays within the float32 contract."""
    image = rng.uniform(-100, 100, (24, 24))
    mask = np.zeros((24, 24), bool)
    mask[:, :3] = True
    for sigma in (2.0, rng.uniform(1.5, 2.5, (24, 24))):
        expected = normalised_blur(image, sigma, mask=mask)
        out = gaussian_blur(image, sigma, mask=mask, backend=backend)
        check(out, expected, "float32", image)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_constant_mode_cval_taps_are_valid_unless_omitted(rng, backend):
    image = rng.normal(size=(8, 9))
    mask = rng.random((8, 9)) > 0.3
    for cval, policy in ((2.5, "omit"), (np.nan, "omit"), (np.inf, "omit"), (np.nan, "propagate")):
        omit = policy == "omit"
        expected = normalised_blur(image, 1.4, mask=mask, omit=omit, mode="constant", cval=cval)
        out = gaussian_blur(image, 1.4, mask=mask, nan_policy=policy, mode="constant",
                            cval=cval, backend=backend, precision="float64")  # fmt: skip
        check(out, expected, "float64", image)
    # A non-finite cval left out is crop with the same mask.
    out = gaussian_blur(image, 1.4, mask=mask, nan_policy="omit", mode="constant", cval=np.nan)
    np.testing.assert_allclose(out, gaussian_blur(image, 1.4, mask=mask), atol=1e-6)


def test_no_mask_and_propagate_is_the_plain_blur_bit_for_bit(rng):
    image = rng.normal(size=(30, 31)).astype(np.float32)
    sigma = rng.uniform(0, 3, (30, 31))
    for s in (2.0, sigma):
        plain = gaussian_blur(image, s)
        np.testing.assert_array_equal(gaussian_blur(image, s, nan_policy="omit"), plain)
        np.testing.assert_array_equal(gaussian_blur(image, s, nan_policy="raise"), plain)
        np.testing.assert_array_equal(gaussian_blur(image, s, mask=np.ones(31, bool)), plain)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_propagate_with_a_mask_spreads_valid_nan_only(rng, backend):
    image = rng.normal(size=(15, 15))
    image[3, 3] = np.nan  # valid: spreads over its windows
    image[11, 11] = np.inf  # masked: left out
    mask = np.ones((15, 15), bool)
    mask[11, 11] = False
    mask[6:9, 0:4] = False
    out = gaussian_blur(image, 1.0, mask=mask, backend=backend, precision="float64")
    expected = normalised_blur(image, 1.0, mask=mask)
    check(out, expected, "float64", image)
    assert np.isnan(out[3, 5]) and np.isfinite(out[11, 11])


def assert_masked_bound(out, exact, share, image, mask, t):
    """Within 2 t (max - min) / share of the exact result, NaN exactly where it is."""
    finite = np.where(mask & np.isfinite(image), image, np.nan)
    spread = np.nanmax(finite) - np.nanmin(finite)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(exact))
    ok = np.isfinite(exact)
    error = np.abs(out - exact)[ok]
    assert np.all(error <= 2 * t * spread / share[ok]), error.max()


@pytest.mark.parametrize("shared", [True, False])
def test_tolerance_levels_keep_the_masked_bound(rng, shared):
    """Levels mix the same realised kernel into both sums, so the ratio is within
    2 t (max - min) / share of the exact one (share: the pixel's valid kernel weight).
    The level walk is forced here (small tiles), on every backend that has it."""
    y, x = np.mgrid[0:40, 0:44]
    smooth = 0.5 + 3.0 * x / 43 + 0.5 * np.sin(y / 9)
    sigma = smooth if shared else np.stack([smooth, smooth[::-1]], axis=-1)
    image, mask = dead_and_region((40, 44), rng)
    image[rng.random((40, 44)) > 0.9] = 3.0  # deltas on a random background
    t = 1e-2
    exact = normalised_blur(image, sigma, mask=mask, omit=True)
    share = normalised_blur(mask.astype(float), sigma)  # the valid kernel weight
    for backend in ("numba", "jax"):
        spec = BlurSpec.from_args(image, sigma, mask=mask, nan_policy="omit", tolerance=t,
                                  backend=backend, precision="float64")  # fmt: skip
        plan = cost.Plan(plan_levels(spec), (7, 7))
        plain = replace(spec, mask=None, nan_policy="propagate")

        def run(values, cval, plan=plan, backend=backend, plain=plain):
            return walk.blur(replace(plain, image=values, cval=cval), plan, load(backend))

        out = masked.normalized_convolution(spec.image, spec.mask, spec.cval, True, run,
                                            dtype=np.dtype(spec.precision))  # fmt: skip
        assert_masked_bound(out, exact, share, image, mask, t)


def test_tolerance_chooses_levels_for_a_big_smooth_masked_map(rng):
    """Through the public call: a smooth map on 512^2 takes the level walk (twice:
    values and validity, one plan) and keeps the bound."""
    n = 512
    sigma = np.broadcast_to(1.0 + 7.0 * np.arange(n) / (n - 1), (n, n))
    image, mask = dead_and_region((n, n), rng)
    mask[200:260, 300:330] = False
    t = 1e-2
    spec = BlurSpec.from_args(image, sigma, mask=mask, nan_policy="omit", tolerance=t)
    assert planner.route(spec).kind == "levels"
    out = gaussian_blur(image, sigma, mask=mask, nan_policy="omit", tolerance=t,
                        precision="float64")  # fmt: skip
    exact = gaussian_blur(image, sigma, mask=mask, nan_policy="omit", precision="float64")
    share = gaussian_blur(mask.astype(float), sigma, precision="float64")
    assert_masked_bound(out, exact, share, image, mask, t)


def test_inputs_and_masks_are_never_modified(rng):
    image, mask = dead_and_region((12, 12), rng)
    numeric = mask.astype(np.uint8)
    sigma = rng.uniform(0, 2, (12, 12))
    before = (image.copy(), mask.copy(), numeric.copy(), sigma.copy())
    for m in (mask, numeric):
        for s in (1.0, sigma):
            gaussian_blur(image, s, mask=m, nan_policy="omit")
    for a, b in zip((image, mask, numeric, sigma), before):
        np.testing.assert_array_equal(a, b)


def test_numeric_masks_mean_the_same_as_boolean(rng):
    image, mask = dead_and_region((9, 9), rng, nan=False)
    expected = gaussian_blur(image, 1.0, mask=mask)
    for dtype in (np.uint8, np.int64, np.float32):
        np.testing.assert_array_equal(gaussian_blur(image, 1.0, mask=mask.astype(dtype)), expected)


@pytest.mark.parametrize(
    ("mask", "error", "words"),
    [
        (np.ones((3, 9), bool), ValueError, ["mask", "(3, 9)", "(9, 9)"]),
        (np.ones((2, 9, 9), bool), ValueError, ["mask", "(2, 9, 9)", "(9, 9)"]),
        (np.full((9, 9), "a"), TypeError, ["mask", "<U1"]),
        (np.ones((9, 9), object), TypeError, ["mask", "object"]),
        (np.ones((9, 9), complex), TypeError, ["mask", "complex"]),
        (np.full((9, 9), 2), ValueError, ["mask", "0 and 1", "81 values", "(0, 0)"]),
        (np.full((9, 9), np.nan), ValueError, ["mask", "0 and 1", "nan"]),
    ],
)
def test_bad_masks_are_refused_naming_mask(mask, error, words):
    with pytest.raises(error) as info:
        gaussian_blur(np.zeros((9, 9)), 1.0, mask=mask)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("policy", ["ignore", "Omit", None, 1])
def test_unknown_nan_policy_lists_the_valid_ones(policy):
    with pytest.raises(ValueError, match=r"nan_policy.*'propagate', 'omit', 'raise'"):
        gaussian_blur(np.zeros((4, 4)), 1.0, nan_policy=policy)


def test_raise_names_the_count_and_the_first_index():
    image = np.zeros((6, 6))
    image[2, 4] = np.nan
    image[5, 1] = -np.inf
    with pytest.raises(ValueError, match=r"image: .*2 values \(first at index \(2, 4\)\)"):
        gaussian_blur(image, 1.0, nan_policy="raise")
    mask = np.ones((6, 6), bool)
    mask[2, 4] = False  # a masked NaN is never read
    with pytest.raises(ValueError, match=r"1 value \(first at index \(5, 1\)\)"):
        gaussian_blur(image, 1.0, nan_policy="raise", mask=mask)
    mask[5, 1] = False
    gaussian_blur(image, 1.0, nan_policy="raise", mask=mask)
    with pytest.raises(ValueError, match="cval"):
        gaussian_blur(np.zeros((6, 6)), 1.0, mode="constant", cval=np.nan, nan_policy="raise")
    gaussian_blur(np.zeros((6, 6)), 1.0, mode="reflect", cval=np.nan, nan_policy="raise")
    # A constant axis that is not blurred reads no cval.
    gaussian_blur(np.zeros((6, 6)), (0, 1), mode=("constant", "crop"), cval=np.nan,
                  nan_policy="raise")  # fmt: skip


# ------------------------------------------------------------------- JAX-native


def test_jax_native_matches_the_oracle_concrete_and_traced(rng):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from napari_varblur.jax import gaussian_blur as jax_blur

    image, mask = dead_and_region((12, 13), rng)
    sigma = random_map((12, 13), rng)
    x = jnp.asarray(image, jnp.float32)
    for s, kw in ((1.4, {}), (sigma, {}), (sigma, {"tolerance": 1e-3})):
        for mode in ("crop", "constant"):
            expected = normalised_blur(image, s, mask=mask, omit=True, mode=mode, cval=0.5)
            call = dict(mask=mask, nan_policy="omit", mode=mode, cval=0.5, max_radius=8, **kw)
            outs = [jax_blur(x, s, **call)]
            if mode == "crop" and np.ndim(s):  # traced: one compile per kind of map
                traced = jax.jit(lambda x_, s_, call=call: jax_blur(x_, s_, **call))
                outs.append(traced(x, jnp.asarray(s, jnp.float32)))
            for out in outs:
                out = np.asarray(out)
                if "tolerance" in kw:  # levels: within the bound, NaN where exact has it
                    np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))
                    assert np.nanmax(np.abs(out - expected)) < 2e-2
                else:
                    check(out, expected, "float32", image)
    # A traced mask: any non-zero value is valid.
    traced_mask = jax.jit(lambda m: jax_blur(x, 1.4, mask=m, nan_policy="omit"))
    check(np.asarray(traced_mask(jnp.asarray(mask, jnp.float32))),
          normalised_blur(image, 1.4, mask=mask, omit=True), "float32", image)  # fmt: skip


def test_jax_native_gradients_with_a_constant_mask(rng):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax.test_util import check_grads

    from napari_varblur.jax import gaussian_blur as jax_blur

    image = rng.normal(size=(7, 8))
    mask = rng.random((7, 8)) > 0.3
    sigma = rng.uniform(0.6, 1.2, (7, 8))
    with jax.enable_x64(True):
        x, s = jnp.asarray(image), jnp.asarray(sigma)
        kw = dict(mask=mask, mode="reflect", max_radius=4)
        check_grads(lambda x_, s_: jax_blur(x_, s_, **kw), (x, s), order=1, modes=["rev"],
                    eps=1e-6)  # fmt: skip
        # A masked pixel's value (filled from its neighbours) depends on their sigma
        # and not on its own value.
        masked_at = tuple(int(i) for i in np.argwhere(~mask)[0])
        g = jax.grad(lambda x_: jax_blur(x_, s, **kw)[masked_at])(x)
        assert float(g[masked_at]) == 0.0 and float(jnp.abs(g).sum()) > 0.5, g
        # A loss that skips the pixels without a valid tap has a finite gradient.
        hole = np.ones((7, 8), bool)
        hole[1:6, 1:6] = False
        loss = lambda s_: jnp.nansum(jax_blur(x, s_, mask=hole, max_radius=2))  # noqa: E731
        assert bool(jnp.isfinite(jax.grad(loss)(s)).all())
        nan_image = x.at[masked_at].set(jnp.nan)
        g = jax.grad(lambda x_: jax_blur(x_, s, nan_policy="omit", max_radius=4).sum())(nan_image)
        assert bool(jnp.isfinite(g).all())


def test_jax_native_refuses_bad_masks_and_raise_under_jit(rng):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from napari_varblur.jax import gaussian_blur as jax_blur

    x = jnp.zeros((6, 6))
    with pytest.raises(ValueError, match=r"mask: shape \(5, 6\)"):
        jax_blur(x, 1.0, mask=np.ones((5, 6), bool))
    with pytest.raises(TypeError, match="mask"):
        jax_blur(x, 1.0, mask=np.ones((6, 6), complex))
    with pytest.raises(ValueError, match="nan_policy"):
        jax_blur(x, 1.0, nan_policy="drop")
    with pytest.raises(ValueError, match=r"image: .*1 value \(first at index \(2, 3\)\)"):
        jax_blur(x.at[2, 3].set(jnp.inf), 1.0, nan_policy="raise")
    with pytest.raises(ValueError, match="nan_policy: 'raise' needs a concrete image"):
        jax.jit(lambda x_: jax_blur(x_, 1.0, nan_policy="raise"))(x)


# ------------------------------------------------------------------- dask


@pytest.mark.parametrize("mode", ["crop", "wrap", "constant", "mirror"])
def test_dask_chunks_are_exact_with_numpy_or_dask_masks(rng, mode):
    da = pytest.importorskip("dask.array")
    image, mask = dead_and_region((23, 29), rng)
    sigma = random_map((23, 29), rng)
    lazy = da.from_array(image, chunks=(7, 11))
    row = mask[0]  # a mask that broadcasts along the first axis
    for s in (1.7, sigma, da.from_array(sigma, chunks=(7, 11))):
        for m, oracle_mask in ((mask, mask), (da.from_array(mask, chunks=(12, 8)), mask),
                               (row, row)):  # fmt: skip
            expected = normalised_blur(image, np.asarray(s), mask=oracle_mask, omit=True,
                                       mode=mode, cval=1.5)  # fmt: skip
            out = gaussian_blur(lazy, s, mask=m, nan_policy="omit", mode=mode, cval=1.5,
                                precision="float64")  # fmt: skip
            check(out.compute(), expected, "float64", image)


def test_dask_errors_come_at_call_time(rng):
    da = pytest.importorskip("dask.array")
    image = np.zeros((20, 20))
    image[3, 17] = np.nan
    lazy = da.from_array(image, chunks=10)
    with pytest.raises(ValueError, match=r"image: .*1 value \(first at index \(3, 17\)\)"):
        gaussian_blur(lazy, 1.0, nan_policy="raise")
    bad = da.from_array(np.full((20, 20), 3), chunks=10)
    with pytest.raises(ValueError, match="mask: a numeric mask must hold only 0 and 1"):
        gaussian_blur(lazy, 1.0, mask=bad)
    with pytest.raises(ValueError, match=r"mask: shape \(20, 3\)"):
        gaussian_blur(lazy, 1.0, mask=da.ones((20, 3), dtype=bool))
    # A masked NaN passes "raise" and the result is lazy.
    mask = np.ones((20, 20), bool)
    mask[3, 17] = False
    out = gaussian_blur(lazy, 1.0, mask=mask, nan_policy="raise")
    assert type(out).__module__.startswith("dask") and np.isfinite(out.compute()).all()
