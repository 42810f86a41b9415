"""Built-in sample data, generated in code (no download)."""

from __future__ import annotations

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


def defocus_sample_layers() -> list[tuple]:
    """napari sample data: the fluorescence sample and its defocus sigma map.

    Returns napari ``LayerData`` tuples, so this module needs no napari import.
    """
    image, sigma_map = fluorescence_sample(512)
    return [
        (image, {"name": "varblur cells", "colormap": "gray"}, "image"),
        (
            sigma_map,
            {
                "name": "varblur sigma map",
                "colormap": "viridis",
                "visible": False,
                # tagged (as in napari_varblur.gui.layers) so the blur widget preselects it
                "metadata": {"napari_varblur": {"role": "sigma-map", "kind": "sample"}},
            },
            "image",
        ),
    ]
