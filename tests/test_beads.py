"""sigma_map_from_beads: beads found and fitted with the blur's own kernel, statuses for
what must be left out, the field and its uncertainty, and errors that say what was
found.  Oracles: the synthetic generator's truth, SciPy's curve_fit for one bead, and
``gaussian_blur`` itself for the kernel convention.  Tolerances follow from the
fitted standard errors (five of them: about one chance in two million per bead)."""

from __future__ import annotations

import numpy as np
import pytest

from napari_varblur import gaussian_blur, sigma_map_from_beads
from napari_varblur.measure import sigma_map_from_beads_steps
from napari_varblur.measure.gauss import Layout, evaluate, fit
from napari_varblur.measure.synthetic import bead_image

#: A bead's sigma this many standard errors off its truth is a failure.
Z = 5.0


@pytest.fixture(scope="module")
def planted():
    """256² with 16 isolated beads, 2 doublets, 2 saturated and 2 edge beads."""
    image, truth = bead_image((256, 256), 16, doublets=2, saturated=2, edge=2, seed=3)
    return image, truth, sigma_map_from_beads(image, saturation=truth.saturation)


def matched(table, truth, names):
    """Each row's nearest true bead and the distance in its sigmas."""
    rows = np.stack([table[a] for a in names], axis=1)
    scaled = (rows[:, None] - truth.centres[None]) / truth.sigmas[None]
    distance = np.linalg.norm(scaled, axis=2)
    return distance.argmin(axis=1), distance.min(axis=1)


def test_every_isolated_bead_is_kept_and_its_sigma_is_within_its_errors(planted):
    _, truth, fit_ = planted
    table = fit_.beads
    nearest, distance = matched(table, truth, ("y", "x"))
    isolated = np.flatnonzero(truth.kind == "isolated")
    ok = table.ok & (distance < 1.0)
    assert set(nearest[ok]) == set(isolated)  # all kept, none twice, no other kept
    assert np.count_nonzero(table.ok) == len(isolated)
    for axis, name in enumerate(("y", "x")):
        error = table[f"sigma_{name}"][ok] - truth.sigmas[nearest[ok], axis]
        assert np.all(np.abs(error) <= Z * table[f"sigma_{name}_se"][ok]), name
        centre = table[name][ok] - truth.centres[nearest[ok], axis]
        assert np.all(np.abs(centre) <= Z * table[f"{name}_se"][ok]), name


def test_planted_defects_are_left_out_for_their_reason(planted):
    _, truth, fit_ = planted
    nearest, distance = matched(fit_.beads, truth, ("y", "x"))
    status = fit_.beads["status"]
    for kind in ("saturated", "edge"):
        rows = (truth.kind[nearest] == kind) & (distance < 1.5)
        assert rows.sum() >= 2 and np.all(status[rows] == kind), (kind, status[rows])
    doubled = truth.kind[nearest] == "doublet"
    assert doubled.any() and np.all(status[doubled] == "doublet"), status[doubled]
    assert fit_.summary["left_out"]["saturated"] >= 2
    assert fit_.summary["kept"] == 16


def test_the_map_has_the_blur_layout_and_follows_the_field(planted):
    image, truth, fit_ = planted
    assert fit_.sigma_map.shape == (*image.shape, 2)
    assert fit_.sigma_map.dtype == np.float32 and fit_.uncertainty.shape == fit_.sigma_map.shape
    inside = ~fit_.extrapolated
    assert 0.3 < inside.mean() < 1.0
    error = np.abs(fit_.sigma_map - truth.sigma_map)[inside]
    # The field's own error is a few percent with 16 beads; 4 standard errors plus the
    # intrinsic scatter covers it.
    scatter = np.array(list(fit_.summary["scatter"].values()))
    assert np.all(error <= 4 * fit_.uncertainty[inside] + 3 * scatter + 0.02)
    # Usable as it is: the blur takes the map (model="scatter": what a bead measures).
    out = gaussian_blur(image.astype(np.float32), fit_.sigma_map, model="scatter")
    assert out.shape == image.shape and np.isfinite(out).all()


def test_the_fitted_sigma_is_the_one_gaussian_blur_takes():
    """A point blurred by gaussian_blur (truncate 5: the kernel's tails all there) is
    fitted back to its sigma per axis, noiseless, to 1e-4."""
    image = np.zeros((64, 80), np.float64)
    image[20, 30] = image[44, 52] = image[24, 60] = 1000.0
    blurred = gaussian_blur(image, (1.7, 2.6), truncate=5.0, precision="float64") + 5.0
    found = sigma_map_from_beads(blurred, min_separation=0.0, degree=0)
    table = found.beads
    assert np.count_nonzero(table.ok) == 3
    np.testing.assert_allclose(table["sigma_y"][table.ok], 1.7, rtol=1e-4)
    np.testing.assert_allclose(table["sigma_x"][table.ok], 2.6, rtol=1e-4)
    np.testing.assert_allclose(found.sigma_map[..., 1], 2.6, rtol=1e-4)


def test_levenberg_marquardt_agrees_with_scipy_curve_fit(rng):
    from scipy.optimize import curve_fit

    layout = Layout(2)
    grid = np.stack(np.meshgrid(np.arange(-8, 9), np.arange(-8, 9), indexing="ij"), -1)
    grid = grid.reshape(-1, 2).astype(np.float64)
    truth = np.array([[10.0, 80.0, 0.3, -0.4, np.log(1.9), np.log(2.4)]])
    clean, _ = evaluate(truth, grid, layout)
    data = rng.poisson(clean).astype(np.float64)
    weight = 1.0 / np.maximum(clean, 1.0)
    start = np.array([[8.0, 60.0, 0.0, 0.0, np.log(1.5), np.log(1.5)]])
    box = (np.full_like(start, -np.inf), np.full_like(start, np.inf))
    ours = fit(data, weight, grid, start, layout, box, steps=200)

    def model(_, *p):
        return evaluate(np.array([p]), grid, layout)[0][0]

    theirs, covariance = curve_fit(model, None, data[0], p0=start[0], sigma=weight[0] ** -0.5,
                                   absolute_sigma=True, xtol=1e-12, ftol=1e-12)  # fmt: skip
    np.testing.assert_allclose(ours.params[0], theirs, rtol=1e-5, atol=1e-6)
    scale = max(ours.reduced[0], 1.0)  # ours: scaled up when the fit is worse than the noise
    np.testing.assert_allclose(ours.covariance[0], covariance * scale, rtol=1e-3, atol=1e-9)


def test_a_3d_stack_with_anisotropic_voxels():
    image, truth = bead_image((40, 112, 112), 10, seed=5)
    found = sigma_map_from_beads(image, spacing=(0.3, 0.1, 0.1), saturation=truth.saturation)
    table = found.beads
    assert found.sigma_map.shape == (*image.shape, 3)
    assert found.names == ("z", "y", "x")
    nearest, distance = matched(table, truth, ("z", "y", "x"))
    ok = table.ok
    assert np.count_nonzero(ok & (distance < 1.0)) >= 9
    for axis, name in enumerate(("z", "y", "x")):
        error = table[f"sigma_{name}"][ok] - truth.sigmas[nearest[ok], axis]
        assert np.all(np.abs(error) <= Z * table[f"sigma_{name}_se"][ok]), name
    np.testing.assert_allclose(table["fwhm_z"], 2.3548 * 0.3 * table["sigma_z"], rtol=1e-4)
    assert found.summary["fwhm"]["x"] == pytest.approx(np.median(table["fwhm_x"][ok]), rel=1e-6)


def test_the_field_rejects_outliers_and_its_uncertainty_covers_the_truth(rng):
    from napari_varblur.measure import field

    shape = (300, 400)
    points = rng.uniform(0, 1, (80, 2)) * (np.array(shape) - 1)
    u = 2 * points / (np.array(shape) - 1) - 1
    truth = 1.5 + 0.4 * u[:, 1] + 0.6 * u[:, 0] ** 2
    errors = rng.uniform(0.02, 0.06, 80)
    values = truth + errors * rng.normal(size=80)
    values[[3, 40]] += 0.8  # two blends, far off
    found, kept = field.fit(points, values, errors, shape)
    assert not kept[3] and not kept[40] and kept.sum() == 78
    assert found.degree == 2
    grid = np.stack(np.meshgrid(np.arange(0, 300, 7), np.arange(0, 400, 7), indexing="ij"), -1)
    grid = grid.reshape(-1, 2).astype(float)
    g = 2 * grid / (np.array(shape) - 1) - 1
    expected = 1.5 + 0.4 * g[:, 1] + 0.6 * g[:, 0] ** 2
    assert np.all(np.abs(found.value(grid) - expected) <= 5 * found.error(grid) + 1e-9)


def test_isotropic_a_stack_axis_and_the_steps():
    image, _truth = bead_image((128, 128), 10, seed=4)
    other = bead_image((128, 136), 10, seed=6)[0][:, :128]
    stack = np.stack([image[:, :120], other[:, :120]], axis=-1)  # the stack axis last
    pooled = sigma_map_from_beads(stack, axes=(0, 1), per_axis=False)
    assert pooled.sigma_map.shape == stack.shape
    np.testing.assert_array_equal(pooled.sigma_map[..., 0], pooled.sigma_map[..., 1])
    table = pooled.beads
    assert set(table["plane"][table.ok]) == {0, 1} and "sigma" in table
    assert np.count_nonzero(table.ok) >= 18
    steps = sigma_map_from_beads_steps(image, threshold=5.0)
    first = next(steps)
    assert first.stage.startswith("fitting beads") and 0 < first.done <= first.total
    steps.close()  # a caller may stop between batches


def test_inputs_are_untouched_and_the_table_round_trips(tmp_path):
    import csv

    image, _truth = bead_image((128, 128), 10, seed=8)
    before = image.copy()
    found = sigma_map_from_beads(image)  # uint16: saturates at 65535 by default
    np.testing.assert_array_equal(image, before)
    assert not np.shares_memory(found.sigma_map, image)
    with pytest.raises(ValueError):
        found.beads["sigma_x"][0] = 1.0  # the table is read-only
    found.beads.to_csv(tmp_path / "beads.csv")
    with open(tmp_path / "beads.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == found.beads.rows and rows[0].keys() == set(found.beads)
    np.testing.assert_allclose([float(r["sigma_x"]) for r in rows], found.beads["sigma_x"],
                               rtol=1e-5)  # fmt: skip
    assert "beads kept" in str(found) and "FWHM" in str(found)


def test_an_integer_image_saturates_at_its_dtype_maximum():
    image, _truth = bead_image((160, 160), 10, saturated=3, seed=9, saturation=255, offset=5)
    found = sigma_map_from_beads(image.astype(np.uint8))  # no saturation= given
    assert found.summary["left_out"]["saturated"] >= 3
    as_float = sigma_map_from_beads(image.astype(np.float32))  # a float image: no limit
    assert as_float.summary["left_out"]["saturated"] == 0


@pytest.mark.parametrize(
    "image, kwargs, match",
    [
        (np.full((64, 64), 7.0), {}, r"image: every pixel is 7: there are no beads"),
        ("noise", {}, r"image: no beads found: the brightest spot .*\(threshold 5\)"),
        ("beads", {"spacing": (0.1, 0.2, 0.3)}, r"spacing: expected 1 or 2 values"),
        ("beads", {"spacing": -1.0}, r"spacing: must be a finite number > 0"),
        ("beads", {"threshold": 0}, r"threshold: must be a finite number > 0"),
        ("beads", {"degree": -1}, r"degree: must be an integer >= 0"),
        ("beads", {"axes": (0,)}, r"axes: pick 2 or 3 distinct spatial axes"),
        ("beads", {"per_axis": "yes"}, r"per_axis: must be True or False"),
        (np.zeros(50), {}, r"image: expected 2 or 3 spatial axes"),
        (np.zeros((4, 50)), {}, r"image: each spatial axis needs at least 8 pixels"),
        (np.array([[np.nan] * 20] * 20), {}, r"image: NaN or inf in 400 values"),
        (np.zeros((20, 20), complex), {}, r"image: must be real"),
        ("sparse", {}, r"image: 2 usable beads of 2 candidates; a map needs at least 3"),
    ],
)
def test_bad_input_says_what_was_found(image, kwargs, match, rng):
    if isinstance(image, str):
        made = {"noise": rng.poisson(10.0, (96, 96)).astype(np.float32),
                "beads": bead_image((128, 128), 6, seed=1)[0],
                "sparse": _two_beads()}  # fmt: skip
        image = made[image]
    with pytest.raises(ValueError, match=match):
        sigma_map_from_beads(image, **kwargs)


def _two_beads() -> np.ndarray:
    image = np.zeros((64, 64))
    image[20, 20] = image[40, 44] = 1000.0
    return gaussian_blur(image, 1.5, precision="float64") + 10.0


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_two_beads_one_and_a_half_sigmas_apart_along_z_are_a_doublet(seed):
    """Their blend fits one Gaussian almost as well as two (the drop test misses it) but
    holds twice a bead's flux: it must not be kept."""
    from napari_varblur.measure.synthetic import _draw

    image, truth = bead_image((40, 112, 112), 10, seed=seed)
    centre, sigma = truth.centres[0], truth.sigmas[0]
    step = np.array([1.5 * sigma[0] * (1 if centre[0] < 20 else -1), 0.0, 0.0])
    partner = np.zeros(image.shape)
    _draw(partner, centre + step, sigma, 1000.0)
    image = image + np.random.default_rng(seed).poisson(partner).astype(np.uint16)
    table = sigma_map_from_beads(image, saturation=truth.saturation).beads
    rows = np.stack([table[a] for a in ("z", "y", "x")], axis=1)
    spots = np.stack([centre, centre + step / 2, centre + step])
    near = np.min(np.linalg.norm((rows[:, None] - spots[None]) / sigma, axis=2), axis=1) < 1.5
    assert near.any() and np.all(table["status"][near] == "doublet"), table["status"][near]
    assert np.count_nonzero(table.ok) == 9


def test_bright_single_beads_of_a_varied_batch_stay_ok():
    """Beads varying by 30% in flux (the brightest as bright as a blend: twice the
    median): every one is kept, the brightest too."""
    image, truth = bead_image((512, 512), 60, flux_spread=0.3, seed=13)
    assert truth.photons.max() > 2.0 * np.median(truth.photons)
    table = sigma_map_from_beads(image, saturation=truth.saturation).beads
    nearest, distance = matched(table, truth, ("y", "x"))
    assert np.count_nonzero(table.ok & (distance < 1.0)) == 60, table["status"][~table.ok]
    assert set(nearest[table.ok]) == set(range(60))
