"""The plugin's docks in a real napari viewer (pytest-qt, Xvfb): tooltips, errors that
keep the dock's width, layers kept in order, the Advanced fold, docks that fit a
laptop."""

from __future__ import annotations

import numpy as np
import pytest

napari = pytest.importorskip("napari")

from conftest import PLUGIN, click_and_wait, dock, image_layer  # noqa: E402
from napari_varblur import gaussian_blur  # noqa: E402
from napari_varblur.gui.schema import METADATA_KEY  # noqa: E402

# A layer name longer than any dock: words, and one long unbroken word (a path).
LONG_NAME = "mask " + "from the segmentation of a long acquisition " * 3 + "/data/" + "x" * 120


def settle(qtbot, seconds=0.3):
    """Let Qt lay the dock out again (a resize takes a few event-loop turns)."""
    from qtpy.QtWidgets import QApplication

    QApplication.processEvents()
    qtbot.wait(int(seconds * 1000))


@pytest.mark.parametrize("name", ["Gaussian blur", "Compare backends"])
def test_an_error_keeps_the_dock_width_and_notifies(make_napari_viewer, qtbot, name):
    from napari.utils.notifications import notification_manager

    viewer = make_napari_viewer(show=True)
    # napari's test window (630 px) is shorter than the form itself: give it room.
    viewer.window._qt_window.resize(1200, 1000)
    layer = image_layer(viewer, shape=(20, 24))
    bad = viewer.add_labels(np.ones((7, 7), int), name=LONG_NAME)  # there before the dock
    dock_widget, widget = viewer.window.add_plugin_dock_widget(PLUGIN, name)
    widget.image.value = layer
    widget.mask.value = bad
    settle(qtbot)
    before = (dock_widget.width(), dock_widget.minimumSizeHint().width())
    assert widget.mask.native.sizeHint().width() < 300  # a long name does not size it
    widget.run_button.native.click()
    settle(qtbot)
    assert widget._worker is None and widget.status.value.startswith("error: mask 'mask from")
    after = (dock_widget.width(), dock_widget.minimumSizeHint().width())
    assert after[0] <= before[0] + 4 and after[1] <= before[1] + 4, (before, after)
    # A short status that is shown whole (wrapped, not cut off at the top or bottom) ...
    status = widget.status.native
    assert status.wordWrap() and len(widget.status.value) <= 120
    assert status.height() >= status.heightForWidth(status.width()), widget.status.value
    # ... and the full text in its tooltip and in the notification.
    assert LONG_NAME in widget.status.tooltip and "fits neither" in widget.status.tooltip
    last = notification_manager.records[-1]
    assert "fits neither" in last.message and LONG_NAME in last.message


def test_the_result_stays_the_visible_top_layer_with_a_difference(viewer, qtbot):
    layer = image_layer(viewer, shape=(20, 24))
    widget = dock(viewer, "Gaussian blur")
    widget.image.value = layer
    widget.backend.value = "numba"
    click_and_wait(qtbot, widget)  # first without a difference...
    result = viewer.layers[-1]
    widget.difference.value = True  # ...then with one: it goes below the result
    click_and_wait(qtbot, widget)
    assert widget.status.value.startswith("done"), widget.status.value
    assert [lyr.name for lyr in viewer.layers][:1] == ["cells"] and len(viewer.layers) == 3
    assert viewer.layers[-1] is result and result.visible
    assert viewer.layers[-2].metadata[METADATA_KEY]["role"] == "result-difference"
    assert viewer.layers.selection.active is result
    widget.sigma.value = "1"
    click_and_wait(qtbot, widget)  # an update keeps the order
    assert viewer.layers[-1] is result and result.visible and len(viewer.layers) == 3


def test_compare_puts_the_difference_below_result_a(viewer, qtbot):
    layer = image_layer(viewer, shape=(20, 24))
    widget = dock(viewer, "Compare backends")
    widget.image.value = layer
    widget.backend_a.value, widget.backend_b.value = "reference", "numba"
    click_and_wait(qtbot, widget)
    assert widget.status.value == "done", widget.status.value
    result, diff = viewer.layers[-1], viewer.layers[-2]
    assert result.metadata[METADATA_KEY]["role"] == "compare" and result.visible
    assert diff.metadata[METADATA_KEY]["role"] == "compare-difference"


@pytest.mark.parametrize("name", ["Gaussian blur", "Compare backends"])
def test_every_field_has_a_one_line_tooltip(viewer, name):
    widget = dock(viewer, name)
    fields = list(widget)
    assert len(fields) >= 15
    for field in fields:
        tip = field.tooltip
        assert tip and tip.strip() and "\n" not in tip, field.name
        assert field.native.toolTip() == tip, field.name  # what Qt shows on hover
    for key in ("mode", "cval", "truncate", "precision", "accuracy", "mask", "mask_marks",
                "nan_policy", "axes", "world_units", "sigma", "sigma_map"):  # fmt: skip
        assert getattr(widget, key).tooltip, key


def test_status_says_when_a_run_compiled_kernels(make_napari_viewer, qtbot):
    """Issue 11 item 8: a run that compiled (JAX, a shape this process has not seen)
    says so in the status; the same run again does not."""
    viewer = make_napari_viewer()
    layer = viewer.add_image(np.random.default_rng(5).random((23, 29)), name="odd")
    widget = dock(viewer, "Gaussian blur")
    widget.image.value = layer
    widget.backend.value = "jax"
    widget.sigma.value = "1.37"
    click_and_wait(qtbot, widget)
    assert widget.status.value.endswith("including compiling kernels (first run only)")
    click_and_wait(qtbot, widget)
    assert widget.status.value.startswith("done in") and "compiling" not in widget.status.value


# ---------------------------------------------------------- docks that fit a laptop (issue 20)

ALL_DOCKS = ("Gaussian blur", "Compare backends", "Make sigma map", "Estimate sigma map")
#: A 1366x768 laptop screen: the main window with every dock must fit in its height.
LAPTOP = (1366, 768)


def shown_in_form(widget, field) -> bool:
    """Whether ``field`` shows once the dock does (its row is not hidden)."""
    return field.native.isVisibleTo(widget.native.widget())


def test_all_four_docks_fit_a_laptop_screen(make_napari_viewer, qtbot):
    """Each form scrolls in its dock, so the window with all four docks (1970 px tall
    before, 940 px with two) fits a 768 px screen; no form is cut off sideways."""
    viewer = make_napari_viewer(show=True)
    window = viewer.window._qt_window
    docks = [viewer.window.add_plugin_dock_widget(PLUGIN, name) for name in ALL_DOCKS]
    window.resize(*LAPTOP)
    for _, widget in docks:  # the tallest forms: every row shown
        if hasattr(widget, "advanced"):
            widget.advanced.value = True
    settle(qtbot)
    assert window.minimumSizeHint().height() <= LAPTOP[1]
    for dock_widget, widget in docks:
        scroll = dock_widget.widget()
        assert scroll is widget.native, dock_widget.name  # napari docks the scroll area
        assert dock_widget.minimumSizeHint().height() < 300, dock_widget.name
        assert not scroll.horizontalScrollBar().isVisible(), dock_widget.name
        assert scroll.viewport().width() >= scroll.widget().minimumSizeHint().width()
        form = scroll.widget()  # it scrolls rather than squeezes its rows
        assert form.height() >= form.sizeHint().height(), dock_widget.name
    assert any(dock_widget.widget().verticalScrollBar().isVisible() for dock_widget, _ in docks)


@pytest.mark.parametrize("name", ["Gaussian blur", "Estimate sigma map"])
def test_a_short_dock_scrolls_and_is_never_cut_off_sideways(make_napari_viewer, qtbot, name):
    viewer = make_napari_viewer(show=True)
    dock_widget, widget = viewer.window.add_plugin_dock_widget(PLUGIN, name)
    widget.advanced.value = True
    viewer.window._qt_window.resize(1000, 300)  # as short as the window goes
    settle(qtbot)
    scroll = dock_widget.widget()
    assert scroll.verticalScrollBar().isVisible()
    assert not scroll.horizontalScrollBar().isVisible()
    assert scroll.viewport().width() >= scroll.widget().minimumSizeHint().width()


@pytest.mark.parametrize("name", ["Gaussian blur", "Compare backends"])
def test_advanced_starts_folded_and_opens(viewer, name):
    from napari_varblur.gui.widgets import BLUR_ADVANCED

    widget = dock(viewer, name)
    form = widget.native.widget()
    folded = form.sizeHint().height()
    basic = [widget.image, widget.sigma, widget.mask, widget.run_button, widget.status]
    assert not widget.advanced.value and widget.advanced.text.endswith("Advanced")
    assert not any(shown_in_form(widget, getattr(widget, key)) for key in BLUR_ADVANCED)
    assert all(shown_in_form(widget, field) for field in basic)
    widget.advanced.native.click()
    assert widget.advanced.value
    assert all(shown_in_form(widget, getattr(widget, key)) for key in BLUR_ADVANCED)
    assert form.sizeHint().height() > folded + 100  # the default view is the short one
    widget.advanced.native.click()
    assert not any(shown_in_form(widget, getattr(widget, key)) for key in BLUR_ADVANCED)


def test_options_under_advanced_are_used_while_folded(viewer, qtbot):
    layer = image_layer(viewer, shape=(20, 24))
    widget = dock(viewer, "Gaussian blur")
    widget.image.value = layer
    widget.backend.value = "numba"
    widget.mode.value, widget.truncate.value = "reflect", 2.5
    assert not widget.advanced.value and not shown_in_form(widget, widget.mode)
    click_and_wait(qtbot, widget)
    result = viewer.layers[-1]
    params = result.metadata[METADATA_KEY]["parameters"]
    assert params["mode"] == "reflect" and params["truncate"] == 2.5
    expected = gaussian_blur(layer.data, 2.0, mode="reflect", truncate=2.5, backend="numba")
    np.testing.assert_array_equal(result.data, expected)
