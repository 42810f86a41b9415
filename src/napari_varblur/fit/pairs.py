"""Synthetic focus pairs for trying and testing the fit: a scene from
:func:`napari_varblur.sample.focus_scene`, blurred with its map."""

from __future__ import annotations

import numpy as np

from ..adapters.numpy_api import gaussian_blur
from ..sample import focus_scene


def focus_pair(
    shape: tuple[int, ...] = (112, 136),
    sigma_range: tuple[float, float] = (0.7, 3.0),
    noise: float = 0.01,
    seed: int = 0,
    per_axis: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A sharp and a blurred image of one scene, and the true sigma map.

    The scene and map of :func:`~napari_varblur.sample.focus_scene` (``shape``,
    ``sigma_range``, ``seed``, ``per_axis``); the blurred image is the scene blurred
    with the map (``mode="crop"``, the reference backend) plus Gaussian noise of
    standard deviation ``noise`` times its value range.  With the defaults this is the
    stored :func:`~napari_varblur.sample.focus_pair_sample`.

    Returns
    -------
    sharp, blurred, sigma_map : numpy.ndarray
        float32; ``sigma_map`` has ``shape``, or ``shape + (ndim,)`` when ``per_axis``.
    """
    scene, sigma, draw = focus_scene(shape, sigma_range, seed, per_axis)
    blurred = gaussian_blur(scene, sigma, mode="crop", backend="reference")
    blurred = blurred + noise * np.ptp(blurred) * draw
    return scene.astype(np.float32), blurred.astype(np.float32), sigma.astype(np.float32)
