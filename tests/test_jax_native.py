"""The JAX-native API and the JAX backend's compilation and configuration rules."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from conftest import assert_close
from napari_varblur import gaussian_blur
from napari_varblur.backends import jax_xla
from napari_varblur.core.spec import BlurSpec
from napari_varblur.engine import cost, planner
from napari_varblur.jax import gaussian_blur as jax_blur


@pytest.fixture
def free_levels(monkeypatch):
    """JAX's level walk costed at nothing, so a concrete map mixes levels (the planner
    otherwise gathers small 2-D maps, where the mix is slower)."""
    free = dataclasses.replace(cost.JAX_COSTS, tap=0.0, call=0.0, sum=0.0)
    monkeypatch.setitem(cost.COSTS, "jax", free)


@pytest.fixture
def image(rng):
    return rng.random((14, 17)).astype(np.float32) * 10


@pytest.fixture
def sigma_map(rng):
    # Away from radius jumps (3 * sigma not near an integer) so finite differences are
    # smooth: for the gradient checks only.
    return (rng.integers(1, 6, (14, 17)) / 3 + 0.15).astype(np.float32)


@pytest.fixture
def jumpy_map(rng):
    """Sigmas on radius jumps: float32(k/3) (3 * sigma rounds to k in float32 but is
    above k in float64, radius k + 1) and their neighbours one ulp away."""
    k = rng.integers(1, 16, (14, 17))
    values = (k / 3).astype(np.float32)
    step = rng.integers(-1, 2, values.shape)
    return np.where(step > 0, np.nextafter(values, np.float32(9)),
                    np.where(step < 0, np.nextafter(values, np.float32(0)), values))  # fmt: skip


@pytest.mark.parametrize("mode", ["crop", "reflect", "constant"])
def test_matches_reference_for_concrete_and_traced_sigma(image, jumpy_map, mode):
    sigma_map = jumpy_map
    expected = gaussian_blur(
        image, sigma_map, mode=mode, cval=1.0, backend="reference", precision="float64"
    )
    concrete = jax_blur(jnp.asarray(image), sigma_map, mode=mode, cval=1.0)
    traced = jax.jit(lambda x, s: jax_blur(x, s, mode=mode, cval=1.0, max_radius=16))(
        jnp.asarray(image), jnp.asarray(sigma_map)
    )
    for out in (concrete, traced):
        assert isinstance(out, jax.Array)
        assert_close(np.asarray(out), expected, "float32", image)
    global_out = jax_blur(jnp.asarray(image), (1.5, 0.7), mode=mode, cval=1.0)
    assert_close(
        np.asarray(global_out),
        gaussian_blur(
            image, (1.5, 0.7), mode=mode, cval=1.0, backend="reference", precision="float64"
        ),
        "float32",
        image,
    )


def test_vmap_over_a_batch(image, sigma_map):
    batch = jnp.stack([jnp.asarray(image), 2 * jnp.asarray(image)])
    maps = jnp.stack([jnp.asarray(sigma_map), jnp.asarray(sigma_map) / 2])
    out = jax.vmap(lambda x, s: jax_blur(x, s, max_radius=6))(batch, maps)
    for i in range(2):
        expected = gaussian_blur(
            np.asarray(batch[i]), np.asarray(maps[i]), backend="reference", precision="float64"
        )
        assert_close(np.asarray(out[i]), expected, "float32", np.asarray(batch[i]))


def test_gradients_with_respect_to_image_and_sigma_map(image, sigma_map):
    with jax.enable_x64(True):
        x = jnp.asarray(image, jnp.float64)
        s = jnp.asarray(sigma_map, jnp.float64)
        # Image and map together (one program per mode); forward mode once.
        for mode, modes in (("crop", ["rev", "fwd"]), ("mirror", ["rev"])):
            check_grads(
                lambda x_, s_, mode=mode: jax_blur(x_, s_, mode=mode, max_radius=6),
                (x, s),
                order=1,
                modes=modes,
                eps=1e-6,
            )
            check_grads(
                lambda x_, mode=mode: jax_blur(x_, 1.3, mode=mode), (x,), order=1, modes=["rev"]
            )
        # The gradient is not trivially zero: sharpening a pixel's sigma changes it.
        g = jax.grad(lambda s_: jax_blur(x, s_, max_radius=6)[7, 8])(s)
        assert abs(float(g[7, 8])) > 1e-3


def test_traced_sigma_needs_max_radius(image):
    with pytest.raises(ValueError, match="max_radius: a traced sigma needs a static max_radius"):
        jax.jit(lambda s: jax_blur(jnp.asarray(image), s))(jnp.ones(image.shape))


def test_new_sigma_with_same_radius_does_not_recompile(image, rng):
    jax_xla._separable.clear_cache()
    jax_xla._varying_jit.clear_cache()
    gaussian_blur(image, 2.0, backend="jax")  # radius 6
    gaussian_blur(image, 1.7, backend="jax")  # radius 6 again: new weights, same program
    gaussian_blur(image, 1.9, mode="constant", cval=4.0, backend="jax")
    assert jax_xla._separable._cache_size() == 2  # one per mode, not per sigma or cval
    gaussian_blur(image, 2.1, backend="jax")  # radius 7: a new program
    assert jax_xla._separable._cache_size() == 3

    gaussian_blur(image, np.full(image.shape, 1.9), backend="jax")  # largest radius 6
    gaussian_blur(image, rng.uniform(1.0, 1.6, image.shape), backend="jax")  # 5
    gaussian_blur(image, np.full(image.shape, 2.6), backend="jax")  # 8: padding 8 for all
    assert jax_xla._varying_jit._cache_size() == 1
    gaussian_blur(image, np.full(image.shape, 2.7), backend="jax")  # 9: padding 16
    assert jax_xla._varying_jit._cache_size() == 2


def test_float64_is_real_and_global_config_untouched(image):
    before = jax.config.jax_enable_x64
    out = gaussian_blur(image.astype(np.float64) / 3, 1.0, backend="jax", precision="float64")
    assert out.dtype == np.float64
    expected = gaussian_blur(
        image.astype(np.float64) / 3, 1.0, backend="reference", precision="float64"
    )
    # A float32 computation would miss by ~1e-7; float64 meets 1e-12.
    assert_close(out, expected, "float64", image)
    assert jax.config.jax_enable_x64 == before
    with jax.enable_x64(True):  # a user who works in x64 gets float32 when asking for it
        out32 = gaussian_blur(image, 1.0, backend="jax", precision="float32")
        assert out32.dtype == np.float32 and jax.config.jax_enable_x64


@pytest.mark.parametrize("mode", ["crop", "reflect", "constant"])
def test_tolerance_levels_meet_the_bound_concrete_and_traced(image, mode, rng, free_levels):
    sigma = rng.uniform(0, 3.0, image.shape).astype(np.float32)
    sigma[sigma < 0.5] = 0
    expected = gaussian_blur(image, sigma, mode=mode, cval=12.0, backend="reference",
                             precision="float64")  # fmt: skip
    span = max(image.max(), 12.0) - min(image.min(), 12.0) if mode == "constant" else np.ptp(image)
    blur = jax.jit(lambda x, s: jax_blur(x, s, mode=mode, cval=12.0, tolerance=1e-3, max_radius=9))
    for out in (
        jax_blur(jnp.asarray(image), sigma, mode=mode, cval=12.0, tolerance=1e-3),
        blur(jnp.asarray(image), jnp.asarray(sigma)),
    ):
        err = np.abs(np.asarray(out, np.float64) - expected).max()
        assert 1e-6 < err <= 1e-3 * span + 1e-5 * 12  # levels ran, within the bound


def test_a_concrete_map_mixes_levels_only_where_jax_cost_table_says(rng):
    """The JAX-native API asks JAX's cost table for a concrete map: a 2-D ramp gathers
    (exactly: the mix ran 2.5-4x slower), a 3-D map with large sigma mixes levels; a
    traced map, whose values are unknown, mixes levels."""
    image = rng.random((512, 512)).astype(np.float32)
    ramp = np.broadcast_to(np.linspace(1, 8, 512, dtype=np.float32), image.shape)

    def kind(img, smap, traced=None):
        spec = BlurSpec.from_args(img, smap, tolerance=1e-3, backend="jax")
        return planner.route(dataclasses.replace(spec, max_radius=traced), native=True).kind

    assert kind(image, ramp) == "gather"
    assert kind(image, ramp, traced=(24, 24)) == "levels"
    volume = np.zeros((64, 128, 128), np.float32)
    assert kind(volume, np.broadcast_to(np.linspace(0.5, 8, 128, dtype=np.float32),
                                        volume.shape)) == "levels"  # fmt: skip
    out = np.asarray(jax_blur(image, ramp, tolerance=1e-3))
    exact = gaussian_blur(image, ramp, backend="reference", precision="float64")
    assert_close(out, exact, "float32", image)


def test_tolerance_levels_are_differentiable(image, sigma_map):
    with jax.enable_x64(True):
        x = jnp.asarray(image, jnp.float64)
        s = jnp.asarray(sigma_map, jnp.float64)
        # Under jit, so the finite differences see the same (traced) levels.
        blur = jax.jit(lambda x_, s_: jax_blur(x_, s_, mode="crop", tolerance=1e-3, max_radius=6))
        check_grads(lambda x_: blur(x_, s), (x,), order=1, modes=["rev", "fwd"])
        check_grads(lambda s_: blur(x, s_), (s,), order=1, modes=["rev"], eps=1e-6)
        # The map's gradient is real: a sharper sigma at a pixel changes that pixel.
        g = jax.grad(lambda s_: blur(x, s_)[7, 8])(s)
        assert abs(float(g[7, 8])) > 1e-3
        # A concrete map: differentiable with respect to the image, under jit too.
        concrete = jax.jit(lambda x_: jax_blur(x_, sigma_map, tolerance=1e-3))
        check_grads(concrete, (x,), order=1, modes=["rev"])


def test_tolerance_with_per_axis_maps_is_exact_and_bad_values_are_refused(image, sigma_map):
    per_axis = np.stack([sigma_map, sigma_map * 0.5], axis=-1)
    expected = gaussian_blur(image, per_axis, backend="reference", precision="float64")
    out = jax_blur(jnp.asarray(image), per_axis, tolerance=1e-3)
    assert_close(np.asarray(out), expected, "float32", image)
    with pytest.raises(ValueError, match="tolerance"):
        jax_blur(jnp.asarray(image), sigma_map, tolerance=0.5)


def test_float16_levels_keep_the_masked_share_rule(free_levels):
    """float16 (kept by the JAX-native API): a masked pixel whose valid taps' weights
    underflow is NaN with levels as in the exact blur (float16's smallest normal
    weight is its share floor, so its levels leave such an axis untouched)."""
    image = np.linspace(0.1, 1.0, 96 * 96, dtype=np.float16).reshape(96, 96)
    sigma = np.broadcast_to(np.linspace(0.16, 6.0, 96, dtype=np.float32), (96, 96)).copy()
    sigma[:, :8] = 0.16
    mask = np.ones((96, 96), bool)
    mask[10, 3] = False
    exact = np.asarray(jax_blur(image, sigma, mask=mask, tolerance=None))
    mixed = np.asarray(jax_blur(image, sigma, mask=mask, tolerance=0.05))
    assert mixed.dtype == np.float16 and np.isnan(exact[10, 3]) and np.isnan(mixed[10, 3])
    assert np.array_equal(np.isnan(mixed), np.isnan(exact))
