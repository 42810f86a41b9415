"""Sigma maps from simple descriptions: labels, a defocus model, a radial falloff, an image.

Every function takes NumPy input, returns a float64 array of sigmas in pixels (each one
finite and >= 0) and never modifies its input.  The result has one axis per image axis
and broadcasts to the image's shape, so it can be passed straight to
:func:`napari_varblur.gaussian_blur`.  Where the map only varies along some axes
(:func:`defocus` with a single focal plane) the other axes have length 1 instead of
being filled in; ``np.broadcast_to(sigma_map, shape)`` gives the full-size view.

Example
-------
>>> import numpy as np
>>> from napari_varblur import gaussian_blur
>>> from napari_varblur.sigma_maps import defocus, radial
>>> stack = np.random.default_rng(0).random((5, 32, 32))
>>> sigma_map = defocus(stack.shape, focus=2, slope=0.5)  # sharp in plane 2
>>> sigma_map.shape
(5, 1, 1)
>>> sigma_map[:, 0, 0]
array([1. , 0.5, 0. , 0.5, 1. ])
>>> blurred = gaussian_blur(stack, sigma_map)
>>> edge = radial((32, 32), center=(15.5, 15.5), sigma_center=0.0, sigma_edge=2.0, radius=16)
>>> float(edge[0, 0])  # a corner lies beyond the radius
2.0
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from .core.checks import ArgumentError, real

__all__ = ["defocus", "from_image", "from_labels", "radial"]


# --- argument checks ------------------------------------------------------------------


def _shape(shape: object) -> tuple[int, ...]:
    """A tuple of ints >= 0 with at least one axis; an int means a 1-D shape."""
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool | np.bool_):
        shape = (shape,)
    if not isinstance(shape, Sequence | np.ndarray) or isinstance(shape, str):
        raise ArgumentError(f"shape: must be a tuple of ints, got {type(shape).__name__}")
    sizes = []
    for size in shape:
        if isinstance(size, bool | np.bool_) or not isinstance(size, numbers.Integral):
            raise ArgumentError(f"shape: sizes must be ints, got {size!r}")
        if size < 0:
            raise ArgumentError(f"shape: sizes must be >= 0, got {tuple(shape)}")
        sizes.append(int(size))
    if not sizes:
        raise ArgumentError("shape: needs at least one axis, got ()")
    return tuple(sizes)


def _real_array(name: str, value: npt.ArrayLike) -> np.ndarray:
    """``value`` as an array of real numbers (bool/int/float); TypeError naming ``name``."""
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise ArgumentError(f"{name}: must hold real numbers, got dtype {array.dtype}")
    return array


# --- the maps -------------------------------------------------------------------------


def from_labels(
    labels: npt.ArrayLike, sigmas: Mapping[int, float], default: float = 0.0
) -> np.ndarray:
    """One sigma per label of a label image.

    Parameters
    ----------
    labels
        Integer label image (any signed or unsigned integer dtype), ``ndim >= 1``.
    sigmas
        Mapping label -> sigma (pixels, finite, >= 0).  Labels that do not occur in
        ``labels`` are allowed and ignored.
    default
        Sigma (finite, >= 0) of every label not in ``sigmas``, background included.

    Returns
    -------
    numpy.ndarray
        float64, shape ``labels.shape``.

    Raises
    ------
    TypeError
        ``labels`` is not an integer array, ``sigmas`` is not a mapping, a key is not
        an integer or a sigma is not a real number.
    ValueError
        ``labels`` is 0-d, or a sigma (or ``default``) is negative or not finite.

    Examples
    --------
    >>> from_labels(np.array([[0, 1], [2, 1]]), {1: 2.0}, default=0.5)
    array([[0.5, 2. ],
           [0.5, 2. ]])
    """
    label_array = np.asarray(labels)
    if label_array.dtype.kind not in "iu":
        raise ArgumentError(
            f"labels: must be an integer array, got dtype {label_array.dtype}"
            " (convert a boolean mask with .astype(int))"
        )
    if label_array.ndim == 0:
        raise ArgumentError("labels: needs at least one axis, got a 0-d array")
    if not isinstance(sigmas, Mapping):
        raise ArgumentError(
            f"sigmas: must be a mapping label -> sigma, got {type(sigmas).__name__}"
        )
    default_sigma = real("default", default, at_least=0)
    table: dict[int, float] = {}
    for key, value in sigmas.items():
        if isinstance(key, bool | np.bool_):
            raise ArgumentError(f"sigmas: label {key!r} is not an integer")
        try:
            label = operator.index(key)
        except TypeError:
            raise ArgumentError(f"sigmas: label {key!r} is not an integer") from None
        if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
            raise ArgumentError(
                f"sigmas: label {label} has a sigma of type {type(value).__name__},"
                " not a real number"
            )
        sigma = float(value)
        if not np.isfinite(sigma):
            raise ArgumentError(f"sigmas: label {label} has a non-finite sigma {sigma}")
        if sigma < 0:
            raise ArgumentError(f"sigmas: label {label} has a negative sigma {sigma}")
        table[label] = sigma

    present, inverse = np.unique(label_array, return_inverse=True)
    per_label = np.array([table.get(int(label), default_sigma) for label in present], np.float64)
    return per_label[inverse].reshape(label_array.shape)


def defocus(
    shape: int | Sequence[int],
    focus: float | npt.ArrayLike,
    slope: float,
    sigma0: float = 0.0,
    axis: int = 0,
) -> np.ndarray:
    """Defocus blur growing linearly with the distance from a focal plane or surface.

    ``sigma = sigma0 + slope * |i - focus|``, ``i`` the index along ``axis``.

    Parameters
    ----------
    shape
        Shape of the image the map is for (an int means a 1-D image).
    focus
        Position of focus along ``axis`` in pixels (fractional and out-of-range values
        allowed): a number (a focal plane), or an array over the other axes (a focal
        surface, e.g. a tilted coverslip) whose shape broadcasts to ``shape`` without
        ``axis``.
    slope
        Growth of sigma per pixel away from focus (finite, >= 0).
    sigma0
        Sigma in focus (finite, >= 0).
    axis
        The axis along which focus varies (negative counts from the end).

    Returns
    -------
    numpy.ndarray
        float64 with ``len(shape)`` axes, broadcastable to ``shape``: axes along which
        the map is constant have length 1 (with a number as ``focus`` only ``axis`` is
        full-size).  ``np.broadcast_to(result, shape)`` gives the full map.

    Raises
    ------
    TypeError
        An argument has the wrong type.
    ValueError
        ``axis`` out of range, ``focus`` not finite or of a shape that does not
        broadcast, ``slope`` or ``sigma0`` negative or not finite, or sigmas too large
        to represent.

    Examples
    --------
    >>> defocus((4, 3), focus=1, slope=2.0, sigma0=0.5)[:, 0]
    array([2.5, 0.5, 2.5, 4.5])
    >>> defocus((2, 3), focus=[0, 1, 2], slope=1.0, axis=0)  # a tilted focal line
    array([[0., 1., 2.],
           [1., 0., 1.]])
    """
    sizes = _shape(shape)
    ndim = len(sizes)
    if isinstance(axis, bool | np.bool_) or not isinstance(axis, numbers.Integral):
        raise ArgumentError(f"axis: must be an int, got {type(axis).__name__}")
    if not -ndim <= axis < ndim:
        raise ArgumentError(f"axis: {axis} is out of range for a shape with {ndim} axes")
    axis = int(axis) % ndim
    slope_value = real("slope", slope, at_least=0)
    sigma0_value = real("sigma0", sigma0, at_least=0)

    focus_array = _real_array("focus", focus).astype(np.float64)
    if not np.isfinite(focus_array).all():
        raise ArgumentError("focus: must be finite (NaN or inf found)")
    other = sizes[:axis] + sizes[axis + 1 :]
    if focus_array.ndim > len(other):
        raise ArgumentError(
            f"focus: shape {focus_array.shape} has more axes than the other axes of"
            f" shape {sizes} without axis {axis}, {other}"
        )
    focus_array = focus_array.reshape((1,) * (len(other) - focus_array.ndim) + focus_array.shape)
    if any(f not in (1, s) for f, s in zip(focus_array.shape, other)):
        raise ArgumentError(
            f"focus: shape {np.shape(focus)} does not broadcast to {other}"
            f" (shape {sizes} without axis {axis})"
        )
    focus_array = np.expand_dims(focus_array, axis)

    index = np.arange(sizes[axis], dtype=np.float64).reshape(
        (1,) * axis + (sizes[axis],) + (1,) * (ndim - axis - 1)
    )
    with np.errstate(over="ignore", invalid="ignore"):
        result = sigma0_value + slope_value * np.abs(index - focus_array)
    if not np.isfinite(result).all():
        raise ArgumentError("slope: sigma0 + slope * |i - focus| overflows float64")
    return result


def radial(
    shape: int | Sequence[int],
    center: Sequence[float] | npt.ArrayLike,
    sigma_center: float,
    sigma_edge: float,
    radius: float,
) -> np.ndarray:
    """Blur growing with the square of the distance from a centre (field curvature).

    ``sigma = sigma_center + (sigma_edge - sigma_center) * min(d / radius, 1)**2``,
    ``d`` the Euclidean distance in pixels from the pixel's index to ``center``.

    Parameters
    ----------
    shape
        Shape of the image the map is for (an int means a 1-D image).
    center
        One coordinate per axis, in pixels (fractional and out-of-image allowed; the
        centre of an ``(h, w)`` image is ``((h - 1) / 2, (w - 1) / 2)``).
    sigma_center
        Sigma at ``center`` (finite, >= 0).
    sigma_edge
        Sigma at distance ``radius`` and beyond (finite, >= 0; may be smaller than
        ``sigma_center``).
    radius
        Distance in pixels at which ``sigma_edge`` is reached (finite, > 0).

    Returns
    -------
    numpy.ndarray
        float64, shape ``shape``.

    Raises
    ------
    TypeError
        An argument has the wrong type.
    ValueError
        ``center`` with the wrong length or not finite, a sigma negative or not finite,
        ``radius`` not finite or <= 0.

    Examples
    --------
    >>> radial((1, 5), center=(0, 2), sigma_center=1.0, sigma_edge=3.0, radius=2)
    array([[3. , 1.5, 1. , 1.5, 3. ]])
    """
    sizes = _shape(shape)
    center_array = _real_array("center", center).astype(np.float64)
    if center_array.shape != (len(sizes),):
        raise ArgumentError(
            f"center: needs one coordinate per axis ({len(sizes)}), got shape {center_array.shape}"
        )
    if not np.isfinite(center_array).all():
        raise ArgumentError(f"center: must be finite, got {tuple(center_array.tolist())}")
    inner = real("sigma_center", sigma_center, at_least=0)
    outer = real("sigma_edge", sigma_edge, at_least=0)
    radius_value = real("radius", radius)
    if radius_value <= 0:
        raise ArgumentError(f"radius: must be > 0, got {radius_value}")

    squared = np.zeros(sizes, dtype=np.float64)
    for axis, (size, c) in enumerate(zip(sizes, center_array)):
        offset = np.arange(size, dtype=np.float64) - c
        squared += (offset**2).reshape((1,) * axis + (size,) + (1,) * (len(sizes) - axis - 1))
    fraction = np.minimum(np.sqrt(squared) / radius_value, 1.0) ** 2
    # Written as a blend so that both ends are exact: sigma_center at d = 0 and
    # sigma_edge from d = radius on.
    return inner * (1.0 - fraction) + outer * fraction


def from_image(
    values: npt.ArrayLike, lo: float, hi: float, sigma_lo: float, sigma_hi: float
) -> np.ndarray:
    """Map an image (e.g. a depth map) linearly onto sigmas.

    ``values`` are clipped to ``[lo, hi]``; ``lo`` becomes ``sigma_lo``, ``hi`` becomes
    ``sigma_hi`` and values in between are interpolated linearly.

    Parameters
    ----------
    values
        Real-valued array (bool, integer or float), ``ndim >= 1``, without NaN
        (``-inf``/``inf`` are clipped like any value beyond ``lo``/``hi``).
    lo, hi
        The value range, finite, ``lo < hi``.
    sigma_lo, sigma_hi
        Sigmas at ``lo`` and ``hi`` (finite, >= 0); ``sigma_hi < sigma_lo`` inverts the
        mapping (e.g. large depth values sharp).

    Returns
    -------
    numpy.ndarray
        float64, shape ``values.shape``, each sigma between ``sigma_lo`` and
        ``sigma_hi``.

    Raises
    ------
    TypeError
        ``values`` is not real-valued, or a number argument is not a real number.
    ValueError
        ``values`` is 0-d or holds NaN, ``lo``/``hi`` not finite or ``lo >= hi``, a
        sigma negative or not finite.

    Examples
    --------
    >>> from_image(np.array([-1.0, 0.0, 5.0, 10.0, 20.0]), 0, 10, 1.0, 3.0)
    array([1., 1., 2., 3., 3.])
    """
    array = _real_array("values", values)
    if array.ndim == 0:
        raise ArgumentError("values: needs at least one axis, got a 0-d array")
    low = real("lo", lo)
    high = real("hi", hi)
    if not low < high:
        raise ArgumentError(f"lo, hi: lo must be < hi, got lo={low}, hi={high}")
    if not np.isfinite(high - low):
        raise ArgumentError(f"lo, hi: the range hi - lo overflows float64 (lo={low}, hi={high})")
    start = real("sigma_lo", sigma_lo, at_least=0)
    end = real("sigma_hi", sigma_hi, at_least=0)
    data = array.astype(np.float64)
    if np.isnan(data).any():
        raise ArgumentError("values: holds NaN; fill or mask it first (e.g. np.nan_to_num)")
    fraction = (np.clip(data, low, high) - low) / (high - low)
    result = start * (1.0 - fraction) + end * fraction
    # Rounding must not step outside [min, max] of the two sigmas (never below 0).
    return np.clip(result, min(start, end), max(start, end))
