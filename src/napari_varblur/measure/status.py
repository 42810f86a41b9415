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
#: A kept bead this many times the kept beads' median flux (amplitude x product of
#: sigmas x (2 pi)^(d/2)), and this many robust deviations (1.4826 x the MAD of the
#: log-flux) above it, that the pair fit splits as above (whatever its drop), is a
#: doublet: two unresolved equal beads hold twice the flux, and below two sigmas apart
#: (1.5 along z in 3-D) the drop alone misses them.  1.5 sits between a single (1) and
#: a blend (2; its flux error is under 10%).  Of 1,840 single beads (2-D and 3-D, batches
#: varying 0-30% in flux) none reached 4 deviations (photon noise alone: up to 3.7, at
#: 1.35 times the median; a 30% spread: up to 2.3 times, at 3 deviations); the 3-D blends
#: the drop missed stood 6-10 deviations above at one flux, 4-6 at a 10% spread (at
#: 20-30% flux cannot tell them: they stay).
BLEND_RATIO, BLEND_DEVIATIONS = 1.5, 4.0
#: The median and MAD take at least this many kept beads.
BLEND_FEWEST = 5

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


def bright(flux, kept, apart, share) -> np.ndarray:
    """A kept bead far brighter than the kept ones (:data:`BLEND_RATIO` times their
    median flux and :data:`BLEND_DEVIATIONS` robust deviations of the log-flux above
    it) that two Gaussians split into comparable parts: two beads in one spot."""
    flux = np.asarray(flux, dtype=np.float64)
    usable = kept & np.isfinite(flux) & (flux > 0)
    if np.count_nonzero(usable) < BLEND_FEWEST:
        return np.zeros(len(flux), dtype=bool)
    log = np.log(np.where(usable, flux, 1.0))
    typical = np.median(log[usable])
    spread = 1.4826 * np.median(np.abs(log[usable] - typical))
    excess = log - typical
    far = (excess >= np.log(BLEND_RATIO)) & (excess >= BLEND_DEVIATIONS * spread)
    return usable & far & (apart >= DOUBLET_APART) & (share >= DOUBLET_SHARE)


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
