"""The arithmetic of the normalised convolution, written once for NumPy and JAX (``xp``).

Masked and NaN-aware blur: normalised convolution over the valid taps.

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
from typing import Any

import numpy as np


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
