"""Shared helpers: the contract's tolerances and small test images."""

from __future__ import annotations

import os

import numpy as np
import pytest

from napari_varblur import available_backends
from napari_varblur.core.rules import CONTRACT_TOLERANCE

# No background warm-up from the widgets: a thread compiling while a test runs would
# race with the tests that check whether a call compiled, and take a core from the
# other xdist worker.  test_warmup.py runs it on purpose.
os.environ.setdefault("NAPARI_VARBLUR_NO_WARMUP", "1")

FAST_BACKENDS = [
    name for name in ("numba", "jax") if not available_backends()[name].startswith("unavailable")
]
ALL_BACKENDS = ["reference", *FAST_BACKENDS]
SCIPY_MODES = ["reflect", "mirror", "nearest", "wrap", "constant"]
ALL_MODES = ["crop", *SCIPY_MODES]


def tolerance(precision: str, image: np.ndarray) -> float:
    """The contract: 1e-12 (float64) or 1e-5 (float32) times max(1, max|image|)."""
    scale = max(1.0, float(np.abs(np.asarray(image, dtype=np.float64)).max(initial=0.0)))
    return CONTRACT_TOLERANCE[np.dtype(precision).name] * scale


def assert_close(actual: np.ndarray, expected: np.ndarray, precision: str, image: np.ndarray):
    assert actual.shape == expected.shape
    assert actual.dtype == np.dtype(precision)
    with np.errstate(invalid="ignore"):  # inf - inf where both are inf: NaN, skipped below
        diff = np.abs(actual.astype(np.float64) - np.asarray(expected, dtype=np.float64))
    # NaN must sit where the oracle has NaN, and nowhere else.
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    worst = float(np.nanmax(diff, initial=0.0))
    assert worst <= tolerance(precision, image), f"max |diff| {worst:.3g}"


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


# ------------------------------------------------------------------- napari helpers

#: The plugin's npe2 name.
PLUGIN = "napari-varblur"


@pytest.fixture
def viewer(make_napari_viewer):
    """A real napari viewer (napari's pytest plugin provides ``make_napari_viewer``)."""
    return make_napari_viewer()


def dock(viewer, name: str):
    """Open one of the plugin's dock widgets by its display name; return the widget."""
    _, widget = viewer.window.add_plugin_dock_widget(PLUGIN, name)
    return widget


def click_and_wait(qtbot, widget, button=None, timeout=120_000):
    """Click like a user and wait for the worker thread to finish."""
    (button or widget.run_button).native.click()
    qtbot.waitUntil(lambda: widget._worker is None, timeout=timeout)


def image_layer(viewer, shape=(40, 50), **kwargs):
    data = np.random.default_rng(0).random(shape).astype(np.float32) * 100
    return viewer.add_image(data, name="cells", **kwargs)
