"""Which shapes fit an image, written once: the rule "an array broadcasts to the image"
(a sigma map, a mask, a map layer) and where a map of the blurred axes alone goes.

Every check of a map's or a mask's shape calls these: the library's normalisers
(:mod:`.sigma`, :mod:`.spec`), the adapters that take maps of the blurred axes
(:mod:`napari_varblur.adapters.request`) and napari's choice of map layers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def broadcasts(shape: Sequence[int], target: Sequence[int], *, leading: bool = False) -> bool:
    """Whether an array of ``shape`` broadcasts to ``target``: each length 1 or the
    target's, with the target's number of axes (or fewer, with ``leading``: NumPy then
    adds length-1 axes in front)."""
    shape, target = tuple(shape), tuple(target)
    if leading and len(shape) < len(target):
        shape = (1,) * (len(target) - len(shape)) + shape
    return len(shape) == len(target) and all(s in (1, n) for s, n in zip(shape, target))


def placement(shape: Sequence[int], image_shape: Sequence[int], axes: Sequence[int]) -> str | None:
    """Where a map of ``shape`` goes: ``"image"`` if it broadcasts to the image,
    ``"axes"`` if it has the shape of the blurred ``axes`` (in their order), else None.
    The image reading wins when both fit."""
    if broadcasts(shape, image_shape):
        return "image"
    return "axes" if tuple(shape) == tuple(image_shape[a] for a in axes) else None


def unbroadcast(a: np.ndarray) -> np.ndarray:
    """``a`` without what broadcasting repeats: a view with length 1 on its length-1
    and zero-stride axes (a map given as ``np.broadcast_to`` of one row is that row)."""
    return a[tuple(slice(0, 1) if n == 1 or stride == 0 else slice(None)
                   for n, stride in zip(a.shape, a.strides))]  # fmt: skip


def compact(a: np.ndarray) -> np.ndarray:
    """``a`` without the axes it is constant along: a view with length 1 on them (its
    zero-stride axes without a look, the others compared slice by slice).  A sigma map
    that varies along z alone is its column of values: planning then reads that, not
    every pixel."""
    a = unbroadcast(a)
    return a[tuple(slice(0, 1) if constant_along(a, i) else slice(None) for i in range(a.ndim))]


def constant_along(a: np.ndarray, axis: int) -> bool:
    """Whether ``a`` is the same at every index along ``axis``.  The second slice is
    compared first: an array that changes there (most maps do) is told apart without a
    pass over all of it.  (Slices are views: ``take`` copied a broadcast map whole, 24
    ms for a 2048² map broadcast from one row.)"""
    if a.shape[axis] < 2:
        return True
    at = (slice(None),) * axis
    first = a[at + (slice(0, 1),)]
    if not (a[at + (slice(1, 2),)] == first).all():
        return False
    return bool((a == first).all())
