"""Sigma maps: a tile's per-pixel weights, shared by the exact gather and its scatter.

Both run a 1-3 axis map as 3-D, in the working layout ``(B, n0, n1, n2)``, one tile of
up to ``TILE`` neighbouring pixels along the last axis at a time, one vector lane per
pixel.  A tile's set-up, here, gives each lane its radius, exponent and counted range
on every axis, each axis's table of the lanes' weights (:func:`.weights._gauss_table`)
and each lane's normaliser.  An axis whose map, flags and radius cap are those of an
earlier axis (an isotropic map) takes that axis's radii and exponents and copies its
table: the same weights, without a second recurrence.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ...core.shapes import unbroadcast
from ...core.taps import working_layout
from .common import FAST, kernel_array
from .weights import _gauss_table, _radius_exponent, _range, _store

#: Neighbouring pixels along the last axis blurred together, one per vector lane: each
#: tile sums the window of its largest radius, with zero weights beyond each pixel's own.
#: 256 rather than 128: 6-12% faster on 2-D maps in [1, 4], [4, 16] and [0.5, 1.5] and the
#: scatter 15% (Intel Xeon, 2 cores, 2026-12-06); 512 was no faster.
TILE = 256

_ZERO_MAP = np.zeros((1, 1, 1, 1), np.float64)
_ZERO_MAP32 = np.zeros((1, 1, 1, 1), np.float32)


class MapArguments(NamedTuple):
    """What the 3-D map kernels (gather and scatter) take for a plan of 1-3 axes, run
    as 3-D with untouched leading axes: per axis its pad, crop flag, radius cap, the
    map as float64 (``wide``) or float32 (``narrow``), the map's flags, and the earlier
    axis whose radii and table it shares (``shares``, -1 for none)."""

    pads: np.ndarray
    crops: np.ndarray
    limits: np.ndarray
    wide: list
    narrow: list
    flags: np.ndarray
    shares: np.ndarray


def map_arguments(spec, plan) -> MapArguments:
    """The kernels' arguments for a sigma-map ``spec`` and its ``plan`` (1-3 axes)."""
    missing = 3 - len(plan)
    # An isotropic map is converted once and serves every axis.
    compact = [_compact_map(m.sigma, spec.shape, spec.axes, missing)
               for m in (plan[:1] if spec.isotropic else plan)]  # fmt: skip
    maps = [(_ZERO_MAP, np.zeros(4, np.int64))] * missing + compact * (
        len(plan) if spec.isotropic else 1
    )
    pads = np.array([0] * missing + [m.pad for m in plan], np.int64)
    limits = np.array([0] * missing + [m.limit for m in plan], np.int64)
    # float32 maps go in as they are (no float64 copy), float64 maps likewise: each axis
    # gets one array of each type, the unused one a 1-element stand-in.
    is32 = [[int(m.dtype == np.float32)] for m, _ in maps]
    return MapArguments(
        pads,
        np.array([True] * missing + [m.crop for m in plan], np.bool_),
        limits,
        [m if m.dtype == np.float64 else _ZERO_MAP for m, _ in maps],
        [m if m.dtype == np.float32 else _ZERO_MAP32 for m, _ in maps],
        np.hstack([np.stack([f for _, f in maps]), np.array(is32, np.int64)]),
        _shares([m for m, _ in maps], pads, limits),
    )


def _shares(maps: list, pads: np.ndarray, limits: np.ndarray) -> np.ndarray:
    """Per axis, the first earlier axis blurred with the same map array (so the same
    flags) and radius cap, whose lanes' radii and weights it can take; -1 for none."""
    shares = np.full(3, -1, np.int64)
    for a in range(3):
        for e in range(a):
            if pads[a] and pads[e] and maps[a] is maps[e] and limits[a] == limits[e]:
                shares[a] = e
                break
    return shares


def _compact_map(sigma, shape, axes, missing: int) -> tuple[np.ndarray, np.ndarray]:
    """A sigma map as a C-contiguous float32 or float64 array (the spec widened every
    other dtype to float64) in the 3-D working layout, without its broadcast axes, and
    the 0/1 flags that say which working axes it varies along.

    Two array types for every map dtype and layout (one compiled kernel takes both), and
    no copy of a C-contiguous map or of the broadcast axes.
    """
    full = sigma if sigma.shape == tuple(shape) else np.broadcast_to(sigma, shape)
    compact = unbroadcast(full)  # length 1 where the map does not vary
    work = working_layout(compact, axes)
    batch = int(np.prod([shape[a] for a in range(len(shape)) if a not in axes], dtype=np.int64))
    if work.shape[0] not in (1, batch):  # some batch axes vary, others do not
        work = working_layout(np.broadcast_to(compact, shape), axes)
    work = work.reshape(work.shape[:1] + (1,) * missing + work.shape[1:])
    target = (batch,) + (1,) * missing + tuple(shape[a] for a in axes)
    flags = np.array([int(c == t and t > 1) for c, t in zip(work.shape, target)], np.int64)
    dtype = np.float32 if work.dtype == np.float32 else np.float64
    return kernel_array(work, dtype), flags


@njit(cache=True, nogil=True)
def _scratch3d(pads, width_max, out):  # pragma: no cover - jitted
    """One line's scratch: the three axes' weight tables ``w0, w1, w2``, the tile's sums
    ``den, acc, mid, part``, its pixels' radius, window and exponent per axis ``rad, lo,
    hi, hs``, the tables' scratch rows, the masked sums and the tables' reach.  An axis
    of padding 0 gets the identity: a table of ones, radius, window and reach 0."""
    return (
        np.ones((2 * pads[0] + 1, width_max), np.float64),
        np.ones((2 * pads[1] + 1, width_max), np.float64),
        np.ones((2 * pads[2] + 1, width_max), out.dtype),
        np.empty(width_max, np.float64),
        np.empty(width_max, np.float64),
        np.empty(width_max, np.float64),
        np.empty(width_max, out.dtype),
        np.empty((4, width_max), np.float64),
        np.zeros((3, width_max), np.int64),
        np.zeros((3, width_max), np.int64),
        np.zeros((3, width_max), np.int64),
        np.zeros((3, width_max), np.float64),
        np.empty((4, width_max), np.float64),
        np.zeros(3, np.int64),
    )


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _tile_lanes(
    s0, s1, s2, t0, t1, t2, flags, shares, pads, crops, limits, truncate, n, b, i, j, m0,
    width, scratch,
):  # pragma: no cover  # fmt: skip
    """The tile at ``(b, i, j, m0 .. m0 + width)``: every blurred axis's radii,
    exponents and counted ranges (``scratch`` from :func:`_scratch3d`); an axis that
    shares an earlier one's map takes its radii and exponents.  Inlined into the
    kernels' parallel loops: as a call of its own the first map call compiled ~1 s
    longer."""
    rad, lo, hi, hs = scratch[8], scratch[9], scratch[10], scratch[11]
    for a, sa, ta in ((0, s0, t0), (1, s1, t1), (2, s2, t2)):
        if pads[a] > 0:
            if shares[a] >= 0:
                for v in range(width):
                    rad[a, v], hs[a, v] = rad[shares[a], v], hs[shares[a], v]
            else:
                _tile_sigma(sa, ta, flags[a], a, b, i, j, m0, width, limits[a], truncate,
                            rad, hs)  # fmt: skip
            _tile_range(a, i, j, m0, width, crops[a], n[a], rad, lo, hi)


@njit(cache=True, nogil=True, error_model="numpy")
def _tile_tables(pads, shares, width, scratch):  # pragma: no cover - jitted
    """The tile's weight table on every blurred axis, from :func:`_tile_lanes`' radii,
    and the lanes' normalisers in ``den``; an axis that shares an earlier one's map
    copies its table.  An axis of padding 0 keeps the identity."""
    w0, w1, w2, den, _, _, _, tmp, rad, lo, hi, hs, _, bigs = scratch
    den[:width] = 1.0
    for a, table in ((0, w0), (1, w1)):
        if pads[a] > 0:
            if shares[a] >= 0:  # (axis 1 shares only axis 0's table)
                bigs[a] = _copy_table(table, pads[a], w0, pads[0], rad[a], lo[a], hi[a],
                                      width, den, tmp[3])  # fmt: skip
            else:
                bigs[a] = _gauss_table(table, pads[a], rad[a], hs[a], lo[a], hi[a], width,
                                       den, tmp[0], tmp[1], tmp[2], tmp[3])  # fmt: skip
    if pads[2] > 0:
        if shares[2] >= 0:
            source = w0 if shares[2] == 0 else w1
            bigs[2] = _copy_table(w2, pads[2], source, pads[shares[2]], rad[2], lo[2],
                                  hi[2], width, den, tmp[3])  # fmt: skip
        else:
            bigs[2] = _gauss_table(w2, pads[2], rad[2], hs[2], lo[2], hi[2], width, den,
                                   tmp[0], tmp[1], tmp[2], tmp[3])  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy")
def _tile_sigma(s, s32, f, a, b, i, j, m0, width, limit, truncate, rad, hs):  # pragma: no cover
    """Each lane's radius and h on axis ``a`` (0, 1, 2) of the tile; ``s``/``s32`` is
    the axis's compact map (float64 or float32 as ``f[4]`` says) and ``f[:4]`` its
    broadcast flags.  The sigmas are read as one row (or one value) into ``hs[a]``,
    widened to float64 exactly, so the rule below runs vectorised across lanes."""
    at = (b * f[0], i * f[1], j * f[2])
    sigma, step = hs[a], f[3]  # (loops, not slice assignments: their shape checks
    if f[4]:  # compile string formatting, ~3 s of the first map call)
        row32 = s32[at]
        for v in range(width):
            sigma[v] = row32[(m0 + v) * step]
    else:
        row = s[at]
        for v in range(width):
            sigma[v] = row[(m0 + v) * step]
    for v in range(width):
        r, h = _radius_exponent(sigma[v], truncate, limit)
        rad[a, v] = r
        sigma[v] = h


@njit(cache=True, nogil=True, error_model="numpy")
def _tile_range(a, i, j, m0, width, crop, n, rad, lo, hi):  # pragma: no cover - jitted
    """Each lane's counted offsets on axis ``a`` of the tile, from its radius."""
    if a == 2:
        for v in range(width):
            lo[2, v], hi[2, v] = _range(rad[2, v], m0 + v, n, crop)
        return
    position = i if a == 0 else j
    for v in range(width):
        lo[a, v], hi[a, v] = _range(rad[a, v], position, n, crop)


@njit(cache=True, nogil=True, fastmath=FAST, error_model="numpy")
def _copy_table(table, pad, source, spad, radius, lo, hi, width, den, sums):  # pragma: no cover
    """:func:`~.weights._gauss_table` for lanes whose radii and exponents are those of
    ``source``'s (centre row ``spad``): its rows, stored in ``table``'s precision, and
    ``den`` multiplied by each lane's sum over its own counted offsets, exactly as the
    recurrence would have stored and summed them.  Returns the lanes' largest radius."""
    big = 0
    for v in range(width):
        big = max(big, radius[v])
        table[pad, v] = 1.0
        sums[v] = 1.0
    for d in range(1, big + 1):
        for v in range(width):
            _store(table, pad, d, v, source[spad + d, v], lo, hi, sums)
    for v in range(width):
        den[v] *= sums[v]
    return big
