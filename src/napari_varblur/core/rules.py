"""The contract's scalar rules, written once for the host (NumPy, float64).

The radius of a pixel is ``ceil(truncate * sigma)`` evaluated in float64 from the float64
value of sigma; its weights are ``exp(-d^2 h)`` with ``h = 1 / (2 sigma^2)``.  The Numba
kernels evaluate the same two formulas per pixel (``_radius_exponent``), and the
JAX-native API reproduces the float64 radius from a traced float32 sigma
(:func:`napari_varblur.backends.jax_xla.float64_ceil_product`).
"""

from __future__ import annotations

import numpy as np

#: Largest kernel radius we accept for a global sigma; beyond it the kernel alone would
#: take gigabytes (the full float64 kernel is built once, then folded onto the axis).
MAX_GLOBAL_RADIUS = 50_000_000

#: Cap on ``1/(2 sigma^2)``: finite even in float32, and exp(-d^2 * cap) is 0 for d >= 1,
#: so a tiny sigma acts as a delta instead of producing 0 * inf = NaN at d = 0.
MAX_EXPONENT = 1e30


def radius_of(sigma: np.ndarray | float, truncate: float) -> np.ndarray | float:
    """Contract radius ``ceil(truncate * sigma)``, always evaluated in float64.

    Overflow gives ``inf`` (callers compare it with their limits before using it).
    """
    with np.errstate(over="ignore"):
        product = np.multiply(sigma, np.float64(truncate), dtype=np.float64)
    return np.ceil(product, out=product) if isinstance(product, np.ndarray) else np.ceil(product)


def exponent_of(sigma, dtype: type = np.float64, xp=np):
    """``1 / (2 sigma^2)``, the factor in ``exp(-d^2 * h)``; 0 where sigma is 0, at most
    :data:`MAX_EXPONENT`.  NumPy (in ``dtype``: float32 for a float32 backend; radii never
    come from this) or ``jax.numpy`` (in sigma's dtype; differentiable: the double
    ``where`` keeps the gradient finite where sigma is 0).
    """
    if xp is not np:
        return _exponent(sigma, xp)
    original = np.asarray(sigma)
    # A huge float64 sigma overflows float32 to inf (h = 0); a tiny one gives h = inf.
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        s = original.astype(dtype, copy=False)
        h = np.asarray(_exponent(s, np), dtype=s.dtype)
    if s.dtype.itemsize < original.dtype.itemsize:
        # A sigma too small for the narrower dtype became 0: it is still a delta.
        h[(s == 0) & (original > 0)] = MAX_EXPONENT
    return h


def _exponent(s, xp):
    safe = xp.where(s > 0, s, 1)
    return xp.where(s > 0, xp.minimum(0.5 / (safe * safe), MAX_EXPONENT), 0)


#: The contract's accuracy against the float64 reference, relative to
#: ``max(1, max|image|)`` (``docs/contract.md``, "Tolerances"): the CLI's demo, the tests
#: and the benchmarks all check against these.
CONTRACT_TOLERANCE = {"float32": 1e-5, "float64": 1e-12}

#: The smallest valid share of a pixel's kernel that a masked blur fills from
#: (``docs/contract.md``, "Masks and NaN"): below it the pixel is NaN, as if no tap were
#: valid.  Such a share rests on weights near the working precision's underflow
#: (``2^-126`` in float32, ``2^-1022`` in float64), which backends drop, keep as
#: subnormals or sum in float64; the margin (2^26 and 2^222) keeps what they differ by
#: within the tolerances above for any pixel they fill.
SHARE_FLOOR = {"float32": 2.0**-100, "float64": 2.0**-800}


def share_floor(dtype) -> float:
    """:data:`SHARE_FLOOR` of a working precision (NumPy or JAX dtype).  Another float
    dtype (the JAX-native API keeps float16, outside the contract's tolerances) gets
    its smallest normal number: a share below that is no value."""
    name = np.dtype(dtype).name
    return SHARE_FLOOR[name] if name in SHARE_FLOOR else float(np.finfo(dtype).tiny)
