"""Every backend against the float64 reference, within the contract's tolerances."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.ndimage as ndi
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ALL_BACKENDS, ALL_MODES, FAST_BACKENDS, assert_close
from napari_varblur import gaussian_blur

PRECISIONS = ["float32", "float64"]


@pytest.mark.parametrize("backend", FAST_BACKENDS)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("mode", ALL_MODES)
def test_global_sigma(rng, backend, precision, mode):
    image = rng.normal(size=(3, 21, 18)) * 50
    for sigma, axes in [(1.3, None), ((2.5, 0.0), (1, 2)), ((40.0,), (2,)), (0.4, (0, 2))]:
        kw = dict(mode=mode, cval=-3.0, axes=axes)
        expected = gaussian_blur(image, sigma, backend="reference", precision="float64", **kw)
        out = gaussian_blur(image, sigma, backend=backend, precision=precision, **kw)
        assert_close(out, expected, precision, image)


@pytest.mark.parametrize("backend", FAST_BACKENDS)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("mode", ALL_MODES)
def test_random_sigma_map(rng, backend, precision, mode):
    image = rng.random((2, 19, 16)) * 1000
    sigma_map = rng.uniform(0, 2.5, size=(2, 19, 16))
    sigma_map[0, :3, :3] = 0  # untouched pixels mixed in
    kw = dict(mode=mode, cval=7.0, axes=(1, 2))
    expected = gaussian_blur(image, sigma_map, backend="reference", precision="float64", **kw)
    out = gaussian_blur(image, sigma_map, backend=backend, precision=precision, **kw)
    assert_close(out, expected, precision, image)
    np.testing.assert_allclose(out[0, :3, :3], image[0, :3, :3], rtol=1e-6)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_per_axis_map_3d_and_per_axis_modes(rng, backend, precision):
    image = rng.random((7, 9, 11))
    sigma_map = np.stack(
        [rng.uniform(0, 1, (7, 9, 11)), rng.uniform(0.5, 2, (7, 9, 11)), np.full((7, 9, 11), 1.2)],
        axis=-1,
    )
    modes = ("crop", "wrap", "constant")
    expected = gaussian_blur(
        image, sigma_map, mode=modes, cval=2.0, backend="reference", precision="float64"
    )
    out = gaussian_blur(
        image, sigma_map, mode=modes, cval=2.0, backend=backend, precision=precision
    )
    assert_close(out, expected, precision, image)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("mode", ALL_MODES)
def test_uniform_map_equals_global(rng, backend, precision, mode):
    image = rng.random((13, 17)) * 10
    sigma = (1.6, 0.9)
    global_result = gaussian_blur(
        image, sigma, mode=mode, cval=1.0, backend="reference", precision="float64"
    )
    uniform = np.broadcast_to(np.array(sigma), (13, 17, 2))
    out = gaussian_blur(image, uniform, mode=mode, cval=1.0, backend=backend, precision=precision)
    assert_close(out, global_result, precision, image)
    if mode != "crop":  # the independent oracle too
        expected = ndi.gaussian_filter(image, sigma, mode=mode, cval=1.0, radius=(5, 3))
        assert_close(out, expected, precision, image)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_map_broadcasts_over_batch_axis(rng, backend):
    image = rng.random((4, 12, 10))
    spatial = rng.uniform(0.5, 2, (1, 12, 10))
    out = gaussian_blur(image, spatial, axes=(1, 2), backend=backend, precision="float64")
    for t in range(4):
        alone = gaussian_blur(image[t], spatial[0], backend="reference", precision="float64")
        assert_close(out[t], alone, "float64", image)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_radius_uses_float64_sigma(backend, precision):
    """float32(4/3) * 3 is 4.0 in float32 but 4.0000001 in float64: the radius is 5."""
    sigma32 = np.float32(4 / 3)
    assert np.float32(3) * sigma32 == 4 and math.ceil(3 * float(sigma32)) == 5
    image = np.zeros((1, 21))
    image[0, 10] = 1.0
    out_global = gaussian_blur(
        image, float(sigma32), axes=1, mode="constant", backend=backend, precision=precision
    )
    out_map = gaussian_blur(
        image,
        np.full(image.shape, sigma32),
        axes=1,
        mode="constant",
        backend=backend,
        precision=precision,
    )
    for out in (out_global, out_map):
        support = np.flatnonzero(out[0])
        assert support.min() == 5 and support.max() == 15  # 2 * 5 + 1 taps
        expected = ndi.gaussian_filter1d(image, float(sigma32), axis=1, mode="constant", radius=5)
        assert_close(out, expected, precision, image)


@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_nan_does_not_leak_outside_a_pixels_window(backend):
    image = np.ones((11, 11))
    image[5, 5] = np.nan
    sigma_map = np.full(image.shape, 2.0)  # radius 6 reaches the NaN from everywhere...
    sigma_map[5, :] = 0.2  # ...except row 5 has radius 1
    sigma_map[:, 0] = 0.1
    for precision in PRECISIONS:
        out = gaussian_blur(image, sigma_map, backend=backend, precision=precision)
        expected = gaussian_blur(image, sigma_map, backend="reference", precision="float64")
        assert_close(out, expected, precision, image)
        assert not np.isnan(out[5, 0:4]).any() and np.isnan(out[5, 5])


@settings(max_examples=25, deadline=None)
@given(
    shape=st.lists(st.integers(1, 9), min_size=1, max_size=3).map(tuple),
    sigma_max=st.floats(0, 3),
    mode=st.sampled_from(ALL_MODES),
    precision=st.sampled_from(PRECISIONS),
    seed=st.integers(0, 2**16),
)
def test_property_backends_agree_on_maps(shape, sigma_max, mode, precision, seed):
    gen = np.random.default_rng(seed)
    image = gen.normal(size=shape) * 10
    sigma_map = gen.uniform(0, sigma_max, size=shape)
    expected = gaussian_blur(
        image, sigma_map, mode=mode, cval=0.5, backend="reference", precision="float64"
    )
    for backend in FAST_BACKENDS:
        out = gaussian_blur(
            image, sigma_map, mode=mode, cval=0.5, backend=backend, precision=precision
        )
        assert_close(out, expected, precision, image)


@pytest.mark.parametrize("backend", FAST_BACKENDS)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_mixed_modes_with_wide_maps(rng, backend, precision):
    """Wide enough for the vectorised blocks; corners mix crop with cval extension."""
    image = rng.random((2, 19, 40)) * 10
    sigma_map = rng.uniform(0.3, 2.5, (2, 19, 40))
    for modes in [
        ("crop", "constant"),
        ("constant", "crop"),
        ("wrap", "crop"),
        ("crop", "reflect"),
    ]:
        kw = dict(mode=modes, cval=5.0, axes=(1, 2))
        expected = gaussian_blur(image, sigma_map, backend="reference", precision="float64", **kw)
        out = gaussian_blur(image, sigma_map, backend=backend, precision=precision, **kw)
        assert_close(out, expected, precision, image)
    wide = rng.random((5, 600)) * 10  # several tiles (256) along the last axis, a ragged end
    wide_map = rng.uniform(0, 3, wide.shape)
    expected = gaussian_blur(wide, wide_map, backend="reference", precision="float64")
    assert_close(
        gaussian_blur(wide, wide_map, backend=backend, precision=precision),
        expected,
        precision,
        wide,
    )
    volume = rng.random((6, 7, 33))
    vmap = rng.uniform(0.3, 1.5, volume.shape)
    kw = dict(mode=("constant", "crop", "wrap"), cval=-4.0)
    expected = gaussian_blur(volume, vmap, backend="reference", precision="float64", **kw)
    assert_close(
        gaussian_blur(volume, vmap, backend=backend, precision=precision, **kw),
        expected,
        precision,
        volume,
    )


@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_four_blurred_axes_with_a_map(rng, backend):
    """Beyond 3 blurred axes Numba uses its generic kernel; JAX its general loop."""
    image = rng.random((4, 5, 3, 6))
    sigma_map = rng.uniform(0, 1.2, image.shape)
    for mode in ("crop", "mirror"):
        expected = gaussian_blur(
            image, sigma_map, mode=mode, backend="reference", precision="float64"
        )
        out = gaussian_blur(image, sigma_map, mode=mode, backend=backend, precision="float64")
        assert_close(out, expected, "float64", image)
