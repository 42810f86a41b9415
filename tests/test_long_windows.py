"""Long windows in float32: thousands of offsets summed per pixel must stay within the
contract's tolerance (a plain float32 running sum drifts past it)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import FAST_BACKENDS, assert_close
from napari_varblur import gaussian_blur
from napari_varblur.jax import gaussian_blur as jax_blur


def long_case(seed: int, n: int = 4000, low: float = 1000.0, high: float = 1300.0):
    """Values near 1e4 (the tolerance is relative to the largest) and sigmas whose
    windows cover the whole axis: ~8000 taps per pixel."""
    rng = np.random.default_rng(seed)
    image = rng.uniform(0.99e4, 1.01e4, n)
    sigma = rng.uniform(low, high, n).astype(np.float32)
    return image, sigma


@pytest.mark.parametrize("backend", FAST_BACKENDS)
@pytest.mark.parametrize("mode", ["nearest", "crop"])
def test_float32_sigma_map_over_thousands_of_offsets(backend, mode):
    for seed in range(3):
        image, sigma = long_case(seed)
        expected = gaussian_blur(image, sigma, mode=mode, backend="reference", precision="float64")
        out = gaussian_blur(image, sigma, mode=mode, backend=backend, precision="float32")
        assert_close(out, expected, "float32", image)


@pytest.mark.skipif("jax" not in FAST_BACKENDS, reason="JAX is not installed")
def test_jax_native_long_window_is_accurate_jittable_and_differentiable():
    image, sigma = long_case(1)
    expected = gaussian_blur(image, sigma, mode="nearest", backend="reference",
                             precision="float64")  # fmt: skip
    x = jnp.asarray(image, jnp.float32)
    out = jax.jit(lambda v: jax_blur(v, sigma, mode="nearest"))(x)
    assert_close(np.asarray(out), expected, "float32", image)
    # Shorter, so that reverse mode stays quick: still a compensated loop (512 offsets).
    small, s = long_case(2, n=600, low=120.0, high=160.0)
    loss = lambda v, m: jnp.sum(jax_blur(v, m, mode="nearest", max_radius=480) ** 2)  # noqa: E731
    g_image, g_sigma = jax.jit(jax.grad(loss, argnums=(0, 1)))(
        jnp.asarray(small, jnp.float32), jnp.asarray(s)
    )
    assert np.isfinite(np.asarray(g_image)).all() and np.isfinite(np.asarray(g_sigma)).all()
    # Against central differences of the float64 reference (exact for a quadratic)
    # along one random direction.
    direction = np.random.default_rng(0).normal(size=small.shape)

    def reference_loss(v):
        out = gaussian_blur(v, s, mode="nearest", backend="reference", precision="float64")
        return float(np.sum(out**2))

    numeric = (reference_loss(small + direction) - reference_loss(small - direction)) / 2
    analytic = float(np.dot(np.asarray(g_image, np.float64), direction))
    assert abs(analytic - numeric) <= 1e-4 * abs(numeric)  # measured: 1.5e-6
