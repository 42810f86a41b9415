"""The NumPy and JAX-native APIs raise the same errors for the same bad inputs.

A parity table over every argument the two ``gaussian_blur`` functions share: for each
bad input both must raise, with the same exception class and the same message, and the
message starts with the name of the argument at fault (``"name: ..."``).  Smaller
tables check the arguments only one API has (``backend`` and ``precision``;
``max_radius`` and traced inputs), the order in which two bad arguments are reported,
and borderline inputs that both APIs must accept or refuse alike.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from napari_varblur import gaussian_blur
from napari_varblur.jax import gaussian_blur as jax_blur

SHAPE = (6, 7)
# float32 values, so the JAX side (x64 off) sees the very same numbers.
IMAGE = np.arange(42, dtype=np.float32).reshape(SHAPE) / 7
NAN_IMAGE = IMAGE.copy()
NAN_IMAGE[2, 3] = np.nan
INF_IMAGE = IMAGE.copy()
INF_IMAGE[4, 1] = -np.inf
ONES = np.ones(SHAPE)
NAN = float("nan")
INF = float("inf")


def _map_with(index: tuple[int, ...], value: float, shape=SHAPE) -> np.ndarray:
    out = np.ones(shape)
    out[index] = value
    return out


def case(case_id: str, argument: str, sigma=1.0, image=IMAGE, **kwargs):
    """One bad input: ``argument`` is the one at fault (the message's first word)."""
    return pytest.param(argument, image, sigma, kwargs, id=case_id)


#: One bad argument each.
BAD_INPUTS = [
    # image
    case("image-complex64", "image", image=np.zeros(SHAPE, np.complex64)),
    case("image-complex128", "image", image=np.zeros(SHAPE, np.complex128)),
    case("image-0d", "image", image=np.float32(1.0)),
    case("image-string-dtype", "image", image=np.full(SHAPE, "a")),
    case("image-bytes-dtype", "image", image=np.full(SHAPE, b"a")),
    # sigma: numbers and sequences
    case("sigma-negative", "sigma", sigma=-1.0),
    case("sigma-nan", "sigma", sigma=NAN),
    case("sigma-inf", "sigma", sigma=INF),
    case("sigma-too-large", "sigma", sigma=1e9),
    case("sigma-per-axis-negative", "sigma", sigma=(1.0, -0.5)),
    case("sigma-per-axis-nan", "sigma", sigma=(NAN, 1.0)),
    case("sigma-per-axis-inf", "sigma", sigma=(1.0, INF)),
    case("sigma-wrong-count", "sigma", sigma=(1.0, 2.0, 3.0)),
    case("sigma-wrong-count-array", "sigma", sigma=np.array([1.0, 2.0, 3.0])),
    case("sigma-non-number-in-sequence", "sigma", sigma=(1.0, "a")),
    case("sigma-none-in-sequence", "sigma", sigma=(1.0, None)),
    case("sigma-string", "sigma", sigma="1.0"),
    case("sigma-none", "sigma", sigma=None),
    # sigma: maps
    case("sigma-map-wrong-shape", "sigma", sigma=np.ones((6, 6))),
    case("sigma-map-too-many-dims", "sigma", sigma=np.ones((6, 7, 1, 2))),
    case("sigma-map-per-axis-wrong-length", "sigma", sigma=np.ones((6, 7, 3))),
    case("sigma-map-negative", "sigma", sigma=_map_with((2, 3), -1.0)),
    case("sigma-map-nan", "sigma", sigma=_map_with((5, 6), NAN)),
    case("sigma-map-inf", "sigma", sigma=_map_with((0, 0), INF)),
    case("sigma-map-per-axis-negative", "sigma", sigma=_map_with((1, 2, 1), -2.0, SHAPE + (2,))),
    case("sigma-map-complex", "sigma", sigma=np.ones(SHAPE, np.complex128)),
    case("sigma-map-string", "sigma", sigma=np.full(SHAPE, "1")),
    case("sigma-map-radius-beyond-axis", "sigma", sigma=_map_with((3, 3), 500.0), mode="wrap"),
    # mode
    case("mode-unknown", "mode", mode="reflekt"),
    case("mode-unknown-in-sequence", "mode", mode=("crop", "bogus")),
    case("mode-wrong-count", "mode", mode=("crop", "wrap", "wrap")),
    case("mode-non-string", "mode", mode=3),
    case("mode-none", "mode", mode=None),
    case("mode-non-string-in-sequence", "mode", mode=("crop", 3)),
    # cval
    case("cval-string", "cval", cval="0"),
    case("cval-none", "cval", cval=None),
    case("cval-complex", "cval", cval=1j),
    # truncate
    case("truncate-zero", "truncate", truncate=0),
    case("truncate-negative", "truncate", truncate=-1.0),
    case("truncate-nan", "truncate", truncate=NAN),
    case("truncate-inf", "truncate", truncate=INF),
    case("truncate-string", "truncate", truncate="3"),
    # radius
    case("radius-negative", "radius", radius=-1),
    case("radius-float", "radius", radius=1.5),
    case("radius-bool", "radius", radius=True),
    case("radius-wrong-count", "radius", radius=(1, 2, 3)),
    case("radius-negative-in-sequence", "radius", radius=(1, -2)),
    case("radius-with-sigma-map", "radius", sigma=ONES, radius=2),
    # axes
    case("axes-out-of-range", "axes", axes=2),
    case("axes-negative-out-of-range", "axes", axes=-3),
    case("axes-out-of-range-in-sequence", "axes", axes=(0, 5)),
    case("axes-duplicate", "axes", axes=(0, 0)),
    case("axes-duplicate-negative", "axes", axes=(1, -1)),
    case("axes-float", "axes", axes=1.0),
    case("axes-float-in-sequence", "axes", axes=(0, 1.0)),
    case("axes-string", "axes", axes="0"),
    case("axes-bool", "axes", axes=(True,)),
    # tolerance
    case("tolerance-zero", "tolerance", tolerance=0),
    case("tolerance-negative", "tolerance", tolerance=-0.01),
    case("tolerance-above-0.1", "tolerance", tolerance=0.2),
    case("tolerance-nan", "tolerance", tolerance=NAN),
    case("tolerance-inf", "tolerance", tolerance=INF),
    case("tolerance-string", "tolerance", tolerance="0.01"),
    # mask
    case("mask-wrong-shape", "mask", mask=np.ones((5, 7), bool)),
    case("mask-too-many-dims", "mask", mask=np.ones((2, 6, 7), bool)),
    case("mask-value-2", "mask", mask=np.where(IMAGE > 3, 2, 1)),
    case("mask-value-half", "mask", mask=_map_with((1, 1), 0.5)),
    case("mask-value-nan", "mask", mask=_map_with((0, 4), NAN)),
    case("mask-string-dtype", "mask", mask=np.full(SHAPE, "1")),
    case("mask-complex-dtype", "mask", mask=np.ones(SHAPE, np.complex64)),
    # nan_policy
    case("nan_policy-unknown", "nan_policy", nan_policy="ignore"),
    case("nan_policy-wrong-case", "nan_policy", nan_policy="RAISE"),
    case("nan_policy-none", "nan_policy", nan_policy=None),
    # channel_axis
    case("channel_axis-out-of-range", "channel_axis", channel_axis=2),
    case("channel_axis-negative-out-of-range", "channel_axis", channel_axis=-3),
    case("channel_axis-float", "channel_axis", channel_axis=1.0),
    case("channel_axis-string", "channel_axis", channel_axis="1"),
    case("channel_axis-in-axes", "axes", channel_axis=1, axes=(0, 1)),
    case("channel_axis-in-axes-negative", "axes", channel_axis=-1, axes=(1,)),
    # nan_policy="raise": the values it refuses
    case("raise-nan-image", "image", image=NAN_IMAGE, nan_policy="raise"),
    case("raise-inf-image", "image", image=INF_IMAGE, nan_policy="raise"),
    case("raise-nan-image-sigma-map", "image", image=NAN_IMAGE, sigma=ONES, nan_policy="raise"),
    case("raise-nan-cval", "cval", mode="constant", cval=NAN, nan_policy="raise"),
    case("raise-inf-cval", "cval", mode="constant", cval=-INF, nan_policy="raise"),
    case(
        "raise-nan-cval-one-axis", "cval", mode=("crop", "constant"), cval=NAN, nan_policy="raise"
    ),
]


def outcome(function, *args, **kwargs) -> tuple[type, str] | None:
    """``(exception class, message)`` of the call, or ``None`` when it returns."""
    try:
        function(*args, **kwargs)
    except Exception as exc:
        return type(exc), str(exc)
    return None


def as_jax(image):
    """The image as a JAX array, as a JAX user holds it, when JAX can hold its dtype.
    ``jnp.asarray`` refuses string dtypes and (x64 off) narrows complex128 to complex64:
    then the JAX-native API gets the NumPy array itself, as a user would pass it, so
    both APIs see the same input."""
    try:
        converted = jnp.asarray(image)
    except TypeError:
        return image
    return converted if np.dtype(converted.dtype) == np.asarray(image).dtype else image


def both(image, sigma, kwargs):
    """The outcome of the NumPy API and of the JAX-native API for the same arguments.
    The NumPy call adds ``backend="reference"`` (valid, so it changes no check) only so
    that inputs both accept are computed without compiling Numba kernels."""
    numpy_side = outcome(gaussian_blur, image, sigma, backend="reference", **kwargs)
    jax_side = outcome(jax_blur, as_jax(image), sigma, **kwargs)
    return numpy_side, jax_side


def describe(result: tuple[type, str] | None) -> str:
    return "returned normally" if result is None else f"{result[0].__name__}: {result[1]}"


@pytest.mark.parametrize(("argument", "image", "sigma", "kwargs"), BAD_INPUTS)
def test_both_apis_raise_the_same_error(argument, image, sigma, kwargs):
    numpy_side, jax_side = both(image, sigma, kwargs)
    report = f"\nNumPy API: {describe(numpy_side)}\nJAX API:   {describe(jax_side)}"
    assert numpy_side is not None, "the NumPy API accepted a bad input" + report
    assert jax_side is not None, "the JAX-native API accepted a bad input" + report
    assert numpy_side[1].startswith(f"{argument}: "), f"not named {argument!r}" + report
    assert jax_side[0] is numpy_side[0], "different exception classes" + report
    assert jax_side[1] == numpy_side[1], "different messages" + report


#: Two bad arguments at once: both APIs must report the same one first.
TWO_BAD = [
    pytest.param(IMAGE, 1.0, {"radius": -1, "tolerance": 0}, id="radius-and-tolerance"),
    pytest.param(IMAGE, 1.0, {"radius": -1, "nan_policy": "bogus"}, id="radius-and-nan_policy"),
    pytest.param(IMAGE, 1.0, {"radius": 1.5, "mask": np.ones((5, 7))}, id="radius-and-mask"),
    pytest.param(NAN_IMAGE, -1.0, {"nan_policy": "raise"}, id="sigma-and-raise-nan-image"),
    pytest.param(NAN_IMAGE, np.ones((6, 6)), {"nan_policy": "raise"}, id="map-and-raise-nan"),
    pytest.param(
        IMAGE,
        -1.0,
        {"mode": "constant", "cval": NAN, "nan_policy": "raise"},
        id="sigma-and-raise-nan-cval",
    ),
    pytest.param(IMAGE, 1.0, {"mode": "bogus", "cval": "x"}, id="mode-and-cval"),
    pytest.param(IMAGE, 1.0, {"truncate": 0, "tolerance": 1.0}, id="truncate-and-tolerance"),
]


@pytest.mark.parametrize(("image", "sigma", "kwargs"), TWO_BAD)
def test_both_apis_report_the_same_error_first(image, sigma, kwargs):
    numpy_side, jax_side = both(image, sigma, kwargs)
    report = f"\nNumPy API: {describe(numpy_side)}\nJAX API:   {describe(jax_side)}"
    assert numpy_side is not None and jax_side is not None, report
    assert jax_side == numpy_side, report


#: Borderline inputs that are not errors (the contract: ``"raise"`` refuses a
#: non-finite ``cval`` only where a constant-mode axis reads it, i.e. blurs, and
#: non-finite values only in valid pixels).  Both APIs must accept them.
ACCEPTED = [
    pytest.param(
        IMAGE,
        0.0,
        {"mode": "constant", "cval": NAN, "nan_policy": "raise"},
        id="raise-nan-cval-sigma-0",
    ),
    pytest.param(
        IMAGE,
        (1.0, 0.0),
        {"mode": ("crop", "constant"), "cval": NAN, "nan_policy": "raise"},
        id="raise-nan-cval-on-unblurred-axis",
    ),
    pytest.param(
        IMAGE,
        np.zeros(SHAPE),
        {"mode": "constant", "cval": INF, "nan_policy": "raise"},
        id="raise-inf-cval-zero-map",
    ),
    pytest.param(
        NAN_IMAGE,
        1.0,
        {"mask": np.isfinite(NAN_IMAGE), "nan_policy": "raise"},
        id="raise-nan-in-masked-pixel",
    ),
    pytest.param(IMAGE, 1.0, {"mode": "constant", "cval": NAN}, id="nan-cval-propagate"),
    pytest.param(IMAGE, 1.0, {"channel_axis": 0}, id="channel-axis"),
]


@pytest.mark.parametrize(("image", "sigma", "kwargs"), ACCEPTED)
def test_both_apis_accept_the_same_borderline_inputs(image, sigma, kwargs):
    numpy_side, jax_side = both(image, sigma, kwargs)
    report = f"\nNumPy API: {describe(numpy_side)}\nJAX API:   {describe(jax_side)}"
    assert numpy_side is None, report
    assert jax_side is None, report


# ------------------------------------------------------------ one API's own arguments

NUMPY_ONLY = [
    pytest.param({"backend": "cuda"}, id="backend-unknown"),
    pytest.param({"backend": "Numba"}, id="backend-wrong-case"),
    pytest.param({"backend": 3}, id="backend-non-string"),
    pytest.param({"backend": None}, id="backend-none"),
    pytest.param({"backend": ["numba"]}, id="backend-list"),
    pytest.param({"precision": "float16"}, id="precision-float16"),
    pytest.param({"precision": "int32"}, id="precision-int32"),
    pytest.param({"precision": np.complex128}, id="precision-complex128"),
    pytest.param({"precision": "bogus"}, id="precision-unknown"),
    pytest.param({"precision": 3}, id="precision-non-string"),
    pytest.param({"precision": None}, id="precision-none"),
]


@pytest.mark.parametrize("kwargs", NUMPY_ONLY)
def test_numpy_only_arguments(kwargs):
    (argument,) = kwargs
    kwargs = {"backend": "reference", **kwargs}
    with pytest.raises((ValueError, TypeError), match=rf"^{argument}: "):
        gaussian_blur(IMAGE, 1.0, **kwargs)


def _traced_sigma(**kwargs):
    image = jnp.asarray(IMAGE)
    return jax.jit(lambda s: jax_blur(image, s, **kwargs))(jnp.ones(SHAPE))


def _traced_image(**kwargs):
    return jax.jit(lambda x: jax_blur(x, 1.0, **kwargs))(jnp.asarray(IMAGE))


JAX_ONLY = [
    pytest.param(_traced_sigma, {"max_radius": -1}, "max_radius", id="max_radius-negative"),
    pytest.param(_traced_sigma, {"max_radius": 2.5}, "max_radius", id="max_radius-float"),
    pytest.param(
        _traced_sigma, {"max_radius": (2, 2, 2)}, "max_radius", id="max_radius-wrong-count"
    ),
    pytest.param(
        _traced_sigma, {"max_radius": (2, -1)}, "max_radius", id="max_radius-negative-in-sequence"
    ),
    pytest.param(_traced_sigma, {}, "max_radius", id="traced-sigma-without-max_radius"),
    pytest.param(
        _traced_sigma, {"radius": 2, "max_radius": 3}, "radius", id="radius-with-traced-sigma"
    ),
    pytest.param(
        _traced_image, {"nan_policy": "raise"}, "nan_policy", id="raise-with-traced-image"
    ),
]


@pytest.mark.parametrize(("call", "kwargs", "argument"), JAX_ONLY)
def test_jax_only_arguments(call, kwargs, argument):
    with pytest.raises(ValueError, match=rf"^{argument}: "):
        call(**kwargs)


@pytest.mark.parametrize("max_radius", [-1, 2.5, (2, 2, 2)], ids=["negative", "float", "count"])
def test_bad_max_radius_is_refused_with_a_concrete_sigma_too(max_radius):
    """The contract: every argument error is raised at call time, so a bad
    ``max_radius`` is an error whether or not this sigma needed it."""
    with pytest.raises(ValueError, match=r"^max_radius: "):
        jax_blur(jnp.asarray(IMAGE), 1.0, max_radius=max_radius)
