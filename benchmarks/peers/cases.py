"""The side-by-side benchmark's problems and their oracles (used by ``bench.py``).

The :class:`Case` dataclass, the tolerances and size limits, :func:`make_cases` (the cases
at each profile's sizes), :func:`make_data` (their random inputs), and the float64
reference: :func:`reference`, :func:`sub_problem` and :func:`needs_sub_problem`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: The contract's tolerances, relative to max(1, max|image|), against the float64 reference
#: (docs/contract.md).
TOLERANCE = {"float32": 1e-5, "float64": 1e-12}

#: Largest problem (pixels) whose float64 reference is computed at full size: the
#: reference backend for sigma maps is slow, scipy for global sigma is not.
FULL_REFERENCE_LIMIT = {"global": 1 << 24, "map2": 512 * 512, "map3": 64**3}

#: Side of the strided sub-problem used for the difference when the full reference is
#: too slow (256x256 in 2-D, 64^3 in 3-D); also the probe for time estimates.
SUB_SIDE = {2: 256, 3: 64}


@dataclass(frozen=True)
class Case:
    """One benchmark problem.

    Attributes
    ----------
    name
        Short id used on the command line (``G2``, ``V2``, ...).
    shape
        Image shape.
    sigma
        ``"global"``, ``"uniform"`` (random map in ``sigma_range``) or ``"smooth"``
        (a linear ramp over ``sigma_range``).
    sigma_range
        ``(sigma, sigma)`` for a global sigma, else the map's ``(low, high)``.
    mode
        Edge mode passed to every implementation.
    precisions
        Precisions this case runs in.
    peers
        Implementations that the others' speed is compared with.
    """

    name: str
    shape: tuple[int, ...]
    sigma: str
    sigma_range: tuple[float, float]
    mode: str
    precisions: tuple[str, ...]
    peers: tuple[str, ...]

    @property
    def is_map(self) -> bool:
        """Whether sigma is a per-pixel map (else one global value)."""
        return self.sigma != "global"

    @property
    def pixels(self) -> int:
        """Output pixels (voxels) of one call."""
        return math.prod(self.shape)

    def describe(self) -> str:
        """One line for the report, e.g. ``2048x2048, sigma 4, reflect``."""
        size = "x".join(map(str, self.shape))
        if self.is_map:
            low, high = self.sigma_range
            return f"{size}, {self.sigma} sigma map in [{low:g}, {high:g}], {self.mode}"
        return f"{size}, sigma {self.sigma_range[0]:g}, {self.mode}"


def make_cases(profile: str) -> dict[str, Case]:
    """The cases at the sizes of ``profile``: ``full``, ``quick``, ``gpu`` or ``gpu-small``."""
    side2, side3g, side3v = {
        "full": (2048, (256,) * 3, (128,) * 3),
        "quick": (512, (64,) * 3, (64,) * 3),
        "gpu": (4096, (512, 512, 256), (512, 512, 256)),
        "gpu-small": (512, (64, 64, 32), (64, 64, 32)),
    }[profile]
    both, single = ("float32", "float64"), ("float32",)
    gpu = profile.startswith("gpu")
    # On the GPU only JAX runs; its numpy-in/out call is the peer of the device-resident one.
    g2_peers = ("jax",) if gpu else ("scipy", "cv2")
    v2_peers = ("jax",) if gpu else ("naive-numba", "naive-jax")
    g3_peers = ("jax",) if gpu else ("scipy",)
    v3_peers = ("jax",) if gpu else ("naive-numba",)
    sq = (side2, side2)
    return {
        "G2": Case("G2", sq, "global", (4.0, 4.0), "reflect", both, g2_peers),
        "V2": Case("V2", sq, "uniform", (1.0, 4.0), "crop", both, v2_peers),
        "V2s": Case("V2s", sq, "smooth", (1.0, 4.0), "crop", both, v2_peers),
        "G3": Case("G3", side3g, "global", (2.0, 2.0), "reflect", single, g3_peers),
        "V3": Case("V3", side3v, "uniform", (0.5, 2.0), "crop", single, v3_peers),
    }


def make_data(case: Case, precision: str) -> tuple[np.ndarray, float | np.ndarray]:
    """The image and sigma of ``case``.

    Parameters
    ----------
    case
        The problem.
    precision
        ``"float32"`` or ``"float64"``: the dtype of the image and of a sigma map.

    Returns
    -------
    image : numpy.ndarray
        Uniform random values in [0, 1) from ``np.random.default_rng(0)``.
    sigma : float or numpy.ndarray
        The global sigma, or the sigma map (same shape as the image).
    """
    rng = np.random.default_rng(0)
    image = rng.random(case.shape).astype(precision)
    low, high = case.sigma_range
    if case.sigma == "global":
        return image, low
    if case.sigma == "uniform":
        sigma = rng.uniform(low, high, case.shape)
    else:  # smooth: mean of the normalised coordinates, 0 at one corner and 1 at the other
        grids = np.meshgrid(*(np.arange(n) / max(n - 1, 1) for n in case.shape), indexing="ij")
        sigma = low + (high - low) * sum(grids) / len(grids)
    return image, sigma.astype(precision)


def sub_problem(case: Case, image: np.ndarray, sigma: float | np.ndarray):
    """A strided ``256x256`` (2-D) or ``64^3`` (3-D) slice of the image and map.

    Parameters
    ----------
    case
        The problem (its shape sets the strides).
    image, sigma
        The full problem's image and sigma (float or map).

    Returns
    -------
    sub_image : numpy.ndarray
        Contiguous strided slice of ``image`` (the whole image if it is small).
    sub_sigma : float or numpy.ndarray
        The same slice of the map, or the global sigma.
    index : tuple of slice
        The slice used.

    Notes
    -----
    The stride keeps the whole range of a smooth map in the slice. The slice is a new,
    smaller problem (its own borders), not a crop of the full result.
    """
    side = SUB_SIDE[len(case.shape)]
    index = tuple(slice(None, None, max(1, n // side)) for n in case.shape)
    index = tuple(slice(0, side * s.step, s.step) for s in index)
    sub_sigma = sigma if np.isscalar(sigma) else np.ascontiguousarray(sigma[index])
    return np.ascontiguousarray(image[index]), sub_sigma, index


def reference(case: Case, image, sigma) -> np.ndarray:
    """The float64 oracle: scipy for a global sigma, the reference backend for a map."""
    image64 = image.astype(np.float64)
    if case.is_map:
        from napari_varblur import gaussian_blur

        return gaussian_blur(
            image64, sigma, mode=case.mode, backend="reference", precision="float64"
        )
    from scipy import ndimage

    return ndimage.gaussian_filter(
        image64, float(sigma), mode=case.mode, radius=math.ceil(3 * float(sigma))
    )


def needs_sub_problem(case: Case) -> bool:
    """Whether the full-size float64 reference would be too slow for ``case``."""
    key = f"map{len(case.shape)}" if case.is_map else "global"
    return case.pixels > FULL_REFERENCE_LIMIT[key]
