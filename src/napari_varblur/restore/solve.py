"""One NumPy deblur: the problem, the start and the iterations."""

from __future__ import annotations

import numpy as np

from ..core.spec import BlurSpec
from . import iterations as it
from .problem import problem
from .settings import Settings


def deblur_spec(spec: BlurSpec, chosen: Settings) -> np.ndarray:
    """Deblur a validated NumPy spec with checked settings."""
    if spec.image.size == 0:
        return np.zeros(spec.shape, spec.precision)
    p, start, options = prepare(spec, chosen)
    x = it.run(p, start, chosen.iterations, callback=chosen.callback, **options)
    return np.asarray(x, spec.precision)


def deblur_steps(spec: BlurSpec, chosen: Settings):
    """Yield ``(k, estimate)`` after each iteration (a generator: napari's worker runs
    it and may stop asking: Cancel)."""
    if spec.image.size == 0:
        return
    p, start, options = prepare(spec, chosen)
    yield from it.steps(p, start, chosen.iterations, **options)


def prepare(spec: BlurSpec, chosen: Settings):
    """The problem, the flat start and the iterations' options."""
    p = problem(spec)
    tv = None
    if chosen.method == "rl_tv" and chosen.regularization > 0:
        tv = it.tv_term(spec.axes, chosen.pixel_spacing, chosen.regularization)
    # Flat at the data's mean over what counts (any flat start gives the same iterates).
    total = float(np.sum(p.observed, dtype=np.float64))
    count = float(np.sum(p.norm > 0))
    start = np.full(spec.shape, total / count if total > 0 and count else 1.0, p.dtype)
    return p, start, dict(tv=tv, accelerate=chosen.acceleration, stop=chosen.stop)
