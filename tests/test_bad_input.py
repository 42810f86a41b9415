"""Bad input gets a clear error naming the argument and the problem."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from napari_varblur import gaussian_blur

IMAGE = np.zeros((6, 7))


def raises(exc, pattern, *args, **kwargs):
    with pytest.raises(exc, match=pattern):
        gaussian_blur(*args, **kwargs)


@pytest.mark.parametrize("sigma", [-1.0, float("nan"), float("inf")])
def test_bad_global_sigma(sigma):
    raises(ValueError, rf"^sigma: must be a finite number >= 0, got {sigma!r}$", IMAGE, sigma)


@pytest.mark.parametrize(
    ("sigma", "problem"),
    [((1.0, -0.5), "negative"), ((float("nan"), 1.0), "NaN"), ((1.0, float("inf")), "infinite")],
)
def test_bad_per_axis_sigma(sigma, problem):
    raises(ValueError, rf"^sigma: per-axis sigma .*{problem}.* \(first at index", IMAGE, sigma)


def test_bad_values_in_map_say_how_many_and_where():
    sigma_map = np.ones((6, 7))
    sigma_map[2, 3] = -1
    sigma_map[4, 1] = -2
    message = "sigma: the sigma map is negative in 2 values (first at index (2, 3))"
    raises(ValueError, re.escape(message), IMAGE, sigma_map)
    sigma_map = np.ones((6, 7))
    sigma_map[5, 6] = np.nan
    raises(ValueError, re.escape("NaN in 1 value (first at index (5, 6))"), IMAGE, sigma_map)
    sigma_map[5, 6] = np.inf
    raises(ValueError, r"infinite in 1 value", IMAGE, sigma_map)


@pytest.mark.parametrize("shape", [(6, 6), (3, 7), (6, 7, 3), (6, 7, 1, 2), (2, 6, 7)])
def test_map_shape_that_does_not_fit(shape):
    raises(
        ValueError,
        r"^sigma: a sigma map of shape .* does not fit an image of shape \(6, 7\)",
        IMAGE,
        np.ones(shape),
    )


def test_per_axis_sequence_of_wrong_length():
    raises(ValueError, r"^sigma: got 3 values for 2 blurred axes", IMAGE, (1, 2, 3))
    raises(
        ValueError,
        r"^mode: got 3 modes for 2 blurred axes",
        IMAGE,
        1.0,
        mode=("crop", "wrap", "wrap"),
    )
    raises(ValueError, r"^radius: got 3 values for 2 blurred axes", IMAGE, 1.0, radius=(1, 2, 3))


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"mode": "reflekt"}, r"^mode: unknown edge mode 'reflekt'; valid modes are 'crop', "),
        ({"mode": ("crop", "bogus")}, r"^mode: unknown edge mode 'bogus'"),
        ({"backend": "cuda"}, r"^backend: unknown backend 'cuda'; valid backends are 'auto', "),
        (
            {"precision": "float16"},
            r"^precision: unknown precision 'float16'; valid precisions "
            r"are 'float32', 'float64'",
        ),
        ({"precision": "double-ish"}, r"^precision: unknown precision"),
        ({"axes": (0, 0)}, r"^axes: duplicate axes"),
        ({"axes": (0, -2)}, r"^axes: duplicate axes"),
        ({"axes": 2}, r"^axes: axis 2 is out of range for a 2-D image"),
        ({"axes": (-3,)}, r"^axes: axis -3 is out of range"),
        ({"truncate": 0}, r"^truncate: must be a finite number > 0"),
        ({"truncate": -1.0}, r"^truncate: must be a finite number > 0"),
        ({"truncate": float("inf")}, r"^truncate: must be a finite number > 0"),
        ({"truncate": float("nan")}, r"^truncate: must be a finite number > 0"),
        ({"radius": -1}, r"^radius: must be a non-negative integer, got -1"),
        ({"radius": 2.5}, r"^radius: must be a non-negative integer, got 2.5"),
        ({"radius": (1, "2")}, r"^radius: must be a non-negative integer"),
        ({"cval": "zero"}, r"^cval: must be a real number"),
    ],
)
def test_bad_arguments(kwargs, pattern):
    raises(ValueError, pattern, IMAGE, 1.0, **kwargs)


def test_radius_with_a_map():
    raises(
        ValueError,
        r"^radius: cannot be combined with a sigma map",
        IMAGE,
        np.ones((6, 7)),
        radius=2,
    )


@pytest.mark.parametrize(
    "image",
    [
        np.zeros((3, 3), complex),
        np.zeros((3, 3), object),
        np.array([["a", "b"]]),
        np.zeros((3, 3), "datetime64[s]"),
        np.zeros((3, 3), "timedelta64[s]"),
    ],
)
def test_unsupported_image_dtypes_are_type_errors(image):
    raises(
        TypeError, r"^image: dtype .* is not supported; the image must be real-valued", image, 1.0
    )


def test_zero_d_image():
    raises(ValueError, r"^image: a 0-d \(scalar\) image cannot be blurred", np.float64(3.0), 1.0)


def test_bad_sigma_types():
    raises(TypeError, r"^sigma: expected a number", IMAGE, "2")
    raises(TypeError, r"^sigma: expected numbers", IMAGE, (1.0, "x"))
    raises(TypeError, r"^sigma: a sigma map must be real-valued", IMAGE, np.ones((6, 7), complex))


def test_huge_map_radius_in_an_extending_mode_is_refused_quickly():
    raises(
        ValueError,
        r"^sigma: the sigma map needs radius 3000000 on axis 0 .* use mode='crop'".replace(
            "use", "Use"
        ),
        np.zeros((64, 64)),
        np.full((64, 64), 1e6),
        mode="reflect",
        backend="numba",
    )
    raises(ValueError, r"^sigma: radius .* is too large", IMAGE, 1e12)


def test_error_leaves_inputs_alone():
    image = np.ones((6, 7))
    sigma_map = np.ones((6, 7))
    sigma_map[0, 0] = -1
    with pytest.raises(ValueError):
        gaussian_blur(image, sigma_map)
    assert sigma_map[0, 0] == -1 and (image == 1).all()


@pytest.mark.parametrize(("backend", "package"), [("jax", "jax"), ("numba", "numba")])
def test_missing_backend_package_says_what_to_install(backend, package):
    """Run in a fresh interpreter where the package cannot be imported."""
    code = (
        f"import sys; sys.modules[{package!r}] = None\n"
        "import numpy as np, napari_varblur as v\n"
        "try:\n"
        f"    v.gaussian_blur(np.ones((4, 4)), 1.0, backend={backend!r})\n"
        "except ImportError as err:\n"
        "    print(type(err).__name__, err)\n"
        f"print(v.available_backends()[{backend!r}])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    expected = f"BackendUnavailableError backend: '{backend}' needs the '{package}' package"
    assert expected in out.stdout
    assert f"pip install {package}" in out.stdout
    assert out.stdout.strip().splitlines()[-1].startswith("unavailable")
