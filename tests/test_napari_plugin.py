"""The plugin in a real napari viewer (pytest-qt, Xvfb): manifest, widgets, layers."""

from __future__ import annotations

import numpy as np
import pytest

napari = pytest.importorskip("napari")

from napari.layers import Image, Labels, Points  # noqa: E402
from qtpy.QtCore import QTimer  # noqa: E402

from conftest import PLUGIN, click_and_wait, dock, image_layer  # noqa: E402
from napari_varblur import blur_layer, gaussian_blur  # noqa: E402
from napari_varblur.core.spec import is_dask_array  # noqa: E402
from napari_varblur.gui.layers import LayerBlur  # noqa: E402
from napari_varblur.gui.schema import METADATA_KEY  # noqa: E402


def test_manifest_contributions_are_registered():
    from npe2 import PluginManager

    pm = PluginManager.instance()
    pm.discover()
    manifest = pm.get_manifest(PLUGIN)
    widgets = {w.display_name for w in manifest.contributions.widgets}
    assert widgets == {
        "Gaussian blur",
        "Compare backends",
        "Make sigma map",
        "Estimate sigma map",
        "Deblur",
        "Measure blur from beads",
    }
    filter_menu = manifest.contributions.menus["napari/layers/filter"]
    assert filter_menu[0].submenu == "napari-varblur.submenu"
    assert [s.label for s in manifest.contributions.submenus] == ["VarBlur"]


def test_blur_widget_adds_result_and_difference_then_updates_them(viewer, qtbot):
    layer = image_layer(
        viewer, scale=(2.0, 0.5), translate=(10, -3), colormap="magma", contrast_limits=(5, 80)
    )
    widget = dock(viewer, "Gaussian blur")
    widget.image.value = layer
    widget.sigma.value = "1.5"
    widget.backend.value = "numba"
    widget.mode.value = "reflect"
    widget.difference.value = True
    click_and_wait(qtbot, widget)

    assert len(viewer.layers) == 3
    diff, result = viewer.layers[1], viewer.layers[2]  # the result on top
    expected = gaussian_blur(layer.data, 1.5, mode="reflect", backend="numba")
    np.testing.assert_array_equal(result.data, expected)
    np.testing.assert_allclose(diff.data, layer.data - expected, atol=1e-5)
    np.testing.assert_array_equal(result.scale, layer.scale)
    np.testing.assert_array_equal(result.translate, layer.translate)
    assert result.colormap.name == "magma" and tuple(result.contrast_limits) == (5, 80)
    assert diff.colormap.name == "PiYG"
    low, high = diff.contrast_limits
    assert low == -high and high == pytest.approx(np.abs(diff.data).max())
    meta = result.metadata[METADATA_KEY]
    assert meta["parameters"]["sigma"] == 1.5 and meta["parameters"]["mode"] == "reflect"
    assert meta["backend"] == "numba" and meta["device"].startswith("cpu")
    assert meta["seconds"] > 0 and meta["version"]
    assert "cells" in result.name and "1.5" in result.name

    # The recorded Python call reproduces the result.
    namespace = {"viewer": viewer}
    exec(meta["python"].replace("viewer=viewer)", "viewer=None)"), namespace)

    # Running again updates the same two layers instead of adding new ones.
    widget.sigma.value = "3"
    click_and_wait(qtbot, widget)
    assert len(viewer.layers) == 3
    assert viewer.layers[2] is result and "3" in result.name
    np.testing.assert_array_equal(
        result.data, gaussian_blur(layer.data, 3.0, mode="reflect", backend="numba")
    )
    np.testing.assert_array_equal(layer.data, viewer.layers["cells"].data)  # input untouched


def test_sigma_map_layer_world_units_and_stack(viewer, qtbot):
    stack = np.random.default_rng(1).random((3, 30, 20)).astype(np.float32)
    layer = viewer.add_image(stack, name="stack", scale=(5, 1, 2))
    spatial_map = np.linspace(0.5, 3, 600, dtype=np.float32).reshape(30, 20)
    map_layer = viewer.add_image(spatial_map, name="sigma")
    widget = dock(viewer, "Gaussian blur")
    widget.image.value = layer
    widget.sigma_map.value = map_layer
    widget.sigma.value = "2"
    widget.world_units.value = True
    widget.backend.value = "jax"
    widget.precision.value = "float64"
    click_and_wait(qtbot, widget)
    result = viewer.layers[-1]
    # Per plane over (Y, X); world units divide by the scale (1, 2) per axis.
    per_axis = np.stack([spatial_map * 2 / 1, spatial_map * 2 / 2], axis=-1)[None]
    expected = gaussian_blur(stack, per_axis, axes=(1, 2), backend="reference", precision="float64")
    np.testing.assert_allclose(result.data, expected, atol=1e-12 * 1)
    assert result.data.dtype == np.float64
    assert result.metadata[METADATA_KEY]["parameters"]["sigma_map"] == "sigma"


def test_accuracy_choice_runs_the_tolerance_mode(viewer, qtbot):
    rng = np.random.default_rng(2)
    image = rng.random((256, 512)).astype(np.float32)
    ramp = (
        np.broadcast_to(np.linspace(1.0, 16.0, 512), image.shape) + rng.random(image.shape) * 1e-6
    )
    layer = viewer.add_image(image, name="flat")
    map_layer = viewer.add_image(ramp.astype(np.float32), name="ramp")
    widget = dock(viewer, "Gaussian blur")
    widget.image.value = layer
    widget.sigma_map.value = map_layer
    widget.sigma.value = "1"
    widget.backend.value = "numba"
    assert widget.accuracy.value == "exact"
    widget.accuracy.value = "1e-3"
    click_and_wait(qtbot, widget)
    result = viewer.layers[-1]
    exact = dict(backend="numba", precision="float64")  # the gather: fast, within 1e-12
    expected = gaussian_blur(image, ramp.astype(np.float32), **exact)
    err = np.abs(result.data - expected).max()
    assert 1e-6 < err <= 1e-3 * np.ptp(image) + 1e-5  # levels ran, within the bound
    meta = result.metadata[METADATA_KEY]
    assert meta["parameters"]["tolerance"] == 1e-3 and "tolerance=0.001" in meta["python"]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ({"sigma": "-1"}, "sigma: must be a finite number >= 0, got -1.0"),
        ({"sigma": "two"}, "sigma: could not read 'two'"),
        ({"map_shape": (7, 7)}, "sigma_map 'bad map': shape (7, 7) fits neither"),
        ({"mask_shape": (7, 7)}, "mask 'bad mask': shape (7, 7) fits neither"),
        ({"mask_shape": (40, 50, 2)}, "mask 'bad mask': shape (40, 50, 2) fits neither"),
        ({"axes": "3d"}, "axes: '3-D volume (Z, Y, X)' needs 3 spatial axes"),
    ],
)
def test_bad_choice_notifies_and_changes_nothing(viewer, qtbot, setup, message):
    layer = image_layer(viewer)
    widget = dock(viewer, "Gaussian blur")
    widget.image.value = layer
    if "map_shape" in setup:
        widget.sigma_map.value = viewer.add_image(np.ones(setup["map_shape"]), name="bad map")
    if "mask_shape" in setup:
        widget.mask.value = viewer.add_labels(np.ones(setup["mask_shape"], int), name="bad mask")
    widget.sigma.value = setup.get("sigma", "1")
    widget.axes.value = setup.get("axes", "2d")
    before = [(lyr.name, lyr.data.copy()) for lyr in viewer.layers]
    widget.run_button.native.click()
    assert widget._worker is None  # nothing started
    assert message in widget.status.value
    assert [(lyr.name) for lyr in viewer.layers] == [name for name, _ in before]
    for (_, data), lyr in zip(before, viewer.layers):
        np.testing.assert_array_equal(lyr.data, data)


def masked_stack(viewer):
    """A small stack with NaNs and a Labels layer of its (Y, X) planes."""
    rng = np.random.default_rng(11)
    stack = (rng.random((2, 20, 24)) * 100).astype(np.float32)
    stack[0, 5, 6] = stack[1, 12, 3] = np.nan
    labels = rng.integers(0, 4, (20, 24))  # label values: non-zero is marked
    return viewer.add_image(stack, name="stack"), viewer.add_labels(labels, name="labels")


@pytest.mark.parametrize(
    ("marks", "policy"),
    [("valid", "omit"), ("invalid", "propagate"), ("invalid", "omit")],
)
def test_blur_widget_with_a_labels_mask_equals_the_library(viewer, qtbot, marks, policy):
    layer, labels = masked_stack(viewer)
    before = [(lyr.name, lyr.data.copy()) for lyr in viewer.layers]
    widget = dock(viewer, "Gaussian blur")
    widget.image.value = layer
    assert widget.mask.value is None  # no mask unless chosen
    assert widget.nan_policy.value == "propagate" and widget.mask_marks.value == "valid"
    widget.mask.value = labels
    widget.mask_marks.value = marks
    widget.nan_policy.value = policy
    widget.sigma.value = "1.5"
    widget.backend.value = "numba"
    click_and_wait(qtbot, widget)
    assert widget.status.value.startswith("done"), widget.status.value

    assert len(viewer.layers) == 3
    result = viewer.layers[-1]
    marked = labels.data != 0
    expected = gaussian_blur(
        layer.data, 1.5, axes=(1, 2), mask=marked if marks == "valid" else ~marked,
        nan_policy=policy, backend="numba",
    )  # fmt: skip
    np.testing.assert_array_equal(result.data, expected)  # NaN where the library has NaN
    # The input layers are unchanged, the result is a new layer.
    for (name, data), lyr in zip(before, viewer.layers):
        assert lyr.name == name
        np.testing.assert_array_equal(lyr.data, data)
    meta = result.metadata[METADATA_KEY]
    assert meta["parameters"]["mask"] == "labels"
    assert meta["parameters"]["mask_marks"] == marks and meta["parameters"]["nan_policy"] == policy
    call = meta["python"]
    assert f"mask=viewer.layers['labels'], mask_marks={marks!r}, nan_policy={policy!r}" in call
    # The recorded Python call reproduces the result.
    namespace = {"viewer": viewer}
    exec("out = " + call.split("\n")[1].replace("viewer=viewer)", "viewer=None)"),
         {"blur_layer": blur_layer}, namespace)  # fmt: skip
    np.testing.assert_array_equal(namespace["out"].data, result.data)


def test_nan_policy_raise_in_the_widget_shows_the_library_error(viewer, qtbot):
    layer, _ = masked_stack(viewer)
    widget = dock(viewer, "Gaussian blur")
    widget.image.value = layer
    widget.nan_policy.value = "raise"
    widget.backend.value = "numba"
    click_and_wait(qtbot, widget)
    assert "error: image: nan_policy='raise' and the image has non-finite" in widget.status.value
    assert len(viewer.layers) == 2


def test_blur_layer_mask_arrays_and_refusals():
    rng = np.random.default_rng(12)
    image = rng.random((16, 18))
    valid = rng.random((16, 18)) > 0.3
    layer = Image(image, name="img")
    out = blur_layer(layer, 1.0, mask=valid.astype(np.uint8) * 7, backend="numba",
                     precision="float64")  # fmt: skip
    expected = gaussian_blur(image, 1.0, mask=valid, backend="numba", precision="float64")
    np.testing.assert_array_equal(out.data, expected)
    out = blur_layer(layer, 1.0, mask=Image(valid.astype(np.float32), name="m"),
                     mask_marks="invalid", backend="numba", precision="float64")  # fmt: skip
    expected = gaussian_blur(image, 1.0, mask=~valid, backend="numba", precision="float64")
    np.testing.assert_array_equal(out.data, expected)
    points = Points([[1, 1]], name="pts")
    with pytest.raises(TypeError, match="mask: 'pts' is a Points layer; a mask is a Labels"):
        blur_layer(layer, 1.0, mask=points)
    with pytest.raises(ValueError, match="mask_marks: unknown choice 'both'"):
        blur_layer(layer, 1.0, mask=valid, mask_marks="both")
    with pytest.raises(ValueError, match="nan_policy: unknown policy 'skip'"):
        blur_layer(layer, 1.0, nan_policy="skip")
    holes = valid.astype(np.float64)
    holes[3, 4] = np.nan
    with pytest.raises(ValueError, match="mask 'holes': holds NaN"):
        blur_layer(layer, 1.0, mask=Image(holes, name="holes"))
    with pytest.raises(ValueError, match=r"mask: shape \(18,\) fits neither"):
        blur_layer(layer, 1.0, mask=valid[0])
    # A multiscale mask is read at the image's level.
    pyramid = Labels([valid.astype(int), valid[::2, ::2].astype(int)], multiscale=True, name="p")
    with pytest.raises(ValueError, match=r"mask 'p': is multiscale with 2 levels; .* level None"):
        blur_layer(layer, 1.0, mask=pyramid)
    small = Image([image, image[::2, ::2]], multiscale=True, name="small")
    out = blur_layer(small, 1.0, mask=pyramid, level=1, backend="numba", precision="float64")
    expected = gaussian_blur(image[::2, ::2], 1.0, mask=valid[::2, ::2], backend="numba",
                             precision="float64")  # fmt: skip
    np.testing.assert_array_equal(out.data, expected)


def test_raise_is_checked_before_any_plane_with_the_full_index():
    """A NaN in the last plane of a stack: refused when the blur is set up (no plane
    is blurred first), with its index in the stack, not in the plane."""
    from napari_varblur.core.options import BlurOptions
    from napari_varblur.gui.layers import LayerBlur

    stack = np.zeros((5, 20, 20))
    stack[4, 3, 3] = np.nan
    raising = BlurOptions(nan_policy="raise")
    with pytest.raises(ValueError, match=r"1 value \(first at index \(4, 3, 3\)\)"):
        LayerBlur.from_layer(Image(stack, name="stack"), 1.0, options=raising)


def test_big_numpy_layer_with_a_mask_is_blurred_lazily(monkeypatch):
    # A lazy result takes the dask path: the mask must reach it.
    from napari_varblur.gui import layers as gui_layers

    monkeypatch.setattr(gui_layers, "LAZY_BYTES", 1000)  # "big" for this test
    rng = np.random.default_rng(13)
    stack = rng.random((3, 20, 30))
    labels = Labels(rng.integers(0, 3, (20, 30)), name="labels")
    out = blur_layer(Image(stack, name="stack"), 1.0, mask=labels, nan_policy="omit",
                     backend="numba", precision="float64")  # fmt: skip
    assert is_dask_array(out.data)
    expected = gaussian_blur(stack, 1.0, axes=(1, 2), mask=labels.data != 0, backend="numba",
                             precision="float64")  # fmt: skip
    np.testing.assert_allclose(out.data.compute(), expected, rtol=0, atol=1e-12)


def test_labels_and_multiscale_layers_are_refused():
    labels = Labels(np.zeros((8, 8), int), name="mask")
    with pytest.raises(TypeError, match="layer: 'mask' is a Labels layer; VarBlur blurs Image"):
        blur_layer(labels, 1.0)
    pyramid = Image([np.zeros((16, 16)), np.zeros((8, 8))], multiscale=True, name="pyr")
    with pytest.raises(ValueError, match="'pyr' is multiscale with 2 levels; choose a level"):
        blur_layer(pyramid, 1.0)
    out = blur_layer(pyramid, 1.0, level=1, backend="reference")
    assert out.data.shape == (8, 8)


def test_rgb_blurs_each_channel_over_y_x():
    scipy_ndimage = pytest.importorskip("scipy.ndimage")
    from conftest import assert_close

    rgb = (np.random.default_rng(2).random((20, 24, 3)) * 255).astype(np.uint8)
    layer = Image(rgb, rgb=True, name="photo")
    out = blur_layer(layer, 1.2, mode="nearest", backend="numba")
    assert out.rgb and out.data.shape == rgb.shape
    # An independent oracle: scipy per channel, with the contract's radius ceil(3 sigma).
    expected = np.stack(
        [
            scipy_ndimage.gaussian_filter(rgb[..., c].astype(np.float64), 1.2, mode="nearest",
                                          radius=4)
            for c in range(3)
        ],
        axis=-1,
    )  # fmt: skip
    assert_close(out.data, expected, "float32", rgb)


def test_explicit_axes_out_of_range_are_refused():
    flat = Image(np.zeros((8, 9)), name="flat")
    with pytest.raises(ValueError, match="axes: axis 2 is out of range for a 2-D image"):
        blur_layer(flat, 1.0, axes=(2,))
    with pytest.raises(ValueError, match="axes: axis -3 is out of range for a 2-D image"):
        blur_layer(flat, 1.0, axes=(0, -3))
    # An RGB layer's explicit axes index its data, channel axis included.
    photo = Image(np.zeros((8, 9, 3), np.uint8), rgb=True, name="photo")
    with pytest.raises(ValueError, match="axes: axis 3 is out of range for a 3-D image"):
        LayerBlur.from_layer(photo, 1.0, axes=(3,))
    # In world units the channel axis has no scale: a clear error, not an IndexError.
    with pytest.raises(ValueError, match="axes: axis 2 is the colour channel axis of 'photo'"):
        LayerBlur.from_layer(photo, 1.0, axes=(0, 2), world_units=True)


@pytest.mark.parametrize("as_layer", [False, True], ids=["array", "layer"])
@pytest.mark.parametrize("sigma", [1.5, (1.0, 2.0)], ids=["one", "per-axis"])
def test_blur_layer_reads_a_map_of_the_blurred_axes_in_their_order(as_layer, sigma):
    # axes (2, 1) take a map of shape (n2, n1): transposed into place, not reshaped.
    rng = np.random.default_rng(6)
    image = rng.random((4, 9, 13))
    sigma_map = rng.uniform(0.5, 2.0, (13, 9))
    given = Image(sigma_map, name="map") if as_layer else sigma_map
    out = blur_layer(
        Image(image, name="stack"), sigma, given, axes=(2, 1), backend="reference",
        precision="float64",
    )  # fmt: skip
    factors = np.broadcast_to(sigma, (2,))
    per_axis = np.stack([sigma_map.T * f for f in factors], axis=-1)[None]
    expected = gaussian_blur(image, per_axis, axes=(2, 1), backend="reference", precision="float64")
    np.testing.assert_allclose(out.data, expected, rtol=0, atol=1e-12)


def test_compare_widget_reports_differences_and_times(viewer, qtbot):
    layer = image_layer(viewer)
    widget = dock(viewer, "Compare backends")
    widget.image.value = layer
    widget.sigma.value = "2"
    assert (widget.backend_a.value, widget.backend_b.value) == ("jax", "numba")
    click_and_wait(qtbot, widget)
    a = gaussian_blur(layer.data, 2.0, backend="jax")
    b = gaussian_blur(layer.data, 2.0, backend="numba")
    assert widget.stats["max_abs_diff"] == pytest.approx(np.abs(a - b).max(), abs=1e-9)
    assert 0 < widget.stats["max_abs_diff"] < 1e-5 * 100
    assert widget.stats["seconds_a"] > 0 and widget.stats["seconds_b"] > 0
    assert "max |A-B|" in widget.report.value and "jax" in widget.report.value
    diff, result = viewer.layers[1], viewer.layers[2]
    np.testing.assert_array_equal(result.data, a)
    np.testing.assert_array_equal(diff.data, a - b)
    assert diff.name == "cells jax minus numba"


def _dask_movie(series, chunks):
    return pytest.importorskip("dask.array").from_array(series, chunks=chunks)


@pytest.mark.parametrize("kind", ["dask", "big-numpy"])
def test_compare_widget_on_a_lazy_layer(viewer, qtbot, monkeypatch, kind):
    from napari_varblur.gui import layers as gui_layers

    series = np.random.default_rng(7).random((3, 32, 40)).astype(np.float32) * 100
    if kind == "dask":
        data = _dask_movie(series, (1, 32, 40))
    else:
        monkeypatch.setattr(gui_layers, "LAZY_BYTES", 1000)  # "big" for this test
        data = series
    layer = viewer.add_image(data, name="movie")
    widget = dock(viewer, "Compare backends")
    widget.image.value = layer
    widget.backend_a.value, widget.backend_b.value = "reference", "numba"
    click_and_wait(qtbot, widget)
    assert widget.status.value == "done", widget.status.value
    a = gaussian_blur(series, 2.0, axes=(1, 2), backend="reference")
    b = gaussian_blur(series, 2.0, axes=(1, 2), backend="numba")
    diff = a.astype(np.float64) - b
    assert widget.stats["max_abs_diff"] == pytest.approx(np.abs(diff).max(), abs=1e-6)
    assert widget.stats["rms_diff"] == pytest.approx(np.sqrt(np.mean(diff**2)), abs=1e-6)
    assert 0 <= widget.stats["rms_diff"] <= widget.stats["max_abs_diff"] < 1e-5 * 100
    difference, result = viewer.layers[-2], viewer.layers[-1]
    assert is_dask_array(result.data) and is_dask_array(difference.data)  # still lazy
    low, high = difference.contrast_limits
    assert low == -high and 0 < high < np.inf


def test_compare_widget_shows_an_error_from_its_worker(viewer, qtbot):
    # Computing a lazy layer can fail (a file gone, a network store down): the error is
    # raised in the worker, and the widget must show it.
    series = np.random.default_rng(8).random((3, 16, 20)).astype(np.float32)
    broken = {"now": False}

    def read(block):
        if broken["now"]:
            raise OSError("the store went away")
        return block

    lazy = _dask_movie(series, (1, 16, 20)).map_blocks(read, dtype=np.float32)
    layer = viewer.add_image(lazy, name="movie")
    widget = dock(viewer, "Compare backends")
    widget.image.value = layer
    widget.backend_a.value, widget.backend_b.value = "reference", "numba"
    n_layers = len(viewer.layers)
    broken["now"] = True
    click_and_wait(qtbot, widget)
    assert "error: " in widget.status.value and "the store went away" in widget.status.value
    assert len(viewer.layers) == n_layers


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "false"),
        ({"XLA_PYTHON_CLIENT_PREALLOCATE": "true"}, "true"),
        ({"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"}, None),
    ],
    ids=["unset", "user-preallocate", "user-fraction"],
)
def test_plugin_import_stops_jax_preallocating_the_gpu(env, expected):
    import json
    import os
    import subprocess
    import sys

    names = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION")
    clean = {k: v for k, v in os.environ.items() if k not in names}
    code = (
        "import json, os, sys; import napari_varblur.gui.widgets; "
        "print(json.dumps([os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE'), "
        "'jax' in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    value, jax_imported = json.loads(out.stdout.strip().splitlines()[-1])
    assert value == expected
    assert not jax_imported  # set before JAX is first imported, as it must be


def test_worker_keeps_gui_responsive_and_cancels(viewer, qtbot):
    big = np.random.default_rng(3).random((2048, 2048)).astype(np.float32)
    layer = viewer.add_image(big, name="big")
    widget = dock(viewer, "Gaussian blur")
    widget.image.value = layer
    widget.sigma_map.value = viewer.add_image(np.full(big.shape, 2.5, np.float32), name="m")
    widget.backend.value = "numba"
    ticks = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(1))
    timer.start(10)
    click_and_wait(qtbot, widget)
    timer.stop()
    assert widget.status.value.startswith("done")
    # The event loop kept turning while the blur ran on the worker thread.
    assert len(ticks) >= 3

    stack = np.zeros((400, 64, 64), np.float32)
    viewer.add_image(stack, name="stack")
    widget.image.value = viewer.layers["stack"]
    widget.sigma_map.value = None
    widget.backend.value = "reference"
    n_layers = len(viewer.layers)
    widget.run_button.native.click()
    qtbot.waitUntil(lambda: "/400 done" in widget.status.value, timeout=60_000)
    # The worker reports to napari's activity dock through a progress bar of 400 steps.
    from napari.utils.progress import progress

    assert any(bar.total == 400 and bar.desc == "VarBlur" for bar in progress._all_instances)
    widget.cancel_button.native.click()
    qtbot.waitUntil(lambda: widget._worker is None, timeout=60_000)
    assert widget.status.value == "cancelled"
    assert len(viewer.layers) == n_layers


def test_console_blur_layer_and_canvas_renders(make_napari_viewer):
    viewer = make_napari_viewer(show=True)
    layer = image_layer(viewer, shape=(64, 64))
    out = blur_layer(layer, 2.0, viewer=viewer, difference=True, backend="numba")
    assert out is viewer.layers[-1] and len(viewer.layers) == 3
    again = blur_layer(layer, 1.0, viewer=viewer, backend="numba")
    assert again is out and len(viewer.layers) == 3
    for other in viewer.layers:
        other.visible = other is out
    shot = viewer.screenshot(canvas_only=True, flash=False)
    assert shot.ndim == 3 and shot[..., :3].std() > 1  # not a blank canvas


def test_sample_data_opens(viewer):
    viewer.open_sample(PLUGIN, "defocus")
    names = [lyr.name for lyr in viewer.layers]
    assert names == ["varblur cells", "varblur sigma map"]
    assert viewer.layers[0].data.shape == viewer.layers[1].data.shape == (512, 512)


def test_demo_view_fills_a_viewer_with_sample_result_and_widget(viewer):
    from napari_varblur.app.viewer import open_demo_viewer

    _, widget = open_demo_viewer(viewer, run=False)
    assert widget.image.value is viewer.layers["varblur cells"]
    assert widget.sigma_map.value is viewer.layers["varblur sigma map"]
    result = viewer.layers[-1]
    assert result.metadata[METADATA_KEY]["parameters"]["sigma_map"] == "varblur sigma map"


def test_demo_view_without_display_says_so():
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    out = subprocess.run(
        [sys.executable, "-m", "napari_varblur", "demo", "--view"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert "no display found" in out.stderr


def test_dask_time_series_gives_a_lazy_result_layer(viewer, qtbot):
    da = pytest.importorskip("dask.array")
    series = np.random.default_rng(4).random((6, 48, 40)).astype(np.float32)
    computed = []

    def watch(block, block_info=None):
        computed.append(block_info[0]["chunk-location"][0])
        return block

    lazy = da.from_array(series, chunks=(1, 48, 40)).map_blocks(watch, dtype=np.float32)
    layer = viewer.add_image(lazy, name="movie")
    computed.clear()
    widget = dock(viewer, "Gaussian blur")
    widget.image.value = layer
    widget.sigma.value = "2"
    widget.backend.value = "numba"
    widget.difference.value = True
    click_and_wait(qtbot, widget)
    result = viewer.layers[-1]
    assert isinstance(result.data, da.Array)  # nothing computed for the whole movie
    start = viewer.dims.current_step[0]
    assert start in computed  # the frame on screen was computed...
    assert set(computed) <= {0, start}  # ...and no other
    other = 4 if start != 4 else 1
    computed.clear()
    viewer.dims.set_current_step(0, other)  # scrolling computes that time point only
    assert set(computed) == {other}
    np.testing.assert_allclose(
        np.asarray(result.data[other]),
        gaussian_blur(series[other], 2.0, backend="reference"),
        atol=1e-4,
    )
    diff = viewer.layers[-2]
    low, high = diff.contrast_limits
    assert low == -high > -np.inf and isinstance(diff.data, da.Array)


def test_big_numpy_layer_is_blurred_lazily(monkeypatch):
    from napari_varblur.gui import layers as gui_layers

    da = pytest.importorskip("dask.array")
    monkeypatch.setattr(gui_layers, "LAZY_BYTES", 1000)  # "big" for this test
    stack = np.random.default_rng(5).random((4, 20, 30))
    out = blur_layer(Image(stack, name="stack"), 1.0, backend="numba", precision="float64")
    assert isinstance(out.data, da.Array) and out.data.chunks[0] == (1, 1, 1, 1)
    np.testing.assert_allclose(
        out.data.compute(),
        gaussian_blur(stack, 1.0, axes=(1, 2), backend="reference", precision="float64"),
        atol=1e-12,
    )
