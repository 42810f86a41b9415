"""The seed port's pitfalls, pinned: centring, tap count, no shrinking, crop renormalisation."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import ALL_BACKENDS, assert_close
from napari_varblur import gaussian_blur


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("as_map", [False, True])
def test_blurred_delta_is_centred_symmetric_with_2r_plus_1_taps(backend, as_map):
    image = np.zeros((31, 31))
    image[15, 15] = 1.0
    sigma = np.full(image.shape, 2.0) if as_map else 2.0
    out = gaussian_blur(image, sigma, mode="reflect", backend=backend, precision="float64")
    np.testing.assert_allclose(out, out[::-1, :], atol=1e-15)
    np.testing.assert_allclose(out, out[:, ::-1], atol=1e-15)
    np.testing.assert_allclose(out, out.T, atol=1e-15)
    assert np.unravel_index(np.argmax(out), out.shape) == (15, 15)
    rows, cols = np.nonzero(out)
    assert (rows.min(), rows.max(), cols.min(), cols.max()) == (9, 21, 9, 21)  # 13 = 2*6+1 taps
    assert out.sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("shape", [(1,), (2, 3), (5, 1, 4)])
def test_output_never_shrinks(backend, shape):
    # sigma 3 is radius 9, wider than every axis: the output keeps the image's shape and
    # its values still match an oracle that builds each axis's weights by hand.
    image = np.arange(np.prod(shape), dtype=float).reshape(shape)
    expected = {mode: _separable_blur(image, 3.0, mode) for mode in ("crop", "reflect")}
    for sigma in (3.0, np.full(shape, 3.0)):
        for mode in ("crop", "reflect"):
            out = gaussian_blur(image, sigma, mode=mode, backend=backend)
            assert out.shape == shape
            assert_close(out, expected[mode], "float32", image)


def _separable_blur(image: np.ndarray, sigma: float, mode: str) -> np.ndarray:
    """Blur every axis with an explicit (n, n) weight matrix, radius ceil(3 sigma)."""
    out = image
    for axis, n in enumerate(image.shape):
        r = int(np.ceil(3 * sigma))
        offsets = np.arange(-r, r + 1)
        taps = np.exp(-0.5 * (offsets / sigma) ** 2)
        weights = np.zeros((n, n))
        for i in range(n):
            for o, w in zip(offsets, taps):
                j = i + o
                if mode == "reflect":  # scipy's 'reflect' (d c b a | a b c d | d c b a)
                    j %= 2 * n
                    j = 2 * n - 1 - j if j >= n else j
                elif not 0 <= j < n:  # 'crop': taps outside the image are dropped
                    continue
                weights[i, j] += w
        weights /= weights.sum(axis=1, keepdims=True)
        out = np.moveaxis(np.tensordot(weights, out, axes=([1], [axis])), 0, axis)
    return out


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_crop_renormalises_per_pixel(backend):
    """A constant image stays constant in crop mode, also at the border and corners."""
    image = np.full((12, 9), 5.0)
    for sigma in (2.5, np.random.default_rng(0).uniform(0.3, 4, image.shape)):
        out = gaussian_blur(image, sigma, mode="crop", backend=backend, precision="float64")
        np.testing.assert_allclose(out, 5.0, rtol=1e-13)
        # ...whereas a zero-padding blur darkens the border: crop is not 'constant'.
        dark = gaussian_blur(image, sigma, mode="constant", backend=backend, precision="float64")
        assert dark[0, 0] < 4.0


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_crop_border_pixel_matches_hand_computation(backend):
    image = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    out = gaussian_blur(image, 1.0, mode="crop", backend=backend, precision="float64")
    w = np.exp(-0.5 * np.arange(4) ** 2)  # radius 3: at pixel 0 only offsets 0..3 are inside
    expected0 = (w * image[:4]).sum() / w.sum()
    assert out[0] == pytest.approx(expected0, rel=1e-14)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_input_is_never_modified(backend):
    image = np.random.default_rng(1).random((8, 8))
    sigma_map = np.full((8, 8), 1.5)
    image_before, map_before = image.copy(), sigma_map.copy()
    for sigma in (1.5, sigma_map):
        for precision in ("float32", "float64"):
            out = gaussian_blur(image, sigma, backend=backend, precision=precision)
            assert out is not image and not np.shares_memory(out, image)
    np.testing.assert_array_equal(image, image_before)
    np.testing.assert_array_equal(sigma_map, map_before)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize(
    "dtype", [bool, np.uint8, np.int16, np.uint16, np.int64, np.float16, np.float32]
)
def test_input_dtypes(backend, dtype):
    image = (np.random.default_rng(2).random((9, 10)) * 200).astype(dtype)
    out = gaussian_blur(image, 1.2, mode="mirror", backend=backend, precision="float64")
    expected = gaussian_blur(
        image.astype(np.float64), 1.2, mode="mirror", backend="reference", precision="float64"
    )
    assert_close(out, expected, "float64", image)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_empty_image_gives_empty_result(backend):
    for sigma in (1.0, np.ones((0, 5))):
        out = gaussian_blur(np.zeros((0, 5)), sigma, backend=backend)
        assert out.shape == (0, 5) and out.dtype == np.float32


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_huge_sigma_is_quick_and_correct(backend):
    import time

    image = np.random.default_rng(3).random((64, 64))
    start = time.perf_counter()
    for mode in ("crop", "reflect", "nearest", "constant", "wrap"):
        out = gaussian_blur(image, 1e6, mode=mode, cval=0.25, backend=backend, precision="float64")
        # With sigma >> size every weight is ~1: the result is (nearly) the window mean.
        if mode == "crop":
            np.testing.assert_allclose(out, image.mean(), rtol=1e-9)
        elif mode == "constant":
            np.testing.assert_allclose(out, 0.25, atol=1e-3)
        else:
            np.testing.assert_allclose(out, out.mean(), atol=1e-3)
    # A sigma map in crop mode clips the window to the image: still exact and quick.
    crop = gaussian_blur(
        image, np.full((64, 64), 1e6), mode="crop", backend=backend, precision="float64"
    )
    np.testing.assert_allclose(crop, image.mean(), rtol=1e-9)
    assert time.perf_counter() - start < 60
