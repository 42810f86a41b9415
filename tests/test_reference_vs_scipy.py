"""The reference backend against scipy.ndimage.gaussian_filter (the independent oracle)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.ndimage as ndi
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from conftest import SCIPY_MODES, assert_close
from napari_varblur import gaussian_blur


def scipy_blur(image, sigma, *, mode, cval=0.0, truncate=3.0, axes=None, radius=None):
    """scipy with the contract's radius ceil(truncate * sigma)."""
    sig = np.broadcast_to(np.asarray(sigma, float), (len(axes) if axes else image.ndim,))
    if radius is None:
        radius = [math.ceil(truncate * s) for s in sig]
    return ndi.gaussian_filter(
        np.asarray(image, np.float64), tuple(sig), mode=mode, cval=cval, radius=radius, axes=axes
    )


@pytest.mark.parametrize("mode", SCIPY_MODES)
@pytest.mark.parametrize("shape", [(31,), (17, 23), (9, 8, 11)])
@pytest.mark.parametrize("sigma", [0.6, 1.7, 4.0])
def test_global_sigma_every_mode_and_ndim(rng, mode, shape, sigma):
    image = rng.normal(size=shape) * 10
    out = gaussian_blur(image, sigma, mode=mode, cval=2.5, backend="reference", precision="float64")
    assert_close(out, scipy_blur(image, sigma, mode=mode, cval=2.5), "float64", image)


@pytest.mark.parametrize("mode", SCIPY_MODES)
def test_radius_much_larger_than_axis(rng, mode):
    image = rng.random((5, 7))
    for sigma in (3.0, 25.0, 400.0):
        out = gaussian_blur(
            image, sigma, mode=mode, cval=-1, backend="reference", precision="float64"
        )
        assert_close(out, scipy_blur(image, sigma, mode=mode, cval=-1), "float64", image)


def test_per_axis_sigma_modes_and_batch_axes(rng):
    image = rng.random((4, 13, 16))
    modes = ("wrap", "mirror")
    out = gaussian_blur(
        image, (2.0, 0.8), mode=modes, axes=(2, 1), backend="reference", precision="float64"
    )
    expected = ndi.gaussian_filter(image, (2.0, 0.8), mode=modes, axes=(2, 1), radius=(6, 3))
    assert_close(out, expected, "float64", image)


def test_sigma_zero_leaves_axis_untouched(rng):
    image = rng.random((6, 9))
    out = gaussian_blur(image, (0.0, 1.5), mode="reflect", backend="reference", precision="float64")
    assert_close(
        out, ndi.gaussian_filter1d(image, 1.5, axis=1, mode="reflect", radius=5), "float64", image
    )
    same = gaussian_blur(image, 0.0, backend="reference", precision="float64")
    np.testing.assert_array_equal(same, image)


def test_explicit_radius_overrides_truncate(rng):
    image = rng.random((20, 20))
    out = gaussian_blur(
        image, 2.0, radius=(2, 9), mode="nearest", backend="reference", precision="float64"
    )
    expected = ndi.gaussian_filter(image, 2.0, mode="nearest", radius=(2, 9))
    assert_close(out, expected, "float64", image)


def test_aliases_mean_their_targets(rng):
    image = rng.random((10, 12))
    for alias, target in [
        ("grid-mirror", "reflect"),
        ("grid-wrap", "wrap"),
        ("grid-constant", "constant"),
    ]:
        a = gaussian_blur(image, 1.3, mode=alias, cval=3, backend="reference", precision="float64")
        b = scipy_blur(image, 1.3, mode=target, cval=3)
        assert_close(a, b, "float64", image)


def test_nan_and_inf_propagate_like_scipy():
    image = np.zeros((15, 15))
    image[7, 7] = np.nan
    image[1, 1] = np.inf
    out = gaussian_blur(image, 1.0, mode="reflect", backend="reference", precision="float64")
    expected = scipy_blur(image, 1.0, mode="reflect")
    np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(out), np.isinf(expected))
    assert np.isnan(out).sum() == 49  # the 7x7 window around the NaN


@settings(max_examples=40, deadline=None)
@given(
    image=hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=9),
        elements=st.floats(-100, 100),
    ),
    sigma=st.floats(0, 6),
    truncate=st.floats(0.5, 4),
    mode=st.sampled_from(SCIPY_MODES),
)
def test_property_reference_matches_scipy(image, sigma, truncate, mode):
    out = gaussian_blur(
        image,
        sigma,
        mode=mode,
        cval=1.5,
        truncate=truncate,
        backend="reference",
        precision="float64",
    )
    if sigma == 0:
        np.testing.assert_array_equal(out, image)
        return
    expected = scipy_blur(image, sigma, mode=mode, cval=1.5, truncate=truncate)
    assert_close(out, expected, "float64", image)
