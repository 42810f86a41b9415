"""channel_axis (issue 11): a colour or channel axis is never blurred, in the Python
API, the JAX-native API and `varblur blur` (RGB TIFFs per channel by default)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from napari_varblur import gaussian_blur


def per_channel(image, sigma, axis, **kw):
    """The oracle: each channel blurred on its own."""
    planes = [gaussian_blur(np.take(image, c, axis=axis), sigma, **kw)
              for c in range(image.shape[axis])]  # fmt: skip
    return np.stack(planes, axis=axis)


@pytest.mark.parametrize("axis", [0, -1])
def test_channels_are_blurred_apart_with_sigmas_maps_and_masks(rng, axis):
    image = np.moveaxis(rng.random((9, 10, 3)), -1, axis)
    spatial = [n for i, n in enumerate(image.shape) if i != axis % 3]
    sigma_map = rng.uniform(0.5, 2.0, spatial)
    per_axis = rng.uniform(0.5, 2.0, (*spatial, 2))
    mask = rng.random(spatial) > 0.2
    kw = dict(precision="float64", mode="reflect")
    for sigma in (1.5, (1.0, 2.0), sigma_map, per_axis):
        expected = per_channel(image, sigma, axis, **kw)
        np.testing.assert_allclose(gaussian_blur(image, sigma, channel_axis=axis, **kw),
                                   expected, atol=1e-12)  # fmt: skip
    expected = per_channel(image, sigma_map, axis, mask=mask, **kw)
    out = gaussian_blur(image, sigma_map, channel_axis=axis, mask=mask, **kw)
    np.testing.assert_allclose(out, expected, atol=1e-12)


def test_pure_red_stays_red():
    red = np.zeros((16, 16, 3))
    red[..., 0] = 1.0
    out = gaussian_blur(red, 3.0, channel_axis=-1, mode="reflect")
    assert out[..., 1:].max() == 0 and np.allclose(out[..., 0], 1.0)
    assert gaussian_blur(red, 3.0, mode="reflect")[..., 1].max() > 0.1  # without: mixed


def test_bad_channel_axis_and_the_map_error_suggests_it(rng):
    image = rng.random((8, 9, 3))
    with pytest.raises(ValueError, match=r"axes: \(0, 2\) includes the channel axis 2"):
        gaussian_blur(image, 1.0, channel_axis=-1, axes=(0, 2))
    with pytest.raises(ValueError, match="channel_axis: axis 3 is out of range"):
        gaussian_blur(image, 1.0, channel_axis=3)
    with pytest.raises(TypeError, match="channel_axis: expected an int or None"):
        gaussian_blur(image, 1.0, channel_axis="last")
    with pytest.raises(ValueError, match=r"pass channel_axis=.*map\[\.\.\., None\]"):
        gaussian_blur(image, rng.uniform(1, 2, (8, 9)))


def test_jax_native_channel_axis_concrete_and_traced(rng):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from napari_varblur.jax import gaussian_blur as jax_blur

    image = rng.random((10, 11, 3)).astype(np.float32)
    sigma = rng.uniform(0.5, 2.0, (10, 11)).astype(np.float32)
    expected = per_channel(image, sigma, -1)
    out = jax_blur(jnp.asarray(image), sigma, channel_axis=-1)
    np.testing.assert_allclose(np.asarray(out), expected, atol=1e-5)
    traced = jax.jit(lambda x, s: jax_blur(x, s, channel_axis=2, max_radius=6))
    np.testing.assert_allclose(np.asarray(traced(jnp.asarray(image), jnp.asarray(sigma))),
                               expected, atol=1e-5)  # fmt: skip


def test_cli_blurs_an_rgb_tiff_per_channel(tmp_path):
    tifffile = pytest.importorskip("tifffile")
    from napari_varblur.app import cli

    red = np.zeros((24, 30, 3), np.uint8)
    red[..., 0] = 255
    tifffile.imwrite(tmp_path / "red.tif", red, photometric="rgb")
    os.chdir(tmp_path)
    assert cli.main(["blur", "red.tif", "out.npy", "--sigma", "2"]) == 0
    out = np.load(tmp_path / "out.npy")
    assert out[..., 1:].max() == 0 and np.allclose(out[..., 0], 255, atol=1e-3)
    args = ["blur", "red.tif", "mixed.npy", "--sigma", "2", "--channel-axis", "none"]
    assert cli.main([*args, "--mode", "reflect"]) == 0
    assert np.load(tmp_path / "mixed.npy")[..., 1].max() > 10
