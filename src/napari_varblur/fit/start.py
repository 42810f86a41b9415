"""Where the fit starts: a coarse search over the whole sigma range, node by node.

L-BFGS only goes downhill, and the blur's sensitivity to sigma vanishes at both ends of
the range (a blur under ~0.3 px is almost the identity in float32; the logistic flattens
near ``max_sigma``), so one global guess can leave it stuck where it started.  The scan
blurs the sharp image at geometrically spaced sigmas (the engine's global blur on the
host: :func:`~.noise.host_blur`), scores each by its squared residual (after its own
gain and offset) summed under each control node's B-spline, and starts each node at its
best sigma, refined by a parabola in log sigma.
"""

from __future__ import annotations

import numpy as np

from .model import Model, gain_offset, reduce_to_grid
from .noise import host_blur

#: Trial sigmas per scan, from LOWEST (or 2% of max_sigma) to 95% of max_sigma.
TRIALS = 16
LOWEST = 0.1


def trial_sigmas(max_sigma: float) -> np.ndarray:
    low = min(max(LOWEST, 0.02 * max_sigma), 0.5 * max_sigma)
    return np.geomspace(low, 0.95 * max_sigma, TRIALS)


def scan(model: Model, x, y, valid, bases, affine: bool):
    """``(nodes, best, misfit)``: each node's starting sigma, the best single sigma and
    its mean squared residual."""
    trials = trial_sigmas(model.max_sigma)
    options = model.options(valid)
    weight = valid / valid.sum()
    scores = []
    for s in trials:
        m = host_blur(x, s, options)
        m = np.where(valid, m, 0)  # a masked blur is NaN where no tap is valid
        gain, offset = gain_offset(m, y, weight, np) if affine else (1.0, 0.0)
        misfit = np.where(valid, (gain * m + offset - y) ** 2, 0)
        scores.append(reduce_to_grid(model, misfit, [b.T for b in bases]))
    scores = np.stack(scores)  # (trials, *nodes)
    totals = scores.reshape(len(trials), -1).sum(axis=1)
    best = int(np.argmin(totals))
    return _refine(np.log(trials), scores), trials[best], float(totals[best] / valid.sum())


def _refine(logs: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Each node's minimum over the trials, moved to the vertex of the parabola
    through it and its neighbours (in log sigma), kept between them."""
    i = np.clip(np.argmin(scores, axis=0), 1, len(logs) - 2)
    pick = lambda j: np.take_along_axis(scores, j[None], axis=0)[0]  # noqa: E731
    a, b, c = pick(i - 1), pick(i), pick(i + 1)
    h = logs[1] - logs[0]
    curve = a - 2 * b + c
    with np.errstate(divide="ignore", invalid="ignore"):
        shift = np.where(curve > 0, 0.5 * h * (a - c) / curve, 0.0)
    at = logs[i] + np.clip(shift, -h, h)
    edge = np.argmin(scores, axis=0)
    at = np.where(edge == 0, logs[0], np.where(edge == len(logs) - 1, logs[-1], at))
    return np.exp(at)
