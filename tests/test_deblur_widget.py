"""The "Deblur" widget in a real napari viewer (pytest-qt, Xvfb): real deblurs, small
images; the result and residual layers, re-runs, Cancel and bad input."""

from __future__ import annotations

import numpy as np
import pytest

napari = pytest.importorskip("napari")

from conftest import PLUGIN, click_and_wait, dock  # noqa: E402
from napari_varblur import deblur, gaussian_blur  # noqa: E402
from napari_varblur.gui.deblur_widget import DeblurWidget  # noqa: E402
from napari_varblur.gui.schema import METADATA_KEY  # noqa: E402

SCALE, TRANSLATE = (2.0, 0.5), (10.0, -3.0)


def _scene(viewer, shape=(40, 48)):
    rng = np.random.default_rng(1)
    truth = np.zeros(shape)
    truth[10:30, 12:36] = 50.0
    smap = np.broadcast_to(np.linspace(1.0, 2.5, shape[1]), shape).copy()
    observed = rng.poisson(gaussian_blur(truth, smap, precision="float64")).astype(np.float32)
    image = viewer.add_image(observed, name="cells", scale=SCALE, translate=TRANSLATE)
    maps = viewer.add_image(smap, name="sigma", scale=SCALE, translate=TRANSLATE)
    return image, maps


def test_deblur_docks_from_the_menu_and_adds_estimate_and_residual(viewer, qtbot):
    from npe2 import PluginManager

    manifest = PluginManager.instance().get_manifest(PLUGIN)
    menu = manifest.contributions.menus["napari-varblur.submenu"]
    assert "napari-varblur.deblur" in [item.command for item in menu]
    image, maps = _scene(viewer)
    before = np.array(image.data)
    widget = dock(viewer, "Deblur")
    assert isinstance(widget, DeblurWidget)
    widget.image.value, widget.sigma_map.value, widget.sigma.value = image, maps, "1"
    widget.iterations.value = 12
    widget.precision.value = "float64"
    click_and_wait(qtbot, widget)
    names = [layer.name for layer in viewer.layers]
    assert names == ["cells", "sigma", "cells deblurred", "cells deblur residual"]
    estimate, residual = viewer.layers["cells deblurred"], viewer.layers["cells deblur residual"]
    expected = deblur(before, np.asarray(maps.data), iterations=12, precision="float64")
    np.testing.assert_allclose(estimate.data, expected, rtol=1e-10, atol=1e-10)
    reblurred = gaussian_blur(expected, np.asarray(maps.data), precision="float64")
    np.testing.assert_allclose(residual.data, before - reblurred, atol=1e-8)
    for layer in (estimate, residual):
        np.testing.assert_array_equal(layer.scale, SCALE)
        np.testing.assert_array_equal(layer.translate, TRANSLATE)
        assert layer.metadata[METADATA_KEY]["iterations"] == 12
    np.testing.assert_array_equal(image.data, before)  # the input is never changed
    # A re-run updates the same layers (none added, none clobbered).
    widget.method.value, widget.regularization.value = "rl_tv", "0.005"
    click_and_wait(qtbot, widget)
    assert [layer.name for layer in viewer.layers] == names
    assert viewer.layers["cells deblurred"] is estimate
    assert estimate.metadata[METADATA_KEY]["parameters"]["method"] == "rl_tv"
    assert widget.status.value.startswith("done: 12 iterations")


def test_cancel_stops_between_iterations_and_bad_input_starts_nothing(viewer, qtbot):
    image, _ = _scene(viewer, shape=(256, 256))
    widget = dock(viewer, "Deblur")
    widget.image.value, widget.sigma_map.value, widget.sigma.value = image, None, "3"
    widget.iterations.value = 100_000
    widget.run_button.native.click()
    qtbot.waitUntil(lambda: widget.status.value.startswith("iteration"), timeout=60_000)
    widget.cancel_button.native.click()
    qtbot.waitUntil(lambda: widget._worker is None, timeout=60_000)
    assert widget.status.value == "cancelled"
    count = len(viewer.layers)
    widget.sigma.value = "-1"
    widget.run_button.native.click()
    assert widget._worker is None and "sigma" in widget.status.value
    assert len(viewer.layers) == count
