"""``fit_sigma_map``'s own argument checks (the blur's arguments go through the
library's normalisers in :mod:`napari_varblur.core.spec`)."""

from __future__ import annotations

import numpy as np

from ..core.checks import ArgumentError, real
from ..core.checks import count as normalize_count
from ..core.rules import MAX_GLOBAL_RADIUS, radius_of
from ..core.spec import check_finite_values, normalize_mask

__all__ = [
    "check_image_pair",
    "check_max_sigma",
    "normalize_count",
    "normalize_number",
    "valid_pair",
]


def normalize_number(name: str, value: object, minimum: float = 0.0, strict: bool = True) -> float:
    """A finite real number above ``minimum`` (or at least it, when not ``strict``)."""
    return real(name, value, above=minimum) if strict else real(name, value, at_least=minimum)


def check_max_sigma(
    max_sigma: float, shape: tuple[int, ...], axes: tuple[int, ...], modes, truncate: float
) -> None:
    """``fit_sigma_map``'s largest sigma must give radii every blur can build."""
    radius = radius_of(max_sigma, truncate)
    for axis, mode in zip(axes, modes):
        allowed = mode.map_allowed(shape[axis])
        limit = MAX_GLOBAL_RADIUS if allowed is None else min(allowed, MAX_GLOBAL_RADIUS)
        if not radius <= limit:
            raise ArgumentError(
                f"max_sigma: {max_sigma:g} needs radius {radius:.0f} on axis {axis}, above "
                f"the {limit} that mode {mode.name!r} supports there; lower max_sigma or "
                "truncate"
            )


def check_image_pair(sharp: object, blurred: object) -> tuple[np.ndarray, np.ndarray]:
    """Two real, non-empty arrays of one shape (``fit_sigma_map``'s images), as new
    float64 arrays (float16 sums would overflow; the inputs are never aliased)."""
    arrays = []
    for name, value in (("sharp", sharp), ("blurred", blurred)):
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise ArgumentError(f"{name}: dtype {arr.dtype} is not supported; use a real array")
        if arr.ndim == 0 or arr.size == 0:
            raise ArgumentError(f"{name}: needs at least one axis and one pixel, shape {arr.shape}")
        arrays.append(arr)
    if arrays[0].shape != arrays[1].shape:
        raise ArgumentError(
            f"blurred: shape {arrays[1].shape} differs from sharp's shape {arrays[0].shape}"
        )
    return arrays[0].astype(np.float64), arrays[1].astype(np.float64)


def valid_pair(sharp, blurred, mask, policy, modes) -> np.ndarray:
    """True where a pixel is valid in both images (a new array, the images' shape)."""
    valid = normalize_mask(mask, sharp.shape)
    valid = np.ones(sharp.shape, bool) if valid is None else np.broadcast_to(valid, sharp.shape)
    for name, image in (("sharp", sharp), ("blurred", blurred)):
        if policy == "raise":
            try:
                check_finite_values(image, valid, modes, 0.0)
            except ArgumentError as error:
                raise ArgumentError(str(error).replace("image:", f"{name}:", 1)) from None
        elif image.dtype.kind == "f":
            valid = valid & np.isfinite(image)
    if not valid.any():
        raise ArgumentError("mask: no pixel is valid in both images; nothing to fit")
    return np.array(valid)
