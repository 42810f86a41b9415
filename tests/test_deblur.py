"""``deblur`` and ``blur_operator``: scikit-image's richardson_lucy as the oracle at a
constant sigma, the likelihood and the flux as Richardson-Lucy's own invariants, and
the edges of the input (masks, NaN, dask tiles, bad arguments)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from conftest import FAST_BACKENDS
from napari_varblur import blur_operator, deblur, gaussian_blur
from napari_varblur.core.taps import gaussian_taps

RNG = np.random.default_rng(12)


def _dark_field(shape, margin):
    truth = np.zeros(shape)
    inner = tuple(slice(margin, n - margin) for n in shape)
    truth[inner] = RNG.random(truth[inner].shape) * 100
    return truth


@pytest.mark.parametrize("backend", FAST_BACKENDS)
@pytest.mark.parametrize(("shape", "sigma"), [((72, 80), 1.5), ((20, 36, 40), 1.0)])
def test_agrees_with_scikit_image_at_a_constant_sigma(backend, shape, sigma):
    restoration = pytest.importorskip("skimage.restoration")
    r = int(np.ceil(3 * sigma))
    truth = _dark_field(shape, 2 * r + 1)
    observed = gaussian_blur(truth, sigma, mode="constant", precision="float64")
    w = gaussian_taps(sigma, r) / gaussian_taps(sigma, r).sum()
    psf = w
    for _ in shape[1:]:
        psf = np.multiply.outer(psf, w)
    expected = restoration.richardson_lucy(observed, psf, num_iter=30, clip=False,
                                           filter_epsilon=1e-12)  # fmt: skip
    ours = deblur(observed, sigma, iterations=30, mode="constant", precision="float64",
                  backend=backend)  # fmt: skip
    assert np.abs(ours - expected).max() <= 1e-8 * expected.max()


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_a_dark_background_decays_to_zero_not_into_subnormal_floats(precision):
    """Where nothing was observed the estimate shrinks by a factor each step; below eps**2
    of the largest value it is 0, so no step ever sums subnormal floats (x86 cores run
    them ~100x slower), and every other value is as before."""
    shape = (96, 100)
    truth = np.zeros(shape)
    truth[40:48, 30:70] = RNG.random((8, 40)) * 200
    smap = np.broadcast_to(np.linspace(1.0, 3.0, shape[1]), shape)
    y = RNG.poisson(gaussian_blur(truth, smap, mode="crop")).astype(np.float32)
    tiny, eps = np.finfo(precision).tiny, np.finfo(precision).eps
    steps = []
    deblur(y, smap, iterations=60, mode="crop", precision=precision, backend="numba",
           callback=lambda k, x: steps.append(x.copy()))  # fmt: skip
    for x in steps:
        assert not ((x > 0) & (x < tiny)).any()
        assert x[(x > 0)].min() >= eps**2 * x.max()
    assert (steps[-1] == 0).any()  # the background did reach the floor


def _nll(y, ax):
    return float(np.sum(ax - np.where(y > 0, y * np.log(np.where(ax > 0, ax, 1)), 0)))


@pytest.mark.parametrize("model", ["gather", "scatter"])
@pytest.mark.parametrize("mode", ["crop", "reflect", "nearest"])
def test_likelihood_never_increases_and_flux_is_kept(mode, model):
    shape = (40, 44)
    smap = np.broadcast_to(np.linspace(0.8, 3.0, shape[1]), shape)
    kw = dict(mode=mode, model=model, precision="float64")
    truth = gaussian_blur(RNG.random(shape) * 50, 1.0, precision="float64")
    y = RNG.poisson(gaussian_blur(truth, smap, **kw)).astype(float)
    other = {"gather": "scatter", "scatter": "gather"}[model]
    norm = gaussian_blur(np.ones(shape), smap, **{**kw, "model": other})
    nll, flux = [], []

    def watch(k, x):
        assert not x.flags.writeable
        nll.append(_nll(y, gaussian_blur(x, smap, **kw)))
        flux.append(float(np.sum(norm * x)))

    deblur(y, smap, iterations=25, callback=watch, **kw)
    assert len(nll) == 25
    assert all(b <= a + 1e-9 * abs(a) for a, b in itertools.pairwise(nll))
    np.testing.assert_allclose(flux, y.sum(), rtol=1e-9)


def test_rl_tv_is_rl_at_zero_and_holds_noise_back():
    shape = (48, 48)
    truth = np.zeros(shape)
    truth[12:36, 12:36] = 40.0
    y = RNG.poisson(gaussian_blur(truth, 2.0, precision="float64")).astype(float)
    kw = dict(iterations=60, precision="float64")
    rl = deblur(y, 2.0, **kw)
    np.testing.assert_array_equal(deblur(y, 2.0, method="rl_tv", **kw), rl)
    tv = deblur(y, 2.0, method="rl_tv", regularization=0.01, pixel_spacing=(1.0, 1.0), **kw)
    assert np.all(np.isfinite(tv)) and tv.min() >= 0
    flat = (slice(16, 32), slice(16, 32))
    assert tv[flat].std() < rl[flat].std()  # flatter where the truth is flat


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_tv_term_is_the_divergence_of_the_unit_gradient(dtype):
    """RL-TV's curvature term against a plain formula (forward differences, their length,
    backward differences by ``np.roll``, no flux out): blurred axes 0 and 2 of a volume
    with their own spacing, flat regions included."""
    from napari_varblur.restore.iterations import tv_term

    x = RNG.random((7, 5, 9)) * 10
    x[2:5, :, 3:7] = 4.0
    x = x.astype(dtype)
    axes, spacing, weight = (0, 2), (2.0, 0.5), 0.3
    w = x.astype(np.float64)
    grads = [np.diff(w, axis=a, append=np.take(w, [-1], axis=a)) / d for a, d in zip(axes, spacing)]
    floor = 1e-6 * w.max()
    size = np.sqrt(sum(g * g for g in grads) + floor**2)
    units = [g / size for g in grads]
    expected = weight * sum((u - np.roll(u, 1, axis=a) * (np.indices(u.shape)[a] > 0)) / d
                            for u, a, d in zip(units, axes, spacing))  # fmt: skip
    out = tv_term(axes, spacing, weight)(x)
    assert out.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * np.abs(expected).max())


def test_acceleration_stop_and_callback_end_the_run():
    shape = (40, 40)
    y = RNG.poisson(gaussian_blur(RNG.random(shape) * 80, 2.0, precision="float64")) * 1.0
    kw = dict(precision="float64")
    seen = []
    deblur(y, 2.0, iterations=200, stop=1e-3, callback=lambda k, x: seen.append(k), **kw)
    assert 1 < len(seen) < 200
    seen.clear()
    deblur(y, 2.0, iterations=50, callback=lambda k, x: seen.append(k) or k == 7, **kw)
    assert seen[-1] == 7
    ax = lambda x: gaussian_blur(x, 2.0, **kw)  # noqa: E731
    plain, fast = (deblur(y, 2.0, iterations=10, acceleration=a, **kw) for a in (False, True))
    assert _nll(y, ax(fast)) < _nll(y, ax(plain))
    assert fast.min() >= 0 and np.all(np.isfinite(fast))


def test_masked_and_nan_pixels_carry_no_weight_and_the_output_is_finite():
    shape = (36, 40)
    smap = RNG.uniform(1.0, 2.5, shape)
    y = RNG.poisson(gaussian_blur(RNG.random(shape) * 30, smap, precision="float64")) * 1.0
    mask = np.ones(shape, bool)
    mask[10:14, 5:30] = False
    other = y.copy()
    other[~mask] = 1e6  # what a masked pixel holds must not matter
    kw = dict(iterations=15, mask=mask, precision="float64")
    a, b = deblur(y, smap, **kw), deblur(other, smap, **kw)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    nan = y.copy()
    nan[~mask] = np.nan
    c = deblur(nan, smap, iterations=15, nan_policy="omit", precision="float64")
    np.testing.assert_allclose(c, a, rtol=1e-12, atol=1e-12)
    assert np.all(np.isfinite(c)) and c.min() >= 0
    with pytest.raises(ValueError, match="NaN"):
        deblur(nan, smap, iterations=3, nan_policy="raise")


def test_inputs_are_never_modified_and_dtypes_follow_precision():
    y = RNG.random((16, 18)).astype(np.float32) * 10
    y[0, 0] = -1.0  # negative counts read as 0, in the copy only
    smap, mask = RNG.uniform(0.5, 2.0, y.shape), RNG.random(y.shape) > 0.1
    before = [y.copy(), smap.copy(), mask.copy()]
    out = deblur(y, smap, iterations=5, mask=mask)
    assert out.dtype == np.float32 and out.shape == y.shape and out.min() >= 0
    for a, b in zip(before, [y, smap, mask]):
        np.testing.assert_array_equal(a, b)
    assert deblur(np.zeros((0, 4)), 1.0, iterations=2).shape == (0, 4)
    assert deblur(np.ones((1, 5)), 1.0, iterations=2).shape == (1, 5)


def test_channels_are_deblurred_apart():
    y = RNG.random((20, 22, 3)) * 10
    together = deblur(y, 1.5, iterations=8, channel_axis=-1, precision="float64")
    for c in range(3):
        alone = deblur(y[..., c], 1.5, iterations=8, precision="float64")
        np.testing.assert_allclose(together[..., c], alone, rtol=1e-12, atol=1e-12)


def test_dask_tiles_stay_within_the_stated_difference():
    """docs/deblur.md: tiles with a halo of four radii stay within 1e-3 of the largest
    value of the untiled estimate up to 100 iterations."""
    da = pytest.importorskip("dask.array")
    shape = (128, 120)
    smap = np.broadcast_to(np.linspace(1.0, 3.0, shape[1]), shape)
    y = RNG.poisson(gaussian_blur(RNG.random(shape) * 100, smap, precision="float64")) * 1.0
    for mode in ["crop", "reflect", "wrap"]:
        whole = deblur(y, smap, iterations=30, mode=mode, precision="float64")
        lazy = deblur(da.from_array(y, chunks=48), da.from_array(smap, chunks=48), iterations=30,
                      mode=mode, precision="float64")  # fmt: skip
        assert isinstance(lazy, da.Array)
        assert np.abs(lazy.compute(scheduler="threads") - whole).max() <= 1e-3 * whole.max()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"iterations": 0}, "iterations"),
        ({"iterations": 2.5}, "iterations"),
        ({"iterations": "3"}, "iterations"),
        ({"iterations": True}, "iterations"),
        ({}, "iterations"),
        ({"iterations": 3, "method": "wiener"}, "method"),
        ({"iterations": 3, "model": "push"}, "model"),
        ({"iterations": 3, "method": "rl_tv", "regularization": -1.0}, "regularization"),
        ({"iterations": 3, "method": "rl_tv", "regularization": np.nan}, "regularization"),
        ({"iterations": 3, "regularization": 0.1}, "regularization"),
        ({"iterations": 3, "pixel_spacing": (1.0, 2.0, 3.0)}, "pixel_spacing"),
        ({"iterations": 3, "pixel_spacing": -1.0}, "pixel_spacing"),
        ({"iterations": 3, "stop": 0.0}, "stop"),
        ({"iterations": 3, "callback": 5}, "callback"),
        ({"iterations": 3, "sigma": -1.0}, "sigma"),
        ({"iterations": 3, "sigma": np.ones((3, 3))}, "sigma"),
        ({"iterations": 3, "mask": np.ones((2, 2), bool)}, "mask"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    y = np.ones((8, 8))
    kwargs = {"sigma": 1.0, **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        deblur(y, **kwargs)
    np.testing.assert_array_equal(y, 1.0)


@pytest.mark.parametrize("mode", ["crop", "mirror", "constant"])
def test_blur_operator_is_the_blur_and_its_transpose(mode):
    from scipy.sparse.linalg import lsqr

    rng = np.random.default_rng(7)  # its own draws: xdist's test order moves RNG's
    shape = (12, 10)
    smap = rng.uniform(0.5, 2.0, shape)
    op = blur_operator(smap, shape, mode=mode)
    x, y = rng.standard_normal((2, op.shape[0]))
    ax = op.matvec(x)
    np.testing.assert_allclose(ax, gaussian_blur(x.reshape(shape), smap, mode=mode,
                                                 precision="float64").ravel())  # fmt: skip
    assert abs(ax @ y - x @ op.rmatvec(y)) <= 1e-12 * np.linalg.norm(ax) * np.linalg.norm(y)
    solution = lsqr(op, ax, atol=1e-12, btol=1e-12, iter_lim=5000)[0]
    # lsqr on a blur (ill-conditioned) stops near, not at, the solution: its residual
    # is small against the data, not every pixel within 1e-6 (CI saw one at 1.2e-6).
    assert np.linalg.norm(op.matvec(solution) - ax) <= 1e-5 * np.linalg.norm(ax)
    with pytest.raises(TypeError, match="cval"):
        blur_operator(smap, shape, cval=1.0)


@pytest.mark.skipif("jax" not in FAST_BACKENDS, reason="JAX is not installed")
def test_a_paired_jax_route_sets_its_map_up_once(monkeypatch):
    """A deblur's or an operator's route keeps JAX's per-map set-up (radii, exponents)
    in its memo: products compute it once and give what fresh calls give; a map that
    is not the route's own is set up anew, and a plain call keeps nothing."""
    from dataclasses import replace

    from napari_varblur.core.spec import BlurSpec
    from napari_varblur.core.taps import MapAxis
    from napari_varblur.engine import planner, router

    rng = np.random.default_rng(9)
    shape = (40, 48)
    smap = rng.uniform(0.5, 3.0, shape).astype(np.float32)
    calls = []
    radius = MapAxis.radius

    def counted(m, limit=None):  # the real radii, counted (a spy, not a mock)
        calls.append(m.n)
        return radius(m, limit)

    monkeypatch.setattr(MapAxis, "radius", counted)
    op = blur_operator(smap, shape, backend="jax", precision="float32")
    x = rng.random(shape, dtype=np.float32)
    ax, ax2, aty = op.matvec(x.ravel()), op.matvec(x.ravel()), op.rmatvec(x.ravel())
    assert len(calls) == 1  # one set-up for three products (the gather's and the scatter's)
    fresh = dict(backend="jax", precision="float32")
    np.testing.assert_array_equal(ax, gaussian_blur(x, smap, **fresh).ravel())
    np.testing.assert_array_equal(ax2, ax)
    np.testing.assert_array_equal(aty, gaussian_blur(x, smap, model="scatter", **fresh).ravel())
    spec = BlurSpec.from_args(x, smap, **fresh)
    chosen = planner.route(spec, paired=True)
    assert chosen.memo == {} and planner.route(spec).memo is None
    router.blur(spec, chosen=chosen)
    other = BlurSpec.from_args(x, smap * 0.5, **fresh)
    np.testing.assert_array_equal(router.blur(replace(other, image=x), chosen=chosen),
                                  gaussian_blur(x, smap * 0.5, **fresh))  # fmt: skip


def test_varblur_deblur_writes_what_the_library_gives(tmp_path, monkeypatch, capsys):
    from napari_varblur.app import cli

    monkeypatch.chdir(tmp_path)
    y = RNG.poisson(gaussian_blur(_dark_field((48, 40), 8), 1.5, precision="float64")) * 1.0
    smap = np.broadcast_to(np.linspace(1.0, 2.0, 40), y.shape)
    np.save("in.npy", y)
    np.save("map.npy", smap)
    args = ["--sigma", "1", "--sigma-map", "map.npy", "--iterations", "12", "--mode", "reflect",
            "--precision", "float64", "--method", "rl_tv", "--regularization", "0.002"]  # fmt: skip
    assert cli.main(["deblur", "in.npy", "out.npy", *args]) == 0
    expected = deblur(y, smap, iterations=12, mode="reflect", precision="float64",
                      method="rl_tv", regularization=0.002)  # fmt: skip
    np.testing.assert_allclose(np.load("out.npy"), expected, rtol=1e-10, atol=1e-10)
    assert "varblur deblur: wrote out.npy" in capsys.readouterr().out
    assert cli.main(["deblur", "in.npy", "bad.npy", "--sigma", "1", "--iterations", "0"]) == 2
    assert "iterations" in capsys.readouterr().err
    assert cli.main(["deblur", "in.npy", "out.npy", "--sigma", "1", "--iterations", "3"]) == 2
    np.testing.assert_allclose(np.load("out.npy"), expected, rtol=1e-10, atol=1e-10)


def test_a_per_axis_tolerance_map_deblurs_on_the_exact_pair():
    """Per-axis level mixes transpose one level combination at a time: a deblur runs
    the exact gather and scatter there instead (the planner's ``paired`` route)."""
    from napari_varblur.core.spec import BlurSpec
    from napari_varblur.engine.planner import route

    shape = (12, 40, 40)
    z, y, x = np.indices(shape)
    per_axis = np.stack([1 + z / 12, 0.5 + y / 40, 0.5 + x / 40], axis=-1)
    spec = BlurSpec.from_args(np.zeros(shape, np.float32), per_axis, tolerance=1e-3)
    plain = route(spec)
    if plain.kind == "levels":
        assert not plain.levels.diagonal
    assert route(spec, paired=True).kind == "gather"
    image = RNG.random(shape).astype(np.float32) * 10
    exact = deblur(image, per_axis, iterations=3)
    tolerant = deblur(image, per_axis, iterations=3, tolerance=1e-3)
    np.testing.assert_array_equal(tolerant, exact)
