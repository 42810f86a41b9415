"""Masked blurs under tiny sigmas: one rule for pixels whose valid taps have weights near
underflow (``docs/contract.md``, "Masks and NaN"): a pixel whose valid share of its
kernel is below 2^-100 (float32) or 2^-800 (float64) is NaN, and every backend gives
the same NaN pattern and values within the contract's tolerance."""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import pytest

from bruteforce import normalised_blur
from conftest import ALL_BACKENDS, FAST_BACKENDS, assert_close
from napari_varblur import gaussian_blur
from napari_varblur.backends import load
from napari_varblur.core.level_plan import plan_levels
from napari_varblur.core.spec import BlurSpec
from napari_varblur.engine import cost, masked, walk

#: The contract's smallest valid share a masked pixel is filled from.
FLOOR = {"float32": 2.0**-100, "float64": 2.0**-800}
#: Sigmas whose neighbours' weights reach the floor of each precision (and some whose
#: weights stay far above it): exp(-1 / (2 s^2)) is 2^-100 at s = 0.085 and 2^-800 at
#: s = 0.030.
SIGMA_RANGE = {"float32": (0.02, 0.2), "float64": (0.01, 0.08)}
SHAPES = [(24, 26), (7, 8, 9)]
MODES = ["crop", "reflect"]
SEEDS = range(3)


def masked_case(seed: int, shape: tuple[int, ...], precision: str):
    """Values away from 0, about half of the pixels invalid, a float32 sigma map."""
    rng = np.random.default_rng(seed)
    image = rng.uniform(-3.0, 5.0, shape)
    valid = rng.random(shape) > 0.5
    sigma = rng.uniform(*SIGMA_RANGE[precision], shape).astype(np.float32)
    return image, valid, sigma


@functools.cache
def expected_map(seed, shape, precision, mode):
    image, valid, sigma = masked_case(seed, shape, precision)
    return normalised_blur(image, sigma, mask=valid, mode=mode, floor=FLOOR[precision])


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES)
def test_the_cases_reach_the_floor(precision, shape):
    """The rule decides pixels here: some have a valid share above 0 but below the
    floor (NaN by the rule, finite without it)."""
    image, valid, sigma = masked_case(0, shape, precision)
    without = normalised_blur(image, sigma, mask=valid)
    assert np.isnan(expected_map(0, shape, precision, "crop")).sum() > np.isnan(without).sum()


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES)
def test_sigma_maps_near_underflow_follow_one_rule(backend, precision, shape):
    for seed in SEEDS:
        image, valid, sigma = masked_case(seed, shape, precision)
        holes = np.where(valid, image, np.nan)
        for mode in MODES:
            expected = expected_map(seed, shape, precision, mode)
            kw = dict(mode=mode, backend=backend, precision=precision)
            assert_close(gaussian_blur(image, sigma, mask=valid, **kw), expected, precision,
                         image)  # fmt: skip
            assert_close(gaussian_blur(holes, sigma, nan_policy="omit", **kw), expected,
                         precision, image)  # fmt: skip


#: Global sigmas (per precision) whose diagonal or axis neighbours fall below the floor.
GLOBAL = {"float32": [0.1, 0.05, (0.1, 0.08), 0.13], "float64": [0.035, 0.02, (0.035, 0.05)]}


@functools.cache
def expected_global(seed, shape, precision, sigma, mode):
    image, valid, _ = masked_case(seed, shape, precision)
    return normalised_blur(image, sigma, mask=valid, mode=mode, floor=FLOOR[precision])


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_global_sigmas_near_underflow_follow_one_rule(backend, precision):
    for seed in SEEDS:
        for shape in SHAPES:
            image, valid, _ = masked_case(seed, shape, precision)
            for sigma in GLOBAL[precision]:
                if np.ndim(sigma) and len(sigma) != len(shape):
                    sigma = (*sigma, sigma[-1])
                for mode in MODES:
                    expected = expected_global(seed, shape, precision, sigma, mode)
                    out = gaussian_blur(image, sigma, mask=valid, mode=mode, backend=backend,
                                        precision=precision)  # fmt: skip
                    assert_close(out, expected, precision, image)


@pytest.mark.skipif("jax" not in FAST_BACKENDS, reason="JAX is not installed")
def test_jax_native_api_follows_the_rule():
    import jax
    import jax.numpy as jnp

    from napari_varblur.jax import gaussian_blur as jax_blur

    for seed in SEEDS:
        image, valid, sigma = masked_case(seed, (24, 26), "float32")
        for mode in MODES:
            out = jax_blur(jnp.asarray(image, jnp.float32), sigma, mask=valid, mode=mode)
            assert_close(np.asarray(out), expected_map(seed, (24, 26), "float32", mode),
                         "float32", image)  # fmt: skip
        x = jnp.asarray(image, jnp.float32)
        traced = jax.jit(lambda s: jax_blur(x, s, mask=valid, max_radius=1))(sigma)  # noqa: B023
        assert_close(np.asarray(traced), expected_map(seed, (24, 26), "float32", "crop"),
                     "float32", image)  # fmt: skip


def quantised_case(seed: int, shape: tuple[int, ...], precision: str):
    """:func:`masked_case` with a map of a few tiny sigmas (exact levels)."""
    image, valid, _ = masked_case(seed, shape, precision)
    values = {"float32": [0.03, 0.05, 0.08, 0.1, 0.15], "float64": [0.01, 0.02, 0.03, 0.05]}
    sigma = np.random.default_rng(seed).choice(values[precision], shape).astype(np.float32)
    return image, valid, sigma


@functools.cache
def expected_quantised(seed, shape, precision, mode):
    image, valid, sigma = quantised_case(seed, shape, precision)
    return normalised_blur(image, sigma, mask=valid, mode=mode, floor=FLOOR[precision])


@pytest.mark.parametrize("backend", FAST_BACKENDS)
@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_quantised_levels_follow_the_rule(backend, precision):
    """A map of a few tiny sigmas blurred by exact levels (the walk forced, small tiles):
    one global blur per level for the values and for the validity, the same rule."""
    for seed in SEEDS:
        for shape in SHAPES:
            image, valid, sigma = quantised_case(seed, shape, precision)
            for mode in MODES:
                spec = BlurSpec.from_args(image, sigma, mask=valid, mode=mode, backend=backend,
                                          precision=precision)  # fmt: skip
                plan = cost.Plan(plan_levels(spec), (8,) * len(shape))
                plain = replace(spec, mask=None)

                def run(v, cval, plan=plan, plain=plain):
                    return walk.blur(replace(plain, image=v, cval=cval), plan, load(backend))

                out = masked.normalized_convolution(image, valid, 0.0, False, run,
                                                    dtype=np.dtype(precision))  # fmt: skip
                expected = expected_quantised(seed, shape, precision, mode)
                assert_close(out, expected, precision, image)
