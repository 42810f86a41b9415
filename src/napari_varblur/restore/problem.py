"""The deblur's problem: the observed image, the blur ``A`` and its transpose as
functions of an estimate, and what the data term counts.

``A`` is the blur to undo (``model``): the gather (with constant mode's fill, a known
background) or the scatter; ``A^T`` the other one (its linear part).  Both run through
the engine's router on the route the planner chose once for the spec, so every
iteration runs the same kernels with no re-validation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ..core.spec import BlurSpec
from ..engine import router
from ..engine.planner import route

OTHER = {"gather": "scatter", "scatter": "gather"}


@dataclass(frozen=True)
class Problem:
    """``observed``: the image (0 where a pixel does not count, never negative);
    ``norm``: ``A^T w`` (``w`` 1 where a pixel counts); ``forward`` and ``adjoint``:
    ``A`` and ``A^T`` of an array of the image's shape (the working dtype)."""

    observed: np.ndarray
    norm: np.ndarray
    forward: Callable[[np.ndarray], np.ndarray]
    adjoint: Callable[[np.ndarray], np.ndarray]
    dtype: np.dtype


def problem(spec: BlurSpec) -> Problem:
    """The problem of a validated NumPy spec (its image is the observed one; its mask
    and ``nan_policy`` say which pixels count)."""
    dtype = np.dtype(spec.precision)
    y = np.asarray(spec.image).astype(dtype)  # a copy: the input is never written
    counted = _counted(spec, y)
    plain = replace(spec, image=y, mask=None, nan_policy="propagate")
    chosen = route(plain, paired=True)
    ahead = replace(plain, model=spec.model)
    # The transpose of the linear part: constant mode's fill enters A only.
    back = replace(plain, model=OTHER[spec.model], cval=0.0)

    def forward(x: np.ndarray) -> np.ndarray:
        return router.blur(replace(ahead, image=x), chosen=chosen)

    def adjoint(r: np.ndarray) -> np.ndarray:
        return router.blur(replace(back, image=r), chosen=chosen)

    with np.errstate(invalid="ignore"):
        np.maximum(y, 0, out=y, where=~np.isnan(y))  # Poisson counts are never negative
    if counted is not None:
        y[~counted] = 0
    weight = np.ones(y.shape, dtype) if counted is None else counted.astype(dtype)
    return Problem(y, adjoint(weight), forward, adjoint, dtype)


def _counted(spec: BlurSpec, y: np.ndarray) -> np.ndarray | None:
    """Where the data term counts (``None``: everywhere): the mask's valid pixels, and
    with ``nan_policy="omit"`` the finite ones."""
    counted = None if spec.mask is None else np.broadcast_to(spec.mask, y.shape)
    if spec.nan_policy == "omit":
        finite = np.isfinite(y)
        counted = finite if counted is None else counted & finite
    return counted
