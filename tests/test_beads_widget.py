"""The "Measure blur from beads" widget in a real napari viewer (pytest-qt, Xvfb): real
measurements of small synthetic bead images (128² with 12 beads, a 32x64x64 z-stack);
the points, the map, the summary, re-runs, Cancel and bad input."""

from __future__ import annotations

import time

import numpy as np
import pytest

napari = pytest.importorskip("napari")

from napari.layers import Points  # noqa: E402

from conftest import PLUGIN, click_and_wait, dock  # noqa: E402
from napari_varblur.core.bead_params import BEAD_PARAMS  # noqa: E402
from napari_varblur.gui import beads_widget  # noqa: E402
from napari_varblur.gui.beads_widget import STATUS_COLORS, BeadsWidget  # noqa: E402
from napari_varblur.gui.schema import METADATA_KEY, PER_AXIS_ROLE, SIGMA_MAP_ROLE  # noqa: E402
from napari_varblur.measure import pipeline, sigma_map_from_beads  # noqa: E402
from napari_varblur.measure.result import FWHM  # noqa: E402
from napari_varblur.measure.synthetic import bead_image  # noqa: E402

SCALE, TRANSLATE = (0.2, 0.2), (5.0, -3.0)


def _role(layer) -> str:
    return layer.metadata[METADATA_KEY]["role"]


def test_a_2d_run_adds_beads_and_map_then_updates_them_in_place(viewer, qtbot):
    from npe2 import PluginManager

    menus = PluginManager.instance().get_manifest(PLUGIN).contributions.menus
    assert "napari-varblur.measure_beads" in [m.command for m in menus["napari-varblur.submenu"]]
    image, _ = bead_image((128, 128), 12, seed=0)
    layer = viewer.add_image(image, name="slide", scale=SCALE, translate=TRANSLATE)
    mine = viewer.add_points([[1.0, 1.0]], name="slide beads")  # the user's own: kept
    widget = dock(viewer, "Measure blur from beads")
    assert isinstance(widget, BeadsWidget)
    assert widget.threshold.value == BEAD_PARAMS["threshold"].default  # declared, not retyped
    assert widget.threshold.tooltip == BEAD_PARAMS["threshold"].help
    widget.image.value = layer
    click_and_wait(qtbot, widget)
    expected = sigma_map_from_beads(image, spacing=SCALE)
    assert widget.status.value == f"done: {expected}"
    points, sigma = viewer.layers[2], viewer.layers[3]
    assert [lyr.name for lyr in viewer.layers] == ["slide", "slide beads", "slide beads [1]",
                                                   "slide bead sigma map per axis"]  # fmt: skip
    assert isinstance(points, Points) and mine.data.tolist() == [[1.0, 1.0]]
    table = expected.beads
    np.testing.assert_allclose(points.data, np.stack([table["y"], table["x"]], axis=1))
    assert list(points.features["status"]) == list(table["status"])
    np.testing.assert_allclose(points.features["fwhm_x"], table["fwhm_x"])
    ok = table["status"] == "ok"
    assert ok.sum() >= 3
    np.testing.assert_allclose(points.border_color[ok], [STATUS_COLORS["ok"]] * ok.sum())
    assert _role(sigma) == PER_AXIS_ROLE
    np.testing.assert_allclose(sigma.data, np.moveaxis(expected.sigma_map, -1, 0))
    np.testing.assert_array_equal(sigma.scale, (1.0, *SCALE))
    for made in (points, sigma):
        np.testing.assert_array_equal(made.scale[-2:], SCALE)
        np.testing.assert_array_equal(made.translate[-2:], TRANSLATE)
    np.testing.assert_array_equal(layer.data, image)  # the input is never changed
    # A re-run updates the same layers (none added, none clobbered).
    widget.threshold.value, widget.degree.value = 8.0, "1"
    click_and_wait(qtbot, widget)
    assert [lyr for lyr in viewer.layers][2:] == [points, sigma]
    assert points.metadata[METADATA_KEY]["parameters"]["threshold"] == 8.0
    assert set(widget.last_fit.summary["degree"].values()) == {1}
    assert len(points.features) == len(points.data) == widget.last_fit.beads.rows
    # One sigma for all axes: the isotropic map, the per-axis one no longer current.
    widget.per_axis.value = False
    click_and_wait(qtbot, widget)
    assert len(viewer.layers) == 5 and _role(viewer.layers[4]) == SIGMA_MAP_ROLE
    assert viewer.layers[4].data.shape == image.shape
    assert _role(sigma) == PER_AXIS_ROLE + beads_widget.SUPERSEDED


def test_a_3d_stack_takes_its_voxel_size_from_the_layer_scale(viewer, qtbot):
    image, _ = bead_image((32, 64, 64), 4, seed=0)
    scale = (0.3, 0.1, 0.1)
    layer = viewer.add_image(image, name="stack", scale=scale)
    widget = dock(viewer, "Measure blur from beads")
    widget.image.value = layer
    click_and_wait(qtbot, widget)
    assert widget.status.value.startswith("done: "), widget.status.value
    table = widget.last_fit.beads
    for axis, size in zip("zyx", scale):  # the FWHMs are in the layer's units
        np.testing.assert_allclose(table[f"fwhm_{axis}"], FWHM * table[f"sigma_{axis}"] * size)
    points = viewer.layers["stack beads"]
    assert points.metadata[METADATA_KEY]["parameters"]["spacing"] == list(scale)
    np.testing.assert_allclose(points.data, np.stack([table[a] for a in "zyx"], axis=1))
    np.testing.assert_array_equal(points.scale, scale)
    assert viewer.layers["stack bead sigma map per axis"].data.shape == (3, 32, 64, 64)
    made = list(viewer.layers)
    click_and_wait(qtbot, widget)  # a 3-D points layer is updated in place too
    assert list(viewer.layers) == made and points.ndim == 3


def test_cancel_stops_between_batches_and_changes_no_layer(viewer, qtbot, monkeypatch):
    monkeypatch.setattr(pipeline, "BATCH", 1)  # a batch per bead: many places to stop
    record = {"steps": 0, "finished": False}
    measure = beads_widget.sigma_map_from_beads_steps

    def slow_steps(**kwargs):
        steps = measure(**kwargs)

        def run():
            while True:
                try:
                    step = next(steps)
                except StopIteration as done:
                    record["finished"] = True
                    return done.value
                record["steps"] += 1
                time.sleep(0.1)
                yield step

        return run()

    monkeypatch.setattr(beads_widget, "sigma_map_from_beads_steps", slow_steps)
    image, _ = bead_image((128, 128), 12, seed=0)
    viewer.add_image(image, name="slide")
    widget = dock(viewer, "Measure blur from beads")
    widget.run_button.native.click()
    qtbot.waitUntil(lambda: widget.status.value.startswith("fitting beads"), timeout=60_000)
    widget.cancel_button.native.click()
    qtbot.waitUntil(lambda: widget._worker is None, timeout=60_000)
    assert widget.status.value == "cancelled"
    assert not record["finished"] and record["steps"] < 12
    assert [lyr.name for lyr in viewer.layers] == ["slide"] and widget.last_fit is None


def _noise(viewer):
    counts = np.random.default_rng(3).poisson(10.0, (64, 64)) + 100
    return viewer.add_image(counts.astype(np.uint16), name="no beads")


@pytest.mark.parametrize(
    ("make", "field", "message", "worker"),
    [
        (lambda v: v.add_image(np.zeros((64, 64, 3), np.uint8), name="rgb"), None,
         "image: 'rgb' is an RGB layer", False),
        (lambda v: v.add_image(np.ones((2, 2, 2, 16, 16), np.uint16), name="5d"), None,
         "image: expected 2 or 3 spatial axes", False),
        (lambda v: v.add_image(bead_image((128, 128), 12)[0], name="ok"), ("saturation", "lots"),
         "saturation: could not read 'lots'", False),
        (_noise, None, "image: no beads found", True),  # found by the measurement itself
    ],
    ids=["rgb", "5d", "saturation", "no-beads"],
)  # fmt: skip
def test_bad_input_shows_the_library_message_and_adds_nothing(viewer, qtbot, make, field,
                                                               message, worker):  # fmt: skip
    """A bad choice is refused on the GUI thread (no worker starts); an image without
    beads fails in the worker; either way the message shows and no layer is added."""
    layer = make(viewer)
    widget = dock(viewer, "Measure blur from beads")
    widget.image.value = layer
    if field:
        getattr(widget, field[0]).value = field[1]
    widget.run_button.native.click()
    assert (widget._worker is not None) == worker
    qtbot.waitUntil(lambda: widget._worker is None, timeout=60_000)
    assert widget.status.value.startswith(f"error: {message}"), widget.status.value
    assert list(viewer.layers) == [layer] and widget.last_fit is None


def test_the_bead_sample_opens_and_is_measured(viewer, qtbot):
    viewer.open_sample(PLUGIN, "beads")
    image, truth = viewer.layers
    assert image.data.shape == (512, 512) and truth.data.shape == (2, 512, 512)
    assert _role(truth) == "true-sigma-map" and not truth.visible
    widget = dock(viewer, "Measure blur from beads")
    assert widget.image.value is image


def test_the_bead_samples_saturated_beads_are_caught_by_default():
    from napari_varblur.gui.samples import bead_sample_layers

    (image, _, _), _ = bead_sample_layers()
    status = sigma_map_from_beads(image).beads["status"]
    assert np.count_nonzero(status == "saturated") == 2, sorted(status)


def test_the_form_is_declared_with_one_line_tooltips_and_a_short_default_view(viewer):
    viewer.add_image(bead_image((128, 128), 12)[0], name="slide")
    widget = dock(viewer, "Measure blur from beads")
    for field in widget:
        assert field.tooltip and "\n" not in field.tooltip, field.name
    assert beads_widget.BEAD_ADVANCED == ("min_separation", "saturation", "degree", "truncate")
    shown = widget.native.widget()
    assert widget.threshold.native.isVisibleTo(shown) and widget.per_axis.value is True
    assert not any(getattr(widget, name).native.isVisibleTo(shown)
                   for name in beads_widget.BEAD_ADVANCED)  # fmt: skip
    assert widget.degree.value == "auto" and widget.saturation.value == ""
    assert widget.arguments()["degree"] is None and widget.arguments()["saturation"] is None


def test_a_stack_of_z_stacks_places_each_bead_on_its_plane():
    """A 4-D layer: its beads pooled over the first axis, each point on its own plane."""
    from napari.layers import Image

    stack = np.stack([bead_image((32, 64, 64), 4, seed=s)[0] for s in (0, 1)])
    layer = Image(stack, name="stacks", scale=(1.0, 0.3, 0.1, 0.1))
    fit = sigma_map_from_beads(stack, axes=(1, 2, 3), spacing=(0.3, 0.1, 0.1))
    made = beads_widget.publish_beads(fit, None, layer, {})
    points = made[beads_widget.POINTS_ROLE]
    table = fit.beads
    assert points.ndim == 4 and set(table["plane"]) == {0, 1}
    np.testing.assert_allclose(points.data, np.stack([table[a] for a in ("plane", *"zyx")], 1))
    np.testing.assert_array_equal(points.scale, layer.scale)
    assert made[PER_AXIS_ROLE].data.shape == (3, *stack.shape)
