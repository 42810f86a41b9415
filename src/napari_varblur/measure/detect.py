"""Finding candidate beads: a robust background and noise, the image smoothed at the
beads' size (the project's own blur), and its local maxima above a threshold in noise
standard deviations."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from ..adapters.numpy_api import gaussian_blur

#: MAD to standard deviation, for Gaussian noise.
MAD_SD = 1.4826


def robust_sd(values: np.ndarray) -> float:
    """The standard deviation from the median absolute deviation (beads are few)."""
    values = np.ravel(values)
    if values.size > 4_000_000:  # a strided sample is as good and much faster
        values = values[:: values.size // 2_000_000]
    return float(MAD_SD * np.median(np.abs(values - np.median(values))))


def clipped_var(values: np.ndarray) -> float:
    """The background's variance: the mean square within three robust deviations of the
    median, iterated, corrected for the clipping (unlike the MAD, unbiased for the
    few distinct values of low Poisson counts)."""
    values = np.ravel(values)
    if values.size > 4_000_000:
        values = values[:: values.size // 2_000_000]
    centre, sd = float(np.median(values)), robust_sd(values)
    for _ in range(5):
        if not sd > 0:
            break
        near = values[np.abs(values - centre) <= 3.0 * sd]
        centre, sd = float(near.mean()), float(near.std()) / 0.9866  # a normal's, clipped at 3
    return sd * sd


def background(image: np.ndarray) -> np.ndarray:
    """A smooth background: medians over blocks (1/8 of each axis, 8 to 64 px), linearly
    interpolated between the blocks' centres."""
    blocks = [int(np.clip(n // 8, 8, 64)) if n >= 16 else n for n in image.shape]
    padded = np.pad(image, [(0, -n % b) for n, b in zip(image.shape, blocks)], mode="reflect")
    split = [s for n, b in zip(padded.shape, blocks) for s in (n // b, b)]
    folded = padded.reshape(split).transpose(*range(0, 2 * image.ndim, 2),
                                             *range(1, 2 * image.ndim, 2))  # fmt: skip
    grid = np.median(folded.reshape(*folded.shape[: image.ndim], -1), axis=-1)
    return upsample(grid, image.shape, [(np.arange(g) + 0.5) * b - 0.5
                                        for g, b in zip(grid.shape, blocks)])  # fmt: skip


def upsample(grid: np.ndarray, shape: tuple[int, ...], nodes: list[np.ndarray]) -> np.ndarray:
    """``grid`` (values at the pixel positions ``nodes``, one increasing array per axis)
    linearly interpolated to every pixel of ``shape`` (held constant beyond the end
    nodes), one axis at a time."""
    out = np.asarray(grid, dtype=np.float32)
    for axis, (n, at) in enumerate(zip(shape, nodes)):
        at = np.asarray(at, dtype=np.float64)
        pixels = np.clip(np.arange(n, dtype=np.float64), at[0], at[-1])
        left = np.clip(np.searchsorted(at, pixels, side="right") - 1, 0, max(len(at) - 2, 0))
        right = np.minimum(left + 1, len(at) - 1)
        gap = np.where(right > left, at[right] - at[left], 1.0)
        t = ((pixels - at[left]) / gap).astype(np.float32)
        t = t.reshape((-1,) + (1,) * (out.ndim - axis - 1))
        low, high = np.take(out, left, axis=axis), np.take(out, right, axis=axis)
        out = low + (high - low) * t
    return out


@dataclass(frozen=True)
class Candidates:
    """Local maxima of the smoothed image: ``points`` ``(n, ndim)`` pixel indices,
    brightest first, and their heights in noise standard deviations."""

    points: np.ndarray
    significance: np.ndarray
    noise: float  # the smoothed image's noise standard deviation
    highest: float  # the smoothed image's maximum, in noise standard deviations


def find(residual: np.ndarray, sigma: np.ndarray, threshold: float) -> Candidates:
    """Local maxima of ``residual`` (image minus background) smoothed with ``sigma``
    (per axis) that stand ``threshold`` noise standard deviations above zero."""
    smoothed = gaussian_blur(residual, sigma=tuple(float(s) for s in sigma), mode="constant",
                             precision="float32")  # fmt: skip
    noise = robust_sd(smoothed)
    if not noise > 0:
        noise = float(np.std(smoothed)) or 1.0
    radius = np.maximum(np.round(sigma).astype(int), 1)
    peaks = smoothed == ndimage.maximum_filter(smoothed, size=tuple(2 * radius + 1),
                                               mode="nearest")  # fmt: skip
    peaks &= smoothed > threshold * noise
    points = np.argwhere(peaks)
    heights = smoothed[peaks] / noise
    order = np.argsort(-heights, kind="stable")
    points, heights = points[order], heights[order]
    keep = _apart(points)
    return Candidates(points[keep], heights[keep], noise, float(smoothed.max() / noise))


def _apart(points: np.ndarray) -> np.ndarray:
    """Drop a maximum that touches a brighter one (a flat top gives several)."""
    keep = np.ones(len(points), dtype=bool)
    for i in range(1, len(points)):
        near = np.all(np.abs(points[:i][keep[:i]] - points[i]) <= 1, axis=1)
        keep[i] = not near.any()
    return keep
