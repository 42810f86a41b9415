"""Issue 20 in a real viewer (pytest-qt, Xvfb): the level chooser for multiscale layers,
and sigma units (a map already in pixels turns world units off; results named with
their unit and recording the sigma in pixels)."""

from __future__ import annotations

import numpy as np
import pytest

napari = pytest.importorskip("napari")

from napari.layers import Image  # noqa: E402

from conftest import dock  # noqa: E402
from napari_varblur import blur_layer, gaussian_blur  # noqa: E402
from napari_varblur.gui.layer_data import default_level, level_choices  # noqa: E402
from napari_varblur.gui.schema import METADATA_KEY, map_in_pixels  # noqa: E402

SCALE, TRANSLATE = (2.0, 0.5), (10.0, -3.0)


def click_and_wait(qtbot, widget, timeout=60_000):
    widget.run_button.native.click()
    qtbot.waitUntil(lambda: widget._worker is None, timeout=timeout)


def shown(widget, field) -> bool:
    """Whether ``field``'s row shows once the dock does."""
    return field.native.isVisibleTo(widget.native.widget())


def pyramid(viewer):
    """Three levels, each half the last (napari's downsample factors 1, 2, 4)."""
    rng = np.random.default_rng(0)
    levels = [rng.random((64 // f, 96 // f)).astype(np.float32) for f in (1, 2, 4)]
    return viewer.add_image(levels, multiscale=True, name="slide", scale=SCALE,
                            translate=TRANSLATE)  # fmt: skip


def test_a_multiscale_layer_gets_a_level_chooser_and_a_result_at_its_scale(viewer, qtbot):
    plain = viewer.add_image(np.zeros((8, 8), np.float32), name="plain")
    layer = pyramid(viewer)
    widget = dock(viewer, "Gaussian blur")
    widget.image.value = plain
    assert not shown(widget, widget.level) and widget.level.value is None
    widget.image.value = layer
    assert shown(widget, widget.level)  # and it shows each level's size
    combo = widget.level.native
    assert [combo.itemText(i) for i in range(combo.count())] == [
        "0: 64×96 (24 KiB)", "1: 32×48 (6 KiB)", "2: 16×24 (1.5 KiB)"]  # fmt: skip
    assert widget.level.value == 0  # the finest: it fits in memory

    widget.level.value = 1
    widget.backend.value = "numba"
    click_and_wait(qtbot, widget)
    result = viewer.layers[-1]
    np.testing.assert_array_equal(result.data, gaussian_blur(layer.data[1], 2.0, backend="numba"))
    # Level 1's pixel i is drawn at level 0's 2 i: the result lies on the input.
    np.testing.assert_array_equal(result.scale, np.multiply(SCALE, 2))
    np.testing.assert_array_equal(result.translate, TRANSLATE)
    assert "level 1" in result.name
    params = result.metadata[METADATA_KEY]["parameters"]
    assert params["level"] == 1
    widget.image.value = plain  # the chooser goes with the multiscale layer
    assert not shown(widget, widget.level) and widget.level.value is None


def test_world_units_at_a_level_use_that_levels_pixel_size(viewer):
    layer = pyramid(viewer)
    out = blur_layer(layer, 2.0, level=2, world_units=True, backend="reference")
    # Level 2's pixels are 4 times level 0's: (8, 2) world units; sigma 2 is (0.25, 1) px.
    expected = gaussian_blur(layer.data[2], (0.25, 1.0), backend="reference")
    np.testing.assert_allclose(out.data, expected, atol=1e-6)
    assert out.metadata[METADATA_KEY]["parameters"]["sigma_pixels"] == [0.25, 1.0]


def test_the_default_level_is_the_finest_that_fits_in_memory():
    levels = [np.zeros((4096 // f, 4096 // f), np.uint8) for f in (1, 2, 4)]
    layer = Image(levels, multiscale=True)
    # Each level needs its data, result and one scratch copy in float32 in half the
    # free memory: 4096² needs 192 MiB, 2048² 48 MiB, 1024² 12 MiB.
    assert default_level(layer, available=2**30) == 0
    assert default_level(layer, available=300 * 2**20) == 1
    assert default_level(layer, available=100 * 2**20) == 1
    assert default_level(layer, "float64", available=100 * 2**20) == 2  # twice as big
    assert default_level(layer, available=1) == 2  # none fits: the coarsest
    assert level_choices(layer)[0] == ("0: 4096×4096 (64 MiB)", 0)


def test_a_map_made_in_pixels_turns_world_units_off(viewer):
    cells = viewer.add_image(np.random.default_rng(1).random((30, 40)).astype(np.float32),
                             name="cells", scale=(0.5, 0.5), units=("um", "um"))  # fmt: skip
    maker = dock(viewer, "Make sigma map")
    maker.kind.value = "radial"
    maker.source.value = cells
    maker.world_units.value = True  # sigmas given in µm become pixels in the map
    maker.add_button.native.click()
    made = viewer.layers[-1]
    assert map_in_pixels(made)
    own = viewer.add_image(np.ones((30, 40), np.float32), name="my map")  # untagged
    assert not map_in_pixels(own)

    blur = dock(viewer, "Gaussian blur")
    blur.image.value = cells
    blur.sigma_map.value = own
    blur.world_units.value = True
    assert blur.world_units.enabled
    blur.sigma_map.value = made
    assert not blur.world_units.value and not blur.world_units.enabled
    assert "already in pixels" in blur.world_units.tooltip
    blur.sigma_map.value = own  # a map of the user's own: their choice again
    assert blur.world_units.enabled and "already in pixels" not in blur.world_units.tooltip
    # Scripted, the same guard: an error naming the argument, not a blur divided twice.
    with pytest.raises(ValueError, match=r"world_units: sigma_map 'sigma map .*already in pixels"):
        blur_layer(cells, 1.0, made, world_units=True)


def test_results_are_named_with_their_unit_and_record_the_sigma_in_pixels(viewer, qtbot):
    cells = viewer.add_image(np.random.default_rng(2).random((30, 40)).astype(np.float32),
                             name="cells", scale=(0.5, 0.25), units=("um", "um"))  # fmt: skip
    widget = dock(viewer, "Gaussian blur")
    widget.image.value = cells
    widget.backend.value = "numba"
    widget.sigma.value = "1"
    widget.world_units.value = True
    click_and_wait(qtbot, widget)
    result = viewer.layers[-1]
    assert "σ=1.0 µm" in result.name
    params = result.metadata[METADATA_KEY]["parameters"]
    assert params["units"] == "µm" and params["sigma_pixels"] == [2.0, 4.0]
    np.testing.assert_array_equal(
        result.data, gaussian_blur(cells.data, (2.0, 4.0), backend="numba")
    )
    widget.world_units.value = False
    click_and_wait(qtbot, widget)
    assert "σ=1.0 px" in result.name  # the same layer, updated
    params = result.metadata[METADATA_KEY]["parameters"]
    assert params["units"] == "px" and params["sigma_pixels"] == [1.0, 1.0]
