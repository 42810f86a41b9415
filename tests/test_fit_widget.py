"""The "Estimate sigma map" widget and the focus-pair sample in a real napari viewer
(pytest-qt, Xvfb).

Three real fits run (each is mostly JAX compiling, about 15 s on a CPU; the two with the
same shape and settings share the compiled programs); the other tests replace the fit
with a canned one after the library has checked the arguments, so they test the widget,
not the optimiser.
"""

from __future__ import annotations

import logging
import time
import warnings

import numpy as np
import pytest

napari = pytest.importorskip("napari")

from napari.utils.notifications import notification_manager  # noqa: E402

from conftest import PLUGIN, dock  # noqa: E402
from napari_varblur import fit as fit_module  # noqa: E402
from napari_varblur import gaussian_blur  # noqa: E402
from napari_varblur.fit import SigmaFit, focus_pair  # noqa: E402
from napari_varblur.gui import fit_widget, forms  # noqa: E402
from napari_varblur.gui.schema import (  # noqa: E402
    METADATA_KEY,
    SIGMA_MAP_ROLE,
    fitting_sigma_map,
    is_sigma_map,
)
from napari_varblur.sample import focus_pair_sample  # noqa: E402

SCALE, TRANSLATE = (2.0, 0.5), (10.0, -3.0)
SHAPE = (40, 48)


def pair_layers(viewer, shape=SHAPE):
    sharp, blurred, truth = focus_pair(shape=shape)
    a = viewer.add_image(sharp, name="cells sharp", scale=SCALE, translate=TRANSLATE)
    b = viewer.add_image(blurred, name="cells", scale=SCALE, translate=TRANSLATE)
    return a, b, truth


def click_and_wait(qtbot, widget, timeout=180_000):
    widget.run_button.native.click()
    assert widget._worker is not None  # started in the background
    qtbot.waitUntil(lambda: widget._worker is None, timeout=timeout)


def canned_fit(shape, per_axis=False, hidden=None, value=1.5, steps=3):
    """A SigmaFit as the library returns it, without fitting."""
    tail = (len(shape),) if per_axis else ()
    model = np.full(shape + tail, value, np.float32)
    if per_axis:
        model[..., 1] = 2 * value
    observable = np.ones(shape + tail, bool)
    if hidden is not None:
        observable[hidden] = False
    return SigmaFit(
        sigma_map=np.where(observable, model, np.nan).astype(np.float32),
        model_map=model,
        residual=np.full(shape, 0.01, np.float32),
        stderr=np.full(shape + tail, 0.01, np.float32),
        observable=observable,
        loss=np.linspace(1, 0.1, steps + 1),
        noise=0.01,
        steps=steps,
        converged=True,
        seconds=0.25,
    )


def fake_steps(monkeypatch, fit=None, delay=0.0, n_steps=3, error=None, warn=()):
    """Let the library check the arguments, then yield ``n_steps`` canned steps (each
    after ``delay`` s), raise the warnings ``warn`` ((message, category) pairs) and
    return ``fit`` (or raise ``error``).  Returns a record of what happened."""
    record = {"calls": 0, "steps": 0, "finished": False, "kwargs": None}

    def steps(**kwargs):
        fit_module.fit_sigma_map_steps(**kwargs)  # raises on bad arguments, fits nothing
        record["calls"] += 1
        record["kwargs"] = kwargs

        def gen():
            for i in range(1, n_steps + 1):
                time.sleep(delay)
                record["steps"] = i
                if error is not None and i == 2:
                    raise error
                yield i, 1.0 / i
            for message, category in warn:
                warnings.warn(message, category, stacklevel=1)
            record["finished"] = True
            return fit if fit is not None else canned_fit(kwargs["sharp"].shape)

        return gen()

    monkeypatch.setattr(fit_widget, "fit_sigma_map_steps", steps)
    return record


def fit_layers(viewer):
    return [lyr for lyr in viewer.layers if METADATA_KEY in lyr.metadata]


def notifications_since(start):
    return [record.message for record in notification_manager.records[start:]]


def test_the_widget_docks_from_the_manifest_with_defaults_and_tooltips(viewer):
    from npe2 import PluginManager

    manifest = PluginManager.instance().get_manifest(PLUGIN)
    commands = {c.id: c for c in manifest.contributions.commands}
    command = commands["napari-varblur.fit_sigma_map"]
    assert command.python_name == "napari_varblur.gui.fit_widget:FitWidget"
    assert command.title == "Estimate a sigma map from a sharp and a blurred image"
    menu = manifest.contributions.menus["napari-varblur.submenu"]
    assert "napari-varblur.fit_sigma_map" in [item.command for item in menu]

    widget = dock(viewer, "Estimate sigma map")
    assert isinstance(widget, fit_widget.FitWidget)
    assert widget.max_sigma.value == 4 and widget.spacing.value == 16
    assert float(widget.smoothness.value) == 1e-3 and widget.mode.value == "crop"
    assert widget.max_steps.value == 150 and widget.axes.value == "2d"
    assert widget.per_axis.value is False and widget.mask.value is None
    assert widget.run_button.text == "Estimate" and not widget.cancel_button.enabled
    assert widget.status.native.wordWrap()
    for field in widget:
        tip = field.tooltip
        assert tip and tip.strip() and "\n" not in tip, field.name


def check_the_fitted_map(fitted, own, fit, truth, status) -> None:
    """The fitted map's tags, its closeness to the truth and the status line."""
    meta = fitted.metadata[METADATA_KEY]
    assert meta["role"] == SIGMA_MAP_ROLE and is_sigma_map(fitted) and not is_sigma_map(own)
    assert meta["source_layer"] == "cells" and meta["sharp_layer"] == "cells sharp"
    assert meta["parameters"]["max_sigma"] == 3.0 and meta["steps"] == fit.steps
    # The estimate is close to the truth away from the border.
    inner = (slice(4, -4), slice(4, -4))
    error = np.abs(fitted.data[inner] - truth[inner]) / truth[inner]
    assert np.median(error) < 0.1, np.median(error)
    assert f"{fit.steps} steps" in status and "noise" in status and "100% of pixels" in status


def test_a_fit_adds_the_tagged_map_and_residual_then_a_rerun_updates_them(
    viewer, qtbot, monkeypatch
):
    sharp, blurred, truth = pair_layers(viewer)
    # The user's own layer with the output's name is never touched.
    own = viewer.add_image(np.zeros(SHAPE, np.float32), name="cells sigma map")
    blur = dock(viewer, "Gaussian blur")
    blur.image.value = sharp
    assert blur.sigma_map.value is None
    widget = dock(viewer, "Estimate sigma map")
    assert widget.sharp.value is sharp and widget.blurred.value is blurred  # the pair
    widget.max_sigma.value, widget.spacing.value, widget.max_steps.value = 3.0, 12.0, 40
    click_and_wait(qtbot, widget)

    assert widget.status.value.startswith("done"), widget.status.tooltip
    fit = widget.last_fit
    made = fit_layers(viewer)
    assert len(viewer.layers) == 5 and len(made) == 2  # map and residual, all observable
    residual, fitted = made
    assert residual.name == "cells fit residual" and fitted.name == "cells sigma map [1]"
    assert fitted is viewer.layers[-1] and np.all(own.data == 0)
    np.testing.assert_array_equal(fitted.data, fit.model_map)
    np.testing.assert_array_equal(residual.data, fit.residual)
    assert np.isfinite(fitted.data).all() and fitted.colormap.name == "viridis"
    for layer in made:
        np.testing.assert_array_equal(layer.scale, SCALE)
        np.testing.assert_array_equal(layer.translate, TRANSLATE)
    check_the_fitted_map(fitted, own, fit, truth, widget.status.value)
    # The blur widget preselects the fitted map for the image it fits.
    assert blur.sigma_map.value is fitted

    # A re-run (a mask leaving out the right part; a canned fit: the library's masks
    # are tested in test_fit.py) updates the same two layers and adds the "not
    # observable" labels.
    mask = np.ones(SHAPE, np.uint8)
    mask[:, 30:] = 0
    viewer.add_labels(mask, name="valid")
    widget.mask.reset_choices()
    widget.mask.value = viewer.layers["valid"]
    canned = canned_fit(SHAPE, hidden=(slice(None), slice(30, None)), steps=15)
    record = fake_steps(monkeypatch, canned)
    click_and_wait(qtbot, widget)

    assert widget.status.value.startswith("done"), widget.status.tooltip
    np.testing.assert_array_equal(record["kwargs"]["mask"], mask != 0)
    assert widget.last_fit is canned
    assert fit_layers(viewer)[:2] == [residual, fitted]
    np.testing.assert_array_equal(fitted.data, canned.model_map)
    np.testing.assert_array_equal(residual.data, canned.residual)
    hidden = viewer.layers["cells not observable"]
    assert isinstance(hidden, napari.layers.Labels) and len(viewer.layers) == 7
    np.testing.assert_array_equal(hidden.data, ~canned.observable)
    np.testing.assert_array_equal(hidden.scale, SCALE)
    assert fitted.metadata[METADATA_KEY]["parameters"]["mask"] == "valid"
    assert blur.sigma_map.value is fitted and np.all(own.data == 0)


def test_a_per_axis_fit_gets_one_plane_per_axis_and_the_labels_collapse(viewer, qtbot, monkeypatch):
    sharp, blurred, _ = pair_layers(viewer)
    hidden = (slice(0, 5), slice(0, 6), 1)  # not observable along X only
    record = fake_steps(monkeypatch, canned_fit(SHAPE, per_axis=True, hidden=hidden))
    widget = dock(viewer, "Estimate sigma map")
    widget.per_axis.value = True
    click_and_wait(qtbot, widget, timeout=20_000)
    # The widget's choices reach the library as its arguments.
    args = dict(record["kwargs"])
    assert args.pop("sharp") is sharp.data and args.pop("blurred") is blurred.data
    assert args == {
        "max_sigma": 4.0, "mode": "crop", "axes": (0, 1), "mask": None, "per_axis": True,
        "nan_policy": "raise", "spacing": 16.0, "smoothness": 1e-3, "max_steps": 150,
    }  # fmt: skip

    layer = viewer.layers["cells sigma map per axis"]
    assert layer.data.shape == (2, *SHAPE) and is_sigma_map(layer)
    assert layer.metadata[METADATA_KEY]["units"] == "pixels"
    assert layer.data[0].max() == 1.5 and layer.data[1].min() == 3.0
    np.testing.assert_array_equal(layer.scale, (1.0, *SCALE))
    np.testing.assert_array_equal(layer.translate, (0.0, *TRANSLATE))
    labels = viewer.layers["cells not observable"]
    expected = np.zeros(SHAPE, bool)
    expected[:5, :6] = True
    np.testing.assert_array_equal(labels.data, expected)
    np.testing.assert_array_equal(labels.scale, SCALE)
    np.testing.assert_array_equal(labels.translate, TRANSLATE)
    assert "98% of pixels observable" in widget.status.value  # 30 of 1920 not

    # All observable now: the stale labels go; the map is updated in place.
    fake_steps(monkeypatch, canned_fit(SHAPE, per_axis=True, value=0.5))
    click_and_wait(qtbot, widget, timeout=20_000)
    assert "cells not observable" not in viewer.layers
    assert viewer.layers["cells sigma map per axis"] is layer and layer.data.max() == 1.0
    assert len(viewer.layers) == 4 and blurred in viewer.layers

    # The blur widget offers the per-axis map for the image it fits, and blurs each
    # axis with its own plane; it is in pixels, so world units are off.
    blur = dock(viewer, "Gaussian blur")
    blur.image.value = sharp
    assert blur.sigma_map.value is layer
    assert not blur.world_units.enabled and "already in pixels" in blur.world_units.tooltip
    blur.sigma.value, blur.backend.value = "2", "numba"
    blur.run_button.native.click()
    qtbot.waitUntil(lambda: blur._worker is None, timeout=60_000)
    result = viewer.layers[-1]
    expected = gaussian_blur(sharp.data, 2 * np.moveaxis(layer.data, 0, -1), backend="numba")
    np.testing.assert_array_equal(result.data, expected)
    blur.axes.value = "all"  # two axes still: the map stays
    assert blur.sigma_map.value is layer


@pytest.mark.parametrize(
    "setup, message",
    [
        ("shapes differ", "blurred: shape"),
        ("max sigma 0", "max_sigma"),
        ("rgb", "RGB"),
        ("mask shape", "mask 'small'"),
        ("smoothness", "smoothness"),
    ],
)
def test_bad_input_shows_an_error_adds_no_layer_and_starts_no_worker(
    viewer, monkeypatch, setup, message
):
    from napari.utils.notifications import notification_manager

    pair_layers(viewer)
    widget = dock(viewer, "Estimate sigma map")
    started = []
    monkeypatch.setattr(forms, "thread_worker", lambda *a, **k: started.append(a))
    if setup == "shapes differ":
        other = viewer.add_image(np.zeros((30, 48), np.float32), name="other")
        widget.reset_choices()
        widget.blurred.value = other
    elif setup == "max sigma 0":
        widget.max_sigma.value = 0.0
    elif setup == "rgb":
        rgb = viewer.add_image(np.zeros((*SHAPE, 3), np.uint8), name="colour", rgb=True)
        widget.reset_choices()
        widget.blurred.value = rgb
    elif setup == "mask shape":
        viewer.add_labels(np.ones((5, 5), np.uint8), name="small")
        widget.mask.reset_choices()
        widget.mask.value = viewer.layers["small"]
    else:
        widget.smoothness.value = "a little"
    names = [layer.name for layer in viewer.layers]
    widget.run_button.native.click()
    assert [layer.name for layer in viewer.layers] == names
    assert started == [] and widget._worker is None and widget.run_button.enabled
    assert widget.status.value.startswith("error:") and message in widget.status.tooltip
    assert message in notification_manager.records[-1].message


def test_cancel_stops_the_fit_and_changes_no_layer(viewer, qtbot, monkeypatch):
    pair_layers(viewer)
    fake_steps(monkeypatch)
    widget = dock(viewer, "Estimate sigma map")
    click_and_wait(qtbot, widget, timeout=20_000)  # a first (canned) fit adds its layers
    before = [(layer, layer.name, np.array(layer.data)) for layer in viewer.layers]

    record = fake_steps(monkeypatch, canned_fit(SHAPE, value=2.5), delay=0.05, n_steps=2000)
    widget.run_button.native.click()
    qtbot.waitUntil(lambda: widget.status.value.startswith("step"), timeout=20_000)
    assert widget.cancel_button.enabled
    widget.cancel_button.native.click()
    qtbot.waitUntil(lambda: widget._worker is None, timeout=20_000)

    assert widget.status.value == "cancelled" and not record["finished"]
    assert record["steps"] < 2000 and widget.run_button.enabled
    assert len(viewer.layers) == len(before)
    for (layer, name, data), now in zip(before, viewer.layers):
        assert now is layer and now.name == name
        np.testing.assert_array_equal(now.data, data)


def test_an_error_in_the_fit_is_shown_and_changes_no_layer(viewer, qtbot, monkeypatch):
    pair_layers(viewer)
    fake_steps(monkeypatch, error=FloatingPointError("the loss became NaN"))
    widget = dock(viewer, "Estimate sigma map")
    click_and_wait(qtbot, widget, timeout=20_000)
    assert widget.status.value.startswith("error:") and "loss became NaN" in widget.status.value
    assert len(viewer.layers) == 2 and widget.run_button.enabled


def test_the_focus_pair_sample_opens_and_the_widget_picks_the_pair(viewer):
    viewer.open_sample(PLUGIN, "focus_pair")
    names = [layer.name for layer in viewer.layers]
    assert names == ["focus pair sharp", "focus pair blurred", "focus pair true sigma map"]
    sharp, blurred, truth = viewer.layers
    expected = focus_pair_sample()
    for layer, data in zip(viewer.layers, expected):
        np.testing.assert_array_equal(layer.data, data)
    assert not truth.visible and not is_sigma_map(truth)  # the answer, not a map to use
    widget = dock(viewer, "Estimate sigma map")
    assert widget.sharp.value is sharp and widget.blurred.value is blurred
    blur = dock(viewer, "Gaussian blur")
    blur.image.value = sharp
    assert blur.sigma_map.value is None


@pytest.mark.parametrize(
    "part, whole, text",
    [
        (0, 100, "0%"),
        (100, 100, "100%"),
        (30, 40, "75%"),
        (1890, 1920, "98%"),
        (15_232 - 72, 15_232, "99.5%"),  # a whole number would read 100%
        (99_999, 100_000, ">99.9%"),
        (99_960, 100_000, ">99.9%"),  # one decimal would read 100.0%
        (99_940, 100_000, "99.9%"),
        (3, 1000, "0.3%"),
        (1, 100_000, "<0.1%"),
        (0, 0, "0%"),
    ],
)
def test_the_observable_share_reads_0_or_100_percent_only_when_it_is(part, whole, text):
    assert fit_widget.percent_of(part, whole) == text


def test_the_status_does_not_round_one_hidden_pixel_away(viewer, qtbot, monkeypatch):
    pair_layers(viewer)
    fake_steps(monkeypatch, canned_fit(SHAPE, hidden=(3, 4)))  # 1 of 1920 not observable
    widget = dock(viewer, "Estimate sigma map")
    click_and_wait(qtbot, widget, timeout=20_000)
    assert widget.status.value.endswith("; 99.9% of pixels observable"), widget.status.value


def test_a_fit_that_observes_nothing_adds_no_map_and_sets_an_earlier_one_aside(
    viewer, qtbot, monkeypatch
):
    sharp, _, _ = pair_layers(viewer)
    blur = dock(viewer, "Gaussian blur")
    blur.image.value = sharp
    widget = dock(viewer, "Estimate sigma map")
    blind = canned_fit(SHAPE, hidden=np.s_[...], value=0.1)  # no pixel observable
    blind.residual[...] = 0.5
    start = len(notification_manager.records)
    fake_steps(monkeypatch, blind)
    click_and_wait(qtbot, widget, timeout=20_000)
    # A first fit: the residual and the labels, no map.
    assert [layer.name for layer in fit_layers(viewer)] == ["cells fit residual",
                                                            "cells not observable"]  # fmt: skip
    assert viewer.layers["cells not observable"].data.all()
    assert "no pixel is observable" in widget.status.value
    assert "0% of pixels observable" in widget.status.value
    assert any("no pixel is observable" in m for m in notifications_since(start))
    assert blur.sigma_map.value is None

    fake_steps(monkeypatch)  # every pixel observable: the map is added
    click_and_wait(qtbot, widget, timeout=20_000)
    fitted = viewer.layers["cells sigma map"]
    assert is_sigma_map(fitted) and blur.sigma_map.value is fitted
    assert "cells not observable" not in viewer.layers

    # Nothing observable again: the earlier map stays, unchanged, but is no longer a
    # map the blur widget offers; the residual is updated.
    fake_steps(monkeypatch, blind)
    click_and_wait(qtbot, widget, timeout=20_000)
    assert fitted in viewer.layers and np.all(fitted.data == 1.5)
    meta = fitted.metadata[METADATA_KEY]
    assert meta["role"] == SIGMA_MAP_ROLE + fit_widget.SUPERSEDED and not is_sigma_map(fitted)
    assert fitting_sigma_map(viewer.layers, sharp) is None
    np.testing.assert_array_equal(viewer.layers["cells fit residual"].data, blind.residual)
    assert "no pixel is observable" in widget.status.value
    assert "'cells sigma map' is an earlier fit's" in widget.status.tooltip

    # A fit that observes again takes the same layer back and updates it.
    fake_steps(monkeypatch, canned_fit(SHAPE, value=2.0))
    click_and_wait(qtbot, widget, timeout=20_000)
    assert viewer.layers["cells sigma map"] is fitted and is_sigma_map(fitted)
    assert np.all(fitted.data == 2.0) and len(viewer.layers) == 4
    assert widget.status.value.startswith("done") and "no pixel" not in widget.status.value


def test_warnings_raised_in_the_fit_reach_the_status_and_the_notifications_once_each(
    viewer, qtbot, monkeypatch
):
    pair_layers(viewer)
    warned = [("the map reached max_sigma; raise max_sigma", RuntimeWarning),
              ("the map reached max_sigma; raise max_sigma", RuntimeWarning),
              ("blurred looks sharper than sharp; are they swapped?", UserWarning),
              ("some library's old API", DeprecationWarning)]  # fmt: skip
    widget = dock(viewer, "Estimate sigma map")
    for _ in range(2):  # a repeat run reports them again
        fake_steps(monkeypatch, warn=warned)
        start = len(notification_manager.records)
        click_and_wait(qtbot, widget, timeout=20_000)
        expected = [warned[0][0], warned[2][0]]
        assert widget.last_warnings == expected
        shown = notifications_since(start)
        assert shown == [f"VarBlur fit: {message}" for message in expected]
        lines = widget.status.value.splitlines()
        assert lines[0].startswith("done") and lines[1:] == [f"warning: {m}" for m in expected]
        assert "old API" not in widget.status.tooltip
    assert "cells sigma map" in viewer.layers  # observable: the map is added as before


def test_layers_placed_differently_are_warned_about_and_still_fitted(
    viewer, qtbot, monkeypatch, caplog
):
    _, blurred, _ = pair_layers(viewer)
    blurred.scale = (1.0, 1.0)
    widget = dock(viewer, "Estimate sigma map")
    record = fake_steps(monkeypatch)
    start = len(notification_manager.records)
    with caplog.at_level(logging.WARNING, logger=fit_widget.__name__):
        click_and_wait(qtbot, widget, timeout=20_000)
    assert record["calls"] == 1 and widget.status.value.startswith("done")
    assert "'cells sharp' and blurred 'cells' differ in scale (2, 0.5) vs (1, 1)" in caplog.text
    assert any("differ in scale" in m for m in notifications_since(start))
    assert "differ in scale" in widget.status.value
    assert "cells sigma map" in viewer.layers

    blurred.scale, blurred.translate = SCALE, (0.0, 0.0)
    caplog.clear()
    fake_steps(monkeypatch)
    click_and_wait(qtbot, widget, timeout=20_000)
    assert "differ in translate (10, -3) vs (0, 0)" in widget.status.tooltip
    assert "scale" not in widget.status.tooltip

    blurred.translate = TRANSLATE  # the same place: no warning
    start = len(notification_manager.records)
    fake_steps(monkeypatch)
    click_and_wait(qtbot, widget, timeout=20_000)
    assert widget.last_warnings == [] and notifications_since(start) == []
    assert "differ" not in widget.status.value


def test_a_real_fit_pinned_at_max_sigma_warns_and_adds_no_map(viewer, qtbot):
    """Blur beyond max_sigma (test_fit.py's pinned case): the library warns "raise
    max_sigma" from the worker and no pixel is observable."""
    sharp = focus_pair(shape=SHAPE)[0]
    viewer.add_image(sharp, name="cells sharp")
    viewer.add_image(gaussian_blur(sharp, 4.0, backend="reference"), name="cells")
    widget = dock(viewer, "Estimate sigma map")
    # The first real fit's shape and settings: its compiled programs are reused.
    widget.max_sigma.value, widget.spacing.value, widget.max_steps.value = 3.0, 12.0, 20
    start = len(notification_manager.records)
    click_and_wait(qtbot, widget)

    assert widget.status.value.startswith("done"), widget.status.tooltip
    assert any("raise max_sigma" in message for message in widget.last_warnings)
    assert "raise max_sigma" in widget.status.tooltip
    shown = notifications_since(start)
    assert sum("raise max_sigma" in message for message in shown) == 1, shown
    assert not any(is_sigma_map(layer) for layer in viewer.layers)
    assert "cells fit residual" in viewer.layers


def test_the_rarely_changed_options_are_folded_and_still_used(viewer):
    """Issue 20: spacing, smoothness, mode... sit under a folded "Advanced"; what is
    set there while folded reaches the fit's arguments."""
    sharp, blurred, _ = pair_layers(viewer)
    widget = dock(viewer, "Estimate sigma map")
    widget.sharp.value, widget.blurred.value = sharp, blurred
    form = widget.native.widget()
    folded = [getattr(widget, key) for key in fit_widget.FIT_ADVANCED]
    assert not widget.advanced.value
    assert not any(field.native.isVisibleTo(form) for field in folded)
    assert widget.max_sigma.native.isVisibleTo(form) and widget.mask.native.isVisibleTo(form)
    widget.mode.value, widget.max_steps.value, widget.spacing.value = "reflect", 7, 8.0
    args = widget.arguments()
    assert (args["mode"], args["max_steps"], args["spacing"]) == ("reflect", 7, 8.0)
    widget.advanced.value = True
    assert all(field.native.isVisibleTo(form) for field in folded)
