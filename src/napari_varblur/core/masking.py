"""The arithmetic of the normalised convolution ``sum(w * valid * image) / sum(w * valid)``,
written once for NumPy and JAX (``xp``); how the two sums are run, and why this is the
contract's masked blur, is in :mod:`napari_varblur.engine.masked`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .rules import share_floor


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
    """The normalised value ``num / den``; NaN where ``den``, the blurred validity (the
    valid share of each pixel's kernel), is below the contract's floor (0: no valid
    tap; see :data:`~napari_varblur.core.rules.SHARE_FLOOR`).  In JAX the division is
    guarded, so such a pixel has a zero gradient, not 0 * inf = NaN (which would poison
    every gradient of a loss that skips it)."""
    floor = share_floor(den.dtype)
    if xp is np:
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.divide(num, den, out=num)
        out[np.broadcast_to(den < floor, out.shape)] = np.nan
        return out
    some = den >= floor
    return xp.where(some, num / xp.where(some, den, 1), xp.nan)
