"""The orientation sweep's maps, images and exact call (``orientation.py``;
``gpu/gpu_tolerance.py`` times the same maps on a GPU).

2-D maps: a ramp along x, a ramp tilted 30 degrees from x, radial, an off-centre
field-curvature bowl; 3-D maps: a ramp along x, a ramp along z, a diagonal ramp along
all three axes, spherical radial.  Images: 2-D, the built-in sample
(``napari_varblur.sample.fluorescence_sample``); 3-D, smooth noise plus white noise.
"""

from __future__ import annotations

import math
from functools import partial

import internals  # benchmarks/ is on sys.path: the scripts put it there
import numpy as np

#: The tolerance timed.
TOLERANCE = 1e-3
#: Global blurs of the plain stack: sigmas at this ratio between neighbours.
STACK_RATIO = 1.19


def _grid(shape):
    """Pixel coordinates (float64) per axis, and the same scaled to [0, 1]."""
    coords = np.meshgrid(*[np.arange(n, dtype=np.float64) for n in shape], indexing="ij")
    return coords, [c / max(n - 1, 1) for c, n in zip(coords, shape, strict=True)]


def _scale(t, low, high):
    """``t`` stretched to [low, high], float32."""
    t = (t - t.min()) / np.ptp(t)
    return (low + (high - low) * t).astype(np.float32)


def maps_2d(shape, low=1.0, high=16.0) -> dict[str, tuple[str, np.ndarray]]:
    """Name -> (description, map) of the 2-D maps."""
    (y, x), (_, u) = _grid(shape)
    angle = math.radians(30)
    tilted = x * math.cos(angle) + y * math.sin(angle)
    cy, cx = [(n - 1) / 2 for n in shape]
    by, bx = 0.3 * (shape[0] - 1), 0.65 * (shape[1] - 1)
    return {
        "ramp x": ("along x", _scale(u, low, high)),
        "tilted 30°": ("gradient at 30° from x", _scale(tilted, low, high)),
        "radial": (
            "low at the centre, high at the corners",
            _scale(np.hypot(y - cy, x - cx), low, high),
        ),
        "bowl": (
            "(distance to (0.3 H, 0.65 W))², non-monotone along x and y",
            _scale((y - by) ** 2 + (x - bx) ** 2, low, high),
        ),
    }


def maps_3d(shape, low=0.5, high=8.0) -> dict[str, tuple[str, np.ndarray]]:
    """Name -> (description, map) of the 3-D maps."""
    (z, y, x), (w, v, u) = _grid(shape)
    cz, cy, cx = [(n - 1) / 2 for n in shape]
    sphere = np.sqrt((z - cz) ** 2 + (y - cy) ** 2 + (x - cx) ** 2)
    return {
        "ramp x": ("along x (last axis)", _scale(u, low, high)),
        "ramp z": ("along z (first axis)", _scale(w, low, high)),
        "diagonal": ("(z + y + x) / 3 on [0, 1] axes", _scale(u + v + w, low, high)),
        "radial": ("spherical: low at the centre, high at the corners", _scale(sphere, low, high)),
    }


def image_2d(n: int) -> np.ndarray:
    """The built-in sample at ``n x n`` (blobs, filaments, Poisson noise), float32."""
    from napari_varblur.sample import fluorescence_sample

    return fluorescence_sample(n)[0].astype(np.float32)


def image_3d(shape) -> np.ndarray:
    """Smooth noise (``gaussian_filter(normal, 4)``, unit std) + 0.25 x white noise."""
    from scipy.ndimage import gaussian_filter

    rng = np.random.default_rng(0)
    smooth = gaussian_filter(rng.standard_normal(shape), 4.0, mode="reflect")
    smooth /= smooth.std()
    return (smooth + 0.25 * rng.standard_normal(shape)).astype(np.float32)


def stack_levels(low: float, high: float, ratio: float = STACK_RATIO) -> list[float]:
    """Sigmas from ``low`` to ``high`` at ``ratio`` between neighbours (the last one
    ``high``)."""
    count = math.ceil(math.log(high / low) / math.log(ratio) - 1e-9)
    return [low * ratio**k for k in range(count)] + [high]


def exact_call(image, smap, mode):
    """The exact per-pixel gather (never the level walk, even for a quantised map), and
    what it is: the Numba backend's gather where it can be reached, else the public
    call with ``tolerance=None``."""
    try:
        return internals.exact_gather(image, smap, mode), "backend gather"
    except Exception as exc:  # an internal API that moved: the public call
        from napari_varblur import gaussian_blur

        print(f"  (backend gather unavailable: {exc!r}; timing tolerance=None)")
        fn = partial(gaussian_blur, image, smap, mode=mode, backend="numba")
        return fn, "gaussian_blur(tolerance=None)"
