"""Per-pixel Gaussian weights: the recurrence, the radius rule and the window range,
inlined into the gather kernels."""

from __future__ import annotations

import numpy as np
from numba import njit

from ...core.rules import MAX_EXPONENT
from .common import FAST

#: The Gaussian recurrence restarts from exact exponentials every RESTART offsets.
#: Between restarts w(d+1) = w(d) g(d) and g(d+1) = g(d) q2, with q = exp(-h) and
#: q2 = q^2 (the first block starts from q alone, so radii up to RESTART cost one exp
#: per pixel and axis): after i steps g carries at most ~2.5 i ulp of error and w
#: ~1.25 i^2 + 2 i ulp, so with 16 steps in float64 every weight is within ~350 ulp
#: (8e-14) of exp(-d^2 h), at any sigma.  Without restarts the rounding of q alone
#: grows as d^2 ulp: 1.5e-12 at sigma 3500 (the contract's float64 bound is 1e-12).
RESTART = 16


@njit(cache=True, nogil=True, fastmath=FAST, error_model="numpy")
def _gauss_table(table, pad, radius, h, lo, hi, width, den, w, g, q2, sums):  # pragma: no cover
    """Fill rows pad - R .. pad + R of ``table`` (R = the lanes' largest radius) with
    each lane's weights exp(-d^2 h), 0 beyond the lane's own radius, multiply ``den``
    by each lane's sum over its counted offsets lo..hi (of the stored weights, so the
    numerator and the normaliser agree), and return R.  Vectorised across lanes: one
    recurrence step per offset for all of them."""
    big = 0
    for v in range(width):
        big = max(big, radius[v])
        table[pad, v] = 1.0
        q = np.exp(-h[v])  # the only exp for radii up to RESTART
        q2[v] = q * q
        w[v] = q  # w(1) = q, and g(1) = q^3 takes it to w(2) = q^4
        g[v] = q * q2[v]
        sums[v] = 1.0
    for d in range(1, big + 1):
        if d > 1:
            if (d - 1) % RESTART == 0:
                for v in range(width):
                    w[v] = np.exp(-(d * d) * h[v])
                    g[v] = np.exp(-(2 * d + 1) * h[v])
            else:
                for v in range(width):
                    w[v] *= g[v]
                    g[v] *= q2[v]
        for v in range(width):
            _store(table, pad, d, v, w[v] if d <= radius[v] else 0.0, lo, hi, sums)
    for v in range(width):
        den[v] *= sums[v]
    return big


@njit(cache=True, nogil=True, inline="always")
def _store(table, pad, d, v, weight, lo, hi, sums):  # pragma: no cover - jitted
    """Lane ``v``'s ``weight`` at offsets -d and +d of ``table``, in its precision, and
    the stored value added to ``sums[v]`` at each offset lane ``v`` counts (``lo[v] ..
    hi[v]``): the numerator and the normaliser read the same weights."""
    table[pad + d, v] = weight
    kept = table[pad + d, v]
    table[pad - d, v] = kept
    sums[v] += (kept if d <= hi[v] else 0.0) + (kept if -d >= lo[v] else 0.0)


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _radius_exponent(sigma, truncate, limit):  # pragma: no cover - jitted
    """The contract's per-pixel radius ceil(truncate * sigma) in float64, capped at
    ``limit``, and h = 1/(2 sigma^2) (0 where sigma is 0)."""
    r = np.ceil(truncate * sigma)
    if r > limit:
        r = limit
    h = 0.0
    if sigma > 0:
        h = min(0.5 / (sigma * sigma), MAX_EXPONENT)
    return np.int64(r), h


@njit(cache=True, nogil=True, inline="always")
def _range(r, i, n, crop):  # pragma: no cover - jitted
    """The counted offsets lo..hi of a pixel at ``i`` with radius ``r``."""
    if crop:
        return max(-r, -i), min(r, n - 1 - i)
    return -r, r
