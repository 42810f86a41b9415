"""A dask image deblurred tile by tile: each chunk with a halo of a few radii
(:func:`~napari_varblur.adapters.dask_chunks.overlap_map`), so the estimate in a chunk
sees the observed pixels its iterations draw on; the halo is dropped afterwards.

Richardson-Lucy's reach grows by two radii per iteration, but the influence of a pixel
further than a few radii decays fast: docs/deblur.md states the difference to the
untiled result, and tests/test_deblur.py holds it.
"""

from __future__ import annotations

from functools import partial

from ..adapters.dask_chunks import overlap_map
from ..core.checks import ArgumentError
from ..core.spec import BlurSpec
from .settings import Settings
from .solve import deblur_spec


def deblur_lazy(spec: BlurSpec, chosen: Settings, halo: int):
    """The lazy estimate of a validated spec whose image is a dask array."""
    if chosen.callback is not None:
        raise ArgumentError("callback: not available for a dask image (its tiles run apart)")
    return overlap_map(spec, partial(_tile, chosen=chosen), halo)


def _tile(spec: BlurSpec, pad_floor=None, *, chosen: Settings):
    return deblur_spec(spec, chosen)
