"""The Numba backend: parallel CPU kernels (``prange``), compiled once and cached on disk.

Split by job: :mod:`.passes` (global sigma, fused and masked sweeps), :mod:`.gathers`
(sigma maps, 1-3 axes specialised and the generic N-D kernel), :mod:`.bands` (sigma
levels computed only where the map uses them), :mod:`.tiles` (a map tile's
per-pixel weights, for the gather and the scatter), :mod:`.weights` (the
Gaussian recurrence and the radius rule in the kernels) and :mod:`.common` (flags,
arrays, thread safety).  Parallel kernels run under a lock when Numba's threading layer
is not threadsafe (``workqueue``), so napari's worker threads and dask's threaded
scheduler can call this backend concurrently.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ...core.rules import share_floor
from ...core.spec import BlurSpec
from ...core.taps import AxisPass, global_plan, global_radius, map_plan
from ..base import Backend, Bands
from . import (
    band_runs,
    bands,
    common,
    gathers,
    masked_passes,
    passes,
    scatters,
    tiles,
    weights,
)


def describe() -> str:
    return f"numba {numba.__version__}, {device_name()}"


def device_name() -> str:
    return f"cpu ({numba.get_num_threads()} threads)"


def compiles() -> int:
    """How many kernels this process compiled so far (not read from Numba's cache)."""
    modules = (band_runs, bands, common, gathers, masked_passes, passes, scatters, tiles, weights)
    kernels = [
        v
        for module in modules
        for v in vars(module).values()
        if isinstance(v, numba.core.dispatcher.Dispatcher)
    ]
    return sum(sum(k.stats.cache_misses.values()) for k in kernels)


#: The kernel whose compile marks a route kind's first call (its helpers compile with it).
_FIRST_KERNELS = {
    "global": passes._fused_kernel,
    "gather": gathers._varying3d,
    "levels": bands._run,
}


def cold(kind: str, dtype: np.dtype) -> bool:
    """Whether the first blur along a route of ``kind`` in ``dtype`` would compile: its
    main kernel is neither compiled in this process nor in Numba's disk cache for this
    machine.  The cache's index is read through Numba's internals; where they moved,
    the answer is False (the call compiles, as it always did)."""
    kernel = _FIRST_KERNELS.get(kind)
    if kernel is None:
        return False
    want = numba.from_dtype(np.dtype(dtype))
    if any(sig[0].dtype == want for sig in kernel.signatures):
        return False
    try:
        index = kernel._cache._cache_file._load_index()
        magic = kernel.targetctx.codegen().magic_tuple()
        return not any(key[0][0].dtype == want and key[1] == magic for key in index)
    except Exception:  # any change in Numba's private cache API
        return False


def global_blur(spec: BlurSpec, plan: list[AxisPass] | None = None) -> np.ndarray:
    """Separable passes (``plan``, else the spec's); the last two axes in one fused
    sweep when they both blur."""
    # Kernels write only into new arrays, so the input is read in place when it already
    # has the working dtype; an untouched image is copied (never the caller's array).
    x = spec.image.astype(spec.precision, copy=False)
    plan = global_plan(spec) if plan is None else plan
    if not plan:
        return x.copy()
    pair = passes.fusable(plan, x.ndim)
    for p in plan[:-2] if pair else plan:
        x = passes.correlate_pass(x, p)
    return passes.fused_last_two(x, *plan[-2:]) if pair else x


def gather(spec: BlurSpec, pad_floor: tuple[int, ...] | None = None, memo=None) -> np.ndarray:
    x = spec.image.astype(spec.precision, copy=False)  # (its set-up is per tile: no memo)
    return gathers.varying_blur(x, spec, map_plan(spec, pad_floor))


def masked(spec: BlurSpec, valid: np.ndarray, counts: bool, omit: bool) -> np.ndarray | None:
    """Both sums of the normalised convolution and their ratio in one sweep, or
    ``None`` where no kernel fits this spec.  ``valid`` has the image's ndim and
    broadcasts to it; ``counts``: whether constant-mode taps outside the image count;
    ``omit``: whether the sweep also leaves out non-finite values (a global sigma's
    does; a map's gather does not)."""
    if spec.sigma is not None:
        if not _shares_above_floor(spec):
            return None
        return masked_passes.masked_global(spec, valid, counts, omit)
    return None if omit else gathers.masked_map(spec, valid, counts)


def _shares_above_floor(spec: BlurSpec) -> bool:
    """Whether every tap of a global kernel holds at least the contract's smallest share
    (``share_floor``), so that the fused sweep, which has no floor, needs none.

    A tap's share is at least the product over axes of the weight at the radius,
    ``exp(-r^2 / (2 sigma^2))``, over the axis's weight sum (below
    ``1 + sqrt(2 pi) sigma``): checked in logarithms.  Tiny sigmas (or long truncates)
    fail it and run as two blurs whose ratio applies the floor.
    """
    depth = 0.0
    for i, s in enumerate(spec.sigma):
        r = global_radius(spec, i)
        if s == 0 or r == 0:
            continue
        if spec.modes[i].crop:
            r = min(r, spec.shape[spec.axes[i]] - 1)  # farther taps are never in bounds
        depth += r * (r / (2.0 * s * s)) + math.log1p(math.sqrt(2 * math.pi) * s)
    return depth <= -math.log(share_floor(spec.precision))


BACKEND = Backend(
    name="numba",
    global_blur=global_blur,
    gather=gather,
    scatter=scatters.scatter,
    correlate=passes.correlate,
    masked=masked,
    all_finite=masked_passes.all_finite,
    bands=Bands(plan=bands.plan, blur=bands.blur),
    describe=describe,
    device_name=device_name,
    compiles=compiles,
    cold=cold,
)
