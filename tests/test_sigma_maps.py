"""napari_varblur.sigma_maps: hand-computed values, broadcasting, errors, inputs unchanged."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from napari_varblur import gaussian_blur
from napari_varblur.sigma_maps import defocus, from_image, from_labels, radial

# --- from_labels ----------------------------------------------------------------------


def test_from_labels_values():
    labels = np.array([[0, 1, 1], [2, 7, 0]], dtype=np.int32)
    result = from_labels(labels, {1: 2.0, 2: 0.5, 9: 4.0}, default=1.5)
    assert result.dtype == np.float64
    np.testing.assert_array_equal(result, [[1.5, 2.0, 2.0], [0.5, 1.5, 1.5]])


def test_from_labels_default_is_zero_and_key_kinds():
    # Unsigned labels beyond int64, negative labels, NumPy integer keys, integer sigmas.
    big = np.iinfo(np.uint64).max
    labels = np.array([0, big, 3], dtype=np.uint64)
    np.testing.assert_array_equal(from_labels(labels, {np.uint64(big): 3}), [0.0, 3.0, 0.0])
    signed = np.array([[-5], [4]], dtype=np.int8)
    np.testing.assert_array_equal(from_labels(signed, {-5: 1.25}), [[1.25], [0.0]])


def test_from_labels_inputs_unchanged():
    labels = np.array([[0, 1], [3, 1]])
    sigmas = {1: 2.0, 3: 1.0}
    labels_before, sigmas_before = labels.copy(), dict(sigmas)
    from_labels(labels, sigmas, default=0.5)
    np.testing.assert_array_equal(labels, labels_before)
    assert sigmas == sigmas_before


# --- defocus --------------------------------------------------------------------------


def test_defocus_plane_values_and_shape():
    result = defocus((5, 4, 3), focus=1.5, slope=2.0, sigma0=0.25)
    assert result.dtype == np.float64
    assert result.shape == (5, 1, 1)  # broadcastable: only the focus axis varies
    # sigma0 + slope * |i - 1.5| for i = 0..4
    np.testing.assert_array_equal(result[:, 0, 0], [3.25, 1.25, 1.25, 3.25, 5.25])


def test_defocus_other_axis():
    result = defocus((2, 4), focus=3, slope=0.5, axis=-1)
    assert result.shape == (1, 4)
    np.testing.assert_array_equal(result, [[1.5, 1.0, 0.5, 0.0]])
    # An int shape is a 1-D image.
    np.testing.assert_array_equal(defocus(3, focus=0.5, slope=1.0), [0.5, 0.5, 1.5])


def test_defocus_surface_values():
    # A tilted coverslip: the focal plane index rises by 1 per column along x.
    focus = np.array([[0.0, 1.0, 2.0], [0.5, 1.5, 2.5]])  # over (y, x), z is axis 0
    focus_before = focus.copy()
    result = defocus((3, 2, 3), focus=focus, slope=1.0, sigma0=0.5)
    assert result.shape == (3, 2, 3)
    np.testing.assert_array_equal(focus, focus_before)
    assert result[0, 0, 0] == 0.5  # in focus
    assert result[2, 0, 0] == 2.5  # 0.5 + |2 - 0|
    assert result[0, 1, 2] == 3.0  # 0.5 + |0 - 2.5|
    assert result[1, 1, 1] == 1.0  # 0.5 + |1 - 1.5|


def test_defocus_surface_broadcasts():
    # focus varying along x only, given as (x,) or (1, x): the map is constant along y.
    for focus in ([0, 1, 2, 3], [[0, 1, 2, 3]]):
        result = defocus((2, 5, 4), focus=focus, slope=1.0)
        assert result.shape == (2, 1, 4)
        np.testing.assert_array_equal(result[:, 0, :], [[0, 1, 2, 3], [1, 0, 1, 2]])
    # The focus axis in the middle.
    result = defocus((2, 3, 2), focus=[[0.0, 2.0], [1.0, 1.0]], slope=1.0, axis=1)
    assert result.shape == (2, 3, 2)
    np.testing.assert_array_equal(result[:, :, 0], [[0, 1, 2], [1, 0, 1]])


# --- radial ---------------------------------------------------------------------------


def test_radial_values():
    result = radial((3, 5), center=(1, 2), sigma_center=1.0, sigma_edge=3.0, radius=2.0)
    assert result.dtype == np.float64
    assert result.shape == (3, 5)
    assert result[1, 2] == 1.0  # d = 0
    assert result[1, 3] == 1.5  # d = 1: 1 + 2 * (1/2)**2
    assert result[0, 2] == 1.5
    assert result[1, 4] == 3.0  # d = radius
    assert result[0, 0] == 3.0  # d = sqrt(5) > radius: clipped
    assert math.isclose(result[0, 3], 1.0 + 2.0 * 2 / 4)  # d = sqrt(2)


def test_radial_3d_off_image_centre_and_falling_sigma():
    result = radial((2, 2, 2), center=(0, 0, -1), sigma_center=4.0, sigma_edge=0.0, radius=2.0)
    assert result.shape == (2, 2, 2)
    assert result[0, 0, 0] == 3.0  # d = 1: 4 - 4 * (1/2)**2
    assert math.isclose(result[1, 1, 0], 1.0)  # d = sqrt(3): 4 - 4 * 3/4
    assert result[0, 0, 1] == 0.0  # d = 2 = radius
    assert result[1, 1, 1] == 0.0  # d = sqrt(6) > radius: clipped


def test_radial_inputs_unchanged():
    center = np.array([1.0, 2.0])
    radial((3, 4), center, 0.0, 1.0, 2.0)
    np.testing.assert_array_equal(center, [1.0, 2.0])


# --- from_image -----------------------------------------------------------------------


def test_from_image_values():
    values = np.array([[-np.inf, -1.0, 0.0], [2.5, 10.0, 12.0]])
    before = values.copy()
    result = from_image(values, lo=0.0, hi=10.0, sigma_lo=1.0, sigma_hi=5.0)
    assert result.dtype == np.float64
    np.testing.assert_array_equal(result, [[1.0, 1.0, 1.0], [2.0, 5.0, 5.0]])
    np.testing.assert_array_equal(values, before)


def test_from_image_integer_input_and_inverted_mapping():
    values = np.array([0, 50, 100, 200], dtype=np.uint8)
    result = from_image(values, lo=50, hi=150, sigma_lo=3.0, sigma_hi=1.0)
    np.testing.assert_array_equal(result, [3.0, 3.0, 2.0, 1.0])
    assert values.tolist() == [0, 50, 100, 200]


# --- every error names its argument ---------------------------------------------------

LABELS = np.array([[0, 1], [2, 3]])
ERRORS = [
    # (function, args, kwargs, exception, argument named first in the message)
    (from_labels, (LABELS.astype(float), {}), {}, TypeError, "labels"),
    (from_labels, (LABELS > 0, {}), {}, TypeError, "labels"),
    (from_labels, (np.array(3), {}), {}, ValueError, "labels"),
    (from_labels, (LABELS, [(1, 2.0)]), {}, TypeError, "sigmas"),
    (from_labels, (LABELS, {1.5: 2.0}), {}, TypeError, "sigmas"),
    (from_labels, (LABELS, {True: 2.0}), {}, TypeError, "sigmas"),
    (from_labels, (LABELS, {1: "2"}), {}, TypeError, "sigmas"),
    (from_labels, (LABELS, {3: -1.0}), {}, ValueError, "sigmas"),
    (from_labels, (LABELS, {2: np.nan}), {}, ValueError, "sigmas"),
    (from_labels, (LABELS, {2: np.inf}), {}, ValueError, "sigmas"),
    (from_labels, (LABELS, {}), {"default": -0.5}, ValueError, "default"),
    (from_labels, (LABELS, {}), {"default": np.nan}, ValueError, "default"),
    (defocus, ((4, 4), 1.0, 1.0), {"axis": 2}, ValueError, "axis"),
    (defocus, ((4, 4), 1.0, 1.0), {"axis": -3}, ValueError, "axis"),
    (defocus, ((4, 4), 1.0, 1.0), {"axis": 0.0}, TypeError, "axis"),
    (defocus, ((4, 4), 1.0, 1.0), {"axis": True}, TypeError, "axis"),
    (defocus, ((4, 4), 1.0, -1.0), {}, ValueError, "slope"),
    (defocus, ((4, 4), 1.0, np.inf), {}, ValueError, "slope"),
    (defocus, ((4, 4), 1.0, 1.0), {"sigma0": -1.0}, ValueError, "sigma0"),
    (defocus, ((4, 4), 1.0, 1.0), {"sigma0": np.nan}, ValueError, "sigma0"),
    (defocus, ((4, 4), np.nan, 1.0), {}, ValueError, "focus"),
    (defocus, ((4, 4), "1", 1.0), {}, TypeError, "focus"),
    (defocus, ((4, 4), np.zeros(3), 1.0), {}, ValueError, "focus"),
    (defocus, ((4, 4), np.zeros((4, 4)), 1.0), {}, ValueError, "focus"),
    (defocus, ((4, 4), 1e300, 1e300), {}, ValueError, "slope"),
    (defocus, ((4, -1), 1.0, 1.0), {}, ValueError, "shape"),
    (defocus, ((), 1.0, 1.0), {}, ValueError, "shape"),
    (defocus, ((4, 2.0), 1.0, 1.0), {}, TypeError, "shape"),
    (defocus, ("4x4", 1.0, 1.0), {}, TypeError, "shape"),
    (defocus, (4.0, 1.0, 1.0), {}, TypeError, "shape"),
    (radial, ((4, 4), ("a", "b"), 0.0, 1.0, 2.0), {}, TypeError, "center"),
    (radial, ((4, 4), (1.0,), 0.0, 1.0, 2.0), {}, ValueError, "center"),
    (radial, ((4, 4), (1.0, np.nan), 0.0, 1.0, 2.0), {}, ValueError, "center"),
    (radial, ((4, 4), (1.0, 1.0), -1.0, 1.0, 2.0), {}, ValueError, "sigma_center"),
    (radial, ((4, 4), (1.0, 1.0), 0.0, np.inf, 2.0), {}, ValueError, "sigma_edge"),
    (radial, ((4, 4), (1.0, 1.0), 0.0, -2.0, 2.0), {}, ValueError, "sigma_edge"),
    (radial, ((4, 4), (1.0, 1.0), 0.0, 1.0, 0.0), {}, ValueError, "radius"),
    (radial, ((4, 4), (1.0, 1.0), 0.0, 1.0, -2.0), {}, ValueError, "radius"),
    (radial, ((4, 4), (1.0, 1.0), 0.0, 1.0, np.inf), {}, ValueError, "radius"),
    (radial, ((4, 4), (1.0, 1.0), 0.0, 1.0, None), {}, TypeError, "radius"),
    (from_image, (np.array([1.0, np.nan]), 0, 1, 0, 1), {}, ValueError, "values"),
    (from_image, (np.array([1 + 1j]), 0, 1, 0, 1), {}, TypeError, "values"),
    (from_image, (np.array(1.0), 0, 1, 0, 1), {}, ValueError, "values"),
    (from_image, (np.ones(2), 1, 1, 0, 1), {}, ValueError, "lo, hi"),
    (from_image, (np.ones(2), 2, 1, 0, 1), {}, ValueError, "lo, hi"),
    (from_image, (np.ones(2), -np.inf, 1, 0, 1), {}, ValueError, "lo"),
    (from_image, (np.ones(2), 0, np.nan, 0, 1), {}, ValueError, "hi"),
    (from_image, (np.ones(2), -1e308, 1e308, 0, 1), {}, ValueError, "lo, hi"),
    (from_image, (np.ones(2), 0, 1, -1.0, 1), {}, ValueError, "sigma_lo"),
    (from_image, (np.ones(2), 0, 1, 0, np.nan), {}, ValueError, "sigma_hi"),
    (from_image, (np.ones(2), 0, 1, True, 1), {}, TypeError, "sigma_lo"),
]


@pytest.mark.parametrize(
    ("function", "args", "kwargs", "exception", "name"),
    ERRORS,
    ids=[f"{e[0].__name__}-{e[4]}-{i}" for i, e in enumerate(ERRORS)],
)
def test_errors_name_their_argument(function, args, kwargs, exception, name):
    with pytest.raises(exception, match=rf"^{re.escape(name)}: "):
        function(*args, **kwargs)


def test_negative_label_sigma_message():
    with pytest.raises(ValueError, match=r"^sigmas: label 3 has a negative sigma -1\.0$"):
        from_labels(LABELS, {1: 2.0, 3: -1.0})


# --- each map blurs an image directly -------------------------------------------------


def _blur(image, sigma_map):
    return gaussian_blur(image, sigma_map, backend="reference", precision="float64")


def test_maps_blur_an_image():
    rng = np.random.default_rng(0)
    image = rng.random((4, 6, 5))
    labels = np.zeros(image.shape, dtype=np.uint16)
    labels[:, 2:, :] = 4
    maps = {
        "labels": from_labels(labels, {4: 1.0}),
        "plane": defocus(image.shape, focus=1, slope=0.75),
        "surface": defocus(image.shape, focus=np.linspace(0, 3, 5), slope=0.75),
        "radial": radial(image.shape, (1, 2, 2), 0.0, 1.5, 3.0),
        "image": from_image(image[:1], 0.25, 0.75, 0.0, 1.2),  # broadcast over axis 0
    }
    for name, sigma_map in maps.items():
        blurred = _blur(image, sigma_map)
        assert blurred.shape == image.shape, name
        full = np.broadcast_to(sigma_map, image.shape)
        np.testing.assert_array_equal(blurred, _blur(image, np.ascontiguousarray(full)))
        # A pixel with sigma 0 keeps its value; one with a clear blur changes.
        sharp, blurry = full == 0, full >= 0.5
        assert sharp.any() and blurry.any(), name
        np.testing.assert_array_equal(blurred[sharp], image[sharp])
        assert np.all(blurred[blurry] != image[blurry]), name
