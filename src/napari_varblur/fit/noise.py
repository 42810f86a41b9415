"""Noise in the *sharp* image, and what it does to the fit.

The model blurs the sharp image, noise included.  That noise, blurred, adds
``gain² noise_x² S(sigma)`` to the expected squared residual, where ``S = sum_k w_k²`` is
the kernel's energy; ``S`` falls as sigma grows, so a plain least-squares fit leans
towards larger sigmas (errors in variables).  The objective subtracts that term.  The
same noise inflates the sensitivity ``J = d blur / d sigma`` by ``gain² noise_x² D(sigma)``
on average (``D = sum_k (d w_k / d sigma)²``): the standard error takes it out.

Kernels are the discrete, normalised 1-D Gaussians of the contract (radius
``ceil(truncate sigma)``, capped), one per blurred axis; an isotropic map uses the same
sigma on every axis.  Borders (crop renormalisation) are ignored: a small effect on a
correction.
"""

from __future__ import annotations

import math

import numpy as np

from ..core.rules import radius_of


def noise_level(
    image: np.ndarray, valid: np.ndarray, axes: tuple[int, ...], robust: bool = True
) -> float:
    """Standard deviation of white noise in ``image`` along ``axes``.

    The second difference ``x[i-1] - 2 x[i] + x[i+1]`` along each axis removes smooth
    signal; white noise of variance ``v`` gives it variance ``6 v``.  ``robust``: the
    median absolute value over valid pixels (``/ 0.6745`` for a normal) ignores edges,
    but under noise that varies over the image (photon counts) it is the typical level,
    not the mean; else the root mean square (right for any such noise, plus what the
    signal's curvature adds).  The smallest estimate over the axes is kept.
    """
    found = []
    for a in axes:
        if image.shape[a] < 3:
            continue
        d, ok = second_differences(image, valid, a)
        d = d[ok]
        if d.size and robust:
            found.append(float(np.median(np.abs(d - np.median(d)))) / 0.6745 / math.sqrt(6))
        elif d.size:
            found.append(math.sqrt(float(np.mean(d**2)) / 6))
    return min(found) if found else 0.0


def _offsets(max_sigma: float, truncate: float) -> np.ndarray:
    r = int(radius_of(max_sigma, truncate))
    return np.arange(-r, r + 1, dtype=np.float64)


def kernel_sums(sigma, max_sigma: float, truncate: float, xp=np):
    """Per pixel, for the 1-D kernel at ``sigma``: ``(S, C, D)`` = the sums of ``w²``,
    ``w w'`` and ``w'²`` (``w' = dw/dsigma``).  ``xp`` is numpy or jax.numpy."""
    k = xp.asarray(_offsets(max_sigma, truncate), dtype=sigma.dtype)
    s = sigma[..., None]
    r = xp.ceil(truncate * s)
    inside = xp.abs(k) <= r
    safe = xp.maximum(s, 1e-3)
    e = xp.where(inside, xp.exp(-(k**2) / (2 * safe**2)), 0.0)
    w = e / xp.sum(e, axis=-1, keepdims=True)
    k2 = k**2 / safe**3
    dw = w * (k2 - xp.sum(w * k2, axis=-1, keepdims=True))
    return xp.sum(w * w, -1), xp.sum(w * dw, -1), xp.sum(dw * dw, -1)


def energy(sigma, dims: int, per_axis: bool, max_sigma: float, truncate: float, xp=np):
    """``S`` of the whole kernel: the product over the blurred axes (the trailing axis
    of ``sigma`` holds one sigma per axis when ``per_axis``)."""
    if per_axis:
        s = kernel_sums(sigma, max_sigma, truncate, xp)[0]
        return xp.prod(s, axis=-1)
    return kernel_sums(sigma, max_sigma, truncate, xp)[0] ** dims


def derivative_energy(sigma, dims: int, per_axis: bool, max_sigma: float, truncate: float):
    """``D`` of the whole kernel, per map (stacked first when ``per_axis``): for the
    product kernel with one sigma on ``d`` axes, ``d D1 S1^(d-1) + d (d-1) C1² S1^(d-2)``;
    for one axis's own sigma, ``D_a`` times the other axes' ``S``."""
    s, c, d = kernel_sums(np.asarray(sigma, np.float64), max_sigma, truncate)
    if per_axis:
        total = np.prod(s, axis=-1, keepdims=True)
        return np.moveaxis(d * total / s, -1, 0)
    out = dims * d * s ** (dims - 1)
    if dims > 1:
        out = out + dims * (dims - 1) * c**2 * s ** (dims - 2)
    return out[None]


#: Intensity bins for the noise model, and the blur that gives each pixel its intensity.
BINS = 16
LOCAL_SIGMA = 2.0
#: Images up to this many pixels take the host blurs (:func:`host_blur`) by the
#: reference backend's float64 NumPy passes, larger ones by the Numba kernels.
SMALL = 1 << 18


def host_blur(image: np.ndarray, sigma: float, options: dict) -> np.ndarray:
    """The fit's global blurs on the host (the scan, the noise model, the standard
    errors), in float64.

    Compiling the Numba kernels of the float64 global blur takes 8-15 s on 2 cores,
    most of a first 3-D fit in a fresh process (empty Numba cache); on an image up to
    :data:`SMALL` pixels NumPy's passes cost milliseconds instead (a 24x40x48 volume:
    2-6 ms a blur; 512x512: 12-16 ms, against 7-9 ms by Numba once compiled).  Both
    sum the same taps: they agree to float64 rounding.
    """
    from ..adapters.numpy_api import gaussian_blur

    backend = "reference" if image.size <= SMALL else "numba"
    return gaussian_blur(image, sigma, backend=backend, precision="float64", **options)


def variance_map(image: np.ndarray, valid: np.ndarray, axes: tuple[int, ...], options: dict):
    """Each pixel's noise variance in ``image`` as a line in its local intensity,
    ``max(c0 + c1 * local, 0)``: photon noise grows with the signal, camera noise does
    not.  ``local`` is the image blurred with sigma 2 (masked pixels left out); in
    each of 16 bins of it the variance is the robust level of the mixed differences
    (:func:`mixed_differences`), and the line is fitted to the bins by least squares."""
    local = host_blur(image, LOCAL_SIGMA, options)
    local = np.where(valid, local, 0.0)
    found = mixed_differences(image, valid, axes)
    if found is None:
        return np.zeros(image.shape)
    d, ok, used, factor = found
    levels, spread = _inner(local, used)[ok], np.abs(d[ok])
    if levels.size == 0:
        return np.zeros(image.shape)
    edges = np.quantile(levels, np.linspace(0, 1, BINS + 1))
    which = np.clip(np.searchsorted(edges, levels, side="right") - 1, 0, BINS - 1)
    centres, variances = [], []
    for b in range(BINS):
        inside = which == b
        if inside.sum() >= 8:
            centres.append(float(np.mean(levels[inside])))
            variances.append((float(np.median(spread[inside])) / 0.6745) ** 2 / factor)
    if len(centres) < 2:
        return np.full(image.shape, variances[0] if variances else 0.0)
    c1, c0 = np.polyfit(centres, variances, 1)
    return np.where(valid, np.maximum(c0 + c1 * local, 0.0), 0.0)


def mixed_differences(image: np.ndarray, valid: np.ndarray, axes: tuple[int, ...]):
    """``(d, ok, used, factor)``: the second difference taken along every axis of
    ``axes`` at least 3 long (``used``), in turn, at the inner pixels; ``ok`` where
    all 3^k pixels are valid; white noise of variance ``v`` gives ``d`` variance
    ``factor v`` (``6^k``).  A product of second differences cancels far more texture
    than one along a single axis (any signal linear along one of the axes, so edges
    and ramps): a textured photograph's noise within ~10% where one axis's difference
    over-reads it by 20% (twice in its darkest parts).  None when no axis is long
    enough."""
    used = tuple(a for a in axes if image.shape[a] >= 3)
    if not used:
        return None
    d, ok = image, valid
    for a in used:
        d = _shifted(d, a, 0) - 2 * _shifted(d, a, 1) + _shifted(d, a, 2)
        ok = _shifted(ok, a, 0) & _shifted(ok, a, 1) & _shifted(ok, a, 2)
    return d, ok, used, 6.0 ** len(used)


def _inner(array: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """``array`` without its first and last pixel along each of ``axes``."""
    for a in axes:
        array = _shifted(array, a, 1)
    return array


def second_differences(image: np.ndarray, valid: np.ndarray, axis: int):
    """``x[i-1] - 2 x[i] + x[i+1]`` along ``axis`` at the inner pixels, and where all
    three pixels are valid."""
    ok = _shifted(valid, axis, 0) & _shifted(valid, axis, 1) & _shifted(valid, axis, 2)
    d = _shifted(image, axis, 0) - 2 * _shifted(image, axis, 1) + _shifted(image, axis, 2)
    return d, ok


def _shifted(array: np.ndarray, axis: int, i: int) -> np.ndarray:
    """``array`` along ``axis`` from ``i`` to ``n - 2 + i``: one of a pixel's three
    neighbours in a second difference."""
    n = array.shape[axis]
    return np.take(array, np.arange(i, n - 2 + i), axis=axis)
