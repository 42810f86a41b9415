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
NaN.  The arithmetic is in :mod:`napari_varblur.core.masking`; this orchestration
serves the router (NumPy, any backend) and the JAX-native API alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.masking import fill_counts, numerator, ratio, valid_pixels
from ..core.rules import share_floor
from ..core.spec import BlurSpec


def normalized_convolution(
    image: Any,
    mask: Any,
    cval: float,
    omit: bool,
    run: Callable[[Any, float], Any],
    *,
    dtype,
    xp=np,
    fused: Callable[[Any, bool, bool], Any] | None = None,
    all_finite: Callable[[Any], bool | None] | None = None,
    denominator_shape: Callable[[Any], tuple[int, ...]] | None = None,
) -> Any:
    """``sum(w * valid * image) / sum(w * valid)``: the masked blur, for NumPy and JAX.

    ``run(values, cval)`` blurs an array like ``image`` with the plain blur (same map,
    plan and backend), reading ``cval`` where constant mode reads outside.  With NumPy
    (concrete data) a blur whose every tap is valid is just ``run(image, cval)``.
    ``fused(valid, counts, omit)``: a backend's one-sweep version (``None`` where it has
    none for this call; :data:`~napari_varblur.backends.base.FusedMasked`); with NumPy
    data and ``omit``, tried first with the mask alone, so that no boolean image of
    the finite values is made.  ``all_finite(image)``: a backend's check that every
    value is finite (``None``: it does not take this image).
    ``denominator_shape(valid)``: a smaller shape the validity may be blurred at
    (length 1 on batch axes where it and the map are constant).
    """
    counts = fill_counts(cval, omit)
    concrete = xp is np
    if concrete and counts and mask is None and _all_finite(image, all_finite):
        return run(image, cval)  # "omit" on finite data: the plain blur (exactly)
    if concrete and omit and fused is not None:
        out = _omit_in_sweep(image, mask, counts, fused, dtype)
        if out is not None:
            return out
    valid = valid_pixels(image, mask, omit, xp)
    if concrete and counts and (valid is None or bool(valid.all())):
        return run(image, cval)  # every tap is valid
    if valid is None:  # only the constant-mode fill is left out
        valid = xp.ones((1,) * image.ndim, bool)
    if fused is not None:
        out = fused(valid, counts, False)
        if out is not None:
            return out
    num = run(numerator(image, valid, dtype, xp), cval if counts else 0.0)
    shape = image.shape if denominator_shape is None else denominator_shape(valid)
    den = run(xp.broadcast_to(valid, shape).astype(dtype), float(counts))
    return ratio(num, den, xp)


#: Every this many values, a first look for a non-finite one (a prime: no image width
#: lines the samples up in a few columns).
_SAMPLE_STEP = 1021


def _all_finite(image: np.ndarray, check: Callable[[Any], bool | None] | None = None) -> bool:
    """Whether every value is finite, without a boolean image: a sample first (it
    settles data with NaN scattered all over at little cost), then the backend's
    ``check``, else NumPy's least and largest value (min and max keep a NaN; unlike a
    sum, they cannot overflow)."""
    if image.dtype.kind != "f" or image.size == 0:
        return True
    if image.flags.c_contiguous and not np.isfinite(image.reshape(-1)[::_SAMPLE_STEP]).all():
        return False
    found = None if check is None else check(image)
    if found is not None:
        return found
    with np.errstate(invalid="ignore"):
        return bool(np.isfinite(image.min()) and np.isfinite(image.max()))


def _omit_in_sweep(image: np.ndarray, mask: Any, counts: bool, fused: Callable, dtype
                   ) -> Any:  # fmt: skip
    """The backend's sweep leaving out the non-finite values itself, with no boolean
    image of them here, where an invalid tap is known to be there: a mask with a False
    in it, or (no mask) non-finite data or fill.  ``None``: no such sweep, a mask that
    is all True (the caller's check of every tap then decides), or data whose
    finiteness the working ``dtype`` would not keep (a float64 value beyond float32's
    range is finite: the sweep would see it as inf)."""
    if image.dtype.kind != "f" or not np.can_cast(image.dtype, dtype, "safe"):
        return None
    if mask is None:
        return fused(np.ones((1,) * image.ndim, bool), counts, True)
    return None if bool(mask.all()) else fused(mask, counts, True)


def denominator_shape(spec: BlurSpec, valid: Any) -> tuple[int, ...]:
    """The image's shape, with length 1 on batch axes where the validity and the map
    are constant (a static mask over a time series is blurred once)."""
    maps = [m for m in spec.sigma_map or () if m is not None]
    shape = []
    for a, n in enumerate(spec.shape):
        constant = (
            a not in spec.axes
            and valid.shape[a] == 1
            and all(np.ndim(m) == 0 or m.shape[a] == 1 for m in maps)
        )
        shape.append(1 if constant else n)
    return tuple(shape)


def transposed(
    y: Any,
    mask: Any,
    cval: float,
    omit: bool,
    run: Callable[[Any, float], Any],
    run_t: Callable[[Any], Any],
    *,
    dtype,
    xp=np,
) -> Any:
    """The transpose of :func:`normalized_convolution`'s linear part (validity fixed):
    ``valid * run_t(y / den)``, ``den = run(valid, fill)`` the blurred validity; where
    ``den`` is below the contract's floor (a pixel the masked gather leaves NaN) the
    pixel adds nothing.  ``run_t`` is the plain scatter (the transpose of ``run``'s
    linear part).  ``omit``: non-finite values of ``y`` add nothing, and a non-finite
    ``cval``'s fill taps do not count."""
    if omit and xp.issubdtype(y.dtype, xp.floating):
        y = xp.where(xp.isfinite(y), y, 0)
    if mask is None:
        return run_t(y)
    valid = xp.broadcast_to(mask, y.shape)
    den = run(valid.astype(dtype), float(fill_counts(cval, omit)))
    some = den >= share_floor(den.dtype)
    z = xp.where(some, y / xp.where(some, den, 1), 0).astype(dtype)
    return xp.where(valid, run_t(z), 0)
