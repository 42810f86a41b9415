"""On a GPU a tolerance map runs the exact gather (the planner, ``engine.cost.gather_on_gpu``): an
H200 ran it 12-16x faster than the level loop (``benchmarks/gpu_tolerance.json``).  This
CPU machine plays a GPU by swapping the JAX backend's ``has_gpu``; every blur still runs
for real."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

import napari_varblur.jax as vjax
from napari_varblur.backends import jax_xla
from napari_varblur.core.spec import BlurSpec
from napari_varblur.engine import cost, planner

RNG = np.random.default_rng(5)
IMAGE = RNG.random((256, 512)).astype(np.float32)
# A smooth ramp with more distinct values than levels: the CPU planner mixes levels.
RAMP = np.broadcast_to(np.linspace(1.0, 8.0, 512, dtype=np.float32), IMAGE.shape).copy()


@pytest.fixture
def gpu(monkeypatch):
    """The JAX backend as if JAX saw a GPU."""
    monkeypatch.setattr(
        jax_xla, "BACKEND", dataclasses.replace(jax_xla.BACKEND, has_gpu=lambda: True)
    )


# A volume whose levels beat the gather on JAX on the CPU too (3-D, sigma up to 8).
VOLUME = np.zeros((64, 128, 128), np.float32)
DEEP = np.broadcast_to(np.linspace(0.5, 8.0, 128, dtype=np.float32), VOLUME.shape)


def spec(backend: str = "jax") -> BlurSpec:
    return BlurSpec.from_args(IMAGE, RAMP, tolerance=1e-3, backend=backend)


def volume_spec() -> BlurSpec:
    return BlurSpec.from_args(VOLUME, DEEP, tolerance=1e-3, backend="jax")


def test_cpu_takes_levels_where_its_cost_table_says():
    """On the CPU, JAX weighs its whole-image level walk against its gather (the 2-D
    ramp gathers, the volume walks), on the NumPy route and in the JAX-native API for
    a concrete map; a traced map mixes levels; Numba walks the ramp."""
    assert planner.route(spec("numba")).kind == "levels"
    assert planner.route(spec()).kind == "gather"
    assert planner.route(volume_spec()).kind == "levels"
    assert planner.route(spec(), native=True).kind == "gather"
    traced = dataclasses.replace(spec(), max_radius=(24, 24))
    assert planner.route(traced, native=True).kind == "levels"


@pytest.fixture
def free_levels(monkeypatch):
    """JAX's level walk costed at nothing: on the CPU a concrete map mixes levels too."""
    free = dataclasses.replace(cost.JAX_COSTS, tap=0.0, call=0.0, sum=0.0)
    monkeypatch.setitem(cost.COSTS, "jax", free)


def test_gpu_takes_the_gather(gpu):
    assert planner.route(spec()).kind == "gather"
    assert planner.route(spec(), native=True).kind == "gather"
    assert planner.route(spec("numba")).kind == "levels"  # Numba has no GPU


def test_gpu_takes_levels_beyond_the_threshold(gpu, monkeypatch):
    window = (2 * 24 + 1) ** 3  # the volume's largest radius is ceil(3 * 8) = 24
    monkeypatch.setattr(cost, "GPU_GATHER_TAPS", window - 1)
    assert planner.route(volume_spec()).kind == "levels"
    monkeypatch.setattr(cost, "GPU_GATHER_TAPS", window)
    assert planner.route(volume_spec()).kind == "gather"


@pytest.mark.parametrize("traced", [False, True])
def test_jax_native_result_is_the_exact_map(gpu, free_levels, traced):
    exact = np.asarray(vjax.gaussian_blur(IMAGE, RAMP, max_radius=24))
    blur = lambda s: vjax.gaussian_blur(IMAGE, s, tolerance=1e-3, max_radius=24)  # noqa: E731
    out = np.asarray(jax.jit(blur)(RAMP) if traced else blur(RAMP))
    np.testing.assert_allclose(out, exact, rtol=0, atol=1e-6)


@pytest.mark.parametrize("traced", [False, True])
def test_jax_native_on_cpu_mixes_levels(free_levels, traced):
    """The guard for the test above: on the CPU the same call mixes levels (a concrete
    map where JAX's walk is costed at nothing), which differ from the exact map by more
    than float32 rounding."""
    exact = np.asarray(vjax.gaussian_blur(IMAGE, RAMP, max_radius=24))
    blur = lambda s: vjax.gaussian_blur(IMAGE, s, tolerance=1e-3, max_radius=24)  # noqa: E731
    out = np.asarray(jax.jit(blur)(RAMP) if traced else blur(RAMP))
    assert 1e-6 < np.abs(out - exact).max() <= 2e-3 * np.ptp(IMAGE)
