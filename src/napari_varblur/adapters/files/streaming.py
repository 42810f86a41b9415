"""Computing a lazy result piece by piece for a writer: slabs in order (here or on a
dask.distributed cluster), or chunk by chunk into a Zarr array."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator

import numpy as np


def _compute(result, scheduler) -> np.ndarray:
    """``result`` as a NumPy array, computed here or on the cluster."""
    if scheduler is None:
        return np.asarray(result.compute())
    return np.asarray(scheduler.compute(result).result())


def _slabs(result, scheduler, ahead: int = 2) -> Iterator[np.ndarray]:
    """Yield ``result`` computed one chunk of its first axis at a time, in order."""
    regions = _slab_regions(result)
    if scheduler is None:
        slabs = (result[region].compute() for region in regions)
    else:
        futures = (scheduler.compute(result[region]) for region in regions)
        slabs = _in_order(futures, ahead)
    for done, slab in enumerate(slabs, start=1):
        # Report before yielding: the writer may never ask for more after the last page.
        end = "\n" if done == len(regions) else ""
        print(f"\rvarblur: {done}/{len(regions)} slabs", end=end, file=sys.stderr, flush=True)
        yield np.asarray(slab)


def _in_order(futures: Iterator, ahead: int) -> Iterator[np.ndarray]:
    """Results of ``futures`` in order, keeping ``ahead`` more in flight on the cluster
    so its workers stay busy while a slab is written, without the whole result piling
    up there."""
    import collections

    window: collections.deque = collections.deque()
    for future in futures:
        window.append(future)
        if len(window) > ahead:
            yield window.popleft().result()
    while window:
        yield window.popleft().result()


def _slab_regions(result) -> list[slice]:
    """One slice of the first axis per chunk along it."""
    bounds = np.cumsum((0, *result.chunks[0]))
    return [slice(int(lo), int(hi)) for lo, hi in itertools.pairwise(bounds)]


def _store(result, target, scheduler) -> None:
    """Compute ``result`` into ``target`` (a Zarr array, memmap or array) here.

    Locally it goes one slab of chunks (along the first axis) at a time, so memory holds
    a slab and its halo, never the whole graph's inputs.  On a cluster the blocks are
    computed there and written here: an array sent to the workers would be a copy.
    """
    import dask.array as da

    if scheduler is not None:
        from dask.array.core import slices_from_chunks
        from distributed import as_completed, progress

        blocks = list(result.to_delayed().ravel())
        futures = scheduler.compute(blocks)
        where = dict(zip((f.key for f in futures), slices_from_chunks(result.chunks)))
        progress(futures)
        for future in as_completed(futures):
            target[where[future.key]] = future.result()
        return
    if result.ndim == 0 or result.size == 0:
        target[...] = result.compute()
        return
    regions = _slab_regions(result)
    for done, region in enumerate(regions, start=1):
        da.store(result[region], target, regions=(region,), lock=True)
        print(f"\rvarblur: {done}/{len(regions)} slabs", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
