"""Sigma, checked once: a global sigma (one number per blurred axis) or a sigma map (NumPy
or dask; isotropic, or one sigma per pixel and axis), and the shapes a map may take."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .checks import ArgumentError, as_float, is_dask_array, is_number, where
from .shapes import broadcasts


def mean_step(sigma: np.ndarray, axis: int) -> float:
    """How fast a sigma map changes along ``axis``: the mean absolute step between
    neighbours, on a grid of at most ~256 samples along ``axis`` and ~32 across each
    other axis (plenty for a mean: a whole 64x128x128 map took ~1 ms a look); 0 where
    the map has length 1 there."""
    if sigma.shape[axis] < 2:
        return 0.0
    stride = [max(1, n // (256 if a == axis else 32)) for a, n in enumerate(sigma.shape)]
    thin = sigma[tuple(slice(None, None, k) for k in stride)]
    return float(np.abs(np.diff(thin, axis=axis)).mean()) / stride[axis]


def check_sigma_values(values: np.ndarray, what: str) -> float:
    """Raise ``ValueError`` if any sigma is NaN, infinite or negative; else return the
    largest (0 for no values)."""
    if not values.size:
        return 0.0
    top = _largest_if_valid(values)
    if top is not None:
        return top  # two reductions; the masks below only say where an error is
    bad_nan = np.isnan(values)
    if bad_nan.any():
        raise ArgumentError(f"sigma: {what} has NaN in {where(bad_nan)}; sigma must be finite")
    bad_inf = np.isinf(values)
    if bad_inf.any():
        raise ArgumentError(f"sigma: {what} is infinite in {where(bad_inf)}; sigma must be finite")
    bad_neg = values < 0
    if bad_neg.any():
        raise ArgumentError(f"sigma: {what} is negative in {where(bad_neg)}; sigma must be >= 0")


def _largest_if_valid(values: np.ndarray) -> float | None:
    """The largest value if every value is finite and >= 0 (the smallest is: a NaN
    makes it NaN; and the largest is finite), else ``None``."""
    low, high = values.min(), values.max()
    return float(high) if np.isfinite(low) and low >= 0 and np.isfinite(high) else None


def normalize_global_sigma(sigma: object, naxes: int) -> tuple[float, ...]:
    """One float sigma per blurred axis from a number or a sequence."""
    if is_number(sigma):
        if not math.isfinite(as_float(sigma)) or sigma < 0:
            raise ArgumentError(f"sigma: must be a finite number >= 0, got {sigma!r}")
        values = [sigma] * naxes
    else:
        values = list(sigma)  # type: ignore[arg-type]
        if len(values) != naxes:
            raise ArgumentError(
                f"sigma: got {len(values)} values for {naxes} blurred axes; "
                "give one sigma or one per blurred axis"
            )
        for v in values:
            if not is_number(v):
                raise ArgumentError(f"sigma: expected numbers, got {v!r}")
    arr = np.asarray([as_float(v) for v in values], dtype=np.float64)
    check_sigma_values(arr, "per-axis sigma")
    return tuple(float(v) for v in arr)


def map_layout(map_shape: tuple[int, ...], image_shape: tuple[int, ...], naxes: int) -> bool:
    """Check a sigma map's shape; return ``True`` if it holds one sigma per blurred axis.

    An isotropic map has the image's ndim and broadcasts to the image's shape; a
    per-axis map has an extra trailing axis of length ``len(axes)``.
    """
    if broadcasts(map_shape, image_shape):
        return False
    if map_shape[-1:] == (naxes,) and broadcasts(map_shape[:-1], image_shape):
        return True
    raise ArgumentError(
        f"sigma: a sigma map of shape {tuple(map_shape)} does not fit an image of shape "
        f"{tuple(image_shape)}; expected a shape that broadcasts to {tuple(image_shape)} "
        f"(one sigma per pixel) or {tuple(image_shape) + (naxes,)} (one per pixel and axis); "
        "a map for one channel of a multichannel image: pass channel_axis= (the map may "
        "then omit that axis), or give it a length-1 axis there (e.g. map[..., None])"
    )


def traced_layout(shape: tuple[int, ...], image_shape: tuple[int, ...], naxes: int) -> str:
    """What a traced sigma of ``shape`` holds (the JAX-native API takes any of these):
    ``"isotropic"`` (a scalar, or one map for every axis), ``"values"`` (one sigma per
    blurred axis) or ``"per-axis"`` (one map per axis, a trailing axis of ``naxes``)."""
    if len(shape) == 0:
        return "isotropic"
    if tuple(shape) == (naxes,) and len(image_shape) != 1:
        return "values"
    return "per-axis" if map_layout(tuple(shape), image_shape, naxes) else "isotropic"


def map_with_channel_axis(
    sigma: Any, image_shape: tuple[int, ...], naxes: int, channel: int
) -> Any:
    """A sigma map given without the channel axis, with a length-1 axis there (so it
    broadcasts over the channels); a map that already fits is returned as it is."""
    try:
        map_layout(tuple(sigma.shape), image_shape, naxes)
        return sigma
    except ValueError:
        pass
    ndim = len(image_shape)
    per_axis = sigma.ndim == ndim and sigma.shape[-1] == naxes  # the channel left out
    if sigma.ndim != ndim - 1 and not per_axis:
        return sigma  # the caller's shape check reports it
    # The map's leading axes are the image's without the channel (a per-axis map keeps
    # its trailing axis last).
    return sigma.reshape(sigma.shape[:channel] + (1,) + sigma.shape[channel:])


def _lazy_map_maxima(sigma: Any, per_axis: bool, k: int) -> tuple[float, ...]:
    """Check a dask sigma map's values and return each axis's largest sigma, in one pass
    over the map (the first bad value is located only when there is one)."""
    import dask

    if sigma.size == 0:
        return (0.0,) * k
    maxima = [sigma[..., i].max() for i in range(k)] if per_axis else [sigma.max()]
    checks = [(sigma < 0).any(), (~np.isfinite(sigma)).any()]  # a float map by now
    results = dask.compute(*maxima, *checks)
    if any(results[len(maxima) :]):
        check_sigma_values(np.asarray(sigma, dtype=np.float64), "the sigma map")
    tops = tuple(float(t) for t in results[: len(maxima)])
    return tops if per_axis else tops * k


def normalize_sigma_map(
    sigma: Any, image_shape: tuple[int, ...], k: int
) -> tuple[tuple[Any, ...], bool, tuple[float, ...]]:
    """A NumPy or dask sigma map -> (one array per blurred axis, isotropic?, maxima).

    float32 and float64 maps keep their dtype (the float64 value of a float32 sigma is
    exact); other real dtypes widen to float64.
    """
    if np.dtype(sigma.dtype).kind not in "biuf":
        raise ArgumentError(f"sigma: a sigma map must be real-valued, got dtype {sigma.dtype}")
    per_axis = map_layout(tuple(sigma.shape), image_shape, k)
    if sigma.dtype not in (np.float32, np.float64):
        sigma = sigma.astype(np.float64)
    if is_dask_array(sigma):
        maxima = _lazy_map_maxima(sigma, per_axis, k)
    else:
        top = check_sigma_values(sigma, "the sigma map")
        if sigma.size == 0:
            maxima = (0.0,) * k
        elif per_axis:
            maxima = tuple(float(v) for v in sigma.reshape(-1, k).max(axis=0))
        else:
            maxima = (top,) * k
    maps = tuple(sigma[..., i] for i in range(k)) if per_axis else (sigma,) * k
    return maps, not per_axis, maxima


def normalize_sigma(sigma: object, shape: tuple[int, ...], k: int, radius) -> tuple:
    """(global sigma or None, map arrays or None, isotropic, each axis's largest sigma)."""
    if isinstance(sigma, np.ndarray) and sigma.ndim == 0:
        sigma = sigma.item()
    if (is_dask_array(sigma) or isinstance(sigma, np.ndarray)) and not (
        sigma.ndim == 1 and len(shape) != 1
    ):
        if radius is not None:
            raise ArgumentError(
                "radius: cannot be combined with a sigma map (each pixel's radius comes "
                "from its sigma and truncate)"
            )
        maps, isotropic, maxima = normalize_sigma_map(sigma, shape, k)
        return None, maps, isotropic, maxima
    if is_number(sigma) or (
        isinstance(sigma, (Sequence, np.ndarray)) and not isinstance(sigma, (str, bytes))
    ):
        values = normalize_global_sigma(sigma, k)
        return values, None, len(set(values)) <= 1, values
    raise ArgumentError(
        f"sigma: expected a number, one number per blurred axis, or a NumPy sigma "
        f"map, got {type(sigma).__name__}"
    )
