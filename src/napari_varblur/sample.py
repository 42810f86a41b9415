"""Built-in sample data: arrays generated in code, and one stored focus pair (no
download).  Data only: nothing here calls the blur; napari's sample layers are in
:mod:`napari_varblur.gui.samples`."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def fluorescence_sample(size: int = 256, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A synthetic fluorescence-like image and a smooth sigma map.

    The image holds nuclei-like blobs, thin filaments and shot noise on a dim
    background.  The sigma map models a tilted focal plane: sharp (sigma 0.5) along
    the diagonal in focus, growing smoothly to sigma 4 in the far corners, so a
    spatially varying blur reproduces depth-dependent defocus.

    Parameters
    ----------
    size
        Height and width in pixels.
    seed
        Seed of the random generator (the sample is deterministic).

    Returns
    -------
    image : numpy.ndarray
        float32, shape ``(size, size)``, values in photons (roughly 0-1000).
    sigma_map : numpy.ndarray
        float32, shape ``(size, size)``, sigma in pixels in ``[0.5, 4]``.
    """
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size].astype(np.float64)
    image = np.full((size, size), 20.0)
    for _ in range(max(4, size // 12)):
        cy, cx = rng.uniform(0, size, 2)
        radius = rng.uniform(3, 9) * size / 256
        brightness = rng.uniform(300, 800)
        image += brightness * np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / (2 * radius**2))
    for _ in range(6):
        angle = rng.uniform(0, np.pi)
        offset = rng.uniform(-size / 3, size / 3)
        distance = (x - size / 2) * np.sin(angle) - (y - size / 2) * np.cos(angle) - offset
        image += 250 * np.exp(-(distance**2) / 2.0)
    image = rng.poisson(image).astype(np.float32)

    defocus = np.abs(x + y - (size - 1)) / (size - 1)  # 0 on the diagonal, 1 in corners
    sigma_map = (0.5 + 3.5 * defocus**2).astype(np.float32)
    return image, sigma_map


def focus_scene(
    shape: tuple[int, ...] = (112, 136),
    sigma_range: tuple[float, float] = (0.7, 3.0),
    seed: int = 0,
    per_axis: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A textured scene, a smooth sigma map to blur it with, and a noise draw.

    The scene has blobs and lines on a noisy background, values roughly in ``[0, 1]``.
    The map spans ``sigma_range`` (a tilt plus a bump).  :func:`focus_pair_sample` is
    this scene blurred with this map (``mode="crop"``, the reference backend) plus
    ``0.01`` times the blurred image's value range times the draw.

    Parameters
    ----------
    shape
        2-D or 3-D shape.
    sigma_range
        Smallest and largest sigma of the map, in pixels.
    seed
        Seed of the random generator (the scene is deterministic).
    per_axis
        One map per axis (trailing axis): the first axis gets the map above, the others
        the same map mirrored, so sigma differs between axes.

    Returns
    -------
    scene, sigma_map, noise : numpy.ndarray
        float64; ``sigma_map`` has ``shape``, or ``shape + (ndim,)`` when ``per_axis``;
        ``noise`` is a standard normal draw of ``shape``.
    """
    rng = np.random.default_rng(seed)
    grid = np.meshgrid(*[np.arange(n, dtype=np.float64) for n in shape], indexing="ij")
    unit = [g / max(n - 1, 1) for g, n in zip(grid, shape)]  # each axis in [0, 1]
    scene = 0.15 + 0.05 * rng.standard_normal(shape)
    for _ in range(max(8, int(np.prod(shape)) // 600)):
        centre = [rng.uniform(0, n) for n in shape]
        width = rng.uniform(1.5, 4.0)
        d2 = sum((g - c) ** 2 for g, c in zip(grid, centre))
        scene += rng.uniform(0.3, 0.8) * np.exp(-d2 / (2 * width**2))
    for _ in range(6):  # lines (planes in 3-D) at random orientations
        normal = rng.standard_normal(len(shape))
        normal /= np.linalg.norm(normal)
        offset = rng.uniform(-0.3, 0.3) * min(shape)
        d = sum(nv * (g - n / 2) for nv, g, n in zip(normal, grid, shape)) - offset
        scene += 0.4 * np.exp(-(d**2) / 2.0)
    lo, hi = sigma_range
    bump = np.exp(-sum((u - 0.65) ** 2 for u in unit) / 0.08)
    smooth = 0.6 * unit[-1] + 0.4 * bump
    smooth = (smooth - smooth.min()) / (smooth.max() - smooth.min())
    sigma = lo + (hi - lo) * smooth
    if per_axis:
        mirrored = lo + (hi - lo) * smooth[(slice(None, None, -1),) * len(shape)]
        sigma = np.stack([sigma] + [mirrored] * (len(shape) - 1), axis=-1)
    return scene, sigma, rng.standard_normal(shape)


#: The stored focus pair (:func:`focus_pair_sample`), next to this module.
FOCUS_PAIR = Path(__file__).with_name("focus_pair.npz")


def focus_pair_sample() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A sharp and a blurred image of one textured scene, and the true sigma map.

    :func:`focus_scene` with its defaults (112x136, sigma 0.7 to 3.0), blurred with its
    map (``mode="crop"``, the reference backend) plus Gaussian noise of 1% of the
    blurred image's value range, stored with the package.  This is the test scene of
    :func:`napari_varblur.fit_sigma_map`; a test checks the stored pair against the blur.

    Returns
    -------
    sharp, blurred, sigma_map : numpy.ndarray
        float32, shape ``(112, 136)``.
    """
    with np.load(FOCUS_PAIR) as stored:
        return stored["sharp"], stored["blurred"], stored["sigma_map"]
