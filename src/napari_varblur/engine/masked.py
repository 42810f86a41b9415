"""Masked and NaN-aware blur: normalised convolution over the valid taps.

``out = sum(w * valid * image) / sum(w * valid)`` over each pixel's window, with the
same per-pixel weights and radii as the plain blur.  Both sums are plain blurs, so every
backend, sigma maps, levels and chunks get it from the engine they already have:

- the *numerator* blurs the image with invalid pixels set to 0;
- the *denominator* blurs the validity (1 or 0) itself.

Edge modes extend both the same way, so an extended tap is valid when its source pixel
is.  A constant-mode tap reads ``cval`` and is valid (the denominator reads 1 there),
unless ``nan_policy="omit"`` and ``cval`` is not finite (both read 0: the tap is left
out).  Crop's renormalisation cancels in the ratio, so crop + mask is the normalised
convolution with the in-bounds mask.  A pixel whose window holds no valid tap gets 0/0:
NaN.  The arithmetic below is written once for NumPy and JAX (``xp``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ..core.spec import BlurSpec


def valid_pixels(image: Any, mask: Any, omit: bool, xp=np) -> Any:
    """Where the image counts: ``mask`` (None: everywhere), and finite where ``omit``.
    ``None`` when every pixel counts."""
    valid = mask
    if omit and xp.issubdtype(image.dtype, xp.floating):
        finite = xp.isfinite(image)
        valid = finite if valid is None else valid & finite
    return valid


def fill_counts(cval: float, omit: bool) -> bool:
    """Whether a constant-mode tap outside the image (it reads ``cval``) is valid."""
    return not omit or math.isfinite(cval)


def numerator(image: Any, valid: Any, dtype, xp=np) -> Any:
    """The image in ``dtype`` with its invalid pixels set to 0 (a NaN there is dropped,
    not multiplied by 0)."""
    return xp.where(valid, image, 0).astype(dtype, copy=False)


def ratio(num: Any, den: Any, xp=np) -> Any:
    """The normalised value; 0/0 (no valid tap) is NaN.  In JAX the division is
    guarded, so a pixel without a valid tap has a zero gradient, not 0 * inf = NaN
    (which would poison every gradient of a loss that skips it)."""
    if xp is np:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.divide(num, den, out=num)
    some = den > 0
    return xp.where(some, num / xp.where(some, den, 1), xp.nan)


def blur(
    spec: BlurSpec,
    run: Callable[[BlurSpec], np.ndarray],
    share_batch: bool,
    fused: Callable[[BlurSpec, np.ndarray, bool], np.ndarray | None] | None = None,
) -> np.ndarray:
    """The normalised convolution of a masked NumPy spec.

    ``run`` blurs a plain spec (same map, plan and backend).  ``share_batch``: ``run``
    may take the denominator at a smaller shape, once for batch axes along which the
    validity and the sigma map do not vary (a static mask over a time series).
    ``fused(plain, valid, counts)``: a backend's one-sweep version, or ``None`` where it
    has none for this spec.
    """
    omit = spec.nan_policy == "omit"
    plain = replace(spec, mask=None, nan_policy="propagate")
    counts = fill_counts(spec.cval, omit)
    if counts and spec.mask is None and _all_finite(spec.image):
        return run(plain)  # "omit" on finite data: the plain blur (exactly)
    valid = valid_pixels(spec.image, spec.mask, omit)
    if counts and (valid is None or bool(valid.all())):
        return run(plain)  # every tap is valid
    if valid is None:  # only the constant-mode fill is left out
        valid = np.ones((1,) * spec.image.ndim, bool)
    if fused is not None:
        out = fused(plain, valid, counts)
        if out is not None:
            return out
    dtype = np.dtype(spec.precision)
    num = run(replace(plain, image=numerator(spec.image, valid, dtype),
                      cval=spec.cval if counts else 0.0))  # fmt: skip
    weights = np.broadcast_to(valid, _denominator_shape(spec, valid, share_batch))
    den = run(replace(plain, image=weights.astype(dtype), cval=float(counts)))
    return ratio(num, den)


def _all_finite(image: np.ndarray) -> bool:
    """Whether every value is finite: a finite sum says so without a boolean image
    (a sum that overflows falls back to the exact check)."""
    if image.dtype.kind != "f":
        return True
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(image.sum())) or bool(np.isfinite(image).all())


def _denominator_shape(spec: BlurSpec, valid: Any, share_batch: bool) -> tuple[int, ...]:
    """The image's shape, with length 1 on batch axes where the validity and the map
    are constant (when ``share_batch``)."""
    maps = [m for m in spec.sigma_map or () if m is not None]
    shape = []
    for a, n in enumerate(spec.shape):
        constant = (
            share_batch
            and a not in spec.axes
            and valid.shape[a] == 1
            and all(np.ndim(m) == 0 or m.shape[a] == 1 for m in maps)
        )
        shape.append(1 if constant else n)
    return tuple(shape)
