"""The masked global blur: the fused sweep over the last two axes (:mod:`.passes`) for a
normalised convolution.

It also keeps each ring row's validity flags and the list of its invalid columns, and
sums the validity down the columns sparsely where few taps are invalid
(:func:`_validity_down`): both sums of the normalised convolution in one sweep.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange
from numba.cpython.unsafe.numbers import trailing_zeros

from ...core.masking import ratio
from ...core.spec import BlurSpec
from ...core.taps import AxisPass, global_plan
from .common import FAST, kernel_array, parallel_section
from .passes import (
    _RING_PAD,
    _along,
    _fused_block,
    _ring_starts,
    _row,
    _scale,
    _scaled,
    _symmetric,
    _weighted_sums,
    correlate,
    fusable,
)

#: A row lists its invalid columns while they are at most one in this many; a masked
#: window with more invalid taps than that share sums its validity densely.
_HOLES_SHARE = 16
#: The low seven bits of each byte of a word.
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_ONE = np.uint64(1)


def masked_global(spec: BlurSpec, valid: np.ndarray, counts: bool, omit: bool
                  ) -> np.ndarray | None:  # fmt: skip
    """Global passes that include the fused last two axes: ``_fused_masked_kernel``
    splits the image into its valid values and its validity (with ``omit``: also
    where the value is finite) and filters both along the last two axes; other axes
    filter both sums, then they are divided.  (Passes commute: also in constant mode,
    where a filtered fill plane is still the fill.)"""
    passes = global_plan(spec)
    if not fusable(passes, spec.image.ndim):
        return None
    fused = passes[-2:]
    dtype = np.dtype(spec.precision)

    def fills(p: AxisPass) -> tuple[float, float]:  # (values, validity) of fill taps
        return (p.mode.fill(spec.cval), p.mode.fill(1.0)) if counts else (0.0, 0.0)

    p0, p1 = fused
    image = spec.image.astype(dtype, copy=False)
    lines = kernel_array(image, dtype).reshape(-1, p0.n, p1.n)
    flags = np.broadcast_to(valid, valid.shape[:-2] + spec.shape[-2:])
    if flags.shape[:-2] != spec.shape[:-2]:  # varies along some batch axes only
        flags = np.broadcast_to(flags, spec.shape)
    flags = np.ascontiguousarray(flags).view(np.uint8).reshape(-1, p0.n, p1.n)
    out = np.empty_like(lines)
    den = np.empty_like(lines) if len(passes) > 2 else np.empty((0, 0, 0), dtype)
    args = []
    for p in fused:
        fill, one = fills(p)
        args += [p.source(), dtype.type(fill), p.weights.astype(dtype), p.scale.astype(dtype),
                 dtype.type(one)]  # fmt: skip
    with parallel_section():
        _fused_masked_kernel(lines, flags, out, den, *args, p1.left, _fused_block(lines.shape),
                             omit)  # fmt: skip
    if len(passes) == 2:
        return out.reshape(spec.shape)
    num, den = out.reshape(spec.shape), den.reshape(spec.shape)
    for p in passes[:-2]:
        fill, one = fills(p)
        num = correlate(num, p.axis, p.source(), fill, p.weights, p.scale)
        den = correlate(den, p.axis, p.source(), one, p.weights, p.scale)
    return ratio(num, den)


def all_finite(image: np.ndarray) -> bool | None:
    """Whether every value of a C-contiguous float32 or float64 image is finite, in
    one parallel pass that reads the exponent bits (``None`` for another image: the
    engine then asks NumPy)."""
    if not image.flags.c_contiguous or image.dtype not in _EXPONENT:
        return None
    exponent = _EXPONENT[image.dtype]
    bits = image.reshape(-1).view(exponent.dtype)
    with parallel_section():
        return _count_nonfinite(bits, exponent, _FINITE_CHUNK) == 0


#: The exponent bits of each float dtype: all set in NaN and inf only.
_EXPONENT = {np.dtype(np.float32): np.uint32(0x7F800000),
             np.dtype(np.float64): np.uint64(0x7FF0000000000000)}  # fmt: skip
#: Values per job of :func:`all_finite`.
_FINITE_CHUNK = 1 << 16


@njit(parallel=True, cache=True, nogil=True)
def _count_nonfinite(bits, exponent, size):  # pragma: no cover - jitted
    """How many of the floats whose bits are ``bits`` have every exponent bit set
    (integer tests, exact, vectorised: no float arithmetic to fold away)."""
    chunks = (bits.shape[0] + size - 1) // size
    found = np.zeros(chunks, np.int64)
    for c in prange(chunks):
        part = bits[c * size : min(bits.shape[0], (c + 1) * size)]
        k = 0
        for i in range(part.shape[0]):
            k += (part[i] & exponent) == exponent
        found[c] = k
    return found.sum()


@njit(parallel=True, cache=True, nogil=True, fastmath=FAST, error_model="numpy")
def _fused_masked_kernel(
    lines, valid, out, den_out, src0, fill0, w0, scale0, one0, src1, fill1, w1, scale1, one1,
    left1, block, omit,
):  # pragma: no cover  # fmt: skip
    """``_fused_kernel`` for a normalised convolution: the valid values (0 where
    invalid: a NaN there is dropped, not multiplied) and the validity are filtered
    alike and divided (0/0: NaN), or both sums kept (``out``, ``den_out``) when
    ``den_out`` is not empty.  ``valid`` (uint8 flags) has one plane, or one per outer
    index, and with ``omit`` a non-finite value is invalid too; ``one*`` is the
    validity of fill taps.

    Each input row enters a ring of values, a ring of flags and a list of its invalid
    columns; down the columns the validity is summed sparsely
    (:func:`_validity_down`).  Crop's renormalisation cancels in the ratio: it is
    applied to kept sums only.
    """
    outer, n0, n1 = out.shape
    taps0 = w0.shape[0]
    slots, stride = taps0 + 1, n1 + _RING_PAD
    sym0, sym1 = _symmetric(w0), _symmetric(w1)
    keep = den_out.shape[0] > 0
    scaled0, scaled1 = keep and _scaled(scale0), keep and _scaled(scale1)
    nblocks = (n0 + block - 1) // block
    for job in prange(outer * nblocks):
        o = job // nblocks
        v = o if valid.shape[0] > 1 else 0
        i0 = (job % nblocks) * block
        i1 = min(n0, i0 + block)
        values = np.empty((slots + 1) * stride, out.dtype)
        flags = np.empty((slots + 1) * stride, np.uint8)
        holes = np.empty((slots + 1, n1 // _HOLES_SHARE + 1), np.int64)
        counts = np.empty(slots + 1, np.int64)
        _enter_fill(values, flags, counts, slots * stride, n1, fill0, one0)
        nums = np.empty((2, src1.shape[0]), out.dtype)
        dens = np.empty((2, src1.shape[0]), out.dtype)
        num_mids = (nums[0, left1 : left1 + n1], nums[1, left1 : left1 + n1])
        den_mids = (dens[0, left1 : left1 + n1], dens[1, left1 : left1 + n1])
        den = np.empty(n1, out.dtype)
        start, along = np.empty(slots, np.int64), np.arange(w1.shape[0])
        ring = (values, flags, holes, counts)
        for e in range(i0, i0 + taps0 - 1):
            _enter(ring, lines[o], valid[v], src0, e, slots, stride, omit)
        for i in range(i0, i1, 2):
            rows = min(2, i1 - i)
            for e in range(i + taps0 - 1, i + taps0 - 1 + rows):
                _enter(ring, lines[o], valid[v], src0, e, slots, stride, omit)
            _ring_starts(start, src0, i, taps0 + rows - 1, slots, stride)
            _weighted_sums(num_mids[0], num_mids[1], values, start, w0, sym0, rows == 2)
            _validity_down(den_mids, ring, start, w0, stride, rows)
            for k in range(rows):
                if scaled0:
                    num_mids[k][:] *= scale0[i + k]
                    den_mids[k][:] *= scale0[i + k]
                num = out[o, i + k]
                if keep:
                    den = den_out[o, i + k]
                _along(num, nums[k], along, src1, left1, fill1, w1, sym1)
                _along(den, dens[k], along, src1, left1, one1, w1, sym1)
                if not keep:
                    for c in range(n1):
                        num[c] /= den[c]
                elif scaled1:
                    _scale(num, scale1)
                    _scale(den, scale1)


@njit(cache=True, nogil=True, fastmath=FAST)
def _enter(ring, plane, ok_plane, src, e, slots, stride, omit):  # pragma: no cover - jitted
    """Input position ``e`` into its slot of the masked ring ``(values, flags, holes,
    counts)``: its values (0 where invalid), its flags (with ``omit``: 0 also where the
    value is not finite) and the list of its invalid columns (``counts[slot]`` of them,
    or -1 where they do not fit in ``holes``).  Nothing for a fill tap."""
    values, flags, holes, counts = ring
    if src[e] < 0:
        return
    row, ok = plane[src[e]], ok_plane[src[e]]
    n, slot = row.shape[0], e % slots
    dst, flag = values[slot * stride : slot * stride + n], flags[slot * stride : slot * stride + n]
    for c in range(n):  # plain copies (a select costs twice as much)
        dst[c] = row[c]
    for c in range(n):
        flag[c] = ok[c]
    if omit:
        for c in range(n):  # (FAST keeps NaN and inf: this is IEEE's test)
            flag[c] &= np.isfinite(row[c])
    listed = holes[slot]
    k = _list_invalid(flag, listed)
    counts[slot] = k if k < listed.shape[0] else -1
    if k < listed.shape[0]:
        for j in range(k):
            dst[listed[j]] = 0
        return
    zero = dst.dtype.type(0)
    for c in range(n):  # vectorised: a select, no branch
        dst[c] = row[c] if flag[c] != 0 else zero


@njit(cache=True, nogil=True)
def _list_invalid(ok, listed):  # pragma: no cover - jitted
    """Writes the columns where the flags ``ok`` are 0 into ``listed`` while they fit
    (its last entry takes any overflow) and returns how many there are.

    Eight flags at a time: a word's zero bytes are marked by their top bit, exactly
    (no carry crosses a byte), and the marks are walked lowest first.
    """
    n, last = ok.shape[0], listed.shape[0] - 1
    whole = n - n % 8
    words = ok[:whole].view(np.uint64)
    k = 0
    for j in range(words.shape[0]):
        x = words[j]
        zeros = ~(((x & _LOW7) + _LOW7) | x | _LOW7)
        while zeros != 0:
            listed[min(k, last)] = 8 * j + trailing_zeros(zeros) // 8
            k += 1
            zeros &= zeros - _ONE
    for c in range(whole, n):
        if ok[c] == 0:
            listed[min(k, last)] = c
            k += 1
    return k


@njit(cache=True, nogil=True)
def _enter_fill(values, flags, counts, at, n, fill, one):  # pragma: no cover - jitted
    """The fill row of constant mode (the ring's last slot): ``fill``, valid where
    ``one`` is not 0; an invalid fill row is not listed (it is never sparse)."""
    values[at : at + n] = fill
    flags[at : at + n] = 1 if one != 0 else 0
    counts[counts.shape[0] - 1] = 0 if one != 0 else -1


@njit(cache=True, nogil=True, fastmath=FAST)
def _validity_down(dsts, ring, start, w, stride, rows):  # pragma: no cover - jitted
    """``dsts[k][c] = sum_t w[t] * flag_(k + t)[c]`` down the windows ``start[k:]`` of
    the masked ring, for the ``rows`` (1 or 2) output rows of a sweep.

    Where a window lists few invalid taps: the full weight less the invalid taps'
    weights, a few scalar updates instead of a sweep per tap (two windows at once,
    each listed column read once for both).  The columns that lose more than half of
    their weight that way are summed again tap by tap, so cancellation never costs
    more than the rounding of a sum over half the weight.
    """
    flags, counts = ring[1], ring[3]
    taps, n = w.shape[0], dsts[0].shape[0]
    few = (_few_invalid(counts, start, taps, stride, n),
           rows == 2 and _few_invalid(counts, start[1:], taps, stride, n))  # fmt: skip
    total = dsts[0].dtype.type(0)
    for t in range(taps):
        total += w[t]
    for k in range(rows):
        if few[k]:
            dsts[k][:] = total
        else:
            _flag_sum(dsts[k], flags, start[k:], w)
    _subtract_listed(dsts, ring, start, w, stride, few, rows)
    for k in range(rows):
        if few[k]:
            _exact_below(dsts[k], flags, start[k:], w, total * 0.5)


@njit(cache=True, nogil=True, fastmath=FAST)
def _subtract_listed(dsts, ring, start, w, stride, few, rows):  # pragma: no cover - jitted
    """Subtracts the listed invalid taps' weights from the windows with ``few`` of
    them; when both windows of a sweep have few, in one walk over their slots."""
    holes, counts = ring[2], ring[3]
    taps, zero = w.shape[0], w.dtype.type(0)
    if few[0] and few[1]:
        da, db = dsts
        for u in range(taps + 1):  # window 0 reads slots 0 .. taps - 1, window 1 1 .. taps
            slot = start[u] // stride
            wa, wb = w[u] if u < taps else zero, w[u - 1] if u > 0 else zero
            for j in range(counts[slot]):
                c = holes[slot, j]
                da[c] -= wa
                db[c] -= wb
        return
    for k in range(rows):
        for t in range(taps if few[k] else 0):
            slot, wt = start[k + t] // stride, w[t]
            for j in range(counts[slot]):
                dsts[k][holes[slot, j]] -= wt


@njit(cache=True, nogil=True)
def _few_invalid(counts, start, taps, stride, n):  # pragma: no cover - jitted
    """Whether the window ``start[:taps]`` lists at most one invalid tap in
    ``_HOLES_SHARE`` (no slot's list overflowed)."""
    invalid = 0
    for t in range(taps):
        k = counts[start[t] // stride]
        if k < 0:
            return False
        invalid += k
    return invalid * _HOLES_SHARE <= n * taps


@njit(cache=True, nogil=True, fastmath=FAST)
def _exact_below(dst, flags, start, w, half):  # pragma: no cover - jitted
    """Sums the flags again, tap by tap, in the columns of ``dst`` below ``half``."""
    below = 0
    for c in range(dst.shape[0]):  # vectorised (a count, not a min): one pass more
        below += dst[c] < half
    if below == 0:
        return
    for c in range(dst.shape[0]):
        if dst[c] < half:
            exact = dst.dtype.type(0)
            for t in range(w.shape[0]):
                exact += w[t] * flags[start[t] + c]
            dst[c] = exact


@njit(cache=True, nogil=True, fastmath=FAST)
def _flag_sum(dst, flags, start, w):  # pragma: no cover - jitted
    """``dst[c] = sum_t w[t] * flags[start[t] + c]`` over uint8 flags (converted to
    floats in the loop), four rows per sweep over ``dst``."""
    n = dst.shape[0]
    taps = w.shape[0]
    f = dst.dtype.type
    dst[:] = 0
    t = 0
    while t + 4 <= taps:
        a0, a1 = _row(flags, start, t, n), _row(flags, start, t + 1, n)
        a2, a3 = _row(flags, start, t + 2, n), _row(flags, start, t + 3, n)
        w0, w1, w2, w3 = w[t], w[t + 1], w[t + 2], w[t + 3]
        for c in range(n):
            dst[c] += w0 * f(a0[c]) + w1 * f(a1[c]) + w2 * f(a2[c]) + w3 * f(a3[c])
        t += 4
    while t < taps:
        a0, wt = _row(flags, start, t, n), w[t]
        for c in range(n):
            dst[c] += wt * f(a0[c])
        t += 1
