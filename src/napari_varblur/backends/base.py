"""What a backend is: a typed record of the operations the engine may call.

A backend declares what it offers (a fused masked sweep, whole-image level passes) in
its :class:`Backend` record; the router reads those fields and never probes a module
with ``getattr``.  Backends do arithmetic only: every argument they receive was
validated by :class:`~napari_varblur.core.spec.BlurSpec`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..core.spec import BlurSpec

#: ``correlate(x, axis, source, fill, weights, scale)``: one 1-D pass,
#: ``out[i] = scale[i] * sum_t weights[t] * x[source[i + t]]`` along ``axis`` (``fill``
#: where ``source`` is -1), for ``i < len(scale)``: the level walk's building block.
Correlate = Callable[[np.ndarray, int, np.ndarray, float, np.ndarray, np.ndarray], np.ndarray]
#: ``masked(spec, valid, counts, omit)``: both sums of a normalised convolution and their
#: ratio in one sweep, or ``None`` where the backend has no kernel for this spec; with
#: ``omit`` the sweep also leaves out the image's non-finite values (``valid`` is the
#: mask alone), or returns ``None`` where it cannot.
FusedMasked = Callable[[BlurSpec, np.ndarray, bool, bool], "np.ndarray | None"]


@dataclass(frozen=True)
class Bands:
    """Level bands: a diagonal level plan run level by level, each level's passes only
    over the pixels that mix it (and what they read).

    ``plan(spec, levels, compact=None)`` builds the bands of a spec and its shared
    :class:`~napari_varblur.core.levels.AxisLevels` (an object with ``taps`` and ``nruns``,
    the work the planner weighs), or ``None`` where they do not fit (``compact``: the
    map without the axes it is constant along, where the planner has it);
    ``blur(spec, bands)`` runs them: a new array of ``spec.precision``.  The bands
    depend on the map only, so the two blurs of a masked spec share them.
    """

    plan: Callable[..., object | None]
    blur: Callable[[BlurSpec, object], np.ndarray]


@dataclass(frozen=True)
class Backend:
    """One backend's operations and capabilities.

    Attributes
    ----------
    name
        The name users pass as ``backend=``.
    global_blur
        ``global_blur(spec, plan=None)``: separable passes of a global-sigma spec (the
        :class:`~napari_varblur.core.taps.AxisPass` list ``plan``, else the spec's own);
        a new array of ``spec.precision``.
    gather
        ``gather(spec, pad_floor, memo=None)``: the exact per-pixel blur of a sigma-map
        spec.  ``pad_floor`` raises each axis's padding (the chunks of one dask array
        share static shapes); ``memo``: a dict the caller keeps across calls on one map
        (a deblur's route), where a backend may keep its per-map set-up (radii and
        exponents) instead of recomputing it every call.
    scatter
        ``scatter(spec, pad_floor, memo=None)``: the exact transpose of ``gather`` (its
        linear part), or ``None`` where it has none for this spec; ``None``: no scatter
        at all (the engine then runs the reference's).
    correlate
        The 1-D pass the level walk runs (:data:`Correlate`), or ``None``.  The router
        walks levels only on backends that also have a cost table
        (:data:`napari_varblur.engine.cost.COSTS`): the reference oracle always gathers.
    masked
        A fused masked sweep (:data:`FusedMasked`), or ``None``: the engine runs the
        normalised convolution as two plain blurs.
    all_finite
        ``all_finite(image)``: whether every value of a NumPy image is finite, faster
        than NumPy's scans (``None`` for an image it does not take), or ``None``: the
        engine asks NumPy (``nan_policy="omit"`` on finite data is the plain blur).
    bands
        :class:`Bands`, or ``None``: the planner may then weigh them for a diagonal
        level plan (one level list for every axis).
    whole_image_levels
        The level walk gives this backend whole-image passes (a backend that compiles
        per shape would otherwise compile one program per tile).
    describe, device_name, compiles, has_gpu
        Version and device text, the device's short name, kernels compiled so far in
        this process (a caller compares counts around a call), and whether it runs on
        a GPU.
    cold
        ``cold(kind, dtype)``: whether the first blur along a route of ``kind``
        (``"global"``, ``"gather"``, ``"levels"``) in ``dtype`` would compile its
        kernels now, neither compiled in this process nor cached on disk.
    """

    name: str
    global_blur: Callable[..., np.ndarray]
    gather: Callable[..., np.ndarray]
    describe: Callable[[], str]
    device_name: Callable[[], str]
    scatter: Callable[..., np.ndarray | None] | None = None
    correlate: Correlate | None = None
    masked: FusedMasked | None = None
    all_finite: Callable[[np.ndarray], bool | None] | None = None
    bands: Bands | None = None
    whole_image_levels: bool = False
    compiles: Callable[[], int] = lambda: 0
    has_gpu: Callable[[], bool] = lambda: False
    cold: Callable[[str, np.dtype], bool] = lambda kind, dtype: False
