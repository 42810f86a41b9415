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


@pytest.mark.parametrize(
    ("shape", "mode", "per_axis", "expected"),
    [
        ((40, 40), "reflect", False, [-1, -1, 1]),  # a 2-D map's leading axis blurs nothing
        ((9, 30, 30), "reflect", False, [-1, 0, 0]),
        ((9, 30, 30), "crop", False, [-1, -1, 1]),  # crop caps axis 0's radii at 8, not 29
        ((9, 30, 30), "reflect", True, [-1, -1, -1]),  # three maps: nothing to share
    ],
)
def test_axes_share_radii_and_tables_only_with_the_same_map_and_cap(
    rng, shape, mode, per_axis, expected
):
    """An isotropic map's axes take the first one's radii and table (the bit-for-bit
    test above checks what they blur); an axis capped otherwise, or with its own map,
    runs its own recurrence."""
    from napari_varblur.backends.numba.tiles import map_arguments
    from napari_varblur.core.spec import BlurSpec
    from napari_varblur.core.taps import map_plan

    sigma = rng.uniform(0.5, 3.5, shape)
    if per_axis:
        sigma = np.stack([sigma] * len(shape), axis=-1)
    spec = BlurSpec.from_args(rng.random(shape), sigma, mode=mode, backend="numba")
    np.testing.assert_array_equal(map_arguments(spec, map_plan(spec)).shares, expected)
