"""The "Make sigma map" widget, the blur widget's preselection of tagged maps, and the
demo viewer's view, in a real napari viewer (pytest-qt, Xvfb)."""

from __future__ import annotations

import numpy as np
import pytest

napari = pytest.importorskip("napari")

from conftest import PLUGIN, dock  # noqa: E402
from napari_varblur import sigma_maps  # noqa: E402
from napari_varblur.gui.schema import METADATA_KEY, SIGMA_MAP_ROLE, is_sigma_map  # noqa: E402

SCALE, TRANSLATE = (2.0, 0.5, 0.5), (4.0, -1.0, 3.0)


def stack_layers(viewer):
    labels = np.zeros((3, 12, 16), dtype=np.int32)
    labels[:, 2:6, 3:9] = 1
    labels[1:, 7:11, 10:15] = 4
    image = np.random.default_rng(0).random(labels.shape).astype(np.float32) * 10
    cells = viewer.add_image(image, name="cells", scale=SCALE, translate=TRANSLATE)
    seg = viewer.add_labels(labels, name="seg", scale=SCALE, translate=TRANSLATE)
    return cells, seg


def check_map_layer(layer, source, expected, kind):
    np.testing.assert_array_equal(layer.data, np.broadcast_to(expected, source.data.shape))
    np.testing.assert_array_equal(layer.scale, source.scale)
    np.testing.assert_array_equal(layer.translate, source.translate)
    meta = layer.metadata[METADATA_KEY]
    assert meta["role"] == SIGMA_MAP_ROLE and meta["kind"] == kind and is_sigma_map(layer)
    assert meta["source_layer"] == source.name


def test_each_kind_of_map_equals_the_function_and_is_tagged(viewer):
    cells, seg = stack_layers(viewer)
    widget = dock(viewer, "Make sigma map")

    widget.kind.value = "labels"
    widget.source.value = seg
    widget.default.value = 0.5
    widget.fill_labels()
    assert [row[0] for row in widget.table.data.to_list()] == [1, 4]
    widget.set_rows([[1, 2.0], [4, "3.5"]])
    widget.add_button.native.click()
    expected = sigma_maps.from_labels(seg.data, {1: 2.0, 4: 3.5}, default=0.5)
    check_map_layer(viewer.layers[-1], seg, expected, "labels")

    widget.kind.value = "defocus"
    widget.source.value = cells
    widget.focus.value, widget.slope.value, widget.sigma0.value = "1", 1.5, 0.25
    widget.add_button.native.click()
    expected = sigma_maps.defocus(cells.data.shape, focus=1.0, slope=1.5, sigma0=0.25, axis=0)
    check_map_layer(viewer.layers[-1], cells, expected, "defocus")

    widget.kind.value = "radial"
    widget.source.value = cells
    widget.center.value = "1, 5, 7.5"
    widget.sigma_center.value, widget.sigma_edge.value, widget.radius.value = 0.5, 4.0, 6.0
    widget.add_button.native.click()
    expected = sigma_maps.radial(cells.data.shape, (1, 5, 7.5), 0.5, 4.0, 6.0)
    check_map_layer(viewer.layers[-1], cells, expected, "radial")

    widget.kind.value = "from_image"
    widget.source.value = cells
    limits = tuple(cells.contrast_limits)
    assert (widget.lo.value, widget.hi.value) == pytest.approx(limits, abs=1e-6)
    widget.lo.value, widget.hi.value = 2.0, 8.0
    widget.sigma_lo.value, widget.sigma_hi.value = 3.0, 1.0
    widget.add_button.native.click()
    expected = sigma_maps.from_image(cells.data, 2.0, 8.0, 3.0, 1.0)
    check_map_layer(viewer.layers[-1], cells, expected, "from_image")
    assert len(viewer.layers) == 6 and widget.status.value.startswith("added")


def test_world_units_divide_sigmas_by_the_pixel_size(viewer):
    cells, _ = stack_layers(viewer)
    widget = dock(viewer, "Make sigma map")
    widget.kind.value = "defocus"
    widget.source.value = cells
    widget.focus.value, widget.slope.value, widget.sigma0.value = "0", 1.0, 0.5
    widget.world_units.value = True
    widget.add_button.native.click()
    expected = sigma_maps.defocus(cells.data.shape, focus=0.0, slope=2.0, sigma0=1.0)
    check_map_layer(viewer.layers[-1], cells, expected, "defocus")
    assert "divided by" in widget.world_units.tooltip


def test_the_blur_widget_preselects_a_fitting_tagged_map(viewer):
    cells, seg = stack_layers(viewer)
    other = viewer.add_image(np.ones((5, 7), np.float32), name="small")
    blur = dock(viewer, "Gaussian blur")
    blur.image.value = cells
    assert blur.sigma_map.value is None  # no tagged map yet
    maker = dock(viewer, "Make sigma map")
    maker.kind.value, maker.source.value = "labels", seg
    maker.add_button.native.click()
    made = viewer.layers[-1]
    assert blur.sigma_map.value is made  # a new tagged map that fits is preselected
    blur.image.value = other  # it does not fit this image...
    assert blur.sigma_map.value is None
    blur.image.value = cells  # ...and is chosen again for the one it fits
    assert blur.sigma_map.value is made
    blur.sigma_map.value = None  # the user's choice survives layers coming and going
    viewer.add_image(np.zeros((3, 12, 16), np.float32), name="untagged")
    assert blur.sigma_map.value is None


def test_the_sample_map_is_tagged_and_preselected(viewer):
    viewer.open_sample(PLUGIN, "defocus")
    blur = dock(viewer, "Gaussian blur")
    assert is_sigma_map(viewer.layers["varblur sigma map"])
    assert blur.image.value is viewer.layers["varblur cells"]
    assert blur.sigma_map.value is viewer.layers["varblur sigma map"]


@pytest.mark.parametrize(
    "setup, message",
    [
        ("no table row", "label → sigma"),
        ("negative", "sigma"),
        ("lo >= hi", "lo must be < hi"),
        ("anisotropic world", "Y and X scales differ"),
    ],
)
def test_bad_input_shows_an_error_and_adds_no_layer(viewer, setup, message):
    from napari.utils.notifications import notification_manager

    cells, seg = stack_layers(viewer)
    widget = dock(viewer, "Make sigma map")
    if setup == "no table row":
        widget.kind.value, widget.source.value = "labels", seg
        widget.set_rows([["one", 2.0]])
    elif setup == "negative":
        widget.kind.value, widget.source.value = "labels", seg
        widget.set_rows([[1, -2.0]])
    elif setup == "lo >= hi":
        widget.kind.value, widget.source.value = "from_image", cells
        widget.lo.value, widget.hi.value = 5.0, 5.0
    else:
        cells.scale = (1.0, 1.0, 2.0)
        widget.kind.value, widget.source.value = "radial", cells
        widget.world_units.value = True
    n_layers = len(viewer.layers)
    widget.add_button.native.click()
    assert len(viewer.layers) == n_layers
    assert widget.status.value.startswith("error:") and message in widget.status.tooltip
    assert message in notification_manager.records[-1].message
    assert widget.status.native.wordWrap()


def test_every_field_has_a_one_line_tooltip(viewer):
    widget = dock(viewer, "Make sigma map")
    for field in widget:
        tip = field.tooltip
        assert tip and tip.strip() and "\n" not in tip, field.name
    assert "divided by the layer's scale" in widget.world_units.tooltip


def test_demo_view_shows_the_whole_image_once_the_dock_is_in(make_napari_viewer, qtbot):
    from qtpy.QtWidgets import QApplication

    from napari_varblur.app.viewer import open_demo_viewer

    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(1000, 700)
    QApplication.processEvents()
    open_demo_viewer(viewer, run=False)
    zoom, center = viewer.camera.zoom, tuple(viewer.camera.center)
    QApplication.processEvents()
    viewer.reset_view()  # what a fresh reset gives with the dock in place
    assert viewer.camera.zoom == pytest.approx(zoom, rel=1e-3)
    np.testing.assert_allclose(viewer.camera.center, center, atol=1e-3)


def test_an_error_keeps_the_dock_width(make_napari_viewer, qtbot):
    from qtpy.QtWidgets import QApplication

    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(1200, 1000)
    _, seg = stack_layers(viewer)
    dock_widget, widget = viewer.window.add_plugin_dock_widget(PLUGIN, "Make sigma map")
    widget.kind.value, widget.source.value = "labels", seg
    QApplication.processEvents()
    qtbot.wait(300)
    before = dock_widget.width()
    assert before < 500
    widget.set_rows([["a label name far too long " * 8, 1.0]])
    widget.add_button.native.click()
    QApplication.processEvents()
    qtbot.wait(300)
    assert widget.status.value.startswith("error:")
    assert dock_widget.width() <= before + 4


def test_the_label_table_columns_fit_the_dock(make_napari_viewer, qtbot):
    """Issue 20: both columns show whole in the dock's width, also after "fill labels"
    (magicgui makes the columns again); the rows stay at the top of a tall dock."""
    from qtpy.QtCore import QPoint
    from qtpy.QtWidgets import QApplication

    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(1200, 1000)
    _, seg = stack_layers(viewer)
    dock_widget, widget = viewer.window.add_plugin_dock_widget(PLUGIN, "Make sigma map")
    widget.kind.value, widget.source.value = "labels", seg
    widget.fill_button.native.click()
    QApplication.processEvents()
    qtbot.wait(300)
    table = widget.table.native
    assert table.rowCount() > 1
    header = table.horizontalHeader()
    assert 0 <= table.viewport().width() - header.length() <= 4  # the columns fill it
    assert min(header.sectionSize(0), header.sectionSize(1)) >= 40
    assert not table.horizontalScrollBar().isVisible()
    assert dock_widget.minimumSizeHint().height() < 300
    form = widget.native.widget()  # a tall dock: the rows stay together at the top
    assert form.height() > form.sizeHint().height() + 100
    assert widget.status.native.mapTo(form, QPoint(0, 0)).y() < form.sizeHint().height()


def test_fill_labels_gives_each_label_a_visible_sigma(viewer):
    """Issue 20: "fill labels" then "Add" made an all-zero map (every sigma was 0)."""
    _, seg = stack_layers(viewer)
    widget = dock(viewer, "Make sigma map")
    widget.kind.value, widget.source.value = "labels", seg
    widget.fill_button.native.click()
    assert widget.table.data.to_list() == [[1, 1.0], [4, 1.0]]
    widget.add_button.native.click()
    expected = sigma_maps.from_labels(seg.data, {1: 1.0, 4: 1.0}, default=0.0)
    check_map_layer(viewer.layers[-1], seg, expected, "labels")  # background stays 0


@pytest.mark.parametrize("shape", [(256, 256), (64, 300)])
@pytest.mark.parametrize("kind_first", [True, False])
def test_default_defocus_map_of_a_2d_layer_stays_small(viewer, shape, kind_first):
    """Issue 20: the defaults gave sigma up to 127 px on a 256-pixel axis; the slope now
    fits the layer, whether the kind or the layer is chosen first."""
    widget = dock(viewer, "Make sigma map")
    if kind_first:
        widget.kind.value = "defocus"
    image = viewer.add_image(np.zeros(shape, dtype=np.float32), name="flat")
    widget.kind.value, widget.source.value = "defocus", image
    widget.add_button.native.click()
    assert 0 < viewer.layers[-1].data.max() <= 8
    widget.axis.value = -1  # a new axis: the slope fits its extent
    widget.add_button.native.click()
    assert 0 < viewer.layers[-1].data.max() <= 8
