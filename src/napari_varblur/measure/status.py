"""Why a candidate is left out: each rule is one test on the fits, applied in order of
precedence (a bead cut by the border is ``"edge"`` whatever else is wrong with it)."""

from __future__ import annotations

import numpy as np

#: The statuses, in order of precedence (``"outlier"`` is the field model's).
STATUSES = ("ok", "edge", "saturated", "doublet", "faint", "poor_fit", "outlier")
#: A drop in chi-square this large from one Gaussian to two (three or four more
#: parameters: about one single bead in 20,000 by chance) ...
DOUBLET_DROP = 25.0
#: ... with the two at least this many sigmas apart and the fainter holding at least
#: this share of the flux, is a doublet.  (A single bead's best split puts a few
#: percent of the flux on a noise bump; none of 125 single beads passed both.)
DOUBLET_APART, DOUBLET_SHARE = 1.0, 0.2

#: An amplitude below this many standard errors is noise, not a bead (the default
#: detection threshold: noise peaks of the smoothed image that pass it reach 3-4).
FAINT = 5.0


def edge(centres, sigmas, shape, truncate) -> np.ndarray:
    """The bead's window (radius ``ceil(truncate * sigma)`` around its pixel) leaves the
    image."""
    radius = np.ceil(truncate * sigmas)
    pixel = np.round(centres)
    out = (pixel - radius < 0) | (pixel + radius > np.asarray(shape) - 1)
    return np.any(out | ~np.isfinite(centres), axis=1)


def saturated(values, inside, offsets, sigmas, level) -> np.ndarray:
    """A pixel at or above ``level`` within two sigmas (at least 1.5 px) of the
    candidate's pixel."""
    if level is None:
        return np.zeros(len(values), dtype=bool)
    reach = np.maximum(2.0 * sigmas, 1.5)[:, None, :]
    core = np.sum((offsets[None] / reach) ** 2, axis=-1) <= 1.0
    return np.any(core & inside & (values >= level), axis=1)


def crowded(centres, sigmas, counted, min_separation) -> np.ndarray:
    """Another counted candidate within ``min_separation`` sigmas (this bead's, per
    axis)."""
    near = np.zeros(len(centres), dtype=bool)
    others = centres[counted]
    if min_separation <= 0 or len(others) < 2:
        return near
    for i, (centre, sigma) in enumerate(zip(centres, sigmas)):
        distance = np.sqrt(np.sum(((others - centre) / sigma) ** 2, axis=1))
        near[i] = np.count_nonzero(distance < min_separation) > counted[i]
    return near


def doublet(drop, apart, share, least: float = DOUBLET_DROP) -> np.ndarray:
    """Two Gaussians fit better by ``least`` and are apart and both bright enough."""
    return (drop > least) & (apart >= DOUBLET_APART) & (share >= DOUBLET_SHARE)


def poor(fitted, sigmas, offsets_in_window, half, smallest) -> np.ndarray:
    """Not converged, not finite, a sigma at its bound, a centre at the window's edge, or
    a reduced chi-square far above the others' (six robust deviations)."""
    bad = ~fitted.converged | ~np.all(np.isfinite(fitted.params), axis=1)
    bad |= np.any(sigmas <= smallest * 1.02, axis=1) | np.any(sigmas >= np.max(half) * 0.98, axis=1)
    bad |= np.any(np.abs(offsets_in_window) >= half * 0.98, axis=1)
    reduced = fitted.reduced
    typical = np.median(reduced[~bad]) if np.any(~bad) else 1.0
    spread = 1.4826 * np.median(np.abs(reduced[~bad] - typical)) if np.any(~bad) else 0.0
    return bad | (reduced > max(1.5, typical + 6.0 * max(spread, 0.05)))


def assign(count: int, tests: dict[str, np.ndarray]) -> np.ndarray:
    """Each candidate's status: the first test (in :data:`STATUSES` order) it fails."""
    status = np.full(count, "ok", dtype=object)
    for name in reversed(STATUSES[1:]):
        if name in tests:
            status[np.asarray(tests[name], dtype=bool)] = name
    return status
