"""Chunked and distributed blur of dask arrays, exact across chunk borders.

Each chunk is blurred with its neighbours' pixels within the largest radius around it
(``dask.array.map_overlap``), so every kept pixel sees its whole window.  Edge modes act
at the array's border only: there a chunk's own edge *is* the array's edge, so the
backend applies the mode itself (``crop`` renormalises there and nowhere else); only
``wrap`` needs the far side of the array, which dask supplies as a periodic halo.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from . import backends
from .plan import radius_of
from .spec import BlurSpec, check_sigma_values, map_layout, normalize_axes


def is_dask_array(value: object) -> bool:
    """True for a dask array, without importing dask."""
    return type(value).__module__.startswith("dask.array")


def gaussian_blur_dask(image, sigma, **options: Any):
    """Lazy blur of a dask ``image``; ``sigma`` may be a number, one per axis, or a
    sigma map (NumPy or dask).  Arguments as :func:`napari_varblur.gaussian_blur`."""
    import dask.array as da
    from dask.array.overlap import ensure_minimum_chunksize

    placeholder = np.broadcast_to(np.zeros((), image.dtype), image.shape)
    maxima = None
    if is_dask_array(sigma):
        maxima = _check_lazy_map(sigma, image.shape, options.get("axes"))
        # Validate everything else with a stand-in map of the right shape.
        probe = np.broadcast_to(np.zeros((), np.float64), sigma.shape)
        spec = BlurSpec.from_args(placeholder, probe, **options)
    else:
        spec = BlurSpec.from_args(placeholder, sigma, **options)
        if spec.sigma is None:  # a NumPy map: one max per distinct per-axis array
            tops = {id(m): float(m.max()) for m in spec.sigma_map}
            maxima = [tops[id(m)] for m in spec.sigma_map]
    backend = backends.resolve(spec.backend)
    depths = _depths(spec, maxima)

    depth = {a: 0 for a in range(image.ndim)}
    boundary: dict[int, Any] = {a: "none" for a in range(image.ndim)}
    for i, axis in enumerate(spec.axes):
        depth[axis] = depths[i]
        if spec.modes[i] == "wrap" and depths[i]:
            boundary[axis] = "periodic"
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

    kwargs = dict(
        mode=spec.modes,
        cval=spec.cval,
        truncate=spec.truncate,
        radius=spec.radius,
        axes=spec.axes,
        backend=backend,
        precision=spec.precision,
    )
    meta = np.empty((0,) * image.ndim, dtype=spec.precision)
    if spec.sigma is not None:
        return da.map_overlap(
            _blur_block,
            image,
            depth=depth,
            boundary=boundary,
            dtype=spec.precision,
            meta=meta,
            sigma=spec.sigma,
            kwargs=kwargs,
        )

    # The map goes in as arrays shaped like the image (one per axis for a per-axis map):
    # dask aligns arrays of different ndim by their trailing axes, which would misplace
    # a map's extra axis.
    per_axis = map_layout(tuple(sigma.shape), image.shape, len(spec.axes))
    lazy_sigma = da.asarray(sigma)
    parts = [lazy_sigma[..., i] for i in range(len(spec.axes))] if per_axis else [lazy_sigma]
    parts = [da.broadcast_to(p, image.shape).rechunk(image.chunks) for p in parts]
    return da.map_overlap(
        _map_block,
        image,
        *parts,
        depth=depth,
        boundary=boundary,
        dtype=spec.precision,
        meta=meta,
        kwargs=kwargs,
        pads=tuple(depths),
    )


def _depths(spec: BlurSpec, maxima: list[float] | None) -> list[int]:
    """The largest radius needed on each blurred axis (for a map, from its maxima)."""
    k = len(spec.axes)
    if spec.sigma is not None:
        radii = [
            0 if s == 0 else r if spec.radius is not None else int(radius_of(s, spec.truncate))
            for s, r in zip(spec.sigma, spec.radius or (0,) * k)
        ]
    else:
        radii = [int(radius_of(m, spec.truncate)) for m in maxima]
    out = []
    for i, axis in enumerate(spec.axes):
        n = spec.shape[axis]
        r = min(radii[i], n - 1) if spec.modes[i] == "crop" else radii[i]
        out.append(min(r, n))
    return out


def _check_lazy_map(sigma, shape, axes) -> list[float]:
    """Check a dask sigma map's shape, dtype and values, and return each axis's
    largest sigma: one pass over the map for all of it (the index of the first bad
    value is looked up only when there is one)."""
    import dask

    if sigma.dtype.kind not in "biuf":
        raise TypeError(f"sigma: a sigma map must be real-valued, got dtype {sigma.dtype}")
    k = len(normalize_axes(axes, len(shape)))
    per_axis = map_layout(tuple(sigma.shape), shape, k)
    maxima = [sigma[..., i].max() for i in range(k)] if per_axis else [sigma.max()]
    checks = [(sigma < 0).any()]
    if sigma.dtype.kind == "f":
        checks.append((~np.isfinite(sigma)).any())
    results = dask.compute(*maxima, *checks)
    if any(results[len(maxima) :]):
        check_sigma_values(np.asarray(sigma, dtype=np.float64), "the sigma map")
    tops = [float(t) for t in results[: len(maxima)]]
    return tops if per_axis else tops * k


def _blur_block(block, *, sigma, kwargs):
    from .api import gaussian_blur

    return gaussian_blur(block, sigma, **kwargs)


def _map_block(block, *sigma_blocks, kwargs, pads):
    """Blur one chunk with its part of the map; the padding is the array's largest
    radius on every chunk, so equal chunk shapes give equal compiled programs."""
    sigma = sigma_blocks[0] if len(sigma_blocks) == 1 else np.stack(sigma_blocks, axis=-1)
    spec = BlurSpec.from_args(block, sigma, **kwargs)
    if spec.image.size == 0:
        return np.empty(spec.shape, dtype=spec.precision)
    spec = replace(spec, map_pads=pads)
    return backends.load(spec.backend).blur(spec)
