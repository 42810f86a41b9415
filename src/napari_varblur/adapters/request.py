"""What the adapters that take files and layers (``varblur blur``, napari) share on top
of the library's normalisers: maps given for the blurred axes only, sigma maps scaled per
axis (world units), and masks that *mark* pixels (any non-zero value).  Errors name the
argument as the adapter calls it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.checks import ArgumentError, choice
from ..core.params import DEFAULT, MASK_MARKS
from ..core.shapes import placement
from ..core.sigma import normalize_global_sigma


def map_for_axes(
    values: Any,
    image_shape: tuple[int, ...],
    axes: tuple[int, ...],
    name: str = "sigma_map",
    per_axis: bool = False,
) -> Any:
    """A sigma map given in a shape that broadcasts to the image's, or in the shape of
    its blurred axes (in the order of ``axes``), as an array that broadcasts to the image.

    For adapters (CLI, napari) that accept a map of just the blurred axes: it is
    transposed into the image's axis order (``axes=(2, 1)`` takes a map of shape
    ``(n2, n1)``) and gets length-1 batch axes.  NumPy and dask arrays both work.  A map
    with the image's ndim that broadcasts to it is used as is (that reading wins when
    both fit).  With ``per_axis``, a per-axis map (one sigma per pixel and blurred axis,
    an extra trailing axis of ``len(axes)`` in the order of ``axes``) is taken in either
    shape as well, and keeps its trailing axis last: see :func:`is_per_axis`.
    """
    shape = tuple(values.shape)
    placed = _placed(values, shape, image_shape, axes)
    if placed is not None:
        return placed
    if per_axis and is_per_axis(shape, image_shape, axes):
        return _placed(values, shape[:-1], image_shape, axes, trailing=True)
    spatial = tuple(image_shape[a] for a in axes)
    also = f", nor either with a trailing axis of {len(axes)} (one sigma per axis)"
    raise ArgumentError(
        f"{name}: shape {shape} fits neither the image's shape {tuple(image_shape)} nor "
        f"the shape of its blurred axes {spatial} (axes {tuple(axes)})" + (also if per_axis else "")
    )


def is_per_axis(shape: tuple[int, ...], image_shape: tuple[int, ...], axes: tuple[int, ...]):
    """Whether a map of ``shape`` is read as a per-axis map by :func:`map_for_axes`: it
    does not fit as one sigma per pixel, and it does with its trailing axis of
    ``len(axes)`` taken off."""
    shape = tuple(shape)
    if placement(shape, image_shape, axes) is not None or shape[-1:] != (len(axes),):
        return False
    return placement(shape[:-1], image_shape, axes) is not None


def _placed(values, shape, image_shape, axes, trailing: bool = False):
    """``values`` (leading ``shape``, then one trailing axis if ``trailing``) in the
    image's axis order, or None where the shape does not fit."""
    where = placement(tuple(shape), image_shape, axes)
    if where != "axes":
        return values if where == "image" else None
    order = tuple(int(i) for i in np.argsort(axes))  # given order -> ascending axis order
    extra = (len(axes),) if trailing else ()
    moved = values.transpose(order + ((len(order),) if trailing else ()))
    ndim = len(image_shape)
    return moved.reshape([image_shape[a] if a in axes else 1 for a in range(ndim)] + list(extra))


def scale_map(values: Any, factors: Sequence[float], per_axis: bool = False) -> Any:
    """A map times one factor per blurred axis: isotropic when the factors agree (and
    the map is), else a per-axis map (a trailing axis of factors).  NumPy or dask."""
    factors = [float(f) for f in factors]
    if per_axis:
        return values * np.asarray(factors)
    if all(f == factors[0] for f in factors):
        return values * factors[0]
    return values[..., None] * np.asarray(factors)


def normalize_marks(marks: object) -> str:
    """``mask_marks``: what a mask's non-zero pixels mark, ``"valid"`` or ``"invalid"``."""
    return choice("mask_marks", marks, MASK_MARKS, "choice")


def marked_pixels(
    values: Any, image_shape: tuple[int, ...], axes: tuple[int, ...], name: str,
    marks: str = DEFAULT.mask_marks,
) -> Any:  # fmt: skip
    """A mask as the adapters (``varblur blur`` and ``fit``, napari) take it, as the
    library's mask.

    Any non-zero value marks a pixel (a label image works); the values have the image's
    shape or the blurred axes' (:func:`map_for_axes`).  Returns True where a pixel is
    valid: the marked pixels, or the others when ``marks`` is ``"invalid"``.  A new
    array (lazy for dask); errors name ``name``.
    """
    marks = normalize_marks(marks)
    if values.dtype.kind not in "biuf":
        raise ArgumentError(f"{name}: dtype {values.dtype} is not supported; use 0 and non-zero")
    values = map_for_axes(values, image_shape, axes, name)
    if values.dtype.kind == "f" and bool(np.isnan(values).any()):  # computes a dask mask's
        raise ArgumentError(f"{name}: holds NaN; mark pixels with 0 and non-zero values only")
    marked = values != 0
    return ~marked if marks == "invalid" else marked


def pixel_sigma(
    sigma: Any, naxes: int, pixel_size: Sequence[float] | None = None
) -> tuple[float, ...]:
    """``sigma`` (one value or one per blurred axis) in pixels, one per blurred axis:
    divided by ``pixel_size`` (one per blurred axis) when it is in world units."""
    factor = np.asarray(normalize_global_sigma(sigma, naxes))
    if pixel_size is not None:
        factor = factor / np.asarray(pixel_size, dtype=np.float64)
    return tuple(float(f) for f in factor)


def sigma_argument(
    sigma: Any,
    image_shape: tuple[int, ...],
    axes: tuple[int, ...],
    *,
    pixel_size: Sequence[float] | None = None,
    map_values: Any = None,
    map_name: str = "sigma_map",
) -> Any:
    """The library's ``sigma`` from what a file or layer adapter took: ``sigma`` (one value
    or one per blurred axis) in pixels, or in world units when ``pixel_size`` (one per
    blurred axis) is given, times an optional map of the image's shape or the blurred
    axes', either with one sigma per blurred axis as a trailing axis (:func:`map_for_axes`;
    errors name ``map_name``)."""
    factor = pixel_sigma(sigma, len(axes), pixel_size)
    if map_values is None:
        return factor
    per_axis = is_per_axis(tuple(map_values.shape), image_shape, axes)
    placed = map_for_axes(map_values, image_shape, axes, map_name, per_axis=True)
    return scale_map(placed, factor, per_axis)
