"""An independent float64 oracle: every pixel's window summed tap by tap.

Written from the contract, not from the package: modes map indices with ``numpy.pad``
(scipy's ``reflect`` is NumPy's ``symmetric``, ``mirror`` is ``reflect``), each pixel's
radius is ``ceil(truncate * sigma)`` in float64, and the result is the normalised
convolution ``sum(w * valid * x) / sum(w * valid)`` (with every tap valid it is the
plain blur).  Slow: for images of a few hundred pixels.
"""

from __future__ import annotations

import math

import numpy as np

_NUMPY_PAD = {"reflect": "symmetric", "mirror": "reflect", "nearest": "edge", "wrap": "wrap"}


def _sources(n: int, reach: int, mode: str) -> np.ndarray:
    """Source index of positions -reach .. n - 1 + reach; n (a sentinel) outside."""
    if mode in ("crop", "constant"):
        i = np.arange(-reach, n + reach)
        return np.where((i >= 0) & (i < n), i, n)
    return np.pad(np.arange(n), reach, mode=_NUMPY_PAD[mode])


def _sigmas(sigma, shape: tuple[int, ...], axes: tuple[int, ...]) -> np.ndarray:
    """One sigma per pixel and blurred axis: shape ``shape + (len(axes),)``."""
    s = np.asarray(sigma, dtype=np.float64)
    k = len(axes)
    if s.ndim == 0 or (s.ndim == 1 and len(shape) != 1):
        return np.broadcast_to(np.resize(s, k), shape + (k,))
    if s.ndim == len(shape) + 1:
        return np.broadcast_to(s, shape + (k,))
    return np.broadcast_to(s[..., None], shape + (k,))


def normalised_blur(image, sigma, *, mask=None, omit=False, mode="crop", cval=0.0,
                    truncate=3.0, axes=None, floor=0.0):  # fmt: skip
    """The float64 normalised convolution (see the module docstring); one mode for all
    blurred axes.  ``omit`` leaves out non-finite pixels (and a non-finite ``cval``).
    A pixel whose valid share of its kernel (the valid weights over all of the kernel's
    taps: the in-bounds ones in crop mode) is below ``floor`` is NaN."""
    x = np.asarray(image, dtype=np.float64)
    shape = x.shape
    axes = tuple(range(x.ndim)) if axes is None else tuple(a % x.ndim for a in axes)
    valid = np.ones(shape, bool) if mask is None else np.broadcast_to(mask, shape).copy()
    if omit:
        valid &= np.isfinite(x)
    sig = _sigmas(sigma, shape, axes)
    reach = max(1, int(np.ceil(truncate * sig.max())))
    # A sentinel slot at index n of every axis: cval (constant) or nothing (crop).
    fill_valid = mode == "constant" and not (omit and not math.isfinite(cval))
    ext = np.pad(np.where(valid, x, 0.0), [(0, 1)] * x.ndim, constant_values=cval)
    ext_valid = np.pad(valid, [(0, 1)] * x.ndim, constant_values=fill_valid)
    ext_kernel = np.pad(np.ones(shape, bool), [(0, 1)] * x.ndim, constant_values=mode != "crop")
    sources = {a: _sources(shape[a], reach, mode) for a in axes}
    out = np.empty(shape)
    for p in np.ndindex(shape):
        index, weights = [], []
        for a in range(x.ndim):
            if a not in axes:
                index.append(np.array([p[a]]))
                weights.append(np.ones(1))
                continue
            s = sig[p + (axes.index(a),)]
            r = math.ceil(truncate * s) if s > 0 else 0
            d = np.arange(-r, r + 1)
            index.append(sources[a][p[a] + reach + d])
            weights.append(np.exp(-0.5 * (d / s) ** 2) if s > 0 else np.ones(1))
        w = weights[0]
        for v in weights[1:]:
            w = np.multiply.outer(w, v)
        block = np.ix_(*index)
        counted = ext_valid[block]
        with np.errstate(invalid="ignore"):
            num = np.sum(np.where(counted, w * ext[block], 0.0))
            den = np.sum(np.where(counted, w, 0.0))
            full = np.sum(np.where(ext_kernel[block], w, 0.0))
            out[p] = num / den if den > 0 and den >= floor * full else np.nan
    return out
