"""napari-varblur: Gaussian blur with a global sigma or a per-pixel sigma map.

One written contract (``docs/contract.md``) and three backends that meet it:
``reference`` (float64 NumPy), ``numba`` (parallel CPU) and ``jax`` (XLA, GPU when
present).  The JAX-native, differentiable entry point is :mod:`napari_varblur.jax`;
:func:`fit_sigma_map` estimates a sigma map from a sharp and a blurred image.
"""

from __future__ import annotations

from ._version import __version__
from .adapters.numpy_api import gaussian_blur
from .backends import BackendUnavailableError, available_backends

__all__ = [
    "BackendUnavailableError",
    "BeadFit",
    "SigmaFit",
    "__version__",
    "available_backends",
    "blur_layer",
    "blur_operator",
    "deblur",
    "fit_sigma_map",
    "gaussian_blur",
    "sigma_map_from_beads",
]


def __getattr__(name: str):
    # blur_layer needs napari: import it on first use so the library stays GUI-free.
    if name == "blur_layer":
        from .gui.layers import blur_layer

        return blur_layer
    # Fitting needs optax and compiles JAX programs: imported on first use too.
    if name in ("fit_sigma_map", "SigmaFit"):
        from . import fit

        return getattr(fit, name)
    # Deblurring imports SciPy's sparse linear algebra: on first use too.
    if name in ("deblur", "blur_operator"):
        from . import restore

        return getattr(restore, name)
    # Measuring beads imports SciPy's ndimage and spatial: on first use too.
    if name in ("sigma_map_from_beads", "BeadFit"):
        from . import measure

        return getattr(measure, name)
    raise AttributeError(f"module 'napari_varblur' has no attribute {name!r}")
