"""One bead image (a plane of a stack): background and noise, a first look at the
brightest beads for their size and the camera's gain, then every candidate found at
that size, fitted, and tested for the border, saturation and doublets."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import numpy as np

from ..core.checks import ArgumentError
from . import detect, fitting, status
from .gauss import Layout
from .settings import Settings, check_extent

#: Beads fitted per batch (a batch's arrays stay small; progress is reported between).
BATCH = 64
#: Candidates the first look fits at most, and its window's half-width (pixels).
SCOUTS, SCOUT_HALF = 60, 10


@dataclass(frozen=True)
class Scout:
    """What the first look found: the beads' typical sigma and its upper range (per
    axis), the background's variance and the camera's gain."""

    sigma: np.ndarray
    upper: np.ndarray
    noise_var: float
    gain: float


@dataclass
class Plane:
    """Every candidate of one plane: one entry per candidate in each array."""

    centres: np.ndarray  # (n, ndim) pixels
    centre_se: np.ndarray
    sigmas: np.ndarray  # (n, ndim) pixels (isotropic: the same in each column)
    sigma_se: np.ndarray
    amplitude: np.ndarray
    amplitude_se: np.ndarray
    background: np.ndarray
    background_se: np.ndarray
    chi2: np.ndarray  # reduced
    status: np.ndarray
    evidence: np.ndarray  # (n, 3): the doublet test's drop, separation, share
    noise: float
    gain: float


def scout(residual, raw, setting: Settings, noise_var: float) -> Scout:
    """Fit the brightest candidates seen at sigma 1 (then 2, 4 when none stands out)."""
    layout = Layout(residual.ndim)
    half = np.minimum(SCOUT_HALF, (np.asarray(residual.shape) - 1) // 2)
    for width in (1.0, 2.0, 4.0):
        found = detect.find(residual, np.full(residual.ndim, width), setting.threshold)
        if len(found.points):
            break
    else:
        raise ArgumentError(
            f"image: no beads found: the brightest spot of the smoothed image stands "
            f"{found.highest:.1f} noise standard deviations above the background "
            f"(threshold {setting.threshold:g}); lower threshold= if the beads are faint"
        )
    win = fitting.windows(raw, found.points[:SCOUTS], half)
    fitted = fitting.fit_single(win, np.full(residual.ndim, 1.5), half, layout, noise_var)
    sigmas = np.exp(fitted.params[:, layout.log_sigmas])
    clipped = status.saturated(win.values, win.inside, win.offsets, sigmas, setting.saturation)
    good = fitted.converged & ~clipped & np.all(sigmas < 0.9 * half, axis=1)
    if not good.any():
        good = fitted.converged
    sigma = np.median(sigmas[good], axis=0) if good.any() else np.full(residual.ndim, 1.5)
    upper = np.percentile(sigmas[good], 95, axis=0) if good.any() else sigma
    gain = fitting.estimate_gain(_rows(win, good), fitted.subset(good), layout, noise_var)
    return Scout(np.maximum(sigma, 0.7), np.maximum(upper, sigma), noise_var, gain)


def _rows(win: fitting.Windows, keep: np.ndarray) -> fitting.Windows:
    return fitting.Windows(win.origins[keep], win.offsets, win.values[keep], win.inside[keep])


def measure(raw: np.ndarray, setting: Settings) -> Generator[tuple[int, int], None, Plane]:
    """Find and fit every bead of ``raw`` (float32, spatial axes only); yields
    ``(done, total)`` between batches and returns the :class:`Plane`."""
    check_extent(raw)
    base = detect.background(raw)
    residual = raw - base
    noise_var = max(detect.clipped_var(residual), 1e-12)
    seen = scout(residual, raw, setting, noise_var)
    found = detect.find(residual, seen.sigma, setting.threshold)
    half = np.ceil(setting.truncate * seen.upper * 1.2).astype(int) + 1
    half = np.minimum(half, (np.asarray(raw.shape) - 1) // 2)
    layout = Layout(raw.ndim, isotropic=not setting.per_axis)
    parts = []
    for start in range(0, len(found.points), BATCH):
        points = found.points[start : start + BATCH]
        parts.append(_batch(raw, points, seen, half, layout, setting))
        yield min(start + BATCH, len(found.points)), len(found.points)
    if not parts:
        raise ArgumentError(
            f"image: no beads found at their size (sigma {np.round(seen.sigma, 2).tolist()} "
            f"px): the brightest spot stands {found.highest:.1f} noise standard deviations "
            f"above the background (threshold {setting.threshold:g})"
        )
    plane = _join(parts, seen)
    _crowding(plane, setting.min_separation)
    _blended(plane)
    return plane


def _batch(raw, points, seen: Scout, half, layout: Layout, setting: Settings) -> dict:
    win = fitting.windows(raw, points, half)
    fitted = fitting.fit_single(win, seen.sigma, half, layout, seen.noise_var, seen.gain)
    errors = fitted.errors
    sigmas = np.broadcast_to(np.exp(fitted.params[:, layout.log_sigmas]), points.shape)
    sigma_se = sigmas * np.broadcast_to(errors[:, layout.log_sigmas], points.shape)
    shifts = fitted.params[:, layout.centres]
    centres = points + shifts
    known = np.where(np.isfinite(sigmas), sigmas, seen.sigma)
    typical = np.broadcast_to(seen.sigma, points.shape)
    tests = {
        "edge": status.edge(centres, known, raw.shape, setting.truncate),
        "saturated": status.saturated(
            win.values, win.inside, win.offsets, typical, setting.saturation
        ),
        "faint": ~(fitted.params[:, 1] >= status.FAINT * errors[:, 1]),
        "poor_fit": status.poor(fitted, sigmas, shifts, half, fitting.SMALLEST_SIGMA),
    }
    tried = ~(tests["edge"] | tests["saturated"])
    evidence = np.zeros((len(points), 3))
    if tried.any():
        evidence[tried] = np.stack(fitting.doublet_evidence(
            _rows(win, tried), fitted.subset(tried), half, layout, seen.noise_var, seen.gain,
            seen.sigma),
            axis=1)  # fmt: skip
    tests["doublet"] = status.doublet(*evidence.T)
    return {
        "centres": centres, "centre_se": errors[:, layout.centres],
        "sigmas": np.array(sigmas), "sigma_se": np.array(sigma_se),
        "amplitude": fitted.params[:, 1], "amplitude_se": errors[:, 1],
        "background": fitted.params[:, 0], "background_se": errors[:, 0],
        "chi2": fitted.reduced, "status": status.assign(len(points), tests),
        "evidence": evidence,
    }  # fmt: skip


def _join(parts: list[dict], seen: Scout) -> Plane:
    joined = {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
    return Plane(**joined, noise=float(np.sqrt(seen.noise_var)), gain=seen.gain)


def _crowding(plane: Plane, min_separation: float) -> None:
    """A candidate closer than ``min_separation`` sigmas to another real one (not
    faint) is a doublet, unless it is already out for the border or saturation."""
    counted = plane.status != "faint"
    sigmas = np.where(np.isfinite(plane.sigmas), plane.sigmas, 1.0)
    near = status.crowded(plane.centres, sigmas, counted, min_separation)
    near &= np.isin(plane.status, ("ok", "faint", "poor_fit"))
    plane.status[near] = "doublet"


def _blended(plane: Plane) -> None:
    """A kept bead about twice as bright as the plane's others, that the pair fit
    splits, is a doublet (:func:`status.bright`); the plane's own beads set the typical
    flux (planes of a stack may differ in exposure)."""
    ndim = plane.sigmas.shape[1]
    flux = plane.amplitude * np.prod(plane.sigmas, axis=1) * (2.0 * np.pi) ** (ndim / 2)
    apart, share = plane.evidence[:, 1], plane.evidence[:, 2]
    plane.status[status.bright(flux, plane.status == "ok", apart, share)] = "doublet"
