"""Chunked and distributed blur of dask arrays, exact across chunk borders.

Each chunk is blurred with its neighbours' pixels within the largest radius around it
(``dask.array.map_overlap``), so every kept pixel sees its whole window.  Edge modes act
at the array's border only: there a chunk's own edge *is* the array's edge, so the
backend applies the mode itself (``crop`` renormalises there and nowhere else); only
``wrap`` needs the far side of the array, which dask supplies as a periodic halo
(:attr:`~napari_varblur.core.modes.Mode.dask_boundary`).

Every argument was checked by :class:`~napari_varblur.core.spec.BlurSpec` before a graph is
built, so a dask call raises the same errors as a NumPy call, at call time; each chunk
then goes straight to the router (:mod:`napari_varblur.engine.router`) with that spec.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from .. import backends
from ..core.rules import radius_of
from ..core.spec import BlurSpec
from ..core.taps import global_radius
from ..engine import router

__all__ = ["blur_lazy", "overlap_map"]


def blur_lazy(spec: BlurSpec):
    """Lazy blur of a validated spec whose image (or map) is a dask array."""
    # A scatter's kept pixels receive from pixels up to a radius away, whose own windows
    # (their normalisers) reach a radius further: twice the halo.
    return overlap_map(spec, router.blur, 2 if spec.model == "scatter" else 1)


def overlap_map(spec: BlurSpec, run, reach: int):
    """Lazy ``run(chunk_spec, pad_floor=...)`` over the chunks of a validated spec whose
    image (or map) is a dask array, each chunk with a halo of ``reach`` times the
    largest radius (and the map and mask chunked alike)."""
    import dask.array as da

    image = da.asarray(spec.image)
    depths = _depths(spec)
    image, depth, boundary = _overlap(image, spec, depths, reach)
    # Each chunk runs the router on this spec with its own blocks: validated once, here.
    # "raise" was checked on the whole array: the chunks propagate.
    template = replace(spec, image=None, sigma_map=None, mask=None,
                       backend=backends.resolve(spec.backend),
                       nan_policy="omit" if spec.nan_policy == "omit" else "propagate")  # fmt: skip
    # The mask travels with the image: same chunks, same halo, same edge handling.
    masks = []
    if spec.mask is not None:
        masks = [da.broadcast_to(da.asarray(spec.mask), image.shape).rechunk(image.chunks)]
    overlap = dict(depth=depth, boundary=boundary, dtype=spec.precision,
                   meta=np.empty((0,) * image.ndim, dtype=spec.precision))  # fmt: skip
    if spec.sigma is not None:
        return da.map_overlap(_blur_block, image, *masks, template=template, run=run, **overlap)
    # The map goes in as arrays shaped like the image (one per axis for a per-axis map):
    # dask aligns arrays of different ndim by their trailing axes, which would misplace
    # a map's extra axis.
    parts = spec.sigma_map[:1] if spec.isotropic else spec.sigma_map
    parts = [da.broadcast_to(da.asarray(p), image.shape).rechunk(image.chunks) for p in parts]
    return da.map_overlap(_map_block, image, *masks, *parts, template=template, run=run,
                          pads=tuple(depths), masked=bool(masks), **overlap)  # fmt: skip


def _depths(spec: BlurSpec) -> list[int]:
    """The largest radius needed on each blurred axis (never more than the axis)."""
    out = []
    for i, axis in enumerate(spec.axes):
        n = spec.shape[axis]
        if spec.sigma is not None:
            r = global_radius(spec, i)
        else:
            r = int(min(radius_of(spec.sigma_max[i], spec.truncate), n))
        limit = spec.modes[i].map_limit(n)
        out.append(min(r, n if limit is None else limit))
    return out


def _overlap(image, spec: BlurSpec, depths: list[int], reach: int) -> tuple[Any, dict, dict]:
    """Rechunk so each chunk holds its halo (``reach`` times ``depths``); return the
    image, depths and boundaries."""
    from dask.array.overlap import ensure_minimum_chunksize

    depth = {a: 0 for a in range(image.ndim)}
    boundary: dict[int, Any] = {a: "none" for a in range(image.ndim)}
    for i, axis in enumerate(spec.axes):
        depth[axis] = min(reach * depths[i], image.shape[axis])
        if depths[i]:
            boundary[axis] = spec.modes[i].dask_boundary
    # A chunk must hold its halo: merge chunks thinner than the depth (an axis not
    # longer than its depth becomes one chunk).  Done here, once, so the image and its
    # sigma map keep the same chunks (dask would otherwise rechunk each on its own).
    chunks = {
        axis: ensure_minimum_chunksize(min(depth[axis], image.shape[axis]), image.chunks[axis])
        for axis in spec.axes
        if depth[axis] and min(image.chunks[axis]) < depth[axis]
    }
    if chunks:
        image = image.rechunk(chunks)
    for axis in spec.axes:  # one chunk: no halo needed, the backend sees both edges
        if len(image.chunks[axis]) == 1:
            depth[axis] = 0
            boundary[axis] = "none"
    return image, depth, boundary


def _blur_block(block, *mask, template: BlurSpec, run):
    return run(replace(template, image=block, mask=mask[0] if mask else None))


def _map_block(block, *blocks, template: BlurSpec, run, pads, masked):
    """Blur one chunk with its parts of the mask (first, when ``masked``) and the map;
    the padding is the array's largest radius on every chunk, so equal chunk shapes
    give equal compiled programs."""
    mask, parts = (blocks[0], blocks[1:]) if masked else (None, blocks)
    maps = parts * len(template.axes) if template.isotropic else parts
    return run(replace(template, image=block, sigma_map=maps, mask=mask), pad_floor=pads)
