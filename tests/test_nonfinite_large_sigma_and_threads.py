"""Edge cases of the contract: non-finite cval, large sigma in float32, traced radii,
inputs never aliased, dask errors at call time, thread safety, overflow, and float64
accuracy at very large sigma."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.ndimage as ndi
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ALL_BACKENDS, ALL_MODES, FAST_BACKENDS, assert_close
from napari_varblur import gaussian_blur
from napari_varblur.jax import gaussian_blur as jax_blur


def reference(image, sigma, **kw):
    return gaussian_blur(image, sigma, backend="reference", precision="float64", **kw)


# ---------------------------------------------------------------- non-finite cval


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("cval", [np.nan, np.inf, -np.inf])
def test_non_finite_cval_global_matches_scipy(backend, cval):
    image = np.arange(120.0).reshape(12, 10)
    with np.errstate(invalid="ignore"):
        expected = ndi.gaussian_filter(image, 1.0, mode="constant", cval=cval, radius=3)
    for precision in ("float32", "float64"):
        out = gaussian_blur(image, 1.0, mode="constant", cval=cval, backend=backend,
                            precision=precision)  # fmt: skip
        np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))
        np.testing.assert_array_equal(np.isposinf(out), np.isposinf(expected))
        finite = np.isfinite(expected)
        assert_close(out[finite], expected[finite], precision, image)
    assert np.isnan(expected).sum() == (96 if np.isnan(cval) else 0)


@pytest.mark.parametrize("backend", FAST_BACKENDS)
@pytest.mark.parametrize("cval", [np.nan, np.inf])
@pytest.mark.parametrize("shape", [(12, 10), (9, 600)])  # (9, 600): three tiles wide
def test_non_finite_cval_sigma_map(rng, backend, cval, shape):
    image = rng.random(shape) * 10
    # radius <= 4; sigma >= 0.3 (or 0) keeps every weight a normal number: a weight
    # that underflows to 0 times an infinite cval is NaN in some orders of the product.
    sigma_map = rng.uniform(0.3, 1.2, shape)
    sigma_map[::4, ::3] = 0
    expected = reference(image, sigma_map, mode="constant", cval=cval)
    for precision in ("float32", "float64"):
        out = gaussian_blur(image, sigma_map, mode="constant", cval=cval, backend=backend,
                            precision=precision)  # fmt: skip
        np.testing.assert_array_equal(np.isinf(out), np.isinf(expected))
        assert_close(np.where(np.isinf(out), 0, out), np.where(np.isinf(expected), 0, expected),
                     precision, image)  # fmt: skip
    assert np.isfinite(expected[4, 4:6]).all()  # the middle never reads cval


@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_one_nan_spoils_only_its_windows(rng, backend):
    """A NaN in one tile sends only the tiles that read it pixel by pixel."""
    image = rng.random((20, 700))
    image[10, 350] = np.nan
    sigma_map = rng.uniform(0.2, 2.0, image.shape)
    out = gaussian_blur(image, sigma_map, backend=backend, precision="float64")
    assert_close(out, reference(image, sigma_map), "float64", image)
    assert np.isnan(out).sum() <= 13 * 13 and np.isnan(out[10, 350])


# ---------------------------------------------------------------- large sigma


@pytest.mark.parametrize("backend", FAST_BACKENDS)
@pytest.mark.parametrize("mode", ["crop", "reflect"])
@pytest.mark.parametrize("big_axis", [0, 1, None])
def test_float32_holds_at_sigma_60_on_every_axis(rng, backend, mode, big_axis):
    """Weights from a float32 recurrence drifted by ~1e-3 at sigma 60 (d^2 ulp)."""
    shape = (20, 70) if mode == "crop" else (6, 9)
    for image in (np.full(shape, 1000.0), rng.random(shape) * 1000):
        sigma = np.ones(shape + (2,)) * 0.7
        for axis in (0, 1) if big_axis is None else (big_axis,):
            sigma[..., axis] = 60.0
        expected = reference(image, sigma, mode=mode)
        out = gaussian_blur(image, sigma, mode=mode, backend=backend, precision="float32")
        assert_close(out, expected, "float32", image)


def test_jax_issue_example_at_sigma_40():
    image = np.ones((64, 256)) * 1000
    sigma_map = np.full((64, 256), 40.0)
    for mode in ("crop", "reflect"):
        expected = np.full(image.shape, 1000.0)
        out = gaussian_blur(image, sigma_map, mode=mode, backend="jax", precision="float32")
        assert_close(out, expected, "float32", image)


@pytest.mark.parametrize("backend", FAST_BACKENDS)
@pytest.mark.parametrize("mode", ["crop", "wrap"])
def test_float64_at_sigma_3500_on_a_long_line(backend, mode):
    """The q = exp(-h) rounding grew as d^2 ulp: 1.5e-12 at sigma 3500 (bound 1e-12)."""
    line = np.random.default_rng(0).random(12000)
    sigma_map = np.full(line.shape, 3500.0)
    out = gaussian_blur(line, sigma_map, mode=mode, backend=backend, precision="float64")
    assert_close(out, reference(line, sigma_map, mode=mode), "float64", line)


# ---------------------------------------------------------------- traced radius


def test_traced_sigma_radius_follows_the_float64_rule():
    sigma32 = np.float32(4 / 3)  # float32: 3 * sigma == 4.0; float64: 4.0000001 -> 5
    image = jnp.zeros(21).at[10].set(1.0)
    run = jax.jit(lambda s: jax_blur(image, s, mode="constant", max_radius=8))
    out = np.asarray(run(jnp.full(21, sigma32)))
    expected = ndi.gaussian_filter1d(np.asarray(image, np.float64), float(sigma32),
                                     mode="constant", radius=5)  # fmt: skip
    assert np.flatnonzero(out).tolist() == list(range(5, 16))
    assert_close(out, expected, "float32", np.asarray(image))


@pytest.mark.parametrize("truncate", [3.0, 4.0, 2.5, 3.3, 0.1, 1 / 3, 7.77])
def test_traced_radius_equals_float64_ceil(rng, truncate):
    from napari_varblur.backends.jax_xla import float64_ceil_product

    k = rng.integers(0, 5000, 4000)
    near = (k / truncate).astype(np.float32)  # products at or next to integers
    sigma = np.concatenate([near, np.nextafter(near, np.float32(np.inf)),
                            np.nextafter(near, np.float32(0)),
                            rng.uniform(0, 300, 2000).astype(np.float32)])  # fmt: skip
    sigma = sigma[sigma >= np.finfo(np.float32).tiny]  # XLA flushes subnormals to 0
    expected = np.ceil(np.float64(truncate) * sigma.astype(np.float64))
    got = np.asarray(jax.jit(float64_ceil_product, static_argnums=0)(truncate, sigma))
    np.testing.assert_array_equal(got, expected)


# ---------------------------------------------------------------- aliasing


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize(
    "call",
    [
        dict(sigma=0.0),
        dict(sigma=(0.0, 0.0)),
        dict(sigma=1.0, radius=0),
        dict(sigma=2.0),
        dict(sigma="map"),
    ],
)
def test_result_is_a_new_writeable_array(backend, precision, call):
    image = np.arange(30.0, dtype=precision).reshape(5, 6)
    kept = image.copy()
    sigma = np.full(image.shape, 0.0) if call["sigma"] == "map" else call["sigma"]
    out = gaussian_blur(image, sigma, radius=call.get("radius"), backend=backend,
                        precision=precision)  # fmt: skip
    assert out is not image and not np.shares_memory(out, image)
    assert out.flags.writeable
    out[...] = -1
    np.testing.assert_array_equal(image, kept)


# ---------------------------------------------------------------- call-time errors


@pytest.mark.parametrize(
    ("sigma", "kwargs", "message"),
    [
        (np.full((64, 64), 1e6), {"mode": "reflect"}, "sigma: the sigma map needs radius"),
        (1e308, {}, "sigma: radius inf on axis 0 is too large"),
        (1.0, {"axes": 3}, "axes: axis 3 is out of range"),
        (np.full((64, 64), -1.0), {}, "sigma: the sigma map is negative"),
        (1.0, {"cval": "x"}, "cval: must be a real number"),
    ],
)
def test_dask_input_raises_at_call_time_like_numpy(sigma, kwargs, message):
    import dask.array as da

    with pytest.raises(ValueError, match=message):
        gaussian_blur(np.ones((64, 64)), sigma, **kwargs)
    with pytest.raises(ValueError, match=message):
        gaussian_blur(da.ones((64, 64), chunks=32), sigma, **kwargs)
    if isinstance(sigma, np.ndarray):  # a lazy map too
        with pytest.raises(ValueError, match=message):
            gaussian_blur(da.ones((64, 64), chunks=32), da.from_array(sigma, chunks=32), **kwargs)


def test_overflowing_sigma_is_a_value_error_naming_sigma():
    with pytest.raises(ValueError, match=r"^sigma: radius inf on axis 1 is too large"):
        gaussian_blur(np.ones((4, 4)), (1.0, 1e308))


# ---------------------------------------------------------------- threads


def test_concurrent_numba_calls_survive_the_workqueue_layer():
    """Numba's fallback layer aborts the process when two threads launch kernels at
    once; napari's workers and dask's threaded scheduler do exactly that."""
    code = textwrap.dedent(
        """
        import threading
        import dask, dask.array as da, numba, numpy as np
        from napari_varblur import gaussian_blur

        image = np.random.default_rng(0).random((256, 256))
        sigma_map = np.full(image.shape, 1.5)
        expected = gaussian_blur(image, sigma_map, backend="reference", precision="float64")

        def work():
            for _ in range(20):
                gaussian_blur(image, 2.0, backend="numba")
                out = gaussian_blur(image, sigma_map, backend="numba", precision="float64")
                assert np.abs(out - expected).max() < 1e-12

        threads = [threading.Thread(target=work) for _ in range(3)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        lazy = gaussian_blur(da.from_array(image, chunks=32), 2.0, backend="numba")
        with dask.config.set(scheduler="threads", num_workers=4):
            lazy.compute()
        print(numba.threading_layer())
        """
    )
    env = {**__import__("os").environ, "NUMBA_THREADING_LAYER": "workqueue"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().endswith("workqueue")


# ---------------------------------------------------------------- resources


def test_numba_compiles_one_map_kernel_per_precision(rng):
    from napari_varblur.backends.numba import gathers

    before = set(gathers._varying3d.signatures)  # other files' tests (masks) add theirs
    image = rng.random((2, 9, 140))
    base = rng.uniform(0, 2, image.shape)
    maps = [base, base.astype(np.float32), (base * 2).astype(np.int16), np.asfortranarray(base),
            base[:, :, ::-1], np.broadcast_to(base[:1], image.shape),
            np.stack([base, base, base], -1)]  # fmt: skip
    for precision in ("float32", "float64"):
        for m in maps:
            gaussian_blur(image, m, backend="numba", precision=precision)
            plane = m[0][..., :2] if m.ndim == 4 else m[0]
            gaussian_blur(image[0], plane, backend="numba", precision=precision)
    assert len(set(gathers._varying3d.signatures) - before) <= 2


def test_reference_map_memory_does_not_grow_with_the_radius(rng):
    """It held 2R + 1 image-sized weight arrays per axis: 147x the image at sigma 10."""
    import tracemalloc

    image = rng.random((64, 64))
    peaks = []
    for sigma in (2.0, 10.0):  # radius 6 and 30: 13 and 61 offsets per axis
        tracemalloc.start()
        gaussian_blur(image, np.full(image.shape, sigma), backend="reference",
                      precision="float64")  # fmt: skip
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    extended = (64 + 60) ** 2 * 8  # the image padded by the radius on every side
    assert peaks[1] < extended + 20 * image.nbytes, peaks[1] / image.nbytes
    assert peaks[1] - extended < 1.5 * peaks[0], peaks


def test_jax_sigma_sweep_compiles_at_most_three_programs():
    """Dragging the widget's sigma factor 1.0 -> 3.5 over the sample's map built a new
    program for each largest radius (6 here)."""
    from napari_varblur.backends import jax_xla
    from napari_varblur.sample import fluorescence_sample

    image, sigma_map = fluorescence_sample(64)
    jax_xla._varying_jit.clear_cache()
    radii = set()
    for factor in np.arange(1.0, 3.51, 0.25):
        gaussian_blur(image, sigma_map * factor, backend="jax")
        radii.add(math.ceil(3 * float((sigma_map * factor).max())))
    assert len(radii) >= 6  # the sweep really crosses many radii
    assert jax_xla._varying_jit._cache_size() <= 3


def test_an_infinite_cval_through_a_long_compensated_loop_stays_inf():
    """JAX sums loops over more than 256 offsets with Kahan's compensation, whose step
    ``(t - s) - y`` is ``inf - inf`` = NaN once the sum is inf: an infinite cval read by
    a long window (sigma 43.5 along a length-1 axis, 263 offsets) gave NaN where every
    other backend gives inf.  Found by the property sweep below."""
    image = np.array([[-25.0, 13.0, 64.0]])
    sigma = np.array([[[43.5, 1.03], [0.0, 0.0], [22.6, 0.95]]])
    expected = reference(image, sigma, mode="constant", cval=np.inf)
    assert np.isinf(expected[0, 0]) and np.isinf(expected[0, 2]) and np.isfinite(expected[0, 1])
    for backend in FAST_BACKENDS:
        for precision in ("float32", "float64"):
            out = gaussian_blur(image, sigma, mode="constant", cval=np.inf, backend=backend,
                                precision=precision)  # fmt: skip
            np.testing.assert_array_equal(np.isinf(out), np.isinf(expected))
            assert not np.isnan(out).any(), (backend, precision, out)


# ---------------------------------------------------------------- property sweeps


@settings(max_examples=30, deadline=None)
@given(
    shape=st.lists(st.integers(1, 12), min_size=1, max_size=2).map(tuple),
    big=st.floats(0, 60),
    mode=st.sampled_from(ALL_MODES),
    cval=st.sampled_from([0.5, -3.0, np.nan, np.inf]),
    precision=st.sampled_from(["float32", "float64"]),
    seed=st.integers(0, 2**16),
)
def test_property_large_sigma_and_non_finite_cval(shape, big, mode, cval, precision, seed):
    """One axis up to sigma 60 (radius 180), the other small; any cval; every backend."""
    gen = np.random.default_rng(seed)
    image = gen.normal(size=shape) * 100
    sigma = np.stack([gen.uniform(0.3, 1.5, shape) for _ in shape], axis=-1)
    sigma[..., gen.integers(len(shape))] = gen.uniform(big / 2, big, shape)
    if gen.random() < 0.5:
        sigma[gen.random(shape) < 0.2] = 0
    kw = dict(mode=mode, cval=cval)
    with np.errstate(invalid="ignore"):
        expected = reference(image, sigma, **kw)
    for backend in FAST_BACKENDS:
        out = gaussian_blur(image, sigma, backend=backend, precision=precision, **kw)
        np.testing.assert_array_equal(np.isinf(out), np.isinf(expected))
        assert_close(np.where(np.isinf(out), 0, out), np.where(np.isinf(expected), 0, expected),
                     precision, image)  # fmt: skip
    global_sigma = tuple(float(v) for v in sigma.reshape(-1, len(shape)).max(axis=0))
    with np.errstate(invalid="ignore"):
        expected = reference(image, global_sigma, **kw)
    for backend in FAST_BACKENDS:
        out = gaussian_blur(image, global_sigma, backend=backend, precision=precision, **kw)
        np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))


@settings(max_examples=15, deadline=None)
@given(
    k=st.lists(st.integers(0, 24), min_size=6, max_size=6),
    nudge=st.sampled_from([-1, 0, 1]),
    truncate=st.sampled_from([3.0, 4.0, 2.5, 3.3]),
    mode=st.sampled_from(["crop", "reflect", "constant"]),
)
def test_property_traced_sigma_on_radius_jumps(k, nudge, truncate, mode):
    """Traced sigmas exactly on (and one ulp around) the radius jumps agree with the
    reference, whose radii come from float64."""
    values = (np.asarray(k * 4, np.float64).reshape(4, 6) / truncate).astype(np.float32)
    if nudge:
        values = np.nextafter(values, np.float32(np.inf if nudge > 0 else 0))
    image = np.random.default_rng(sum(k)).random((4, 6)).astype(np.float32)
    run = jax.jit(lambda x, s: jax_blur(x, s, mode=mode, cval=2.0, truncate=truncate,
                                        max_radius=40))  # fmt: skip
    out = np.asarray(run(jnp.asarray(image), jnp.asarray(values)))
    expected = reference(image, values, mode=mode, cval=2.0, truncate=truncate)
    assert_close(out, expected, "float32", image)


# JAX casts the float64 weight tables to float16 (tiny tails overflow 1/x: expected).
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_jax_native_half_precision_image_with_a_map():
    image = jnp.zeros((16, 16), jnp.float16).at[8, 8].set(1)
    sigma_map = np.full((16, 16), 1.5, np.float32)
    out = jax_blur(image, sigma_map)
    traced = jax.jit(lambda s: jax_blur(image, s, max_radius=5))(jnp.asarray(sigma_map))
    expected = reference(np.asarray(image, np.float64), sigma_map)
    for result in (out, traced):
        assert result.dtype == jnp.float16
        np.testing.assert_allclose(np.asarray(result, np.float64), expected, atol=1e-3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sigma": 10**400}, r"^sigma: must be a finite number >= 0"),
        ({"sigma": (1.0, 10**400)}, r"^sigma: per-axis sigma is infinite"),
        ({"sigma": 1.0, "truncate": 10**400}, r"^truncate: must be a finite number > 0"),
    ],
)
def test_numbers_beyond_float_range_are_value_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        gaussian_blur(np.ones((4, 4)), **kwargs)


def test_empty_dask_map_is_fine():
    import dask.array as da

    out = gaussian_blur(da.ones((0, 5), chunks=2), da.ones((0, 5), chunks=2))
    assert out.compute().shape == (0, 5)
