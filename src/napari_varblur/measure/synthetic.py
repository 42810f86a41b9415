"""Synthetic bead images with a known sigma field, for tests, benchmarks and napari's
sample: sub-pixel beads drawn with the blur's own sampled kernel, Poisson noise, a
camera gain and offset, and planted doublets, saturated beads and beads cut by the
border."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Kinds of planted beads (``BeadTruth.kind``).
KINDS = ("isolated", "doublet", "saturated", "edge")


@dataclass(frozen=True)
class BeadTruth:
    """What a synthetic bead image holds: one row per bead (``centres`` and ``sigmas``
    in pixels, one column per axis), its ``kind`` and the field everywhere
    (``sigma_map``: the image's shape plus one sigma per axis)."""

    centres: np.ndarray
    sigmas: np.ndarray
    photons: np.ndarray
    kind: np.ndarray
    sigma_map: np.ndarray
    saturation: float


def sigma_field(shape: tuple[int, ...], points: np.ndarray) -> np.ndarray:
    """The field's sigmas (one per axis) at ``points`` (``(n, ndim)`` pixel
    coordinates): in 2-D 1.2 -> 3 px, widening off-centre and more along x than y on
    the left; in 3-D lateral 1.2 -> 2 px off-axis, axial 2 -> 4 px off-axis and with
    depth (field curvature and spherical aberration, as seen in microscopes)."""
    points = np.asarray(points, dtype=np.float64)
    u = 2.0 * points / (np.asarray(shape, dtype=np.float64) - 1.0) - 1.0  # [-1, 1]
    lateral = u[:, -2:] - np.array([0.2, -0.1])
    q = np.sum(lateral**2, axis=1) / np.sum(np.array([1.2, 1.1]) ** 2)  # [0, 1]
    if len(shape) == 2:
        x = 1.2 + 1.8 * q
        y = 1.2 + 1.8 * q * (0.7 + 0.15 * (u[:, 1] + 1.0))
        return np.stack([y, x], axis=1)
    depth = (u[:, 0] + 1.0) / 2.0
    lateral_sigma = 1.2 + 0.8 * q
    axial = 2.0 + 2.0 * (0.5 * q + 0.5 * depth)
    x = 1.2 + 0.8 * q * (0.9 + 0.05 * (u[:, 2] + 1.0))
    return np.stack([axial, lateral_sigma, x], axis=1)


def field_map(shape: tuple[int, ...]) -> np.ndarray:
    """:func:`sigma_field` at every pixel: the image's shape plus one sigma per axis."""
    grid = np.indices(shape, dtype=np.float64).reshape(len(shape), -1).T
    return sigma_field(shape, grid).reshape(*shape, len(shape)).astype(np.float32)


def bead_image(
    shape: tuple[int, ...] = (512, 512),
    beads: int = 60,
    *,
    photons: float = 1000.0,
    background: float = 10.0,
    doublets: int = 0,
    saturated: int = 0,
    edge: int = 0,
    gain: float = 1.0,
    offset: float = 100.0,
    saturation: float = 4095.0,
    spread: float = 8.0,
    flux_spread: float = 0.0,
    seed: int = 0,
) -> tuple[np.ndarray, BeadTruth]:
    """A ``uint16`` bead image and its truth.

    ``beads`` isolated beads (at least ``spread`` sigmas apart and clear of the
    border), ``doublets`` pairs 1.5-3 sigmas apart, ``saturated`` beads peaking at
    three times ``saturation`` and ``edge`` beads centred within two sigmas of a
    border (cut by it); ``photons`` per bead on ``background`` photons per pixel,
    Poisson noise, then ``gain`` (ADU per photon) and ``offset``, clipped at
    ``saturation``.  Sigmas follow :func:`sigma_field`.  ``flux_spread`` > 0 gives each
    bead (but the saturated ones) its own photons: log-normal, mean ``photons``, that
    relative standard deviation (a real batch of beads varies by 10-30%).
    """
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in shape)
    placed = _place(rng, shape, beads + doublets + saturated, spread)
    centres, kinds = [placed[:beads]], ["isolated"] * beads
    pairs = placed[beads : beads + doublets]
    centres += [pairs, _partners(rng, shape, pairs)]
    kinds += ["doublet"] * (2 * doublets)
    centres.append(placed[beads + doublets :])
    kinds += ["saturated"] * saturated
    centres.append(_at_edges(rng, shape, edge))
    kinds += ["edge"] * edge
    centres = np.concatenate([c.reshape(-1, len(shape)) for c in centres])
    sigmas = sigma_field(shape, centres)
    kind = np.array(kinds)
    flux = np.full(len(centres), float(photons))
    if flux_spread > 0:  # drawn only then: the images without it stay as they were
        flux *= _brightness(rng, len(centres), flux_spread)
    peak = (2 * np.pi) ** (len(shape) / 2) * np.prod(sigmas, axis=1)
    flux[kind == "saturated"] = 3.0 * (saturation - offset) / gain * peak[kind == "saturated"]
    expected = np.full(shape, float(background))
    for centre, sigma, n in zip(centres, sigmas, flux):
        _draw(expected, centre, sigma, n)
    counts = rng.poisson(expected).astype(np.float64)
    image = np.clip(np.round(gain * counts + offset), 0, saturation).astype(np.uint16)
    truth = BeadTruth(centres, sigmas, flux, kind, field_map(shape), float(saturation))
    return image, truth


def _brightness(rng, n, spread) -> np.ndarray:
    """``n`` log-normal factors of mean 1 and relative standard deviation ``spread``."""
    scale = np.sqrt(np.log1p(spread**2))
    return np.exp(scale * rng.normal(size=n) - 0.5 * scale**2)


def _interior(rng, shape, n, margin) -> np.ndarray:
    low = margin
    high = np.asarray(shape, dtype=np.float64) - 1.0 - margin
    return rng.uniform(low, high, size=(n, len(shape)))


def _place(rng, shape, n, spread) -> np.ndarray:
    """``n`` centres clear of the border (radius + 2 px) and ``spread`` sigmas (the
    field's largest, per axis) from each other, by dart throwing."""
    largest = sigma_field(shape, _corners(shape)).max(axis=0)
    margin = np.ceil(3.0 * largest) + 2.0
    kept: list[np.ndarray] = []
    for _ in range(200 * max(n, 1)):
        if len(kept) == n:
            break
        point = _interior(rng, shape, 1, margin)[0]
        if all(np.sum(((point - k) / largest) ** 2) >= spread**2 for k in kept):
            kept.append(point)
    if len(kept) < n:
        raise ValueError(f"beads: only {len(kept)} of {n} fit in {shape} {spread} sigmas apart")
    return np.array(kept).reshape(n, len(shape))


def _corners(shape) -> np.ndarray:
    grid = np.indices((2,) * len(shape)).reshape(len(shape), -1).T
    return grid * (np.asarray(shape) - 1)


def _partners(rng, shape, pairs: np.ndarray) -> np.ndarray:
    """A second bead 1.5-3 sigmas (each axis in its own sigma) from each of ``pairs``."""
    direction = rng.normal(size=pairs.shape)
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    distance = rng.uniform(1.5, 3.0, size=(len(pairs), 1))
    return pairs + direction * distance * sigma_field(shape, pairs)


def _at_edges(rng, shape, n) -> np.ndarray:
    """``n`` centres within two sigmas of a border (inside by up to 2, outside by up
    to 0.5 sigmas), away from the other borders."""
    largest = sigma_field(shape, _corners(shape)).max(axis=0)
    points = _interior(rng, shape, n, np.ceil(3.0 * largest) + 2.0)
    for point in points:
        axis = rng.integers(len(shape))
        sigma = sigma_field(shape, point[None])[0, axis]
        depth = rng.uniform(-0.5, 2.0) * sigma
        point[axis] = depth if rng.random() < 0.5 else shape[axis] - 1 - depth
    return points


def _draw(image: np.ndarray, centre, sigma, photons) -> None:
    """Add a bead: the blur's sampled kernel centred at ``centre`` (sub-pixel), scaled
    to ``photons`` in all (including what falls outside the image)."""
    profiles, slices = [], []
    for c, s, n in zip(centre, sigma, image.shape):
        radius = int(np.ceil(5.0 * s))
        k = np.arange(int(np.floor(c)) - radius, int(np.floor(c)) + radius + 2)
        g = np.exp(-0.5 * ((k - c) / s) ** 2)
        g /= g.sum()
        inside = (k >= 0) & (k < n)
        profiles.append(g[inside])
        slices.append(slice(k[inside][0], k[inside][-1] + 1) if inside.any() else slice(0, 0))
    if any(p.size == 0 for p in profiles):
        return
    patch = photons * profiles[0]
    for p in profiles[1:]:
        patch = np.multiply.outer(patch, p)
    image[tuple(slices)] += patch
