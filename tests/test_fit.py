"""fit_sigma_map: the issue's accuracy targets against the true map of a synthetic scene,
per-axis, 3-D and batch fits, unobservable regions, masks and NaN, and bad input.

Real fits compile JAX programs (seconds each), so each fit runs once per module and
several tests read it.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

from napari_varblur import fit_sigma_map, gaussian_blur
from napari_varblur.fit import control_basis, fit_sigma_map_steps, focus_pair

BORDER = 4  # "away from a thin border"


def inner(shape):
    return tuple(slice(BORDER, n - BORDER) for n in shape)


def relative_errors(fitted, truth, region):
    return (fitted[region] - truth[region]) / truth[region]


@pytest.fixture(scope="module")
def scene():
    """The issue's scene: 112x136 blobs and lines on noise, map in [0.7, 3], 1% noise."""
    return focus_pair((112, 136), sigma_range=(0.7, 3.0), noise=0.01, seed=0)


@pytest.fixture(scope="module")
def scene_fit(scene):
    sharp, blurred, _ = scene
    copies = sharp.copy(), blurred.copy()
    fit = fit_sigma_map(sharp, blurred, max_sigma=4.0)
    # Inputs are never modified.
    np.testing.assert_array_equal(sharp, copies[0])
    np.testing.assert_array_equal(blurred, copies[1])
    return fit


def test_meets_the_accuracy_targets(scene, scene_fit):
    _, _, truth = scene
    rel = relative_errors(scene_fit.model_map, truth, inner(truth.shape))
    assert np.median(np.abs(rel)) <= 0.04
    assert np.sqrt(np.mean(rel**2)) <= 0.08
    assert scene_fit.converged and scene_fit.steps >= 5
    assert scene_fit.loss[-1] < scene_fit.loss[0]  # the per-node scan starts close


def test_outputs_agree_with_each_other(scene, scene_fit):
    sharp, blurred, truth = scene
    fit = scene_fit
    assert fit.sigma_map.shape == fit.model_map.shape == fit.stderr.shape == truth.shape
    assert fit.sigma_map.dtype == np.float32 and fit.observable.dtype == bool
    assert 0 < fit.model_map.min() and fit.model_map.max() < 4.0
    # The map is NaN exactly where it is not observable, the model's map elsewhere.
    np.testing.assert_array_equal(np.isnan(fit.sigma_map), ~fit.observable)
    np.testing.assert_array_equal(fit.sigma_map[fit.observable], fit.model_map[fit.observable])
    np.testing.assert_array_equal(fit.observable, fit.stderr <= 0.1 * fit.model_map)
    assert fit.observable.mean() > 0.95  # textured everywhere: nearly all observable
    # The residual is the data minus the model, checked with another backend.
    model = gaussian_blur(sharp, fit.model_map, backend="numba", precision="float64")
    model = fit.gain * model + fit.offset
    assert fit.gain == pytest.approx(1, abs=0.01) and fit.offset == pytest.approx(0, abs=0.01)
    np.testing.assert_allclose(fit.residual, blurred - model, atol=2e-5)
    # The noise estimate finds the 1% of the range that the scene added.
    clean = gaussian_blur(sharp, truth, backend="reference")
    assert fit.noise == pytest.approx(0.01 * np.ptp(clean), rel=0.15)


def test_standard_error_is_calibrated(scene, scene_fit):
    """Where the map is smooth the error is noise: about one standard error."""
    _, _, truth = scene
    region = inner(truth.shape)
    z = (scene_fit.model_map[region] - truth[region]) / scene_fit.stderr[region]
    assert 0.6 < np.sqrt(np.mean(z**2)) < 1.7


def test_fit_is_free_of_units_gain_and_offset(scene, scene_fit):
    """Sharp in other units and blurred with a gain and an offset (two acquisitions):
    the fit finds both, and the same map within its standard error (each image is
    normalised in float64 before the float32 fit, so the data nearly coincide); the
    noise scales with blurred.  (Measured here: at most 0.45 standard errors apart,
    median 0.03; the old test asked for 1% and failed on another machine at 1.9%.)"""
    sharp, blurred, _ = scene
    fit = fit_sigma_map(10 * sharp + 3, 1.5 * blurred + 2, max_sigma=4.0)
    assert fit.gain == pytest.approx(0.15 * scene_fit.gain, rel=1e-3)
    assert fit.offset == pytest.approx(1.5 * scene_fit.offset + 2 - 3 * fit.gain, abs=1e-3)
    # L-BFGS may stop at another point of the flat valley (float32 rounding differs):
    # the maps agree to within the precision the fit states for them.
    gap = np.abs(fit.model_map - scene_fit.model_map) / scene_fit.stderr
    assert gap.max() <= 1 and np.median(gap) <= 0.1
    assert fit.noise == pytest.approx(1.5 * scene_fit.noise, rel=1e-2)
    assert fit.converged and fit.observable.mean() > 0.95


def test_without_intensity_fit_a_gain_is_reported():
    """intensity='none' on a pair with a gain and an offset cannot match: a warning,
    and no pixel claims to be measured."""
    sharp, blurred, _ = focus_pair((112, 136), sigma_range=(0.7, 3.0), seed=0)
    with pytest.warns(RuntimeWarning, match="residual"):
        fit = fit_sigma_map(sharp, 1.5 * blurred + 2, max_sigma=4.0, intensity="none")
    assert not fit.observable.any()


def test_swapped_pair_warns(scene):
    sharp, blurred, _ = scene
    with pytest.warns(RuntimeWarning, match="swapped"):
        fit_sigma_map(blurred, sharp, max_sigma=4.0, max_steps=5)


def test_identical_images_are_not_a_converged_fit(scene):
    """Nothing to fit: the loss cannot fall, so the fit says it did not converge, and
    no pixel is observable (today's code said converged, 100% observable, at 0.2)."""
    sharp, _, _ = scene
    with pytest.warns(RuntimeWarning, match="did not fall"):
        fit = fit_sigma_map(sharp, sharp, max_sigma=4.0)
    assert not fit.converged and not fit.observable.any()


@pytest.mark.parametrize("low", [0.15, 3.5])
def test_starts_cover_the_whole_range(scene, low):
    """Maps near either end of the range (0.15-0.25 px, where the float32 blur is
    almost the identity, and 3.5-3.9 with max_sigma 4) no longer stop at a flat start
    (today: a flat 0.2 or 3.8 after 3 steps): a converged fit has a lower loss than its
    start, what it calls observable at the low end is within 1% of the truth, and at the
    high end the map follows the truth (median error 1%, not flat)."""
    sharp, _, truth = scene
    span = 0.1 if low < 1 else 0.4
    target = low + span * (truth - truth.min()) / np.ptp(truth)
    blurred = gaussian_blur(sharp, target, backend="reference").astype(np.float32)
    fit = fit_sigma_map(sharp, blurred, max_sigma=4.0)
    assert fit.loss[-1] < fit.loss[0] or not fit.converged
    region = inner(target.shape)
    rel = np.abs(relative_errors(fit.model_map, target, region))
    if low < 1:
        assert np.all(rel[fit.observable[region]] <= 0.01)
    else:
        assert np.median(rel) <= 0.01 and np.ptp(fit.model_map[region]) > 0.2


def test_smoothness_penalises_curvature(scene, scene_fit):
    """A huge smoothness leaves a plane in the logistic's argument (the penalty's null
    space), and a worse match to the data."""
    sharp, blurred, _ = scene
    fit = fit_sigma_map(sharp, blurred, max_sigma=4.0, smoothness=1e4)
    u = np.log(fit.model_map / (4.0 - fit.model_map)).astype(np.float64)
    y, x = np.mgrid[0 : u.shape[0], 0 : u.shape[1]]
    design = np.stack([np.ones(u.size), y.ravel(), x.ravel()], axis=1)
    plane = design @ np.linalg.lstsq(design, u.ravel(), rcond=None)[0]
    assert np.abs(plane - u.ravel()).max() < 0.02 * np.ptp(u)
    assert np.nanstd(fit.residual) > 1.2 * np.nanstd(scene_fit.residual)


def test_untextured_region_is_not_observable():
    """A flat half carries no blur information: NaN there, a fit on the textured half;
    a NaN in the data is left out under nan_policy='omit', a masked block too."""
    sharp, _, truth = focus_pair((40, 72), sigma_range=(1.0, 2.5), seed=5)
    sharp[:, 40:] = 0.2
    rng = np.random.default_rng(5)
    blurred = gaussian_blur(sharp, truth, backend="reference") + 0.01 * rng.standard_normal(
        sharp.shape
    )
    blurred[10, 10] = np.nan
    mask = np.ones(sharp.shape, bool)
    mask[20:26, 20:26] = False
    blurred[20:26, 20:26] = 1e6  # garbage under the mask must not matter
    fit = fit_sigma_map(sharp, blurred.astype(np.float32), max_sigma=3.0, spacing=12,
                        mask=mask, nan_policy="omit")  # fmt: skip
    assert np.isnan(fit.sigma_map[:, 58:]).all()
    assert np.isinf(fit.stderr[:, 62:]).all() or (fit.stderr[:, 62:] > 1).all()
    textured = (slice(BORDER, 36), slice(BORDER, 30))
    assert not np.isnan(fit.sigma_map[textured]).any()
    rel = relative_errors(fit.model_map, truth, textured)
    assert np.median(np.abs(rel)) <= 0.06
    assert np.isnan(fit.residual[10, 10]) and np.isnan(fit.residual[20:26, 20:26]).all()
    assert np.isfinite(fit.model_map).all()


def test_per_axis_fits_a_map_per_axis():
    sharp, blurred, truth = focus_pair((40, 48), sigma_range=(0.8, 2.5), per_axis=True)
    fit = fit_sigma_map(sharp, blurred, max_sigma=3.0, spacing=12, per_axis=True)
    assert fit.model_map.shape == fit.stderr.shape == (40, 48, 2)
    region = inner(truth.shape[:2])
    for axis in range(2):
        rel = relative_errors(fit.model_map[..., axis], truth[..., axis], region)
        assert np.median(np.abs(rel)) <= 0.08, axis
    # The two axes' maps differ as the truth's do (mirror images of each other).
    diff_fit = fit.model_map[..., 0] - fit.model_map[..., 1]
    diff_true = truth[..., 0] - truth[..., 1]
    assert np.corrcoef(diff_fit[region].ravel(), diff_true[region].ravel())[0, 1] > 0.9
    # Axes given in another order: the same fit, its maps in that order.
    swapped = fit_sigma_map(sharp, blurred, max_sigma=3.0, spacing=12, per_axis=True,
                            axes=(1, 0))  # fmt: skip
    for name in ("model_map", "stderr", "observable"):
        np.testing.assert_array_equal(getattr(swapped, name), getattr(fit, name)[..., ::-1])


def test_volume():
    sharp, blurred, truth = focus_pair((6, 20, 20), sigma_range=(0.6, 1.5), seed=2)
    fit = fit_sigma_map(sharp, blurred, max_sigma=2.0, spacing=8, max_steps=60)
    assert fit.model_map.shape == (6, 20, 20)
    region = (slice(2, 4), slice(BORDER, 16), slice(BORDER, 16))
    rel = relative_errors(fit.model_map, truth, region)
    assert np.median(np.abs(rel)) <= 0.08


def test_batch_axes_share_one_map_and_callback_stops():
    """Two scenes blurred by one map fit one map; a callback returning True stops."""
    a_sharp, a_blurred, truth = focus_pair((32, 40), sigma_range=(0.8, 2.0), seed=3)
    b_sharp = focus_pair((32, 40), seed=4)[0]
    b_blurred = gaussian_blur(b_sharp, truth, backend="reference")
    sharp, blurred = np.stack([a_sharp, b_sharp]), np.stack([a_blurred, b_blurred])
    seen = []

    def callback(step, loss):
        seen.append(step)
        return np.bool_(step == 4)  # any true value stops

    fit = fit_sigma_map(sharp, blurred, max_sigma=3.0, spacing=10, axes=(1, 2),
                        callback=callback)  # fmt: skip
    assert seen == [1, 2, 3, 4] and fit.steps == 4 and not fit.converged
    assert fit.model_map.shape == (2, 32, 40)
    np.testing.assert_array_equal(fit.model_map[0], fit.model_map[1])
    assert fit.loss.shape == (5,)
    # Run to the end, through the generator this time.
    steps = fit_sigma_map_steps(sharp, blurred, max_sigma=3.0, spacing=10, axes=(1, 2))
    with pytest.raises(StopIteration) as done:
        while True:
            next(steps)
    full = done.value.value
    rel = relative_errors(full.model_map[0], truth, inner(truth.shape))
    assert np.median(np.abs(rel)) <= 0.06


def test_a_map_pinned_at_max_sigma_is_not_observable():
    """Blur beyond max_sigma: the map sits at the bound, which is a lower bound only:
    not observable, with a warning.  (The batch test's shapes: programs reused.)"""
    sharp = np.stack([focus_pair((32, 40), seed=s)[0] for s in (3, 4)])
    blurred = gaussian_blur(sharp, 3.5, axes=(1, 2), backend="reference")
    with pytest.warns(RuntimeWarning, match="reached max_sigma"):
        fit = fit_sigma_map(sharp, blurred, max_sigma=3.0, spacing=10, axes=(1, 2))
    assert fit.model_map.min() > 2.9
    assert np.isnan(fit.sigma_map).mean() > 0.9


def test_control_basis_is_a_partition_of_unity():
    for n, spacing in [(1, 16), (2, 16), (40, 12), (137, 16), (5, 1)]:
        basis = control_basis(n, spacing)
        assert basis.shape[0] == n and basis.min() >= 0
        np.testing.assert_allclose(basis.sum(axis=1), 1, atol=1e-12)


# ---------------------------------------------------------------------- bad input


@pytest.fixture
def pair(rng):
    return rng.random((12, 14)).astype(np.float32), rng.random((12, 14)).astype(np.float32)


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (dict(blurred=np.zeros((12, 15))), ValueError, r"^blurred: shape \(12, 15\) differs"),
        (dict(sharp=np.zeros((0, 14))), ValueError, "^sharp: needs at least one"),
        (dict(sharp=np.array(["a"] * 14)), TypeError, "^sharp: dtype"),
        (dict(max_sigma=0), ValueError, "^max_sigma: must be a finite number > 0"),
        (dict(max_sigma=-1.0), ValueError, "^max_sigma: "),
        (dict(max_sigma=float("nan")), ValueError, "^max_sigma: "),
        (dict(max_sigma="2"), ValueError, "^max_sigma: "),
        (dict(spacing=0.5), ValueError, "^spacing: must be a finite number >= 1"),
        (dict(smoothness=-1), ValueError, "^smoothness: "),
        (dict(max_error=0), ValueError, "^max_error: "),
        (dict(max_steps=0), ValueError, "^max_steps: "),
        (dict(max_steps=2.5), ValueError, "^max_steps: "),
        (dict(max_steps=float("inf")), ValueError, "^max_steps: "),
        (dict(max_steps=float("nan")), ValueError, "^max_steps: "),
        (dict(max_sigma=10**400), ValueError, "^max_sigma: "),
        (dict(max_sigma=5000, mode="reflect"), ValueError, "^max_sigma: 5000 needs radius"),
        (dict(max_sigma=1e9), ValueError, "^max_sigma: 1e.09 needs radius"),
        (dict(axes=()), ValueError, "^axes: needs at least one axis"),
        (dict(per_axis="yes"), TypeError, "^per_axis: "),
        (dict(mode="blur"), ValueError, "mode"),
        (dict(truncate=0), ValueError, "^truncate: "),
        (dict(axes=5), ValueError, "^axes: "),
        (dict(nan_policy="ignore"), ValueError, "^nan_policy: unknown"),
        (dict(nan_policy="propagate"), ValueError, "^nan_policy: 'propagate' cannot fit"),
        (dict(mask=np.ones((3, 3), bool)), ValueError, "^mask: shape"),
        (dict(mask=np.zeros((12, 14), bool)), ValueError, "^mask: no pixel is valid"),
    ],
)
def test_bad_input_names_the_argument(pair, change, error, match):
    args = dict(sharp=pair[0], blurred=pair[1], max_sigma=2.0) | change
    with pytest.raises(error, match=match):
        fit_sigma_map_steps(**args)  # validation happens before any step


@pytest.mark.parametrize("name", ["sharp", "blurred"])
def test_non_finite_values_need_a_mask_or_omit(pair, name):
    images = dict(sharp=pair[0].copy(), blurred=pair[1].copy())
    images[name][3, 4] = np.inf
    with pytest.raises(ValueError, match=rf"^{name}: nan_policy='raise'.*non-finite"):
        fit_sigma_map_steps(**images, max_sigma=2.0)
    mask = np.ones((12, 14), bool)
    mask[3, 4] = False
    fit_sigma_map_steps(**images, max_sigma=2.0, mask=mask)  # accepted: masked out
    fit_sigma_map_steps(**images, max_sigma=2.0, nan_policy="omit")


def test_images_become_new_float64_arrays(pair):
    """float16 sums overflow (the objective's scale would be inf): the images are read
    as float64, and never aliased."""
    from napari_varblur.fit.validate import check_image_pair

    big = (1000 * pair[0]).astype(np.float16)
    sharp, blurred = check_image_pair(big, big)
    assert sharp.dtype == blurred.dtype == np.float64
    assert np.isfinite(np.std(blurred)) and not np.shares_memory(sharp, big)


def test_import_stays_light():
    """``import napari_varblur`` does not import optax (fitting is loaded on first use)."""
    code = "import sys, napari_varblur; print('optax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_sharp_noise_is_read_past_edges():
    """The sharp image's Poisson noise (variance = counts) on 6-pixel blocks of random
    brightness: the noise model reads it within 20% (mean of 3 draws; one draw scatters
    by ~5%).  A second difference along one axis at a time read the block edges as noise
    (+43%), and on the realistic benchmark's photograph 19% (2.3x in its dark parts):
    the fit then took out too much of the sharp noise's bias and the map fell in
    untextured regions, pulling its textured neighbours with it."""
    from napari_varblur.fit.noise import variance_map

    rng = np.random.default_rng(0)
    expected = np.kron(rng.uniform(20, 80, (16, 16)), np.ones((6, 6)))
    options = dict(mode="reflect", truncate=3.0, axes=(0, 1), mask=None)
    ratios = [
        variance_map(rng.poisson(expected).astype(float), np.ones(expected.shape, bool),
                     (0, 1), options).mean() / expected.mean()
        for _ in range(3)
    ]  # fmt: skip
    assert 0.85 <= np.mean(ratios) <= 1.2


@pytest.mark.parametrize("grid, dims", [((5, 6), 2), ((4, 5, 2), 2), ((3, 4, 5), 3)])
def test_penalty_hessian_is_the_penalty_s(grid, dims):
    """The covariance's prior is the Hessian of the penalty the fit minimises (per-axis
    grids too: a trailing axis of maps)."""
    import jax

    from napari_varblur.fit.errors import penalty_hessian
    from napari_varblur.fit.model import penalty

    u = np.random.default_rng(1).standard_normal(grid)
    exact = jax.hessian(lambda v: penalty(v.reshape(grid), dims))(u.ravel())
    np.testing.assert_allclose(penalty_hessian(grid, dims), np.asarray(exact), atol=1e-5)


def test_standard_errors_cover_the_error_on_a_photograph():
    """The standard error is calibrated where the photograph is flat and where it is
    textured, with Poisson noise in both images, a gain and an offset: over six noise
    draws the errors divided by it have an SD near 1 and few pass 3. Shown failing with
    the nearest node's local error alone (SD 1.7, 5.7% beyond 3)."""
    from skimage import data, transform

    photo = transform.resize(data.camera().astype(float), (96, 96), anti_aliasing=True)
    expected = 100.0 * (photo - photo.min()) / np.ptp(photo)  # 100 photons at the peak
    yy, xx = np.meshgrid(*[np.linspace(0, 1, 96)] * 2, indexing="ij")
    tilt = (yy + 2 * xx) / 3 + 0.8 * np.exp(-((yy - 0.6) ** 2 + (xx - 0.6) ** 2) / 0.08)
    truth = 0.8 + 2.2 * (tilt - tilt.min()) / np.ptp(tilt)  # a tilt and a bump, 0.8 to 3
    clean = gaussian_blur(expected, truth, mode="reflect", precision="float64")
    z = []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        sharp = rng.poisson(expected).astype(np.float32)
        blurred = rng.poisson(1.5 * clean + 2.0).astype(np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            fit = fit_sigma_map(sharp, blurred, max_sigma=4.0, mode="reflect")
        seen = fit.observable[inner(truth.shape)]
        z.append(((fit.model_map - truth) / fit.stderr)[inner(truth.shape)][seen])
    z = np.concatenate(z)
    assert z.size > 0.3 * 6 * (96 - 2 * BORDER) ** 2
    # Six draws of a smooth map: its errors are correlated over many pixels, so the
    # SD is known to about 20%; 3 SE is passed by 0.3% of a normal's draws.
    spread, beyond = np.std(z), np.mean(np.abs(z) > 3)
    assert 0.6 <= spread <= 1.45 and beyond <= 0.04, (spread, beyond)
