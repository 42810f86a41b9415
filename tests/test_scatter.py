"""``model="scatter"``: the exact transpose of the gather, checked by the dot-product
test <Ax, y> = <x, A^T y> (float64, 1e-12 of |Ax| |y|) on every route the router runs,
and by its own properties (flux, non-finite reach, JAX's linear_transpose, dask)."""

from __future__ import annotations

import gc
from dataclasses import replace

import numpy as np
import pytest

from conftest import ALL_BACKENDS, ALL_MODES, FAST_BACKENDS
from napari_varblur import backends, gaussian_blur
from napari_varblur.core.level_plan import plan_levels
from napari_varblur.core.spec import BlurSpec
from napari_varblur.engine import router
from napari_varblur.engine.cost import Plan
from napari_varblur.engine.planner import Route

SHAPES = [(23,), (17, 19), (6, 7, 9)]
BOUND = 1e-12


def _mismatch(forward, backward, shape, rng) -> float:
    x, y = rng.standard_normal(shape), rng.standard_normal(shape)
    ax, aty = forward(x), backward(y)
    return abs(np.vdot(ax, y) - np.vdot(x, aty)) / (np.linalg.norm(ax) * np.linalg.norm(y))


def _pair(sigma, backend, **kw):
    """The gather (its linear part: cval 0) and the scatter, as functions of the image."""
    kw = dict(backend=backend, precision="float64", **kw)
    gather = lambda x: gaussian_blur(x, sigma, **{**kw, "cval": 0.0})  # noqa: E731
    scatter = lambda y: gaussian_blur(y, sigma, model="scatter", **kw)  # noqa: E731
    return gather, scatter


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("mode", ALL_MODES)
def test_dot_product_every_mode_dim_and_map(backend, mode):
    rng = np.random.default_rng(hash((backend, mode)) % 2**32)
    worst = {}
    for shape in SHAPES:
        smap = rng.uniform(0.3, 3.0, shape)
        cases = {
            "global": (1.7, {}),
            "map": (smap, {}),
            "per-axis map": (rng.uniform(0.3, 3.0, (*shape, len(shape))), {}),
            "tolerance": (smap, {"tolerance": 1e-2}),
            "mask": (smap, {"mask": rng.random(shape) > 0.3}),
            "global mask omit": (2.2, {"mask": rng.random(shape) > 0.2, "nan_policy": "omit"}),
        }
        for name, (sigma, kw) in cases.items():
            gather, scatter = _pair(sigma, backend, mode=mode, cval=0.7, **kw)
            worst[(shape, name)] = _mismatch(gather, scatter, shape, rng)
    assert max(worst.values()) <= BOUND, max(worst.items(), key=lambda kv: kv[1])


def _spec(image, sigma, **kw):
    return BlurSpec.from_args(image, sigma, precision="float64", **kw)


def _routes(spec, backend_name):
    """The level routes a spec can take on a backend: the tile walk (whole-image tiles
    and small tiles), and the bands where the backend has them."""
    backend = backends.load(backend_name)
    levels = plan_levels(spec)
    assert levels is not None
    routes = {
        "walk": Route(backend, "levels", levels, Plan(levels, spec.shape)),
        "walk tiles": Route(backend, "levels", levels, Plan(levels, (5,) * len(spec.axes))),
    }
    if backend.bands is not None and levels.diagonal:
        bands = backend.bands.plan(spec, levels.levels[0])
        if bands is not None:
            plan = Plan(levels, spec.shape, None, bands)
            routes["bands"] = Route(backend, "levels", levels, plan)
    return routes


@pytest.mark.parametrize("backend", FAST_BACKENDS)
@pytest.mark.parametrize("mode", ALL_MODES)
def test_dot_product_every_level_route(backend, mode):
    """The walk and the bands mix levels alike: one transpose serves them all."""
    rng = np.random.default_rng(7)
    for shape in SHAPES[1:] if backend == "numba" else SHAPES[1:2]:  # JAX compiles per level
        tilted = 0.4 + 2.6 * sum(np.indices(shape)) / sum(shape)  # varies along every axis
        ramp = np.broadcast_to(np.linspace(0.4, 3.0, shape[-1]), shape)
        per_axis = np.stack([tilted, ramp[..., ::-1]][: len(shape)] * 2, axis=-1)[..., : len(shape)]
        for sigma in [tilted, ramp, per_axis]:
            spec = _spec(np.zeros(shape), sigma, mode=mode, tolerance=1e-2, backend=backend)
            _each_route(spec, backend, shape, rng)


def _each_route(spec, backend, shape, rng):
    for name, chosen in _routes(spec, backend).items():

        def gather(x, chosen=chosen):
            return router.blur(replace(spec, image=x), chosen=chosen)

        def scatter(y, chosen=chosen):
            return router.blur(replace(spec, image=y, model="scatter"), chosen=chosen)

        assert _mismatch(gather, scatter, shape, rng) <= BOUND, (shape, name)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_scatter_conserves_flux_and_matches_the_dense_transpose(backend):
    """Each gather row sums to 1 outside constant mode, so the scatter keeps the total;
    and its matrix is the gather's transposed, column by column."""
    rng = np.random.default_rng(3)
    shape = (9, 11)
    smap = rng.uniform(0.5, 2.5, shape)
    y = rng.random(shape) * 100
    for mode in ["crop", "reflect", "mirror", "nearest", "wrap"]:
        out = gaussian_blur(y, smap, mode=mode, model="scatter", backend=backend,
                            precision="float64")  # fmt: skip
        assert out.sum() == pytest.approx(y.sum(), rel=1e-12), mode
    basis = np.eye(y.size).reshape(y.size, *shape)
    a = np.stack([gaussian_blur(b, smap, mode="crop", backend="reference", precision="float64")
                  for b in basis]).reshape(y.size, -1).T  # fmt: skip
    at = np.stack([gaussian_blur(b, smap, mode="crop", model="scatter", backend=backend,
                                 precision="float64")
                   for b in basis]).reshape(y.size, -1).T  # fmt: skip
    np.testing.assert_allclose(at, a.T, atol=1e-14)


@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_a_non_finite_pixel_spreads_over_its_own_window_only(backend):
    rng = np.random.default_rng(5)
    shape = (40, 40)
    smap = np.full(shape, 1.0)
    smap[20, 20] = 3.0  # radius 9 at the NaN, 3 around it
    y = rng.random(shape)
    y[20, 20] = np.nan
    y[5, 30] = np.inf
    ref = gaussian_blur(y, smap, model="scatter", backend="reference", precision="float64")
    out = gaussian_blur(y, smap, model="scatter", backend=backend, precision="float64")
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    assert np.isnan(out[20, 11]) and not np.isnan(out[20, 10])  # reach 9 exactly
    finite = np.isfinite(ref)
    np.testing.assert_allclose(out[finite], ref[finite], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("sigma", [2.0, "map"])
def test_float32_scatter_within_float32_rounding_of_float64(backend, sigma):
    rng = np.random.default_rng(11)
    y = rng.random((64, 48)).astype(np.float32) * 1000
    s = rng.uniform(0.5, 4.0, y.shape) if sigma == "map" else sigma
    lo = gaussian_blur(y, s, model="scatter", backend=backend, precision="float32")
    hi = gaussian_blur(y, s, model="scatter", backend=backend, precision="float64")
    assert lo.dtype == np.float32
    np.testing.assert_allclose(lo, hi, rtol=0, atol=1e-5 * np.abs(y).max() * 10)


def test_jax_native_scatter_is_the_linear_transpose_and_differentiable():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from napari_varblur.jax import gaussian_blur as jblur

    with jax.enable_x64(True):
        rng = np.random.default_rng(2)
        shape = (12, 14)
        smap = jnp.asarray(rng.uniform(0.5, 2.5, shape))
        y = jnp.asarray(rng.standard_normal(shape))
        for mode in ALL_MODES:
            gather = lambda x, mode=mode: jblur(x, smap, mode=mode, cval=0.0)  # noqa: E731
            (expected,) = jax.linear_transpose(gather, jnp.zeros(shape))(y)
            out = jblur(y, smap, mode=mode, model="scatter")
            np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
            numba = gaussian_blur(np.asarray(y), np.asarray(smap), mode=mode, model="scatter",
                                  backend="reference", precision="float64")  # fmt: skip
            np.testing.assert_allclose(out, numba, rtol=1e-12, atol=1e-12)
        # Differentiable in the image and in the map.
        loss = lambda img, s: jnp.sum(jblur(img, s, model="scatter", max_radius=8) ** 2)  # noqa: E731
        g_img, g_map = jax.grad(loss, argnums=(0, 1))(y, smap)
        assert np.all(np.isfinite(g_img)) and np.any(np.asarray(g_map) != 0)
        eps = 1e-6
        bump = jnp.zeros(shape).at[6, 7].set(eps)
        numeric = (loss(y, smap + bump) - loss(y, smap - bump)) / (2 * eps)
        assert float(g_map[6, 7]) == pytest.approx(float(numeric), rel=1e-5)


def test_dask_scatter_equals_numpy():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(4)
    y = rng.random((96, 80))
    smap = rng.uniform(0.5, 4.0, y.shape)
    for mode in ["crop", "reflect", "nearest", "wrap"]:
        expected = gaussian_blur(y, smap, mode=mode, model="scatter", precision="float64")
        lazy = gaussian_blur(da.from_array(y, chunks=(40, 30)),
                             da.from_array(smap, chunks=(40, 30)),
                             mode=mode, model="scatter", precision="float64")  # fmt: skip
        np.testing.assert_allclose(lazy.compute(scheduler="threads"), expected, atol=1e-12)


def test_bad_model_is_refused_by_name():
    with pytest.raises(ValueError, match="model"):
        gaussian_blur(np.zeros((4, 4)), 1.0, model="push")


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize(("n", "pad"), [(7, 3), (5, 12), (1, 4)])
@pytest.mark.parametrize("axis", [0, 1])
def test_folding_in_place_is_folding(mode, n, pad, axis):
    """The Numba scatter folds its extension into the middle in place: the same sums
    as ``fold_along`` (a new array), for every mode's source, pads beyond the axis
    (wrap and reflect fold more than once) and a 1-pixel axis."""
    from napari_varblur.core.modes import canonical_mode
    from napari_varblur.core.taps import fold_along, fold_into_middle

    source = canonical_mode(mode).extend(np.arange(-pad, n + pad), n)
    shape = [3, 3]
    shape[axis] = n + 2 * pad
    ext = np.random.default_rng(n + pad).random(shape)
    expected = fold_along(ext, axis, source, n)
    out = fold_into_middle(ext.copy(), axis, source, n, pad)
    np.testing.assert_allclose(out, expected, rtol=1e-15, atol=0)
    assert out.shape == expected.shape


def test_a_level_transpose_reuses_its_mixes_only_for_the_same_map():
    """A deblur transposes one spec's map every iteration: the pixels' level mixes and
    the level tables are kept for it, and never serve another map (nor another spec
    built from the same array) with the same levels."""
    from napari_varblur.engine import transpose

    rng = np.random.default_rng(4)
    y = rng.random((48, 64)).astype(np.float32)
    ramp = np.broadcast_to(np.linspace(1.0, 4.0, 64), y.shape).copy()
    spec = BlurSpec.from_args(y, ramp, tolerance=1e-3, model="scatter", backend="numba")
    levels = plan_levels(spec)
    dtype = np.dtype(np.float32)
    first = transpose._prepared(spec, levels, dtype)
    assert transpose._prepared(spec, levels, dtype) is first  # the same spec: kept
    for other in (ramp[:, ::-1].copy(), ramp):  # another map; the same array, a new spec
        spec2 = BlurSpec.from_args(y, other, tolerance=1e-3, model="scatter", backend="numba")
        kept = transpose.level_scatter(spec2, levels, backends.load("numba"))
        assert transpose._prepared(spec2, levels, dtype) is not first
        transpose._LAST[:] = [None, None, None]
        fresh = transpose.level_scatter(spec2, levels, backends.load("numba"))
        np.testing.assert_array_equal(kept, fresh)
    spec64 = replace(spec, precision=np.dtype(np.float64))  # the same map, float64
    kept = transpose._prepared(spec, levels, dtype)
    assert transpose._prepared(spec64, levels, np.dtype(np.float64)) is not kept
    # The levels' weights are kept too (and reused: the same result), within the budget.
    first = transpose.level_scatter(spec, levels, backends.load("numba"))
    weights = transpose._prepared(spec, levels, dtype)[2]
    assert weights and sum(w.size for _, w in weights.values()) <= 2 * y.size
    again = transpose.level_scatter(spec, levels, backends.load("numba"))
    np.testing.assert_array_equal(again, first)
    # A radial map's level boxes overlap (21 images' worth here): 2 images are kept.
    radial = 1 + 3 * np.hypot(*np.mgrid[-1:1:48j, -1:1:64j]) / np.sqrt(2)
    spec_r = BlurSpec.from_args(y, radial, tolerance=1e-3, model="scatter", backend="numba")
    levels_r = plan_levels(spec_r)
    ring = transpose.level_scatter(spec_r, levels_r, backends.load("numba"))
    kept_r = transpose._prepared(spec_r, levels_r, dtype)[2]
    assert y.size <= sum(w.size for _, w in kept_r.values()) <= 2 * y.size
    again = transpose.level_scatter(spec_r, levels_r, backends.load("numba"))
    np.testing.assert_array_equal(again, ring)
    del levels, weights, kept, first, levels_r, kept_r  # a deblur returns: nothing kept
    gc.collect()
    assert transpose._LAST == [None, None, None]


@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_float32_level_transpose_within_float32_rounding_of_float64(backend):
    """The level transpose adds its levels up in the precision, as the forward mix does:
    on every level route, float32 stays within float32 rounding of float64."""
    rng = np.random.default_rng(12)
    y = rng.random((40, 36)) * 1000
    sigma = np.broadcast_to(np.linspace(0.5, 4.0, y.shape[1]), y.shape)
    spec = _spec(y, sigma, mode="reflect", tolerance=1e-3, backend=backend, model="scatter")
    for name, chosen in _routes(spec, backend).items():
        hi = router.blur(spec, chosen=chosen)
        lo = router.blur(replace(spec, image=y.astype(np.float32), precision="float32"),
                         chosen=chosen)  # fmt: skip
        assert lo.dtype == np.float32, name
        np.testing.assert_allclose(lo, hi, rtol=0, atol=1e-5 * y.max() * 10, err_msg=name)
