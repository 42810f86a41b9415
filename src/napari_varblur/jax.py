"""The JAX-native, differentiable blur: ``from napari_varblur.jax import gaussian_blur``.

The public name of :mod:`napari_varblur.adapters.jax_api` (``jax.Array`` in, ``jax.Array``
out; works under ``jit``, ``grad`` and ``vmap``).
"""

from __future__ import annotations

from .adapters.jax_api import gaussian_blur

__all__ = ["gaussian_blur"]
