"""The generic N-D Numba gather (more than 3 blurred axes) meets the contract.

Sigma maps with 4 and 5 blurred axes, varying along every axis, in every edge mode
(constant with a finite and a NaN ``cval`` too), isotropic and per-axis, on axis subsets
with batch axes, with NaN and inf in the image (``"propagate"`` and ``"omit"``) and with
a mask: ``backend="numba"`` against ``backend="reference"`` within the contract's
tolerances (NaN and inf exactly where the reference has them), and against a plain
float64 brute-force sum written here from the contract.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from napari_varblur import gaussian_blur

SHAPE_4D = (5, 6, 4, 7)
SHAPE_5D = (3, 4, 3, 4, 3)
NAN = float("nan")
INF = float("inf")

#: (mode, cval): every mode, and constant with a finite and a NaN fill.
MODES = [
    pytest.param("crop", 0.0, id="crop"),
    pytest.param("reflect", 0.0, id="reflect"),
    pytest.param("mirror", 0.0, id="mirror"),
    pytest.param("nearest", 0.0, id="nearest"),
    pytest.param("wrap", 0.0, id="wrap"),
    pytest.param("constant", 2.5, id="constant"),
    pytest.param("constant", NAN, id="constant-nan"),
]

#: The gather: a map with more than 64 distinct values on an axis is not quantised
#: (docs/contract.md, "Quantised maps"), so with ``tolerance=None`` both backends sum
#: every pixel's window.
MIN_DISTINCT = 65


def make_image(rng, shape) -> np.ndarray:
    """float64 values that float32 holds exactly: the float32 run blurs the very same
    image, so one float64 reference serves both precisions."""
    return rng.uniform(-40, 40, shape).astype(np.float32).astype(np.float64)


def make_map(rng, shape, naxes: int | None = None, floor: float = 0.0, top: float = 1.6):
    """A sigma map varying along every axis: sigmas in [floor, top] and ~15% exact zeros;
    per axis (a trailing axis of ``naxes``) when ``naxes`` is given.

    ``floor`` > 0 keeps away from sigmas whose off-centre weights underflow: the
    contract leaves ``0 * inf`` (NaN or inf) to each backend, and a masked pixel whose
    valid share is that small is NaN (test_underflow_rule.py), so images with inf, NaN
    fills and masks use ``floor=0.2`` (every weight >= exp(-18) per axis:
    ceil(3 s) / s <= 6 for s >= 0.2)."""
    full = shape if naxes is None else shape + (naxes,)
    sigma = rng.uniform(floor, top, full)
    sigma[rng.random(full) < 0.15] = 0.0
    per_axis = sigma.reshape(-1, 1) if naxes is None else sigma.reshape(-1, naxes)
    assert min(len(np.unique(column)) for column in per_axis.T) >= MIN_DISTINCT
    return sigma


def bound(precision: str, image: np.ndarray, cval: float = 0.0) -> float:
    """The contract's tolerance against the float64 reference (docs/contract.md,
    "Tolerances"): 1e-12 (float64) or 1e-5 (float32) times M = max(1, max|value|)
    over the finite values the blur reads (the image, and ``cval``).

    For float32 that is 84 to 168 ulp of the largest value: the kernel reads the image in
    float32 (exact here, see :func:`make_image`) and rounds the output once (1/2 ulp);
    what is left covers the weights' and sums' rounding over up to 11^4 taps, which
    the contract bounds for every backend, not a margin fitted to one run."""
    values = np.append(np.abs(image[np.isfinite(image)]), abs(cval) if math.isfinite(cval) else 0)
    scale = max(1.0, float(values.max()))
    return (1e-12 if precision == "float64" else 1e-5) * scale


def assert_matches(actual, expected, precision, image, cval=0.0):
    assert actual.shape == expected.shape
    assert actual.dtype == np.dtype(precision)
    # equal_nan: NaN exactly where expected has NaN; inf must match exactly too.
    np.testing.assert_allclose(
        actual.astype(np.float64),
        expected,
        rtol=0,
        atol=bound(precision, image, cval),
        equal_nan=True,
    )


def check_numba(image, sigma, precisions=("float64", "float32"), **kwargs):
    """Numba in each precision against one float64 reference; returns the reference."""
    expected = gaussian_blur(image, sigma, backend="reference", precision="float64", **kwargs)
    for precision in precisions:
        actual = gaussian_blur(
            image.astype(precision), sigma, backend="numba", precision=precision, **kwargs
        )
        assert_matches(actual, expected, precision, image, kwargs.get("cval", 0.0))
    return expected


@pytest.fixture
def rng():
    return np.random.default_rng(20240611)


# ------------------------------------------------------------------- against reference


@pytest.mark.parametrize("per_axis", [False, True], ids=["isotropic", "per-axis"])
@pytest.mark.parametrize(("mode", "cval"), MODES)
def test_4d_every_mode(rng, mode, cval, per_axis):
    image = make_image(rng, SHAPE_4D)
    floor = 0.0 if math.isfinite(cval) else 0.2
    sigma = make_map(rng, SHAPE_4D, 4 if per_axis else None, floor=floor)
    expected = check_numba(image, sigma, mode=mode, cval=cval)
    if mode == "constant" and math.isnan(cval):  # the fill reached the border pixels
        assert np.isnan(expected).any() and not np.isnan(expected).all()


@pytest.mark.parametrize("per_axis", [False, True], ids=["isotropic", "per-axis"])
@pytest.mark.parametrize(("mode", "cval"), MODES)
def test_5d_every_mode(rng, mode, cval, per_axis):
    image = make_image(rng, SHAPE_5D)
    # Sigmas up to 1.0 (radius 3, as long as the shortest axes: every mode overhangs
    # them) keep the reference's 7^5 offsets quick.
    floor = 0.0 if math.isfinite(cval) else 0.2
    sigma = make_map(rng, SHAPE_5D, 5 if per_axis else None, floor=floor, top=1.0)
    check_numba(image, sigma, mode=mode, cval=cval)


def test_float32_map(rng):
    """A float32 map is read as it is (radii from its exact float64 value)."""
    image = make_image(rng, SHAPE_4D)
    sigma = make_map(rng, SHAPE_4D).astype(np.float32)
    check_numba(image, sigma, mode="reflect")


AXES_CASES = [
    # 4 of 5 axes, the batch axis in the middle.
    pytest.param((0, 1, 3, 4), False, "reflect", id="batch-middle-isotropic"),
    pytest.param((0, 1, 3, 4), True, "constant", id="batch-middle-per-axis"),
    # Unsorted and negative axes: the per-axis map's trailing axis follows this order.
    pytest.param((3, 0, -1, 1), True, "wrap", id="unsorted-per-axis"),
    pytest.param((-5, -4, -2, -1), False, "crop", id="negative-isotropic"),
    # One mode per blurred axis: crop renormalises on its axis only.
    pytest.param((0, 1, 3, 4), True, ("wrap", "crop", "constant", "mirror"), id="mixed-modes"),
    pytest.param(
        (0, 1, 3, 4), False, ("nearest", "reflect", "crop", "constant"), id="mixed-modes-isotropic"
    ),
]


@pytest.mark.parametrize(("axes", "per_axis", "mode"), AXES_CASES)
def test_axes_subsets(rng, axes, per_axis, mode):
    image = make_image(rng, SHAPE_5D)
    sigma = make_map(rng, SHAPE_5D, len(axes) if per_axis else None)
    check_numba(image, sigma, axes=axes, mode=mode, cval=-3.0)


def test_channel_axis_map_without_it(rng):
    """``channel_axis`` in the middle: the 4 other axes are blurred, and a map that
    omits the channel axis applies to every channel."""
    image = make_image(rng, SHAPE_5D)
    spatial = SHAPE_5D[:2] + SHAPE_5D[3:]
    sigma = make_map(rng, spatial)
    expected = check_numba(image, sigma, channel_axis=2, mode="mirror")
    together = check_numba(image, sigma[:, :, None], axes=(0, 1, 3, 4), mode="mirror")
    np.testing.assert_array_equal(expected, together)


def test_map_and_mask_constant_along_the_batch_axis(rng):
    """A map and a mask of length 1 on the batch axis (the validity may be blurred once
    for every batch index)."""
    image = make_image(rng, SHAPE_5D)
    shape = SHAPE_5D[:2] + (1,) + SHAPE_5D[3:]
    sigma = make_map(rng, shape, floor=0.2)
    mask = rng.random(shape) > 0.2
    check_numba(image, sigma, axes=(0, 1, 3, 4), mask=mask, mode="reflect")
    check_numba(image, sigma, axes=(0, 1, 3, 4), mask=mask, mode="crop")


# ------------------------------------------------------------------- NaN, inf and masks


def with_nonfinite(image: np.ndarray) -> np.ndarray:
    """NaN and inf at a corner, an edge and inside (+inf and -inf close enough for some
    windows to hold both: NaN there)."""
    out = image.copy()
    last = tuple(n - 1 for n in image.shape)
    out[(0,) * image.ndim] = NAN
    out[last] = INF
    out[tuple(n // 2 for n in image.shape)] = NAN
    out[(1,) + last[1:-1] + (0,)] = -INF
    out[(image.shape[0] // 2 + 1,) + (1,) * (image.ndim - 1)] = INF
    return out


NONFINITE_MODES = [
    pytest.param("crop", 0.0, id="crop"),
    pytest.param("reflect", 0.0, id="reflect"),
    pytest.param("wrap", 0.0, id="wrap"),
    pytest.param("nearest", 0.0, id="nearest"),
    pytest.param("constant", 2.5, id="constant"),
    pytest.param("constant", NAN, id="constant-nan"),
    pytest.param("constant", -INF, id="constant-minus-inf"),
]


@pytest.mark.parametrize("nan_policy", ["propagate", "omit"])
@pytest.mark.parametrize(("mode", "cval"), NONFINITE_MODES)
def test_nan_and_inf_in_the_image(rng, mode, cval, nan_policy):
    image = with_nonfinite(make_image(rng, SHAPE_4D))
    sigma = make_map(rng, SHAPE_4D, 4, floor=0.2)
    expected = check_numba(image, sigma, mode=mode, cval=cval, nan_policy=nan_policy)
    if nan_policy == "propagate":  # NaN spread over windows, not everywhere
        assert np.isnan(expected).sum() > 4 and not np.isnan(expected).all()
    else:  # inf is left out like NaN (a non-finite cval too)
        assert not np.isinf(expected).any()


def test_nan_and_inf_with_batch_axes(rng):
    image = with_nonfinite(make_image(rng, SHAPE_5D))
    sigma = make_map(rng, SHAPE_5D, floor=0.2)
    for nan_policy in ("propagate", "omit"):
        check_numba(image, sigma, axes=(0, 1, 3, 4), mode="mirror", nan_policy=nan_policy)


@pytest.mark.parametrize("nan_policy", ["propagate", "omit"])
@pytest.mark.parametrize(("mode", "cval"), NONFINITE_MODES[:2] + NONFINITE_MODES[4:6])
def test_mask(rng, mode, cval, nan_policy):
    image = with_nonfinite(make_image(rng, SHAPE_4D))
    sigma = make_map(rng, SHAPE_4D, floor=0.2)
    mask = rng.random(SHAPE_4D) > 0.2
    mask[(0,) * 4] = False  # a NaN nobody reads
    mask[tuple(n // 2 for n in SHAPE_4D)] = True  # a NaN that "propagate" spreads
    sigma[1, 1, 1, 1], mask[1, 1, 1, 1] = 0.0, False  # no valid tap: NaN
    expected = check_numba(image, sigma, mode=mode, cval=cval, mask=mask, nan_policy=nan_policy)
    assert np.isnan(expected[1, 1, 1, 1])


# ------------------------------------------------------------------- brute force

_NUMPY_PAD = {"reflect": "symmetric", "mirror": "reflect", "nearest": "edge", "wrap": "wrap"}


def brute_force(image, sigma, mode, cval=0.0, truncate=3.0, axes=None) -> np.ndarray:
    """The contract pixel by pixel, in float64: on each blurred axis the window is
    ``|d| <= ceil(truncate * s)`` with weights ``exp(-d^2 / (2 s^2))`` (only ``d = 0``
    where ``s = 0``), the weight a product over axes.  Crop drops out-of-bounds taps
    and divides by the rest's weight; other modes read the image extended by
    ``numpy.pad`` and divide by the full window's weight."""
    x = np.asarray(image, dtype=np.float64)
    axes = tuple(range(x.ndim)) if axes is None else tuple(a % x.ndim for a in axes)
    s = np.asarray(sigma, dtype=np.float64)
    sig = np.broadcast_to(s if s.ndim == x.ndim + 1 else s[..., None], x.shape + (len(axes),))
    reach = math.ceil(truncate * float(sig.max()))
    widths = [(reach, reach) if a in axes else (0, 0) for a in range(x.ndim)]
    if mode in ("crop", "constant"):  # crop never reads the padding
        padded = np.pad(x, widths, mode="constant", constant_values=cval)
    else:
        padded = np.pad(x, widths, mode=_NUMPY_PAD[mode])
    out = np.empty(x.shape)
    for p in np.ndindex(x.shape):
        index, weight = [], np.ones(())
        for a in range(x.ndim):
            if a not in axes:
                index.append(np.array([p[a]]))
                weight = np.multiply.outer(weight, np.ones(1))
                continue
            s_a = float(sig[p][axes.index(a)])
            r = math.ceil(truncate * s_a) if s_a > 0 else 0
            d = np.arange(-r, r + 1)
            w = np.exp(-(d * d) / (2 * s_a * s_a)) if s_a > 0 else np.ones(1)
            if mode == "crop":
                inside = (p[a] + d >= 0) & (p[a] + d < x.shape[a])
                d, w = d[inside], w[inside]
            index.append(p[a] + reach + d)
            weight = np.multiply.outer(weight, w)
        out[p] = np.sum(weight * padded[np.ix_(*index)]) / np.sum(weight)
    return out


@pytest.mark.parametrize("per_axis", [False, True], ids=["isotropic", "per-axis"])
@pytest.mark.parametrize(("mode", "cval"), MODES)
def test_4d_against_brute_force(rng, mode, cval, per_axis):
    image = make_image(rng, SHAPE_4D)
    floor = 0.0 if math.isfinite(cval) else 0.2
    sigma = make_map(rng, SHAPE_4D, 4 if per_axis else None, floor=floor)
    expected = brute_force(image, sigma, mode, cval)
    actual = gaussian_blur(image, sigma, mode=mode, cval=cval, backend="numba", precision="float64")
    assert_matches(actual, expected, "float64", image, cval)


def test_5d_axes_subset_against_brute_force(rng):
    image = make_image(rng, SHAPE_5D)
    axes = (0, 1, 3, 4)
    sigma = make_map(rng, SHAPE_5D, len(axes))
    for mode in ("crop", "reflect", "constant"):
        expected = brute_force(image, sigma, mode, cval=7.0, axes=axes)
        actual = gaussian_blur(
            image, sigma, mode=mode, cval=7.0, axes=axes, backend="numba", precision="float64"
        )
        assert_matches(actual, expected, "float64", image, 7.0)
