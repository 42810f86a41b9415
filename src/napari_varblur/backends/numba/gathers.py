"""Sigma maps: the exact per-pixel gather.

Tiles of neighbouring pixels along the last axis share one window, vectorised across
the tile, with per-pixel weight tables from one Gaussian recurrence
(:mod:`.weights`); a tile whose window holds NaN or inf is summed pixel by pixel over
each pixel's own window, so a non-finite value never reaches a pixel whose window does
not hold it.  Maps are handed over as C-contiguous float32 or float64 arrays with 0/1
broadcast flags, so a new map dtype or layout never triggers a new compilation.  More
than three blurred axes run the generic N-D kernel.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numba import njit, prange

from ...core.masking import numerator
from ...core.rules import share_floor
from ...core.spec import BlurSpec
from ...core.taps import (
    MapAxis,
    extend_along,
    from_working_layout,
    map_plan,
    padding_order,
    working_layout,
)
from .common import FAST, kernel_array, parallel_section
from .tiles import TILE, _scratch3d, _tile_lanes, _tile_tables, map_arguments
from .weights import _gauss_table, _range


def masked_map(spec: BlurSpec, valid: np.ndarray, counts: bool) -> np.ndarray | None:
    """A sigma map's gather summing the valid values and the valid weights at once,
    when every value it reads is finite (else the generic path keeps NaN in place)."""
    if len(spec.axes) > 3:
        return None
    dtype = np.dtype(spec.precision)
    values = replace(spec, image=numerator(spec.image, valid, dtype),
                     cval=spec.cval if counts else 0.0)  # fmt: skip
    plan = map_plan(values)
    work = working_layout(values.image, spec.axes)
    padded = _padded(work, plan)
    if not np.isfinite(padded).all():
        return None
    # The validity, extended like the image (fill taps: 1 where they count, crop's 0).
    flags = working_layout(np.broadcast_to(valid, spec.shape).view(np.uint8), spec.axes)
    weights = map_plan(replace(spec, cval=float(counts)))
    return varying_blur(values.image, spec, plan, padded, _padded(flags, weights))


# ------------------------------------------------------------------- sigma maps


def varying_blur(x, spec, plan, padded=None, flags=None) -> np.ndarray:
    """The exact gather of ``x`` (already extended as ``padded`` when given).  With
    ``flags`` (the extended validity, uint8, 1-3 blurred axes) it divides by the sum
    of the valid weights instead of all of them: a normalised convolution, NaN where
    their share of the kernel is below the contract's floor (``share_floor``)."""
    work = working_layout(x, spec.axes)
    padded = _padded(work, plan) if padded is None else padded
    # One pass over the padded image: tiles need a per-tile check only if it holds
    # NaN or inf anywhere (the image, or a non-finite cval in the extension).
    finite = flags is not None or bool(np.isfinite(padded).all())
    out = np.empty(work.shape, dtype=x.dtype)
    if len(plan) > 3:
        _generic_varying(padded, work.shape, x, spec, plan, out)
        return from_working_layout(out, x.shape, spec.axes)

    # 1-D and 2-D run as 3-D with untouched leading axes of length 1 (sigma 0, no pad).
    missing = 3 - len(plan)
    lead = work.shape[:1] + (1,) * missing
    padded = padded.reshape(lead + padded.shape[1:])
    # No validity: None (not an empty array), so Numba prunes the masked branch and an
    # unmasked map compiles without it (issue 20: seconds off the first call).
    flags = None if flags is None else flags.reshape(padded.shape)
    rows, holes = (None, None) if flags is None else _holes(flags)
    target = out.reshape(lead + work.shape[1:])
    m = map_arguments(spec, plan)
    with parallel_section():
        _varying3d(
            padded,
            m.pads,
            m.crops,
            m.limits,
            *m.wide,
            *m.narrow,
            m.flags,
            m.shares,
            spec.truncate,
            finite,
            flags,
            rows,
            holes,
            share_floor(x.dtype),
            target,
        )
    return from_working_layout(out, x.shape, spec.axes)


def _holes(flags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The invalid positions of every row of the padded validity, as (row starts,
    positions): row r's are ``positions[starts[r] : starts[r + 1]]``, ascending.
    Not listed (positions ``[-1]``: every row summed against its flags) when there
    are many: above ``_SPARSE`` of the pixels."""
    rows, columns = flags.reshape(-1, flags.shape[-1]).shape if flags.size else (0, 1)
    invalid = flags.size - int(np.count_nonzero(flags))
    if rows == 0 or invalid > _SPARSE * flags.size:
        return np.zeros(rows + 1, np.int64), np.full(1, -1, np.int64)
    row, positions = np.nonzero(flags.reshape(rows, columns) == 0)
    starts = np.concatenate(([0], np.cumsum(np.bincount(row, minlength=rows))))
    return starts.astype(np.int64), positions.astype(np.int64)


def _generic_varying(padded, shape, x, spec, plan, out) -> None:
    """Any number of blurred axes (the 1-3 axis kernels are specialised)."""

    def per_pixel(values: np.ndarray, dtype: type) -> np.ndarray:
        full = np.broadcast_to(values, x.shape)
        return np.ascontiguousarray(working_layout(full, spec.axes), dtype=dtype).ravel()

    with parallel_section():
        _varying_kernel(
            np.ascontiguousarray(padded).ravel(),
            np.array(padded.shape, dtype=np.int64),
            np.array(shape, dtype=np.int64),
            np.array([m.pad for m in plan], dtype=np.int64),
            np.array([m.crop for m in plan], dtype=np.bool_),
            np.stack([per_pixel(m.radius(), np.int32) for m in plan]),
            np.stack([per_pixel(m.exponent(), np.float64) for m in plan]),
            out.reshape(-1),
            max(m.pad for m in plan),
        )


def _padded(work: np.ndarray, plan: list[MapAxis]) -> np.ndarray:
    """``work`` extended on every blurred axis by its padding, in its mode, in
    :func:`~napari_varblur.core.taps.padding_order` (crop axes, padded with zeros, last)."""
    padded = work
    for i in padding_order([m.mode for m in plan]):
        if plan[i].pad:
            padded = extend_along(padded, i + 1, plan[i].source(), plan[i].fill)
    return kernel_array(padded, work.dtype)


@njit(cache=True, nogil=True, fastmath=FAST)
def _axpy(acc, weights, values, start, width):  # pragma: no cover - jitted
    """acc[v] += weights[v] * values[start + v] for v < width.

    A function of its own (not inlined), so LLVM sees a simple loop and vectorises it.
    """
    src = values[start : start + width]
    for v in range(width):
        acc[v] += weights[v] * src[v]


@njit(cache=True, nogil=True, fastmath=FAST)
def _row_taps(part, w, first, taps, line, start, width):  # pragma: no cover - jitted
    """part[v] = sum_t w[first + t, v] * line[start + t + v] for t < taps, four taps per
    sweep over the lanes: a sweep per tap loaded and stored ``part`` once per
    multiply-add, which the window's rows (most of the gather's work) waited on."""
    part[:width] = 0
    t = 0
    while t + 4 <= taps:
        w_a, w_b, w_c, w_d = w[first + t], w[first + t + 1], w[first + t + 2], w[first + t + 3]
        x = line[start + t : start + t + width + 3]
        for v in range(width):
            part[v] += w_a[v] * x[v] + w_b[v] * x[v + 1] + w_c[v] * x[v + 2] + w_d[v] * x[v + 3]
        t += 4
    for u in range(t, taps):
        _axpy(part, w[first + u], line, start + u, width)


@njit(cache=True, nogil=True, error_model="numpy")
def _window_finite(xp, b, i, j, m0, width, pads, bigs):  # pragma: no cover - jitted
    """Whether the tile's shared window holds only finite values."""
    for d0 in range(-bigs[0], bigs[0] + 1):
        for d1 in range(-bigs[1], bigs[1] + 1):
            line = xp[b, i + pads[0] + d0, j + pads[1] + d1]
            for c in range(m0 + pads[2] - bigs[2], m0 + width + pads[2] + bigs[2]):
                if not np.isfinite(line[c]):
                    return False
    return True


@njit(cache=True, nogil=True, fastmath=FAST)
def _tile_sum(xp, b, i, j, m0, width, pads, bigs, w0, w1, w2, acc, mid, part):  # pragma: no cover
    """acc[v] = sum over the tile's shared window of w0 w1 w2 x (vectorised over v)."""
    p0, p1, p2 = pads[0], pads[1], pads[2]
    acc[:width] = 0
    for d0 in range(-bigs[0], bigs[0] + 1):
        plane = xp[b, i + p0 + d0]
        mid[:width] = 0
        for d1 in range(-bigs[1], bigs[1] + 1):
            line = plane[j + p1 + d1]
            _row_taps(part, w2, p2 - bigs[2], 2 * bigs[2] + 1, line, m0 + p2 - bigs[2], width)
            _axpy(mid, w1[p1 + d1], part, 0, width)
        _axpy(acc, w0[p0 + d0], mid, 0, width)


@njit(cache=True, nogil=True, fastmath=FAST)
def _valid_row(
    part_d, row_weight, w2, p2, big, flags, listed, holes, start, width
):  # pragma: no cover
    """part_d[v] = each lane's sum of w2 over the valid taps of one window row: the
    positions ``start .. start + width + 2 big - 1`` of ``flags``, whose invalid
    positions (ascending) are ``holes`` when ``listed``.  A few holes are subtracted
    from the full weight (each from the 2 big + 1 lanes that reach it) when what is
    left keeps at least
    1/_KEEP of it: the difference then carries at most ~_KEEP * 2 (2 big + 1) ulp of
    relative error; otherwise the row is summed against its flags (four taps per
    sweep, as the values), which never cancels.  Returns False when no tap is valid
    (known only when ``listed``)."""
    span = width + 2 * big
    if listed:
        first = np.searchsorted(holes, start)
        count = np.searchsorted(holes, start + span) - first
        if count == span:
            return False
        if count <= 2 * big + 1:
            part_d[:width] = row_weight[:width]
            for q in range(first, first + count):  # lane v reads c at offset c - big - v
                c = holes[q] - start
                for v in range(max(0, c - 2 * big), min(width, c + 1)):
                    part_d[v] -= w2[p2 + c - big - v, v]
            kept = True
            for v in range(width):
                kept &= part_d[v] * _KEEP >= row_weight[v]
            if kept:
                return True
    _row_taps(part_d, w2, p2 - big, 2 * big + 1, flags, start, width)
    return True


#: Subtracting a row's holes from its full weight is used while at least 1/_KEEP of
#: the weight stays valid (at most 1/_KEEP of cancellation).
_KEEP = 16.0
#: Holes are listed (for subtraction) when at most this share of the padded validity
#: is invalid: the list then costs at most 2 bytes per pixel.
_SPARSE = 1 / 8


@njit(cache=True, nogil=True, fastmath=FAST)
def _tile_sum_valid(
    xp,
    valid,
    rows,
    holes,
    b,
    i,
    j,
    m0,
    width,
    pads,
    bigs,
    w0,
    w1,
    w2,
    acc,
    den,
    mid,
    part,
    sums,
):  # pragma: no cover
    """``_tile_sum`` of a normalised convolution: acc[v] sums w0 w1 w2 x (the values
    are 0 where invalid) and den[v] the same weights over the valid taps only.  A row
    with few invalid taps (``holes[rows[r] : rows[r + 1]]`` for padded row r) costs
    two binary searches and one subtraction per hole on top of the plain sum."""
    p0, p1, p2 = pads[0], pads[1], pads[2]
    big = bigs[2]
    row_weight, mid_d, part_d = sums[0], sums[1], sums[2]
    row_weight[:width] = 0
    for d2 in range(-big, big + 1):
        for v in range(width):
            row_weight[v] += w2[p2 + d2, v]
    acc[:width] = 0
    den[:width] = 0
    n0, n1 = xp.shape[1], xp.shape[2]
    listed = holes.shape[0] == 0 or holes[0] >= 0
    for d0 in range(-bigs[0], bigs[0] + 1):
        plane, flag_plane = xp[b, i + p0 + d0], valid[b, i + p0 + d0]
        mid[:width] = 0
        mid_d[:width] = 0
        for d1 in range(-bigs[1], bigs[1] + 1):
            r = (b * n0 + i + p0 + d0) * n1 + j + p1 + d1
            hole = holes[rows[r] : rows[r + 1]]
            if not _valid_row(part_d, row_weight, w2, p2, big, flag_plane[j + p1 + d1], listed,
                              hole, m0 + p2 - big, width):  # fmt: skip
                continue  # no valid tap: the values there are 0 too
            line = plane[j + p1 + d1]  # (0 where invalid: every tap is summed)
            _row_taps(part, w2, p2 - big, 2 * big + 1, line, m0 + p2 - big, width)
            _axpy(mid, w1[p1 + d1], part, 0, width)
            _axpy(mid_d, w1[p1 + d1], part_d, 0, width)
        _axpy(acc, w0[p0 + d0], mid, 0, width)
        _axpy(den, w0[p0 + d0], mid_d, 0, width)


@njit(cache=True, nogil=True)
def _pixel_sums(xp, b, i, j, m0, width, pads, lo, hi, w0, w1, w2, acc):  # pragma: no cover
    """acc[v] = the sum over lane v's own counted window only (never reads a value
    outside it, so a NaN there cannot leak in)."""
    p0, p1, p2 = pads[0], pads[1], pads[2]
    for v in range(width):
        total = 0.0
        for d0 in range(lo[0, v], hi[0, v] + 1):
            plane = xp[b, i + p0 + d0]
            partial = 0.0
            for d1 in range(lo[1, v], hi[1, v] + 1):
                line = plane[j + p1 + d1]
                row_sum = 0.0
                for d2 in range(lo[2, v], hi[2, v] + 1):
                    row_sum += w2[p2 + d2, v] * line[m0 + v + p2 + d2]
                partial += w1[p1 + d1, v] * row_sum
            total += w0[p0 + d0, v] * partial
        acc[v] = total


@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def _varying3d(
    xp,
    pads,
    crops,
    limits,
    s0,
    s1,
    s2,
    t0,
    t1,
    t2,
    flags,
    shares,
    truncate,
    finite,
    valid,
    rows,
    holes,
    floor,
    out,
):  # pragma: no cover
    """The map blur of 1-3 axes in the working layout ``(B, n0, n1, n2)``: one job per
    line along ``n2``, tiles of ``TILE`` pixels along it (their lanes from
    :func:`~.tiles._tile_lanes`) summed over their shared window (:func:`_tile3d`)."""
    nb, n0, n1, n2 = out.shape
    n = np.array([n0, n1, n2], np.int64)
    tiles = (n2 + TILE - 1) // TILE
    width_max = min(TILE, n2)
    for row in prange(nb * n0 * n1):
        b = row // (n0 * n1)
        i = (row // n1) % n0
        j = row % n1
        scratch = _scratch3d(pads, width_max, out)
        for tile in range(tiles):
            m0 = tile * TILE
            width = min(TILE, n2 - m0)
            _tile_lanes(s0, s1, s2, t0, t1, t2, flags, shares, pads, crops, limits,
                        truncate, n, b, i, j, m0, width, scratch)  # fmt: skip
            _tile3d(xp, valid, rows, holes, b, i, j, m0, width, pads, shares, finite, floor,
                    scratch)  # fmt: skip
            acc, den = scratch[4], scratch[3]
            for v in range(width):
                out[b, i, j, m0 + v] = acc[v] / den[v]


@njit(cache=True, nogil=True, error_model="numpy")
def _tile3d(
    xp, valid, rows, holes, b, i, j, m0, width, pads, shares, finite, floor, scratch
):  # pragma: no cover
    """One tile's tables and normalisers (:func:`~.tiles._tile_tables`), then its sums
    into ``acc`` and ``den``: over the valid taps (a mask), over the shared window
    (finite values), or pixel by pixel over each pixel's own window (a NaN or inf
    nearby must reach only the pixels it reaches)."""
    _tile_tables(pads, shares, width, scratch)
    w0, w1, w2, den, acc, mid, part, _, _, lo, hi, _, sums, bigs = scratch
    if valid is not None:  # (pruned at compile time where valid is None)
        full = sums[3]  # the kernel's weight sum: the valid share is den / full
        full[:width] = den[:width]
        _tile_sum_valid(xp, valid, rows, holes, b, i, j, m0, width, pads, bigs, w0, w1,
                        w2, acc, den, mid, part, sums)  # fmt: skip
        for v in range(width):
            if den[v] < floor * full[v]:
                acc[v] = np.nan  # too small a share (or none) is NaN (the contract)
    elif finite or _window_finite(xp, b, i, j, m0, width, pads, bigs):
        _tile_sum(xp, b, i, j, m0, width, pads, bigs, w0, w1, w2, acc, mid, part)
    else:
        _pixel_sums(xp, b, i, j, m0, width, pads, lo, hi, w0, w1, w2, acc)


@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def _varying_kernel(xp, pshape, shape, pad, crop, radius, exponent, out, rmax):  # pragma: no cover
    """Any number ``k`` of blurred axes, pixel by pixel: ``xp`` the padded image (flat,
    shape ``pshape``), ``shape`` the working shape ``(B, n_1 .. n_k)``."""
    k = shape.shape[0] - 1
    nk = shape[k]
    rows = out.shape[0] // nk
    pstride = np.empty(k + 1, np.int64)
    step = 1
    for a in range(k, -1, -1):
        pstride[a] = step
        step *= pshape[a]
    for row in prange(rows):
        idx = np.zeros(k, np.int64)
        lo = np.zeros(k, np.int64)
        hi = np.zeros(k, np.int64)
        d = np.zeros(k, np.int64)
        w = np.zeros((k, 2 * rmax + 1, 1), np.float64)
        ints, floats = np.zeros((3, 1), np.int64), np.zeros((2, 1), np.float64)
        one = (ints[0], floats[0], ints[1], ints[2], floats[1], np.zeros((4, 1), np.float64))
        rem = row * 1  # a copy: numba forbids writing to the prange index
        for a in range(k - 2, -1, -1):
            idx[a] = rem % shape[a + 1]
            rem //= shape[a + 1]
        b = rem
        for j in range(nk):
            idx[k - 1] = j
            pix = row * nk + j
            den = _pixel_tables(w, lo, hi, idx, radius, exponent, pix, shape, crop, rmax, one)
            base = b * pstride[0]
            for a in range(k):
                base += (idx[a] + pad[a]) * pstride[a + 1]
            out[pix] = _window_sum(xp, base, pstride, lo, hi, d, w, rmax) / den


@njit(cache=True, nogil=True)
def _pixel_tables(
    w, lo, hi, idx, radius, exponent, pix, shape, crop, rmax, one
):  # pragma: no cover
    """Pixel ``pix``'s window ``lo .. hi`` and weights ``w`` on every axis; returns the
    weights' sum (the product of the axes').  ``one``: one pixel's scratch."""
    r1, h1, lo1, hi1, den1, scratch = one
    den1[0] = 1.0
    for a in range(w.shape[0]):
        r1[0] = radius[a, pix]
        h1[0] = exponent[a, pix]
        lo[a], hi[a] = _range(r1[0], idx[a], shape[a + 1], crop[a])
        lo1[0], hi1[0] = lo[a], hi[a]
        _gauss_table(w[a], rmax, r1, h1, lo1, hi1, 1, den1,
                     scratch[0], scratch[1], scratch[2], scratch[3])  # fmt: skip
    return den1[0]


@njit(cache=True, nogil=True)
def _window_sum(xp, base, pstride, lo, hi, d, w, rmax):  # pragma: no cover - jitted
    """The weighted sum over one pixel's window: an odometer over the window's outer
    axes, the last axis summed as a row."""
    k = lo.shape[0]
    for a in range(k - 1):
        d[a] = lo[a]
    total = 0.0
    while True:
        w_outer = 1.0
        offset = base
        for a in range(k - 1):
            w_outer *= w[a, rmax + d[a], 0]
            offset += d[a] * pstride[a + 1]
        row_sum = 0.0
        for t in range(lo[k - 1], hi[k - 1] + 1):
            row_sum += w[k - 1, rmax + t, 0] * xp[offset + t]
        total += w_outer * row_sum
        a = k - 2
        while a >= 0:
            d[a] += 1
            if d[a] <= hi[a]:
                break
            d[a] = lo[a]
            a -= 1
        if a < 0:
            return total
