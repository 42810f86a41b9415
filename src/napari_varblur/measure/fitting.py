"""Each candidate bead fitted in its window: a Gaussian plus a background by weighted
least squares (Poisson variance with the camera's gain, estimated from the beads), and
the doublet test (two Gaussians sharing the sigmas)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import gauss
from .gauss import Layout

#: Smallest and largest sigma a fit may reach (pixels; the largest is the window's).
SMALLEST_SIGMA = 0.25


@dataclass(frozen=True)
class Windows:
    """Windows of ``2 * half + 1`` pixels per axis around ``origins`` (candidate pixels):
    ``offsets`` ``(N, ndim)`` from the origin, ``values`` and ``inside`` ``(B, N)``."""

    origins: np.ndarray
    offsets: np.ndarray
    values: np.ndarray
    inside: np.ndarray


def windows(image: np.ndarray, origins: np.ndarray, half: np.ndarray) -> Windows:
    axes = [np.arange(-h, h + 1) for h in half]
    offsets = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(half))
    where = origins[:, None, :] + offsets[None]
    shape = np.asarray(image.shape)
    inside = np.all((where >= 0) & (where < shape), axis=-1)
    clipped = np.clip(where, 0, shape - 1)
    values = image[tuple(np.moveaxis(clipped, -1, 0))].astype(np.float64)
    return Windows(origins, offsets.astype(np.float64), values, inside)


def start(win: Windows, sigma: np.ndarray, layout: Layout) -> np.ndarray:
    """Starting parameters: the 20th percentile of the window for the background, the
    peak above it for the amplitude, the candidate pixel and ``sigma``."""
    values = np.where(win.inside, win.values, np.nan)
    base = np.nanpercentile(values, 20, axis=1)
    centre = np.all(np.abs(win.offsets) <= 1, axis=1)
    peak = np.nanmax(values[:, centre], axis=1) - base
    params = np.zeros((len(values), layout.size))
    params[:, 0], params[:, 1] = base, np.maximum(peak, 1e-6)
    sigmas = np.log(np.maximum(sigma, SMALLEST_SIGMA))
    params[:, layout.log_sigmas] = np.mean(sigmas) if layout.isotropic else sigmas
    return params


def bounds(count: int, half: np.ndarray, layout: Layout, floor: float = -np.inf):
    """Centres within the window, sigmas within ``[SMALLEST_SIGMA, window]``, amplitudes
    at least ``floor``."""
    low = np.full((count, layout.size), -np.inf)
    high = np.full((count, layout.size), np.inf)
    low[:, layout.amplitudes] = floor
    reach = np.tile(half.astype(np.float64), layout.components)
    low[:, layout.centres], high[:, layout.centres] = -reach, reach
    low[:, layout.log_sigmas] = np.log(SMALLEST_SIGMA)
    high[:, layout.log_sigmas] = np.log(max(float(np.max(half)), 1.0))
    return low, high


def variance(model: np.ndarray, params: np.ndarray, noise_var: float, gain: float):
    """Each pixel's variance: the background's, plus ``gain`` times the bead's signal
    (Poisson counts times the camera's gain)."""
    return noise_var + gain * np.maximum(model - params[:, :1], 0.0)


def fit_single(win: Windows, sigma, half, layout, noise_var, gain=None) -> gauss.Fitted:
    """One Gaussian per window; weighted by the background's variance, then (``gain``
    known) refitted with each pixel's Poisson variance at the first fit's model."""
    box = bounds(len(win.values), half, layout)
    weight = win.inside / noise_var
    fitted = gauss.fit(win.values, weight, win.offsets, start(win, sigma, layout), layout, box)
    if gain is None or gain <= 0:
        return fitted
    model, _ = gauss.evaluate(fitted.params, win.offsets, layout)
    weight = win.inside / variance(model, fitted.params, noise_var, gain)
    return gauss.fit(win.values, weight, win.offsets, fitted.params, layout, box, steps=30)


def estimate_gain(win: Windows, fitted: gauss.Fitted, layout, noise_var: float) -> float:
    """The camera's gain (variance per unit of signal): for each converged fit (weighted
    by the background's variance alone), its squared residuals, corrected for what the
    fit absorbed (divided by one minus the leverage: near the peak a fit follows the
    noise, which hid 30-40% of the gain), minus the background's variance, regressed
    on its signal; the median over the beads (a doublet or a saturated bead is one
    vote)."""
    ok = np.flatnonzero(fitted.converged)
    if ok.size == 0:
        return 0.0
    model, jac = gauss.evaluate(fitted.params[ok], win.offsets, layout)
    inside = win.inside[ok]
    weighted = jac * inside[..., None]
    normal = np.matmul(weighted.transpose(0, 2, 1), jac)
    leverage = np.einsum("bnp,bpq,bnq->bn", weighted, np.linalg.pinv(normal), jac)
    residual2 = (win.values[ok] - model) ** 2 / np.clip(1.0 - leverage, 0.05, 1.0)
    signal = np.maximum(model - fitted.params[ok, :1], 0.0) * inside
    excess = (residual2 - noise_var) * inside
    total = np.sum(signal * signal, axis=1)
    votes = np.sum(excess * signal, axis=1)[total > 0] / total[total > 0]
    return max(float(np.median(votes)), 0.0) if votes.size else 0.0


def doublet_start(win: Windows, single: gauss.Fitted, layout: Layout, typical, spread=1.0):
    """Two Gaussians split along the window's longest direction, measured in the
    beads' ``typical`` sigma (a single bead is round there, a doublet long), as far
    apart as the elongation says times ``spread``, each with half the amplitude and
    the narrower width as the sigmas."""
    one, two = layout, Layout(layout.ndim, 2, layout.isotropic)
    sigma = np.broadcast_to(np.exp(single.params[:, one.log_sigmas]), (len(win.values), one.ndim))
    centre = single.params[:, one.centres]
    u = (win.offsets[None] - centre[:, None]) / typical
    mass = np.maximum(win.values - single.params[:, :1], 0.0) * win.inside
    mass *= np.sum(((win.offsets[None] - centre[:, None]) / sigma[:, None]) ** 2, axis=-1) <= 9.0
    mass /= np.maximum(mass.sum(axis=1, keepdims=True), 1e-12)
    mean = np.einsum("bn,bnd->bd", mass, u)
    moment = np.einsum("bn,bnd,bne->bde", mass, u - mean[:, None], u - mean[:, None])
    values, vectors = np.linalg.eigh(moment)
    long = np.clip(values[:, -1] - values[:, 0], 0.3, 9.0)
    step = spread * np.sqrt(long)[:, None] * vectors[:, :, -1] * typical  # half the distance
    width = np.sqrt(np.clip(values[:, :1], 0.1, None)) * typical  # the short axis' width
    params = np.zeros((len(win.values), two.size))
    params[:, 0] = single.params[:, 0]
    params[:, two.amplitudes] = 0.5 * single.params[:, 1:2]
    params[:, two.centres] = np.concatenate([centre - step, centre + step], axis=1)
    logs = np.log(np.minimum(width, sigma))
    params[:, two.log_sigmas] = logs.mean(axis=1, keepdims=True) if one.isotropic else logs
    return params


def doublet_evidence(win, single, half, layout, noise_var, gain, typical) -> tuple[np.ndarray, ...]:
    """The doublet test: the drop in chi-square from one Gaussian to two (divided by the
    two's reduced chi-square when above one), the two's separation in sigmas and the
    fainter one's share of the flux.  Two starts (the elongation's distance, and 1.6
    times it); the better fit counts."""
    two = Layout(layout.ndim, 2, layout.isotropic)
    model, _ = gauss.evaluate(single.params, win.offsets, layout)
    weight = win.inside / variance(model, single.params, noise_var, max(gain, 0.0))
    box = bounds(len(win.values), half, two, floor=0.0)
    pair = None
    for spread in (1.0, 1.6):
        start = np.clip(doublet_start(win, single, layout, typical, spread), *box)
        trial = gauss.fit(win.values, weight, win.offsets, start, two, box, steps=40)
        if pair is None:
            pair = trial
        else:
            better = trial.chi2 < pair.chi2
            for name in ("params", "covariance", "chi2", "dof", "converged"):
                getattr(pair, name)[better] = getattr(trial, name)[better]
    chi1 = np.sum(weight * (win.values - model) ** 2, axis=1)
    drop = (chi1 - pair.chi2) / np.maximum(pair.reduced, 1.0)
    sigma = np.broadcast_to(np.exp(pair.params[:, two.log_sigmas]), (len(model), two.ndim))
    centres = pair.params[:, two.centres].reshape(-1, 2, two.ndim)
    separation = np.linalg.norm((centres[:, 0] - centres[:, 1]) / sigma, axis=1)
    amplitudes = pair.params[:, two.amplitudes]
    share = amplitudes.min(axis=1) / np.maximum(amplitudes.sum(axis=1), 1e-12)
    return np.where(pair.converged, drop, 0.0), separation, share
