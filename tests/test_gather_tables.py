"""The exact gather's weight tables (backends/numba/gathers.py): an axis no pixel blurs
(a 2-D map's leading axis in the 3-D kernel) keeps the identity table and no radii.  An
isotropic map blurs exactly as the same map given per axis (bit for bit, at the edges,
with NaN in the image and with a mask), and an axis subset as the reference."""

from __future__ import annotations

import numpy as np
import pytest

from napari_varblur import gaussian_blur


@pytest.mark.parametrize("mode", ["crop", "reflect", "constant", "wrap"])
@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(40, 40), (37, 61), (9, 30, 30), (12, 17, 23)])
def test_an_isotropic_map_blurs_as_the_same_map_given_per_axis(rng, mode, precision, shape):
    image = rng.random(shape) * 100
    image[tuple(n // 3 for n in shape)] = np.nan
    sigma = rng.uniform(0.0, 3.5, shape)
    per_axis = np.stack([sigma] * len(shape), axis=-1)
    mask = rng.random(shape) > 0.2
    for kw in ({}, dict(nan_policy="omit", mask=mask)):
        shared = gaussian_blur(image, sigma, mode=mode, precision=precision, backend="numba",
                               **kw)  # fmt: skip
        alone = gaussian_blur(image, per_axis, mode=mode, precision=precision,
                              backend="numba", **kw)  # fmt: skip
        np.testing.assert_array_equal(shared, alone)


def test_an_axis_left_alone_is_untouched_and_a_subset_matches_the_reference(rng):
    image = rng.random((4, 25, 31)).astype(np.float32)
    sigma = rng.uniform(0.5, 3.0, image.shape)
    out = gaussian_blur(image, sigma, axes=(1, 2), mode="crop", backend="numba")
    expected = gaussian_blur(image, sigma, axes=(1, 2), mode="crop", backend="reference")
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-5)
